/* kernels_avx2.c - AVX2 + FMA + F16C kernels (x86-64).
 *
 * Compiled with -mavx2 -mfma -mf16c (Makefile rule for *_avx2.c) and only
 * ever called after cpu.c confirmed the CPU and the OS (XCR0) support them.
 * The body is under __x86_64__ so the file compiles to a stub elsewhere.
 *
 * Matmul: weights are converted to float32 (bf16: zero-extend and shift
 * left 16; f16: vcvtph2ps) and multiplied with f32 FMA; the activations are
 * never rounded. Batch invariant: each output gets the same operation
 * sequence whatever n, tile and o0/o1 (see the matmul section). Regimes:
 *  - n <= SMALL_N (decode, small continuous batches): memory bound. For
 *    each 4-row x KC block the weights are streamed from the mapping once,
 *    with software prefetch (PF_NEAR / PF_DIST), and converted in registers
 *    for every group of 2 tokens (the block stays in L1), so a step with n
 *    tokens costs little more than n = 1;
 *  - larger n (prefill): compute bound. A block of tokens x one k block of
 *    X stays in L2; each 4-row x KC block of weights is converted once per
 *    token block to float32 on the stack (L1) and a 4-row x 3-token register
 *    tile runs over it: 3 activation vectors in registers, one weight vector
 *    loaded per row, 12 accumulators (16 ymm, no spill). KC = 1024 keeps the
 *    per-block reduction and Y update rare (measured with
 *    tools/bench_matmul.sh: 58 -> 82 GFLOP/s on one Zen 3 core, 896 x 896).
 * Horizontal sums of 4 accumulators are done together (hadd); the k % 8
 * tail is scalar FMA, with memcpy loads (weights may be misaligned).
 *
 * exp: Cephes-style expf (range reduction by ln 2 split in two constants,
 * degree-6 polynomial, 2^n by exponent arithmetic). Argument clamped to
 * [-87, 88] so 2^n stays normal. Measured against libm's exp in double on
 * every 7th float of [-87, 88]: at most 1.25 ulp (tests/kernels/
 * test_kernels.c allows 3 ulp for exp inside silu_mul and softmax). Below -87 it returns e^-87 ~ 1.6e-38 instead of a smaller
 * value: an absolute error < 2e-38, irrelevant for softmax (sum >= 1) and silu.
 */
#include "kernels/kernels_impl.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>

#define INLINE static inline __attribute__((always_inline))
/* Fully unroll the tile loops over rows and tokens so the accumulator arrays
 * live in registers (GCC and clang both honour this spelling). */
#define UNROLL _Pragma("GCC unroll 8")

/* ---- loads: 8 weights -> 8 floats ---- */
INLINE __m256 ld8_f32(const float *p) { return _mm256_loadu_ps(p); }
INLINE __m256 ld8_bf16(const uint16_t *p) {
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
INLINE __m256 ld8_f16(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

INLINE float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* {sum(a), sum(b), sum(c), sum(d)} */
INLINE __m128 hsum4x8(__m256 a, __m256 b, __m256 c, __m256 d) {
    __m256 ab = _mm256_hadd_ps(a, b); /* a01 a23 b01 b23 | a45 a67 b45 b67 */
    __m256 cd = _mm256_hadd_ps(c, d);
    __m256 s = _mm256_hadd_ps(ab, cd); /* a0-3 b0-3 c0-3 d0-3 | a4-7 ... */
    return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

/* ---- matmul ----
 * Batch invariance: every output Y[t][o] is computed by exactly the same
 * sequence of float operations whatever n, the tile it lands in, its
 * position in the tile and the o0/o1 split (the scheduler batches one token
 * per request, so a request's logits must not depend on the others):
 *  - k is cut into blocks of KC columns; within a block one 8-lane
 *    accumulator per (o, t) takes one FMA per 8 columns, in column order;
 *  - the accumulator is reduced by hsum4x8 (lane r only depends on input
 *    r, so a 1-row tile gives the same bits as a 4-row tile);
 *  - the block's k % 8 tail (last block only) is added with scalar FMAs in
 *    column order; the block sum is stored (first block) or added to Y.
 * The weights may be converted in registers (n small: straight from the
 * mapping) or first into a float32 buffer (prefill): the conversion is
 * exact, so both give the same bits. */
enum { PF_DIST = 512, PF_NEAR = 16 * 1024, L2_BLOCK = 256 * 1024, KC = 1024, OC = 128, SMALL_N = 8 };

/* Scalar weight loads for tails: the mapping gives no alignment guarantee. */
INLINE float ld1_f32(const float *p) {
    float v;
    memcpy(&v, p, sizeof v);
    return v;
}
INLINE float ld1_bf16(const uint16_t *p) {
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return qw_bf16_to_f32(v);
}
INLINE float ld1_f16(const uint16_t *p) {
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return qw_f16_to_f32(v);
}
INLINE float fma1(float a, float b, float c) {
    return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}

/* TILE(SUF, WT, LD8, LD1): tile_SUF(R rows (1 or 4) x T tokens (1..3)) over
 * the k block [c0, c0 + len): w and X point at column c0 of row 0 / token 0
 * (weight row stride ws), Y at (token 0, row 0). pf: 0 no
 * software prefetch, 1 prefetch PF_DIST ahead in each row, 2 prefetch the
 * next R-row block in step with this one (short rows). */
#define TILE(SUF, WT, LD8, LD1)                                                                  \
    INLINE void tile_##SUF(float *Y, int64_t ldy, const float *X, int64_t ldx, const WT *w,      \
                           int64_t ws, int64_t c0, int64_t len, const int R, const int T,        \
                           const int pf) {                                                       \
        __m256 acc[4][3];                                                                        \
        UNROLL for (int r = 0; r < R; r++)                                                       \
            UNROLL for (int t = 0; t < T; t++) acc[r][t] = _mm256_setzero_ps();                  \
        int64_t i = 0;                                                                           \
        for (; i + 8 <= len; i += 8) {                                                           \
            if (pf == 1 && (i & 15) == 0) {                                                      \
                UNROLL for (int r = 0; r < R; r++)                                               \
                    _mm_prefetch((const char *)(w + r * ws + i) + PF_DIST, _MM_HINT_T0);         \
            } else if (pf == 2 && (i & 15) == 0) {                                               \
                const char *nx = (const char *)(w + R * ws + (R - 1) * c0 + R * i);              \
                _mm_prefetch(nx, _MM_HINT_T0);                                                   \
                _mm_prefetch(nx + 64, _MM_HINT_T0);                                              \
            } else if (pf == 3 && (i & 15) == 0) {                                               \
                UNROLL for (int t = 0; t < T; t++)                                               \
                    _mm_prefetch((const char *)(X + (T + t) * ldx + i), _MM_HINT_T0);            \
            }                                                                                    \
            __m256 xv[3];                                                                        \
            UNROLL for (int t = 0; t < T; t++) xv[t] = _mm256_loadu_ps(X + t * ldx + i);         \
            UNROLL for (int r = 0; r < R; r++) {                                                 \
                __m256 wv = LD8(w + r * ws + i);                                                 \
                UNROLL for (int t = 0; t < T; t++)                                               \
                    acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);                           \
            }                                                                                    \
        }                                                                                        \
        UNROLL for (int t = 0; t < T; t++) {                                                     \
            float out[4];                                                                        \
            if (R == 4)                                                                          \
                _mm_storeu_ps(out, hsum4x8(acc[0][t], acc[1][t], acc[2][t], acc[3][t]));         \
            else                                                                                 \
                out[0] = _mm_cvtss_f32(hsum4x8(acc[0][t], acc[0][t], acc[0][t], acc[0][t]));     \
            UNROLL for (int r = 0; r < R; r++) {                                                 \
                for (int64_t j = i; j < len; j++)                                                \
                    out[r] = fma1(X[t * ldx + j], LD1(w + r * ws + j), out[r]);                  \
                Y[t * ldy + r] = c0 > 0 ? Y[t * ldy + r] + out[r] : out[r];                      \
            }                                                                                    \
        }                                                                                        \
    }                                                                                            \
    static void tile4_##SUF(float *Y, int64_t ldy, const float *X, int64_t ldx, const WT *w,     \
                            int64_t ws, int64_t c0, int64_t len, int T, int pf) {                \
        switch (T * 4 + pf) { /* pf a constant in each instance: no branch in the loop */        \
        case 15: tile_##SUF(Y, ldy, X, ldx, w, ws, c0, len, 4, 3, 3); break;                     \
        case 12: tile_##SUF(Y, ldy, X, ldx, w, ws, c0, len, 4, 3, 0); break;                     \
        case 13: tile_##SUF(Y, ldy, X, ldx, w, ws, c0, len, 4, 3, 1); break;                     \
        case 14: tile_##SUF(Y, ldy, X, ldx, w, ws, c0, len, 4, 3, 2); break;                     \
        case 8: tile_##SUF(Y, ldy, X, ldx, w, ws, c0, len, 4, 2, 0); break;                      \
        case 9: tile_##SUF(Y, ldy, X, ldx, w, ws, c0, len, 4, 2, 1); break;                      \
        case 10: tile_##SUF(Y, ldy, X, ldx, w, ws, c0, len, 4, 2, 2); break;                      \
        case 4: tile_##SUF(Y, ldy, X, ldx, w, ws, c0, len, 4, 1, 0); break;                      \
        case 5: tile_##SUF(Y, ldy, X, ldx, w, ws, c0, len, 4, 1, 1); break;                      \
        default: tile_##SUF(Y, ldy, X, ldx, w, ws, c0, len, 4, 1, 2); break;                     \
        }                                                                                        \
    }                                                                                            \
    static void tile1_##SUF(float *Y, int64_t ldy, const float *X, int64_t ldx, const WT *w,     \
                            int64_t ws, int64_t c0, int64_t len, int T) {                        \
        if (T == 3) tile_##SUF(Y, ldy, X, ldx, w, ws, c0, len, 1, 3, 0);                         \
        else if (T == 2) tile_##SUF(Y, ldy, X, ldx, w, ws, c0, len, 1, 2, 0);                    \
        else tile_##SUF(Y, ldy, X, ldx, w, ws, c0, len, 1, 1, 0);                                \
    }                                                                                            \
    /* Rows [o, o + R) x tokens [t0, t1) x k block [c0, c0 + len); w at column c0 of row o. */   \
    static void rows_##SUF(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t t0,       \
                           int64_t t1, const WT *w, int64_t ws, int64_t o, int64_t c0,           \
                           int64_t len, int R, int pf) {                                         \
        /* 3 tokens: 12 accumulators + 3 activations + 1 weight vector = 16 ymm */              \
        const int tmax = 3;                                                                      \
        for (int64_t t = t0; t < t1; t += tmax) {                                                \
            int T = t1 - t < tmax ? (int)(t1 - t) : tmax;                                        \
            const float *x = X + t * ldx + c0;                                                   \
            /* Y is read back after the tile's k loop when c0 > 0: ask for its lines \
             * now, so the epilogue does not wait on L3 (large k: Y left L2). */                 \
            if (c0 > 0)                                                                          \
                for (int u = 0; u < T; u++) _mm_prefetch((const char *)(Y + (t + u) * ldy + o), _MM_HINT_T0); \
            if (R == 4) tile4_##SUF(Y + t * ldy + o, ldy, x, ldx, w, ws, c0, len, T,             \
                                    t == t0 ? pf : 0);                                           \
            else tile1_##SUF(Y + t * ldy + o, ldy, x, ldx, w, ws, c0, len, T);                   \
        }                                                                                        \
    }

TILE(f32, float, ld8_f32, ld1_f32)
TILE(f16, uint16_t, ld8_f16, ld1_f16)
TILE(bf16, uint16_t, ld8_bf16, ld1_bf16)

/* MATMUL(SUF, WT, LD8) defines matmul_SUF_avx2 for weight type WT.
 * n <= SMALL_N (decode and small batches) and f32 weights: each 4-row group
 * streams its rows from the mapping once per token block, converting in
 * registers for every token group (the block stays in L1). Larger n: token
 * block x k block of X in L2, every 4-row x KC weight block converted once
 * into a float32 buffer on the stack and reused by every token of the block.
 * Both orders give each output the same operations (see above). */
#define MATMUL(SUF, WT, LD8)                                                                     \
    static void matmul_##SUF##_avx2(float *Y, int64_t ldy, const float *X, int64_t ldx,          \
                                    int64_t n, const void *W, int64_t k, int64_t o0,             \
                                    int64_t o1) {                                                \
        const WT *w = W;                                                                         \
        if (k == 0) { /* empty sums: the k-block loop below would not store */                 \
            for (int64_t t = 0; t < n; t++)                                                      \
                for (int64_t o = o0; o < o1; o++) Y[t * ldy + o] = 0.0f;                         \
            return;                                                                              \
        }                                                                                        \
        const int direct = sizeof(WT) == 4 || n <= SMALL_N;                                      \
        if (direct) {                                                                            \
            /* Weights straight from the mapping: each 4-row group streams its rows once per \
             * token block, k blocks in order, with software prefetch. */                        \
            const int pf = 4 * k * (int64_t)sizeof(WT) <= PF_NEAR ? 2 : 1;                       \
            int64_t nb = L2_BLOCK / (k * 4);                                                     \
            nb = nb < 3 ? 3 : nb - nb % 3;                                                       \
            for (int64_t t0 = 0; t0 < n; t0 += nb) {                                             \
                int64_t t1 = t0 + nb < n ? t0 + nb : n;                                          \
                for (int64_t o = o0; o < o1;) {                                                  \
                    int R = o + 4 <= o1 ? 4 : 1;                                                 \
                    for (int64_t c0 = 0; c0 < k; c0 += KC) {                                     \
                        int64_t len = k - c0 < KC ? k - c0 : KC;                                 \
                        rows_##SUF(Y, ldy, X, ldx, t0, t1, w + o * k + c0, k, o, c0, len, R, pf);\
                    }                                                                            \
                    o += R;                                                                      \
                }                                                                                \
            }                                                                                    \
            return;                                                                              \
        }                                                                                        \
        /* Prefill: a block of tokens x one k block of X stays in L2 while every \
         * 4-row group of the range is converted to float32 (once per token block) \
         * and multiplied with it; Y takes the k blocks' sums in k order. */                     \
        float wbuf[4 * KC];                                                                      \
        int64_t kc = k < KC ? k : KC;                                                            \
        int64_t nb = L2_BLOCK / (kc * 4);                                                        \
        nb = nb < 3 ? 3 : nb - nb % 3;                                                           \
        for (int64_t t0 = 0; t0 < n; t0 += nb)                                                   \
        for (int64_t oc = o0; oc < o1; oc += OC) {                                               \
            int64_t t1 = t0 + nb < n ? t0 + nb : n, oc1 = oc + OC < o1 ? oc + OC : o1;           \
            for (int64_t c0 = 0; c0 < k; c0 += KC) {                                             \
                int64_t len = k - c0 < KC ? k - c0 : KC;                                         \
                for (int64_t o = oc; o < oc1;) {                                                 \
                    int R = o + 4 <= oc1 ? 4 : 1;                                                \
                    for (int r = 0; r < R; r++) {                                                \
                        const WT *src = w + (o + r) * k + c0;                                    \
                        int64_t j = 0;                                                           \
                        /* the next group's rows, same k block: in L2 by the time the \
                         * tiles below are done (reading past o1 is harmless, the rows exist \
                         * only up to the matrix end: stop there) */                             \
                        const char *nx = o + 4 + r < o1 ? (const char *)(src + 4 * k) : NULL;    \
                        for (; j + 8 <= len; j += 8) {                                           \
                            if (nx && (j & 31) == 0) _mm_prefetch(nx + sizeof(WT) * j, _MM_HINT_T1); \
                            _mm256_storeu_ps(wbuf + r * KC + j, LD8(src + j));                   \
                        }                                                                        \
                        for (; j < len; j++) wbuf[r * KC + j] = ld1_##SUF(src + j);              \
                    }                                                                            \
                    rows_f32(Y, ldy, X, ldx, t0, t1, wbuf, KC, o, c0, len, R, 0);                \
                    o += R;                                                                      \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
    }

MATMUL(f32, float, ld8_f32)
MATMUL(f16, uint16_t, ld8_f16)
MATMUL(bf16, uint16_t, ld8_bf16)

/* ---- conversions ---- */
static void to_f32_bf16_avx2(float *y, const void *x, int64_t n) {
    const uint16_t *h = x;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, ld8_bf16(h + i));
    for (; i < n; i++) y[i] = qw_bf16_to_f32(h[i]);
}

static void to_f32_f16_avx2(float *y, const void *x, int64_t n) {
    const uint16_t *h = x;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, ld8_f16(h + i));
    for (; i < n; i++) y[i] = qw_f16_to_f32(h[i]);
}

/* ---- vector kernels ---- */
static float dot_avx2(const float *a, const float *b, int64_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8)
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    float s = hsum8(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

static void axpy_avx2(float *y, float a, const float *x, int64_t n) {
    __m256 av = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

static void scale_avx2(float *y, float a, int64_t n) {
    __m256 av = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), av));
    for (; i < n; i++) y[i] *= a;
}

static void add_avx2(float *y, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
    for (; i < n; i++) y[i] += x[i];
}

static void rmsnorm_avx2(float *y, const float *x, const float *w, int64_t n, float eps) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
        s0 = _mm256_fmadd_ps(a, a, s0);
        s1 = _mm256_fmadd_ps(b, b, s1);
    }
    for (; i + 8 <= n; i += 8) {
        __m256 a = _mm256_loadu_ps(x + i);
        s0 = _mm256_fmadd_ps(a, a, s0);
    }
    float ss = hsum8(_mm256_add_ps(s0, s1));
    for (; i < n; i++) ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    __m256 iv = _mm256_set1_ps(inv);
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), iv),
                                              _mm256_loadu_ps(w + i)));
    for (; i < n; i++) y[i] = x[i] * inv * w[i];
}

INLINE __m256 exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

static void silu_mul_avx2(float *g, const float *u, int64_t n) {
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(g + i);
        __m256 e = exp8(_mm256_sub_ps(zero, x));
        __m256 s = _mm256_div_ps(x, _mm256_add_ps(one, e));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

static void softmax_avx2(float *x, int64_t n) {
    if (n <= 0) return;
    int64_t i = 0;
    float mx = x[0];
    if (n >= 8) {
        __m256 m = _mm256_loadu_ps(x);
        for (i = 8; i + 8 <= n; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h = _mm_max_ss(h, _mm_movehdup_ps(h));
        mx = _mm_cvtss_f32(h);
    }
    for (; i < n; i++)
        if (x[i] > mx) mx = x[i];
    __m256 mv = _mm256_set1_ps(mx), s = _mm256_setzero_ps();
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv));
        _mm256_storeu_ps(x + i, e);
        s = _mm256_add_ps(s, e);
    }
    float sum = hsum8(s);
    for (; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    scale_avx2(x, 1.0f / sum, n);
}

int kernels_fill_avx2(qw_kernels *k) {
    k->matmul[QW_F32] = matmul_f32_avx2;
    k->matmul[QW_F16] = matmul_f16_avx2;
    k->matmul[QW_BF16] = matmul_bf16_avx2;
    k->to_f32[QW_F16] = to_f32_f16_avx2;
    k->to_f32[QW_BF16] = to_f32_bf16_avx2;
    k->dot = dot_avx2;
    k->axpy = axpy_avx2;
    k->scale = scale_avx2;
    k->rmsnorm = rmsnorm_avx2;
    k->silu_mul = silu_mul_avx2;
    k->softmax = softmax_avx2;
    k->add = add_avx2;
    return 1;
}

#else

int kernels_fill_avx2(qw_kernels *k) {
    (void)k;
    return 0;
}

#endif
