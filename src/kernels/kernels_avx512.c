/* kernels_avx512.c - AVX-512 kernels (x86-64: F, BW, VL, DQ; the file is
 * built with -mavx512bf16 -mavx512vnni too, so cpu.c requires those as well).
 *
 * Same algorithms as kernels_avx2.c, 16 floats per vector, with AVX-512
 * masks for every tail (masked loads read nothing outside the mask, so no
 * scalar tails and no over-reads):
 *  - matmul n == 1: 4 rows x 32 elements per step, 8 accumulators, the
 *    same prefetch policy as AVX2 (next 4-row block for short rows);
 *  - matmul n > 1: tokens in L2-sized blocks; for each 4-row x KC block the
 *    weights are converted once to float32 on the stack (bf16: zero-extend
 *    and shift; f16: vcvtph2ps) and a 4-row x 6-token register tile (24
 *    accumulators of 16 floats, 29 of the 32 zmm registers) runs over them;
 *  - exp: Cephes-style polynomial as in AVX2, 2^n applied with vscalefps.
 * Activations are never rounded to bf16 (no vdpbf16ps): fidelity first.
 * This level could not be run on the development host (no AVX-512); the
 * checker (tests/kernels/test_kernels.c) runs it wherever the CPU has it.
 */
#include "kernels/kernels_impl.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 8")

/* Mask of the first m (0..16) lanes. */
INLINE __mmask16 lanes(int64_t m) { return m >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << m) - 1u); }

/* 16 weights -> 16 floats; masked variants load only the first lanes. */
INLINE __m512 ld16_f32(const float *p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
INLINE __m512 ld16_bf16(const uint16_t *p, __mmask16 m) {
    __m512i v = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}
INLINE __m512 ld16_f16(const uint16_t *p, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

/* {sum(a), sum(b), sum(c), sum(d)} */
INLINE __m128 hsum4x16(__m512 a, __m512 b, __m512 c, __m512 d) {
    __m256 a8 = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
    __m256 b8 = _mm256_add_ps(_mm512_castps512_ps256(b), _mm512_extractf32x8_ps(b, 1));
    __m256 c8 = _mm256_add_ps(_mm512_castps512_ps256(c), _mm512_extractf32x8_ps(c, 1));
    __m256 d8 = _mm256_add_ps(_mm512_castps512_ps256(d), _mm512_extractf32x8_ps(d, 1));
    __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(a8, b8), _mm256_hadd_ps(c8, d8));
    return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

enum { PF_DIST = 1024, PF_NEAR = 16 * 1024, L2_BLOCK = 512 * 1024, KC = 512 };

/* Prefill tile over float32 weights wf (row stride ws), len columns, R rows
 * (1 or 4) x T tokens (1..6); stores (acc_y == 0) or adds to Y. */
INLINE void tile_f32w(float *Y, int64_t ldy, const float *X, int64_t ldx, const float *wf,
                      int64_t ws, int64_t len, const int R, const int T, int acc_y) {
    __m512 acc[4][6];
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int t = 0; t < T; t++) acc[r][t] =
        _mm512_setzero_ps();
    for (int64_t i = 0; i < len; i += 16) {
        __mmask16 m = lanes(len - i);
        __m512 wv[4];
        UNROLL for (int r = 0; r < R; r++) wv[r] = _mm512_maskz_loadu_ps(m, wf + r * ws + i);
        UNROLL for (int t = 0; t < T; t++) {
            __m512 xv = _mm512_maskz_loadu_ps(m, X + t * ldx + i);
            UNROLL for (int r = 0; r < R; r++) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
        }
    }
    UNROLL for (int t = 0; t < T; t++) {
        float out[4];
        if (R == 4)
            _mm_storeu_ps(out, hsum4x16(acc[0][t], acc[1][t], acc[2][t], acc[3][t]));
        else
            out[0] = _mm512_reduce_add_ps(acc[0][t]);
        UNROLL for (int r = 0; r < R; r++) Y[t * ldy + r] = acc_y ? Y[t * ldy + r] + out[r] : out[r];
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
TILE_FN(1, 4)
TILE_FN(4, 1)
TILE_FN(4, 2)
TILE_FN(4, 3)
TILE_FN(4, 4)
TILE_FN(1, 5)
TILE_FN(1, 6)
TILE_FN(4, 5)
TILE_FN(4, 6)

typedef void (*tile_fn)(float *, int64_t, const float *, int64_t, const float *, int64_t, int64_t,
                        int);
static const tile_fn k_tiles[2][7] = {
    {NULL, tile_1_1, tile_1_2, tile_1_3, tile_1_4, tile_1_5, tile_1_6},
    {NULL, tile_4_1, tile_4_2, tile_4_3, tile_4_4, tile_4_5, tile_4_6}};

static void tile_rows(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t t0, int64_t t1,
                      const float *wf, int64_t ws, int64_t o, int64_t c0, int64_t len, int R,
                      int acc_y) {
    const tile_fn *tf = k_tiles[R == 4];
    int64_t t = t0;
    for (; t + 6 <= t1; t += 6) tf[6](Y + t * ldy + o, ldy, X + t * ldx + c0, ldx, wf, ws, len, acc_y);
    if (t < t1) tf[t1 - t](Y + t * ldy + o, ldy, X + t * ldx + c0, ldx, wf, ws, len, acc_y);
}

#define MATMUL(SUF, WT, LD16)                                                                    \
    static void rows4_n1_##SUF(float *y, const float *x, const WT *w, int64_t k) {               \
        const WT *w0 = w, *w1 = w + k, *w2 = w + 2 * k, *w3 = w + 3 * k;                         \
        const __mmask16 all = 0xffff;                                                            \
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                              \
        __m512 b0 = a0, b1 = a0, b2 = a0, b3 = a0;                                               \
        const int near = 4 * k * (int64_t)sizeof(WT) <= PF_NEAR;                                 \
        int64_t i = 0;                                                                           \
        for (; i + 32 <= k; i += 32) {                                                           \
            if (!near) {                                                                         \
                _mm_prefetch((const char *)(w0 + i) + PF_DIST, _MM_HINT_T0);                     \
                _mm_prefetch((const char *)(w1 + i) + PF_DIST, _MM_HINT_T0);                     \
                _mm_prefetch((const char *)(w2 + i) + PF_DIST, _MM_HINT_T0);                     \
                _mm_prefetch((const char *)(w3 + i) + PF_DIST, _MM_HINT_T0);                     \
            } else {                                                                             \
                const char *nx = (const char *)(w0 + 4 * k) + 4 * i * (int64_t)sizeof(WT);       \
                for (int64_t q = 0; q < 2 * (int64_t)sizeof(WT); q++)                            \
                    _mm_prefetch(nx + 64 * q, _MM_HINT_T0);                                      \
            }                                                                                    \
            __m512 x0 = _mm512_loadu_ps(x + i), x1 = _mm512_loadu_ps(x + i + 16);                \
            a0 = _mm512_fmadd_ps(LD16(w0 + i, all), x0, a0);                                     \
            a1 = _mm512_fmadd_ps(LD16(w1 + i, all), x0, a1);                                     \
            a2 = _mm512_fmadd_ps(LD16(w2 + i, all), x0, a2);                                     \
            a3 = _mm512_fmadd_ps(LD16(w3 + i, all), x0, a3);                                     \
            b0 = _mm512_fmadd_ps(LD16(w0 + i + 16, all), x1, b0);                                \
            b1 = _mm512_fmadd_ps(LD16(w1 + i + 16, all), x1, b1);                                \
            b2 = _mm512_fmadd_ps(LD16(w2 + i + 16, all), x1, b2);                                \
            b3 = _mm512_fmadd_ps(LD16(w3 + i + 16, all), x1, b3);                                \
        }                                                                                        \
        for (; i < k; i += 16) {                                                                 \
            __mmask16 m = lanes(k - i);                                                          \
            __m512 x0 = _mm512_maskz_loadu_ps(m, x + i);                                         \
            a0 = _mm512_fmadd_ps(LD16(w0 + i, m), x0, a0);                                       \
            a1 = _mm512_fmadd_ps(LD16(w1 + i, m), x0, a1);                                       \
            a2 = _mm512_fmadd_ps(LD16(w2 + i, m), x0, a2);                                       \
            a3 = _mm512_fmadd_ps(LD16(w3 + i, m), x0, a3);                                       \
        }                                                                                        \
        _mm_storeu_ps(y, hsum4x16(_mm512_add_ps(a0, b0), _mm512_add_ps(a1, b1),                  \
                                  _mm512_add_ps(a2, b2), _mm512_add_ps(a3, b3)));                \
    }                                                                                            \
    static float row1_n1_##SUF(const float *x, const WT *w, int64_t k) {                         \
        __m512 a = _mm512_setzero_ps();                                                          \
        for (int64_t i = 0; i < k; i += 16) {                                                    \
            __mmask16 m = lanes(k - i);                                                          \
            a = _mm512_fmadd_ps(LD16(w + i, m), _mm512_maskz_loadu_ps(m, x + i), a);             \
        }                                                                                        \
        return _mm512_reduce_add_ps(a);                                                          \
    }                                                                                            \
    static void matmul_##SUF##_avx512(float *Y, int64_t ldy, const float *X, int64_t ldx,        \
                                      int64_t n, const void *W, int64_t k, int64_t o0,           \
                                      int64_t o1) {                                              \
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
        nb = nb < 6 ? 6 : nb - nb % 6;                                                           \
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
                            for (int64_t j = 0; j < len; j += 16) {                              \
                                __mmask16 m = lanes(len - j);                                    \
                                _mm512_mask_storeu_ps(wbuf + r * KC + j, m, LD16(src + j, m));   \
                            }                                                                    \
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

MATMUL(f32, float, ld16_f32)
MATMUL(f16, uint16_t, ld16_f16)
MATMUL(bf16, uint16_t, ld16_bf16)

static void to_f32_bf16_avx512(float *y, const void *x, int64_t n) {
    const uint16_t *h = x;
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes(n - i);
        _mm512_mask_storeu_ps(y + i, m, ld16_bf16(h + i, m));
    }
}

static void to_f32_f16_avx512(float *y, const void *x, int64_t n) {
    const uint16_t *h = x;
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes(n - i);
        _mm512_mask_storeu_ps(y + i, m, ld16_f16(h + i, m));
    }
}

static float dot_avx512(const float *a, const float *b, int64_t n) {
    __m512 s0 = _mm512_setzero_ps(), s1 = s0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    }
    for (; i < n; i += 16) {
        __mmask16 m = lanes(n - i);
        s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

static void axpy_avx512(float *y, float a, const float *x, int64_t n) {
    __m512 av = _mm512_set1_ps(a);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes(n - i);
        __m512 r = _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i));
        _mm512_mask_storeu_ps(y + i, m, r);
    }
}

static void scale_avx512(float *y, float a, int64_t n) {
    __m512 av = _mm512_set1_ps(a);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes(n - i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, y + i), av));
    }
}

static void add_avx512(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes(n - i);
        _mm512_mask_storeu_ps(y + i, m,
                              _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + i), _mm512_maskz_loadu_ps(m, x + i)));
    }
}

static void rmsnorm_avx512(float *y, const float *x, const float *w, int64_t n, float eps) {
    __m512 s = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        __m512 a = _mm512_maskz_loadu_ps(lanes(n - i), x + i);
        s = _mm512_fmadd_ps(a, a, s);
    }
    float ss = _mm512_reduce_add_ps(s);
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    __m512 iv = _mm512_set1_ps(inv);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes(n - i);
        __m512 r = _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), iv),
                                 _mm512_maskz_loadu_ps(m, w + i));
        _mm512_mask_storeu_ps(y + i, m, r);
    }
}

INLINE __m512 exp16(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(88.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n); /* p * 2^n, n integral */
}

static void silu_mul_avx512(float *g, const float *u, int64_t n) {
    const __m512 one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes(n - i);
        __m512 x = _mm512_maskz_loadu_ps(m, g + i);
        __m512 s = _mm512_div_ps(x, _mm512_add_ps(one, exp16(_mm512_sub_ps(zero, x))));
        _mm512_mask_storeu_ps(g + i, m, _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, u + i)));
    }
}

static void softmax_avx512(float *x, int64_t n) {
    if (n <= 0) return;
    __m512 mv = _mm512_set1_ps(-INFINITY);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes(n - i);
        mv = _mm512_mask_max_ps(mv, m, mv, _mm512_maskz_loadu_ps(m, x + i));
    }
    float mx = _mm512_reduce_max_ps(mv);
    mv = _mm512_set1_ps(mx);
    __m512 s = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes(n - i);
        __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), mv));
        _mm512_mask_storeu_ps(x + i, m, e);
        s = _mm512_add_ps(s, _mm512_maskz_mov_ps(m, e)); /* masked-off lanes add 0 */
    }
    scale_avx512(x, 1.0f / _mm512_reduce_add_ps(s), n);
}

int kernels_fill_avx512(qw_kernels *k) {
    k->matmul[QW_F32] = matmul_f32_avx512;
    k->matmul[QW_F16] = matmul_f16_avx512;
    k->matmul[QW_BF16] = matmul_bf16_avx512;
    k->to_f32[QW_F16] = to_f32_f16_avx512;
    k->to_f32[QW_BF16] = to_f32_bf16_avx512;
    k->dot = dot_avx512;
    k->axpy = axpy_avx512;
    k->scale = scale_avx512;
    k->rmsnorm = rmsnorm_avx512;
    k->silu_mul = silu_mul_avx512;
    k->softmax = softmax_avx512;
    k->add = add_avx512;
    return 1;
}

#else

int kernels_fill_avx512(qw_kernels *k) {
    (void)k;
    return 0;
}

#endif
