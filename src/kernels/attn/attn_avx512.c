/* attn_avx512.c - the attention kernel (kernels.h: attn, attn16) with
 * AVX-512 F/BW/VL: attn_avx2.c's results bit for bit, faster where a call
 * has many (token, head) pairs (a prompt's runs).
 *
 * The same run structure as attn_avx2.c (one call: the nq query heads of
 * one kv head for a run of nt tokens; chunks of MAX_RUN tokens and
 * MAX_HEADS heads; scores, softmax, weighted V), with the 16 lanes laid
 * the other way round:
 *  1. scores: lane r is K row p + r. A tile of 16 rows is converted and
 *     transposed once into kt (kt[d]: the 16 rows' element d), then every
 *     token and head of the run takes it, 8 (token, head) pairs at a time:
 *     one kt load for 8 fmas (q[d] broadcast from memory), 8 chains in
 *     flight, no horizontal sums, the 16 scores one store. Each score gets
 *     the avx2 kernel's operations: its 8 column chains, hsum4x8's tree,
 *     the fma tail, the scale (score_pairs). The avx2 kernel converts each
 *     K element once per token and head, and its 8 ymm accumulators are
 *     just the chains two FMA pipes of latency 4 need.
 *  2. softmax: the avx2 kernel's steps (softmax_row), 16 scores a step.
 *  3. weighted V: lane i is dim d0 + i; per position, up to 4 vectors of
 *     the V row are loaded (and converted) once for up to 4 heads; each
 *     output element is one fma chain over p in order, as in the avx2
 *     kernel.
 * A call of fewer than ZMM_PAIRS pairs (decode: each transposed tile would
 * serve only nq pairs) goes to the avx2 kernel itself: the bits do not
 * depend on which of the two ran, so the invariances of kernels.h (nt, nq,
 * a pair's place, the page size) hold across the switch, and
 * tests/kernels/test_kernels.c checks the two levels give the same bits.
 * Measured on Zen 4 (tools/bench_attn.sh, one thread, f16 cache, runs as
 * long as the context): 1.2x the avx2 kernel at 512 rows, 1.3x at 2048;
 * real 0.5B 2048-token prefill +7-9% (docs/PERFORMANCE.md, session 22).
 * 16-bit caches: every element converted exactly as it is loaded, so the
 * result is the float32 kernel's on the same values.
 */
#include "kernels/kernels_impl.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>

#include "kernels/simd_exp.h"

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16")

enum {
    PB = 64,        /* positions per V block (their rows stay in L1 for the run) */
    PF_K_ROWS = 32, /* K rows prefetched ahead of the score tile */
    PF_V_BYTES = 256 * 1024, /* V prefetched into L2 during the K pass */
    MAX_HEADS = 32, /* heads per chunk (1 / sum kept on the stack) */
    MAX_RUN = 32,   /* tokens per chunk */
    HD_MAX = 256,   /* widest head kt holds; wider ones go to the avx2 kernel */
    PAIRS = 8,      /* (token, head) pairs per score step: 8 chains in flight */
    ZMM_PAIRS = 32, /* fewer (token, head) pairs in a call: the avx2 kernel (the same bits) */
    VH = 4          /* heads per V step */
};

/* Mask of the first m (0..16) lanes. */
INLINE __mmask16 lanes(int64_t m) { return m >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << m) - 1u); }

/* Elements i.. of a cache row (lanes m), as floats; zeros outside m. */
INLINE __m512 ld16(const char *row, int64_t i, __mmask16 m, const int T) {
    if (T == QW_KV_F32) return _mm512_maskz_loadu_ps(m, (const float *)(const void *)row + i);
    __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)(const void *)row + i);
    if (T == QW_KV_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* r[0..15] (row i, 16 elements) -> kt[k] (element k of the 16 rows). */
INLINE void transpose16(const __m512 r[16], float *kt) {
    __m512 t[16], u[16], v[16];
    UNROLL for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    UNROLL for (int i = 0; i < 4; i++) { /* u[4i + k], 128-bit lane L: rows 4i..4i+3, element 4L + k */
        u[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    UNROLL for (int k = 0; k < 4; k++) { /* v[k]: rows 0-3 el k, 0-3 el 8+k, 4-7 el k, 4-7 el 8+k */
        v[k] = _mm512_shuffle_f32x4(u[k], u[4 + k], 0x88);
        v[4 + k] = _mm512_shuffle_f32x4(u[k], u[4 + k], 0xDD);
        v[8 + k] = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0x88);
        v[12 + k] = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0xDD);
    }
    UNROLL for (int k = 0; k < 4; k++) {
        _mm512_store_ps(kt + 16 * k, _mm512_shuffle_f32x4(v[k], v[8 + k], 0x88));
        _mm512_store_ps(kt + 16 * (8 + k), _mm512_shuffle_f32x4(v[k], v[8 + k], 0xDD));
        _mm512_store_ps(kt + 16 * (4 + k), _mm512_shuffle_f32x4(v[4 + k], v[12 + k], 0x88));
        _mm512_store_ps(kt + 16 * (12 + k), _mm512_shuffle_f32x4(v[4 + k], v[12 + k], 0xDD));
    }
}

/* kt (16 * round_up(hd, 16) floats): the 16 rows k[r], transposed. */
INLINE void k_tile(float *kt, const char *const k[16], int64_t hd, const int T) {
    for (int64_t d0 = 0; d0 < hd; d0 += 16) {
        const __mmask16 m = lanes(hd - d0);
        __m512 r[16];
        UNROLL for (int i = 0; i < 16; i++) r[i] = ld16(k[i], d0, m, T);
        transpose16(r, kt + 16 * d0);
    }
}

/* One (token, head) pair of a score step: its q row and where its 16
 * scores go (lanes keep: the rows it has). */
typedef struct {
    const float *q;
    float *s;
    __mmask16 keep;
} pair;

/* Scores of G pairs against the tile, attn_avx2.c's score_rows8 bit for
 * bit with lane r for its row r: chain c (0..7) runs over the columns c, c
 * + 8, ... of the whole 8-column chunks, the chains are added in
 * hsum4x8's tree ((c0 + c1) + (c2 + c3)) + ((c4 + c5) + (c6 + c7)), then
 * one fma per column past the last chunk, then the scale. The G pairs run
 * one chain at a time, side by side: each kt load serves G fmas (q[d]
 * broadcast from memory) and G chains are in flight; the finished chains
 * wait in part (L1). */
INLINE void score_pairs(const pair *pr, const float *kt, int64_t hd, float scale, const int G) {
    __m512 part[8][PAIRS];
    const int64_t hd8 = hd - hd % 8;
    for (int c = 0; c < 8; c++) {
        __m512 acc[PAIRS];
        UNROLL for (int g = 0; g < G; g++) acc[g] = _mm512_setzero_ps();
        for (int64_t d = c; d < hd8; d += 8) {
            const __m512 kv = _mm512_load_ps(kt + 16 * d);
            UNROLL for (int g = 0; g < G; g++) acc[g] = _mm512_fmadd_ps(_mm512_set1_ps(pr[g].q[d]), kv, acc[g]);
        }
        UNROLL for (int g = 0; g < G; g++) part[c][g] = acc[g];
    }
    const __m512 sc = _mm512_set1_ps(scale);
    UNROLL for (int g = 0; g < G; g++) {
        __m512 t = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(part[0][g], part[1][g]), _mm512_add_ps(part[2][g], part[3][g])),
                                 _mm512_add_ps(_mm512_add_ps(part[4][g], part[5][g]), _mm512_add_ps(part[6][g], part[7][g])));
        for (int64_t d = hd8; d < hd; d++) t = _mm512_fmadd_ps(_mm512_set1_ps(pr[g].q[d]), _mm512_load_ps(kt + 16 * d), t);
        _mm512_mask_storeu_ps(pr[g].s, pr[g].keep, _mm512_mul_ps(t, sc));
    }
}

INLINE void score_any(const pair *pr, const float *kt, int64_t hd, float scale, int G) {
    switch (G) {
    case 8: score_pairs(pr, kt, hd, scale, 8); break;
    case 7: score_pairs(pr, kt, hd, scale, 7); break;
    case 6: score_pairs(pr, kt, hd, scale, 6); break;
    case 5: score_pairs(pr, kt, hd, scale, 5); break;
    case 4: score_pairs(pr, kt, hd, scale, 4); break;
    case 3: score_pairs(pr, kt, hd, scale, 3); break;
    case 2: score_pairs(pr, kt, hd, scale, 2); break;
    default: score_pairs(pr, kt, hd, scale, 1); break;
    }
}

/* s[0..n) = exp(s - max s); returns 1 / sum: attn_avx2.c's steps bit for
 * bit (qw_exp16_avx512 gives qw_exp8_avx2's bits: the same polynomial,
 * and p 2^n exact either way): 8-lane partial sums over the whole 8-score
 * chunks in order, hsum8's fold, then libm's expf one by one past them. */
INLINE float softmax_row(float *s, int64_t n) {
    __m512 mv = _mm512_set1_ps(-INFINITY);
    for (int64_t i = 0; i < n; i += 16) mv = _mm512_max_ps(mv, _mm512_mask_loadu_ps(mv, lanes(n - i), s + i));
    const float mx = _mm512_reduce_max_ps(mv);
    mv = _mm512_set1_ps(mx);
    __m256 sv = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 e = qw_exp16_avx512(_mm512_sub_ps(_mm512_loadu_ps(s + i), mv));
        _mm512_storeu_ps(s + i, e);
        sv = _mm256_add_ps(_mm256_add_ps(sv, _mm512_castps512_ps256(e)), _mm512_extractf32x8_ps(e, 1));
    }
    if (i + 8 <= n) {
        const __m512 e = qw_exp16_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(0xff, s + i), mv));
        _mm256_storeu_ps(s + i, _mm512_castps512_ps256(e));
        sv = _mm256_add_ps(sv, _mm512_castps512_ps256(e));
        i += 8;
    }
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(sv), _mm256_extractf128_ps(sv, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    float sum = _mm_cvtss_f32(_mm_add_ss(x, _mm_movehdup_ps(x)));
    for (; i < n; i++) {
        s[i] = expf(s[i] - mx);
        sum += s[i];
    }
    return 1.0f / sum;
}

/* out[h][d0 .. d0 + 16 DV) of heads h0..h0+G-1 += sum_{p in [p0, p1)}
 * w[h][p] V[p][...] (first block: from zero); the last vector keeps lanes
 * mlast. vr[p - p0]: row p. */
INLINE void v_step(float *out, const float *const *w, const char *const *vr, int64_t hd, int64_t p0, int64_t p1,
                   int64_t d0, int64_t h0, __mmask16 mlast, int first, const int G, const int DV, const int T) {
    __m512 acc[VH][4];
    UNROLL for (int g = 0; g < G; g++) UNROLL for (int j = 0; j < DV; j++) {
        const __mmask16 m = j == DV - 1 ? mlast : (__mmask16)0xffff;
        acc[g][j] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m, out + (h0 + g) * hd + d0 + 16 * j);
    }
    for (int64_t p = p0; p < p1; p++) {
        __m512 v[4];
        UNROLL for (int j = 0; j < DV; j++) v[j] = ld16(vr[p - p0], d0 + 16 * j, j == DV - 1 ? mlast : 0xffff, T);
        UNROLL for (int g = 0; g < G; g++) {
            const __m512 wg = _mm512_set1_ps(w[g][p]);
            UNROLL for (int j = 0; j < DV; j++) acc[g][j] = _mm512_fmadd_ps(wg, v[j], acc[g][j]);
        }
    }
    UNROLL for (int g = 0; g < G; g++) UNROLL for (int j = 0; j < DV; j++)
        _mm512_mask_storeu_ps(out + (h0 + g) * hd + d0 + 16 * j, j == DV - 1 ? mlast : 0xffff, acc[g][j]);
}

INLINE void v_any(float *out, const float *const *w, const char *const *vr, int64_t hd, int64_t p0, int64_t p1,
                  int64_t d0, int64_t h0, __mmask16 mlast, int first, int G, int DV, const int T) {
#define VS(g, dv) v_step(out, w, vr, hd, p0, p1, d0, h0, mlast, first, g, dv, T)
#define VG(g)                    \
    switch (DV) {                \
    case 4: VS(g, 4); break;     \
    case 3: VS(g, 3); break;     \
    case 2: VS(g, 2); break;     \
    default: VS(g, 1); break;    \
    }
    switch (G) {
    case 4: VG(4); break;
    case 3: VG(3); break;
    case 2: VG(2); break;
    default: VG(1); break;
    }
#undef VG
#undef VS
}

/* nt <= MAX_RUN tokens, nq <= MAX_HEADS heads: token j attends rows
 * 0 .. n + j - 1. */
INLINE void attn_chunk(float *out, const float *q, int64_t ldq, int64_t nt, int64_t nq, int64_t hd,
                       const qw_kv_rows *kv, int64_t n, float scale, float *S, const int T) {
    const int64_t nmax = n + nt - 1;          /* rows of the last token */
    const int64_t es = T == QW_KV_F32 ? 4 : 2; /* bytes per element */
    int64_t vpf = PF_V_BYTES / (kv->ld * es);  /* V rows to prefetch during the K pass */
    if (vpf > nmax) vpf = nmax;
    float kt[16 * HD_MAX] __attribute__((aligned(64)));
    pair pr[PAIRS];
    /* 1. scores, 16 rows at a time for every token and head */
    for (int64_t p = 0; p < nmax; p += 16) {
        const int64_t ntile = nmax - p < 16 ? nmax - p : 16;
        const char *k[16];
        for (int r = 0; r < 16; r++) k[r] = qw_kv_row_bytes(kv, kv->k_off, p + (r < ntile ? r : ntile - 1), T);
        for (int64_t r = p; r < p + 16; r++)
            for (int64_t b = 0; b < hd * es; b += 64) {
                if (r + PF_K_ROWS < nmax) _mm_prefetch(qw_kv_row_bytes(kv, kv->k_off, r + PF_K_ROWS, T) + b, _MM_HINT_T0);
                if (r < vpf) _mm_prefetch(qw_kv_row_bytes(kv, kv->v_off, r, T) + b, _MM_HINT_T1);
            }
        k_tile(kt, k, hd, T);
        int G = 0;
        for (int64_t j = p < n ? 0 : p - n + 1; j < nt; j++) {
            const int64_t nj = n + j;
            float *Sj = qw_attn_run_scores(S, nq, n, j);
            for (int64_t h = 0; h < nq; h++) {
                pr[G] = (pair){q + j * ldq + h * hd, Sj + h * nj + p, lanes(nj - p)};
                if (++G == PAIRS) score_any(pr, kt, hd, scale, G), G = 0;
            }
        }
        if (G) score_any(pr, kt, hd, scale, G);
    }
    /* softmax numerators and 1 / sum */
    float inv[MAX_RUN * MAX_HEADS];
    for (int64_t j = 0; j < nt; j++)
        for (int64_t h = 0; h < nq; h++) inv[j * nq + h] = softmax_row(qw_attn_run_scores(S, nq, n, j) + h * (n + j), n + j);
    /* 2. weighted sum of V rows, block by block */
    const int64_t nv = (hd + 15) / 16;
    const __mmask16 mlast = lanes(hd - 16 * (nv - 1));
    for (int64_t p0 = 0; p0 < nmax; p0 += PB) {
        const int first = p0 == 0;
        const char *vr[PB];
        for (int64_t p = p0; p < p0 + PB && p < nmax; p++) vr[p - p0] = qw_kv_row_bytes(kv, kv->v_off, p, T);
        for (int64_t j = p0 < n ? 0 : p0 - n + 1; j < nt; j++) {
            const int64_t nj = n + j, p1 = p0 + PB < nj ? p0 + PB : nj;
            const float *Sj = qw_attn_run_scores(S, nq, n, j);
            for (int64_t v0 = 0; v0 < nv; v0 += 4) {
                const int DV = nv - v0 < 4 ? (int)(nv - v0) : 4;
                const __mmask16 ml = v0 + DV == nv ? mlast : (__mmask16)0xffff;
                for (int64_t h = 0; h < nq; h += VH) {
                    const int G = nq - h < VH ? (int)(nq - h) : VH;
                    const float *w[VH];
                    for (int g = 0; g < G; g++) w[g] = Sj + (h + g) * nj;
                    v_any(out + j * ldq, w, vr, hd, p0, p1, 16 * v0, h, ml, first, G, DV, T);
                }
            }
        }
    }
    for (int64_t j = 0; j < nt; j++)
        for (int64_t h = 0; h < nq; h++) {
            float *o = out + j * ldq + h * hd;
            const __m512 iv = _mm512_set1_ps(inv[j * nq + h]);
            for (int64_t d = 0; d < hd; d += 16) {
                const __mmask16 m = lanes(hd - d);
                _mm512_mask_storeu_ps(o + d, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, o + d), iv));
            }
        }
}

/* Runs of at most MAX_RUN tokens, chunks of at most MAX_HEADS heads; each
 * chunk's scores from the start of S (kernels.h's bound covers every
 * sub-run and head chunk). */
INLINE void runs(float *out, const float *q, int64_t ldq, int64_t nt, int64_t nq, int64_t hd, const qw_kv_rows *kv,
                 int64_t n, float scale, float *S, const int T) {
    for (int64_t j = 0; j < nt; j += MAX_RUN) {
        int64_t mt = nt - j < MAX_RUN ? nt - j : MAX_RUN;
        for (int64_t h = 0; h < nq; h += MAX_HEADS) {
            int64_t m = nq - h < MAX_HEADS ? nq - h : MAX_HEADS;
            attn_chunk(out + j * ldq + h * hd, q + j * ldq + h * hd, ldq, mt, m, hd, kv, n + j, scale, S, T);
        }
    }
}

/* The zmm path per cache type, out of line: a call handed to the avx2
 * kernel does not set up its frame (kt alone is 16 KB). */
static __attribute__((noinline)) void runs_f32(float *out, const float *q, int64_t ldq, int64_t nt, int64_t nq,
                                               int64_t hd, const qw_kv_rows *kv, int64_t n, float scale, float *S) {
    runs(out, q, ldq, nt, nq, hd, kv, n, scale, S, QW_KV_F32);
}
static __attribute__((noinline)) void runs_f16(float *out, const float *q, int64_t ldq, int64_t nt, int64_t nq,
                                               int64_t hd, const qw_kv_rows *kv, int64_t n, float scale, float *S) {
    runs(out, q, ldq, nt, nq, hd, kv, n, scale, S, QW_KV_F16);
}
static __attribute__((noinline)) void runs_bf16(float *out, const float *q, int64_t ldq, int64_t nt, int64_t nq,
                                                int64_t hd, const qw_kv_rows *kv, int64_t n, float scale, float *S) {
    runs(out, q, ldq, nt, nq, hd, kv, n, scale, S, QW_KV_BF16);
}

/* Calls of fewer than ZMM_PAIRS (token, head) pairs (decode: the transpose
 * of each K tile would be shared by few of them) and heads wider than
 * HD_MAX go to the avx2 kernel, whose bits these are. */
INLINE void attn_any(float *out, const float *q, int64_t ldq, int64_t nt, int64_t nq, int64_t hd,
                     const qw_kv_rows *kv, int64_t n, float scale, float *S, const int T) {
    const qw_attn_fn zmm = T == QW_KV_F32 ? runs_f32 : T == QW_KV_F16 ? runs_f16 : runs_bf16;
    const qw_attn_fn f = hd > HD_MAX || nt * nq < ZMM_PAIRS ? qw_attn_for(&kernels_attn_avx2, (qw_kv_type)T) : zmm;
    f(out, q, ldq, nt, nq, hd, kv, n, scale, S);
}

static void attn_avx512(float *out, const float *q, int64_t ldq, int64_t nt, int64_t nq, int64_t hd,
                        const qw_kv_rows *kv, int64_t n, float scale, float *S) {
    attn_any(out, q, ldq, nt, nq, hd, kv, n, scale, S, QW_KV_F32);
}

static void attn_f16_avx512(float *out, const float *q, int64_t ldq, int64_t nt, int64_t nq, int64_t hd,
                            const qw_kv_rows *kv, int64_t n, float scale, float *S) {
    attn_any(out, q, ldq, nt, nq, hd, kv, n, scale, S, QW_KV_F16);
}

static void attn_bf16_avx512(float *out, const float *q, int64_t ldq, int64_t nt, int64_t nq, int64_t hd,
                             const qw_kv_rows *kv, int64_t n, float scale, float *S) {
    attn_any(out, q, ldq, nt, nq, hd, kv, n, scale, S, QW_KV_BF16);
}

const qw_kernels kernels_attn_avx512 = {
    .attn = attn_avx512,
    .attn16 = {[QW_KV_F16] = attn_f16_avx512, [QW_KV_BF16] = attn_bf16_avx512},
};

#endif
