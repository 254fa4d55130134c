/* qdot_neon.h - private to the arm64 block-32 integer kernels (qdot_neon.c,
 * qrepack_neon.c): the types' sizes from the traits table and the Q5 high
 * bits as bytes.
 */
#ifndef QW_QDOT_NEON_H
#define QW_QDOT_NEON_H

#include <arm_neon.h>

#include "kernels/kernels_impl.h"

#define INLINE static inline __attribute__((always_inline))
/* The small fixed loops must be unrolled so that their vectors stay in registers. */
#define UNROLL _Pragma("GCC unroll 16")

/* T is the weight's qw_dtype, a constant in every specialised kernel, so these fold. */
INLINE int blk_bytes(int T) { return qw_type((qw_dtype)T)->bytes; }
INLINE int blk_off(int T) { return qw_type((qw_dtype)T)->zero; }
INLINE int has_min(int T) { return qw_type((qw_dtype)T)->m_off >= 0; }

/* 16 bytes whose byte j is 16 where bit j of the 16-bit field h is set. */
INLINE uint8x16_t high16(uint32_t h) {
    static const uint8_t bits[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    uint8x16_t v = vcombine_u8(vdup_n_u8((uint8_t)(h & 0xff)), vdup_n_u8((uint8_t)(h >> 8)));
    uint8x16_t set = vtstq_u8(v, vld1q_u8(bits));
    return vandq_u8(set, vdupq_n_u8(16));
}

#endif
