/* kquant_x86.h - private to kquant_avx2.c and
 * kquant_avx512vnni.c: what their K-quant integer kernels share
 * (weight unpacking, the horizontal integer sums, the activation view, the
 * tiling). Each file includes it once, compiled with its own ISA flags, and
 * adds its own integer dot products (vpmaddubsw + vpmaddwd, or vpdpbusd).
 *
 * The float steps are kquant_ref.c's, in 8 lanes, lane j = sub-block
 * j; integer sums are exact whatever their order, so they are reduced in
 * any convenient order, and only the float part follows the reference.
 * Tiling: 4 rows x 8 tokens per tile (then 4, 2, 1 for the rest), each
 * row's super-block unpacked once per tile, into registers, and used for
 * all its tokens (8 rather than 4: llvm-mca, znver3, 10% fewer cycles per
 * Q6_K super-block); tokens in blocks of 32 so their activations stay in L2
 * while the row tiles stream by. Decode (n <= 8) runs 1-row x n-token
 * tiles: each weight byte is read once, in order, prefetched two rows
 * ahead (one thread, Q4_K from DRAM, busy machine: 14 GB/s, against 8-9
 * with 4-row tiles, whose 4 interleaved streams the prefetchers serve
 * worse). Every (row, token) result goes through the same float steps in
 * every tile shape, so the output is batch invariant.
 */
#ifndef QW_QDOT_KQUANT_X86_H
#define QW_QDOT_KQUANT_X86_H

#include <immintrin.h>

#include "kernels/kernels_impl.h"

#define INLINE static inline __attribute__((always_inline))
/* Fixed-count loops over sub-blocks, rows and tokens of a tile must be
 * unrolled for their vectors to live in registers (-O2 does not). */
#define UNROLL _Pragma("GCC unroll 8")

enum { TILE_ROWS = 4, TILE_TOKENS = 8, TOKEN_BLOCK = 32 };

/* The reference's final tree: ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)). */
INLINE float lanes_sum(__m256 a) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    __m128 g = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(g, _mm_movehdup_ps(g)));
}

/* The horizontal sums. p[j]: 8 int32 sums of 4 products each of
 * sub-block j (lanes 0-3 from its first 16 weights, 4-7 from its last 16).
 * Returns sub-block j's sum times its scale(s) in lane j. Each level packs
 * two vectors into one (vpackssdw, one shuffle uop) and adds neighbours
 * (vpmaddwd), where vphaddd would take 3 uops and 2 cycles of a shuffle
 * port (Zen 3/4). The packs never saturate: sums of 4 products are at most
 * 4 * 63 * 127 = 32004 (Q6_K's unsigned q) and of 8 at most
 * 8 * 32 * 127 = 32512 (Q6_K's q - 32; Q5_K 31496, Q4_K 15240), so callers
 * with unsigned Q6_K quants take the offset off before. The last level
 * multiplies by sa, sb: the scale of each int16 pair, sub-blocks 0-3 and
 * 4-7 in dword order, 128-bit lane 0 for first halves, lane 1 for last. */
INLINE __m256i scaled_sums(const __m256i *p, __m256i sa, __m256i sb) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i v[4];
    UNROLL for (int i = 0; i < 4; i++) /* per 128-bit lane: dwords {2i, 2i, 2i+1, 2i+1} */
        v[i] = _mm256_madd_epi16(_mm256_packs_epi32(p[2 * i], p[2 * i + 1]), ones);
    __m256i c0 = _mm256_madd_epi16(_mm256_packs_epi32(v[0], v[1]), sa); /* dwords {0, 1, 2, 3} */
    __m256i c1 = _mm256_madd_epi16(_mm256_packs_epi32(v[2], v[3]), sb); /* dwords {4, 5, 6, 7} */
    /* {c0.lo + c0.hi, c1.lo + c1.hi}: the two 16-weight halves joined */
    return _mm256_add_epi32(_mm256_blend_epi32(c0, c1, 0xf0), _mm256_permute2x128_si256(c0, c1, 0x21));
}

/* The sums of scaled_sums without the scales (Q4_K / Q5_K: the reference
 * scales the float dot). */
INLINE __m256i plain_sums(const __m256i *p) {
    const __m256i ones = _mm256_set1_epi16(1);
    return scaled_sums(p, ones, ones);
}

/* One QA8 row's super-block B: quants, 8 scales, 8 products d * s. */
typedef struct {
    const int8_t *q;
    __m256 dx, ds;
} tok_q45;

INLINE void prep_tok_q45(tok_q45 *x, const uint8_t *row, int64_t k, int64_t B) {
    x->q = (const int8_t *)row + 256 * B;
    x->dx = _mm256_loadu_ps((const float *)(row + k) + 8 * B);
    x->ds = _mm256_loadu_ps((const float *)(row + k + 8 * (k / 32)) + 8 * B);
}

/* ---- Q4_K, Q5_K ---- */

/* A weight super-block, unpacked: w[j] the 32 quants of sub-block j as
 * bytes; the 6-bit scales and mins, as int32 and as the reference's
 * products dsc = d * sc, dmn = dmin * mn (lane j = sub-block j). */
typedef struct {
    __m256i w[8];
    __m256i sc, mn;
    __m256 dsc, dmn;
} row_q45;

/* GGML's 12 packed scale bytes, four sub-blocks per 32-bit word:
 * j < 4: sc = s[j] & 63, mn = s[j + 4] & 63; j >= 4: the low 4 bits from
 * s[j + 4] (sc: low nibble, mn: high), bits 4-5 from bits 6-7 of s[j - 4]
 * (sc) or s[j] (mn); the same values as qw_kquant_scale_min. */
INLINE void scales_q45(const uint8_t *s, row_q45 *r) {
    uint32_t u0, u1, u2;
    memcpy(&u0, s, 4);
    memcpy(&u1, s + 4, 4);
    memcpy(&u2, s + 8, 4);
    uint64_t scv = (u0 & 0x3f3f3f3fu) | (uint64_t)((u2 & 0x0f0f0f0fu) | ((u0 >> 2) & 0x30303030u)) << 32;
    uint64_t mnv = (u1 & 0x3f3f3f3fu) | (uint64_t)(((u2 >> 4) & 0x0f0f0f0fu) | ((u1 >> 2) & 0x30303030u)) << 32;
    r->sc = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)scv));
    r->mn = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)mnv));
}

/* qs[32 c + l]: low nibble = sub-block 2c, high = 2c + 1; Q5_K: bit 4 of
 * weight l of sub-block j is bit j of qh[l]. */
INLINE void prep_row_q45(row_q45 *r, const uint8_t *b, int five) {
    const __m256i m4 = _mm256_set1_epi8(15), b4 = _mm256_set1_epi8(16);
    scales_q45(b + 4, r);
    r->dsc = _mm256_mul_ps(_mm256_set1_ps(qw_f16_at_f16c(b)), _mm256_cvtepi32_ps(r->sc));
    r->dmn = _mm256_mul_ps(_mm256_set1_ps(qw_f16_at_f16c(b + 2)), _mm256_cvtepi32_ps(r->mn));
    const uint8_t *qs = b + (five ? 48 : 16);
    UNROLL for (int c = 0; c < 4; c++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
        r->w[2 * c] = _mm256_and_si256(v, m4);
        r->w[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    }
    if (five) {
        const __m256i H = _mm256_loadu_si256((const __m256i *)(b + 16));
        UNROLL for (int j = 0; j < 8; j++) {
            __m256i h = j <= 4 ? _mm256_slli_epi16(H, 4 - j) : _mm256_srli_epi16(H, j - 4);
            r->w[j] = _mm256_or_si256(r->w[j], _mm256_and_si256(h, b4));
        }
    }
}

/* ---- Q6_K ---- */

typedef struct {
    __m256i w[8];   /* quants 0..63 */
    __m256i sa, sb; /* scales as int16 pairs as scaled_sums wants them */
    __m256 d;
} row_q6;

/* Half h: ql[64 h ..] (v0, v1) and qh[32 h ..] (H): sub-block 4h + 0 =
 * v0 low | H bits 0-1, 4h + 1 = v1 low | bits 2-3, 4h + 2 = v0 high | bits
 * 4-5, 4h + 3 = v1 high | bits 6-7. */
INLINE void prep_row_q6(row_q6 *r, const uint8_t *b) {
    const __m256i m15 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
    UNROLL for (int h = 0; h < 2; h++) {
        __m256i v0 = _mm256_loadu_si256((const __m256i *)(b + 64 * h));
        __m256i v1 = _mm256_loadu_si256((const __m256i *)(b + 64 * h + 32));
        __m256i H = _mm256_loadu_si256((const __m256i *)(b + 128 + 32 * h));
        r->w[4 * h] = _mm256_or_si256(_mm256_and_si256(v0, m15), _mm256_and_si256(_mm256_slli_epi16(H, 4), m30));
        r->w[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(v1, m15), _mm256_and_si256(_mm256_slli_epi16(H, 2), m30));
        r->w[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v0, 4), m15), _mm256_and_si256(H, m30));
        r->w[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v1, 4), m15),
                                          _mm256_and_si256(_mm256_srli_epi16(H, 2), m30));
    }
    /* sc[2j] scales the first 16 weights of sub-block j, sc[2j + 1] the last */
    const __m128i s = _mm_loadu_si128((const __m128i *)(b + 192));
    r->sa = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(s, _mm_setr_epi8(0, 0, 2, 2, 4, 4, 6, 6, 1, 1, 3, 3, 5, 5, 7, 7)));
    r->sb = _mm256_cvtepi8_epi16(
        _mm_shuffle_epi8(s, _mm_setr_epi8(8, 8, 10, 10, 12, 12, 14, 14, 9, 9, 11, 11, 13, 13, 15, 15)));
    r->d = _mm256_set1_ps(qw_f16_at_f16c(b + 208));
}

/* Weights stream once per tile: prefetch the same super-block of the rows
 * two tiles ahead (without it, one thread decoding Q4_K from DRAM: 6 GB/s
 * instead of 14; busy machine). Past the matrix's end the lines are never
 * used: harmless, a prefetch does not fault. */
INLINE void prefetch_ahead(const uint8_t *p, int bytes) {
    UNROLL for (int i = 0; i < bytes; i += 64) _mm_prefetch((const char *)p + i, _MM_HINT_T0);
}

#endif
