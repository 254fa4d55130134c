/* qdot_neon.h - the exact int8 dot products that the NEON integer kernels
 * (qdot_neon.c, kquant_neon.c, qrepack_neon.c) build on: vdotq_s32 where the compiler
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

/* acc lane i + the 4 products w[4i..4i+3] * x[4i..4i+3], exactly that
 * grouping (sdot's): qrepack_neon.c keeps one row per lane. Without the
 * extension, the pairs' int16 sums are exact (|pair| <= 2 * 128 * 127). */
static inline int32x4_t qw_neon_dot4x4(int32x4_t acc, int8x16_t w, int8x16_t x) {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(acc, w, x);
#else
    return vpadalq_s16(acc, vpaddq_s16(vmull_s8(vget_low_s8(w), vget_low_s8(x)), vmull_high_s8(w, x)));
#endif
}

/* 16 bytes whose byte j is 16 where bit j of the 16-bit field h is set
 * (the Q5 types' high bits: qdot_neon.c per block, qrepack_neon.c per
 * part of a tile vector). */
static inline uint8x16_t qw_neon_high16(uint32_t h) {
    static const uint8_t bits[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    uint8x16_t v = vcombine_u8(vdup_n_u8((uint8_t)(h & 0xff)), vdup_n_u8((uint8_t)(h >> 8)));
    uint8x16_t set = vtstq_u8(v, vld1q_u8(bits));
    return vandq_u8(set, vdupq_n_u8(16));
}

/* sum of the 32 products (w0, w1) * x[0..31]. */
static inline int32_t qw_neon_dot32(int8x16_t w0, int8x16_t w1, const int8_t *x) {
    int32x4_t a = qw_neon_dot16(vdupq_n_s32(0), w0, vld1q_s8(x));
    return vaddvq_s32(qw_neon_dot16(a, w1, vld1q_s8(x + 16)));
}

#endif
#endif
