/* request.c - one generation request's lifecycle, for every transport
 * (request.h). */
#include "server/request.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/arena.h"
#include "base/log.h"
#include "engine/generate.h"
#include "server/ollama.h"
#include "grammar/grammar.h"
#include "server/infill.h"
#include "server/stopstr.h"
#include "server/toolout.h"

typedef enum { RQ_NEW, RQ_RUNNING, RQ_DONE, RQ_FAILED } rq_state;
typedef enum { C_RUNNING, C_FINISHING, C_DONE } choice_state;

/* One sequence of the answer (n > 1: several, the same prompt). */
typedef struct choice {
    qw_req *r;           /* the scheduler's handle */
    choice_state state;
    qw_tok_stream *ts;   /* text protocols: ids -> UTF-8 text ... */
    qw_stopstr stop;     /* ... -> the stop-string filter */
    int cursor;          /* tokens consumed from r */
    int n_used;          /* tokens that made the output (up to a stop string) */
    const char *finish;  /* once finishing */
    qw_abuf text;        /* the whole text (request_run) */
    size_t lp_off;       /* streamed completions' logprobs: text_offset of the next token */
    api_toolout *tools;  /* chat with tools: <tool_call> blocks -> tool_calls */
    int id_hit;          /* one of p.stop_ids came: the answer ended before it */
} choice;

struct qw_request {
    qw_arena mem;        /* this struct, the choices, text and rendered bytes */
    qw_engine *e;
    api_kind kind;
    api_req p;           /* the parsed request (prompt and stops: api.c's malloc) */
    int parsed;
    rq_state state;
    int started;         /* the START event was delivered */
    api_error err;       /* valid in RQ_FAILED */
    char id[64];
    long long created;
    choice *c;           /* [n] */
    int n;
    int rr;              /* round robin: the choice polled first */
    const char *echo;    /* echo: the prompt as text (arena) */
    size_t echo_len;
    qw_abuf piece;       /* text of the last DELTA */
    qw_abuf out;         /* rendered bytes (request_sse, request_reply) */
    /* Ollama's protocol: the name the client gave (echoed in every object). */
    char ollama_model[256];
};

static int is_ollama(api_kind k) { return k == API_OLLAMA_CHAT || k == API_OLLAMA_GENERATE; }
static int is_text(api_kind k) { return k == API_COMPLETION || k == API_CHAT || k == API_INFILL || is_ollama(k); }
static ollama_kind ollama_of(api_kind k) { return k == API_OLLAMA_CHAT ? OLLAMA_CHAT : OLLAMA_GENERATE; }

static int is_stop_id(const qw_request *q, int32_t id) {
    for (int i = 0; i < q->p.n_stop_ids; i++)
        if (q->p.stop_ids[i] == id) return 1;
    return 0;
}

/* ---- ids and seeds ----------------------------------------------------- */

static atomic_ullong g_next_id, g_next_seed;
static unsigned long long g_salt;
static pthread_once_t g_salt_once = PTHREAD_ONCE_INIT;

static void salt_init(void) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    g_salt = ((unsigned long long)now.tv_sec * 1000000000ULL + (unsigned long long)now.tv_nsec) ^
             ((unsigned long long)getpid() << 40);
}

/* splitmix64 over a per-process salt and a counter. */
static uint64_t random_seed(void) {
    pthread_once(&g_salt_once, salt_init);
    uint64_t z = g_salt + 0x9E3779B97F4A7C15ULL * (atomic_fetch_add(&g_next_seed, 1) + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static void new_id(const char *prefix, char *out, size_t n) {
    pthread_once(&g_salt_once, salt_init);
    unsigned long long k = atomic_fetch_add(&g_next_id, 1);
    unsigned long long x = (k + 1) * 0x9E3779B97F4A7C15ULL ^ g_salt;
    x ^= x >> 31;
    snprintf(out, n, "%s%016llx%08llx", prefix, x, k & 0xffffffffULL);
}

/* ---- life and death ------------------------------------------------------ */

qw_request *request_new(qw_engine *e, api_kind kind) {
    qw_arena mem;
    arena_init(&mem, REQUEST_MEM_CAP);
    qw_request *q = arena_alloc(&mem, sizeof *q);
    if (!q) {
        arena_free(&mem);
        return NULL;
    }
    memset(q, 0, sizeof *q);
    q->mem = mem;
    q->e = e;
    q->kind = kind;
    q->state = RQ_NEW;
    return q;
}

void request_free(qw_request *q) {
    if (!q) return;
    for (int i = 0; i < q->n; i++) {
        choice *c = &q->c[i];
        if (c->r) sched_req_release(c->r); /* cancels if still running */
        if (c->ts) tok_stream_free(c->ts);
        toolout_free(c->tools);
        stopstr_free(&c->stop);
    }
    if (q->parsed) api_req_free(&q->p);
    qw_arena mem = q->mem; /* q itself lives in it */
    arena_free(&mem);
}

static void fail_oom(qw_request *q) {
    api_fail(&q->err, 500, "out_of_memory", NULL, "out of memory");
    q->state = RQ_FAILED;
}

void request_cancel(qw_request *q) {
    for (int i = 0; i < q->n; i++)
        if (q->c[i].r) sched_req_cancel(q->c[i].r);
}

/* Fail the whole request (the other choices are cancelled). */
static void fail_all(qw_request *q) {
    request_cancel(q);
    q->state = RQ_FAILED;
}

static void submit_error(qw_request *q, int rc, const char *msg) {
    if (rc == QW_SCHED_EFULL) api_fail(&q->err, 503, "queue_full", NULL, "%s", msg);
    else if (rc == QW_SCHED_ESHUTDOWN) api_fail(&q->err, 503, "shutting_down", NULL, "%s", msg);
    else if (rc == QW_SCHED_EINVAL)
        api_fail(&q->err, 400, "invalid_value",
                 q->kind == API_CHAT || q->kind == API_OLLAMA_CHAT ? "messages"
                 : is_text(q->kind)                                 ? "prompt"
                                                                    : "tokens",
                 "%s", msg);
    else api_fail(&q->err, 500, "out_of_memory", NULL, "%s", msg);
}

/* The prompt as text, for echo (special tokens kept: the model saw them). */
static int make_echo(qw_request *q) {
    char *text = NULL;
    size_t len = 0;
    qw_err err;
    if (tok_decode(q->e->tok, q->p.prompt, (size_t)q->p.n_prompt, 0, &text, &len, &err) != 0) return -1;
    q->echo = arena_memdup(&q->mem, text, len + 1);
    q->echo_len = len;
    free(text);
    return q->echo ? 0 : -1;
}

int request_start(qw_request *q, const char *bytes, size_t len) {
    qw_engine *e = q->e;
    api_limits lim = {
        .tok = e->tok,
        .vocab = e->model->cfg.vocab,
        .n_ctx = e->n_ctx,
        .sampling = e->sampling,
        .completion_max_tokens = 512,
        .completion_default = 50,
        .model_id = engine_model_id(e),
        .any_model = e->any_model,
    };
    int rc;
    const char *load_call = NULL; /* Ollama's load / unload call: "load" / "unload" */
    switch (q->kind) {
    case API_SOCKET: rc = api_parse_socket(bytes, len, &lim, &q->p, &q->err); break;
    case API_STDIN: rc = api_parse_stdin(bytes, len, &lim, &q->p, &q->err); break;
    case API_OLLAMA_CHAT:
    case API_OLLAMA_GENERATE: {
        ollama_req o;
        rc = ollama_parse(ollama_of(q->kind), bytes, len, &lim, &o, &q->err);
        if (rc == 0) {
            q->p = o.req; /* taken: freed with q->p */
            snprintf(q->ollama_model, sizeof q->ollama_model, "%s", o.model);
            if (o.load_only) load_call = o.unload ? "unload" : "load";
        }
        break;
    }
    default: rc = api_parse(q->kind, bytes, len, &lim, &q->p, &q->err); break;
    }
    if (rc < 0) {
        q->state = RQ_FAILED;
        return -1;
    }
    q->parsed = 1;
    q->n = q->p.n > 0 ? q->p.n : 1;
    q->c = arena_alloc(&q->mem, (size_t)q->n * sizeof *q->c);
    if (!q->c) {
        q->n = 0;
        fail_oom(q);
        return -1;
    }
    memset(q->c, 0, (size_t)q->n * sizeof *q->c);
    for (int i = 0; i < q->n; i++) stopstr_init(&q->c[i].stop, NULL, 0);
    if (load_call) {
        /* The model is always loaded: done at once, one object. */
        q->c[0].finish = load_call;
        q->p.stream = 0;
        q->created = (long long)time(NULL);
        q->state = RQ_DONE;
        return 0;
    }
    if (is_text(q->kind)) {
        /* OpenAI semantics: without a seed, sampling differs from request
         * to request (unless the command line fixed the sampling, seed
         * included). */
        if (!q->p.seed_set && e->random_seed) q->p.sampling.seed = random_seed();
        for (int i = 0; i < q->n; i++) {
            q->c[i].ts = tok_stream_new(e->tok, 1);
            if (!q->c[i].ts) {
                fail_oom(q);
                return -1;
            }
            stopstr_init(&q->c[i].stop, (const char *const *)q->p.stop, q->p.n_stop);
        }
        if (q->p.echo && make_echo(q) != 0) {
            fail_oom(q);
            return -1;
        }
        for (int i = 0; i < q->n; i++) q->c[i].lp_off = q->echo_len;
        new_id(is_ollama(q->kind) ? "ollama-" : q->kind == API_CHAT ? "chatcmpl-" : "cmpl-", q->id, sizeof q->id);
        if (q->kind == API_CHAT && q->p.tools_mode != TOOLS_OFF) {
            api_tools t = {.mode = (tools_mode)q->p.tools_mode, .parallel = q->p.tools_parallel};
            for (int i = 0; i < q->n; i++)
                if (!(q->c[i].tools = toolout_new(&t, q->id, i))) {
                    fail_oom(q);
                    return -1;
                }
        }
    }
    q->created = (long long)time(NULL);
    qw_grammar *g = NULL;
    const qw_gvocab *gv = NULL;
    if (q->p.constraint) {
        /* the answer's one grammar, compiled while parsing (api.h:
         * api_parse_constraint); the vocabulary's trie once per server */
        qw_err err;
        gv = engine_gvocab(e, &err);
        if (!gv) {
            api_fail(&q->err, 500, "grammar_error", q->p.constraint_param, "cannot build the grammar vocabulary: %s",
                     err.msg);
            q->state = RQ_FAILED;
            return -1;
        }
        g = grammar_retain(q->p.constraint); /* released below: each scheduler request holds its own */
    }
    for (int i = 0; i < q->n; i++) {
        qw_req_params p = {
            .prompt = q->p.prompt,
            .n_prompt = q->p.n_prompt,
            .max_new = q->p.max_tokens,
            .sampling = q->p.sampling,
            .ignore_eos = q->p.ignore_eos,
            .no_spec = q->p.no_spec,
            .logprobs = q->p.logprobs,
            .top_logprobs = q->p.top_logprobs,
            /* The prompt's records once (they are the same for every choice). */
            .prompt_logprobs = i == 0 && q->p.echo && q->p.logprobs,
            .grammar = g,
            .gvocab = gv,
        };
        p.sampling.seed = q->p.sampling.seed + (uint64_t)i; /* choice i: seed + i */
        qw_err err;
        rc = sched_submit(e->sched, &p, &q->c[i].r, &err);
        if (rc != QW_SCHED_OK) {
            q->c[i].r = NULL;
            submit_error(q, rc, err.msg);
            fail_all(q);
            grammar_release(g);
            return -1;
        }
    }
    grammar_release(g); /* each scheduler request holds its own reference */
    q->state = RQ_RUNNING;
    return 0;
}

int request_streaming(const qw_request *q) { return q->p.stream; }
const api_error *request_error(const qw_request *q) { return q->state == RQ_FAILED ? &q->err : NULL; }
int request_status(const qw_request *q) { return q->state == RQ_FAILED ? q->err.status : 200; }
const char *request_id(const qw_request *q) { return q->id; }

/* ---- the event stream ---------------------------------------------------- */

/* Why the scheduler finished a request that saw no stop string and was
 * not cancelled: EOS or the limit. */
static const char *sched_finish(const qw_req_stats *st) {
    return st->finish == QW_FINISH_LENGTH ? "length" : "stop";
}

/* Decoded text through choice c's stop filter into q->piece. */
static int emit(qw_request *q, choice *c, const char *t, size_t n) {
    const char *out;
    size_t out_len;
    if (stopstr_feed(&c->stop, t, n, &out, &out_len) != 0) return -1;
    return abuf_add(&q->mem, &q->piece, out, out_len);
}

/* The scheduler has published everything of c: flush the decoder and the
 * stop filter, and decide the finish. Returns 0, 1 with q->err set (the
 * request fails), -1 when out of memory. */
static int finish_up(qw_request *q, choice *c) {
    qw_req_stats st;
    sched_req_stats(c->r, &st);
    if (st.failed) {
        api_fail(&q->err, 500, "engine_error", NULL, "the engine failed on this request: %s", st.msg);
        return 1;
    }
    if (is_text(q->kind)) {
        size_t len;
        const char *t = tok_stream_flush(c->ts, &len);
        if (emit(q, c, t, len) != 0) return -1;
        if (!c->stop.hit) {
            const char *out;
            size_t out_len;
            stopstr_flush(&c->stop, &out, &out_len);
            if (abuf_add(&q->mem, &q->piece, out, out_len) != 0) return -1;
        }
    }
    if (st.finish == QW_FINISH_CANCEL && !c->stop.hit) {
        /* Nobody reads a request its client left, and a stop string is
         * seen above: this cancel is the server shutting down. */
        if (c->n_used == 0) {
            api_fail(&q->err, 503, "shutting_down", NULL,
                     "the server is shutting down; the request was not started (retry later)");
            return 1;
        }
        c->finish = "cancelled";
        return 0;
    }
    c->finish = c->stop.hit ? "stop" : sched_finish(&st);
    return 0;
}

/* Poll choice i for up to timeout_s: fills ev with a DELTA or FINISH of it,
 * or leaves NONE. Returns -1 when the request failed (q->err set). */
static int poll_choice(qw_request *q, int i, double timeout_s, req_event *ev) {
    choice *c = &q->c[i];
    q->piece.len = 0;
    if (q->piece.data) q->piece.data[0] = '\0';
    const int32_t *toks;
    int before = c->cursor;
    int n = sched_req_wait(c->r, &c->cursor, &toks, timeout_s);
    int used = 0;
    if (is_text(q->kind)) {
        for (; used < n && !c->stop.hit && !c->id_hit; used++) {
            if (q->p.n_stop_ids && is_stop_id(q, toks[used])) {
                c->id_hit = 1; /* the answer ends here; the token is not output */
                break;
            }
            size_t len;
            const char *t = tok_stream_feed(c->ts, toks[used], &len);
            if (emit(q, c, t, len) != 0) goto oom;
        }
    } else {
        used = n;
    }
    c->n_used += used;
    int finished = 0;
    if (c->stop.hit || c->id_hit) {
        sched_req_cancel(c->r); /* the engine frees the slot within a step */
        if (c->id_hit) {
            /* flush the decoder and the stop filter: nothing else comes */
            size_t len;
            const char *t = tok_stream_flush(c->ts, &len);
            if (emit(q, c, t, len) != 0) goto oom;
            if (!c->stop.hit) {
                const char *out;
                size_t out_len;
                stopstr_flush(&c->stop, &out, &out_len);
                if (abuf_add(&q->mem, &q->piece, out, out_len) != 0) goto oom;
            }
        }
        c->finish = "stop";
        finished = 1;
    } else if (n == 0 && sched_req_done(c->r)) {
        /* done is set after the last token is published, and wait
         * returned none past the cursor: but the final tokens may have
         * raced in since; take them on the next call. */
        int more = sched_req_wait(c->r, &c->cursor, &toks, 0);
        if (more > 0) {
            c->cursor -= more;
            return 0;
        }
        int f = finish_up(q, c);
        if (f < 0) goto oom;
        if (f > 0) {
            fail_all(q);
            return -1;
        }
        finished = 1;
    }
    ev->index = i;
    if (used > 0 || q->piece.len > 0) {
        ev->kind = REQ_EV_DELTA;
        ev->text = q->piece.data ? q->piece.data : "";
        ev->text_len = q->piece.len;
        ev->tokens = toks;
        ev->n_tokens = used;
        const qw_logprob *lp = sched_req_logprobs(c->r, 0);
        ev->logprobs = lp ? lp + before : NULL;
        if (finished) c->state = C_FINISHING; /* FINISH comes next */
        return 0;
    }
    if (finished) {
        c->state = C_DONE;
        ev->kind = REQ_EV_FINISH;
        ev->finish = c->finish;
    }
    return 0;
oom:
    fail_all(q);
    fail_oom(q);
    return -1;
}

/* echo + logprobs: the echo waits for the prompt's records (computed with
 * choice 0's prompt, published with its first token or its end). */
static int echo_ready(qw_request *q) {
    if (!(q->p.echo && q->p.logprobs)) return 1;
    qw_req_stats st;
    sched_req_stats(q->c[0].r, &st);
    return st.n_gen > 0 || sched_req_done(q->c[0].r);
}

void request_next(qw_request *q, double timeout_s, req_event *ev) {
    memset(ev, 0, sizeof *ev);
    switch (q->state) {
    case RQ_NEW:
        ev->kind = REQ_EV_ERROR; /* never started */
        if (!q->err.status) api_fail(&q->err, 500, "not_started", NULL, "the request was not started");
        q->state = RQ_FAILED;
        return;
    case RQ_FAILED: ev->kind = REQ_EV_ERROR; return;
    case RQ_DONE:
        ev->kind = REQ_EV_DONE;
        ev->finish = q->c[0].finish;
        return;
    case RQ_RUNNING: break;
    }
    if (!q->started) {
        if (!echo_ready(q)) {
            const int32_t *toks;
            int cur = q->c[0].cursor;
            sched_req_wait(q->c[0].r, &cur, &toks, timeout_s); /* just wait */
            if (!echo_ready(q)) return;
        }
        q->started = 1;
        ev->kind = REQ_EV_START;
        return;
    }
    /* A choice whose last text went out: its FINISH. */
    for (int i = 0; i < q->n; i++)
        if (q->c[i].state == C_FINISHING) {
            q->c[i].state = C_DONE;
            ev->kind = REQ_EV_FINISH;
            ev->index = i;
            ev->finish = q->c[i].finish;
            return;
        }
    int first = -1;
    for (int k = 0; k < q->n; k++) {
        int i = (q->rr + k) % q->n;
        if (q->c[i].state != C_RUNNING) continue;
        if (first < 0) first = i;
        /* Several choices: look at each without waiting first. */
        if (poll_choice(q, i, q->n > 1 ? 0 : timeout_s, ev) < 0) {
            memset(ev, 0, sizeof *ev);
            ev->kind = REQ_EV_ERROR;
            return;
        }
        if (ev->kind != REQ_EV_NONE) {
            q->rr = (i + 1) % q->n;
            return;
        }
    }
    if (first < 0) {
        q->state = RQ_DONE;
        ev->kind = REQ_EV_DONE;
        ev->finish = q->c[0].finish;
        return;
    }
    if (q->n > 1 && timeout_s != 0 && poll_choice(q, first, timeout_s, ev) < 0) {
        memset(ev, 0, sizeof *ev);
        ev->kind = REQ_EV_ERROR;
    }
}

int request_run(qw_request *q, double poll_s, int (*gone)(void *), void *arg) {
    double last_check = qw_now();
    for (;;) {
        req_event ev;
        request_next(q, poll_s, &ev);
        if (ev.kind == REQ_EV_DONE || ev.kind == REQ_EV_ERROR) return 0;
        if (ev.kind == REQ_EV_DELTA && is_text(q->kind) &&
            abuf_add(&q->mem, &q->c[ev.index].text, ev.text, ev.text_len) != 0) {
            fail_all(q);
            fail_oom(q);
            return 0;
        }
        /* Tokens may flow without a pause: check the client by the clock. */
        double now = qw_now();
        if (!gone || now - last_check < poll_s) continue;
        last_check = now;
        if (gone(arg)) {
            LOG_DEBUG("request %s: the client went away; cancelling", q->id);
            request_cancel(q);
            return 1;
        }
    }
}

/* ---- usage ----------------------------------------------------------------- */

void request_usage(const qw_request *q, req_usage *u) {
    memset(u, 0, sizeof *u);
    if (q->n == 0 || !q->c[0].r) return;
    u->prompt_tokens = q->p.n_prompt; /* once: the choices share the prompt */
    for (int i = 0; i < q->n; i++) {
        if (!q->c[i].r) continue;
        qw_req_stats st;
        sched_req_stats(q->c[i].r, &st);
        u->completion_tokens += q->c[i].n_used;
        u->draft_tokens += st.n_drafted;
        u->accepted_draft_tokens += st.n_accepted;
        if (i > 0) continue;
        /* Timing and the cache: the first choice's. */
        u->cached_tokens = st.n_cached;
        u->prefill_tps = st.prefill_s > 0 ? st.n_prompt / st.prefill_s : 0;
        u->decode_tps = st.decode_s > 0 && st.n_gen > 1 ? (st.n_gen - 1) / st.decode_s : 0;
        u->elapsed_s = st.total_s;
    }
}

/* ---- logprobs in OpenAI's shapes ------------------------------------------ */

/* {"token", "logprob", "bytes"} (chat). */
static cJSON *chat_lp_item(const qw_tok *tok, int32_t id, float lp) {
    size_t n = 0;
    const char *b = tok_token_bytes(tok, id, &n);
    cJSON *o = cJSON_CreateObject();
    char *s = api_utf8_lossy(b ? b : "", n);
    cJSON_AddStringToObject(o, "token", s ? s : "");
    free(s);
    cJSON_AddNumberToObject(o, "logprob", lp);
    cJSON *arr = cJSON_AddArrayToObject(o, "bytes");
    for (size_t k = 0; k < n; k++) cJSON_AddItemToArray(arr, cJSON_CreateNumber((unsigned char)b[k]));
    return o;
}

/* chat: {"content": [{token, logprob, bytes, top_logprobs: [...]}...], "refusal": null} */
static cJSON *chat_logprobs(const qw_request *q, const qw_logprob *recs, int n) {
    cJSON *root = cJSON_CreateObject();
    cJSON *content = cJSON_AddArrayToObject(root, "content");
    for (int i = 0; i < n; i++) {
        cJSON *it = chat_lp_item(q->e->tok, recs[i].token, recs[i].logprob);
        cJSON *top = cJSON_AddArrayToObject(it, "top_logprobs");
        for (int k = 0; k < recs[i].n_top && k < q->p.top_logprobs; k++)
            cJSON_AddItemToArray(top, chat_lp_item(q->e->tok, recs[i].top_id[k], recs[i].top_lp[k]));
        cJSON_AddItemToArray(content, it);
    }
    cJSON_AddNullToObject(root, "refusal");
    return root;
}

/* completions: {"tokens", "token_logprobs", "top_logprobs", "text_offset"}
 * appended for ids[n] (recs[i] their records; null_first: the first has
 * none, as the first prompt token); *offset: text offset of ids[0],
 * advanced. */
static void completion_lp_add(const qw_request *q, cJSON *root, const int32_t *ids, const qw_logprob *recs, int n,
                              int null_first, size_t *offset) {
    cJSON *toks = cJSON_GetObjectItemCaseSensitive(root, "tokens");
    cJSON *lps = cJSON_GetObjectItemCaseSensitive(root, "token_logprobs");
    cJSON *tops = cJSON_GetObjectItemCaseSensitive(root, "top_logprobs");
    cJSON *offs = cJSON_GetObjectItemCaseSensitive(root, "text_offset");
    for (int i = 0; i < n; i++) {
        size_t bl = 0;
        const char *b = tok_token_bytes(q->e->tok, ids[i], &bl);
        char *s = api_utf8_lossy(b ? b : "", bl);
        cJSON_AddItemToArray(toks, cJSON_CreateString(s ? s : ""));
        free(s);
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)*offset));
        *offset += bl;
        if (i == 0 && null_first) {
            cJSON_AddItemToArray(lps, cJSON_CreateNull());
            cJSON_AddItemToArray(tops, cJSON_CreateNull());
            continue;
        }
        cJSON_AddItemToArray(lps, cJSON_CreateNumber(recs[i].logprob));
        cJSON *top = cJSON_CreateObject();
        for (int k = 0; k < recs[i].n_top && k < q->p.top_logprobs; k++) {
            size_t tl = 0;
            const char *tb = tok_token_bytes(q->e->tok, recs[i].top_id[k], &tl);
            char *ts = api_utf8_lossy(tb ? tb : "", tl);
            if (ts && !cJSON_GetObjectItemCaseSensitive(top, ts))
                cJSON_AddNumberToObject(top, ts, recs[i].top_lp[k]);
            free(ts);
        }
        cJSON_AddItemToArray(tops, top);
    }
}

static cJSON *completion_lp_new(void) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddArrayToObject(root, "tokens");
    cJSON_AddArrayToObject(root, "token_logprobs");
    cJSON_AddArrayToObject(root, "top_logprobs");
    cJSON_AddArrayToObject(root, "text_offset");
    return root;
}

/* The echoed prompt's records (completions), offsets from 0. */
static void completion_lp_prompt(const qw_request *q, cJSON *root, size_t *offset) {
    const qw_logprob *plp = sched_req_logprobs(q->c[0].r, 1);
    if (plp) completion_lp_add(q, root, q->p.prompt, plp, q->p.n_prompt, 1, offset);
}

/* The logprobs of choice i's generated tokens [from, from + n), or NULL. */
static cJSON *choice_logprobs(const qw_request *q, int i, const int32_t *ids, const qw_logprob *recs, int n,
                              size_t *offset, int with_prompt) {
    if (!q->p.logprobs) return NULL;
    if (q->kind == API_CHAT) return chat_logprobs(q, recs, n);
    cJSON *root = completion_lp_new();
    (void)i;
    if (with_prompt) completion_lp_prompt(q, root, offset);
    completion_lp_add(q, root, ids, recs, n, 0, offset);
    return root;
}

/* ---- rendering ------------------------------------------------------------- */

/* Append a malloc'd string (taken) to q->out; -1 if s is NULL or no memory. */
static int out_take(qw_request *q, char *s) {
    if (!s) return -1;
    int rc = abuf_add(&q->mem, &q->out, s, strlen(s));
    free(s);
    return rc;
}

static api_meta meta(const qw_request *q) {
    return (api_meta){.id = q->id, .created = q->created, .model = engine_model_id(q->e)};
}

static int sse_usage(qw_request *q, const api_meta *m) {
    if (!q->p.include_usage) return 0;
    req_usage u;
    request_usage(q, &u);
    api_usage au = {u.prompt_tokens, u.completion_tokens, u.draft_tokens, u.accepted_draft_tokens, u.cached_tokens};
    return out_take(q, api_sse_chunk(q->kind, m, NULL, NULL, 0, NULL, &au));
}

/* START: the chat role chunk, or the echoed prompt, of every choice. */
static int sse_start(qw_request *q, const api_meta *m) {
    for (int i = 0; i < q->n; i++) {
        int rc = 0;
        if (q->kind == API_CHAT) {
            rc = out_take(q, api_sse_chunk_at(API_CHAT, m, i, "assistant", NULL, 0, NULL, NULL, NULL));
        } else if (q->echo) {
            cJSON *lp = NULL;
            size_t off = 0;
            if (q->p.logprobs) {
                lp = completion_lp_new();
                completion_lp_prompt(q, lp, &off);
            }
            rc = out_take(q, api_sse_chunk_at(API_COMPLETION, m, i, NULL, q->echo, q->echo_len, NULL, lp, NULL));
        }
        if (rc != 0) return rc;
    }
    return 0;
}

/* ---- Ollama's protocol (ollama.h) ---- */

static void ollama_now(char t[40]) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ollama_time(t, &ts);
}

/* The last object's numbers (durations in ns; the model is always loaded,
 * so load_duration is 0). Ollama requests have one choice. */
static void ollama_stats_of(const qw_request *q, ollama_stats *os) {
    memset(os, 0, sizeof *os);
    os->done_reason = q->n > 0 && q->c[0].finish ? q->c[0].finish : "stop";
    if (q->n == 0 || !q->c[0].r) return;
    qw_req_stats st;
    sched_req_stats(q->c[0].r, &st);
    os->prompt_eval_count = q->p.n_prompt;
    os->eval_count = q->c[0].n_used;
    os->total_ns = (int64_t)(st.total_s * 1e9);
    os->prompt_eval_ns = (int64_t)(st.prefill_s * 1e9);
    os->eval_ns = (int64_t)(st.decode_s * 1e9);
}

static char *ollama_error_line(const qw_request *q) {
    char *j = ollama_error_json(&q->err);
    size_t n = j ? strlen(j) : 0;
    char *s = j ? realloc(j, n + 2) : NULL;
    if (!s) {
        free(j);
        return NULL;
    }
    s[n] = '\n';
    s[n + 1] = '\0';
    return s;
}

/* An event as NDJSON: a text object per DELTA, the stats object at DONE,
 * {"error": ...} at ERROR (Ollama's clients raise it). */
static int ollama_stream(qw_request *q, const req_event *ev) {
    char t[40];
    ollama_now(t);
    ollama_kind ok = ollama_of(q->kind);
    ollama_stats os;
    switch (ev->kind) {
    case REQ_EV_NONE:
    case REQ_EV_START:
    case REQ_EV_FINISH: return 0;
    case REQ_EV_DELTA:
        return ev->text_len ? out_take(q, ollama_chunk(ok, q->ollama_model, t, ev->text, ev->text_len)) : 0;
    case REQ_EV_DONE: ollama_stats_of(q, &os); return out_take(q, ollama_final(ok, q->ollama_model, t, NULL, 0, &os));
    case REQ_EV_ERROR: return out_take(q, ollama_error_line(q));
    }
    return 0;
}

/* /infill's stream (infill.h): a {"content", "stop": false} event per
 * piece of text, the whole answer's document (content "") at DONE, the
 * error at ERROR. */
static int infill_stream(qw_request *q, const req_event *ev) {
    switch (ev->kind) {
    case REQ_EV_NONE:
    case REQ_EV_START:
    case REQ_EV_FINISH: return 0;
    case REQ_EV_DELTA: return ev->text_len ? out_take(q, infill_sse_chunk(ev->text, ev->text_len)) : 0;
    case REQ_EV_DONE: {
        req_usage u;
        request_usage(q, &u);
        api_result r = {
            .finish = q->c[0].finish,
            .prompt_tokens = u.prompt_tokens,
            .gen_tokens = u.completion_tokens,
            .prefill_tps = u.prefill_tps,
            .decode_tps = u.decode_tps,
            .elapsed_s = u.elapsed_s,
        };
        return out_take(q, infill_sse_final(&r));
    }
    case REQ_EV_ERROR: {
        char *j = api_error_json(&q->err);
        int rc = j ? abuf_add(&q->mem, &q->out, "data: ", 6) : -1;
        if (rc == 0) rc = out_take(q, j), j = NULL;
        if (rc == 0) rc = abuf_add(&q->mem, &q->out, "\n\n", 2);
        free(j);
        return rc;
    }
    }
    return 0;
}

const char *request_stream_type(const qw_request *q) {
    return is_ollama(q->kind) ? "application/x-ndjson" : "text/event-stream";
}

int request_sse(qw_request *q, const req_event *ev, const char **bytes, size_t *len) {
    q->out.len = 0;
    if (is_ollama(q->kind) || q->kind == API_INFILL) {
        int orc = is_ollama(q->kind) ? ollama_stream(q, ev) : infill_stream(q, ev);
        *bytes = q->out.data ? q->out.data : "";
        *len = q->out.len;
        return orc;
    }
    api_meta m = meta(q);
    int rc = 0;
    switch (ev->kind) {
    case REQ_EV_NONE: break;
    case REQ_EV_START: rc = sse_start(q, &m); break;
    case REQ_EV_DELTA: {
        choice *c = &q->c[ev->index];
        if (c->tools) { /* the text through the tool-call parser (no logprobs) */
            int stop = 0;
            if (ev->text_len > 0) rc = out_take(q, toolout_sse_piece(c->tools, &m, ev->text, ev->text_len, &stop));
            if (stop && c->r) sched_req_cancel(c->r); /* parallel_tool_calls false: one call is the answer */
            break;
        }
        cJSON *lp = NULL;
        if (ev->logprobs && ev->n_tokens > 0) /* offsets run on from the text sent before */
            lp = choice_logprobs(q, ev->index, ev->tokens, ev->logprobs, ev->n_tokens, &q->c[ev->index].lp_off, 0);
        if (ev->text_len > 0 || lp)
            rc = out_take(q, api_sse_chunk_at(q->kind, &m, ev->index, NULL, ev->text, ev->text_len, NULL, lp, NULL));
        break;
    }
    case REQ_EV_FINISH: {
        api_toolout *t = q->c[ev->index].tools;
        if (t) rc = out_take(q, toolout_sse_flush(t, &m));
        if (rc == 0)
            rc = out_take(q, api_sse_chunk_at(q->kind, &m, ev->index, NULL, NULL, 0,
                                              t ? toolout_finish(t, ev->finish) : ev->finish, NULL, NULL));
        break;
    }
    case REQ_EV_DONE:
        rc = sse_usage(q, &m);
        if (rc == 0) rc = abuf_add(&q->mem, &q->out, API_SSE_DONE, strlen(API_SSE_DONE));
        break;
    case REQ_EV_ERROR: {
        char *j = api_error_json(&q->err);
        rc = j ? 0 : -1;
        if (rc == 0) rc = abuf_add(&q->mem, &q->out, "data: ", 6);
        if (rc == 0) rc = out_take(q, j), j = NULL;
        if (rc == 0) rc = abuf_add(&q->mem, &q->out, "\n\n", 2);
        free(j);
        if (rc == 0) rc = sse_usage(q, &m);
        if (rc == 0) rc = abuf_add(&q->mem, &q->out, API_SSE_DONE, strlen(API_SSE_DONE));
        break;
    }
    }
    *bytes = q->out.data ? q->out.data : "";
    *len = q->out.len;
    return rc;
}

char *request_error_json(api_kind kind, const api_error *e) {
    if (kind == API_SOCKET) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "error", e->message);
        char *s = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        return s;
    }
    if (kind == API_STDIN) {
        size_t n = strlen(e->message) + 8;
        char *s = malloc(n);
        if (s) snprintf(s, n, "error: %s", e->message);
        return s;
    }
    if (is_ollama(kind)) return ollama_error_json(e);
    return api_error_json(e);
}

/* The error in the protocol's style. */
static char *error_doc(const qw_request *q) { return request_error_json(q->kind, &q->err); }

/* The generated ids of a token protocol, with the socket's fields. */
static char *tokens_doc(qw_request *q) {
    const int32_t *toks;
    int cursor = 0;
    int ng = sched_req_wait(q->c[0].r, &cursor, &toks, 0);
    const char *finish = q->c[0].finish;
    char *buf = NULL;
    size_t bl = 0;
    FILE *f = open_memstream(&buf, &bl);
    if (!f) return NULL;
    if (q->kind == API_STDIN) {
        /* A cut answer must not pass for a whole one: an error line that
         * still carries the ids. */
        if (!strcmp(finish, "cancelled"))
            fprintf(f, "error: the server is shutting down; the answer was cut after %d tokens:%s", ng, ng ? " " : "");
        for (int k = 0; k < ng; k++) fprintf(f, k ? " %d" : "%d", (int)toks[k]);
    } else {
        req_usage u;
        request_usage(q, &u);
        fputs("{\"tokens\":[", f);
        for (int k = 0; k < ng; k++) fprintf(f, k ? ",%d" : "%d", (int)toks[k]);
        fprintf(f,
                "],\"prompt_tokens\":%d,\"gen_tokens\":%d,\"prefill_tps\":%.3f,\"decode_tps\":%.3f,"
                "\"elapsed_s\":%.3f,\"finish_reason\":\"%s\",\"draft_tokens\":%d,\"accepted_draft_tokens\":%d}",
                u.prompt_tokens, ng, u.prefill_tps, u.decode_tps, u.elapsed_s, finish, u.draft_tokens,
                u.accepted_draft_tokens);
    }
    fclose(f);
    return buf;
}

static char *text_doc(qw_request *q) {
    if (is_ollama(q->kind)) {
        /* One object: the whole answer with the stats (no newline). */
        char t[40];
        ollama_now(t);
        ollama_stats os;
        ollama_stats_of(q, &os);
        const qw_abuf *txt = &q->c[0].text;
        char *s = ollama_final(ollama_of(q->kind), q->ollama_model, t, txt->data ? txt->data : "", txt->len, &os);
        if (s) s[strcspn(s, "\n")] = '\0';
        return s;
    }
    req_usage u;
    request_usage(q, &u);
    api_meta m = meta(q);
    api_choice *ch = arena_alloc(&q->mem, (size_t)q->n * sizeof *ch);
    if (!ch) return NULL;
    for (int i = 0; i < q->n; i++) {
        choice *c = &q->c[i];
        qw_abuf full = {0};
        if (q->echo && (abuf_add(&q->mem, &full, q->echo, q->echo_len) != 0 ||
                        abuf_add(&q->mem, &full, c->text.data ? c->text.data : "", c->text.len) != 0)) {
            for (int k = 0; k < i; k++)
                if (ch[k].logprobs) cJSON_Delete(ch[k].logprobs);
            return NULL;
        }
        const qw_abuf *t = q->echo ? &full : &c->text;
        const int32_t *toks;
        int cursor = 0;
        sched_req_wait(c->r, &cursor, &toks, 0);
        size_t off = 0;
        const char *text = t->data ? t->data : "";
        size_t text_len = t->len;
        if (c->tools) {
            if (toolout_parse(c->tools, text, text_len) != 0) {
                for (int k = 0; k < i; k++)
                    if (ch[k].logprobs) cJSON_Delete(ch[k].logprobs);
                return NULL;
            }
            text = toolout_content(c->tools, &text_len);
        }
        ch[i] = (api_choice){
            .text = text,
            .text_len = text_len,
            .finish = c->tools ? toolout_finish(c->tools, c->finish) : c->finish,
            .logprobs = choice_logprobs(q, i, toks, sched_req_logprobs(c->r, 0), c->n_used, &off, q->echo != NULL),
        };
    }
    api_result res = {
        .prompt_tokens = u.prompt_tokens,
        .gen_tokens = u.completion_tokens,
        .draft_tokens = u.draft_tokens,
        .accepted_draft_tokens = u.accepted_draft_tokens,
        .prefill_tps = u.prefill_tps,
        .decode_tps = u.decode_tps,
        .elapsed_s = u.elapsed_s,
        .choices = ch,
        .n_choices = q->n,
        .cached_tokens = u.cached_tokens,
    };
    if (q->kind == API_INFILL) {
        res.text = ch[0].text;
        res.text_len = ch[0].text_len;
        res.finish = ch[0].finish;
        if (ch[0].logprobs) cJSON_Delete(ch[0].logprobs);
        return infill_json(&res);
    }
    char *doc = q->kind == API_CHAT ? api_chat_json(&m, &res) : api_completion_json(&m, &res);
    if (!doc || !q->c[0].tools) return doc;
    /* tool_calls into each choice's message */
    cJSON *j = cJSON_Parse(doc);
    free(doc);
    if (!j) return NULL;
    cJSON *chs = cJSON_GetObjectItem(j, "choices");
    for (int i = 0; i < q->n; i++) toolout_patch(q->c[i].tools, cJSON_GetArrayItem(chs, i));
    doc = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return doc;
}

const char *request_reply(qw_request *q, size_t *len) {
    q->out.len = 0;
    char *doc;
    if (q->state == RQ_FAILED || q->state == RQ_NEW) {
        if (q->state == RQ_NEW) api_fail(&q->err, 500, "not_started", NULL, "the request was not started");
        q->state = RQ_FAILED;
        doc = error_doc(q);
    } else if (q->state != RQ_DONE) {
        api_fail(&q->err, 500, "not_finished", NULL, "the request has not finished");
        doc = error_doc(q);
    } else {
        doc = is_text(q->kind) ? text_doc(q) : tokens_doc(q);
    }
    if (out_take(q, doc) != 0) return NULL;
    *len = q->out.len;
    return q->out.data;
}
