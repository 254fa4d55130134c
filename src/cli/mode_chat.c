/* mode_chat.c - `qwenc chat MODEL [options]` (and `qwenc run MODEL`): a
 * multi-turn chat in the terminal.
 *
 * Line editing and history come from libedit's readline API (readline(),
 * add_history(); the history is kept in ~/.qwenc_history, or
 * $QWENC_HISTORY, empty for none); when stdin is not a terminal lines are
 * read plainly, so the mode can also be scripted. Answers stream token by token through the
 * tokenizer's streaming decoder.
 *
 * The conversation's KV cache is kept between turns: each turn renders the
 * whole conversation with the chat template, finds the longest prefix already
 * in the cache (the tokens prefilled or generated so far) and prefills only
 * the rest, normally just the new user message. When the conversation no
 * longer fits the context, the oldest turns are dropped (the system prompt
 * stays) and the cache is rebuilt.
 *
 * Commands: /reset (forget the conversation), /system TEXT (new system
 * prompt, conversation reset), /quit or /exit (Ctrl-D too), /help.
 * Ctrl-C stops the current answer and returns to the prompt; at the prompt
 * it clears the line. tok/s are printed after each answer.
 *
 * Sampling: the model's generation_config.json unless sampling flags are
 * given; -n N caps an answer (default 512).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <editline/readline.h>

#include "base/log.h"
#include "cli/cli.h"
#include "engine/generate.h"
#include "infer/forward.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "runtime/pool.h"
#include "tokenizer/tokenizer.h"

#define CHAT_DEFAULT_N 512
#define CHAT_DEFAULT_CTX 4096
#define CHAT_BATCH 256

static volatile sig_atomic_t g_interrupted;

static void on_sigint(int sig) {
    (void)sig;
    g_interrupted = 1;
}

typedef struct msg {
    char *role;
    char *content;
} msg;

typedef struct chat {
    const qw_model *m;
    qw_tok *tok;
    qw_ctx *ctx;
    qw_pool *pool;
    qw_sampling sp;
    int spec_k;            /* speculative drafts per step (gen_run) */
    int max_new;
    int n_ctx;
    char *system;          /* NULL = the template's default */
    msg *msgs;             /* user/assistant turns */
    int n_msgs, cap_msgs;
    int32_t *cache;        /* [n_ctx] tokens whose K/V are in slot 0 */
    int n_cache;
    /* the answer being generated */
    qw_tok_stream *stream;
    int32_t *gen;          /* [max_new] generated ids */
    int n_gen;
    char *answer;          /* decoded text so far */
    size_t answer_len, answer_cap;
    int tty_out;
} chat;

static int append_answer(chat *c, const char *s, size_t n) {
    if (c->answer_len + n + 1 > c->answer_cap) {
        size_t cap = c->answer_cap ? c->answer_cap * 2 : 1024;
        while (cap < c->answer_len + n + 1) cap *= 2;
        char *a = realloc(c->answer, cap);
        if (!a) return -1;
        c->answer = a;
        c->answer_cap = cap;
    }
    memcpy(c->answer + c->answer_len, s, n);
    c->answer_len += n;
    c->answer[c->answer_len] = 0;
    return 0;
}

static int on_token(void *user, int32_t id) {
    chat *c = user;
    if (c->n_gen < c->max_new) c->gen[c->n_gen++] = id;
    size_t n = 0;
    const char *s = tok_stream_feed(c->stream, id, &n);
    if (n) {
        fwrite(s, 1, n, stdout);
        fflush(stdout);
        if (append_answer(c, s, n)) return 1;
    }
    return g_interrupted ? 1 : 0;
}

static void msgs_clear(chat *c) {
    for (int i = 0; i < c->n_msgs; i++) {
        free(c->msgs[i].role);
        free(c->msgs[i].content);
    }
    c->n_msgs = 0;
}

static int msgs_push(chat *c, const char *role, const char *content) {
    if (c->n_msgs == c->cap_msgs) {
        int cap = c->cap_msgs ? c->cap_msgs * 2 : 16;
        msg *m = realloc(c->msgs, (size_t)cap * sizeof *m);
        if (!m) return -1;
        c->msgs = m;
        c->cap_msgs = cap;
    }
    msg *m = &c->msgs[c->n_msgs];
    m->role = strdup(role);
    m->content = strdup(content);
    if (!m->role || !m->content) {
        free(m->role);
        free(m->content);
        return -1;
    }
    c->n_msgs++;
    return 0;
}

static void msgs_drop_front(chat *c, int n) {
    for (int i = 0; i < n; i++) {
        free(c->msgs[i].role);
        free(c->msgs[i].content);
    }
    memmove(c->msgs, c->msgs + n, (size_t)(c->n_msgs - n) * sizeof *c->msgs);
    c->n_msgs -= n;
}

/* The conversation as template input: the system prompt (if set; else
 * the template's own default, e.g. Qwen2.5's), then the turns. Zeroed:
 * no tool calls, no reasoning. */
static int render(chat *c, int32_t **ids, size_t *n, qw_err *err) {
    qw_chat_msg *cm = calloc((size_t)c->n_msgs + 1, sizeof *cm);
    if (!cm) return qw_errf(err, "chat: out of memory");
    size_t k = 0;
    if (c->system) {
        cm[k].role = "system";
        cm[k++].content = c->system;
    }
    for (int i = 0; i < c->n_msgs; i++, k++) {
        cm[k].role = c->msgs[i].role;
        cm[k].content = c->msgs[i].content;
    }
    int rc = chat_encode(c->tok, cm, k, 1, ids, n, err);
    free(cm);
    return rc;
}

static double rate(int n, double s) { return s > 0 ? n / s : 0; }

/* One turn: the user's text in, the answer streamed out. Returns 0, or -1
 * when the turn could not run (message printed; the chat goes on). */
static int turn(chat *c, const char *text) {
    qw_err err = {{0}};
    int32_t *ids = NULL;
    size_t n = 0;
    if (msgs_push(c, "user", text)) {
        fprintf(stderr, "qwenc chat: out of memory\n");
        return -1;
    }
    /* Fit the context: drop the oldest turns (two messages at a time). */
    for (;;) {
        free(ids);
        ids = NULL;
        if (render(c, &ids, &n, &err)) {
            fprintf(stderr, "qwenc chat: %s\n", err.msg);
            msgs_drop_front(c, c->n_msgs); /* keep nothing half-rendered */
            c->n_cache = 0;
            return -1;
        }
        if ((int64_t)n + 1 <= c->n_ctx) break;
        if (c->n_msgs <= 1) {
            fprintf(stderr, "qwenc chat: that message is %zu tokens: more than the context of %d (raise --ctx)\n",
                    n, c->n_ctx);
            free(ids);
            c->n_msgs--;
            free(c->msgs[c->n_msgs].role);
            free(c->msgs[c->n_msgs].content);
            return -1;
        }
        msgs_drop_front(c, c->n_msgs >= 3 ? 2 : 1);
        fprintf(stderr, "[the conversation outgrew the context of %d tokens: oldest turn dropped]\n", c->n_ctx);
    }
    int max_new = c->max_new;
    if ((int64_t)n + max_new > c->n_ctx) max_new = c->n_ctx - (int)n;

    /* Reuse the cached prefix; at least one token must be evaluated. */
    int keep = 0;
    while (keep < c->n_cache && keep < (int)n && c->cache[keep] == ids[keep]) keep++;
    if (keep == (int)n) keep--;

    c->n_gen = 0;
    c->answer_len = 0;
    if (c->answer) c->answer[0] = 0;
    tok_stream_reset(c->stream);
    g_interrupted = 0;
    qw_gen_stats st;
    int rc = gen_run(c->ctx, c->pool, 0, keep, ids + keep, (int)n - keep, max_new, &c->sp, c->spec_k, on_token, c, &st, &err);
    size_t tail = 0;
    const char *rest = tok_stream_flush(c->stream, &tail);
    if (tail) {
        fwrite(rest, 1, tail, stdout);
        append_answer(c, rest, tail);
    }
    if (rc) {
        fprintf(stderr, "\nqwenc chat: %s\n", err.msg);
        c->n_cache = 0;
        free(ids);
        c->n_msgs--;
        free(c->msgs[c->n_msgs].role);
        free(c->msgs[c->n_msgs].content);
        return -1;
    }
    /* The cache now holds the prompt and every generated token but the last
     * (gen_run samples it and stops without evaluating it). */
    memcpy(c->cache, ids, n * sizeof *ids);
    int ng = c->n_gen > 0 ? c->n_gen - 1 : 0;
    memcpy(c->cache + n, c->gen, (size_t)ng * sizeof *c->gen);
    c->n_cache = (int)n + ng;
    free(ids);

    if (msgs_push(c, "assistant", c->answer ? c->answer : "")) fprintf(stderr, "qwenc chat: out of memory\n");
    const char *why = st.finish == QW_FINISH_CANCEL ? " [stopped]"
                      : st.finish == QW_FINISH_LENGTH ? " [length limit]" : "";
    fprintf(stdout, "%s\n", why);
    fflush(stdout);
    fprintf(stderr, "%s[%d tokens, %.1f tok/s | prompt %d new tokens (%d cached), %.1f tok/s]%s\n",
            c->tty_out ? "\x1b[2m" : "", st.n_gen, rate(st.n_gen > 1 ? st.n_gen - 1 : st.n_gen, st.decode_s),
            st.n_prompt, keep, rate(st.n_prompt, st.prefill_s), c->tty_out ? "\x1b[0m" : "");
    return 0;
}

static void help(void) {
    fputs("commands: /reset  forget the conversation\n"
          "          /system TEXT  set the system prompt (and reset)\n"
          "          /quit  leave (or Ctrl-D)\n"
          "Ctrl-C stops an answer.\n", stderr);
}

/* Where the line history is kept between sessions: $QWENC_HISTORY (empty:
 * nowhere), else ~/.qwenc_history. malloc'd or NULL. */
static char *history_file(void) {
    const char *e = getenv("QWENC_HISTORY");
    if (e) return *e ? strdup(e) : NULL;
    const char *home = getenv("HOME");
    if (!home || !*home) return NULL;
    size_t n = strlen(home) + sizeof "/.qwenc_history";
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/.qwenc_history", home);
    return p;
}

/* A line of input (malloc'd, no newline), or NULL at end of input.
 * *interrupted = 1 when Ctrl-C ended the read. */
static char *read_line(int tty, int *interrupted) {
    *interrupted = 0;
    if (tty) {
        g_interrupted = 0;
        char *line = readline(">>> ");
        if (!line && g_interrupted) {
            *interrupted = 1;
            g_interrupted = 0;
        }
        return line;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, stdin);
    if (n < 0) {
        free(line);
        return NULL;
    }
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
    return line;
}

int mode_chat(const qw_opts *o) {
    int status = 1;
    qw_err err = {{0}};
    chat c;
    memset(&c, 0, sizeof c);
    qw_model *m = NULL;
    char *dir = NULL;
    char ebuf[1024];

    if (kernels_init(&err)) {
        fprintf(stderr, "qwenc chat: %s\n", err.msg);
        return 1;
    }
    dir = cli_resolve_model(o->model, ebuf, sizeof ebuf);
    if (!dir) {
        fprintf(stderr, "qwenc chat: %s\n", ebuf);
        return 1;
    }
    double t0 = qw_now();
    if (model_load(&m, dir, &err)) {
        fprintf(stderr, "qwenc chat: %s\n", err.msg);
        goto out;
    }
    if (cli_quantize(o, m)) goto out;
    if (tok_load(&c.tok, dir, &err)) {
        fprintf(stderr, "qwenc chat: %s (chat needs the model's tokenizer)\n", err.msg);
        goto out;
    }
    const qw_config *cfg = &m->cfg;
    c.m = m;
    c.max_new = o->n_predict >= 0 ? o->n_predict : CHAT_DEFAULT_N;
    if (c.max_new < 1) c.max_new = 1;
    c.n_ctx = o->n_ctx > 0 ? o->n_ctx : CHAT_DEFAULT_CTX;
    if (c.n_ctx > cfg->max_pos) c.n_ctx = cfg->max_pos;
    cli_warn_ctx_capped(o, c.n_ctx, cfg->max_pos);
    int threads = o->threads > 0 ? o->threads : pool_default_threads();
    /* The workers inherit a mask blocking SIGINT, so Ctrl-C always reaches
     * this thread: it interrupts readline() and is seen by the token
     * callback (a worker taking it would leave readline() blocked). */
    sigset_t sigint_set, old_mask;
    sigemptyset(&sigint_set);
    sigaddset(&sigint_set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigint_set, &old_mask);
    c.pool = pool_create(threads);
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    c.ctx = c.pool ? ctx_create_kv(m, 1, c.n_ctx, CHAT_BATCH, QW_KV_PAGE_ROWS, (qw_kv_type)o->kv_type, &err) : NULL;
    if (c.ctx) ctx_set_precision(c.ctx, (qw_precision)o->precision);
    if (c.ctx && ctx_check_finite(c.ctx, c.pool, &err)) {
        fprintf(stderr, "qwenc chat: %s\n", err.msg);
        goto out;
    }
    c.cache = malloc((size_t)c.n_ctx * sizeof *c.cache);
    c.gen = malloc((size_t)c.max_new * sizeof *c.gen);
    c.stream = tok_stream_new(c.tok, 1);
    if (!c.pool || !c.ctx || !c.cache || !c.gen || !c.stream) {
        fprintf(stderr, "qwenc chat: %s\n", c.pool && !c.ctx ? err.msg : "out of memory");
        goto out;
    }
    if (o->system && !(c.system = strdup(o->system))) goto out;
    c.spec_k = opts_spec_k(o);
    if (o->sampling_set) c.sp = o->sampling;
    else {
        c.sp = sampling_default();
        c.sp.temperature = cfg->gen_temperature;
        c.sp.top_k = cfg->gen_top_k;
        c.sp.top_p = cfg->gen_top_p > 0 ? cfg->gen_top_p : 1.0f;
        c.sp.repeat_penalty = cfg->gen_repeat_penalty > 0 ? cfg->gen_repeat_penalty : 1.0f;
        c.sp.seed = (uint64_t)time(NULL);
    }

    int tty_in = isatty(0);
    c.tty_out = isatty(1);
    cli_info("qwenc chat: %s (%d layers, hidden %d, %s) loaded in %.1f s; %d threads, context %d\n",
            m->name, cfg->n_layers, cfg->hidden, m->file_type[0] ? m->file_type : m->format, qw_now() - t0, threads, c.n_ctx);
    if (cfg->random_weights)
        cli_warn("chat: *** RANDOM WEIGHTS (qwenc synth): the answers are meaningless ***");
    if (c.sp.temperature == 0) cli_info("qwenc chat: sampling: greedy\n");
    else
        cli_info("qwenc chat: sampling: temperature %.2f, top-k %d, top-p %.2f, repeat penalty %.2f\n",
                (double)c.sp.temperature, c.sp.top_k, (double)c.sp.top_p, (double)c.sp.repeat_penalty);
    cli_info("Type a message. /help for commands, Ctrl-C stops an answer, Ctrl-D or /quit leaves.\n");

    struct sigaction sa, old_sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: Ctrl-C ends a blocking read */
    sigaction(SIGINT, &sa, &old_sa);
    char *hist_path = NULL;
    if (tty_in) {
        rl_catch_signals = 0; /* our handler, not libedit's */
        using_history();
        stifle_history(1000);
        hist_path = history_file();
        if (hist_path) read_history(hist_path); /* absent on first use: fine */
    }

    for (;;) {
        int intr = 0;
        char *line = read_line(tty_in, &intr);
        if (!line) {
            if (intr) {
                fputs("^C (Ctrl-D or /quit leaves)\n", stderr);
                continue;
            }
            if (tty_in) fputc('\n', stderr);
            status = 0;
            break;
        }
        char *s = line;
        while (*s == ' ' || *s == '\t') s++;
        size_t len = strlen(s);
        while (len && (s[len - 1] == ' ' || s[len - 1] == '\t')) s[--len] = 0;
        if (!*s) {
            free(line);
            continue;
        }
        if (tty_in) add_history(s);
        if (s[0] == '/') {
            if (!strcmp(s, "/quit") || !strcmp(s, "/exit") || !strcmp(s, "/bye")) {
                free(line);
                status = 0;
                break;
            } else if (!strcmp(s, "/reset") || !strcmp(s, "/clear")) {
                msgs_clear(&c);
                fputs("[conversation reset]\n", stderr);
            } else if (!strncmp(s, "/system", 7) && (s[7] == 0 || s[7] == ' ')) {
                const char *t = s + 7;
                while (*t == ' ') t++;
                free(c.system);
                c.system = *t ? strdup(t) : NULL;
                msgs_clear(&c);
                fprintf(stderr, "[system prompt %s; conversation reset]\n", *t ? "set" : "back to the default");
            } else if (!strcmp(s, "/help") || !strcmp(s, "/?")) {
                help();
            } else {
                fprintf(stderr, "unknown command %s\n", s);
                help();
            }
            free(line);
            continue;
        }
        turn(&c, s);
        free(line);
    }
    sigaction(SIGINT, &old_sa, NULL);
    if (hist_path && write_history(hist_path) != 0)
        LOG_DEBUG("chat: cannot save the history to %s", hist_path);
    free(hist_path);

out:
    msgs_clear(&c);
    free(c.msgs);
    free(c.system);
    free(c.cache);
    free(c.gen);
    free(c.answer);
    tok_stream_free(c.stream);
    ctx_free(c.ctx);
    pool_free(c.pool);
    tok_free(c.tok);
    model_free(m);
    free(dir);
    return status;
}
