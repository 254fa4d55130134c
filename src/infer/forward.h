/* forward.h - the transformer forward pass over a batch of tokens.
 *
 * A qw_ctx holds everything a forward pass writes: the KV cache of n_slots
 * independent sequences of up to n_ctx positions each, and activation
 * buffers for up to max_batch tokens. The activations are allocated once by
 * ctx_create(); the KV cache is paged (kvcache.h) and takes a page of
 * QW_KV_PAGE_ROWS positions from its pool when a sequence first writes
 * one, so an unused context costs no memory (freed pages are kept for
 * reuse, so a busy server's steps do not go back to malloc).
 *
 * A batch mixes sequences freely (continuous batching): token i belongs to
 * slot[i] at position pos[i]. Within one batch the tokens of one slot must be
 * consecutive positions in increasing order; a token at position p attends to
 * positions 0..p of its own slot (positions < the batch's first one for that
 * slot must have been filled by earlier calls, or mapped from the prefix
 * cache). Writing position p of a slot overwrites what was there (in a copy
 * if the page is shared: kvcache.h), so a slot is reused by starting again
 * at 0. forward() fails (-1) only on a bad batch or when the KV cache
 * cannot get memory for a new page.
 *
 * Prefill (many tokens) runs the projections as matrix-matrix products;
 * decode (one token per slot) as matrix-vector products. The output layer
 * runs only for tokens with want_logits set.
 */
#ifndef QW_FORWARD_H
#define QW_FORWARD_H

#include <stdint.h>

#include "kernels/kernels.h"
#include "model/model.h"
#include "runtime/pool.h"

typedef struct qw_ctx qw_ctx;

typedef struct qw_batch {
    int n;                       /* number of tokens, 1..max_batch */
    const int32_t *tokens;       /* [n] token ids, 0 <= id < vocab */
    const int32_t *pos;          /* [n] positions, 0 <= pos < n_ctx */
    const int32_t *slot;         /* [n] KV slot, 0 <= slot < n_slots; NULL = all 0 */
    const uint8_t *want_logits;  /* [n] 1 = compute logits; NULL = last token only */
} qw_batch;

/* How quantized weights are multiplied (kernels.h, "the integer path").
 * FAST (the default): each matmul input is quantized once to 8-bit QA8 rows
 * and multiplied with integer dot products wherever the weight type has a
 * matmul_q kernel; weights whose type has a matmul_bf16act kernel on this
 * level (BF16 with AVX512-BF16) get the input rounded once to bf16 rows;
 * other weights keep the float matmul. EXACT: float32
 * activations everywhere (the path the fidelity tests prove, bit for bit).
 * Both are batch invariant. */
typedef enum { QW_PRECISION_FAST = 0, QW_PRECISION_EXACT = 1 } qw_precision;

/* "fast" / "exact"; qw_precision_parse: 0 and *out set, or -1 for any other name. */
const char *qw_precision_name(qw_precision p);
int qw_precision_parse(const char *s, qw_precision *out);

/* The KV cache is paged (kvcache.h): pages of page_rows positions (a power
 * of two; ctx_create: QW_KV_PAGE_ROWS) are allocated as positions are
 * written, so an unused context costs only its page table. */
#define QW_KV_PAGE_ROWS 64
qw_ctx *ctx_create(const qw_model *m, int n_slots, int n_ctx, int max_batch, qw_err *err);
qw_ctx *ctx_create_paged(const qw_model *m, int n_slots, int n_ctx, int max_batch, int page_rows, qw_err *err);
/* The same with K and V stored as kv_type (kernels.h: qw_kv_type; the two
 * above store float32). A 16-bit cache halves the KV memory; each K/V
 * value is rounded once when stored, so batch invariance and the prefix
 * cache's bit-identical reuse hold as with float32. --precision exact
 * uses float32 (qw_kv_type_resolve). */
qw_ctx *ctx_create_kv(const qw_model *m, int n_slots, int n_ctx, int max_batch, int page_rows, qw_kv_type kv_type,
                      qw_err *err);
qw_kv_type ctx_kv_type(const qw_ctx *c);
/* The CLI's --kv-type under --precision fast when none is given (exact:
 * f32). docs/PERFORMANCE.md (16-bit KV) has the measurements behind it. */
#define QW_KV_TYPE_FAST_DEFAULT QW_KV_F16

/* "f32" / "f16" / "bf16"; qw_kv_type_parse: 0 and *out set, or -1. */
const char *qw_kv_type_name(qw_kv_type t);
int qw_kv_type_parse(const char *s, qw_kv_type *out);
void ctx_free(qw_ctx *c);
/* Precision of the following forward() calls (ctx_create: FAST); logs it. */
void ctx_set_precision(qw_ctx *c, qw_precision p);
qw_precision ctx_precision(const qw_ctx *c);
int ctx_n_ctx(const qw_ctx *c);
int ctx_n_slots(const qw_ctx *c);
int ctx_max_batch(const qw_ctx *c);
const qw_model *ctx_model(const qw_ctx *c);
/* The paged KV cache (engine thread only: the scheduler's prefix cache). */
struct qw_kv *ctx_kv(qw_ctx *c);
/* KV cache bytes one position takes: 2 (K, V) x layers x kv heads x head_dim x 4 (2 for a 16-bit cache). */
int64_t ctx_kv_bytes_per_token(const qw_ctx *c);

/* Run the batch. Returns 0 and fills the logits rows (one per token with
 * want_logits, in batch order; see ctx_logits), or -1 with a message if the
 * batch breaks the rules above or no memory is left for its KV pages
 * (checked before any work is done). */
int forward(qw_ctx *c, const qw_batch *b, qw_pool *pool, qw_err *err);

/* Logits of the last forward(): row r (0-based among want_logits tokens),
 * vocab floats. Valid until the next forward(). */
float *ctx_logits(qw_ctx *c, int r);

/* The load-time sanity check: one forward pass of one token (BOS, else 0) on
 * slot 0; -1 with a message naming the model when any logit is NaN or Inf
 * (broken weights would otherwise sample token 0 forever, silently). */
int ctx_check_finite(qw_ctx *c, qw_pool *pool, qw_err *err);

#endif
