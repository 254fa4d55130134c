/* mode_text.c - the text modes of the command line.
 *
 *   qwenc MODEL --tokenize "TEXT"|-     ids of TEXT (stdin for -), space-separated, one line;
 *                                       no template, no special tokens added
 *   qwenc MODEL --detokenize "IDS"      the text of IDS (special tokens included), then a newline
 *   qwenc MODEL --prompt "TEXT" [-n N] [--system S] [--raw] [sampling] [--threads N] [--ctx N]
 *                                       Qwen2.5 chat template (default system prompt unless
 *                                       --system), generate, stream the answer to stdout;
 *                                       --raw: continue TEXT as given, no template
 *
 * The tokenizer modes need only the tokenizer files in MODEL (tokenizer.json,
 * or vocab.json + merges.txt); --prompt loads the model too. Generated text
 * goes through the streaming decoder, so a character split across tokens is
 * printed whole. stderr gets load and speed figures.
 * Exit codes: 0 ok, 1 runtime failure, 2 usage.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "cli/cli.h"
#include "engine/generate.h"
#include "infer/forward.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "runtime/pool.h"
#include "tokenizer/tokenizer.h"

#define TEXT_DEFAULT_N 50
#define TEXT_DEFAULT_CTX 4096
#define TEXT_BATCH 512

static char *read_stdin(size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    if (!b) return NULL;
    for (;;) {
        if (n == cap) {
            if (cap > SIZE_MAX / 4) {
                free(b);
                return NULL;
            }
            char *nb = realloc(b, cap * 2 + 1);
            if (!nb) {
                free(b);
                return NULL;
            }
            b = nb;
            cap *= 2;
        }
        size_t r = fread(b + n, 1, cap - n, stdin);
        if (r == 0) break;
        n += r;
    }
    if (ferror(stdin)) {
        free(b);
        return NULL;
    }
    b[n] = 0;
    *len = n;
    return b;
}

static int do_tokenize(const qw_tok *tok, const char *arg) {
    char *buf = NULL;
    size_t len;
    const char *text = arg;
    if (!strcmp(arg, "-")) {
        buf = read_stdin(&len);
        if (!buf) {
            fprintf(stderr, "qwenc: --tokenize -: cannot read stdin\n");
            return 1;
        }
        text = buf;
    } else {
        len = strlen(arg);
    }
    int32_t *ids;
    size_t n;
    qw_err err = {{0}};
    if (tok_encode(tok, text, len, &ids, &n, &err)) {
        fprintf(stderr, "qwenc: %s\n", err.msg);
        free(buf);
        return 1;
    }
    /* One buffered line: ids can be millions for a big stdin. */
    for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
    putchar('\n');
    free(ids);
    free(buf);
    return fflush(stdout) == 0 ? 0 : 1;
}

static int do_detokenize(const qw_tok *tok, const char *s) {
    int32_t *ids;
    int n;
    if (cli_parse_ids("--detokenize", s, 1, &ids, &n)) return 2;
    for (int i = 0; i < n; i++)
        if (ids[i] >= tok_vocab_size(tok) || !tok_token_bytes(tok, ids[i], NULL)) {
            fprintf(stderr, "qwenc: --detokenize: token id %d is not in the tokenizer (vocabulary %d)\n", ids[i],
                    tok_vocab_size(tok));
            free(ids);
            return 1;
        }
    char *text;
    size_t len;
    qw_err err = {{0}};
    int rc = tok_decode(tok, ids, n, 0, &text, &len, &err);
    free(ids);
    if (rc) {
        fprintf(stderr, "qwenc: %s\n", err.msg);
        return 1;
    }
    fwrite(text, 1, len, stdout);
    putchar('\n');
    free(text);
    return fflush(stdout) == 0 ? 0 : 1;
}

typedef struct stream_out {
    qw_tok_stream *st;
    int failed;
} stream_out;

static int on_token(void *user, int32_t id) {
    stream_out *so = user;
    size_t n;
    const char *s = tok_stream_feed(so->st, id, &n);
    if (n && (fwrite(s, 1, n, stdout) != n || fflush(stdout))) {
        so->failed = 1; /* stdout closed (e.g. a pipe to head): stop */
        return 1;
    }
    return 0;
}

static int do_prompt(const qw_opts *o, const char *dir, qw_tok *tok) {
    qw_err err = {{0}};
    qw_model *m = NULL;
    qw_pool *pool = NULL;
    qw_ctx *ctx = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    stream_out so = {0};
    int status = 1;

    if (kernels_init(&err)) {
        fprintf(stderr, "qwenc: %s\n", err.msg);
        return 1;
    }
    double t0 = qw_now();
    if (model_load(&m, dir, &err)) {
        fprintf(stderr, "qwenc: %s\n", err.msg);
        return 1;
    }
    if (cli_quantize(o, m)) {
        model_free(m);
        return 1;
    }
    const qw_config *cfg = &m->cfg;
    if (cfg->random_weights)
        fprintf(stderr, "qwenc: *** RANDOM WEIGHTS (qwenc synth): the output is meaningless ***\n");

    if (o->raw) {
        if (tok_encode(tok, o->prompt, strlen(o->prompt), &ids, &n, &err)) goto fail_err;
    } else {
        qw_chat_msg msgs[2];
        size_t nm = 0;
        if (o->system) msgs[nm++] = (qw_chat_msg){"system", o->system};
        msgs[nm++] = (qw_chat_msg){"user", o->prompt};
        if (chat_encode(tok, msgs, nm, 1, &ids, &n, &err)) goto fail_err;
    }
    if (n == 0) {
        fprintf(stderr, "qwenc: --prompt: the prompt is empty (with --raw, give some text)\n");
        status = 2;
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= cfg->vocab) {
            fprintf(stderr, "qwenc: token %d of the prompt is outside the model's vocabulary (%d)\n", ids[i],
                    cfg->vocab);
            goto out;
        }

    int n_ctx = o->n_ctx > 0 ? o->n_ctx : TEXT_DEFAULT_CTX;
    if (cfg->max_pos > 0 && n_ctx > cfg->max_pos) n_ctx = cfg->max_pos;
    if (n >= (size_t)n_ctx) {
        fprintf(stderr, "qwenc: the prompt is %zu tokens; the context holds %d (see --ctx)\n", n, n_ctx);
        goto out;
    }
    int max_new = o->n_predict >= 0 ? o->n_predict : TEXT_DEFAULT_N;
    if ((size_t)max_new > (size_t)n_ctx - n) {
        max_new = n_ctx - (int)n;
        fprintf(stderr, "qwenc: -n capped at %d by the context of %d tokens\n", max_new, n_ctx);
    }

    int threads = o->threads > 0 ? o->threads : pool_default_threads();
    pool = pool_create(threads);
    if (!pool) {
        fprintf(stderr, "qwenc: cannot start %d threads\n", threads);
        goto out;
    }
    ctx = ctx_create(m, 1, n_ctx, TEXT_BATCH, &err);
    if (!ctx) goto fail_err;
    if (ctx_check_finite(ctx, pool, &err)) goto fail_err;
    ctx_set_precision(ctx, (qw_precision)o->precision);
    so.st = tok_stream_new(tok, 1);
    if (!so.st) {
        fprintf(stderr, "qwenc: out of memory\n");
        goto out;
    }

    qw_sampling sp;
    if (o->sampling_set) {
        sp = o->sampling;
    } else {
        /* The model's generation_config.json, else greedy. */
        sp = sampling_default();
        sp.seed = o->sampling.seed;
        if (cfg->gen_temperature > 0) {
            sp.temperature = cfg->gen_temperature;
            if (cfg->gen_top_k > 0) sp.top_k = cfg->gen_top_k;
            if (cfg->gen_top_p > 0) sp.top_p = cfg->gen_top_p;
        }
        if (cfg->gen_repeat_penalty > 0) sp.repeat_penalty = cfg->gen_repeat_penalty;
    }
    fprintf(stderr, "qwenc: %s loaded in %.2f s; prompt %zu tokens, %d threads\n", m->name ? m->name : dir,
            qw_now() - t0, n, threads);

    qw_gen_stats st;
    memset(&st, 0, sizeof st);
    if (max_new > 0 &&
        gen_run(ctx, pool, 0, 0, ids, (int)n, max_new, &sp, opts_spec_k(o), on_token, &so, &st, &err) && !so.failed)
        goto fail_err;
    size_t tl;
    const char *tail = tok_stream_flush(so.st, &tl);
    if (!so.failed) {
        fwrite(tail, 1, tl, stdout);
        putchar('\n');
        fflush(stdout);
    }
    fprintf(stderr, "qwenc: prefill %d tokens in %.2f s (%.1f tok/s), generated %d in %.2f s (%.1f tok/s), drafts accepted %d of %d%s\n",
            st.n_prompt, st.prefill_s, st.prefill_s > 0 ? st.n_prompt / st.prefill_s : 0.0, st.n_gen, st.decode_s,
            st.decode_s > 0 ? st.n_gen / st.decode_s : 0.0, st.n_accepted, st.n_drafted,
            st.finish == QW_FINISH_LENGTH ? ", stopped at -n" : "");
    status = 0;
    goto out;
fail_err:
    fprintf(stderr, "qwenc: %s\n", err.msg);
out:
    tok_stream_free(so.st);
    free(ids);
    if (ctx) ctx_free(ctx);
    if (pool) pool_free(pool);
    model_free(m);
    return status;
}

int mode_text(const qw_opts *o) {
    char *dir = cli_model_dir(o->model);
    if (!dir) return 1;
    qw_tok *tok = NULL;
    qw_err err = {{0}};
    if (tok_load(&tok, dir, &err)) {
        fprintf(stderr, "qwenc: %s\n", err.msg);
        free(dir);
        return 1;
    }
    int rc;
    if (o->tokenize) rc = do_tokenize(tok, o->tokenize);
    else if (o->detokenize) rc = do_detokenize(tok, o->detokenize);
    else rc = do_prompt(o, dir, tok);
    tok_free(tok);
    free(dir);
    return rc;
}
