/* matmul_neon.c - the float-activation matmul and to_f32 with arm64
 * Advanced SIMD (NEON); the reference is matmul_ref.c.
 *
 * NEON is part of the arm64 base architecture, so no run-time check beyond
 * being compiled for __aarch64__ (cpu.c sets QW_CPU_NEON). The body is under
 * __aarch64__ so the file compiles to nothing on x86-64.
 *
 * Matmul, as in matmul_avx2.c: weights converted to float32 in registers
 * (bf16: SHLL #16, exact; f16: FCVTL, exact including subnormals), f32 FMA
 * (vfmaq_f32), activations never rounded.
 *  - n == 1: the 4-row x 1-token tile, prefetching ahead;
 *  - n > 1: 4-row x 4-token register tile (16 accumulators of 4 floats plus
 *    8 converted weight vectors; arm64 has 32 vector registers).
 * Horizontal sums: two rounds of pairwise adds give 4 row sums in one vector.
 */
#include "kernels/kernels_impl.h"

#if defined(__aarch64__)
#include <arm_neon.h>
#include <math.h>

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 8")

/* 8 weights -> two float32x4 (elements 0-3, 4-7). */
INLINE void ld8_bf16(const uint16_t *p, float32x4_t *lo, float32x4_t *hi) {
    uint16x8_t v = vld1q_u16(p);
    *lo = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(v), 16));
    *hi = vreinterpretq_f32_u32(vshll_high_n_u16(v, 16));
}
INLINE void ld8_f16(const uint16_t *p, float32x4_t *lo, float32x4_t *hi) {
    float16x8_t v = vreinterpretq_f16_u16(vld1q_u16(p));
    *lo = vcvt_f32_f16(vget_low_f16(v));
    *hi = vcvt_high_f32_f16(v);
}
INLINE void ld8_f32(const float *p, float32x4_t *lo, float32x4_t *hi) {
    *lo = vld1q_f32(p);
    *hi = vld1q_f32(p + 4);
}
/* Elements [i, i + 8) / element i of a row of 16/32-bit weights at w, by
 * type DT (F32, F16, BF16: a constant in every specialised caller). */
INLINE int64_t esize(int DT) { return qw_type((qw_dtype)DT)->bytes; }
INLINE void ld8(int DT, const char *w, int64_t i, float32x4_t *lo, float32x4_t *hi) {
    const char *p = w + i * esize(DT);
    if (DT == QW_F32) ld8_f32((const float *)p, lo, hi);
    else if (DT == QW_F16) ld8_f16((const uint16_t *)p, lo, hi);
    else ld8_bf16((const uint16_t *)p, lo, hi);
}
INLINE float ld1(int DT, const char *w, int64_t i) {
    const char *p = w + i * esize(DT);
    return DT == QW_F32 ? ld1_f32((const float *)p) : DT == QW_F16 ? ld1_f16((const uint16_t *)p) : ld1_bf16((const uint16_t *)p);
}

/* {sum(a), sum(b), sum(c), sum(d)} */
INLINE float32x4_t hsum4x4(float32x4_t a, float32x4_t b, float32x4_t c, float32x4_t d) {
    return vpaddq_f32(vpaddq_f32(a, b), vpaddq_f32(c, d));
}

/* Batch invariance: every Y[t][o] is computed by the same operations in the
 * same order whatever n, tile and o0/o1 (a request's logits must not depend
 * on the other requests of a batch): one 4-lane accumulator per (o, t)
 * takes two FMAs per 8 columns (elements 0-3, then 4-7) over the whole row;
 * hsum4x4 reduces it (lane r depends only on input r, so 1-row and 4-row
 * tiles agree); the k % 8 tail is added with scalar fmaf in column order.
 * n = 1 runs the same tile (4 rows x 1 token) with software prefetch. */
/* R rows (1 or 4) x T tokens (1..4) of type DT, full k, weights converted
 * in registers. */
INLINE void tile(int DT, float *Y, int64_t ldy, const float *X, int64_t ldx, const char *w, int64_t k, const int R,
                 const int T) {
    float32x4_t acc[4][4];
    UNROLL for (int r = 0; r < R; r++)
        UNROLL for (int t = 0; t < T; t++) acc[r][t] = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 8 <= k; i += 8) {
        float32x4_t wl[4], wh[4];
        if (T == 1 && (i & 31) == 0)
            UNROLL for (int r = 0; r < R; r++) __builtin_prefetch(w + (r * k + i + 256) * esize(DT));
        UNROLL for (int r = 0; r < R; r++) ld8(DT, w, r * k + i, &wl[r], &wh[r]);
        UNROLL for (int t = 0; t < T; t++) {
            float32x4_t xl = vld1q_f32(X + t * ldx + i), xh = vld1q_f32(X + t * ldx + i + 4);
            UNROLL for (int r = 0; r < R; r++) {
                acc[r][t] = vfmaq_f32(acc[r][t], wl[r], xl);
                acc[r][t] = vfmaq_f32(acc[r][t], wh[r], xh);
            }
        }
    }
    UNROLL for (int t = 0; t < T; t++) {
        float out[4];
        if (R == 4)
            vst1q_f32(out, hsum4x4(acc[0][t], acc[1][t], acc[2][t], acc[3][t]));
        else
            out[0] = vgetq_lane_f32(hsum4x4(acc[0][t], acc[0][t], acc[0][t], acc[0][t]), 0);
        UNROLL for (int r = 0; r < R; r++) {
            for (int64_t j = i; j < k; j++) out[r] = fmaf(X[t * ldx + j], ld1(DT, w, r * k + j), out[r]);
            Y[t * ldy + r] = out[r];
        }
    }
}

INLINE void matmul_elem(int DT, float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, int64_t k,
                        int64_t o0, int64_t o1) {
    const char *w = W;
    const int64_t rs = k * esize(DT); /* row stride in bytes */
    if (n == 1) {
        int64_t o = o0;
        for (; o + 4 <= o1; o += 4) tile(DT, Y + o, ldy, X, ldx, w + o * rs, k, 4, 1);
        for (; o < o1; o++) tile(DT, Y + o, ldy, X, ldx, w + o * rs, k, 1, 1);
        return;
    }
    /* Token blocks whose activations fit in a 256 KiB L2 share. */
    int64_t nb = (256 * 1024) / (k * 4 > 0 ? k * 4 : 1);
    nb = nb < 4 ? 4 : nb - nb % 4;
    for (int64_t t0 = 0; t0 < n; t0 += nb) {
        int64_t t1 = t0 + nb < n ? t0 + nb : n;
        int64_t o = o0;
        for (; o + 4 <= o1; o += 4) {
            int64_t t = t0;
            for (; t + 4 <= t1; t += 4) tile(DT, Y + t * ldy + o, ldy, X + t * ldx, ldx, w + o * rs, k, 4, 4);
            for (; t + 2 <= t1; t += 2) tile(DT, Y + t * ldy + o, ldy, X + t * ldx, ldx, w + o * rs, k, 4, 2);
            for (; t < t1; t++) tile(DT, Y + t * ldy + o, ldy, X + t * ldx, ldx, w + o * rs, k, 4, 1);
        }
        for (; o < o1; o++) {
            int64_t t = t0;
            for (; t + 4 <= t1; t += 4) tile(DT, Y + t * ldy + o, ldy, X + t * ldx, ldx, w + o * rs, k, 1, 4);
            for (; t < t1; t++) tile(DT, Y + t * ldy + o, ldy, X + t * ldx, ldx, w + o * rs, k, 1, 1);
        }
    }
}

static void matmul_f32_neon(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, int64_t k,
                            int64_t o0, int64_t o1) {
    matmul_elem(QW_F32, Y, ldy, X, ldx, n, W, k, o0, o1);
}
static void matmul_f16_neon(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, int64_t k,
                            int64_t o0, int64_t o1) {
    matmul_elem(QW_F16, Y, ldy, X, ldx, n, W, k, o0, o1);
}
static void matmul_bf16_neon(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, int64_t k,
                             int64_t o0, int64_t o1) {
    matmul_elem(QW_BF16, Y, ldy, X, ldx, n, W, k, o0, o1);
}

/* ---- Q8_0 ----
 * Weights converted exactly (int8 -> int16 -> int32 -> float32, times the
 * f16 scale: 8 x 11 significant bits fit float32) and then used exactly as
 * the f32 tile uses its weights (two FMAs per 8 columns, hsum4x4), so the
 * result equals matmul_f32_neon of the dequantized weights bit for bit and
 * is batch invariant the same way. k is a multiple of 32 (no tail). */
INLINE void ld8_q8(const uint8_t *q, float32x4_t d, float32x4_t *lo, float32x4_t *hi) {
    int16x8_t v = vmovl_s8(vld1_s8((const int8_t *)q));
    *lo = vmulq_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(v))), d);
    *hi = vmulq_f32(vcvtq_f32_s32(vmovl_high_s16(v)), d);
}

INLINE void tile_q8(float *Y, int64_t ldy, const float *X, int64_t ldx, const uint8_t *w, int64_t rb,
                    int64_t k, const int R, const int T) {
    float32x4_t acc[4][4];
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int t = 0; t < T; t++) acc[r][t] = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < k; i += qw_type(QW_Q8_0)->block) {
        const uint8_t *b[4];
        float32x4_t d[4];
        UNROLL for (int r = 0; r < R; r++) {
            b[r] = w + r * rb + i / qw_type(QW_Q8_0)->block * qw_type(QW_Q8_0)->bytes;
            if (T == 1) __builtin_prefetch(b[r] + 512);
            d[r] = vdupq_n_f32(qw_f16_at(b[r]));
        }
        UNROLL for (int s = 0; s < 4; s++) {
            float32x4_t wl[4], wh[4];
            UNROLL for (int r = 0; r < R; r++) ld8_q8(b[r] + 2 + 8 * s, d[r], &wl[r], &wh[r]);
            UNROLL for (int t = 0; t < T; t++) {
                float32x4_t xl = vld1q_f32(X + t * ldx + i + 8 * s), xh = vld1q_f32(X + t * ldx + i + 8 * s + 4);
                UNROLL for (int r = 0; r < R; r++) {
                    acc[r][t] = vfmaq_f32(acc[r][t], wl[r], xl);
                    acc[r][t] = vfmaq_f32(acc[r][t], wh[r], xh);
                }
            }
        }
    }
    UNROLL for (int t = 0; t < T; t++) {
        float out[4];
        if (R == 4)
            vst1q_f32(out, hsum4x4(acc[0][t], acc[1][t], acc[2][t], acc[3][t]));
        else
            out[0] = vgetq_lane_f32(hsum4x4(acc[0][t], acc[0][t], acc[0][t], acc[0][t]), 0);
        UNROLL for (int r = 0; r < R; r++) Y[t * ldy + r] = out[r];
    }
}

static void matmul_q8_0_neon(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W,
                             int64_t k, int64_t o0, int64_t o1) {
    const uint8_t *w = W;
    const int64_t rb = k / qw_type(QW_Q8_0)->block * qw_type(QW_Q8_0)->bytes;
    int64_t nb = (256 * 1024) / (k * 4 > 0 ? k * 4 : 1);
    nb = nb < 4 ? 4 : nb - nb % 4;
    for (int64_t t0 = 0; t0 < n; t0 += nb) {
        int64_t t1 = t0 + nb < n ? t0 + nb : n;
        for (int64_t o = o0; o < o1;) {
            int R = o + 4 <= o1 ? 4 : 1;
            const uint8_t *wr = w + o * rb;
            int64_t t = t0;
            for (; t + 4 <= t1; t += 4) {
                if (R == 4) tile_q8(Y + t * ldy + o, ldy, X + t * ldx, ldx, wr, rb, k, 4, 4);
                else tile_q8(Y + t * ldy + o, ldy, X + t * ldx, ldx, wr, rb, k, 1, 4);
            }
            for (; t < t1; t++) {
                if (R == 4) tile_q8(Y + t * ldy + o, ldy, X + t * ldx, ldx, wr, rb, k, 4, 1);
                else tile_q8(Y + t * ldy + o, ldy, X + t * ldx, ldx, wr, rb, k, 1, 1);
            }
            o += R;
        }
    }
}

/* ---- 4/5/6-bit block types (Q4_0 ... Q6_K) ----
 * Promise: a quantized file gives bitwise the logits of its F32 twin, so
 * each type computes exactly what matmul_f32_neon computes on the
 * dequantized weights. Rows are converted exactly (the reference's to_f32,
 * scalar: no NEON converters yet) QCH columns at a time into a buffer, and
 * each (row, token) accumulator takes the same two FMAs per 8 columns in
 * column order as tile_f32, then the same hsum4x4; between chunks the
 * accumulators wait in memory (exact), so a 4-row chunk is converted once
 * for up to QNB tokens. k is whole blocks, a multiple of 32: no scalar
 * tail. Batch invariant: nothing depends on n or on a token's place. */
enum { QCH = 256, QNB = 32 };

/* R rows (1 or 4) x nt tokens over len columns of the converted chunk wb:
 * acc[r][t] += the chunk's products, tile_f32's operation order. */
INLINE void chunk_fma(float32x4_t acc[4][QNB], const float wb[4][QCH], const float *X, int64_t ldx, int64_t nt,
                      int64_t len, const int R) {
    for (int64_t t = 0; t < nt; t++) {
        float32x4_t a[4];
        UNROLL for (int r = 0; r < R; r++) a[r] = acc[r][t];
        for (int64_t j = 0; j < len; j += 8) {
            float32x4_t xl = vld1q_f32(X + t * ldx + j), xh = vld1q_f32(X + t * ldx + j + 4);
            UNROLL for (int r = 0; r < R; r++) {
                a[r] = vfmaq_f32(a[r], vld1q_f32(wb[r] + j), xl);
                a[r] = vfmaq_f32(a[r], vld1q_f32(wb[r] + j + 4), xh);
            }
        }
        UNROLL for (int r = 0; r < R; r++) acc[r][t] = a[r];
    }
}

static void matmul_deq(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const uint8_t *W, int64_t k,
                       int64_t o0, int64_t o1, qw_dtype dt) {
    const int64_t rb = qw_dtype_row_bytes(dt, k);
    float wb[4][QCH];
    float32x4_t acc[4][QNB];
    for (int64_t t0 = 0; t0 < n; t0 += QNB) {
        const int64_t nt = n - t0 < QNB ? n - t0 : QNB;
        const float *x = X + t0 * ldx;
        for (int64_t o = o0; o < o1;) {
            const int R = o + 4 <= o1 ? 4 : 1;
            for (int r = 0; r < R; r++)
                for (int64_t t = 0; t < nt; t++) acc[r][t] = vdupq_n_f32(0.0f);
            for (int64_t c0 = 0; c0 < k; c0 += QCH) {
                const int64_t len = k - c0 < QCH ? k - c0 : QCH, coff = qw_dtype_row_bytes(dt, c0);
                for (int r = 0; r < R; r++) kernels_to_f32_blocks_ref(dt, wb[r], W + (o + r) * rb + coff, len);
                if (R == 4) chunk_fma(acc, (const float(*)[QCH])wb, x + c0, ldx, nt, len, 4);
                else chunk_fma(acc, (const float(*)[QCH])wb, x + c0, ldx, nt, len, 1);
            }
            for (int64_t t = 0; t < nt; t++) {
                float out[4];
                if (R == 4)
                    vst1q_f32(out, hsum4x4(acc[0][t], acc[1][t], acc[2][t], acc[3][t]));
                else
                    out[0] = vgetq_lane_f32(hsum4x4(acc[0][t], acc[0][t], acc[0][t], acc[0][t]), 0);
                for (int r = 0; r < R; r++) Y[(t0 + t) * ldy + o + r] = out[r];
            }
            o += R;
        }
    }
}

static void matmul_q4_0_neon(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, int64_t k,
                             int64_t o0, int64_t o1) {
    matmul_deq(Y, ldy, X, ldx, n, W, k, o0, o1, QW_Q4_0);
}
static void matmul_q4_1_neon(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, int64_t k,
                             int64_t o0, int64_t o1) {
    matmul_deq(Y, ldy, X, ldx, n, W, k, o0, o1, QW_Q4_1);
}
static void matmul_q5_0_neon(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, int64_t k,
                             int64_t o0, int64_t o1) {
    matmul_deq(Y, ldy, X, ldx, n, W, k, o0, o1, QW_Q5_0);
}
static void matmul_q5_1_neon(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, int64_t k,
                             int64_t o0, int64_t o1) {
    matmul_deq(Y, ldy, X, ldx, n, W, k, o0, o1, QW_Q5_1);
}
static void matmul_q4_k_neon(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, int64_t k,
                             int64_t o0, int64_t o1) {
    matmul_deq(Y, ldy, X, ldx, n, W, k, o0, o1, QW_Q4_K);
}
static void matmul_q5_k_neon(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, int64_t k,
                             int64_t o0, int64_t o1) {
    matmul_deq(Y, ldy, X, ldx, n, W, k, o0, o1, QW_Q5_K);
}
static void matmul_q6_k_neon(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, int64_t k,
                             int64_t o0, int64_t o1) {
    matmul_deq(Y, ldy, X, ldx, n, W, k, o0, o1, QW_Q6_K);
}

static void to_f32_q8_0_neon(float *y, const void *x, int64_t n) {
    const uint8_t *b = x;
    for (int64_t i = 0; i < n; i += qw_type(QW_Q8_0)->block, b += qw_type(QW_Q8_0)->bytes) {
        float32x4_t d = vdupq_n_f32(qw_f16_at(b));
        for (int s = 0; s < 4; s++) {
            float32x4_t lo, hi;
            ld8_q8(b + 2 + 8 * s, d, &lo, &hi);
            vst1q_f32(y + i + 8 * s, lo);
            vst1q_f32(y + i + 8 * s + 4, hi);
        }
    }
}

static void to_f32_bf16_neon(float *y, const void *x, int64_t n) {
    const uint16_t *h = x;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        float32x4_t lo, hi;
        ld8_bf16(h + i, &lo, &hi);
        vst1q_f32(y + i, lo);
        vst1q_f32(y + i + 4, hi);
    }
    for (; i < n; i++) y[i] = qw_bf16_to_f32(h[i]);
}

static void to_f32_f16_neon(float *y, const void *x, int64_t n) {
    const uint16_t *h = x;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        float32x4_t lo, hi;
        ld8_f16(h + i, &lo, &hi);
        vst1q_f32(y + i, lo);
        vst1q_f32(y + i + 4, hi);
    }
    for (; i < n; i++) y[i] = qw_f16_to_f32(h[i]);
}

/* Every matmul entry is this file's: one summation order for all types. */
const qw_kernels kernels_matmul_neon = {
    .matmul =
        {
            [QW_F32] = matmul_f32_neon,
            [QW_F16] = matmul_f16_neon,
            [QW_BF16] = matmul_bf16_neon,
            [QW_Q8_0] = matmul_q8_0_neon,
            [QW_Q4_0] = matmul_q4_0_neon,
            [QW_Q4_1] = matmul_q4_1_neon,
            [QW_Q5_0] = matmul_q5_0_neon,
            [QW_Q5_1] = matmul_q5_1_neon,
            [QW_Q4_K] = matmul_q4_k_neon,
            [QW_Q5_K] = matmul_q5_k_neon,
            [QW_Q6_K] = matmul_q6_k_neon,
        },
    .to_f32 =
        {
            [QW_F16] = to_f32_f16_neon,
            [QW_BF16] = to_f32_bf16_neon,
            [QW_Q8_0] = to_f32_q8_0_neon,
        },
};

#endif
