/* quant_ref.c - the plain-C reference of GGML's 4/5/6-bit block types:
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
 * order, like the other reference matmuls.
 */
#include "kernels/kernels_impl.h"

static inline float f16_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return qw_f16_to_f32(h);
}

static inline uint32_t u32_at(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* block_q4_0: d, qs[16]. Weight j < 16: low nibble of qs[j]; j >= 16: high
 * nibble of qs[j - 16]. */
static void deq_q4_0(float *y, const uint8_t *b) {
    float d = f16_at(b);
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)((b[2 + j] & 15) - 8);
        y[j + 16] = d * (float)((b[2 + j] >> 4) - 8);
    }
}

/* block_q4_1: d, m, qs[16]. */
static void deq_q4_1(float *y, const uint8_t *b) {
    float d = f16_at(b), m = f16_at(b + 2);
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)(b[4 + j] & 15) + m;
        y[j + 16] = d * (float)(b[4 + j] >> 4) + m;
    }
}

/* block_q5_0: d, qh (uint32 little endian: bit j is bit 4 of weight j), qs[16]. */
static void deq_q5_0(float *y, const uint8_t *b) {
    float d = f16_at(b);
    uint32_t qh = u32_at(b + 2);
    for (int j = 0; j < 16; j++) {
        int lo = (b[6 + j] & 15) | (int)((qh >> j) & 1) << 4;
        int hi = (b[6 + j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
        y[j] = d * (float)(lo - 16);
        y[j + 16] = d * (float)(hi - 16);
    }
}

/* block_q5_1: d, m, qh, qs[16]. */
static void deq_q5_1(float *y, const uint8_t *b) {
    float d = f16_at(b), m = f16_at(b + 2);
    uint32_t qh = u32_at(b + 4);
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
    float d = f16_at(b), dmin = f16_at(b + 2);
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
    float d = f16_at(b), dmin = f16_at(b + 2);
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
    float d = f16_at(b + 208);
    for (int p = 0; p < 256; p++) {
        int h = p / 128, i = p % 128;
        int lo = (ql[64 * h + i % 64] >> (4 * (i / 64))) & 15;
        int hi = (qh[32 * h + i % 32] >> (2 * (i / 32))) & 3;
        y[p] = d * (float)sc[p / 16] * (float)((lo | hi << 4) - 32);
    }
}

typedef void (*deq_fn)(float *y, const uint8_t *b);

static void to_f32_blocks(float *y, const void *x, int64_t n, deq_fn deq, int blk, int bytes) {
    const uint8_t *b = x;
    for (int64_t i = 0; i + blk <= n; i += blk, b += bytes) deq(y + i, b);
}

static void matmul_blocks(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W,
                          int64_t k, int64_t o0, int64_t o1, deq_fn deq, int blk, int bytes) {
    const int64_t rb = k / blk * bytes;
    float w[256];
    for (int64_t t = 0; t < n; t++)
        for (int64_t o = o0; o < o1; o++) {
            const float *x = X + t * ldx;
            const uint8_t *b = (const uint8_t *)W + o * rb;
            float acc = 0.0f;
            for (int64_t i = 0; i < k; i += blk, b += bytes) {
                deq(w, b);
                for (int j = 0; j < blk; j++) acc += x[i + j] * w[j];
            }
            Y[t * ldy + o] = acc;
        }
}

#define REF(SUF, BLK, BYTES)                                                                                      \
    void kernels_to_f32_##SUF##_ref(float *y, const void *x, int64_t n) {                                         \
        to_f32_blocks(y, x, n, deq_##SUF, BLK, BYTES);                                                            \
    }                                                                                                             \
    static void matmul_##SUF##_ref(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, \
                                   int64_t k, int64_t o0, int64_t o1) {                                           \
        matmul_blocks(Y, ldy, X, ldx, n, W, k, o0, o1, deq_##SUF, BLK, BYTES);                                   \
    }
REF(q4_0, 32, 18)
REF(q4_1, 32, 20)
REF(q5_0, 32, 22)
REF(q5_1, 32, 24)
REF(q4_k, 256, 144)
REF(q5_k, 256, 176)
REF(q6_k, 256, 210)

void kernels_fill_quant_ref(qw_kernels *k) {
#define SET(T, SUF)                    \
    k->matmul[T] = matmul_##SUF##_ref; \
    k->to_f32[T] = kernels_to_f32_##SUF##_ref;
    SET(QW_Q4_0, q4_0)
    SET(QW_Q4_1, q4_1)
    SET(QW_Q5_0, q5_0)
    SET(QW_Q5_1, q5_1)
    SET(QW_Q4_K, q4_k)
    SET(QW_Q5_K, q5_k)
    SET(QW_Q6_K, q6_k)
#undef SET
}
