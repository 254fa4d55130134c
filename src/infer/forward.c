/* forward.c - the Qwen2 forward pass (see forward.h).
 *
 * Follows transformers' Qwen2ForCausalLM with attn_implementation="eager",
 * computed in float32:
 *   x = embed[token]
 *   per layer:
 *     h = RMSNorm(x) * w_in                      (mean of squares in float32)
 *     q, k, v = h Wq^T + bq, h Wk^T + bk, h Wv^T + bv
 *     q, k = RoPE(q, k)                         (rotate-half; see rope_table)
 *     a = softmax(q k^T / sqrt(hd) + causal) v  (GQA: nh/nkv query heads per kv head)
 *     x = x + a Wo^T
 *     h = RMSNorm(x) * w_post
 *     x = x + (silu(h Wg^T) * (h Wu^T)) Wd^T
 *   logits = RMSNorm(x) * w_final  Wlm^T         (only for want_logits tokens)
 *
 * Precision (forward.h): in FAST mode each matmul input (the normed rows
 * shared by Q/K/V and by gate/up, the attention output, the SiLU product,
 * the final normed rows) is quantized once to QA8 rows in xq, and weights
 * whose type has a matmul_q kernel use it; the norm and the quantization of
 * a row are one step (tok_range). Where a level has a bf16 dot product
 * (kernels.h: matmul_bf16act), inputs of 16-bit weights without an integer
 * kernel are rounded once to bf16 rows in xq instead (act_fmt). EXACT mode
 * never touches xq.
 *
 * Threads: every matmul is split by output rows over the pool (all n tokens
 * of the batch go through one kernel call, so prefill is matrix-matrix);
 * attention is split over (token, kv head) pairs, each one call of the
 * fused attention kernel (kernels.h: attn) for the kv head's query heads.
 * The small per-token steps (norms, bias, RoPE, residual adds) run on the
 * calling thread.
 *
 * Profile: QWENC_PROFILE=1 in the environment makes each step of the pass
 * timed (wall clock, on the calling thread, so a parallel step's time
 * includes waiting for its slowest share) and the totals printed to stderr
 * when the context is freed. Off, it costs one predictable branch per step.
 */
#include "infer/forward.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "infer/kvcache.h"
#include "kernels/kernels.h"

/* Attention scratch: one score area per thread; threads beyond this many
 * take no attention work (they still share the matmuls). */
#define ATT_MAX_THREADS 64
/* Tokens per attention run (att_plan), and the score rows a thread's
 * scratch holds at least (more when the context is longer): a run of m
 * tokens at n cached rows needs about m * n of them. 32768 rows (900 KB a
 * thread for 7 heads) keep runs at 16 tokens up to 2048 rows; with 8192
 * they fell to 4 there, each reading K and V again, and below the avx512
 * attention kernel's zmm path (real 0.5B, 2048-token prompt, Zen 4: 441-500
 * -> 479-520 tok/s; the avx2 level unchanged, docs/PERFORMANCE.md). */
#define ATT_RUN_TOKENS 16
#define ATT_RUN_ROWS 32768
/* Output-row granularity of the matmul split (kept SIMD friendly). */
#define ROW_ALIGN 16
/* Shares per thread of a matmul (see mm_shares). */
#define MM_SHARES 4
/* Gate/up outputs per chunk of a share, for silu_mul to find in L2 (mm_run). */
#define GLU_CHUNK_BYTES (256 * 1024)

/* The steps of the pass that QWENC_PROFILE times. */
enum {
    P_EMBED,
    P_NORM_Q,
    P_MM_QKV,
    P_ROPE,
    P_ATTN,
    P_QUANT,
    P_MM_O,
    P_MM_GATE_UP,
    P_MM_DOWN,
    P_FINAL_NORM,
    P_MM_LM_HEAD,
    P_STEPS
};
enum { PROF_DECODE, PROF_PREFILL };
#define PROF_DECODE_MAX 8 /* batches of up to this many tokens count as decode */
#define QW_STR_(x) #x
#define QW_STR(x) QW_STR_(x)

struct qw_ctx {
    const qw_model *m;
    int n_slots, n_ctx, max_batch;
    int hd, nh, nkv, q_dim, kv_dim;
    /* The KV cache is paged (kvcache.h): a page holds page_rows positions
     * as [n_layers][K, V][n_kv_heads][page_rows][hd] elements (floats, or
     * 16-bit with --kv-type f16|bf16: kv_type), so that within
     * a page each kv head's K and V rows are row-major [pos][hd] and the
     * attention kernel reads them front to back (64-byte aligned pages, so
     * no vector load splits a line when hd * 4 is a multiple of 64). */
    qw_kv *kv;
    qw_kv_type kv_type;
    int page_rows, page_shift;
    int64_t head_stride;  /* elements per kv head in a page: page_rows * hd */
    int64_t layer_stride; /* elements per layer in a page: 2 * n_kv_heads * head_stride */
    float *rope_cos;      /* [n_ctx][hd/2] */
    float *rope_sin;      /* [n_ctx][hd/2] */
    /* activations for up to max_batch tokens */
    float *x;       /* [B][hidden] residual stream */
    float *xn;      /* [B][hidden] normed input of a block */
    float *q;       /* [B][q_dim] */
    float *k;       /* [B][kv_dim] */
    float *v;       /* [B][kv_dim] */
    float *att;     /* [B][q_dim] attention output (heads concatenated) */
    float *tmp;     /* [B][hidden] output of o_proj / down_proj */
    float *gate;    /* [B][inter] */
    float *up;      /* [B][inter] */
    float *scores;  /* [ATT_MAX_THREADS][group * att_rows] attn kernel scratch (group = query heads per kv head) */
    int64_t att_rows;  /* max(n_ctx, ATT_RUN_ROWS) */
    int32_t *att_run0; /* [B + 1] first batch index of each attention run, then b->n */
    int n_att_runs;
    float *logits;  /* [B][vocab]; pages touched only for rows in use */
    int32_t *out_rows;  /* [B] batch index of each logits row */
    int n_out;
    int32_t *slot_last; /* [n_slots] scratch for batch validation */
    qw_precision precision;
    uint8_t *xq;        /* [B][xq_ld] QA8 or bf16 rows of the current matmul input (FAST) */
    int64_t xq_ld;      /* bytes per row: a bf16 or QA8 row of the widest input, 64-byte multiple */
    /* the batch being run (for the parallel jobs) */
    const qw_batch *b;
    int layer;
    /* QWENC_PROFILE: per kind of pass (PROF_DECODE, PROF_PREFILL), seconds
     * and calls per (step, weight dtype) */
    int prof_on, prof_kind;
    int64_t prof_passes[2], prof_tokens[2];
    double prof_s[2][P_STEPS][QW_DTYPE_COUNT];
    int64_t prof_calls[2][P_STEPS][QW_DTYPE_COUNT];
};

static const char *const prof_names[P_STEPS] = {
    "embed", "norm+quantize", "matmul qkv", "bias+rope+kv store", "attention", "quantize (o/down/lm_head in)",
    "matmul o", "matmul gate/up+silu", "matmul down", "final norm", "matmul lm_head"};

/* Start of a profiled step: its start time, or 0 when profiling is off. */
static double prof_start(const qw_ctx *c) { return c->prof_on ? qw_now() : 0.0; }

static void prof_end(qw_ctx *c, int step, qw_dtype dt, double t0) {
    if (!c->prof_on) return;
    c->prof_s[c->prof_kind][step][dt] += qw_now() - t0;
    c->prof_calls[c->prof_kind][step][dt]++;
}

/* Steps timed per weight type (the others are keyed by dtype 0). */
static int prof_by_dtype(int step) {
    return step == P_EMBED || step == P_MM_QKV || step == P_QUANT || step == P_MM_O || step == P_MM_GATE_UP ||
           step == P_MM_DOWN || step == P_MM_LM_HEAD;
}

/* The profile's totals, per step and weight type, with their shares. */
static void prof_print(const qw_ctx *c, int kind) {
    double total = 0;
    for (int s = 0; s < P_STEPS; s++)
        for (int d = 0; d < QW_DTYPE_COUNT; d++) total += c->prof_s[kind][s][d];
    if (total <= 0) return;
    fprintf(stderr, "qwenc: profile: %s: %lld passes, %lld tokens, %.3f s in forward (%s)\n",
            kind == PROF_DECODE ? "decode (batches <= " QW_STR(PROF_DECODE_MAX) ")" : "prefill",
            (long long)c->prof_passes[kind], (long long)c->prof_tokens[kind], total, qw_precision_name(c->precision));
    for (int s = 0; s < P_STEPS; s++)
        for (int d = 0; d < QW_DTYPE_COUNT; d++) {
            if (!c->prof_calls[kind][s][d]) continue;
            fprintf(stderr, "qwenc: profile: %-30s %-5s %6.2f%% %9.3f ms %8.1f us/pass\n", prof_names[s],
                    prof_by_dtype(s) ? qw_dtype_name((qw_dtype)d) : "",
                    100.0 * c->prof_s[kind][s][d] / total, 1e3 * c->prof_s[kind][s][d],
                    1e6 * c->prof_s[kind][s][d] / (double)c->prof_passes[kind]);
        }
}

static void *xmalloc(size_t n) { return malloc(n ? n : 1); }

/* Cache-line aligned (free() releases it); NULL when out of memory. */
static void *xmalloc64(size_t n) {
    void *p = NULL;
    return posix_memalign(&p, 64, n ? n : 1) == 0 ? p : NULL;
}

void ctx_free(qw_ctx *c) {
    if (!c) return;
    if (c->prof_on) prof_print(c, PROF_DECODE), prof_print(c, PROF_PREFILL);
    kv_free(c->kv);
    free(c->rope_cos);
    free(c->rope_sin);
    free(c->x);
    free(c->xn);
    free(c->q);
    free(c->k);
    free(c->v);
    free(c->att);
    free(c->tmp);
    free(c->gate);
    free(c->up);
    free(c->scores);
    free(c->att_run0);
    free(c->logits);
    free(c->out_rows);
    free(c->slot_last);
    free(c->xq);
    free(c);
}

/* cos/sin of pos * inv_freq[i], computed as transformers' default rotary
 * embedding does: inv_freq = 1 / theta^(arange(0, d, 2) / d) in float32,
 * angle = pos * inv_freq in float32, then cos/sin of that float32 angle. */
static void rope_table(float *cs, float *sn, int n_ctx, int hd, float theta) {
    int half = hd / 2;
    for (int i = 0; i < half; i++) {
        float e = (float)(2 * i) / (float)hd;
        float inv_freq = 1.0f / powf(theta, e);
        for (int p = 0; p < n_ctx; p++) {
            float a = (float)p * inv_freq;
            cs[(int64_t)p * half + i] = cosf(a);
            sn[(int64_t)p * half + i] = sinf(a);
        }
    }
}

qw_ctx *ctx_create(const qw_model *m, int n_slots, int n_ctx, int max_batch, qw_err *err) {
    return ctx_create_paged(m, n_slots, n_ctx, max_batch, QW_KV_PAGE_ROWS, err);
}

qw_ctx *ctx_create_paged(const qw_model *m, int n_slots, int n_ctx, int max_batch, int page_rows, qw_err *err) {
    return ctx_create_kv(m, n_slots, n_ctx, max_batch, page_rows, QW_KV_F32, err);
}

qw_ctx *ctx_create_kv(const qw_model *m, int n_slots, int n_ctx, int max_batch, int page_rows, qw_kv_type kv_type,
                      qw_err *err) {
    const qw_config *cfg = &m->cfg;
    if ((int)kv_type < 0 || kv_type >= QW_KV_TYPE_COUNT) {
        qw_errf(err, "ctx_create: unknown KV cache type %d", (int)kv_type);
        return NULL;
    }
    if (n_slots < 1 || n_ctx < 1 || max_batch < 1) {
        qw_errf(err, "ctx_create: n_slots %d, n_ctx %d, max_batch %d must be positive", n_slots, n_ctx, max_batch);
        return NULL;
    }
    if (n_ctx > cfg->max_pos) {
        qw_errf(err, "ctx_create: context %d exceeds the model's max_position_embeddings %d", n_ctx, cfg->max_pos);
        return NULL;
    }
    qw_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        qw_errf(err, "ctx_create: out of memory");
        return NULL;
    }
    c->m = m;
    c->n_slots = n_slots;
    c->n_ctx = n_ctx;
    c->max_batch = max_batch;
    c->hd = cfg->head_dim;
    c->nh = cfg->n_heads;
    c->nkv = cfg->n_kv_heads;
    c->q_dim = c->nh * c->hd;
    c->kv_dim = c->nkv * c->hd;
    c->page_rows = page_rows;
    c->kv_type = kv_type;
    c->head_stride = (int64_t)page_rows * c->hd;
    c->layer_stride = 2 * c->nkv * c->head_stride;
    /* absurd sizes (from a hostile config) fail here, not by overflow */
    double kv_bytes = (double)n_slots * n_ctx * 2.0 * cfg->n_layers * c->kv_dim * sizeof(float);
    double act_bytes = (double)max_batch * ((double)cfg->vocab + 4.0 * cfg->hidden + 2.0 * cfg->inter +
                                            2.0 * c->q_dim + 2.0 * c->kv_dim);
    if (kv_bytes > 1e15 || act_bytes * sizeof(float) > 1e15) {
        qw_errf(err, "ctx_create: %d slots x %d positions x %d batch is too large for this model", n_slots, n_ctx,
                max_batch);
        ctx_free(c);
        return NULL;
    }
    size_t B = (size_t)max_batch, F = sizeof(float);
    /* KV pages are allocated only as positions are written. */
    c->kv = kv_create(n_slots, n_ctx, page_rows, (int64_t)cfg->n_layers * c->layer_stride, qw_kv_type_size(kv_type),
                      err);
    if (!c->kv) {
        ctx_free(c);
        return NULL;
    }
    c->page_shift = kv_page_shift(c->kv);
    c->rope_cos = xmalloc((size_t)n_ctx * (size_t)(c->hd / 2) * F);
    c->rope_sin = xmalloc((size_t)n_ctx * (size_t)(c->hd / 2) * F);
    c->x = xmalloc(B * (size_t)cfg->hidden * F);
    c->xn = xmalloc(B * (size_t)cfg->hidden * F);
    c->q = xmalloc(B * (size_t)c->q_dim * F);
    c->k = xmalloc(B * (size_t)c->kv_dim * F);
    c->v = xmalloc(B * (size_t)c->kv_dim * F);
    c->att = xmalloc(B * (size_t)c->q_dim * F);
    c->tmp = xmalloc(B * (size_t)cfg->hidden * F);
    c->gate = xmalloc(B * (size_t)cfg->inter * F);
    c->up = xmalloc(B * (size_t)cfg->inter * F);
    c->att_rows = n_ctx > ATT_RUN_ROWS ? n_ctx : ATT_RUN_ROWS;
    c->scores = xmalloc((size_t)ATT_MAX_THREADS * (size_t)(c->nh / c->nkv) * (size_t)c->att_rows * F);
    c->att_run0 = xmalloc((B + 1) * sizeof(int32_t));
    c->logits = xmalloc(B * (size_t)cfg->vocab * F);
    c->out_rows = xmalloc(B * sizeof(int32_t));
    c->slot_last = xmalloc((size_t)n_slots * sizeof(int32_t));
    int64_t widest = cfg->hidden > cfg->inter ? cfg->hidden : cfg->inter;
    if (c->q_dim > widest) widest = c->q_dim;
    int64_t row_bytes = qw_qa8_row_bytes(widest) > 2 * widest ? qw_qa8_row_bytes(widest) : 2 * widest;
    c->xq_ld = (row_bytes + 63) / 64 * 64;
    c->xq = xmalloc64(B * (size_t)c->xq_ld);
    if (!c->rope_cos || !c->rope_sin || !c->x || !c->xn || !c->q || !c->k ||
        !c->v || !c->att || !c->tmp || !c->gate || !c->up || !c->scores || !c->logits || !c->out_rows ||
        !c->slot_last || !c->xq || !c->att_run0) {
        qw_errf(err, "ctx_create: out of memory (activations of %d tokens)", max_batch);
        ctx_free(c);
        return NULL;
    }
    rope_table(c->rope_cos, c->rope_sin, n_ctx, c->hd, cfg->rope_theta);
    const char *prof = getenv("QWENC_PROFILE");
    c->prof_on = prof && *prof && strcmp(prof, "0") != 0;
    return c;
}

const char *qw_precision_name(qw_precision p) { return p == QW_PRECISION_EXACT ? "exact" : "fast"; }

int qw_precision_parse(const char *s, qw_precision *out) {
    if (s && !strcmp(s, "fast")) *out = QW_PRECISION_FAST;
    else if (s && !strcmp(s, "exact")) *out = QW_PRECISION_EXACT;
    else return -1;
    return 0;
}

void ctx_set_precision(qw_ctx *c, qw_precision p) {
    c->precision = p;
    LOG_INFO("precision: %s (%s)", qw_precision_name(p),
             p == QW_PRECISION_FAST ? "8-bit activations and integer dot products for quantized weights"
                                    : "float32 activations for every matmul");
}

qw_precision ctx_precision(const qw_ctx *c) { return c->precision; }
qw_kv_type ctx_kv_type(const qw_ctx *c) { return c->kv_type; }

static const char *const k_kv_type_names[QW_KV_TYPE_COUNT] = {"f32", "f16", "bf16"};

const char *qw_kv_type_name(qw_kv_type t) {
    return (int)t >= 0 && t < QW_KV_TYPE_COUNT ? k_kv_type_names[t] : "?";
}

int qw_kv_type_parse(const char *s, qw_kv_type *out) {
    for (int t = 0; s && t < QW_KV_TYPE_COUNT; t++)
        if (!strcmp(s, k_kv_type_names[t])) {
            *out = (qw_kv_type)t;
            return 0;
        }
    return -1;
}

int ctx_n_ctx(const qw_ctx *c) { return c->n_ctx; }
int ctx_n_slots(const qw_ctx *c) { return c->n_slots; }
int ctx_max_batch(const qw_ctx *c) { return c->max_batch; }
const qw_model *ctx_model(const qw_ctx *c) { return c->m; }
qw_kv *ctx_kv(qw_ctx *c) { return c->kv; }
int64_t ctx_kv_bytes_per_token(const qw_ctx *c) {
    return 2 * (int64_t)c->m->cfg.n_layers * c->kv_dim * qw_kv_type_size(c->kv_type);
}
float *ctx_logits(qw_ctx *c, int r) { return c->logits + (int64_t)r * c->m->cfg.vocab; }

/* ---- parallel jobs ---------------------------------------------------- */

/* Up to 3 matmuls with the same input, split by output rows. */
typedef struct mm_job {
    int n_mats;
    struct {
        float *Y;
        int64_t ldy;
        const qw_mat *W;
    } mm[3];
    const float *X;
    int64_t ldx, n;
    const uint8_t *XQ; /* X as QA8 rows (stride ldxq), or NULL: float matmuls only */
    int64_t ldxq;
    const uint16_t *XB; /* X as bf16 rows (stride ldxb elements), or NULL */
    int64_t ldxb;
    float *silu_g, *silu_u; /* if set: g = silu(g) * u on this thread's rows (gate/up) */
    int64_t silu_ld;
} mm_job;

/* Matmul i of job j on its output rows [lo, hi). */
static void mm_mat(const mm_job *j, int i, int64_t lo, int64_t hi) {
    const qw_kernels *K = kernels();
    const qw_mat *W = j->mm[i].W;
    float *Y = j->mm[i].Y;
    const int64_t ldy = j->mm[i].ldy;
    if (j->XQ && W->rp && K->matmul_qr[W->dtype])
        K->matmul_qr[W->dtype](Y, ldy, j->XQ, j->ldxq, j->n, W->rp, W->cols, lo, hi);
    else if (j->XQ && K->matmul_q[W->dtype])
        K->matmul_q[W->dtype](Y, ldy, j->XQ, j->ldxq, j->n, W->data, W->cols, lo, hi);
    else if (j->XB && K->matmul_bf16act[W->dtype])
        K->matmul_bf16act[W->dtype](Y, ldy, j->XB, j->ldxb, j->n, W->data, W->cols, lo, hi);
    else
        K->matmul[W->dtype](Y, ldy, j->X, j->ldx, j->n, W->data, W->cols, lo, hi);
}

static void mm_run(void *arg, int tid, int nth) {
    const mm_job *j = arg;
    if (!j->silu_g) {
        for (int i = 0; i < j->n_mats; i++) {
            int64_t lo, hi;
            pool_split(j->mm[i].W->rows, ROW_ALIGN, tid, nth, &lo, &hi);
            if (hi > lo) mm_mat(j, i, lo, hi);
        }
        return;
    }
    /* gate/up: both have the same rows, so this share owns these columns
     * of both for every token. It goes in chunks whose gate and up outputs
     * (GLU_CHUNK_BYTES) are still in L2 when silu_mul reads them: a
     * prefill's share of 600 rows was 2.4 MB, read back from memory (Q4_0
     * pp512: gate/up+silu 410-428 -> 388-400 ms, docs/PERFORMANCE.md). */
    int64_t lo, hi;
    pool_split(j->mm[0].W->rows, ROW_ALIGN, tid, nth, &lo, &hi);
    int64_t chunk = GLU_CHUNK_BYTES / (2 * (int64_t)sizeof(float) * (j->n > 0 ? j->n : 1)) / ROW_ALIGN * ROW_ALIGN;
    if (chunk < ROW_ALIGN) chunk = ROW_ALIGN;
    const qw_kernels *K = kernels();
    for (int64_t a = lo; a < hi; a += chunk) {
        int64_t b = a + chunk < hi ? a + chunk : hi;
        for (int i = 0; i < j->n_mats; i++) mm_mat(j, i, a, b);
        for (int64_t t = 0; t < j->n; t++)
            K->silu_mul(j->silu_g + t * j->silu_ld + a, j->silu_u + t * j->silu_ld + a, b - a);
    }
}

/* Matmuls are cut into MM_SHARES shares per thread: on a shared machine a
 * preempted thread then holds back a quarter of its part, not all of it
 * (results do not depend on the split: the kernels are row-range invariant). */
static int mm_shares(qw_pool *pool) { return pool_threads(pool) > 1 ? pool_threads(pool) * MM_SHARES : 1; }

/* FAST mode and an integer kernel for W's type (whose rows are whole
 * blocks of 32, so its input rows quantize to QA8). */
static int use_q(const qw_ctx *c, const qw_mat *W) {
    return c->precision == QW_PRECISION_FAST && kernels()->matmul_q[W->dtype] && W->cols % QW_QA8_BLOCK == 0;
}

/* The format a matmul input is converted to in xq: the integer path first,
 * else bf16 rows where the level multiplies W's type with them. Several
 * matmuls of one input take the largest (QA8 > BF16 > F32): each one then
 * uses it if its kernel exists, else the float32 input. Never depends on
 * the batch, so batching does not change a row's result. */
enum { ACT_F32, ACT_BF16, ACT_QA8 };
static int act_fmt(const qw_ctx *c, const qw_mat *W) {
    if (use_q(c, W)) return ACT_QA8;
    return c->precision == QW_PRECISION_FAST && kernels()->matmul_bf16act[W->dtype] ? ACT_BF16 : ACT_F32;
}
static int act_max(int a, int b) { return a > b ? a : b; }

/* Point job j at the converted input in xq (format fmt). */
static void job_input(mm_job *j, qw_ctx *c, int fmt) {
    if (fmt == ACT_QA8) j->XQ = c->xq, j->ldxq = c->xq_ld;
    if (fmt == ACT_BF16) j->XB = (const uint16_t *)c->xq, j->ldxb = c->xq_ld / 2;
}

/* Row t of the current matmul input (x, k floats) into xq in format fmt. */
static void convert_row(qw_ctx *c, int fmt, int64_t t, const float *x, int64_t k) {
    const qw_kernels *K = kernels();
    if (fmt == ACT_QA8) K->quantize_qa8(c->xq + t * c->xq_ld, x, k);
    else if (fmt == ACT_BF16) K->to_bf16((uint16_t *)(c->xq + t * c->xq_ld), x, k);
}

/* Rows [t0, t1) of X (k floats each) into QA8 rows of xq. */
typedef struct qa8_job {
    qw_ctx *c;
    const float *X;
    int64_t ldx, k, n;
    int fmt;
} qa8_job;

static void qa8_range(const qa8_job *j, int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; t++) convert_row(j->c, j->fmt, t, j->X + t * j->ldx, j->k);
}

static void qa8_run(void *arg, int tid, int nth) {
    const qa8_job *j = arg;
    int64_t lo, hi;
    pool_split(j->n, 1, tid, nth, &lo, &hi);
    if (hi > lo) qa8_range(j, lo, hi);
}

#define TOK_PAR_MIN 16

/* Convert n input rows to xq in format fmt (over the pool for large batches). */
static void quantize_rows(qw_ctx *c, qw_pool *pool, const float *X, int64_t ldx, int64_t k, int64_t n, int fmt) {
    qa8_job j = {c, X, ldx, k, n, fmt};
    if (n >= TOK_PAR_MIN && pool_threads(pool) > 1) pool_run(pool, qa8_run, &j);
    else qa8_range(&j, 0, n);
}

/* One matmul; in FAST mode with an integer kernel, its input is quantized first. */
static void matmul_par(qw_ctx *c, qw_pool *pool, int step, float *Y, int64_t ldy, const float *X, int64_t ldx,
                       int64_t n, const qw_mat *W) {
    mm_job j;
    memset(&j, 0, sizeof j);
    j.n_mats = 1;
    j.mm[0].Y = Y;
    j.mm[0].ldy = ldy;
    j.mm[0].W = W;
    j.X = X;
    j.ldx = ldx;
    j.n = n;
    int fmt = act_fmt(c, W);
    if (fmt != ACT_F32) {
        double tq = prof_start(c);
        quantize_rows(c, pool, X, ldx, W->cols, n, fmt);
        prof_end(c, P_QUANT, W->dtype, tq);
        job_input(&j, c, fmt);
    }
    double t0 = prof_start(c);
    pool_run_n(pool, mm_run, &j, mm_shares(pool));
    prof_end(c, step, W->dtype, t0);
}

/* Attention runs: consecutive batch tokens of one slot at consecutive
 * positions (a prompt being prefilled) share one attn kernel call, which
 * reads each K and V row once for the whole run instead of once per
 * token. A run is capped at ATT_RUN_TOKENS, shorter where that leaves fewer
 * than 4 work items per thread, and to what the thread's score scratch
 * holds. Where the runs are cut changes no bit of any token's output
 * (kernels.h: invariance), so neither the batch nor the thread count does. */
static void att_plan(qw_ctx *c, const qw_batch *b, int nth) {
    int64_t cap = (int64_t)b->n * c->nkv / (4 * (int64_t)nth);
    if (cap > ATT_RUN_TOKENS) cap = ATT_RUN_TOKENS;
    if (cap < 1) cap = 1;
    int runs = 0;
    for (int t = 0; t < b->n;) {
        int slot = b->slot ? b->slot[t] : 0, m = 1;
        int64_t n0 = (int64_t)b->pos[t] + 1;
        while (t + m < b->n && m < cap && (b->slot ? b->slot[t + m] : 0) == slot && b->pos[t + m] == b->pos[t] + m &&
               qw_attn_scratch(m + 1, 1, n0) <= c->att_rows)
            m++;
        c->att_run0[runs++] = t;
        t += m;
    }
    c->att_run0[runs] = b->n;
    c->n_att_runs = runs;
}

/* Causal GQA attention at one layer, one work item per (run, kv head): the
 * `group` query heads that share a kv head go through one attn kernel call
 * for all the run's tokens, so each K and V row of the run's positions is
 * read once for all of them. The kernel's result for a (token, head) does
 * not depend on the other tokens and heads of the call, so neither the
 * batch nor the thread count (which may split a group's heads, below)
 * changes any bit of a token's attention output. */
static void att_run(void *arg, int tid, int nth) {
    qw_ctx *c = arg;
    if (tid >= ATT_MAX_THREADS) return;
    if (nth > ATT_MAX_THREADS) nth = ATT_MAX_THREADS;
    const qw_kernels *K = kernels();
    const qw_batch *b = c->b;
    int hd = c->hd, group = c->nh / c->nkv;
    float scale = (float)(1.0 / sqrt((double)hd));
    float *S = c->scores + (int64_t)tid * group * c->att_rows;
    qw_attn_fn attn = qw_attn_for(K, c->kv_type);
    /* With fewer (run, kv head) pairs than threads (decode on a many-core
     * machine), the query heads of a group are split among threads too. */
    int64_t pairs = (int64_t)c->n_att_runs * c->nkv;
    int sub = pairs >= nth ? 1 : (int)((nth + pairs - 1) / pairs);
    if (sub > group) sub = group;
    int64_t items = pairs * sub;
    /* Strided so that long (late) and short (early) runs mix evenly. */
    for (int64_t it = tid; it < items; it += nth) {
        int64_t pr = it / sub;
        int r = (int)(pr / c->nkv), g = (int)(pr % c->nkv), sp = (int)(it % sub);
        int h0 = sp * group / sub, h1 = (sp + 1) * group / sub, nq = h1 - h0;
        if (nq <= 0) continue;
        int t = c->att_run0[r], nt = c->att_run0[r + 1] - t;
        int slot = b->slot ? b->slot[t] : 0, pos = b->pos[t];
        int64_t base = c->layer * c->layer_stride + g * c->head_stride;
        int64_t qoff = (int64_t)t * c->q_dim + ((int64_t)g * group + h0) * hd;
        qw_kv_rows rows = {kv_slot_pages(c->kv, slot), base, base + c->nkv * c->head_stride, hd, c->page_shift};
        /* q, att: [nt][q_dim], the group's nq heads; cache rows 0..pos+nt-1
         * through the slot's pages */
        attn(c->att + qoff, c->q + qoff, c->q_dim, nt, nq, hd, &rows, pos + 1, scale, S);
    }
}

/* ---- the pass --------------------------------------------------------- */

static int check_batch(qw_ctx *c, const qw_batch *b, qw_err *err) {
    const qw_config *cfg = &c->m->cfg;
    if (!b || b->n < 1 || b->n > c->max_batch)
        return qw_errf(err, "forward: batch of %d tokens (1..%d allowed)", b ? b->n : 0, c->max_batch);
    if (!b->tokens || !b->pos) return qw_errf(err, "forward: batch without tokens or positions");
    for (int s = 0; s < c->n_slots; s++) c->slot_last[s] = -1;
    for (int i = 0; i < b->n; i++) {
        int32_t t = b->tokens[i], p = b->pos[i], s = b->slot ? b->slot[i] : 0;
        if (t < 0 || t >= cfg->vocab)
            return qw_errf(err, "forward: token %d at batch index %d is outside the vocabulary [0, %d)", t, i,
                           cfg->vocab);
        if (p < 0 || p >= c->n_ctx)
            return qw_errf(err, "forward: position %d at batch index %d is outside the context [0, %d)", p, i,
                           c->n_ctx);
        if (s < 0 || s >= c->n_slots)
            return qw_errf(err, "forward: slot %d at batch index %d is outside [0, %d)", s, i, c->n_slots);
        if (c->slot_last[s] >= 0 && p != c->slot_last[s] + 1)
            return qw_errf(err, "forward: slot %d: position %d at batch index %d does not follow position %d", s,
                           p, i, c->slot_last[s]);
        if (c->slot_last[s] < 0 && !kv_slot_has(c->kv, s, p))
            return qw_errf(err, "forward: slot %d: position %d at batch index %d follows positions never written",
                           s, p, i);
        c->slot_last[s] = p;
    }
    /* every page written below exists and is the slot's own (copy on write) */
    for (int i = 0; i < b->n; i++)
        if (!kv_prepare_write(c->kv, b->slot ? b->slot[i] : 0, b->pos[i]))
            return qw_errf(err, "forward: out of memory for the KV cache (slot %d, position %d)",
                           b->slot ? b->slot[i] : 0, b->pos[i]);
    return 0;
}

/* q/k biases, RoPE on q and k, and k/v into the cache, for tokens [t0, t1). */
static void qkv_finish(qw_ctx *c, const qw_layer *L, const qw_batch *b, int l, int t0, int t1) {
    const qw_kernels *K = kernels();
    int hd = c->hd, half = hd / 2;
    for (int t = t0; t < t1; t++) {
        float *q = c->q + (int64_t)t * c->q_dim, *k = c->k + (int64_t)t * c->kv_dim,
              *v = c->v + (int64_t)t * c->kv_dim;
        K->add(q, L->bq, c->q_dim);
        K->add(k, L->bk, c->kv_dim);
        K->add(v, L->bv, c->kv_dim);
        int pos = b->pos[t], slot = b->slot ? b->slot[t] : 0;
        const float *cs = c->rope_cos + (int64_t)pos * half, *sn = c->rope_sin + (int64_t)pos * half;
        /* x*cos + rotate_half(x)*sin, rotate_half(x) = [-x2, x1] */
        for (int h = 0; h < c->nh + c->nkv; h++) {
            float *x = h < c->nh ? q + (int64_t)h * hd : k + (int64_t)(h - c->nh) * hd;
            for (int i = 0; i < half; i++) {
                float x1 = x[i], x2 = x[i + half];
                float a = x1 * cs[i], bb = x2 * sn[i];
                float d = x2 * cs[i], e = x1 * sn[i];
                x[i] = a - bb;
                x[i + half] = d + e;
            }
        }
        /* forward() made the page writable before the pass */
        float *page = (float *)kv_slot_pages(c->kv, slot)[pos >> c->page_shift];
        int64_t row = (int64_t)(pos & (c->page_rows - 1)) * hd;
        for (int g = 0; g < c->nkv; g++) {
            int64_t base = l * c->layer_stride + g * c->head_stride + row, vb = base + c->nkv * c->head_stride;
            if (c->kv_type == QW_KV_F32) {
                memcpy(page + base, k + (int64_t)g * hd, (size_t)hd * sizeof(float));
                memcpy(page + vb, v + (int64_t)g * hd, (size_t)hd * sizeof(float));
            } else { /* rounded once, here: every later read sees the same bits */
                uint16_t *p16 = (uint16_t *)(void *)page;
                K->kv_store16[c->kv_type](p16 + base, k + (int64_t)g * hd, hd);
                K->kv_store16[c->kv_type](p16 + vb, v + (int64_t)g * hd, hd);
            }
        }
    }
}

/* The per-token steps between the matmuls, split over tokens when the batch
 * is large enough to be worth a pool dispatch (prefill). */
enum { TOK_NORM, TOK_ADD_NORM, TOK_QKV };
typedef struct tok_job {
    qw_ctx *c;
    int op;
    const float *w; /* norm weight */
    const qw_layer *L;
    int l;
    int quant; /* TOK_NORM / TOK_ADD_NORM: also convert each normed row to xq (an ACT_ format) */
} tok_job;

static void tok_range(const tok_job *j, int t0, int t1) {
    qw_ctx *c = j->c;
    const qw_kernels *K = kernels();
    const int64_t H = c->m->cfg.hidden;
    if (j->op == TOK_QKV) {
        qkv_finish(c, j->L, c->b, j->l, t0, t1);
        return;
    }
    for (int t = t0; t < t1; t++) {
        if (j->op == TOK_ADD_NORM) K->add(c->x + t * H, c->tmp + t * H, H);
        K->rmsnorm(c->xn + t * H, c->x + t * H, j->w, H, c->m->cfg.rms_eps);
        convert_row(c, j->quant, t, c->xn + t * H, H);
    }
}

static void tok_run(void *arg, int tid, int nth) {
    const tok_job *j = arg;
    int64_t lo, hi;
    pool_split(j->c->b->n, 1, tid, nth, &lo, &hi);
    if (hi > lo) tok_range(j, (int)lo, (int)hi);
}

static void tok_step(qw_ctx *c, qw_pool *pool, int op, const float *w, const qw_layer *L, int l, int quant) {
    tok_job j = {c, op, w, L, l, quant};
    if (c->b->n >= TOK_PAR_MIN && pool_threads(pool) > 1) pool_run(pool, tok_run, &j);
    else tok_range(&j, 0, c->b->n);
}

int forward(qw_ctx *c, const qw_batch *b, qw_pool *pool, qw_err *err) {
    if (check_batch(c, b, err)) return -1;
    const qw_model *m = c->m;
    const qw_config *cfg = &m->cfg;
    const qw_kernels *K = kernels();
    const int64_t H = cfg->hidden, I = cfg->inter, n = b->n;
    c->b = b;
    att_plan(c, b, pool_threads(pool) < ATT_MAX_THREADS ? pool_threads(pool) : ATT_MAX_THREADS);

    if (c->prof_on) {
        c->prof_kind = n <= PROF_DECODE_MAX ? PROF_DECODE : PROF_PREFILL;
        c->prof_passes[c->prof_kind]++, c->prof_tokens[c->prof_kind] += n;
    }

    /* embeddings */
    double t0 = prof_start(c);
    int64_t erb = qw_dtype_row_bytes(m->embed.dtype, H);
    for (int t = 0; t < n; t++)
        K->to_f32[m->embed.dtype](c->x + t * H, (const char *)m->embed.data + (int64_t)b->tokens[t] * erb, H);
    prof_end(c, P_EMBED, m->embed.dtype, t0);

    for (int l = 0; l < cfg->n_layers; l++) {
        const qw_layer *L = &m->layers[l];
        c->layer = l;
        /* x += previous layer's MLP output (in tmp), then the input norm */
        int q_qkv = act_max(act_fmt(c, &L->wq), act_max(act_fmt(c, &L->wk), act_fmt(c, &L->wv)));
        t0 = prof_start(c);
        tok_step(c, pool, l ? TOK_ADD_NORM : TOK_NORM, L->attn_norm, L, l, q_qkv);
        prof_end(c, P_NORM_Q, 0, t0);

        mm_job j;
        memset(&j, 0, sizeof j);
        j.n_mats = 3;
        j.mm[0].Y = c->q, j.mm[0].ldy = c->q_dim, j.mm[0].W = &L->wq;
        j.mm[1].Y = c->k, j.mm[1].ldy = c->kv_dim, j.mm[1].W = &L->wk;
        j.mm[2].Y = c->v, j.mm[2].ldy = c->kv_dim, j.mm[2].W = &L->wv;
        j.X = c->xn, j.ldx = H, j.n = n;
        job_input(&j, c, q_qkv);
        t0 = prof_start(c);
        pool_run_n(pool, mm_run, &j, mm_shares(pool));
        prof_end(c, P_MM_QKV, L->wq.dtype, t0);

        t0 = prof_start(c);
        tok_step(c, pool, TOK_QKV, NULL, L, l, 0);
        prof_end(c, P_ROPE, 0, t0);
        t0 = prof_start(c);
        pool_run(pool, att_run, c);
        prof_end(c, P_ATTN, 0, t0);

        matmul_par(c, pool, P_MM_O, c->tmp, H, c->att, c->q_dim, n, &L->wo);
        int q_mlp = act_max(act_fmt(c, &L->w_gate), act_fmt(c, &L->w_up));
        t0 = prof_start(c);
        tok_step(c, pool, TOK_ADD_NORM, L->mlp_norm, L, l, q_mlp);
        prof_end(c, P_NORM_Q, 0, t0);

        memset(&j, 0, sizeof j);
        j.n_mats = 2;
        j.mm[0].Y = c->gate, j.mm[0].ldy = I, j.mm[0].W = &L->w_gate;
        j.mm[1].Y = c->up, j.mm[1].ldy = I, j.mm[1].W = &L->w_up;
        j.X = c->xn, j.ldx = H, j.n = n;
        j.silu_g = c->gate, j.silu_u = c->up, j.silu_ld = I;
        job_input(&j, c, q_mlp);
        t0 = prof_start(c);
        pool_run_n(pool, mm_run, &j, mm_shares(pool));
        prof_end(c, P_MM_GATE_UP, L->w_gate.dtype, t0);

        matmul_par(c, pool, P_MM_DOWN, c->tmp, H, c->gate, I, n, &L->w_down);
    }

    /* last residual add, final norm and lm_head: only for the rows that
     * want logits (the other rows' hidden states are not needed any more) */
    t0 = prof_start(c);
    c->n_out = 0;
    for (int t = 0; t < n; t++) {
        int want = b->want_logits ? b->want_logits[t] != 0 : t == n - 1;
        if (!want) continue;
        K->add(c->x + t * H, c->tmp + t * H, H);
        K->rmsnorm(c->xn + (int64_t)c->n_out * H, c->x + t * H, m->final_norm, H, cfg->rms_eps);
        c->out_rows[c->n_out++] = t;
    }
    prof_end(c, P_FINAL_NORM, 0, t0);
    if (c->n_out > 0) matmul_par(c, pool, P_MM_LM_HEAD, c->logits, cfg->vocab, c->xn, H, c->n_out, &m->lm_head);
    c->b = NULL;
    return 0;
}

int ctx_check_finite(qw_ctx *c, qw_pool *pool, qw_err *err) {
    /* One token at position 0 of slot 0: whatever a real request puts there
     * later overwrites it, so the check leaves no state behind. */
    int vocab = c->m->cfg.vocab;
    int32_t tok = c->m->cfg.bos_id >= 0 && c->m->cfg.bos_id < vocab ? c->m->cfg.bos_id : 0, pos = 0, slot = 0;
    qw_batch b = {.n = 1, .tokens = &tok, .pos = &pos, .slot = &slot, .want_logits = NULL};
    if (forward(c, &b, pool, err)) return qw_err_prefix(err, "load-time check");
    const float *lg = ctx_logits(c, 0);
    int bad = 0;
    for (int v = 0; v < vocab; v++) bad += !isfinite(lg[v]);
    if (bad)
        return qw_errf(err,
                       "model %s: a one-token forward pass gives %d NaN/Inf logits of %d: the weights (or "
                       "their conversion) are broken, and sampling would pick token 0 forever",
                       c->m->name ? c->m->name : "(unnamed)", bad, vocab);
    return 0;
}
