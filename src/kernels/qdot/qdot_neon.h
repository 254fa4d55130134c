/* qdot_neon.h - the exact int8 dot products that the NEON integer kernels
 * (qdot_neon.c, kquant_neon.c) build on: vdotq_s32 where the compiler
 * targets the dot-product extension (__ARM_FEATURE_DOTPROD), else widening
 * vmull_s8 and pairwise adds. Both are exact in int32, so a kernel's result
 * does not depend on which one it got. */
#ifndef QW_KERNELS_QDOT_NEON_H
#define QW_KERNELS_QDOT_NEON_H

#if defined(__aarch64__)
#include <arm_neon.h>

/* acc + the 4 partial sums of 16 products w[i] * x[i] (lane i % 4 or a
 * pairwise grouping: only the total is meaningful). */
static inline int32x4_t qw_neon_dot16(int32x4_t acc, int8x16_t w, int8x16_t x) {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(acc, w, x);
#else
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(w), vget_low_s8(x)));
    return vpadalq_s16(acc, vmull_high_s8(w, x));
#endif
}

/* sum of the 32 products (w0, w1) * x[0..31]. */
static inline int32_t qw_neon_dot32(int8x16_t w0, int8x16_t w1, const int8_t *x) {
    int32x4_t a = qw_neon_dot16(vdupq_n_s32(0), w0, vld1q_s8(x));
    return vaddvq_s32(qw_neon_dot16(a, w1, vld1q_s8(x + 16)));
}

#endif
#endif
