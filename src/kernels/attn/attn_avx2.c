/* attn_avx2.c - the attention kernel (kernels.h: attn) for AVX2 + FMA.
 *
 * Compiled with the *_avx2.c flags (-mavx2 -mfma -mf16c) and installed only
 * when cpu.c found AVX2; a stub on other architectures.
 *
 * One call handles the nq query heads of one kv head for a run of nt
 * consecutive tokens (a prompt being prefilled; nt = 1 in decode), in two
 * passes over the cache, each reading every row once, front to back, for
 * all the run's tokens and heads:
 *  1. scores: 8 K rows at a time, for each token and head in turn (8
 *     accumulators of 8 lanes over hd, the K loads folded into the FMAs,
 *     two hsum4x8); then per token and head max, exp (qw_exp8_avx2) and
 *     sum;
 *  2. weighted V sum: blocks of PB positions (the block's V rows stay in
 *     L1 while every token and head sweeps them: one head x up to 64 dims
 *     per tile, 8 accumulators, the V loads folded into the FMAs, two
 *     positions per trip; the block's row pointers looked up once); the
 *     output rows hold the running sums between blocks; finally
 *     out *= 1 / sum.
 * Runs: a prefill used to call the kernel once per token, so every token
 * read the whole cache again (24 MB per token at 1000 rows of a 0.5B in
 * float32). Sharing each K tile and V block among 16 tokens took the
 * kernel from ~550 to ~330 us per token (tools/bench_attn.sh -n 256 -t 16,
 * one thread, f16 cache) and attention from ~140 to ~102 ms of a 512-token
 * Q4_0 prefill (QWENC_PROFILE, 2 threads).
 * Prefetch: without it the two passes barely overlap memory and compute
 * (per call ~32 us in L2, ~27 us for a plain read of the same 512 KB, ~75
 * us for the kernel streaming from DRAM). During the K pass, K is
 * prefetched PF_K_ROWS ahead and the first PF_V_BYTES of V into L2, both
 * spread over the heads' tiles: ~7% faster (micro-benchmark, 2 threads,
 * 24 layers x 2 kv heads x 1000 rows between 40 MB weight reads: median
 * 1.51 vs 1.62 ms per token). K-only prefetch at 0..128 rows, V-block
 * prefetch and 32/64/128-row V blocks measured no gain, and are not used.
 * Bounding the V prefetch keeps long contexts from evicting it before use.
 * Invariance (kernels.h): every score is one 8-lane FMA chain over hd in
 * order, hsum4x8 (lane r depends on row r only; a short last tile repeats
 * its last row, and a token whose rows end inside a tile stores only its
 * own lanes), a scalar FMA tail, times scale; every output element is one
 * FMA chain over p in order. None of this depends on nt, nq, on which
 * tokens and heads share a tile, or on the block a position falls in.
 * 16-bit caches (attn16): the same code, each K/V element converted
 * exactly as it is loaded (ld8 / ld1), so the result is this kernel's on
 * the float32 values; the prefetches cover the rows' bytes either way. At
 * 2000 rows the kernel is memory bound and 16-bit rows run ~1.55x faster;
 * in cache (200 rows) the conversion costs nothing measurable
 * (tools/bench_attn.sh; docs/PERFORMANCE.md).
 * attn_avx512.c (the avx512 level) gives this kernel's bits with its lanes
 * the other way round, and hands it the calls of few tokens and heads: a
 * change to the float steps here (score chains, hsum4x8's tree, the
 * softmax's sums, the V chains) is a change there too (test_kernels.c
 * compares the two levels bit for bit).
 */
#include "kernels/kernels_impl.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>

#include "kernels/simd_exp.h"

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 8")

enum {
    PB = 64,       /* positions per V block: 16 KB of V at hd = 64 */
    PF_K_ROWS = 32, /* K rows prefetched ahead of the scores tile */
    PF_V_BYTES = 256 * 1024, /* V prefetched into L2 during the K pass (at most half a Zen 3 L2) */
    MAX_HEADS = 32, /* heads per chunk (1 / sum kept on the stack) */
    MAX_RUN = 32    /* tokens per chunk */
};

/* {sum(a), sum(b), sum(c), sum(d)}; lane r depends only on its input. */
INLINE __m128 hsum4x8(__m256 a, __m256 b, __m256 c, __m256 d) {
    __m256 ab = _mm256_hadd_ps(a, b);
    __m256 cd = _mm256_hadd_ps(c, d);
    __m256 s = _mm256_hadd_ps(ab, cd);
    return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

INLINE float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

INLINE float fma1(float a, float b, float c) {
    return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}

/* Cache elements of type T (qw_kv_type, a constant in every caller): rows
 * are addressed as bytes; ld8 / ld1 give floats, the 16-bit types
 * converted exactly (F16C's vcvtph2ps; bf16 is a 16-bit shift), so every
 * type runs the float32 kernel's operations. */
INLINE __m256 ld8(const char *row, int64_t i, const int T) {
    if (T == QW_KV_F32) return _mm256_loadu_ps((const float *)row + i);
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)((const uint16_t *)(const void *)row + i));
    if (T == QW_KV_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

INLINE float ld1(const char *row, int64_t i, const int T) {
    if (T == QW_KV_F32) return ((const float *)(const void *)row)[i];
    uint16_t h = ((const uint16_t *)(const void *)row)[i];
    return T == QW_KV_F16 ? qw_f16_to_f32(h) : qw_bf16_to_f32(h);
}

/* Scores of one head for rows r0..r0+nr-1 (nr <= 8; k[r] points at row
 * r0 + min(r, nr-1)): s[r] = (q . k[r]) * scale. The 8 rows each take one
 * accumulator, the K loads fold into the FMAs and q is loaded once per 8
 * columns; two hsum4x8 give the 8 sums. */
INLINE void score_rows8(float *s, int64_t nr, const char *const k[8], const float *q, int64_t hd, float scale,
                        const int T) {
    __m256 acc[8];
    UNROLL for (int r = 0; r < 8; r++) acc[r] = _mm256_setzero_ps();
    int64_t i = 0;
    _Pragma("GCC unroll 2") for (; i + 8 <= hd; i += 8) {
        __m256 qv = _mm256_loadu_ps(q + i);
        UNROLL for (int r = 0; r < 8; r++) acc[r] = _mm256_fmadd_ps(ld8(k[r], i, T), qv, acc[r]);
    }
    __m128 lo = hsum4x8(acc[0], acc[1], acc[2], acc[3]), hi = hsum4x8(acc[4], acc[5], acc[6], acc[7]);
    __m128 sc = _mm_set1_ps(scale);
    if (i == hd && nr == 8) { /* no column tail: the same bits as the loop below */
        _mm_storeu_ps(s, _mm_mul_ps(lo, sc));
        _mm_storeu_ps(s + 4, _mm_mul_ps(hi, sc));
        return;
    }
    float o[8];
    _mm_storeu_ps(o, lo);
    _mm_storeu_ps(o + 4, hi);
    for (int64_t r = 0; r < nr; r++) {
        float a = o[r];
        for (int64_t j = i; j < hd; j++) a = fma1(ld1(k[r], j, T), q[j], a);
        s[r] = a * scale;
    }
}

/* Running sums out[h0][d0 .. d0 + 8 DV) += sum_{p in [p0, p1)} S[h0][p] V[p][...]
 * (first block: start from zero). One head, up to 64 dims: DV accumulators,
 * the V loads folded into the FMAs, one broadcast per position. vr[p - p0]
 * points at row p's column d0 (the block's rows are looked up once for
 * every token and head, and the DV loads take constant offsets). */
INLINE void v_tile(float *out, const float *S, int64_t n, const char *const *vr, int64_t hd, int64_t p0,
                   int64_t p1, int64_t d0, int64_t h0, const int DV, int first, const int T) {
    __m256 acc[8];
    float *o = out + h0 * hd + d0;
    const float *w = S + h0 * n;
    const int64_t c0 = d0 * (T == QW_KV_F32 ? 4 : 2);
    UNROLL for (int j = 0; j < DV; j++) acc[j] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(o + 8 * j);
    int64_t p = p0;
    for (; p + 2 <= p1; p += 2) { /* two positions per trip; each element's FMAs stay in p order */
        const char *v = vr[p - p0] + c0, *v1 = vr[p + 1 - p0] + c0;
        __m256 wa = _mm256_broadcast_ss(w + p), wb = _mm256_broadcast_ss(w + p + 1);
        UNROLL for (int j = 0; j < DV; j++) acc[j] = _mm256_fmadd_ps(wa, ld8(v, 8 * j, T), acc[j]);
        UNROLL for (int j = 0; j < DV; j++) acc[j] = _mm256_fmadd_ps(wb, ld8(v1, 8 * j, T), acc[j]);
    }
    if (p < p1) {
        const char *v = vr[p - p0] + c0;
        __m256 wa = _mm256_broadcast_ss(w + p);
        UNROLL for (int j = 0; j < DV; j++) acc[j] = _mm256_fmadd_ps(wa, ld8(v, 8 * j, T), acc[j]);
    }
    UNROLL for (int j = 0; j < DV; j++) _mm256_storeu_ps(o + 8 * j, acc[j]);
}

INLINE void v_tile_any(float *out, const float *S, int64_t n, const char *const *vr, int64_t hd, int64_t p0,
                       int64_t p1, int64_t d0, int64_t h0, int DV, int first, const int T) {
#define VT(dv) v_tile(out, S, n, vr, hd, p0, p1, d0, h0, dv, first, T)
    switch (DV) {
    case 8: VT(8); break;
    case 4: VT(4); break;
    case 2: VT(2); break;
    default: VT(1); break;
    }
#undef VT
}

/* nt <= MAX_RUN tokens, nq <= MAX_HEADS heads: token j attends rows
 * 0 .. n + j - 1. Each K tile and V block is read once for every token and
 * head of the run; each (token, head) gets exactly the operations of a
 * one-token call. */
INLINE void attn_chunk(float *out, const float *q, int64_t ldq, int64_t nt, int64_t nq, int64_t hd,
                       const qw_kv_rows *kv, int64_t n, float scale, float *S, const int T) {
    const int64_t es = T == QW_KV_F32 ? 4 : 2; /* bytes per element */
    const int64_t nmax = n + nt - 1;          /* rows of the last token */
    /* 1. scores, 8 rows at a time for every token and head (the rows stay
     * in L1); meanwhile the first PF_V_BYTES of V are prefetched into L2 */
    int64_t vpf = PF_V_BYTES / (kv->ld * es);
    if (vpf > nmax) vpf = nmax;
    for (int64_t p = 0; p < nmax; p += 8) {
        /* the tile's rows, the last one repeated past the run's end; a
         * token with fewer rows stores only its own lanes, and lane r
         * depends on row r alone */
        int64_t ntile = nmax - p < 8 ? nmax - p : 8;
        const char *k[8];
        for (int r = 0; r < 8; r++) k[r] = qw_kv_row_bytes(kv, kv->k_off, p + (r < ntile ? r : ntile - 1), T);
        int64_t j0 = p < n ? 0 : p - n + 1; /* first token with a row in the tile */
        for (int64_t j = j0; j < nt; j++) {
            int64_t nj = n + j, nr = nj - p < 8 ? nj - p : 8;
            float *Sj = qw_attn_run_scores(S, nq, n, j);
            for (int64_t h = 0; h < nq; h++) {
                /* prefetches spread over the first token's heads, one share per head */
                if (j == j0)
                    for (int64_t r = p + h * 8 / nq; r < p + (h + 1) * 8 / nq; r++)
                        for (int64_t b = 0; b < hd * es; b += 64) {
                            if (r + PF_K_ROWS < nmax)
                                _mm_prefetch(qw_kv_row_bytes(kv, kv->k_off, r + PF_K_ROWS, T) + b, _MM_HINT_T0);
                            if (r < vpf) _mm_prefetch(qw_kv_row_bytes(kv, kv->v_off, r, T) + b, _MM_HINT_T1);
                        }
                score_rows8(Sj + h * nj + p, nr, k, q + j * ldq + h * hd, hd, scale, T);
            }
        }
    }
    /* softmax numerators and 1 / sum */
    float inv[MAX_RUN * MAX_HEADS];
    for (int64_t j = 0; j < nt; j++)
        for (int64_t h = 0; h < nq; h++) {
            int64_t nj = n + j;
            float *s = qw_attn_run_scores(S, nq, n, j) + h * nj;
            int64_t i = 0;
            float mx = s[0];
            if (nj >= 8) {
                __m256 m = _mm256_loadu_ps(s);
                for (i = 8; i + 8 <= nj; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(s + i));
                __m128 x = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
                x = _mm_max_ps(x, _mm_movehl_ps(x, x));
                x = _mm_max_ss(x, _mm_movehdup_ps(x));
                mx = _mm_cvtss_f32(x);
            }
            for (; i < nj; i++) mx = s[i] > mx ? s[i] : mx;
            __m256 mv = _mm256_set1_ps(mx), sv = _mm256_setzero_ps();
            for (i = 0; i + 8 <= nj; i += 8) {
                __m256 e = qw_exp8_avx2(_mm256_sub_ps(_mm256_loadu_ps(s + i), mv));
                _mm256_storeu_ps(s + i, e);
                sv = _mm256_add_ps(sv, e);
            }
            float sum = hsum8(sv);
            for (; i < nj; i++) {
                s[i] = expf(s[i] - mx);
                sum += s[i];
            }
            inv[j * nq + h] = 1.0f / sum;
        }
    /* 2. weighted sum of V rows, block by block; a block stays in L1 while
     * every token and head of the run sweeps it */
    int64_t hd8 = hd - hd % 8;
    for (int64_t p0 = 0; p0 < nmax; p0 += PB) {
        int first = p0 == 0;
        int64_t j0 = p0 < n ? 0 : p0 - n + 1;
        const char *vr[PB];
        for (int64_t p = p0; p < p0 + PB && p < nmax; p++) vr[p - p0] = qw_kv_row_bytes(kv, kv->v_off, p, T);
        for (int64_t j = j0; j < nt; j++) {
            int64_t nj = n + j, p1 = p0 + PB < nj ? p0 + PB : nj;
            const float *Sj = qw_attn_run_scores(S, nq, n, j);
            float *oj = out + j * ldq;
            for (int64_t d0 = 0; d0 < hd8;) {
                int64_t left = (hd8 - d0) / 8;
                int DV = left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
                for (int64_t h = 0; h < nq; h++) v_tile_any(oj, Sj, nj, vr, hd, p0, p1, d0, h, DV, first, T);
                d0 += 8 * DV;
            }
            for (int64_t h = 0; h < nq; h++)
                for (int64_t d = hd8; d < hd; d++) {
                    float a = first ? 0.0f : oj[h * hd + d];
                    for (int64_t p = p0; p < p1; p++)
                        a = fma1(Sj[h * nj + p], ld1(vr[p - p0], d, T), a);
                    oj[h * hd + d] = a;
                }
        }
    }
    for (int64_t j = 0; j < nt; j++)
        for (int64_t h = 0; h < nq; h++) {
            float *o = out + j * ldq + h * hd, iv1 = inv[j * nq + h];
            __m256 iv = _mm256_set1_ps(iv1);
            int64_t d = 0;
            for (; d + 8 <= hd; d += 8) _mm256_storeu_ps(o + d, _mm256_mul_ps(_mm256_loadu_ps(o + d), iv));
            for (; d < hd; d++) o[d] *= iv1;
        }
}

/* Runs of at most MAX_RUN tokens, chunks of at most MAX_HEADS heads; each
 * chunk's scores from the start of S (it fits: kernels.h's bound covers
 * every sub-run and head chunk). */
INLINE void attn_any(float *out, const float *q, int64_t ldq, int64_t nt, int64_t nq, int64_t hd,
                     const qw_kv_rows *kv, int64_t n, float scale, float *S, const int T) {
    for (int64_t j = 0; j < nt; j += MAX_RUN) {
        int64_t mt = nt - j < MAX_RUN ? nt - j : MAX_RUN;
        for (int64_t h = 0; h < nq; h += MAX_HEADS) {
            int64_t m = nq - h < MAX_HEADS ? nq - h : MAX_HEADS;
            attn_chunk(out + j * ldq + h * hd, q + j * ldq + h * hd, ldq, mt, m, hd, kv, n + j, scale, S, T);
        }
    }
}

static void attn_avx2(float *out, const float *q, int64_t ldq, int64_t nt, int64_t nq, int64_t hd,
                      const qw_kv_rows *kv, int64_t n, float scale, float *S) {
    attn_any(out, q, ldq, nt, nq, hd, kv, n, scale, S, QW_KV_F32);
}

static void attn_f16_avx2(float *out, const float *q, int64_t ldq, int64_t nt, int64_t nq, int64_t hd,
                          const qw_kv_rows *kv, int64_t n, float scale, float *S) {
    attn_any(out, q, ldq, nt, nq, hd, kv, n, scale, S, QW_KV_F16);
}

static void attn_bf16_avx2(float *out, const float *q, int64_t ldq, int64_t nt, int64_t nq, int64_t hd,
                           const qw_kv_rows *kv, int64_t n, float scale, float *S) {
    attn_any(out, q, ldq, nt, nq, hd, kv, n, scale, S, QW_KV_BF16);
}

/* vcvtps2ph rounds to nearest even, as the reference's qw_f32_to_f16. */
static void store_f16_avx2(uint16_t *y, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) y[i] = qw_f32_to_f16(x[i]);
}

const qw_kernels kernels_attn_avx2 = {
    .attn = attn_avx2,
    .attn16 = {[QW_KV_F16] = attn_f16_avx2, [QW_KV_BF16] = attn_bf16_avx2},
    .kv_store16 = {[QW_KV_F16] = store_f16_avx2},
};

#endif
