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
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "cli/cli.h"
#include "engine/generate.h"
#include "grammar/grammar.h"
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

/* Read a whole file into a NUL-terminated malloc'd buffer; NULL with a
 * message on stderr naming the option and the file. */
static char *read_file(const char *opt, const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "qwenc: %s %s: %s\n", opt, path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            char *q = realloc(buf, cap);
            if (!q) {
                fprintf(stderr, "qwenc: %s %s: out of memory\n", opt, path);
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = q;
        }
        size_t r = fread(buf + n, 1, 4096, f);
        n += r;
        if (r < 4096) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        fprintf(stderr, "qwenc: %s %s: read error\n", opt, path);
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

/* The grammar of --json-schema / --grammar / --json-object, or NULL (none
 * given: *failed = 0; bad file: message on stderr, *failed = 1). */
static qw_grammar *load_constraint(const qw_opts *o, int *failed) {
    qw_grammar *g = NULL;
    qw_err err = {{0}};
    *failed = 0;
    if (o->json_object) {
        if (grammar_compile_json_object(&g, &err)) goto fail;
        return g;
    }
    const char *opt = o->json_schema ? "--json-schema" : "--grammar";
    const char *path = o->json_schema ? o->json_schema : o->grammar;
    if (!path) return NULL;
    size_t len = 0;
    char *text = read_file(opt, path, &len);
    if (!text) {
        *failed = 1;
        return NULL;
    }
    int rc;
    if (o->json_schema) {
        cJSON *schema = cJSON_ParseWithLength(text, len);
        if (!schema) {
            fprintf(stderr, "qwenc: --json-schema %s: not valid JSON\n", path);
            free(text);
            *failed = 1;
            return NULL;
        }
        rc = grammar_compile_json_schema(&g, schema, &err);
        cJSON_Delete(schema);
    } else {
        rc = grammar_compile_gbnf(&g, text, len, NULL, &err);
    }
    free(text);
    if (!rc) return g;
    fprintf(stderr, "qwenc: %s %s: %s\n", opt, path, err.msg);
    *failed = 1;
    return NULL;
fail:
    fprintf(stderr, "qwenc: %s\n", err.msg);
    *failed = 1;
    return NULL;
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
    qw_gvocab *gv = NULL;
    qw_gmatch *gm = NULL;

    /* a bad schema or grammar fails before the model loads */
    int cfailed = 0;
    qw_grammar *grammar = load_constraint(o, &cfailed);
    if (cfailed) return 2;
    if (kernels_init(&err)) {
        fprintf(stderr, "qwenc: %s\n", err.msg);
        grammar_release(grammar);
        return 1;
    }
    double t0 = qw_now();
    if (model_load(&m, dir, &err)) {
        fprintf(stderr, "qwenc: %s\n", err.msg);
        grammar_release(grammar);
        return 1;
    }
    if (cli_quantize(o, m)) {
        model_free(m);
        grammar_release(grammar);
        return 1;
    }
    const qw_config *cfg = &m->cfg;
    if (cfg->random_weights)
        cli_warn("*** RANDOM WEIGHTS (qwenc synth): the output is meaningless ***");

    if (o->raw) {
        if (tok_encode(tok, o->prompt, strlen(o->prompt), &ids, &n, &err)) goto fail_err;
    } else {
        qw_chat_msg msgs[2];
        size_t nm = 0;
        if (o->system) msgs[nm++] = (qw_chat_msg){.role = "system", .content = o->system};
        msgs[nm++] = (qw_chat_msg){.role = "user", .content = o->prompt};
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
    cli_warn_ctx_capped(o, n_ctx, cfg->max_pos);
    if (n >= (size_t)n_ctx) {
        fprintf(stderr, "qwenc: the prompt is %zu tokens; the context holds %d (see --ctx)\n", n, n_ctx);
        goto out;
    }
    int max_new = o->n_predict >= 0 ? o->n_predict : TEXT_DEFAULT_N;
    if ((size_t)max_new > (size_t)n_ctx - n) {
        max_new = n_ctx - (int)n;
        cli_warn("-n capped at %d by the context of %d tokens", max_new, n_ctx);
    }

    int threads = o->threads > 0 ? o->threads : pool_default_threads();
    pool = pool_create(threads);
    if (!pool) {
        fprintf(stderr, "qwenc: cannot start %d threads\n", threads);
        goto out;
    }
    ctx = ctx_create_kv(m, 1, n_ctx, TEXT_BATCH, QW_KV_PAGE_ROWS, (qw_kv_type)o->kv_type, &err);
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
    cli_info("qwenc: %s loaded in %.2f s; prompt %zu tokens, %d threads\n", m->name ? m->name : dir,
            qw_now() - t0, n, threads);

    if (grammar) {
        int32_t eos[QW_MAX_EOS];
        for (int i = 0; i < cfg->n_eos; i++) eos[i] = cfg->eos_ids[i];
        gv = gvocab_create(tok, cfg->vocab, eos, cfg->n_eos, &err);
        gm = gv ? gmatch_create(grammar, gv) : NULL;
        if (!gm) {
            if (gv) qw_errf(&err, "out of memory");
            goto fail_err;
        }
    }
    qw_gen_stats st;
    memset(&st, 0, sizeof st);
    if (max_new > 0 &&
        gen_run_constrained(ctx, pool, 0, 0, ids, (int)n, max_new, &sp, opts_spec_k(o), gm, on_token, &so, &st,
                            &err) &&
        !so.failed)
        goto fail_err;
    size_t tl;
    const char *tail = tok_stream_flush(so.st, &tl);
    if (!so.failed) {
        fwrite(tail, 1, tl, stdout);
        putchar('\n');
        fflush(stdout);
    }
    cli_info("qwenc: prefill %d tokens in %.2f s (%.1f tok/s), generated %d in %.2f s (%.1f tok/s), drafts accepted %d of %d%s\n",
            st.n_prompt, st.prefill_s, st.prefill_s > 0 ? st.n_prompt / st.prefill_s : 0.0, st.n_gen, st.decode_s,
            st.decode_s > 0 ? st.n_gen / st.decode_s : 0.0, st.n_accepted, st.n_drafted,
            st.finish == QW_FINISH_LENGTH ? ", stopped at -n" : "");
    status = 0;
    goto out;
fail_err:
    fprintf(stderr, "qwenc: %s\n", err.msg);
out:
    gmatch_free(gm);
    gvocab_free(gv);
    grammar_release(grammar);
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
