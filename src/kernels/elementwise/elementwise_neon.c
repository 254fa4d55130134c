/* elementwise_neon.c - the per-element kernels (rmsnorm, silu_mul, add)
 * with arm64 Advanced SIMD, 4 floats per vector and scalar tails; beside
 * their reference, elementwise_ref.c. exp: the shared polynomial expf of
 * simd_exp.h, the same operations as the AVX2 level.
 */
#include "kernels/kernels_impl.h"

#if defined(__aarch64__)
#include <arm_neon.h>
#include <math.h>

#include "kernels/simd_exp.h"

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

static void add_neon(float *y, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vaddq_f32(vld1q_f32(y + i), vld1q_f32(x + i)));
    for (; i < n; i++) y[i] += x[i];
}

const qw_kernels kernels_elementwise_neon = {
    .rmsnorm = rmsnorm_neon,
    .silu_mul = silu_mul_neon,
    .add = add_neon,
};

#endif
