/* elementwise_avx512.c - the per-element kernels (rmsnorm, silu_mul, add)
 * with AVX-512 F, 16 floats per vector, every tail masked (a masked load
 * reads nothing outside its mask); beside their reference,
 * elementwise_ref.c. exp: simd_exp.h's qw_exp16_avx512.
 */
#include "kernels/kernels_impl.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>

#include "kernels/simd_exp.h"

#define INLINE static inline __attribute__((always_inline))

/* Mask of the first m (0..16) lanes. */
INLINE __mmask16 lanes(int64_t m) { return m >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << m) - 1u); }

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

static void silu_mul_avx512(float *g, const float *u, int64_t n) {
    const __m512 one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes(n - i);
        __m512 x = _mm512_maskz_loadu_ps(m, g + i);
        __m512 s = _mm512_div_ps(x, _mm512_add_ps(one, qw_exp16_avx512(_mm512_sub_ps(zero, x))));
        _mm512_mask_storeu_ps(g + i, m, _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, u + i)));
    }
}

static void add_avx512(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes(n - i);
        _mm512_mask_storeu_ps(y + i, m,
                              _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + i), _mm512_maskz_loadu_ps(m, x + i)));
    }
}

const qw_kernels kernels_elementwise_avx512 = {
    .rmsnorm = rmsnorm_avx512,
    .silu_mul = silu_mul_avx512,
    .add = add_avx512,
};

#endif
