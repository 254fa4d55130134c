/* qdot_kquant_avx2.c - the integer path's K-quant kernels (matmul_q of Q4_K,
 * Q5_K, Q6_K with QA8 activations) on AVX2: vpmaddubsw (unsigned weight
 * quants x signed activation quants, pairs in int16) then vpmaddwd (int32),
 * the float steps of qdot_kquant_ref.c in 8 lanes, lane j = sub-block j.
 *
 * Integer sums are exact whatever their order, so each sub-block's 8 int32
 * partial sums are reduced with vphaddd in any convenient order; what must
 * match the reference is only the float part (d * dx, the fmas, the tree),
 * which is done in the reference's order. No int16 sum can saturate:
 * vpmaddubsw pairs are at most 2 * 63 * 127 = 16002.
 *  - Q4_K / Q5_K: dot per sub-block, times the 6-bit scale (vpmulld on the
 *    8 reduced lanes), the min term mn * s from the QA8 block sums.
 *  - Q6_K: unsigned q (0..63), and the -32 offset as 32 * qx pairs
 *    (vpmaddubsw of 32 with the activations, once per token and super-block)
 *    subtracted in int16 (|difference| <= 2 * 32 * 127); the two 16-weight
 *    halves of a sub-block stay apart through the reduction (one per 128-bit
 *    lane) to be multiplied by their own int8 scale.
 * Tiling: 4 rows x up to 4 tokens per tile, every super-block's weights
 * unpacked once per tile and used for all its tokens; tokens in blocks of
 * 32 so their activations stay in L2 while the row tiles stream by. n = 1
 * (decode) is the 4-row x 1-token tile: each weight byte is read once.
 * Every (row, token) result is computed by the same float steps in every
 * tile shape, so the output is batch invariant.
 */
#include "kernels/kernels_impl.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define INLINE static inline __attribute__((always_inline))

enum { TILE_ROWS = 4, TILE_TOKENS = 4, TOKEN_BLOCK = 32 };

INLINE float f16_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

/* The reference's final tree: ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)). */
INLINE float lanes_sum(__m256 a) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    __m128 g = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(g, _mm_movehdup_ps(g)));
}

/* v[j]: 8 int32 partial sums of sub-block j, lanes 0-3 from its first 16
 * weights, 4-7 from its last 16. Returns, per 128-bit lane, the sums of
 * blocks j0 .. j0 + 3: { S(j0) .. S(j0+3) (first halves) | (last halves) }. */
INLINE __m256i halves4(const __m256i *v) {
    return _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
}
/* Lane j of the result: the sum of 8-lane vectors a (blocks 0..3) and b
 * (blocks 4..7) as halves4 gives them. */
INLINE __m256i join_halves(__m256i a, __m256i b) {
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

/* One QA8 row's super-block B: quants, 8 scales, 8 sums. */
typedef struct {
    const int8_t *q;
    __m256 dx;
    __m256i s;
} tok_q45;

INLINE void prep_tok_q45(tok_q45 *x, const uint8_t *row, int64_t k, int64_t B) {
    x->q = (const int8_t *)row + 256 * B;
    x->dx = _mm256_loadu_ps((const float *)(row + k) + 8 * B);
    x->s = _mm256_loadu_si256((const __m256i *)((const int32_t *)(row + k + 4 * (k / 32)) + 8 * B));
}

/* ---- Q4_K, Q5_K ---- */

/* A weight super-block, unpacked: w[j] the 32 quants of sub-block j as
 * bytes; sc, mn the 6-bit scales and mins as int32 lanes; d, dmin. */
typedef struct {
    __m256i w[8], sc, mn;
    __m256 d, dmin;
} row_q45;

/* GGML's 12 packed scale bytes, four sub-blocks per 32-bit word:
 * j < 4: sc = s[j] & 63, mn = s[j + 4] & 63; j >= 4: the low 4 bits from
 * s[j + 4] (sc: low nibble, mn: high), bits 4-5 from bits 6-7 of s[j - 4]
 * (sc) or s[j] (mn); the same values as qw_kquant_scale_min. */
INLINE void scales_q45(const uint8_t *s, __m256i *sc, __m256i *mn) {
    uint32_t u0, u1, u2;
    memcpy(&u0, s, 4);
    memcpy(&u1, s + 4, 4);
    memcpy(&u2, s + 8, 4);
    uint64_t scv = (u0 & 0x3f3f3f3fu) | (uint64_t)((u2 & 0x0f0f0f0fu) | ((u0 >> 2) & 0x30303030u)) << 32;
    uint64_t mnv = (u1 & 0x3f3f3f3fu) | (uint64_t)(((u2 >> 4) & 0x0f0f0f0fu) | ((u1 >> 2) & 0x30303030u)) << 32;
    *sc = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)scv));
    *mn = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)mnv));
}

/* qs[32 c + l]: low nibble = sub-block 2c, high = 2c + 1; Q5_K: bit 4 of
 * weight l of sub-block j is bit j of qh[l]. */
INLINE void prep_row_q45(row_q45 *r, const uint8_t *b, int five) {
    const __m256i m4 = _mm256_set1_epi8(15), b4 = _mm256_set1_epi8(16);
    r->d = _mm256_set1_ps(f16_at(b));
    r->dmin = _mm256_set1_ps(f16_at(b + 2));
    scales_q45(b + 4, &r->sc, &r->mn);
    const uint8_t *qs = b + (five ? 48 : 16);
    for (int c = 0; c < 4; c++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
        r->w[2 * c] = _mm256_and_si256(v, m4);
        r->w[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    }
    if (five) {
        const __m256i H = _mm256_loadu_si256((const __m256i *)(b + 16));
        for (int j = 0; j < 8; j++) {
            __m256i h = j <= 4 ? _mm256_slli_epi16(H, 4 - j) : _mm256_srli_epi16(H, j - 4);
            r->w[j] = _mm256_or_si256(r->w[j], _mm256_and_si256(h, b4));
        }
    }
}

INLINE __m256 step_q45(__m256 acc, const row_q45 *r, const tok_q45 *x) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i v[8];
    for (int j = 0; j < 8; j++)
        v[j] = _mm256_madd_epi16(
            _mm256_maddubs_epi16(r->w[j], _mm256_loadu_si256((const __m256i *)(x->q + 32 * j))), ones);
    const __m256i dot = join_halves(halves4(v), halves4(v + 4));
    const __m256i isum = _mm256_mullo_epi32(dot, r->sc), msum = _mm256_mullo_epi32(r->mn, x->s);
    acc = _mm256_fmadd_ps(_mm256_mul_ps(r->d, x->dx), _mm256_cvtepi32_ps(isum), acc);
    return _mm256_fnmadd_ps(_mm256_mul_ps(r->dmin, x->dx), _mm256_cvtepi32_ps(msum), acc);
}

/* ---- Q6_K ---- */

typedef struct {
    __m256i w[8], sca, scb; /* quants 0..63; int8 scales ordered as halves4 leaves the sums */
    __m256 d;
} row_q6;

typedef struct {
    tok_q45 x;
    __m256i off[8]; /* per sub-block: 32 * qx in vpmaddubsw pairs (the -32 offset) */
} tok_q6;

/* Half h: ql[64 h ..] (v0, v1) and qh[32 h ..] (H): sub-block 4h + 0 =
 * v0 low | H bits 0-1, 4h + 1 = v1 low | bits 2-3, 4h + 2 = v0 high | bits
 * 4-5, 4h + 3 = v1 high | bits 6-7. */
INLINE void prep_row_q6(row_q6 *r, const uint8_t *b) {
    const __m256i m15 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
    for (int h = 0; h < 2; h++) {
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
    __m128i s = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(b + 192)),
                                 _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15));
    r->sca = _mm256_cvtepi8_epi32(s);
    r->scb = _mm256_cvtepi8_epi32(_mm_srli_si128(s, 8));
    r->d = _mm256_set1_ps(f16_at(b + 208));
}

INLINE void prep_tok_q6(tok_q6 *t, const uint8_t *row, int64_t k, int64_t B) {
    prep_tok_q45(&t->x, row, k, B);
    const __m256i k32 = _mm256_set1_epi8(32);
    for (int j = 0; j < 8; j++)
        t->off[j] = _mm256_maddubs_epi16(k32, _mm256_loadu_si256((const __m256i *)(t->x.q + 32 * j)));
}

INLINE __m256 step_q6(__m256 acc, const row_q6 *r, const tok_q6 *t) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i v[8];
    for (int j = 0; j < 8; j++) {
        __m256i p = _mm256_maddubs_epi16(r->w[j], _mm256_loadu_si256((const __m256i *)(t->x.q + 32 * j)));
        v[j] = _mm256_madd_epi16(_mm256_sub_epi16(p, t->off[j]), ones);
    }
    const __m256i isum = join_halves(_mm256_mullo_epi32(halves4(v), r->sca), _mm256_mullo_epi32(halves4(v + 4), r->scb));
    return _mm256_fmadd_ps(_mm256_mul_ps(r->d, t->x.dx), _mm256_cvtepi32_ps(isum), acc);
}

/* ---- tiles and the row / token loops ----
 * TILE(name, row type, row prep, token type, token prep, step, bytes): an
 * R-row x T-token tile over the whole row (R, T constants after inlining),
 * and name_avx2, the matmul_q entry. */
#define KQ_KERNEL(NAME, ROW_T, PREP_ROW, TOK_T, PREP_TOK, STEP, BYTES)                                              \
    INLINE void NAME##_tile(float *Y, int64_t ldy, const uint8_t *XQ, int64_t ldxq, const uint8_t *W, int64_t k,    \
                            int64_t o, int64_t t, const int R, const int T) {                                       \
        const int64_t nsb = k / QW_QK_BLOCK, rb = nsb * (BYTES);                                                    \
        __m256 acc[TILE_ROWS][TILE_TOKENS];                                                                        \
        for (int r = 0; r < R; r++)                                                                                 \
            for (int u = 0; u < T; u++) acc[r][u] = _mm256_setzero_ps();                                            \
        for (int64_t B = 0; B < nsb; B++) {                                                                         \
            ROW_T rw[TILE_ROWS];                                                                                    \
            TOK_T tk[TILE_TOKENS];                                                                                  \
            for (int r = 0; r < R; r++) PREP_ROW(&rw[r], W + (o + r) * rb + B * (BYTES));                           \
            for (int u = 0; u < T; u++) PREP_TOK(&tk[u], XQ + (t + u) * ldxq, k, B);                                \
            for (int r = 0; r < R; r++)                                                                             \
                for (int u = 0; u < T; u++) acc[r][u] = STEP(acc[r][u], &rw[r], &tk[u]);                            \
        }                                                                                                           \
        for (int r = 0; r < R; r++)                                                                                 \
            for (int u = 0; u < T; u++) Y[(t + u) * ldy + o + r] = lanes_sum(acc[r][u]);                            \
    }                                                                                                               \
    INLINE void NAME##_rows(float *Y, int64_t ldy, const uint8_t *XQ, int64_t ldxq, const uint8_t *W, int64_t k,    \
                            int64_t o, int64_t t0, int64_t t1, const int R) {                                       \
        int64_t t = t0;                                                                                             \
        for (; t + TILE_TOKENS <= t1; t += TILE_TOKENS) NAME##_tile(Y, ldy, XQ, ldxq, W, k, o, t, R, TILE_TOKENS);  \
        switch (t1 - t) {                                                                                           \
        case 3: NAME##_tile(Y, ldy, XQ, ldxq, W, k, o, t, R, 3); break;                                            \
        case 2: NAME##_tile(Y, ldy, XQ, ldxq, W, k, o, t, R, 2); break;                                            \
        case 1: NAME##_tile(Y, ldy, XQ, ldxq, W, k, o, t, R, 1); break;                                            \
        default: break;                                                                                             \
        }                                                                                                           \
    }                                                                                                               \
    static void NAME##_avx2(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,           \
                            int64_t k, int64_t o0, int64_t o1) {                                                    \
        for (int64_t t0 = 0; t0 < n; t0 += TOKEN_BLOCK) {                                                           \
            const int64_t t1 = t0 + TOKEN_BLOCK < n ? t0 + TOKEN_BLOCK : n;                                         \
            int64_t o = o0;                                                                                         \
            for (; o + TILE_ROWS <= o1; o += TILE_ROWS) NAME##_rows(Y, ldy, XQ, ldxq, W, k, o, t0, t1, TILE_ROWS); \
            for (; o < o1; o++) NAME##_rows(Y, ldy, XQ, ldxq, W, k, o, t0, t1, 1);                                  \
        }                                                                                                           \
    }

INLINE void prep_row_q4(row_q45 *r, const uint8_t *b) { prep_row_q45(r, b, 0); }
INLINE void prep_row_q5(row_q45 *r, const uint8_t *b) { prep_row_q45(r, b, 1); }

KQ_KERNEL(matmul_q_q4_k, row_q45, prep_row_q4, tok_q45, prep_tok_q45, step_q45, 144)
KQ_KERNEL(matmul_q_q5_k, row_q45, prep_row_q5, tok_q45, prep_tok_q45, step_q45, 176)
KQ_KERNEL(matmul_q_q6_k, row_q6, prep_row_q6, tok_q6, prep_tok_q6, step_q6, 210)

int kernels_fill_qdot_kquant_avx2(qw_kernels *k) {
    k->matmul_q[QW_Q4_K] = matmul_q_q4_k_avx2;
    k->matmul_q[QW_Q5_K] = matmul_q_q5_k_avx2;
    k->matmul_q[QW_Q6_K] = matmul_q_q6_k_avx2;
    return 1;
}

#else
int kernels_fill_qdot_kquant_avx2(qw_kernels *k) {
    (void)k;
    return 0;
}
#endif
