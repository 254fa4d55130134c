/* kernels_neon.c - arm64 Advanced SIMD (NEON) kernels.
 *
 * NEON is part of the arm64 base architecture, so no run-time check beyond
 * being compiled for __aarch64__ (cpu.c sets QW_CPU_NEON). The body is under
 * __aarch64__ so the file compiles to a stub on x86-64.
 *
 * Matmul, as in kernels_avx2.c: weights converted to float32 in registers
 * (bf16: SHLL #16, exact; f16: FCVTL, exact including subnormals), f32 FMA
 * (vfmaq_f32), activations never rounded.
 *  - n == 1: the 4-row x 1-token tile, prefetching ahead;
 *  - n > 1: 4-row x 4-token register tile (16 accumulators of 4 floats plus
 *    8 converted weight vectors; arm64 has 32 vector registers).
 * Horizontal sums: two rounds of pairwise adds give 4 row sums in one vector.
 *
 * exp: the shared polynomial expf of simd_exp.h, the same operations as the
 * AVX2 level (1.25 ulp measured on x86).
 */
#include "kernels/kernels_impl.h"

#if defined(__aarch64__)
#include <arm_neon.h>
#include <math.h>

#include "kernels/simd_exp.h"

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
#define MATMUL(SUF, WT, LD8, LD1)                                                                \
    /* R rows (1 or 4) x T tokens (1..4), full k, weights converted in registers. */             \
    INLINE void tile_##SUF(float *Y, int64_t ldy, const float *X, int64_t ldx, const WT *w,      \
                           int64_t k, const int R, const int T) {                                \
        float32x4_t acc[4][4];                                                                   \
        UNROLL for (int r = 0; r < R; r++) UNROLL for (int t = 0; t < T; t++) acc[r][t] =        \
            vdupq_n_f32(0.0f);                                                                   \
        int64_t i = 0;                                                                           \
        for (; i + 8 <= k; i += 8) {                                                             \
            float32x4_t wl[4], wh[4];                                                            \
            if (T == 1 && (i & 31) == 0)                                                         \
                UNROLL for (int r = 0; r < R; r++) __builtin_prefetch(w + r * k + i + 256);       \
            UNROLL for (int r = 0; r < R; r++) LD8(w + r * k + i, &wl[r], &wh[r]);               \
            UNROLL for (int t = 0; t < T; t++) {                                                 \
                float32x4_t xl = vld1q_f32(X + t * ldx + i), xh = vld1q_f32(X + t * ldx + i + 4); \
                UNROLL for (int r = 0; r < R; r++) {                                             \
                    acc[r][t] = vfmaq_f32(acc[r][t], wl[r], xl);                                 \
                    acc[r][t] = vfmaq_f32(acc[r][t], wh[r], xh);                                 \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
        UNROLL for (int t = 0; t < T; t++) {                                                     \
            float out[4];                                                                        \
            if (R == 4)                                                                          \
                vst1q_f32(out, hsum4x4(acc[0][t], acc[1][t], acc[2][t], acc[3][t]));             \
            else                                                                                 \
                out[0] = vgetq_lane_f32(hsum4x4(acc[0][t], acc[0][t], acc[0][t], acc[0][t]), 0); \
            UNROLL for (int r = 0; r < R; r++) {                                                 \
                for (int64_t j = i; j < k; j++) out[r] = fmaf(X[t * ldx + j], LD1(w + r * k + j), out[r]); \
                Y[t * ldy + r] = out[r];                                                         \
            }                                                                                    \
        }                                                                                        \
    }                                                                                            \
    static void tile_##SUF##_4_4(float *Y, int64_t ldy, const float *X, int64_t ldx,             \
                                 const WT *w, int64_t k) {                                       \
        tile_##SUF(Y, ldy, X, ldx, w, k, 4, 4);                                                  \
    }                                                                                            \
    static void tile_##SUF##_4_2(float *Y, int64_t ldy, const float *X, int64_t ldx,             \
                                 const WT *w, int64_t k) {                                       \
        tile_##SUF(Y, ldy, X, ldx, w, k, 4, 2);                                                  \
    }                                                                                            \
    static void tile_##SUF##_4_1(float *Y, int64_t ldy, const float *X, int64_t ldx,             \
                                 const WT *w, int64_t k) {                                       \
        tile_##SUF(Y, ldy, X, ldx, w, k, 4, 1);                                                  \
    }                                                                                            \
    static void tile_##SUF##_1_4(float *Y, int64_t ldy, const float *X, int64_t ldx,             \
                                 const WT *w, int64_t k) {                                       \
        tile_##SUF(Y, ldy, X, ldx, w, k, 1, 4);                                                  \
    }                                                                                            \
    static void tile_##SUF##_1_1(float *Y, int64_t ldy, const float *X, int64_t ldx,             \
                                 const WT *w, int64_t k) {                                       \
        tile_##SUF(Y, ldy, X, ldx, w, k, 1, 1);                                                  \
    }                                                                                            \
    static void matmul_##SUF##_neon(float *Y, int64_t ldy, const float *X, int64_t ldx,          \
                                    int64_t n, const void *W, int64_t k, int64_t o0,             \
                                    int64_t o1) {                                                \
        const WT *w = W;                                                                         \
        if (n == 1) {                                                                            \
            int64_t o = o0;                                                                      \
            for (; o + 4 <= o1; o += 4) tile_##SUF##_4_1(Y + o, ldy, X, ldx, w + o * k, k);     \
            for (; o < o1; o++) tile_##SUF##_1_1(Y + o, ldy, X, ldx, w + o * k, k);              \
            return;                                                                              \
        }                                                                                        \
        /* Token blocks whose activations fit in a 256 KiB L2 share. */                          \
        int64_t nb = (256 * 1024) / (k * 4 > 0 ? k * 4 : 1);                                     \
        nb = nb < 4 ? 4 : nb - nb % 4;                                                           \
        for (int64_t t0 = 0; t0 < n; t0 += nb) {                                                 \
            int64_t t1 = t0 + nb < n ? t0 + nb : n;                                              \
            int64_t o = o0;                                                                      \
            for (; o + 4 <= o1; o += 4) {                                                        \
                int64_t t = t0;                                                                  \
                for (; t + 4 <= t1; t += 4)                                                      \
                    tile_##SUF##_4_4(Y + t * ldy + o, ldy, X + t * ldx, ldx, w + o * k, k);      \
                for (; t + 2 <= t1; t += 2)                                                      \
                    tile_##SUF##_4_2(Y + t * ldy + o, ldy, X + t * ldx, ldx, w + o * k, k);      \
                for (; t < t1; t++)                                                              \
                    tile_##SUF##_4_1(Y + t * ldy + o, ldy, X + t * ldx, ldx, w + o * k, k);      \
            }                                                                                    \
            for (; o < o1; o++) {                                                                \
                int64_t t = t0;                                                                  \
                for (; t + 4 <= t1; t += 4)                                                      \
                    tile_##SUF##_1_4(Y + t * ldy + o, ldy, X + t * ldx, ldx, w + o * k, k);      \
                for (; t < t1; t++)                                                              \
                    tile_##SUF##_1_1(Y + t * ldy + o, ldy, X + t * ldx, ldx, w + o * k, k);      \
            }                                                                                    \
        }                                                                                        \
    }

MATMUL(f32, float, ld8_f32, ld1_f32)
MATMUL(f16, uint16_t, ld8_f16, ld1_f16)
MATMUL(bf16, uint16_t, ld8_bf16, ld1_bf16)

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
    for (int64_t i = 0; i < k; i += QW_Q8_0_BLOCK) {
        const uint8_t *b[4];
        float32x4_t d[4];
        UNROLL for (int r = 0; r < R; r++) {
            b[r] = w + r * rb + i / QW_Q8_0_BLOCK * QW_Q8_0_BYTES;
            if (T == 1) __builtin_prefetch(b[r] + 512);
            d[r] = vdupq_n_f32(qw_q8_0_scale(b[r]));
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
    const int64_t rb = k / QW_Q8_0_BLOCK * QW_Q8_0_BYTES;
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
typedef void (*deq_fn)(float *y, const void *x, int64_t n);

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
                       int64_t o0, int64_t o1, qw_dtype dt, deq_fn deq) {
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
                for (int r = 0; r < R; r++) deq(wb[r], W + (o + r) * rb + coff, len);
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

#define DMATMUL(SUF, DT)                                                                                          \
    static void matmul_##SUF##_neon(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, \
                                    int64_t k, int64_t o0, int64_t o1) {                                          \
        matmul_deq(Y, ldy, X, ldx, n, W, k, o0, o1, DT, kernels_to_f32_##SUF##_ref);                             \
    }
DMATMUL(q4_0, QW_Q4_0)
DMATMUL(q4_1, QW_Q4_1)
DMATMUL(q5_0, QW_Q5_0)
DMATMUL(q5_1, QW_Q5_1)
DMATMUL(q4_k, QW_Q4_K)
DMATMUL(q5_k, QW_Q5_K)
DMATMUL(q6_k, QW_Q6_K)
#undef DMATMUL

static void to_f32_q8_0_neon(float *y, const void *x, int64_t n) {
    const uint8_t *b = x;
    for (int64_t i = 0; i < n; i += QW_Q8_0_BLOCK, b += QW_Q8_0_BYTES) {
        float32x4_t d = vdupq_n_f32(qw_q8_0_scale(b));
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

static float dot_neon(const float *a, const float *b, int64_t n) {
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
        s1 = vfmaq_f32(s1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
        s2 = vfmaq_f32(s2, vld1q_f32(a + i + 8), vld1q_f32(b + i + 8));
        s3 = vfmaq_f32(s3, vld1q_f32(a + i + 12), vld1q_f32(b + i + 12));
    }
    for (; i + 4 <= n; i += 4) s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
    float s = vaddvq_f32(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

static void axpy_neon(float *y, float a, const float *x, int64_t n) {
    float32x4_t av = vdupq_n_f32(a);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vfmaq_f32(vld1q_f32(y + i), av, vld1q_f32(x + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

static void scale_neon(float *y, float a, int64_t n) {
    float32x4_t av = vdupq_n_f32(a);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_f32(vld1q_f32(y + i), av));
    for (; i < n; i++) y[i] *= a;
}

static void add_neon(float *y, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vaddq_f32(vld1q_f32(y + i), vld1q_f32(x + i)));
    for (; i < n; i++) y[i] += x[i];
}

static void rmsnorm_neon(float *y, const float *x, const float *w, int64_t n, float eps) {
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        float32x4_t a = vld1q_f32(x + i), b = vld1q_f32(x + i + 4);
        s0 = vfmaq_f32(s0, a, a);
        s1 = vfmaq_f32(s1, b, b);
    }
    float ss = vaddvq_f32(vaddq_f32(s0, s1));
    for (; i < n; i++) ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    float32x4_t iv = vdupq_n_f32(inv);
    for (i = 0; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vmulq_f32(vmulq_f32(vld1q_f32(x + i), iv), vld1q_f32(w + i)));
    for (; i < n; i++) y[i] = x[i] * inv * w[i];
}

static void silu_mul_neon(float *g, const float *u, int64_t n) {
    const float32x4_t one = vdupq_n_f32(1.0f);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t x = vld1q_f32(g + i);
        float32x4_t s = vdivq_f32(x, vaddq_f32(one, qw_exp4_neon(vnegq_f32(x))));
        vst1q_f32(g + i, vmulq_f32(s, vld1q_f32(u + i)));
    }
    for (; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

static void softmax_neon(float *x, int64_t n) {
    if (n <= 0) return;
    int64_t i = 0;
    float mx = x[0];
    if (n >= 4) {
        float32x4_t m = vld1q_f32(x);
        for (i = 4; i + 4 <= n; i += 4) m = vmaxq_f32(m, vld1q_f32(x + i));
        mx = vmaxvq_f32(m);
    }
    for (; i < n; i++)
        if (x[i] > mx) mx = x[i];
    float32x4_t mv = vdupq_n_f32(mx), s = vdupq_n_f32(0.0f);
    for (i = 0; i + 4 <= n; i += 4) {
        float32x4_t e = qw_exp4_neon(vsubq_f32(vld1q_f32(x + i), mv));
        vst1q_f32(x + i, e);
        s = vaddq_f32(s, e);
    }
    float sum = vaddvq_f32(s);
    for (; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    scale_neon(x, 1.0f / sum, n);
}

int kernels_fill_neon(qw_kernels *k) {
    k->matmul[QW_F32] = matmul_f32_neon;
    k->matmul[QW_F16] = matmul_f16_neon;
    k->matmul[QW_BF16] = matmul_bf16_neon;
    k->matmul[QW_Q8_0] = matmul_q8_0_neon;
    /* every matmul entry is this file's: one summation order for all types */
    k->matmul[QW_Q4_0] = matmul_q4_0_neon;
    k->matmul[QW_Q4_1] = matmul_q4_1_neon;
    k->matmul[QW_Q5_0] = matmul_q5_0_neon;
    k->matmul[QW_Q5_1] = matmul_q5_1_neon;
    k->matmul[QW_Q4_K] = matmul_q4_k_neon;
    k->matmul[QW_Q5_K] = matmul_q5_k_neon;
    k->matmul[QW_Q6_K] = matmul_q6_k_neon;
    k->to_f32[QW_F16] = to_f32_f16_neon;
    k->to_f32[QW_BF16] = to_f32_bf16_neon;
    k->to_f32[QW_Q8_0] = to_f32_q8_0_neon;
    k->dot = dot_neon;
    k->axpy = axpy_neon;
    k->scale = scale_neon;
    k->rmsnorm = rmsnorm_neon;
    k->silu_mul = silu_mul_neon;
    k->softmax = softmax_neon;
    k->add = add_neon;
    return 1;
}

#else

int kernels_fill_neon(qw_kernels *k) {
    (void)k;
    return 0;
}

#endif
