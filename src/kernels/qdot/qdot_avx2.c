/* qdot_avx2.c - the integer path of the block-32 types with AVX2
 * (vpmaddubsw + vpmaddwd); bit for bit qdot_ref.c (see its header for the
 * float steps). Also the avx512 level's entries where the CPU lacks
 * AVX512-VNNI.
 *
 * A group is 8 blocks (256 weights) of one row, one ymm of 32 unsigned
 * weight bytes per block (Q8_0 keeps its signed bytes and multiplies |w| by
 * sign(x, w), so vpmaddubsw's int16 pairs cannot saturate: 2 * 128 * 127 <
 * 32768). vpmaddubsw then vpmaddwd with ones give 8 partial int32 sums per
 * block; a horizontal-add tree turns the 8 blocks' vectors into one vector
 * of exact sums, lane j = block 8g + j = lane b % 8 of the reference, and
 * one fmadd per group applies the scales.
 *
 * Loop order as in qdot_avx512vnni.c: decode one row at a time against
 * chunks of up to 4 tokens; prefill on transposed
 * blocks (below, in the per-thread scratch). Every path gives the same bits.
 */
#include "kernels/kernels_impl.h"

#if defined(__x86_64__)
#include "kernels/qdot/qdot_x86.h"

/* log2 of what sum(w * qx) exceeds isum by, in units of s (-1: nothing; Q8_0 is signed). */
INLINE int blk_off_log2(int T) {
    const int zero = qw_type((qw_dtype)T)->zero;
    return zero == 16 ? 4 : zero == 8 ? 3 : -1;
}

/* 32 nibbles of 16 bytes: weight j < 16 the low nibble of q[j], else the
 * high nibble of q[j - 16]. */
INLINE __m256i nibbles(const uint8_t *q) {
    __m128i v = _mm_loadu_si128((const __m128i *)q);
    __m256i w = _mm256_inserti128_si256(_mm256_castsi128_si256(v), _mm_srli_epi16(v, 4), 1);
    return _mm256_and_si256(w, _mm256_set1_epi8(15));
}

/* One block's 32 weights (Q8_0: signed; others unsigned), reading only the block. */
INLINE __m256i unpack(int T, const uint8_t *w) {
    switch (T) {
    case QW_Q8_0: return _mm256_loadu_si256((const __m256i *)(w + 2));
    case QW_Q4_0:
    case QW_Q4_1: return nibbles(w + qw_type((qw_dtype)T)->qs_off);
    default: /* Q5_0, Q5_1 */
        return _mm256_or_si256(nibbles(w + qw_type((qw_dtype)T)->qs_off), high_bits(ld_u32(w + qw_type((qw_dtype)T)->qh_off)));
    }
}

/* A row's group of nbl (1..8) blocks at w: 8 ymm of weights (absent blocks
 * zero), the blocks' d (and m) as 8 floats (absent: 0). */
typedef struct {
    __m256i q[8];
    __m256 d, m;
} wgroup;

INLINE void load_group(int T, wgroup *g, const uint8_t *w, int nbl) {
    const int B = blk_bytes(T);
    if (nbl == 8) {
        UNROLL
        for (int j = 0; j < 8; j++) g->q[j] = unpack(T, w + j * B);
        g->d = _mm256_cvtph_ps(f16x8(w, B, 0));
        g->m = has_min(T) ? _mm256_cvtph_ps(f16x8(w, B, 2)) : _mm256_setzero_ps();
        return;
    }
    UNROLL
    for (int j = 0; j < 8; j++) g->q[j] = j < nbl ? unpack(T, w + j * B) : _mm256_setzero_si256();
    tail_scales(T, &g->d, &g->m, w, B, nbl);
}

/* One token's group: 8 ymm of activation bytes, d and s of its 8 blocks. */
typedef struct {
    __m256i q[8];
    __m256 d;
    __m256i s;
} xgroup;

INLINE void load_x(xgroup *x, const uint8_t *xr, int64_t k, int64_t nb, int64_t g, int nbl) {
    const uint8_t *q = xr + 256 * g;
    UNROLL
    for (int j = 0; j < 8; j++)
        x->q[j] = j < nbl ? _mm256_loadu_si256((const __m256i *)(q + 32 * j)) : _mm256_setzero_si256();
    const float *d = (const float *)(xr + k) + 8 * g;
    const int32_t *s = (const int32_t *)(xr + k + 4 * nb) + 8 * g;
    if (nbl == 8) {
        x->d = _mm256_loadu_ps(d);
        x->s = _mm256_loadu_si256((const __m256i *)s);
    } else {
        __m256i lm = _mm256_cmpgt_epi32(_mm256_set1_epi32(nbl), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        x->d = _mm256_maskload_ps(d, lm);
        x->s = _mm256_maskload_epi32((const int *)s, lm);
    }
}

/* v0..v7: 8 partial int32 sums of each of 8 blocks -> the blocks' sums,
 * lane j = block j (integer adds: exact in any order). */
INLINE __m256i reduce8(const __m256i *v) {
    __m256i t0 = _mm256_hadd_epi32(v[0], v[1]), t1 = _mm256_hadd_epi32(v[2], v[3]);
    __m256i t2 = _mm256_hadd_epi32(v[4], v[5]), t3 = _mm256_hadd_epi32(v[6], v[7]);
    __m256i u0 = _mm256_hadd_epi32(t0, t1), u1 = _mm256_hadd_epi32(t2, t3);
    /* u0: {blocks 0..3 from the low halves | blocks 0..3 from the high halves} */
    return _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20), _mm256_permute2x128_si256(u0, u1, 0x31));
}

/* acc += this group's terms, in the reference's steps. */
INLINE __m256 group_dot(int T, const wgroup *w, const xgroup *x, __m256 acc) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i p[8];
    UNROLL
    for (int j = 0; j < 8; j++) {
        __m256i prod = T == QW_Q8_0
                           ? _mm256_maddubs_epi16(_mm256_sign_epi8(w->q[j], w->q[j]), _mm256_sign_epi8(x->q[j], w->q[j]))
                           : _mm256_maddubs_epi16(w->q[j], x->q[j]);
        p[j] = _mm256_madd_epi16(prod, ones);
    }
    __m256i isum = reduce8(p);
    if (blk_off_log2(T) >= 0) isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(x->s, blk_off_log2(T)));
    acc = _mm256_fmadd_ps(_mm256_mul_ps(w->d, x->d), _mm256_cvtepi32_ps(isum), acc);
    if (has_min(T)) acc = _mm256_fmadd_ps(_mm256_mul_ps(w->m, x->d), _mm256_cvtepi32_ps(x->s), acc);
    return acc;
}

#include "kernels/qdot/qdot_x86_decode.h"

/* ---- prefill: blocks transposed so that one int32 lane is one block ----
 * As in qdot_avx512vnni.c: for n >= PREFILL_MIN a block of up to RB_MAX
 * weight rows is transposed once in groups of 8 blocks (an 8 x 8 transpose
 * of 4-byte words) into the thread's scratch (kernels_scratch); each token's group goes through the same
 * transpose in registers and meets every row of the block: vpmaddubsw +
 * vpmaddwd leave 4-product sums of one block per int32 lane, and 8 vector
 * adds give the 8 blocks' exact sums in block order, with no horizontal
 * adds. The float steps are the reference's: bitwise the decode path.
 * Q8_0 keeps its signed bytes (|w| and sign(x, w) per use, as above). */
#define PREFILL_MIN 8
#define RB_MAX 4               /* rows transposed together (16 ymm registers) */
#define WT_CAP (40 * 1024)     /* bytes of transposed weights (per-thread scratch) */
#define WT_MAX_G8 (WT_CAP / 256) /* rows up to 160 * 256 = 40960 weights take this path */

/* The transposed rows and their scales, in the thread's scratch. */
typedef struct {
    _Alignas(64) uint8_t wt[WT_CAP];
    _Alignas(64) float wd[WT_MAX_G8 * 8];
    _Alignas(64) float wm[WT_MAX_G8 * 8];
} prefill_scratch;
_Static_assert(sizeof(prefill_scratch) <= QW_SCRATCH_BYTES, "qdot_avx2 prefill scratch");

/* r[i] = block i's 8 words -> r[c] lane i = word c of block i. */
INLINE void transpose8(__m256i *r) {
    __m256i t[8], u[8];
    UNROLL
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    UNROLL
    for (int h = 0; h < 2; h++) {
        __m256i *a = t + 4 * h, *b = u + 4 * h;
        b[0] = _mm256_unpacklo_epi64(a[0], a[2]);
        b[1] = _mm256_unpackhi_epi64(a[0], a[2]);
        b[2] = _mm256_unpacklo_epi64(a[1], a[3]);
        b[3] = _mm256_unpackhi_epi64(a[1], a[3]);
    }
    UNROLL
    for (int c = 0; c < 4; c++) {
        r[c] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x20);
        r[4 + c] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x31);
    }
}

/* A weight row (nb blocks) -> ng transposed groups at wt, its d (and m) in
 * block order (zero padded). */
INLINE void transpose_w(int T, uint8_t *wt, float *wd, float *wm, const uint8_t *w, int64_t nb, int64_t ng) {
    const int B = blk_bytes(T);
    for (int64_t g = 0; g < ng; g++) {
        int nbl = nb - 8 * g >= 8 ? 8 : (int)(nb - 8 * g);
        wgroup wg;
        load_group(T, &wg, w + 8 * g * B, nbl);
        transpose8(wg.q);
        UNROLL
        for (int c = 0; c < 8; c++) _mm256_store_si256((__m256i *)(wt + 256 * g + 32 * c), wg.q[c]);
        _mm256_store_ps(wd + 8 * g, wg.d);
        if (has_min(T)) _mm256_store_ps(wm + 8 * g, wg.m);
    }
}

/* One token (QA8 row xr) against RB transposed rows (row stride wt_ld
 * bytes, scales at stride 8 * ng): Y[r] for r < RB. */
INLINE void token_rows_t(int T, int RB, float *Y, const uint8_t *xr, const uint8_t *wt, int64_t wt_ld, const float *wd,
                         const float *wm, int64_t k, int64_t ng) {
    const int64_t nb = k / 32;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[RB_MAX];
    UNROLL
    for (int r = 0; r < RB; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
        int nbl = nb - 8 * g >= 8 ? 8 : (int)(nb - 8 * g);
        __m256i xv[8];
        UNROLL
        for (int j = 0; j < 8; j++)
            xv[j] = j < nbl ? _mm256_loadu_si256((const __m256i *)(xr + 256 * g + 32 * j)) : _mm256_setzero_si256();
        transpose8(xv);
        __m256i lm = _mm256_cmpgt_epi32(_mm256_set1_epi32(nbl), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        __m256 dx = _mm256_maskload_ps((const float *)(xr + k) + 8 * g, lm);
        __m256i sx = _mm256_maskload_epi32((const int *)(xr + k + 4 * nb) + 8 * g, lm);
        UNROLL
        for (int r = 0; r < RB; r++) {
            const uint8_t *w = wt + r * wt_ld + 256 * g;
            __m256i is = _mm256_setzero_si256();
            UNROLL
            for (int c = 0; c < 8; c++) {
                __m256i wv = _mm256_load_si256((const __m256i *)(w + 32 * c));
                __m256i prod = T == QW_Q8_0 ? _mm256_maddubs_epi16(_mm256_sign_epi8(wv, wv), _mm256_sign_epi8(xv[c], wv))
                                           : _mm256_maddubs_epi16(wv, xv[c]);
                is = _mm256_add_epi32(is, _mm256_madd_epi16(prod, ones));
            }
            if (blk_off_log2(T) >= 0) is = _mm256_sub_epi32(is, _mm256_slli_epi32(sx, blk_off_log2(T)));
            acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_load_ps(wd + r * 8 * ng + 8 * g), dx), _mm256_cvtepi32_ps(is),
                                     acc[r]);
            if (has_min(T))
                acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_load_ps(wm + r * 8 * ng + 8 * g), dx),
                                         _mm256_cvtepi32_ps(sx), acc[r]);
        }
    }
    UNROLL
    for (int r = 0; r < RB; r++) Y[r] = tree(acc[r]);
}

INLINE void matmul_q_prefill(int T, float *Y, int64_t ldy, const uint8_t *X, int64_t ldxq, int64_t n,
                             const uint8_t *W, int64_t k, int64_t o0, int64_t o1) {
    const int64_t nb = k / 32, ng = (nb + 7) / 8, rb = nb * blk_bytes(T), wt_ld = ng * 256;
    prefill_scratch *sc = kernels_scratch();
    uint8_t *wt = sc->wt;
    float *wd = sc->wd, *wm = sc->wm;
    int64_t rbmax = WT_CAP / wt_ld < RB_MAX ? WT_CAP / wt_ld : RB_MAX;
    for (int64_t t0 = 0; t0 < n; t0 += TOK_BLOCK) {
        int64_t t1 = t0 + TOK_BLOCK < n ? t0 + TOK_BLOCK : n;
        for (int64_t r0 = o0; r0 < o1; r0 += rbmax) {
            int64_t nr = o1 - r0 < rbmax ? o1 - r0 : rbmax;
            for (int64_t r = 0; r < nr; r++)
                transpose_w(T, wt + r * wt_ld, wd + r * 8 * ng, wm + r * 8 * ng, W + (r0 + r) * rb, nb, ng);
            for (int64_t t = t0; t < t1; t++) {
                float *y = Y + t * ldy + r0;
                const uint8_t *xr = X + t * ldxq;
                switch (nr) {
#define ROWS(R)                                                        \
    case R: token_rows_t(T, R, y, xr, wt, wt_ld, wd, wm, k, ng); break;
                    ROWS(4) ROWS(3) ROWS(2) ROWS(1)
#undef ROWS
                default: break;
                }
            }
        }
    }
}

INLINE void matmul_q_generic(int T, float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                             int64_t k, int64_t o0, int64_t o1) {
    const uint8_t *X = XQ;
    if (n >= PREFILL_MIN && (k / 32 + 7) / 8 <= WT_MAX_G8) {
        matmul_q_prefill(T, Y, ldy, X, ldxq, n, W, k, o0, o1);
        return;
    }
    matmul_q_decode(T, Y, ldy, X, ldxq, n, W, k, o0, o1);
}

/* The table's entries: the loop above, one type each. */
static void matmul_q_q8_0_avx2(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                                int64_t k, int64_t o0, int64_t o1) {
    matmul_q_generic(QW_Q8_0, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}
static void matmul_q_q4_0_avx2(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                                int64_t k, int64_t o0, int64_t o1) {
    matmul_q_generic(QW_Q4_0, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}
static void matmul_q_q4_1_avx2(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                                int64_t k, int64_t o0, int64_t o1) {
    matmul_q_generic(QW_Q4_1, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}
static void matmul_q_q5_0_avx2(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                                int64_t k, int64_t o0, int64_t o1) {
    matmul_q_generic(QW_Q5_0, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}
static void matmul_q_q5_1_avx2(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                                int64_t k, int64_t o0, int64_t o1) {
    matmul_q_generic(QW_Q5_1, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}

/* quantize_qa8: the rule of kernels.h, 32 floats (4 ymm) per block. */
static void quantize_qa8_avx2(void *dst, const float *x, int64_t k) {
    uint8_t *base = dst;
    const int64_t nb = k / 32;
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t b = 0; b < nb; b++) {
        __m256 v[4];
        UNROLL
        for (int i = 0; i < 4; i++) v[i] = _mm256_loadu_ps(x + 32 * b + 8 * i);
        __m256 mx = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v[0], absmask), _mm256_and_ps(v[1], absmask)),
                                  _mm256_max_ps(_mm256_and_ps(v[2], absmask), _mm256_and_ps(v[3], absmask)));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        float amax = _mm_cvtss_f32(m4);
        float d = amax / 127.0f;
        float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        __m256 vid = _mm256_set1_ps(id);
        __m256i q[4];
        UNROLL
        for (int i = 0; i < 4; i++) q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], vid));
        __m256i s8 = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
        int32_t s = _mm_cvtsi128_si32(s4);
        __m256i h8 = _mm256_add_epi32(q[0], q[1]); /* the first 16 q */
        __m128i h4 = _mm_add_epi32(_mm256_castsi256_si128(h8), _mm256_extracti128_si256(h8, 1));
        h4 = _mm_add_epi32(h4, _mm_shuffle_epi32(h4, 0x4e));
        h4 = _mm_add_epi32(h4, _mm_shuffle_epi32(h4, 0xb1));
        const int32_t h0 = _mm_cvtsi128_si32(h4);
        const int16_t h[2] = {(int16_t)h0, (int16_t)(s - h0)};
        memcpy(base + k + 12 * nb + 4 * b, h, 4);
        /* int32 -> int8 in order: packs work within 128-bit lanes, the
         * permute puts the lanes back (values in [-127, 127]: no saturation) */
        __m256i w16a = _mm256_packs_epi32(q[0], q[1]), w16b = _mm256_packs_epi32(q[2], q[3]);
        __m256i b8 = _mm256_packs_epi16(w16a, w16b);
        b8 = _mm256_permutevar8x32_epi32(b8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(base + 32 * b), b8);
        memcpy(base + k + 4 * b, &d, 4);
        memcpy(base + k + 4 * nb + 4 * b, &s, 4);
        const float ds = d * (float)s;
        memcpy(base + k + 8 * nb + 4 * b, &ds, 4);
    }
}

const qw_kernels kernels_qdot_avx2 = {
    .quantize_qa8 = quantize_qa8_avx2,
    .matmul_q =
        {
            [QW_Q8_0] = matmul_q_q8_0_avx2,
            [QW_Q4_0] = matmul_q_q4_0_avx2,
            [QW_Q4_1] = matmul_q_q4_1_avx2,
            [QW_Q5_0] = matmul_q_q5_0_avx2,
            [QW_Q5_1] = matmul_q_q5_1_avx2,
        },
};

#endif
