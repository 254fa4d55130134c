/* qdot_ref.c - the plain-C reference of the integer path for the block-32
 * types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) and of quantize_qa8 (kernels.h:
 * "the integer path"). These functions DEFINE the float steps every SIMD
 * twin (qdot_avx2.c, qdot_avx512vnni.c) reproduces bit for bit.
 *
 * Weight block b of a row meets activation block b of a QA8 row (scale dx,
 * quants qx[32], sum s = sum qx). With q the weight's small integers:
 *   Q8_0  isum = sum q * qx                 (q int8)
 *   Q4_0  isum = sum q * qx - 8 * s         (q the nibble 0..15: w = d (q - 8))
 *   Q5_0  isum = sum q * qx - 16 * s        (q the 5-bit value 0..31)
 *   Q4_1, Q5_1  isum = sum q * qx           (q unsigned; w = d q + m)
 * isum is exact in int32 (|isum| <= 32 * 255 * 127). Then, in ascending b,
 * into lane b % 8 of eight float32 accumulators starting at +0:
 *   acc = fmaf(d * dx, (float)isum, acc)            every type
 *   acc = fmaf(m * dx, (float)s, acc)               Q4_1, Q5_1 only
 * where d * dx and m * dx are float32 products (one rounding each) and
 * (float)isum, (float)s are exact (below 2^24). The row's result is the
 * fixed tree ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)).
 * Unsigned weights against signed activations is what vpmaddubsw and
 * vpdpbusd multiply, hence the offsets folded in through s.
 */
#include <math.h>

#include "kernels/kernels_impl.h"

/* ---- quantize_qa8 ---------------------------------------------------- */

/* The rule of kernels.h. nearbyintf rounds half to even (the rounding mode
 * is never changed), as the SIMD levels' cvtps2dq does. */
static void quantize_qa8_ref(void *dst, const float *x, int64_t k) {
    uint8_t *base = dst;
    int64_t nb = k / QW_QA8_BLOCK;
    int8_t *q = (int8_t *)base;
    for (int64_t b = 0; b < nb; b++) {
        const float *xb = x + b * QW_QA8_BLOCK;
        float amax = 0.0f;
        for (int j = 0; j < QW_QA8_BLOCK; j++) {
            float a = fabsf(xb[j]);
            if (a > amax) amax = a;
        }
        float d = amax / 127.0f;
        float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        int32_t s = 0, h0 = 0;
        for (int j = 0; j < QW_QA8_BLOCK; j++) {
            int v = (int)nearbyintf(xb[j] * id);
            q[b * QW_QA8_BLOCK + j] = (int8_t)v;
            s += v;
            if (j == QW_QA8_BLOCK / 2 - 1) h0 = s;
        }
        const int16_t h[2] = {(int16_t)h0, (int16_t)(s - h0)};
        memcpy(base + k + 12 * nb + 4 * b, h, 4);
        memcpy(base + k + 4 * b, &d, 4);
        memcpy(base + k + 4 * nb + 4 * b, &s, 4);
        const float ds = d * (float)s;
        memcpy(base + k + 8 * nb + 4 * b, &ds, 4);
    }
}

/* ---- matmul_q -------------------------------------------------------- */

/* One weight block's part of the dot with one QA8 block: its integer sum
 * (offsets included), scale d and min m (0 for the types without one). */
typedef void (*blk_fn)(const uint8_t *w, const int8_t *qx, int32_t s, int32_t *isum, float *d, float *m);

static void blk_q8_0(const uint8_t *w, const int8_t *qx, int32_t s, int32_t *isum, float *d, float *m) {
    const int8_t *q = (const int8_t *)(w + 2);
    int32_t acc = 0;
    for (int j = 0; j < 32; j++) acc += (int32_t)q[j] * qx[j];
    (void)s;
    *isum = acc, *d = qw_f16_at(w), *m = 0.0f;
}

/* Nibble j of a 32-weight group: low nibble of qs[j] (j < 16), high of qs[j - 16]. */
static inline int nib(const uint8_t *qs, int j) { return j < 16 ? qs[j] & 15 : qs[j - 16] >> 4; }

static void blk_q4_0(const uint8_t *w, const int8_t *qx, int32_t s, int32_t *isum, float *d, float *m) {
    int32_t acc = 0;
    for (int j = 0; j < 32; j++) acc += nib(w + 2, j) * qx[j];
    *isum = acc - 8 * s, *d = qw_f16_at(w), *m = 0.0f;
}

static void blk_q4_1(const uint8_t *w, const int8_t *qx, int32_t s, int32_t *isum, float *d, float *m) {
    int32_t acc = 0;
    for (int j = 0; j < 32; j++) acc += nib(w + 4, j) * qx[j];
    *isum = acc, *d = qw_f16_at(w), *m = qw_f16_at(w + 2);
}

static void blk_q5_0(const uint8_t *w, const int8_t *qx, int32_t s, int32_t *isum, float *d, float *m) {
    uint32_t qh = qw_u32_at(w + 2);
    int32_t acc = 0;
    for (int j = 0; j < 32; j++) acc += (nib(w + 6, j) | (int)((qh >> j) & 1) << 4) * qx[j];
    *isum = acc - 16 * s, *d = qw_f16_at(w), *m = 0.0f;
}

static void blk_q5_1(const uint8_t *w, const int8_t *qx, int32_t s, int32_t *isum, float *d, float *m) {
    uint32_t qh = qw_u32_at(w + 4);
    int32_t acc = 0;
    for (int j = 0; j < 32; j++) acc += (nib(w + 8, j) | (int)((qh >> j) & 1) << 4) * qx[j];
    *isum = acc, *d = qw_f16_at(w), *m = qw_f16_at(w + 2);
}

/* Each type's block function; its sizes come from qw_type, and the min
 * term belongs to the types with a min (m_off >= 0). */
static const blk_fn k_blk[QW_DTYPE_COUNT] = {
    [QW_Q8_0] = blk_q8_0, [QW_Q4_0] = blk_q4_0, [QW_Q4_1] = blk_q4_1, [QW_Q5_0] = blk_q5_0, [QW_Q5_1] = blk_q5_1,
};

static void matmul_q_blocks(qw_dtype dt, float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n,
                            const void *W, int64_t k, int64_t o0, int64_t o1) {
    const int bytes = qw_type(dt)->bytes, has_min = qw_type(dt)->m_off >= 0;
    const int64_t nb = k / 32, rb = nb * bytes;
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *xr = (const uint8_t *)XQ + t * ldxq;
        const int8_t *qx = (const int8_t *)xr;
        for (int64_t o = o0; o < o1; o++) {
            const uint8_t *w = (const uint8_t *)W + o * rb;
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (int64_t b = 0; b < nb; b++, w += bytes) {
                float dx;
                int32_t s, isum;
                float d, m;
                memcpy(&dx, xr + k + 4 * b, 4);
                memcpy(&s, xr + k + 4 * nb + 4 * b, 4);
                k_blk[dt](w, qx + 32 * b, s, &isum, &d, &m);
                acc[b % 8] = fmaf(d * dx, (float)isum, acc[b % 8]);
                if (has_min) acc[b % 8] = fmaf(m * dx, (float)s, acc[b % 8]);
            }
            Y[t * ldy + o] = qw_qdot_tree(acc);
        }
    }
}

static void matmul_q_q8_0_ref(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                              int64_t k, int64_t o0, int64_t o1) {
    matmul_q_blocks(QW_Q8_0, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}
static void matmul_q_q4_0_ref(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                              int64_t k, int64_t o0, int64_t o1) {
    matmul_q_blocks(QW_Q4_0, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}
static void matmul_q_q4_1_ref(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                              int64_t k, int64_t o0, int64_t o1) {
    matmul_q_blocks(QW_Q4_1, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}
static void matmul_q_q5_0_ref(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                              int64_t k, int64_t o0, int64_t o1) {
    matmul_q_blocks(QW_Q5_0, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}
static void matmul_q_q5_1_ref(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                              int64_t k, int64_t o0, int64_t o1) {
    matmul_q_blocks(QW_Q5_1, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}

const qw_kernels kernels_qdot_ref = {
    .quantize_qa8 = quantize_qa8_ref,
    .matmul_q =
        {
            [QW_Q8_0] = matmul_q_q8_0_ref,
            [QW_Q4_0] = matmul_q_q4_0_ref,
            [QW_Q4_1] = matmul_q_q4_1_ref,
            [QW_Q5_0] = matmul_q_q5_0_ref,
            [QW_Q5_1] = matmul_q_q5_1_ref,
        },
};
