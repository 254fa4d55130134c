/* elementwise_ref.c - the plain-C reference of the per-element kernels
 * (rmsnorm, silu_mul, add): straight loops, float32 accumulation in index
 * order, libm expf / sqrtf, built without -ffast-math so the compiler may
 * not reassociate the sums. tests/kernels/test_kernels.c checks every
 * level's twin (elementwise_<isa>.c, beside this file) against it.
 */
#include <math.h>

#include "kernels/kernels_impl.h"

static void rmsnorm_ref(float *y, const float *x, const float *w, int64_t n, float eps) {
    float ss = 0.0f;
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * inv * w[i];
}

static void silu_mul_ref(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

static void add_ref(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

const qw_kernels kernels_elementwise_ref = {
    .rmsnorm = rmsnorm_ref,
    .silu_mul = silu_mul_ref,
    .add = add_ref,
};
