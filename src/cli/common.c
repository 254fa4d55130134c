/* common.c - small pieces every CLI mode shares: token-id lists from the
 * command line, and the signal set the server modes wait on. */
#include <errno.h>
#include <stdarg.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "base/log.h"
#include "cli/cli.h"
#include "model/model.h"
#include "runtime/pool.h"
#include "server/engine.h"

int cli_quantize(const qw_opts *o, qw_model *m) {
    qw_err err;
    int threads = o->threads > 0 ? o->threads : pool_default_threads();
    if (o->quant >= 0) {
        double t0 = qw_now();
        if (model_quantize(m, (qw_dtype)o->quant, threads, &err)) {
            fprintf(stderr, "qwenc: %s\n", err.msg);
            return -1;
        }
        LOG_INFO("quantized to %s in %.2f s: %.0f MB of weights", qw_dtype_name((qw_dtype)o->quant), qw_now() - t0,
                 (double)m->weight_bytes / 1e6);
        cli_warn_quant_kept(o, m);
    }
    int which = model_repack_wanted(o->precision);
    if (which && model_repack_logged(m, which, threads, &err)) {
        fprintf(stderr, "qwenc: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static int is_sep(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ','; }

int cli_parse_ids(const char *what, const char *s, int allow_empty, int32_t **out, int *n_out) {
    int cap = 16, n = 0;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    if (!ids) return -1;
    const char *p = s;
    for (;;) {
        while (is_sep(*p)) p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX || (*end && !is_sep(*end))) {
            fprintf(stderr, "qwenc: %s: bad token id at '%.20s' (expected non-negative integers separated by spaces)\n",
                    what, p);
            free(ids);
            return -1;
        }
        if (n == cap) {
            int32_t *r = realloc(ids, (size_t)(cap *= 2) * sizeof *ids);
            if (!r) {
                free(ids);
                return -1;
            }
            ids = r;
        }
        ids[n++] = (int32_t)v;
        p = end;
    }
    if (n == 0 && !allow_empty) {
        fprintf(stderr, "qwenc: %s: no token ids given\n", what);
        free(ids);
        return -1;
    }
    *out = ids;
    *n_out = n;
    return 0;
}

void cli_server_malloc_limits(void) {
#if defined(__GLIBC__) && defined(M_ARENA_MAX)
    /* glibc gives threads their own malloc arenas (up to 8 per core). A
     * server starts a thread per connection, and memory freed in one arena
     * is not reused by the next thread's: tools/soak.py (10,000 mixed
     * requests, 16 clients) measured RSS +7.5% after warm-up with the
     * default, +3.4% (old server) and +4.7% (with the gate) with two
     * arenas, +1.7% and 20 MB less with one. The engine's hot path does not
     * allocate, so one arena costs it nothing; request threads only parse
     * and print JSON. MALLOC_ARENA_MAX in the environment still wins. */
    if (!getenv("MALLOC_ARENA_MAX")) mallopt(M_ARENA_MAX, 1);
#endif
}

void cli_block_stop_signals(sigset_t *set) {
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, set, NULL);
    signal(SIGPIPE, SIG_IGN);
}

int cli_wait_stop_signal(const sigset_t *set) {
    int sig = 0;
    while (sigwait(set, &sig) != 0) {
    }
    cli_info("qwenc: %s: shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    return sig;
}

char *cli_model_dir(const char *arg) {
    char errbuf[1024];
    char *dir = cli_resolve_model(arg, errbuf, sizeof errbuf);
    if (!dir) fprintf(stderr, "qwenc: %s\n", errbuf);
    return dir;
}

void cli_info(const char *fmt, ...) {
    if (qw_log_level() > QW_LOG_INFO) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

void cli_warn(const char *fmt, ...) {
    if (qw_log_level() > QW_LOG_WARN) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "qwenc: warning: %s\n", line);
}

void cli_warn_ctx_capped(const qw_opts *o, int n_ctx_used, int model_max) {
    if (o->n_ctx > n_ctx_used)
        cli_warn("--ctx %d is more than the model's %d positions: using %d", o->n_ctx, model_max, n_ctx_used);
}

void cli_warn_quant_kept(const qw_opts *o, const qw_model *m) {
    if (o->quant >= 0 && m->n_quant_kept > 0)
        cli_warn("--quant %s: %d matrices of %s are quantized already and kept as they are", qw_dtype_name((qw_dtype)o->quant),
                 m->n_quant_kept, m->name ? m->name : "the model");
}

void cli_engine_opts(const qw_opts *o, const char *dir, qw_engine_opts *eo) {
    *eo = (qw_engine_opts){
        .model_dir = dir,
        .threads = o->threads,
        .quant = o->quant,
        .precision = o->precision,
        .kv_type = o->kv_type,
        .spec_k = opts_spec_k(o),
        .cache_mb = o->cache_mb,
        .n_ctx = o->n_ctx,
        .parallel = o->parallel,
        .queue = o->queue,
        .sampling = o->sampling_set ? &o->sampling : NULL,
    };
}

int cli_engine_open(qw_engine *e, const qw_opts *o, const qw_engine_opts *eo) {
    qw_err err;
    if (engine_open(e, eo, &err) != 0) {
        fprintf(stderr, "qwenc: %s\n", err.msg);
        return -1;
    }
    cli_warn_ctx_capped(o, e->n_ctx, e->model->cfg.max_pos);
    cli_warn_quant_kept(o, e->model);
    return 0;
}
