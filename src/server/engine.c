/* engine.c - open and close the serving engine (see engine.h). */
#include "server/engine.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "grammar/grammar.h"
#include "kernels/kernels.h"

qw_sampling engine_default_sampling(const qw_config *cfg, const qw_sampling *cli) {
    if (cli) return *cli;
    qw_sampling s = sampling_default();
    if (cfg->gen_temperature > 0) {
        s.temperature = cfg->gen_temperature;
        if (cfg->gen_top_p > 0) s.top_p = cfg->gen_top_p;
        if (cfg->gen_top_k > 0) s.top_k = cfg->gen_top_k;
    }
    if (cfg->gen_repeat_penalty > 0) s.repeat_penalty = cfg->gen_repeat_penalty;
    return s;
}

/* The prefix cache budget: cache_mb if given, else room for `seqs`
 * sequences of n_ctx tokens, at most 1/8 of physical memory. */
static int64_t engine_cache_bytes(long cache_mb, int64_t per_token, int seqs, int n_ctx) {
    if (cache_mb >= 0) return (int64_t)cache_mb << 20;
    double want = (double)per_token * seqs * n_ctx;
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    if (pages > 0 && psize > 0 && want > (double)pages * psize / 8) want = (double)pages * psize / 8;
    return (int64_t)want;
}

int engine_open(qw_engine *e, const qw_engine_opts *o, qw_err *err) {
    memset(e, 0, sizeof *e);
    pthread_mutex_init(&e->gvocab_mu, NULL);
    e->gvocab_mu_init = 1;
    if (kernels_init(err) != 0) return -1;
    if (model_load(&e->model, o->model_dir, err) != 0) goto fail;
    if (o->quant >= 0) {
        double t0 = qw_now();
        if (model_quantize(e->model, (qw_dtype)o->quant, o->threads > 0 ? o->threads : pool_default_threads(), err))
            goto fail;
        LOG_INFO("quantized to %s in %.2f s: %.0f MB of weights", qw_dtype_name((qw_dtype)o->quant), qw_now() - t0,
                 (double)e->model->weight_bytes / 1e6);
    }
    int repack = model_repack_wanted(o->precision);
    if (repack && model_repack_logged(e->model, repack, o->threads > 0 ? o->threads : pool_default_threads(), err))
        goto fail;
    const qw_config *cfg = &e->model->cfg;
    if (cfg->random_weights)
        LOG_WARN("RANDOM WEIGHTS: %s is a synthetic model with random weights; its output is noise",
                 o->model_dir);
    if (tok_load(&e->tok, o->model_dir, err) != 0) {
        if (o->need_tokenizer) goto fail;
        e->tok = NULL;
    }
    int n_ctx = o->n_ctx > 0 ? o->n_ctx : 4096;
    if (cfg->max_pos > 0 && n_ctx > cfg->max_pos) n_ctx = cfg->max_pos;
    e->n_ctx = n_ctx;
    int threads = o->threads > 0 ? o->threads : pool_default_threads();
    e->pool = pool_create(threads);
    if (!e->pool) {
        qw_errf(err, "cannot start %d threads", threads);
        goto fail;
    }
    int max_batch = o->max_batch > 0 ? o->max_batch : 512;
    e->ctx = ctx_create_kv(e->model, o->parallel, n_ctx, max_batch, QW_KV_PAGE_ROWS, (qw_kv_type)o->kv_type, err);
    if (!e->ctx) goto fail;
    if (ctx_check_finite(e->ctx, e->pool, err)) goto fail;
    ctx_set_precision(e->ctx, (qw_precision)o->precision);
    int64_t cache_bytes = engine_cache_bytes(o->cache_mb, ctx_kv_bytes_per_token(e->ctx),
                                             o->parallel > 8 ? o->parallel : 8, n_ctx);
    qw_sched_params sp = {.n_slots = o->parallel, .queue_cap = o->queue, .prefill_chunk = 0,
                            .spec_k = o->spec_k, .cache_bytes = cache_bytes};
    e->sched = sched_create(e->ctx, e->pool, &sp, err);
    if (!e->sched) goto fail;
    /* A folder name is bytes: keep the id printable (it goes into JSON). */
    const char *id = o->model_id && o->model_id[0] ? o->model_id
                     : e->model->name && e->model->name[0] ? e->model->name
                                                           : "qwenc";
    snprintf(e->model_id, sizeof e->model_id, "%s", id);
    e->any_model = o->any_model;
    for (size_t i = 0; e->model_id[i]; i++)
        if ((unsigned char)e->model_id[i] < 0x20 || (unsigned char)e->model_id[i] >= 0x80) e->model_id[i] = '_';
    e->sampling = engine_default_sampling(cfg, o->sampling);
    e->random_seed = o->sampling == NULL;
    LOG_INFO("engine: %s, %d slots x %d context, batch %d, %d threads, speculative drafts %d, "
             "KV %.2f KB per token (%s) in pages of %d, prefix cache %.0f MB",
             e->model->name ? e->model->name : "model", o->parallel, n_ctx, max_batch, threads, o->spec_k,
             (double)ctx_kv_bytes_per_token(e->ctx) / 1024, qw_kv_type_name(ctx_kv_type(e->ctx)), QW_KV_PAGE_ROWS, (double)cache_bytes / (1 << 20));
    return 0;
fail:
    engine_close(e, 0);
    return -1;
}

void engine_close(qw_engine *e, double grace_s) {
    if (e->sched) sched_stop(e->sched, grace_s);
    if (e->sched) sched_free(e->sched);
    if (e->ctx) ctx_free(e->ctx);
    if (e->pool) pool_free(e->pool);
    if (e->gvocab) gvocab_free(e->gvocab);
    if (e->tok) tok_free(e->tok);
    if (e->model) model_free(e->model);
    if (e->gvocab_mu_init) pthread_mutex_destroy(&e->gvocab_mu);
    memset(e, 0, sizeof *e);
}

const struct qw_gvocab *engine_gvocab(qw_engine *e, qw_err *err) {
    if (!e->tok) {
        qw_errf(err, "the model has no tokenizer: constrained output needs one");
        return NULL;
    }
    pthread_mutex_lock(&e->gvocab_mu);
    if (!e->gvocab) {
        const qw_config *cfg = &e->model->cfg;
        double t0 = qw_now();
        e->gvocab = gvocab_create(e->tok, cfg->vocab, cfg->eos_ids, cfg->n_eos, err);
        if (e->gvocab) LOG_INFO("grammar vocabulary built in %.2f s", qw_now() - t0);
    }
    const struct qw_gvocab *v = e->gvocab;
    pthread_mutex_unlock(&e->gvocab_mu);
    return v;
}

const char *engine_model_id(const qw_engine *e) { return e->model_id; }
