/* kernels_avx2.c - AVX2 + FMA + F16C kernels (x86-64).
 *
 * Compiled with -mavx2 -mfma -mf16c (Makefile rule for *_avx2.c) and only
 * ever called after cpu.c confirmed the CPU and the OS (XCR0) support them.
 * The body is under __x86_64__ so the file compiles to a stub elsewhere.
 *
 * Matmul: weights are converted to float32 in registers (bf16: zero-extend
 * and shift left 16; f16: vcvtph2ps) and multiplied with f32 FMA; the
 * activations are never rounded. Two regimes:
 *  - n == 1 (decode): memory bound. 4 weight rows are streamed together, 16
 *    elements per row per step into 8 independent accumulators, with a
 *    software prefetch (see PF_NEAR).
 *  - n > 1 (prefill): compute bound. A 4-row x 3-token register tile (12
 *    accumulators): each converted weight vector feeds 3 FMAs, each
 *    activation vector 4. Tokens are processed in blocks whose activations
 *    fit in L2, so a block of X is reused across all the rows of the range.
 * Horizontal sums of 4 accumulators are done together (hadd) and stored as
 * 4 consecutive outputs; the k % 8 tail is scalar.
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
INLINE float cv_f32(float x) { return x; }
INLINE float cv_bf16(uint16_t x) { return qw_bf16_to_f32(x); }
INLINE float cv_f16(uint16_t x) { return qw_f16_to_f32(x); }

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

/* Decode prefetch: blocks of 4 rows up to PF_NEAR bytes (k = 896 for bf16)
 * are short streams the hardware prefetcher ramps up on too late, so the
 * next block is prefetched alongside the current one (measured: ~10 vs ~6
 * GB/s per CPU-second on 4864 x 896 here); longer rows prefetch PF_DIST
 * ahead within each row. */
enum { PF_DIST = 512, PF_NEAR = 16 * 1024, L2_BLOCK = 256 * 1024, KC = 512 };

/* Prefill tile: R rows (1 or 4) x T tokens (1..3) over len elements of
 * float32 weights wf (row stride ws). Y points at (token 0, row 0); the
 * sums are stored (acc == 0) or added to Y (acc == 1, later k blocks). */
INLINE void tile_f32w(float *Y, int64_t ldy, const float *X, int64_t ldx, const float *wf,
                      int64_t ws, int64_t len, const int R, const int T, int acc_y) {
    __m256 acc[4][3];
    UNROLL for (int r = 0; r < R; r++)
        UNROLL for (int t = 0; t < T; t++) acc[r][t] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= len; i += 8) {
        __m256 wv[4];
        UNROLL for (int r = 0; r < R; r++) wv[r] = _mm256_loadu_ps(wf + r * ws + i);
        UNROLL for (int t = 0; t < T; t++) {
            __m256 xv = _mm256_loadu_ps(X + t * ldx + i);
            UNROLL for (int r = 0; r < R; r++) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
        }
    }
    UNROLL for (int t = 0; t < T; t++) {
        float out[4];
        if (R == 4)
            _mm_storeu_ps(out, hsum4x8(acc[0][t], acc[1][t], acc[2][t], acc[3][t]));
        else
            out[0] = hsum8(acc[0][t]);
        UNROLL for (int r = 0; r < R; r++) {
            for (int64_t j = i; j < len; j++) out[r] += X[t * ldx + j] * wf[r * ws + j];
            Y[t * ldy + r] = acc_y ? Y[t * ldy + r] + out[r] : out[r];
        }
    }
}

#define TILE_FN(R, T)                                                                            \
    static void tile_##R##_##T(float *Y, int64_t ldy, const float *X, int64_t ldx,               \
                               const float *wf, int64_t ws, int64_t len, int acc_y) {            \
        tile_f32w(Y, ldy, X, ldx, wf, ws, len, R, T, acc_y);                                     \
    }
TILE_FN(1, 1)
TILE_FN(1, 2)
TILE_FN(1, 3)
TILE_FN(4, 1)
TILE_FN(4, 2)
TILE_FN(4, 3)

typedef void (*tile_fn)(float *, int64_t, const float *, int64_t, const float *, int64_t, int64_t,
                        int);
static const tile_fn k_tiles[2][4] = {{NULL, tile_1_1, tile_1_2, tile_1_3},
                                      {NULL, tile_4_1, tile_4_2, tile_4_3}};

/* Rows [o, o+R) x tokens [t0, t1) x k block [c0, c0+len) of the product,
 * weights already float32 at wf (row stride ws). */
static void tile_rows(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t t0, int64_t t1,
                      const float *wf, int64_t ws, int64_t o, int64_t c0, int64_t len, int R,
                      int acc_y) {
    const tile_fn *tf = k_tiles[R == 4];
    int64_t t = t0;
    for (; t + 3 <= t1; t += 3) tf[3](Y + t * ldy + o, ldy, X + t * ldx + c0, ldx, wf, ws, len, acc_y);
    if (t < t1) tf[t1 - t](Y + t * ldy + o, ldy, X + t * ldx + c0, ldx, wf, ws, len, acc_y);
}

/* MATMUL(SUF, WT, LD8, CV) defines matmul_SUF_avx2 for weight type WT.
 * n > 1: tokens in blocks whose activations fit in L2; for each block of 4
 * rows and KC columns the weights are converted once to float32 on the stack
 * (f32 weights are used in place) and reused by every token of the block. */
#define MATMUL(SUF, WT, LD8, CV)                                                                 \
    INLINE void rows4_n1_##SUF(float *y, const float *x, const WT *w, int64_t k) {               \
        const WT *w0 = w, *w1 = w + k, *w2 = w + 2 * k, *w3 = w + 3 * k;                         \
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                              \
        __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0;                                               \
        const int near = 4 * k * (int64_t)sizeof(WT) <= PF_NEAR;                                 \
        int64_t i = 0;                                                                           \
        for (; i + 16 <= k; i += 16) {                                                           \
            if (!near) { /* long rows: each row's own stream, PF_DIST ahead */                  \
                _mm_prefetch((const char *)(w0 + i) + PF_DIST, _MM_HINT_T0);                     \
                _mm_prefetch((const char *)(w1 + i) + PF_DIST, _MM_HINT_T0);                     \
                _mm_prefetch((const char *)(w2 + i) + PF_DIST, _MM_HINT_T0);                     \
                _mm_prefetch((const char *)(w3 + i) + PF_DIST, _MM_HINT_T0);                     \
            } else { /* short rows: fetch the next 4-row block in step with this one */          \
                const char *nx = (const char *)(w0 + 4 * k) + 4 * i * (int64_t)sizeof(WT);       \
                _mm_prefetch(nx, _MM_HINT_T0);                                                   \
                _mm_prefetch(nx + 64, _MM_HINT_T0);                                              \
            }                                                                                    \
            __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + 8);                 \
            a0 = _mm256_fmadd_ps(LD8(w0 + i), x0, a0);                                           \
            a1 = _mm256_fmadd_ps(LD8(w1 + i), x0, a1);                                           \
            a2 = _mm256_fmadd_ps(LD8(w2 + i), x0, a2);                                           \
            a3 = _mm256_fmadd_ps(LD8(w3 + i), x0, a3);                                           \
            b0 = _mm256_fmadd_ps(LD8(w0 + i + 8), x1, b0);                                       \
            b1 = _mm256_fmadd_ps(LD8(w1 + i + 8), x1, b1);                                       \
            b2 = _mm256_fmadd_ps(LD8(w2 + i + 8), x1, b2);                                       \
            b3 = _mm256_fmadd_ps(LD8(w3 + i + 8), x1, b3);                                       \
        }                                                                                        \
        for (; i + 8 <= k; i += 8) {                                                             \
            __m256 x0 = _mm256_loadu_ps(x + i);                                                  \
            a0 = _mm256_fmadd_ps(LD8(w0 + i), x0, a0);                                           \
            a1 = _mm256_fmadd_ps(LD8(w1 + i), x0, a1);                                           \
            a2 = _mm256_fmadd_ps(LD8(w2 + i), x0, a2);                                           \
            a3 = _mm256_fmadd_ps(LD8(w3 + i), x0, a3);                                           \
        }                                                                                        \
        float out[4];                                                                            \
        _mm_storeu_ps(out, hsum4x8(_mm256_add_ps(a0, b0), _mm256_add_ps(a1, b1),                 \
                                   _mm256_add_ps(a2, b2), _mm256_add_ps(a3, b3)));               \
        for (; i < k; i++) {                                                                     \
            float xi = x[i];                                                                     \
            out[0] += xi * CV(w0[i]);                                                            \
            out[1] += xi * CV(w1[i]);                                                            \
            out[2] += xi * CV(w2[i]);                                                            \
            out[3] += xi * CV(w3[i]);                                                            \
        }                                                                                        \
        y[0] = out[0], y[1] = out[1], y[2] = out[2], y[3] = out[3];                              \
    }                                                                                            \
    static float row1_n1_##SUF(const float *x, const WT *w, int64_t k) {                         \
        __m256 a = _mm256_setzero_ps();                                                          \
        int64_t i = 0;                                                                           \
        for (; i + 8 <= k; i += 8) a = _mm256_fmadd_ps(LD8(w + i), _mm256_loadu_ps(x + i), a);   \
        float s = hsum8(a);                                                                      \
        for (; i < k; i++) s += x[i] * CV(w[i]);                                                 \
        return s;                                                                                \
    }                                                                                            \
    static void matmul_##SUF##_avx2(float *Y, int64_t ldy, const float *X, int64_t ldx,          \
                                    int64_t n, const void *W, int64_t k, int64_t o0,             \
                                    int64_t o1) {                                                \
        const WT *w = W;                                                                         \
        if (n == 1) {                                                                            \
            int64_t o = o0;                                                                      \
            for (; o + 4 <= o1; o += 4) rows4_n1_##SUF(Y + o, X, w + o * k, k);                  \
            for (; o < o1; o++) Y[o] = row1_n1_##SUF(X, w + o * k, k);                           \
            return;                                                                              \
        }                                                                                        \
        if (k == 0) { /* empty sums: the k-block loop below would not store */                 \
            for (int64_t t = 0; t < n; t++)                                                      \
                for (int64_t o = o0; o < o1; o++) Y[t * ldy + o] = 0.0f;                         \
            return;                                                                              \
        }                                                                                        \
        float wbuf[4 * KC];                                                                      \
        int64_t nb = L2_BLOCK / (k * 4 > 0 ? k * 4 : 1);                                         \
        nb = nb < 3 ? 3 : nb - nb % 3;                                                           \
        for (int64_t t0 = 0; t0 < n; t0 += nb) {                                                 \
            int64_t t1 = t0 + nb < n ? t0 + nb : n;                                              \
            for (int64_t o = o0; o < o1;) {                                                      \
                int R = o + 4 <= o1 ? 4 : 1;                                                     \
                for (int64_t c0 = 0; c0 < k; c0 += KC) {                                         \
                    int64_t len = k - c0 < KC ? k - c0 : KC;                                     \
                    const float *wf;                                                             \
                    int64_t ws;                                                                  \
                    if (sizeof(WT) == 4) {                                                       \
                        wf = (const float *)(const void *)(w + o * k + c0);                      \
                        ws = k;                                                                  \
                    } else {                                                                     \
                        for (int r = 0; r < R; r++) {                                            \
                            const WT *src = w + (o + r) * k + c0;                                \
                            int64_t j = 0;                                                       \
                            for (; j + 8 <= len; j += 8)                                         \
                                _mm256_storeu_ps(wbuf + r * KC + j, LD8(src + j));               \
                            for (; j < len; j++) wbuf[r * KC + j] = CV(src[j]);                  \
                        }                                                                        \
                        wf = wbuf;                                                               \
                        ws = KC;                                                                 \
                    }                                                                            \
                    tile_rows(Y, ldy, X, ldx, t0, t1, wf, ws, o, c0, len, R, c0 > 0);            \
                }                                                                                \
                o += R;                                                                          \
            }                                                                                    \
        }                                                                                        \
    }

MATMUL(f32, float, ld8_f32, cv_f32)
MATMUL(f16, uint16_t, ld8_f16, cv_f16)
MATMUL(bf16, uint16_t, ld8_bf16, cv_bf16)

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
