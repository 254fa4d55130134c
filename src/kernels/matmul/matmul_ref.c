/* matmul_ref.c - the plain-C reference of the float-activation matmul
 * (the exact precision), of to_f32 and of quantize_q8_0, for every weight
 * type; the SIMD twins are matmul_<isa>.c beside it. Element types (F32,
 * F16, BF16): a straight dot product in index order. Block types (GGML's):
 * Q4_0, Q4_1, Q5_0, Q5_1 (blocks of 32 weights) and Q4_K, Q5_K, Q6_K
 * (super-blocks of 256). Layouts as in GGML's ggml-common.h (block_q4_0 ...
 * block_q6_K); see kernels.h for the byte sizes.
 *
 * Every weight is one float32 expression, the one the `gguf` Python
 * package's numpy dequantize evaluates (its operation order):
 *   Q4_0 d * (q - 8)        Q5_0 d * (q - 16)        q a small integer
 *   Q4_1 d * q + m          Q5_1 d * q + m
 *   Q4_K / Q5_K (d * sc) * q - dmin * mn    (sc, mn: 6-bit sub-block values)
 *   Q6_K (d * sc) * (q - 32)                (sc: int8, one per 16 weights)
 * d, m, dmin are binary16 (11 significant bits), so every product above is
 * exact in float32 (at most 11 + 7 + 6 = 24 bits, Q6_K's widest) and the
 * weight is rounded at most once (the + m / - dmin * mn). Hence a fused
 * multiply-add gives the same bits as multiply-then-add, and the SIMD levels
 * reproduce these values exactly; tests/kernels/test_kquant.c checks them
 * against gguf's dequantize on committed bytes.
 *
 * matmul: dequantize each block of a row, then the dot product in index
 * order, like the element types: one loop for every block type, its sizes
 * from the traits table (kernels.h: qw_type).
 */
#include <math.h>

#include "kernels/kernels_impl.h"

/* ---- element types ---- */

static void matmul_f32_ref(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n,
                           const void *W, int64_t k, int64_t o0, int64_t o1) {
    const char *w = W; /* memcpy loads: W may be misaligned (safetensors) */
    for (int64_t t = 0; t < n; t++)
        for (int64_t o = o0; o < o1; o++) {
            const float *x = X + t * ldx;
            const char *wr = w + o * k * 4;
            float acc = 0.0f;
            for (int64_t i = 0; i < k; i++) {
                float v;
                memcpy(&v, wr + 4 * i, sizeof v);
                acc += x[i] * v;
            }
            Y[t * ldy + o] = acc;
        }
}

static void matmul_f16_ref(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n,
                           const void *W, int64_t k, int64_t o0, int64_t o1) {
    const char *w = W;
    for (int64_t t = 0; t < n; t++)
        for (int64_t o = o0; o < o1; o++) {
            const float *x = X + t * ldx;
            const char *wr = w + o * k * 2;
            float acc = 0.0f;
            for (int64_t i = 0; i < k; i++) acc += x[i] * qw_f16_to_f32(qw_u16_at(wr + 2 * i));
            Y[t * ldy + o] = acc;
        }
}

static void matmul_bf16_ref(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n,
                            const void *W, int64_t k, int64_t o0, int64_t o1) {
    const char *w = W;
    for (int64_t t = 0; t < n; t++)
        for (int64_t o = o0; o < o1; o++) {
            const float *x = X + t * ldx;
            const char *wr = w + o * k * 2;
            float acc = 0.0f;
            for (int64_t i = 0; i < k; i++) acc += x[i] * qw_bf16_to_f32(qw_u16_at(wr + 2 * i));
            Y[t * ldy + o] = acc;
        }
}

static void to_f32_f32_ref(float *y, const void *x, int64_t n) {
    memmove(y, x, (size_t)n * sizeof(float));
}

static void to_f32_f16_ref(float *y, const void *x, int64_t n) {
    const uint16_t *h = x;
    for (int64_t i = 0; i < n; i++) y[i] = qw_f16_to_f32(h[i]);
}

static void to_f32_bf16_ref(float *y, const void *x, int64_t n) {
    const uint16_t *h = x;
    for (int64_t i = 0; i < n; i++) y[i] = qw_bf16_to_f32(h[i]);
}

/* ---- block types ---- */

/* block_q8_0: d, qs[32] (int8). */
static void deq_q8_0(float *y, const uint8_t *b) {
    float d = qw_f16_at(b);
    for (int j = 0; j < 32; j++) y[j] = d * (float)(int8_t)b[2 + j];
}


/* block_q4_0: d, qs[16]. Weight j < 16: low nibble of qs[j]; j >= 16: high
 * nibble of qs[j - 16]. */
static void deq_q4_0(float *y, const uint8_t *b) {
    float d = qw_f16_at(b);
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)((b[2 + j] & 15) - 8);
        y[j + 16] = d * (float)((b[2 + j] >> 4) - 8);
    }
}

/* block_q4_1: d, m, qs[16]. */
static void deq_q4_1(float *y, const uint8_t *b) {
    float d = qw_f16_at(b), m = qw_f16_at(b + 2);
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)(b[4 + j] & 15) + m;
        y[j + 16] = d * (float)(b[4 + j] >> 4) + m;
    }
}

/* block_q5_0: d, qh (uint32 little endian: bit j is bit 4 of weight j), qs[16]. */
static void deq_q5_0(float *y, const uint8_t *b) {
    float d = qw_f16_at(b);
    uint32_t qh = qw_u32_at(b + 2);
    for (int j = 0; j < 16; j++) {
        int lo = (b[6 + j] & 15) | (int)((qh >> j) & 1) << 4;
        int hi = (b[6 + j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
        y[j] = d * (float)(lo - 16);
        y[j + 16] = d * (float)(hi - 16);
    }
}

/* block_q5_1: d, m, qh, qs[16]. */
static void deq_q5_1(float *y, const uint8_t *b) {
    float d = qw_f16_at(b), m = qw_f16_at(b + 2);
    uint32_t qh = qw_u32_at(b + 4);
    for (int j = 0; j < 16; j++) {
        int lo = (b[8 + j] & 15) | (int)((qh >> j) & 1) << 4;
        int hi = (b[8 + j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
        y[j] = d * (float)lo + m;
        y[j + 16] = d * (float)hi + m;
    }
}

/* block_q4_K: d, dmin, scales[12], qs[128]. Sub-block s (32 weights) uses
 * the nibble s % 2 of qs[32 * (s / 2) + l]. */
static void deq_q4_k(float *y, const uint8_t *b) {
    float d = qw_f16_at(b), dmin = qw_f16_at(b + 2);
    const uint8_t *q = b + 16;
    for (int s = 0; s < 8; s++) {
        int sc, mn;
        qw_kquant_scale_min(b + 4, s, &sc, &mn);
        float ds = d * (float)sc, dm = dmin * (float)mn;
        for (int l = 0; l < 32; l++) y[32 * s + l] = ds * (float)((q[32 * (s / 2) + l] >> (4 * (s % 2))) & 15) - dm;
    }
}

/* block_q5_K: d, dmin, scales[12], qh[32], qs[128]; bit 4 of weight l of
 * sub-block s is bit s of qh[l]. */
static void deq_q5_k(float *y, const uint8_t *b) {
    float d = qw_f16_at(b), dmin = qw_f16_at(b + 2);
    const uint8_t *qh = b + 16, *q = b + 48;
    for (int s = 0; s < 8; s++) {
        int sc, mn;
        qw_kquant_scale_min(b + 4, s, &sc, &mn);
        float ds = d * (float)sc, dm = dmin * (float)mn;
        for (int l = 0; l < 32; l++) {
            int v = ((q[32 * (s / 2) + l] >> (4 * (s % 2))) & 15) | ((qh[l] >> s) & 1) << 4;
            y[32 * s + l] = ds * (float)v - dm;
        }
    }
}

/* block_q6_K: ql[128], qh[64], scales[16] (int8), d. Weight p: half h =
 * p / 128, i = p % 128; low 4 bits: nibble i / 64 of ql[64 h + i % 64];
 * high 2 bits: bits 2 (i / 32) of qh[32 h + i % 32]; scale p / 16. */
static void deq_q6_k(float *y, const uint8_t *b) {
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = qw_f16_at(b + 208);
    for (int p = 0; p < 256; p++) {
        int h = p / 128, i = p % 128;
        int lo = (ql[64 * h + i % 64] >> (4 * (i / 64))) & 15;
        int hi = (qh[32 * h + i % 32] >> (2 * (i / 32))) & 3;
        y[p] = d * (float)sc[p / 16] * (float)((lo | hi << 4) - 32);
    }
}

typedef void (*deq_fn)(float *y, const uint8_t *b);

/* Each block type's dequantizer; its sizes come from qw_type. */
static const deq_fn k_deq[QW_DTYPE_COUNT] = {
    [QW_Q8_0] = deq_q8_0, [QW_Q4_0] = deq_q4_0, [QW_Q4_1] = deq_q4_1, [QW_Q5_0] = deq_q5_0,
    [QW_Q5_1] = deq_q5_1, [QW_Q4_K] = deq_q4_k, [QW_Q5_K] = deq_q5_k, [QW_Q6_K] = deq_q6_k,
};

void kernels_to_f32_blocks_ref(qw_dtype dt, float *y, const void *x, int64_t n) {
    const int blk = qw_type(dt)->block, bytes = qw_type(dt)->bytes;
    const uint8_t *b = x;
    for (int64_t i = 0; i + blk <= n; i += blk, b += bytes) k_deq[dt](y + i, b);
}

static void matmul_blocks(qw_dtype dt, float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n,
                          const void *W, int64_t k, int64_t o0, int64_t o1) {
    const int blk = qw_type(dt)->block, bytes = qw_type(dt)->bytes;
    const int64_t rb = k / blk * bytes;
    float w[256];
    for (int64_t t = 0; t < n; t++)
        for (int64_t o = o0; o < o1; o++) {
            const float *x = X + t * ldx;
            const uint8_t *b = (const uint8_t *)W + o * rb;
            float acc = 0.0f;
            for (int64_t i = 0; i < k; i += blk, b += bytes) {
                k_deq[dt](w, b);
                for (int j = 0; j < blk; j++) acc += x[i + j] * w[j];
            }
            Y[t * ldy + o] = acc;
        }
}

/* The table's entries for the block types: the loops above, one type each. */
static void matmul_q8_0_ref(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, int64_t k,
                            int64_t o0, int64_t o1) {
    matmul_blocks(QW_Q8_0, Y, ldy, X, ldx, n, W, k, o0, o1);
}
static void to_f32_q8_0_ref(float *y, const void *x, int64_t n) { kernels_to_f32_blocks_ref(QW_Q8_0, y, x, n); }
static void matmul_q4_0_ref(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, int64_t k,
                            int64_t o0, int64_t o1) {
    matmul_blocks(QW_Q4_0, Y, ldy, X, ldx, n, W, k, o0, o1);
}
static void to_f32_q4_0_ref(float *y, const void *x, int64_t n) { kernels_to_f32_blocks_ref(QW_Q4_0, y, x, n); }
static void matmul_q4_1_ref(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, int64_t k,
                            int64_t o0, int64_t o1) {
    matmul_blocks(QW_Q4_1, Y, ldy, X, ldx, n, W, k, o0, o1);
}
static void to_f32_q4_1_ref(float *y, const void *x, int64_t n) { kernels_to_f32_blocks_ref(QW_Q4_1, y, x, n); }
static void matmul_q5_0_ref(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, int64_t k,
                            int64_t o0, int64_t o1) {
    matmul_blocks(QW_Q5_0, Y, ldy, X, ldx, n, W, k, o0, o1);
}
static void to_f32_q5_0_ref(float *y, const void *x, int64_t n) { kernels_to_f32_blocks_ref(QW_Q5_0, y, x, n); }
static void matmul_q5_1_ref(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, int64_t k,
                            int64_t o0, int64_t o1) {
    matmul_blocks(QW_Q5_1, Y, ldy, X, ldx, n, W, k, o0, o1);
}
static void to_f32_q5_1_ref(float *y, const void *x, int64_t n) { kernels_to_f32_blocks_ref(QW_Q5_1, y, x, n); }
static void matmul_q4_k_ref(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, int64_t k,
                            int64_t o0, int64_t o1) {
    matmul_blocks(QW_Q4_K, Y, ldy, X, ldx, n, W, k, o0, o1);
}
static void to_f32_q4_k_ref(float *y, const void *x, int64_t n) { kernels_to_f32_blocks_ref(QW_Q4_K, y, x, n); }
static void matmul_q5_k_ref(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, int64_t k,
                            int64_t o0, int64_t o1) {
    matmul_blocks(QW_Q5_K, Y, ldy, X, ldx, n, W, k, o0, o1);
}
static void to_f32_q5_k_ref(float *y, const void *x, int64_t n) { kernels_to_f32_blocks_ref(QW_Q5_K, y, x, n); }
static void matmul_q6_k_ref(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, int64_t k,
                            int64_t o0, int64_t o1) {
    matmul_blocks(QW_Q6_K, Y, ldy, X, ldx, n, W, k, o0, o1);
}
static void to_f32_q6_k_ref(float *y, const void *x, int64_t n) { kernels_to_f32_blocks_ref(QW_Q6_K, y, x, n); }

/* ---- quantize_q8_0 (at load) ----
 * Follows GGML's reference quantize_row_q8_0 step by step (max |x| of the
 * block, d = amax / 127 rounded to binary16 for storage, q = roundf(x * id)
 * with id = 1 / d from the unrounded d), so a model quantized here and the
 * same weights quantized by llama.cpp hold the same bytes. */
/* roundf (half away from zero) for |v| < 2^31 without a libm call, so the
 * loop stays inline: v - trunc(v) is exact. */
static inline int round_away(float v) {
    int t = (int)v;
    float f = v - (float)t;
    return t + (f >= 0.5f) - (f <= -0.5f); /* branch free: the direction is random */
}

void qw_quantize_q8_0(void *dst, const float *x, int64_t n) {
    uint8_t *out = dst;
    for (int64_t b = 0; b + qw_type(QW_Q8_0)->block <= n; b += qw_type(QW_Q8_0)->block, out += qw_type(QW_Q8_0)->bytes) {
        float amax = 0.0f;
        for (int j = 0; j < qw_type(QW_Q8_0)->block; j++) {
            float a = fabsf(x[b + j]);
            amax = amax > a ? amax : a; /* GGML's MAX(amax, a) */
        }
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        uint16_t h = qw_f32_to_f16(d);
        memcpy(out, &h, sizeof h);
        /* |x * id| <= 127 (+ rounding): within int range for finite x */
        for (int j = 0; j < qw_type(QW_Q8_0)->block; j++) out[2 + j] = (uint8_t)(int8_t)round_away(x[b + j] * id);
    }
}

const qw_kernels kernels_matmul_ref = {
    .matmul =
        {
            [QW_F32] = matmul_f32_ref,
            [QW_F16] = matmul_f16_ref,
            [QW_BF16] = matmul_bf16_ref,
            [QW_Q8_0] = matmul_q8_0_ref,
            [QW_Q4_0] = matmul_q4_0_ref,
            [QW_Q4_1] = matmul_q4_1_ref,
            [QW_Q5_0] = matmul_q5_0_ref,
            [QW_Q5_1] = matmul_q5_1_ref,
            [QW_Q4_K] = matmul_q4_k_ref,
            [QW_Q5_K] = matmul_q5_k_ref,
            [QW_Q6_K] = matmul_q6_k_ref,
        },
    .to_f32 =
        {
            [QW_F32] = to_f32_f32_ref,
            [QW_F16] = to_f32_f16_ref,
            [QW_BF16] = to_f32_bf16_ref,
            [QW_Q8_0] = to_f32_q8_0_ref,
            [QW_Q4_0] = to_f32_q4_0_ref,
            [QW_Q4_1] = to_f32_q4_1_ref,
            [QW_Q5_0] = to_f32_q5_0_ref,
            [QW_Q5_1] = to_f32_q5_1_ref,
            [QW_Q4_K] = to_f32_q4_k_ref,
            [QW_Q5_K] = to_f32_q5_k_ref,
            [QW_Q6_K] = to_f32_q6_k_ref,
        },
    .quantize_q8_0 = qw_quantize_q8_0,
};
