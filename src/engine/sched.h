/* sched.h - the continuous-batching scheduler: one engine thread, many requests.
 *
 * Modelled on llama.cpp's server (tools/server: server-queue + slots): the
 * threads that talk to clients never touch the model. They submit requests
 * to a bounded queue; one engine thread owns the model context (KV cache of
 * n_slots sequences), the samplers and the slots, and runs this loop:
 *
 *   1. admit queued requests into free slots (FIFO), drop cancelled ones;
 *   2. build ONE batch: one decode token for every slot that is generating,
 *      then prompt chunks of slots that are still prefilling, up to the
 *      batch capacity (a long prompt is split over several steps so that
 *      it does not stall the others);
 *   3. forward() once;
 *   4. sample per slot with the request's own seeded sampler, append the
 *      token to the request's output, finish on EOS, the token limit, the
 *      end of the context or cancellation.
 *
 * Speculative decoding (spec_k > 0): a generating slot's entry may carry,
 * after its decode token, up to spec_k tokens drafted from n-grams of its
 * own sequence (draft.h), each with logits. Rows are sampled in order with
 * the request's sampler; a draft is accepted when the sampled token equals
 * it, and the first sampled token that differs ends the run (it is emitted
 * too). The slot's next position then moves back past the rejected drafts,
 * whose cache entries are overwritten later. Since forward() is batch
 * invariant, row j's logits are bit for bit those plain decoding computes
 * after the accepted tokens, and the sampler draws from its RNG exactly once
 * per emitted token in the same order, so the output is the plain output,
 * greedy and seeded sampling alike.
 *
 * Prefix cache (cache_bytes > 0; infer/kvcache.h): when a request gets a
 * slot, the longest run of full KV pages already computed for the same
 * leading tokens (by a running request or one kept after its end) is
 * mapped into the slot, never the whole prompt, and only the rest is
 * prefilled. The remaining full pages of the prompt are claimed at once, so
 * a request admitted meanwhile with the same prefix waits for them rather
 * than computing them too (8 users with one system prompt prefill it
 * once). When a request ends, the full pages of its confirmed positions
 * (prompt and output) stay cached, least recently used dropped first past
 * cache_bytes. Since a position's KV depends only on the tokens up to it,
 * a hit changes no bit of the logits.
 *
 * The scheduler deals in token ids only: text, stop strings and UTF-8 are
 * the business of the consumer (the servers), which cancels a request with
 * sched_req_cancel() when it has seen a stop string.
 *
 * A request's output does not depend on what else runs: each request has
 * its own seeded sampler, and forward() computes every batch row on its own.
 * tests/unit/test_sched.c checks both: logits are bit-identical across
 * batches of any size, a lone decode token included (the matmul kernels
 * compute every output row with the same operations for any batch; see
 * kernels.h), and the same requests give the same tokens alone and among 7
 * others.
 *
 * Output channel: the engine appends generated tokens to a per-request
 * buffer allocated at submit time (never reallocated), and signals a
 * condition variable; the consumer reads with sched_req_wait() and its own
 * cursor. Tokens once published never change, so the consumer may read
 * them without a lock after sched_req_wait() returned them.
 *
 * Thread safety: every function here may be called from any thread, except
 * that one qw_req handle must be used by one consumer thread at a time.
 *
 * Manual mode (qw_sched_params.manual = 1): no engine thread is started;
 * the caller runs the engine loop itself, one iteration per sched_step().
 * Nothing happens between two calls, so a test can look at the queue, the
 * slots and the counters at an exact point (a request admitted and
 * generating, a second one queued, a third refused) whatever the machine's
 * load; the threaded mode runs the very same step function. In manual mode
 * sched_req_wait() must be called with timeout_s >= 0 (no engine thread
 * would wake it), and sched_stop() runs the remaining steps of the grace
 * period and the final cancel step on the caller's thread. One thread at a
 * time drives a manual scheduler (sched_step, sched_stop); submit, wait,
 * cancel, stats and metrics may still come from any thread.
 */
#ifndef QW_SCHED_H
#define QW_SCHED_H

#include <stdint.h>

#include "base/err.h"
#include "infer/forward.h"
#include "runtime/pool.h"
#include "sample/logprob.h"
#include "sample/sampler.h"

typedef struct qw_sched qw_sched;
typedef struct qw_req qw_req;

/* Status codes of sched_submit (negative; 0 = accepted). */
enum {
    QW_SCHED_OK = 0,
    QW_SCHED_EINVAL = -1,    /* bad request: empty prompt, id out of range, prompt too long */
    QW_SCHED_EFULL = -2,     /* the waiting queue is full: try again later */
    QW_SCHED_ESHUTDOWN = -3, /* the scheduler is stopping */
    QW_SCHED_ENOMEM = -4,    /* allocation failure */
};

typedef struct qw_sched_params {
    int n_slots;     /* concurrent sequences (--parallel), >= 1 */
    int queue_cap;   /* requests that may wait for a slot (--queue); 0 = none wait */
    int prefill_chunk; /* max prompt tokens of one slot per step; 0 = default (256) */
    int manual;      /* 1: no engine thread, the caller drives sched_step() (see above) */
    int spec_k;      /* speculative decoding: at most this many n-gram drafted tokens per
                        request and step (draft.h); 0 = off */
    int64_t cache_bytes; /* prefix cache (--cache-ram): bytes of idle KV pages kept for
                            later requests with the same prefix; 0 = off (see below) */
} qw_sched_params;

/* Create the scheduler and start its engine thread (none in manual mode).
 * ctx must have ctx_n_slots(ctx) >= p->n_slots; the scheduler borrows ctx and pool (the
 * caller frees them after sched_free) and is their only user meanwhile.
 * Returns NULL with a message. */
qw_sched *sched_create(qw_ctx *ctx, qw_pool *pool, const qw_sched_params *p, qw_err *err);

/* Stop accepting requests; let running and queued requests go on for up to
 * grace_s seconds, then cancel what is left; join the engine thread. Safe to
 * call more than once. Requests still held by consumers stay valid (they
 * end with finish CANCEL) until released. */
void sched_stop(qw_sched *s, double grace_s);

/* Manual mode only: run one engine iteration on the caller's thread (admit
 * queued requests into free slots, finish cancelled ones, one forward() of
 * decode tokens and prompt chunks, sample, publish). Returns 1 if it changed
 * anything, 0 if there was nothing to do, -1 if s is not in manual mode or
 * is stopped. */
int sched_step(qw_sched *s);

/* sched_stop(s, 0) if not stopped yet, then free (the prefix cache's idle
 * pages too: it lives as long as its scheduler). Every qw_req must have
 * been released before. */
void sched_free(qw_sched *s);

typedef struct qw_req_params {
    const int32_t *prompt; /* [n_prompt] token ids (copied) */
    int n_prompt;          /* >= 1 */
    int max_new;           /* tokens to generate at most, >= 0 */
    qw_sampling sampling;
    int ignore_eos;        /* 1: do not stop at EOS ids */
    int no_spec;           /* 1: no drafts for this request (plain decoding) */
    /* Constrained sampling (grammar.h), optional: NULL = none. When set,
     * every sampled token is one the grammar allows (the others' logits are
     * masked to -inf before the sampler sees them), EOS only once the
     * grammar is complete (and then forced if nothing else may follow);
     * the request finishes with QW_FINISH_STOP when the grammar is done.
     * The scheduler takes its own reference to grammar; gvocab is borrowed
     * and must outlive the request; both must be set or neither.
     * Constrained requests run without drafts. */
    struct qw_grammar *grammar;
    const struct qw_gvocab *gvocab;
    int logprobs;          /* 1: a qw_logprob record per generated token (logprob.h: raw
                            * logits' log-softmax, before temperature and penalties) */
    int top_logprobs;      /* alternatives per record, 0..QW_MAX_TOP_LOGPROBS */
    int prompt_logprobs;   /* 1: records for prompt tokens 1..n_prompt-1 too (each given
                            * the tokens before it): every prompt position is computed
                            * with its logits, none may be skipped */
} qw_req_params;

/* Queue a request. Returns QW_SCHED_OK and *out (the caller's handle, to be
 * released with sched_req_release), or a negative QW_SCHED_* status with a
 * message naming the problem. Generation stops with QW_FINISH_LENGTH at
 * max_new tokens or when the context is full (n_prompt + n_gen == n_ctx). */
int sched_submit(qw_sched *s, const qw_req_params *p, qw_req **out, qw_err *err);

/* Wait until the request has tokens past *cursor or has finished, or
 * timeout_s passed (timeout_s < 0: wait forever). Returns the number of new
 * tokens (and sets *toks to them, *cursor advanced), 0 if none yet (check
 * sched_req_done), never negative. */
int sched_req_wait(qw_req *r, int *cursor, const int32_t **toks, double timeout_s);

/* 1 once the engine has finished with the request (all its tokens are
 * published), else 0. */
int sched_req_done(qw_req *r);

/* Ask the engine to stop this request; it is freed from its slot within one
 * step and finishes with QW_FINISH_CANCEL unless it finished already. */
void sched_req_cancel(qw_req *r);

typedef struct qw_req_stats {
    int n_prompt, n_gen;
    double queue_s;   /* submit -> admitted into a slot */
    double prefill_s; /* admitted -> first token sampled */
    double decode_s;  /* first token -> finish */
    double ttft_s;    /* submit -> first token */
    double total_s;   /* submit -> finish (or now, if running) */
    int finish;       /* QW_FINISH_* (generate.h); valid when done */
    int failed;       /* 1 if the engine failed on this request (see msg) */
    int n_drafted;    /* draft tokens sent to the model for verification */
    int n_accepted;   /* of those, accepted (each one a token gained) */
    int n_cached;     /* prompt tokens whose KV came from the prefix cache */
    char msg[256];
} qw_req_stats;

void sched_req_stats(qw_req *r, qw_req_stats *st);

/* The request's logprob records (NULL unless it asked): prompt == 0: one
 * per generated token, [i] for the i-th, valid for the tokens
 * sched_req_wait() has returned (published with them); prompt == 1: [i]
 * for prompt token i, i in [1, n_prompt), valid once the first generated
 * token is published or the request is done (unless it was cancelled
 * before its prompt was computed). A request with prompt_logprobs and
 * max_new 0 computes its prompt and ends with LENGTH, no token. */
const qw_logprob *sched_req_logprobs(qw_req *r, int prompt);

/* Drop the consumer's handle (cancels the request if still running). */
void sched_req_release(qw_req *r);

/* Counters for /metrics. Totals are since start. */
typedef struct qw_sched_metrics {
    uint64_t requests_total;      /* accepted by sched_submit */
    uint64_t requests_rejected;   /* queue full */
    uint64_t requests_finished;
    uint64_t prompt_tokens_total;
    uint64_t gen_tokens_total;
    uint64_t draft_tokens_total;  /* speculative drafts verified */
    uint64_t accepted_draft_tokens_total;
    double ttft_sum_s;            /* sum over requests that produced a token */
    uint64_t ttft_count;
    uint64_t ttft_buckets[10];    /* cumulative counts of ttft <= bounds[i] */
    double decode_tps;            /* aggregate generated tok/s over the last busy steps */
    double busy_s;                /* seconds spent in forward steps */
    uint64_t steps;
    uint64_t prefill_tokens_total; /* prompt tokens computed (not taken from the prefix cache) */
    uint64_t prefix_lookups;      /* prompts looked up in the prefix cache */
    uint64_t prefix_lookup_tokens; /* their tokens */
    uint64_t prefix_hit_tokens;   /* of those, mapped from cached pages (hit rate = hit / lookup tokens) */
    int64_t kv_pages_used;        /* KV pages held by running requests */
    int64_t kv_pages_cached;      /* idle KV pages kept for the prefix cache */
    int64_t kv_bytes;             /* KV page memory allocated */
    int64_t kv_page_bytes;        /* bytes of one page */
    uint64_t kv_evictions;        /* idle pages dropped to stay within the budget */
    int queue_depth;              /* waiting for a slot */
    int active_slots;             /* prefilling or generating */
    int n_slots;
} qw_sched_metrics;

/* Upper bounds (seconds) of the ttft histogram buckets, [10]. */
extern const double qw_sched_ttft_bounds[10];

void sched_metrics(qw_sched *s, qw_sched_metrics *m);

/* The model the scheduler serves (for vocab size and EOS ids). */
const qw_model *sched_model(const qw_sched *s);
int sched_n_ctx(const qw_sched *s);

#endif
