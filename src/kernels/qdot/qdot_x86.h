/* qdot_x86.h - private to the x86 block-32 integer kernels (qdot_avx2.c,
 * qdot_avx512vnni.c, qrepack_*.c): what they share (the types' sizes from
 * the traits table, unaligned loads, the Q5 high bits, a group's scales,
 * the final tree). Each file includes it once, compiled with its own ISA
 * flags; the qdot files then define their own weight and token groups and
 * their dot product, and include qdot_x86_decode.h for the decode loop
 * over them.
 */
#ifndef QW_QDOT_X86_H
#define QW_QDOT_X86_H

#include <immintrin.h>

#include "kernels/kernels_impl.h"

#define INLINE static inline __attribute__((always_inline))
/* The small fixed loops (blocks of a group, tokens of a chunk) must be
 * unrolled so that their vectors stay in registers. */
#define UNROLL _Pragma("GCC unroll 16")

/* Tokens per block of the prefill loop (their QA8 rows stay in L2). */
#define TOK_BLOCK 64
/* Weight prefetch distance in bytes. */
#define PF_DIST 768

/* T is the weight's qw_dtype (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1), a constant in
 * every specialised kernel, so these fold. */
INLINE int blk_bytes(int T) { return qw_type((qw_dtype)T)->bytes; }
INLINE int has_min(int T) { return qw_type((qw_dtype)T)->m_off >= 0; }

INLINE uint32_t ld_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

INLINE __m128i f16x8(const uint8_t *w, int B, int off) {
    return _mm_setr_epi16((short)qw_u16_at(w + off), (short)qw_u16_at(w + B + off), (short)qw_u16_at(w + 2 * B + off),
                          (short)qw_u16_at(w + 3 * B + off), (short)qw_u16_at(w + 4 * B + off),
                          (short)qw_u16_at(w + 5 * B + off), (short)qw_u16_at(w + 6 * B + off),
                          (short)qw_u16_at(w + 7 * B + off));
}

/* 16 where bit j of qh is set, byte j; else 0 (the Q5 types' high bits:
 * qdot_avx2.c per block, qrepack_ymm.h per part of a tile vector). */
INLINE __m256i high_bits(uint32_t qh) {
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2,
                                            3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), spread);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(16));
}

/* d (and m) of a partial group of nbl (1..7) blocks, 0 in the absent
 * lanes: absent lanes re-read the last block (no read past the row, no
 * byte-wise stores reloaded as a vector) and are masked off. */
INLINE void tail_scales(int T, __m256 *gd, __m256 *gm, const uint8_t *w, int B, int nbl) {
    const uint8_t *p[8];
    UNROLL
    for (int j = 0; j < 8; j++) p[j] = w + (j < nbl ? j : nbl - 1) * B;
    __m256 keep = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(nbl), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
    __m128i d = _mm_setr_epi16((short)qw_u16_at(p[0]), (short)qw_u16_at(p[1]), (short)qw_u16_at(p[2]), (short)qw_u16_at(p[3]),
                               (short)qw_u16_at(p[4]), (short)qw_u16_at(p[5]), (short)qw_u16_at(p[6]), (short)qw_u16_at(p[7]));
    *gd = _mm256_and_ps(_mm256_cvtph_ps(d), keep);
    if (has_min(T)) {
        __m128i m = _mm_setr_epi16((short)qw_u16_at(p[0] + 2), (short)qw_u16_at(p[1] + 2), (short)qw_u16_at(p[2] + 2),
                                   (short)qw_u16_at(p[3] + 2), (short)qw_u16_at(p[4] + 2), (short)qw_u16_at(p[5] + 2),
                                   (short)qw_u16_at(p[6] + 2), (short)qw_u16_at(p[7] + 2));
        *gm = _mm256_and_ps(_mm256_cvtph_ps(m), keep);
    } else {
        *gm = _mm256_setzero_ps();
    }
}

/* The fixed tree ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)). */
INLINE float tree(__m256 a) {
    __m128 v = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    v = _mm_add_ps(v, _mm_movehl_ps(v, v));
    return _mm_cvtss_f32(_mm_add_ss(v, _mm_movehdup_ps(v)));
}

#endif
