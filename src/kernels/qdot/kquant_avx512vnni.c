/* kquant_avx512vnni.c - the integer path's K-quant kernels (matmul_q
 * of Q4_K, Q5_K, Q6_K with QA8 activations, kernels.h) with AVX512-VNNI's
 * vpdpbusd (unsigned weight quants x signed activation quants, 4 products
 * per int32), on 256-bit registers (AVX512VL): Zen 4 splits 512-bit
 * operations in two, and a sub-block is 32 bytes. Installed into the avx512
 * table only where cpu.c saw the AVX512-VNNI bit. The float steps are
 * kquant_ref.c's; shared unpacking, horizontal sums and tiling in
 * kquant_x86.h. Q4_K / Q5_K: the plain dots, then the reference's
 * dsc * dot and -dmn * ds (the QA8 row's d * s) in float. Q6_K:
 * unsigned q (0..63); each sub-block's vpdpbusd starts from -32 * qx
 * (summed 4 at a time, once per token and super-block), so it gives the
 * sums of (q - 32) * qx that the packs in scaled_sums need.
 * Prefill (n > TILE_TOKENS) takes its own transposed path (below).
 */
#include "kernels/kernels_impl.h"

#if defined(__x86_64__)
#include "kernels/qdot/kquant_x86.h"

/* 32 unsigned x 32 signed bytes -> 8 int32 sums of 4 products, added to acc */
INLINE __m256i dot4(__m256i acc, __m256i w, const int8_t *x) {
    return _mm256_dpbusd_epi32(acc, w, _mm256_loadu_si256((const __m256i *)x));
}

INLINE __m256 step_q45(__m256 acc, const row_q45 *r, const tok_q45 *x) {
    __m256i p[8];
    UNROLL for (int j = 0; j < 8; j++) p[j] = dot4(_mm256_setzero_si256(), r->w[j], x->q + 32 * j);
    /* fmaf(dx, dsc * dot, acc), then fmaf(-dmn, ds, acc) (fnmadd: -(a b) + c, one rounding) */
    acc = _mm256_fmadd_ps(x->dx, _mm256_mul_ps(r->dsc, _mm256_cvtepi32_ps(plain_sums(p))), acc);
    return _mm256_fnmadd_ps(r->dmn, x->ds, acc);
}

typedef struct {
    tok_q45 x;
    __m256i off[8]; /* -32 * qx, summed 4 at a time: the start of each sub-block's vpdpbusd */
} tok_q6;

INLINE void prep_tok_q6(tok_q6 *t, const uint8_t *row, int64_t k, int64_t B) {
    prep_tok_q45(&t->x, row, k, B);
    const __m256i k32 = _mm256_set1_epi8(32);
    UNROLL for (int j = 0; j < 8; j++)
        t->off[j] = _mm256_sub_epi32(_mm256_setzero_si256(), dot4(_mm256_setzero_si256(), k32, t->x.q + 32 * j));
}

/* vpdpbusd from -32 * qx: the sums of (q - 32) * qx at no extra cost. */
INLINE __m256 step_q6(__m256 acc, const row_q6 *r, const tok_q6 *t) {
    __m256i p[8];
    UNROLL for (int j = 0; j < 8; j++) p[j] = dot4(t->off[j], r->w[j], t->x.q + 32 * j);
    const __m256i isum = scaled_sums(p, r->sa, r->sb);
    return _mm256_fmadd_ps(_mm256_mul_ps(r->d, t->x.dx), _mm256_cvtepi32_ps(isum), acc);
}

#include "kernels/qdot/kquant_x86_tiles.h"

static void matmul_q_q4_k_tiles(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                              int64_t k, int64_t o0, int64_t o1) {
    kq_matmul_tiles(QW_Q4_K, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}
static void matmul_q_q5_k_tiles(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                              int64_t k, int64_t o0, int64_t o1) {
    kq_matmul_tiles(QW_Q5_K, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}
static void matmul_q_q6_k_tiles(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                              int64_t k, int64_t o0, int64_t o1) {
    kq_matmul_tiles(QW_Q6_K, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}

/* ---- prefill (n > TILE_TOKENS): super-blocks transposed ----
 * A super-block's 256 quants are 16 groups of 16 (group i: sub-block i % 8,
 * its first half for i < 8, its second for i >= 8). transpose_sb puts
 * them into 4 zmm whose int32 lane i holds 4 bytes of group i, so 4
 * vpdpbusd leave each group's exact sum in its own lane: no horizontal
 * reduction (the tiles' scaled_sums) per row and token. Weight rows are
 * transposed once per block of tokens, each token once per call, with its
 * Q6_K offsets (-32 times each group's activation sum; the tiles redo them
 * for every 4-row tile). The integer sums are exact in any order and the
 * float steps are the tiles' (the reference's), so the result is bitwise
 * theirs. One thread, n = 512, 1536 x 1536, CPU time (bench_qdot_kquant,
 * busy machine): Q4_K 127 -> 173 GOP/s, Q5_K 120 -> 164-171, Q6_K 105 ->
 * 194-209. The buffers (about 194 KiB) live in the thread's scratch
 * (kernels_scratch), not on the stack. */
#define KP_ROWS 4                 /* rows per pass over a token */
#define KP_WT_CAP (64 * 1024)     /* bytes of transposed weights */
#define KP_XT_CAP (128 * 1024)    /* bytes of transposed activations */
#define KP_TOKENS 32              /* tokens per block at most */

/* One transposed super-block of a weight row: quants and sc: Q6_K: the
 * int32 scale of each lane (per 16-weight group); Q4_K / Q5_K: the float
 * bits of the reference's dsc (lanes 0-7) and dmn (8-15) of sub-block
 * i % 8. */
typedef struct {
    __m512i q[4];
    __m512i sc;
} kp_wsb;

/* One transposed super-block of a token: quants and the Q6_K offsets. */
typedef struct {
    __m512i q[4];
    __m512i off;
} kp_xsb;

/* A block of transposed rows (with Q6_K's d) and of tokens, in the
 * thread's scratch. */
typedef struct {
    kp_wsb wt[KP_WT_CAP / sizeof(kp_wsb)];
    kp_xsb xt[KP_XT_CAP / sizeof(kp_xsb)];
    float wd[KP_WT_CAP / sizeof(kp_wsb)]; /* Q6_K's d */
} kp_scratch;
_Static_assert(sizeof(kp_scratch) <= QW_SCRATCH_BYTES, "kquant_avx512vnni prefill scratch");

/* z[m] = sub-blocks 2m and 2m + 1 (32 bytes each) -> t[c], lane i = dword
 * c of group i. */
INLINE void transpose_sb(__m512i t[4], const __m512i z[4]) {
    UNROLL for (int c = 0; c < 4; c++) {
        /* lane i: sub-block j = i % 8 (j % 4 picks the pair and the half of it), half i / 8 */
        const __m512i idx = _mm512_setr_epi32(0 + c, 8 + c, 16 + c, 24 + c, 0 + c, 8 + c, 16 + c, 24 + c, 4 + c,
                                              12 + c, 20 + c, 28 + c, 4 + c, 12 + c, 20 + c, 28 + c);
        __m512i lo = _mm512_permutex2var_epi32(z[0], idx, z[1]), hi = _mm512_permutex2var_epi32(z[2], idx, z[3]);
        t[c] = _mm512_mask_blend_epi32((__mmask16)0xf0f0, lo, hi);
    }
}

INLINE __m512i pair512(__m256i a, __m256i b) { return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1); }

/* Weight super-block at b (Q4_K, Q5_K with five set, or Q6_K with Q6 set). */
INLINE void kp_prep_w(int Q6, kp_wsb *o, float *d, const uint8_t *b, int five) {
    __m256i w[8];
    if (Q6) {
        row_q6 r;
        prep_row_q6(&r, b);
        UNROLL for (int j = 0; j < 8; j++) w[j] = r.w[j];
        /* lane i: sc[2 (i % 8) + i / 8] */
        const __m128i s = _mm_loadu_si128((const __m128i *)(b + 192));
        o->sc = _mm512_cvtepi8_epi32(
            _mm_shuffle_epi8(s, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15)));
        *d = qw_f16_at_f16c(b + 208);
    } else {
        row_q45 r;
        prep_row_q45(&r, b, five);
        UNROLL for (int j = 0; j < 8; j++) w[j] = r.w[j];
        o->sc = pair512(_mm256_castps_si256(r.dsc), _mm256_castps_si256(r.dmn));
        *d = 0.0f; /* folded into dsc, dmn */
    }
    __m512i z[4];
    UNROLL for (int m = 0; m < 4; m++) z[m] = pair512(w[2 * m], w[2 * m + 1]);
    transpose_sb(o->q, z);
}

INLINE void kp_prep_x(int Q6, kp_xsb *o, const uint8_t *xr, int64_t B) {
    __m512i z[4];
    UNROLL for (int m = 0; m < 4; m++) z[m] = _mm512_loadu_si512((const void *)(xr + 256 * B + 64 * m));
    transpose_sb(o->q, z);
    o->off = _mm512_setzero_si512();
    if (Q6) {
        const __m512i k32 = _mm512_set1_epi8(32);
        __m512i a = _mm512_setzero_si512();
        UNROLL for (int c = 0; c < 4; c++) a = _mm512_dpbusd_epi32(a, k32, o->q[c]);
        o->off = _mm512_sub_epi32(_mm512_setzero_si512(), a);
    }
}

/* One token against R transposed rows: Y[r] for r < R. */
INLINE void kp_token_rows(int Q6, int R, float *Y, const kp_xsb *xt, const uint8_t *xr, int64_t k, const kp_wsb *wt,
                          const float *wd, int64_t nsb) {
    __m256 acc[KP_ROWS];
    UNROLL for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    const float *dxp = (const float *)(xr + k);
    const float *dsp = (const float *)(xr + k + 8 * (k / 32));
    for (int64_t B = 0; B < nsb; B++) {
        const kp_xsb *x = xt + B;
        const __m256 dx = _mm256_loadu_ps(dxp + 8 * B);
        const __m256 ds = Q6 ? _mm256_setzero_ps() : _mm256_loadu_ps(dsp + 8 * B);
        __m512i p[KP_ROWS];
        UNROLL for (int r = 0; r < R; r++) p[r] = x->off;
        UNROLL for (int c = 0; c < 4; c++)
            UNROLL for (int r = 0; r < R; r++) p[r] = _mm512_dpbusd_epi32(p[r], wt[r * nsb + B].q[c], x->q[c]);
        UNROLL for (int r = 0; r < R; r++) {
            const kp_wsb *w = &wt[r * nsb + B];
            if (Q6) {
                __m512i ps = _mm512_mullo_epi32(p[r], w->sc);
                __m256i isum = _mm256_add_epi32(_mm512_castsi512_si256(ps), _mm512_extracti64x4_epi64(ps, 1));
                acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(wd[r * nsb + B]), dx),
                                         _mm256_cvtepi32_ps(isum), acc[r]);
            } else { /* the tiles' step_q45 */
                __m256i dot = _mm256_add_epi32(_mm512_castsi512_si256(p[r]), _mm512_extracti64x4_epi64(p[r], 1));
                __m256 dsc = _mm256_castsi256_ps(_mm512_castsi512_si256(w->sc)),
                       dmn = _mm256_castsi256_ps(_mm512_extracti64x4_epi64(w->sc, 1));
                acc[r] = _mm256_fmadd_ps(dx, _mm256_mul_ps(dsc, _mm256_cvtepi32_ps(dot)), acc[r]);
                acc[r] = _mm256_fnmadd_ps(dmn, ds, acc[r]);
            }
        }
    }
    UNROLL for (int r = 0; r < R; r++) Y[r] = lanes_sum(acc[r]);
}

/* 0 when a row or a token does not fit the scratch buffers (the caller then
 * uses the tiles). */
INLINE int kp_matmul(int Q6, int five, int bytes, float *Y, int64_t ldy, const uint8_t *X, int64_t ldxq, int64_t n,
                     const uint8_t *W, int64_t k, int64_t o0, int64_t o1) {
    const int64_t nsb = k / qw_type(QW_Q4_K)->block, rb = nsb * bytes; /* K-quants: 256 per super-block */
    const int64_t row_t = nsb * (int64_t)sizeof(kp_wsb), tok_t = nsb * (int64_t)sizeof(kp_xsb);
    if (row_t * KP_ROWS > KP_WT_CAP || tok_t > KP_XT_CAP) return 0;
    int64_t tb = KP_XT_CAP / tok_t < KP_TOKENS ? KP_XT_CAP / tok_t : KP_TOKENS;
    kp_scratch *sc = kernels_scratch();
    kp_wsb *wt = sc->wt;
    kp_xsb *xt = sc->xt;
    float *wd = sc->wd;
    for (int64_t t0 = 0; t0 < n; t0 += tb) {
        const int64_t t1 = t0 + tb < n ? t0 + tb : n;
        for (int64_t t = t0; t < t1; t++)
            for (int64_t B = 0; B < nsb; B++) kp_prep_x(Q6, &xt[(t - t0) * nsb + B], X + t * ldxq, B);
        for (int64_t r0 = o0; r0 < o1; r0 += KP_ROWS) {
            const int64_t nr = o1 - r0 < KP_ROWS ? o1 - r0 : KP_ROWS;
            for (int64_t r = 0; r < nr; r++)
                for (int64_t B = 0; B < nsb; B++)
                    kp_prep_w(Q6, &wt[r * nsb + B], &wd[r * nsb + B],
                              W + (r0 + r) * rb + B * bytes, five);
            for (int64_t t = t0; t < t1; t++) {
                float *y = Y + t * ldy + r0;
                const kp_xsb *x = &xt[(t - t0) * nsb];
                const uint8_t *xr = X + t * ldxq;
                switch (nr) {
                case 4: kp_token_rows(Q6, 4, y, x, xr, k, wt, wd, nsb); break;
                case 3: kp_token_rows(Q6, 3, y, x, xr, k, wt, wd, nsb); break;
                case 2: kp_token_rows(Q6, 2, y, x, xr, k, wt, wd, nsb); break;
                default: kp_token_rows(Q6, 1, y, x, xr, k, wt, wd, nsb); break;
                }
            }
        }
    }
    return 1;
}

/* The table's entries: prefill (n > TILE_TOKENS) on transposed super-blocks
 * where a row and a token fit the scratch, else the tiles. */
static void matmul_q_q4_k_avx512vnni(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                                     int64_t k, int64_t o0, int64_t o1) {
    if (n > TILE_TOKENS && o1 > o0 && kp_matmul(0, 0, qw_type(QW_Q4_K)->bytes, Y, ldy, XQ, ldxq, n, W, k, o0, o1)) return;
    matmul_q_q4_k_tiles(Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}
static void matmul_q_q5_k_avx512vnni(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                                     int64_t k, int64_t o0, int64_t o1) {
    if (n > TILE_TOKENS && o1 > o0 && kp_matmul(0, 1, qw_type(QW_Q5_K)->bytes, Y, ldy, XQ, ldxq, n, W, k, o0, o1)) return;
    matmul_q_q5_k_tiles(Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}
static void matmul_q_q6_k_avx512vnni(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                                     int64_t k, int64_t o0, int64_t o1) {
    if (n > TILE_TOKENS && o1 > o0 && kp_matmul(1, 0, qw_type(QW_Q6_K)->bytes, Y, ldy, XQ, ldxq, n, W, k, o0, o1)) return;
    matmul_q_q6_k_tiles(Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}

const qw_kernels kernels_kquant_avx512vnni = {
    .matmul_q =
        {
            [QW_Q4_K] = matmul_q_q4_k_avx512vnni,
            [QW_Q5_K] = matmul_q_q5_k_avx512vnni,
            [QW_Q6_K] = matmul_q_q6_k_avx512vnni,
        },
};

#endif
