/* kquant_ref.c - the integer path's plain-C reference for the K-quants
 * Q4_K, Q5_K, Q6_K: matmul_q of weight rows with QA8 activation rows
 * (kernels.h, "the integer path"). This file DEFINES the float steps; the
 * SIMD levels (kquant_avx2.c, kquant_avx512vnni.c, beside it) reproduce them
 * bit for bit, and tests/kernels/test_qdot_kquant.c checks that they do.
 *
 * A super-block B of 256 weights holds 8 sub-blocks of 32; sub-block j is
 * the activation row's QA8 block b = 8B + j (scale dx_b, quants qx, sum s_b,
 * ds_b = dx_b * s_b) and goes into accumulator lane j (= b % 8). Per
 * sub-block, the integer part first (exact in int32), then the float steps:
 *
 *   Q4_K, Q5_K   w = (d * sc_j) * q - dmin * mn_j,  q in 0..15 (0..31)
 *     dot  = sum_l q_l * qx_l                |dot| <= 32*31*127 < 2^17
 *     dsc  = d * (float)sc_j,  dmn = dmin * (float)mn_j   (one rounding each)
 *     acc[j] = fmaf(dx_b, dsc * (float)dot, acc[j]);
 *     acc[j] = fmaf(-dmn, ds_b, acc[j]);
 *   dsc and dmn belong to the weight row alone, ds_b to the activation row
 *   alone, so a kernel forms them once per row (or tile) and once per
 *   token: per sub-block and (row, token) pair there remain one conversion,
 *   one multiply and two fma. (Until 2026-12 the steps were
 *   fmaf(d * dx_b, (float)(sc_j * dot)) and fmaf(-(dmin * dx_b),
 *   (float)(mn_j * s_b)): the products d * dx_b and dmin * dx_b, one per
 *   pair and sub-block, made the repacked prefill GEMM run 8 float steps
 *   against its 8 vpdpbusd; docs/PERFORMANCE.md.)
 *
 *   Q6_K         w = (d * sc) * (q - 32),  q in 0..63, sc int8 per 16
 *     isum = sc_2j * sum_{l<16} (q_l - 32) qx_l
 *          + sc_2j+1 * sum_{l>=16} (q_l - 32) qx_l   |isum| <= 128*32*127*32 < 2^24
 *     acc[j] = fmaf(d * dx_b, (float)isum, acc[j]);
 *
 * Every (float) conversion is exact (|v| < 2^24), so it does not depend on
 * how a SIMD level forms the integer (unsigned quants and a separate
 * offset term give the same isum); d * dx_b and dmin * dx_b round once,
 * each fmaf once more. Lanes start at +0 and the result
 *   ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))
 * is stored to Y. Nothing depends on n, t's place in the batch or o0/o1.
 */
#include <math.h>

#include "kernels/kernels_impl.h"

/* One QA8 activation row (kernels.h): quants, then k/32 float scales, k/32
 * int32 sums and k/32 float products d * s; read with memcpy (the
 * reference assumes no alignment). */
typedef struct {
    const int8_t *q;
    const uint8_t *d, *s, *ds;
} qa8_row;

static inline qa8_row qa8_at(const void *XQ, int64_t ldxq, int64_t t, int64_t k) {
    const uint8_t *r = (const uint8_t *)XQ + t * ldxq;
    qa8_row x = {(const int8_t *)r, r + k, r + k + 4 * (k / QW_QA8_BLOCK), r + k + 8 * (k / QW_QA8_BLOCK)};
    return x;
}
static inline float qa8_ds(qa8_row x, int64_t b) {
    float v;
    memcpy(&v, x.ds + 4 * b, sizeof v);
    return v;
}
static inline float qa8_d(qa8_row x, int64_t b) {
    float v;
    memcpy(&v, x.d + 4 * b, sizeof v);
    return v;
}

/* Q4_K / Q5_K sub-block j of super-block blk (first QA8 block b0 = 8B):
 * sub-block j is nibble j % 2 of qs[32 (j / 2) + l]; Q5_K's bit 4 of weight
 * l is bit j of qh[l]. */
static void superblock_q45_k(float acc[8], const uint8_t *blk, qa8_row x, int64_t b0, int five) {
    const float d = qw_f16_at(blk), dmin = qw_f16_at(blk + 2);
    const uint8_t *qh = blk + 16, *qs = blk + (five ? 48 : 16);
    for (int j = 0; j < 8; j++) {
        int sc, mn;
        qw_kquant_scale_min(blk + 4, j, &sc, &mn);
        const int8_t *qx = x.q + 32 * (b0 + j);
        int32_t dot = 0;
        for (int l = 0; l < 32; l++) {
            int q = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 15;
            if (five) q |= ((qh[l] >> j) & 1) << 4;
            dot += q * qx[l];
        }
        const float dsc = d * (float)sc, dmn = dmin * (float)mn;
        acc[j] = fmaf(qa8_d(x, b0 + j), dsc * (float)dot, acc[j]);
        acc[j] = fmaf(-dmn, qa8_ds(x, b0 + j), acc[j]);
    }
}

static void superblock_q4_k(float acc[8], const uint8_t *blk, qa8_row x, int64_t b0) {
    superblock_q45_k(acc, blk, x, b0, 0);
}
static void superblock_q5_k(float acc[8], const uint8_t *blk, qa8_row x, int64_t b0) {
    superblock_q45_k(acc, blk, x, b0, 1);
}

/* Q6_K: ql[128], qh[64], sc[16] (int8), d. Weight p = 32 j + l: half
 * h = p / 128, i = p % 128; low 4 bits are nibble i / 64 of ql[64 h + i % 64],
 * high 2 bits are bits 2 (i / 32) of qh[32 h + i % 32]; scale sc[p / 16]. */
static void superblock_q6_k(float acc[8], const uint8_t *blk, qa8_row x, int64_t b0) {
    const uint8_t *ql = blk, *qh = blk + 128;
    const int8_t *sc = (const int8_t *)(blk + 192);
    const float d = qw_f16_at(blk + 208);
    for (int j = 0; j < 8; j++) {
        const int8_t *qx = x.q + 32 * (b0 + j);
        int32_t half[2] = {0, 0};
        for (int l = 0; l < 32; l++) {
            int p = 32 * j + l, h = p / 128, i = p % 128;
            int lo = (ql[64 * h + i % 64] >> (4 * (i / 64))) & 15;
            int hi = (qh[32 * h + i % 32] >> (2 * (i / 32))) & 3;
            half[l / 16] += ((lo | hi << 4) - 32) * qx[l];
        }
        const int32_t isum = sc[2 * j] * half[0] + sc[2 * j + 1] * half[1];
        acc[j] = fmaf(d * qa8_d(x, b0 + j), (float)isum, acc[j]);
    }
}

typedef void (*superblock_fn)(float acc[8], const uint8_t *blk, qa8_row x, int64_t b0);

static void matmul_q_kquant(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                            int64_t k, int64_t o0, int64_t o1, superblock_fn sb, qw_dtype dt) {
    const int bytes = qw_type(dt)->bytes;
    const int64_t nsb = k / qw_type(QW_Q4_K)->block, rb = nsb * bytes;
    for (int64_t t = 0; t < n; t++) {
        const qa8_row x = qa8_at(XQ, ldxq, t, k);
        for (int64_t o = o0; o < o1; o++) {
            const uint8_t *w = (const uint8_t *)W + o * rb;
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (int64_t B = 0; B < nsb; B++) sb(acc, w + B * bytes, x, 8 * B);
            Y[t * ldy + o] = qw_qdot_tree(acc);
        }
    }
}

static void matmul_q_q4_k_ref(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                              int64_t k, int64_t o0, int64_t o1) {
    matmul_q_kquant(Y, ldy, XQ, ldxq, n, W, k, o0, o1, superblock_q4_k, QW_Q4_K);
}
static void matmul_q_q5_k_ref(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                              int64_t k, int64_t o0, int64_t o1) {
    matmul_q_kquant(Y, ldy, XQ, ldxq, n, W, k, o0, o1, superblock_q5_k, QW_Q5_K);
}
static void matmul_q_q6_k_ref(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                              int64_t k, int64_t o0, int64_t o1) {
    matmul_q_kquant(Y, ldy, XQ, ldxq, n, W, k, o0, o1, superblock_q6_k, QW_Q6_K);
}

const qw_kernels kernels_kquant_ref = {
    .matmul_q =
        {
            [QW_Q4_K] = matmul_q_q4_k_ref,
            [QW_Q5_K] = matmul_q_q5_k_ref,
            [QW_Q6_K] = matmul_q_q6_k_ref,
        },
};
