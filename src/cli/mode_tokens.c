/* mode_tokens.c - single-shot generation from token ids.
 *
 *   qwenc MODEL "151644 8948 198 ..." 20          (the seed's form)
 *   qwenc MODEL --tokens "IDS" [-n N] [sampling] [--threads N] [--ctx N]
 *   qwenc MODEL --tokens "IDS" --logits-out FILE
 *
 * stdout: the generated ids, space-separated, on one line (EOS not printed).
 * stderr: load time, prefill and decode speeds, time to first token.
 * This mode is greedy unless a sampling flag is given: the id form is what
 * scripts and golden tests use, so it stays deterministic by default (the
 * model's generation_config.json sampling values are not applied here).
 * --logits-out evaluates the prompt only and writes the logits of every
 * prompt position as little-endian float32, n_tokens x vocab, row-major.
 * Exit codes: 0 ok, 1 runtime failure (bad model files, I/O), 2 usage.
 */
#include <errno.h>
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

#define DEFAULT_N 20
#define DEFAULT_CTX 4096
#define PREFILL_BATCH 512
#define LOGITS_BATCH 128


typedef struct print_state {
    int n;
    double t_first;
} print_state;

static int print_token(void *user, int32_t tok) {
    print_state *ps = user;
    if (ps->n == 0) ps->t_first = qw_now();
    printf(ps->n ? " %d" : "%d", (int)tok);
    fflush(stdout);
    ps->n++;
    return 0;
}

static int write_logits(qw_ctx *ctx, qw_pool *pool, const int32_t *ids, int n_ids, FILE *f, const char *path,
                        qw_err *err) {
    int B = ctx_max_batch(ctx), vocab = ctx_model(ctx)->cfg.vocab;
    int32_t *pos = malloc((size_t)B * sizeof *pos);
    uint8_t *want = malloc((size_t)B);
    if (!pos || !want) {
        free(pos);
        free(want);
        return qw_errf(err, "out of memory");
    }
    memset(want, 1, (size_t)B);
    int rc = 0;
    for (int i = 0; i < n_ids && !rc; i += B) {
        int n = n_ids - i < B ? n_ids - i : B;
        for (int j = 0; j < n; j++) pos[j] = i + j;
        qw_batch b = {.n = n, .tokens = ids + i, .pos = pos, .slot = NULL, .want_logits = want};
        if (forward(ctx, &b, pool, err)) {
            rc = -1;
            break;
        }
        for (int r = 0; r < n && !rc; r++) {
            const float *row = ctx_logits(ctx, r);
            /* float32 little-endian: byte-swap on a big-endian host */
            const uint16_t one = 1;
            if (*(const uint8_t *)&one == 1) {
                if (fwrite(row, sizeof(float), (size_t)vocab, f) != (size_t)vocab)
                    rc = qw_errf(err, "%s: write failed: %s", path, strerror(errno));
            } else {
                for (int v = 0; v < vocab && !rc; v++) {
                    uint8_t b4[4], *src = (uint8_t *)&row[v];
                    for (int k = 0; k < 4; k++) b4[k] = src[3 - k];
                    if (fwrite(b4, 1, 4, f) != 4) rc = qw_errf(err, "%s: write failed: %s", path, strerror(errno));
                }
            }
        }
    }
    free(pos);
    free(want);
    return rc;
}

int mode_tokens(const qw_opts *o) {
    double t_start = qw_now();
    qw_err err = {{0}};
    int32_t *ids = NULL;
    int n_ids = 0;
    if (cli_parse_ids("token ids", o->tokens, 0, &ids, &n_ids)) return 2;

    int status = 1;
    char *dir = NULL;
    qw_model *m = NULL;
    qw_ctx *ctx = NULL;
    qw_pool *pool = NULL;

    if (kernels_init(&err)) {
        fprintf(stderr, "qwenc: %s\n", err.msg);
        status = 2;
        goto out;
    }
    char ebuf[1024];
    dir = cli_resolve_model(o->model, ebuf, sizeof ebuf);
    if (!dir) {
        fprintf(stderr, "qwenc: %s\n", ebuf);
        goto out;
    }
    double t0 = qw_now();
    if (model_load(&m, dir, &err)) {
        fprintf(stderr, "qwenc: %s\n", err.msg);
        goto out;
    }
    if (cli_quantize(o, m)) goto out;
    const qw_config *cfg = &m->cfg;
    for (int i = 0; i < n_ids; i++)
        if (ids[i] >= cfg->vocab) {
            fprintf(stderr, "qwenc: token id %d (position %d) is outside the model's vocabulary [0, %d)\n", ids[i], i,
                    cfg->vocab);
            status = 2;
            goto out;
        }
    int n_new = o->n_predict >= 0 ? o->n_predict : DEFAULT_N;
    int n_ctx = o->n_ctx > 0 ? o->n_ctx : DEFAULT_CTX;
    if (n_ctx > cfg->max_pos) {
        cli_warn_ctx_capped(o, cfg->max_pos, cfg->max_pos);
        n_ctx = cfg->max_pos;
    }
    int64_t need = (int64_t)n_ids + (o->logits_out ? 0 : n_new);
    if (need > n_ctx) {
        if (n_ctx < cfg->max_pos)
            fprintf(stderr, "qwenc: %d prompt tokens + %d to generate = %lld exceed the context of %d (raise --ctx, at most %d)\n",
                    n_ids, o->logits_out ? 0 : n_new, (long long)need, n_ctx, cfg->max_pos);
        else
            fprintf(stderr, "qwenc: %d prompt tokens + %d to generate = %lld exceed the model's context of %d positions\n",
                    n_ids, o->logits_out ? 0 : n_new, (long long)need, n_ctx);
        status = 2;
        goto out;
    }
    int threads = o->threads > 0 ? o->threads : pool_default_threads();
    pool = pool_create(threads);
    if (!pool) {
        fprintf(stderr, "qwenc: cannot start %d threads\n", threads);
        goto out;
    }
    /* --logits-out keeps every row's logits: smaller chunks bound that
     * buffer (128 x vocab floats) */
    int max_chunk = o->logits_out ? LOGITS_BATCH : PREFILL_BATCH;
    int batch = n_ids < max_chunk ? n_ids : max_chunk;
    ctx = ctx_create_kv(m, 1, n_ctx, batch, QW_KV_PAGE_ROWS, (qw_kv_type)o->kv_type, &err);
    if (!ctx) {
        fprintf(stderr, "qwenc: %s\n", err.msg);
        goto out;
    }
    ctx_set_precision(ctx, (qw_precision)o->precision);
    double t_loaded = qw_now();
    LOG_INFO("loaded %s in %.3f s (%d layers, hidden %d, vocab %d, %.1f MB of weights, %s); %d threads, ctx %d",
             m->name, t_loaded - t0, cfg->n_layers, cfg->hidden, cfg->vocab, (double)m->weight_bytes / 1e6,
             m->file_type[0] ? m->file_type : m->format, threads, n_ctx);
    if (cfg->random_weights)
        cli_warn("*** RANDOM WEIGHTS (qwenc synth): the output is meaningless ***");

    if (o->logits_out) {
        FILE *f = fopen(o->logits_out, "wb");
        if (!f) {
            fprintf(stderr, "qwenc: %s: cannot create: %s\n", o->logits_out, strerror(errno));
            goto out;
        }
        double t1 = qw_now();
        int rc = write_logits(ctx, pool, ids, n_ids, f, o->logits_out, &err);
        if (fclose(f) != 0 && !rc) rc = qw_errf(&err, "%s: write failed: %s", o->logits_out, strerror(errno));
        if (rc) {
            fprintf(stderr, "qwenc: %s\n", err.msg);
            goto out;
        }
        double dt = qw_now() - t1;
        cli_info("qwenc: wrote %d x %d logits to %s (prefill %.1f tok/s, load %.3f s)\n", n_ids, cfg->vocab,
                o->logits_out, dt > 0 ? n_ids / dt : 0.0, t_loaded - t0);
        status = 0;
        goto out;
    }

    qw_sampling sp = o->sampling_set ? o->sampling : sampling_default();
    print_state ps = {0, 0.0};
    qw_gen_stats st;
    if (o->warmup) {
        /* The prompt once, untimed and unprinted: the timed run below then finds
         * the weights paged in (it rewrites the cache from position 0). */
        qw_sampling greedy = sampling_default();
        greedy.temperature = 0;
        if (gen_run(ctx, pool, 0, 0, ids, n_ids, 1, &greedy, 0, NULL, NULL, &st, &err)) {
            fprintf(stderr, "qwenc: warm-up: %s\n", err.msg);
            goto out;
        }
    }
    if (gen_run(ctx, pool, 0, 0, ids, n_ids, n_new, &sp, opts_spec_k(o), print_token, &ps, &st, &err)) {
        if (ps.n) putchar('\n');
        fprintf(stderr, "qwenc: %s\n", err.msg);
        goto out;
    }
    putchar('\n');
    fflush(stdout);
    /* The first generated token needs no decode step: decode speed counts
     * the forward passes after it. */
    int n_dec = st.n_gen > 1 ? st.n_gen - 1 : 0;
    cli_info("qwenc: prefill %d tokens %.1f tok/s | decode %d tokens %.1f tok/s | load %.3f s | first token %.3f s "
            "after start | finish %s | drafts accepted %d of %d\n",
            st.n_prompt, st.prefill_s > 0 ? st.n_prompt / st.prefill_s : 0.0, st.n_gen,
            st.decode_s > 0 && n_dec ? n_dec / st.decode_s : 0.0, t_loaded - t0,
            ps.n ? ps.t_first - t_start : qw_now() - t_start,
            st.finish == QW_FINISH_STOP ? "eos" : st.finish == QW_FINISH_LENGTH ? "length" : "cancel", st.n_accepted,
            st.n_drafted);
    status = 0;
out:
    ctx_free(ctx);
    pool_free(pool);
    model_free(m);
    free(dir);
    free(ids);
    return status;
}
