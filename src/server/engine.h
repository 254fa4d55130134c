/* engine.h - everything a server needs, opened once: model, tokenizer,
 * thread pool, KV context and the scheduler that owns them while it runs.
 *
 * Used by the HTTP, Unix socket and stdin servers (src/cli/mode_*.c). The
 * scheduler's engine thread is the only user of model, pool and ctx after
 * engine_open(); the tokenizer is read-only and shared by every thread.
 */
#ifndef QW_ENGINE_H
#define QW_ENGINE_H

#include <pthread.h>

#include "base/err.h"
#include "engine/sched.h"
#include "grammar/grammar.h"
#include "infer/forward.h"
#include "model/model.h"
#include "runtime/pool.h"
#include "sample/sampler.h"
#include "tokenizer/tokenizer.h"

typedef struct qw_engine_opts {
    const char *model_dir;
    int threads;        /* 0 = physical cores */
    int n_ctx;          /* 0 = 4096; capped at the model's max_position_embeddings */
    int parallel;       /* slots */
    int queue;          /* waiting requests */
    int max_batch;      /* tokens per forward step; 0 = default (512) */
    int need_tokenizer; /* 1: fail if the folder has no tokenizer */
    int quant;          /* qw_dtype to quantize to at load (QW_Q8_0), or -1 */
    int precision;      /* qw_precision of the forward passes (0 = fast) */
    int kv_type;        /* qw_kv_type of the KV cache (0 = f32) */
    int spec_k;         /* speculative decoding: most n-gram drafts per step; 0 = off */
    long cache_mb;      /* prefix cache (sched.h) budget in MB; 0 = off; < 0 = default:
                           room for max(parallel, 8) x n_ctx tokens of KV, at most 1/8
                           of the machine's physical memory */
    const qw_sampling *sampling; /* CLI sampling, or NULL for the model's defaults */
    const char *model_id; /* the name clients see (--alias, or a hub repo id); NULL: the
                           * GGUF's general.name, else the folder / file name */
    int any_model;        /* 1: requests may name any model (else 404 model_not_found) */
} qw_engine_opts;

typedef struct qw_engine {
    qw_model *model;
    qw_tok *tok;        /* NULL if not needed and not present */
    qw_pool *pool;
    qw_ctx *ctx;
    qw_sched *sched;
    qw_sampling sampling; /* request defaults */
    int random_seed;      /* 1: a request without "seed" gets a fresh random one
                           * (no sampling flags on the command line) */
    int n_ctx;
    char model_id[256];   /* engine_model_id() */
    int any_model;        /* qw_engine_opts.any_model */
    /* The vocabulary as bytes for constrained sampling, built on first use
     * (engine_gvocab; ~0.2 s for Qwen's vocabulary) and shared. */
    pthread_mutex_t gvocab_mu;
    int gvocab_mu_init;
    struct qw_gvocab *gvocab;
} qw_engine;

/* Open everything. Returns 0, or -1 with a message (and nothing left open). */
int engine_open(qw_engine *e, const qw_engine_opts *o, qw_err *err);

/* Stop the scheduler (grace_s seconds for running requests, then cancel),
 * then free everything. Safe on a zeroed or partly opened engine. */
void engine_close(qw_engine *e, double grace_s);

/* The name clients see for the served model (/v1/models, "model" in
 * responses): qw_engine_opts.model_id, else the model's name (a GGUF's
 * general.name, else the folder or file name), printable ASCII (other bytes
 * become '_'), borrowed from e. */
const char *engine_model_id(const qw_engine *e);

/* The shared byte vocabulary for grammars (grammar.h): the tokenizer's
 * tokens up to the model's vocab, the model's EOS ids ending generation.
 * Built on the first call (thread-safe); NULL with a message when the
 * engine has no tokenizer or memory is short. */
const struct qw_gvocab *engine_gvocab(qw_engine *e, qw_err *err);

/* Request defaults when a request names no sampling field: the CLI's flags
 * if given, else the model's generation_config.json, else greedy. */
qw_sampling engine_default_sampling(const qw_config *cfg, const qw_sampling *cli);

#endif
