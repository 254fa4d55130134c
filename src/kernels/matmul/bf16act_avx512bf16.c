/* bf16act_avx512bf16.c - the bf16-activation path on AVX512-BF16
 * (kernels.h: to_bf16, matmul_bf16act[QW_BF16]).
 *
 * Compiled with -mavx512bf16 on top of the avx512 level's flags (Makefile)
 * and filled into the avx512 table only when cpu.c saw the AVX512-BF16 bit.
 *  - to_bf16: vcvtneps2bf16, 16 floats at a time, masked tail;
 *  - matmul: one vdpbf16ps per 32 columns of a (row, token) pair: its 16
 *    lanes are kernels.h's 16 lanes (lane j takes columns 2j+1 then 2j of
 *    the chunk), the ragged last chunk is a masked load (zeros, as the
 *    reference pads), and each output's lanes are folded in kernels.h's
 *    order. Every output is thus the same instruction sequence whatever
 *    tile it lands in: batch invariant and bitwise the reference
 *    (bf16act_ref.c; tests/kernels/test_bf16act.c).
 * Tiles, as measured (tools/bench_bf16act.sh, Zen 4):
 *  - n <= STREAM_N (decode, small batches): one row at a time x up to 6
 *    tokens: the weights are one sequential stream (4-row tiles, 4
 *    interleaved streams with masked loads, reached only 9-12 GB/s on
 *    lm_head from DRAM against 16-22). Software prefetch only where the
 *    CPU asks for it (kernels_decode_prefetch, cpu.c: Zen 5): on Zen 4,
 *    with the weights in huge pages (model/repack.c), the hardware's
 *    stream runs on across 4 KiB boundaries, and a prefetch 2 KiB ahead
 *    only cost (BF16 0.5B decode, 6 interleaved rounds: 28.8 tok/s with
 *    it, 32.3 without);
 *  - larger n (prefill): 4 rows x up to 6 tokens (24 accumulators + 4
 *    weights + 1 activation = 29 of the 32 zmm), a 1-row tile for the
 *    o1 - o0 tail; the tokens are taken in blocks whose bf16 rows fit in
 *    L2, so each 4-row weight block is read from memory once per token
 *    block and then served from L1 to every token tile of the block.
 */
#include "kernels/kernels_impl.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 8")

/* STREAM_N: the largest n that streams one row at a time. X_L2: bytes of
 * bf16 activation rows a token block may take (half of a 1 MiB L2: the
 * weights and Y share it). */
enum { STREAM_N = 8, ROWS = 4, TOKS = 6, X_L2 = 512 * 1024 };

/* Mask of the first m (0..32) bf16 lanes. */
INLINE __mmask32 lanes32(int64_t m) { return m >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << m) - 1u); }

INLINE __m512bh ld32(const uint16_t *p, __mmask32 m) {
    return (__m512bh)(m == (__mmask32)0xffffffffu ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi16(m, p));
}

/* kernels.h's fold of the 16 lanes: l[j] += l[j+8], += l[j+4], += l[j+2],
 * then l[0] + l[1]. */
INLINE float fold16(__m512 v) {
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    b = _mm_add_ps(b, _mm_movehl_ps(b, b));
    b = _mm_add_ss(b, _mm_movehdup_ps(b));
    return _mm_cvtss_f32(b);
}

/* out[i] = fold16(v[i]) for i < 16, bit for bit, with 15 adds instead of
 * 16 x 4: each level pairs the same lanes fold16 pairs (l[j] + l[j+8],
 * then + [j+4], + [j+2], then l[0] + l[1]; float addition commutes
 * exactly), for 2, 4, 8 and then 16 vectors at once. With k = 896 (the
 * 0.5B's q/k/v/o and gate/up) a 4 x 6 tile runs 28 steps, and 24 separate
 * fold16 calls were a fifth of its instructions. */
INLINE void fold16x16(const __m512 v[16], float out[16]) {
    __m512 s[8], t[4], u[2];
    UNROLL for (int i = 0; i < 8; i++) /* [v2i: l[j] + l[j+8], j < 8 | v2i+1: same] */
        s[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xEE));
    UNROLL for (int i = 0; i < 4; i++) /* 128-bit lane L: vector 4i + L, its [j] + [j+4], j < 4 */
        t[i] = _mm512_add_ps(_mm512_shuffle_f32x4(s[2 * i], s[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(s[2 * i], s[2 * i + 1], 0xDD));
    UNROLL for (int i = 0; i < 2; i++) /* lane L: [j] + [j+2] of vector 8i + L (j < 2), then of 8i + 4 + L */
        u[i] = _mm512_add_ps(_mm512_shuffle_ps(t[2 * i], t[2 * i + 1], 0x44),
                             _mm512_shuffle_ps(t[2 * i], t[2 * i + 1], 0xEE));
    /* lane L: [0] + [1] of vectors L, L + 4, L + 8, L + 12 */
    __m512 r = _mm512_add_ps(_mm512_shuffle_ps(u[0], u[1], 0x88), _mm512_shuffle_ps(u[0], u[1], 0xDD));
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    _mm512_storeu_ps(out, _mm512_permutexvar_ps(order, r));
}

/* One 32-column step at column i (lanes m) of every (row, token) accumulator. */
INLINE void step(__m512 acc[ROWS][TOKS], const uint16_t *X, int64_t ldx, const uint16_t *w, int64_t k, int64_t i,
                 __mmask32 m, const int R, const int T) {
    __m512bh wv[ROWS];
    UNROLL for (int r = 0; r < R; r++) {
        wv[r] = ld32(w + r * k + i, m);
    }
    UNROLL for (int t = 0; t < T; t++) {
        __m512bh xv = ld32(X + t * ldx + i, m);
        UNROLL for (int r = 0; r < R; r++) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], xv, wv[r]);
    }
}

/* Y[t][r] for r < R rows (from w, stride k) and t < T tokens (from X,
 * stride ldx): full rows of k columns. Whole 32-column steps unmasked (the
 * hardware prefetcher follows plain loads better than masked ones), then at
 * most one masked step: the same instructions as masking every step. The
 * one-row stream prefetches pf bytes ahead, a line per step (0: none). */
INLINE void tile(float *Y, int64_t ldy, const uint16_t *X, int64_t ldx, const uint16_t *w, int64_t k, const int R,
                 const int T, int64_t pf) {
    __m512 acc[ROWS][TOKS];
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int t = 0; t < T; t++) acc[r][t] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= k; i += 32) {
        if (R == 1 && pf) _mm_prefetch((const char *)(w + i) + pf, _MM_HINT_T0);
        step(acc, X, ldx, w, k, i, (__mmask32)0xffffffffu, R, T);
    }
    if (i < k) step(acc, X, ldx, w, k, i, lanes32(k - i), R, T);
    if (R == 1) { /* the decode stream: a few outputs per row, folded one by one */
        UNROLL for (int t = 0; t < T; t++) Y[t * ldy] = fold16(acc[0][t]);
        return;
    }
    /* the R * T outputs folded 16 at a time (unused slots zero) */
    __m512 v[2][16];
    float out[32];
    UNROLL for (int t = 0; t < T; t++) UNROLL for (int r = 0; r < R; r++) v[(t * R + r) / 16][(t * R + r) % 16] = acc[r][t];
    const int n = R * T;
    for (int z = n; z < (n + 15) / 16 * 16; z++) v[z / 16][z % 16] = _mm512_setzero_ps();
    fold16x16(v[0], out);
    if (n > 16) fold16x16(v[1], out + 16);
    UNROLL for (int t = 0; t < T; t++) UNROLL for (int r = 0; r < R; r++) Y[t * ldy + r] = out[t * R + r];
}

#define TILE_CASES(R)                                                                                  \
    case 1: tile(Y, ldy, X, ldx, w, k, R, 1, pf); break;                                                   \
    case 2: tile(Y, ldy, X, ldx, w, k, R, 2, pf); break;                                                   \
    case 3: tile(Y, ldy, X, ldx, w, k, R, 3, pf); break;                                                   \
    case 4: tile(Y, ldy, X, ldx, w, k, R, 4, pf); break;                                                   \
    case 5: tile(Y, ldy, X, ldx, w, k, R, 5, pf); break;                                                   \
    default: tile(Y, ldy, X, ldx, w, k, R, 6, pf); break;

static void tile_4(float *Y, int64_t ldy, const uint16_t *X, int64_t ldx, const uint16_t *w, int64_t k, int T) {
    const int64_t pf = 0;
    switch (T) { TILE_CASES(4) }
}

static void tile_1(float *Y, int64_t ldy, const uint16_t *X, int64_t ldx, const uint16_t *w, int64_t k, int T,
                   int64_t pf) {
    switch (T) { TILE_CASES(1) }
}

static void matmul_bf16act_bf16(float *Y, int64_t ldy, const uint16_t *XB, int64_t ldxb, int64_t n, const void *W,
                                int64_t k, int64_t o0, int64_t o1) {
    const uint16_t *w = W;
    const int64_t pf = kernels_decode_prefetch();
    if (n <= STREAM_N && pf) { /* the stream's head: the tile prefetches pf ahead of what it reads */
        const int64_t head = (o1 - o0) * k * 2 < pf ? (o1 - o0) * k * 2 : pf;
        qw_prefetch_lines(w + o0 * k, head);
    }
    int64_t tb = k > 0 ? X_L2 / (2 * k) / TOKS * TOKS : n;
    if (tb < TOKS) tb = TOKS;
    for (int64_t t0 = 0; t0 < n; t0 += tb) {
        int64_t t1 = t0 + tb < n ? t0 + tb : n;
        int64_t o = o0;
        for (; n > STREAM_N && o + ROWS <= o1; o += ROWS)
            for (int64_t t = t0; t < t1; t += TOKS) {
                int T = t1 - t < TOKS ? (int)(t1 - t) : TOKS;
                tile_4(Y + t * ldy + o, ldy, XB + t * ldxb, ldxb, w + o * k, k, T);
            }
        for (; o < o1; o++)
            for (int64_t t = t0; t < t1; t += TOKS) {
                int T = t1 - t < TOKS ? (int)(t1 - t) : TOKS;
                tile_1(Y + t * ldy + o, ldy, XB + t * ldxb, ldxb, w + o * k, k, T, pf);
            }
    }
}

static void to_bf16(uint16_t *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1u);
        __m256bh h = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + i));
        _mm256_mask_storeu_epi16(y + i, m, (__m256i)h);
    }
}

const qw_kernels kernels_bf16act_avx512bf16 = {
    .to_bf16 = to_bf16,
    .matmul_bf16act = {[QW_BF16] = matmul_bf16act_bf16},
};

#endif
