/* qdot_avx512vnni.c - the integer path of the block-32 types with AVX-512
 * VNNI (vpdpbusd on zmm); bit for bit qdot_ref.c (see its header for the
 * float steps). Installed into the avx512 table only when cpu.c sets
 * QW_CPU_AVX512VNNI.
 *
 * A group is 8 blocks (256 weights) of one row: each block is unpacked to
 * 32 unsigned bytes (nibble types as they are; Q8_0 as q + 128, i.e. q ^
 * 0x80, whose extra 128 * s is taken back exactly like Q4_0's 8 * s), two
 * blocks per zmm, so 4 vpdpbusd against the 256 activation bytes give 8
 * partial int32 sums per block. A transposing reduction turns those into
 * one vector of the 8 blocks' exact sums, lane j = block 8g + j = lane
 * b % 8 of the reference, and one fmadd per group applies the scales.
 *
 * Decode (n < PREFILL_MIN): one row at a time, front to back, against
 * chunks of up to 4 tokens that share each unpacked group (n = 1: one
 * token). One row per pass keeps a single sequential weight stream, which
 * DRAM serves best: measured on the Zen 4 VM, one thread, a 300 MB matrix,
 * n = 1: Q8_0 11.2 -> 18-21 GB/s against two interleaved rows per pass,
 * Q5_0 about even (its unpacking is the limit there). Prefill (n >= PREFILL_MIN) has its own layout,
 * below, without the reduction. Every path gives the same bits.
 */
#include "kernels/kernels_impl.h"

#if defined(__x86_64__)
#include "kernels/qdot/qdot_x86.h"

/* log2 of what sum(w_unsigned * qx) exceeds isum by, in units of s (-1: nothing). */
INLINE int blk_off_log2(int T) {
    const int zero = T == QW_Q8_0 ? 128 : qw_type((qw_dtype)T)->zero; /* Q8_0: stored as q + 128 */
    return zero == 128 ? 7 : zero == 16 ? 4 : zero == 8 ? 3 : -1;
}

/* Byte offsets in a block of the nibbles and of the 32 high bits. */
INLINE int nib_off(int T) { return qw_type((qw_dtype)T)->qs_off; }
INLINE int qh_off(int T) { return qw_type((qw_dtype)T)->qh_off; }

/* Two blocks' 64 weights as unsigned bytes, block a in the low 256 bits
 * (reads only the two blocks). Nibble types: 128-bit lanes {qa, qa >> 4,
 * qb, qb >> 4} masked to 4 bits (weight j < 16 the low nibble of q[j],
 * else the high nibble of q[j - 16]); bit j of qh adds 16 to weight j. */
INLINE __m512i unpack2(int T, const uint8_t *a, const uint8_t *b) {
    if (T == QW_Q8_0) {
        __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(a + 2))),
                                       _mm256_loadu_si256((const __m256i *)(b + 2)), 1);
        return _mm512_xor_si512(v, _mm512_set1_epi8((char)0x80));
    }
    const int o = nib_off(T);
    __m256i y = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(a + o))),
                                        _mm_loadu_si128((const __m128i *)(b + o)), 1);
    __m512i z = _mm512_castsi256_si512(y);
    z = _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(1, 1, 0, 0));
    z = _mm512_mask_srli_epi16(z, (__mmask32)0xff00ff00u, z, 4);
    z = _mm512_and_si512(z, _mm512_set1_epi8(15));
    if (T == QW_Q5_0 || T == QW_Q5_1) {
        __mmask64 hb = (__mmask64)ld_u32(a + qh_off(T)) | (__mmask64)ld_u32(b + qh_off(T)) << 32;
        z = _mm512_mask_add_epi8(z, hb, z, _mm512_set1_epi8(16));
    }
    return z;
}

/* A row's group of nbl (1..8) blocks at w: 4 zmm of unsigned weights (absent
 * blocks zero), the blocks' d (and m) as 8 floats (absent: 0). */
typedef struct {
    __m512i q[4];
    __m256 d, m;
} wgroup;

INLINE void load_group(int T, wgroup *g, const uint8_t *w, int nbl) {
    const int B = blk_bytes(T);
    if (nbl == 8) {
        UNROLL
        for (int i = 0; i < 4; i++) g->q[i] = unpack2(T, w + 2 * i * B, w + (2 * i + 1) * B);
        g->d = _mm256_cvtph_ps(f16x8(w, B, 0));
        g->m = has_min(T) ? _mm256_cvtph_ps(f16x8(w, B, 2)) : _mm256_setzero_ps();
        return;
    }
    UNROLL
    for (int i = 0; i < 4; i++) {
        int j = 2 * i;
        if (j + 1 < nbl) g->q[i] = unpack2(T, w + j * B, w + (j + 1) * B);
        else if (j < nbl) g->q[i] = _mm512_maskz_mov_epi64(0x0f, unpack2(T, w + j * B, w + j * B));
        else g->q[i] = _mm512_setzero_si512();
    }
    tail_scales(T, &g->d, &g->m, w, B, nbl);
}

/* One token's group: 4 zmm of activation bytes, d and s of its 8 blocks. */
typedef struct {
    __m512i q[4];
    __m256 d;
    __m256i s;
} xgroup;

INLINE void load_x(xgroup *x, const uint8_t *xr, int64_t k, int64_t nb, int64_t g, int nbl) {
    const uint8_t *q = xr + 256 * g;
    if (nbl == 8) {
        UNROLL
        for (int i = 0; i < 4; i++) x->q[i] = _mm512_loadu_si512((const void *)(q + 64 * i));
        x->d = _mm256_loadu_ps((const float *)(xr + k) + 8 * g);
        x->s = _mm256_loadu_si256((const __m256i *)((const int32_t *)(xr + k + 4 * nb) + 8 * g));
    } else {
        int64_t bytes = 32 * (int64_t)nbl;
        UNROLL
        for (int i = 0; i < 4; i++) {
            int64_t left = bytes - 64 * i;
            __mmask64 m = left >= 64 ? ~(__mmask64)0 : left <= 0 ? 0 : (((__mmask64)1 << left) - 1);
            x->q[i] = _mm512_maskz_loadu_epi8(m, q + 64 * i);
        }
        __mmask8 lm = (__mmask8)((1u << nbl) - 1);
        x->d = _mm256_maskz_loadu_ps(lm, (const float *)(xr + k) + 8 * g);
        x->s = _mm256_maskz_loadu_epi32(lm, (const int32_t *)(xr + k + 4 * nb) + 8 * g);
    }
}

/* v0..v3: 4 x (2 blocks x 8 partial sums) -> the 8 blocks' sums, lane j =
 * block j (integer adds: exact in any order). */
INLINE __m256i reduce8(__m512i v0, __m512i v1, __m512i v2, __m512i v3) {
    __m512i s01 = _mm512_add_epi32(_mm512_shuffle_i32x4(v0, v1, 0x88), _mm512_shuffle_i32x4(v0, v1, 0xdd));
    __m512i s23 = _mm512_add_epi32(_mm512_shuffle_i32x4(v2, v3, 0x88), _mm512_shuffle_i32x4(v2, v3, 0xdd));
    /* 128-bit lane i of s01 holds 4 partials of block i, of s23 block 4 + i */
    __m512i z = _mm512_add_epi32(_mm512_unpacklo_epi32(s01, s23), _mm512_unpackhi_epi32(s01, s23));
    z = _mm512_add_epi32(z, _mm512_shuffle_epi32(z, _MM_PERM_BADC));
    /* lane i: {block i, block 4 + i, ...} */
    const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_castsi512_si256(_mm512_permutexvar_epi32(idx, z));
}

/* acc += this group's terms, in the reference's steps. */
INLINE __m256 group_dot(int T, const wgroup *w, const xgroup *x, __m256 acc) {
    __m512i p[4];
    UNROLL
    for (int i = 0; i < 4; i++) p[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w->q[i], x->q[i]);
    __m256i isum = reduce8(p[0], p[1], p[2], p[3]);
    if (blk_off_log2(T) >= 0) isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(x->s, blk_off_log2(T)));
    acc = _mm256_fmadd_ps(_mm256_mul_ps(w->d, x->d), _mm256_cvtepi32_ps(isum), acc);
    if (has_min(T)) acc = _mm256_fmadd_ps(_mm256_mul_ps(w->m, x->d), _mm256_cvtepi32_ps(x->s), acc);
    return acc;
}

#include "kernels/qdot/qdot_x86_decode.h"

/* ---- prefill: blocks transposed so that one int32 lane is one block ----
 * For n >= PREFILL_MIN, a block of up to RB_MAX weight rows is rearranged
 * once in 16-block units ("G16", 512 bytes) into 8 zmm whose lane i holds 4
 * bytes of block pi(i) (transpose16), on the stack; then each token's G16
 * goes through the same transpose in registers and meets every row of the
 * block: 8 vpdpbusd leave each block's exact sum in its own lane, with no
 * horizontal reduction; one permute puts the 16 sums in block order. The
 * float steps are the reference's, lanes 0..7 (blocks 16g..16g+7) before
 * lanes 8..15, so the result is bitwise the decode path's. Tokens go in
 * blocks of up to TOK_BLOCK (as many as fit in XT_CAP), whose quants are
 * transposed once per block into xt (on the stack, in L1/L2) rather than
 * once per token and row block: that transpose was 24 shuffles per 64
 * vpdpbusd of each token's G16 (one thread, n = 512, best of 10, busy
 * machine: Q5_0 4864 x 896 115-149 -> 141-193 GOP/s, 896 x 4864 97-102
 * -> 105-118 GOP/s). */
#define PREFILL_MIN 8
#define RB_MAX 8              /* rows transposed together */
#define WT_CAP (40 * 1024)    /* bytes of transposed weights (per-thread scratch) */
#define WT_MAX_G16 (WT_CAP / 512) /* rows up to 80 * 512 = 40960 weights take this path */
#define XT_CAP (96 * 1024)    /* bytes of transposed activations: >= 2 tokens of the widest row */

/* The transposed rows, their scales and a block of transposed tokens, in
 * the thread's scratch (kernels_scratch). */
typedef struct {
    _Alignas(64) uint8_t wt[WT_CAP];
    _Alignas(64) uint8_t xt[XT_CAP];
    _Alignas(64) float wd[WT_MAX_G16 * 16];
    _Alignas(64) float wm[WT_MAX_G16 * 16];
} prefill_scratch;
_Static_assert(sizeof(prefill_scratch) <= QW_SCRATCH_BYTES, "qdot_avx512vnni prefill scratch");

/* 16 blocks as 8 zmm (2 blocks each, in order) -> 8 zmm, lane 4q + r of each
 * holding a dword of block pi = {0,2,4,6, 1,3,5,7, 8,10,12,14, 9,11,13,15}
 * [4q + r]; over the 8 outputs each lane sees its block's 8 dwords once. */
INLINE void transpose16(__m512i *z) {
    __m512i t[8], u[8];
    UNROLL
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(z[2 * i], z[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(z[2 * i], z[2 * i + 1]);
    }
    UNROLL
    for (int h = 0; h < 2; h++) { /* h: z0..z3 or z4..z7 */
        __m512i *a = t + 4 * h, *b = u + 4 * h;
        b[0] = _mm512_unpacklo_epi64(a[0], a[2]);
        b[1] = _mm512_unpackhi_epi64(a[0], a[2]);
        b[2] = _mm512_unpacklo_epi64(a[1], a[3]);
        b[3] = _mm512_unpackhi_epi64(a[1], a[3]);
    }
    UNROLL
    for (int k = 0; k < 4; k++) {
        z[2 * k] = _mm512_shuffle_i32x4(u[k], u[4 + k], 0x88);
        z[2 * k + 1] = _mm512_shuffle_i32x4(u[k], u[4 + k], 0xdd);
    }
}

/* Natural block order from the pi order of transpose16. */
INLINE __m512i unpi(__m512i v) {
    const __m512i idx = _mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15);
    return _mm512_permutexvar_epi32(idx, v);
}

/* A weight row (nb blocks) -> ng G16 units of unsigned weights at wt, its
 * d (and m) in block order (zero padded). */
INLINE void transpose_w(int T, uint8_t *wt, float *wd, float *wm, const uint8_t *w, int64_t nb, int64_t ng) {
    const int B = blk_bytes(T);
    for (int64_t g = 0; g < ng; g++) {
        __m512i z[8];
        UNROLL
        for (int h = 0; h < 2; h++) {
            int64_t b0 = 16 * g + 8 * h;
            int nbl = nb - b0 >= 8 ? 8 : nb - b0 <= 0 ? 0 : (int)(nb - b0);
            wgroup wg;
            if (nbl) load_group(T, &wg, w + b0 * B, nbl);
            else wg.q[0] = wg.q[1] = wg.q[2] = wg.q[3] = _mm512_setzero_si512(), wg.d = wg.m = _mm256_setzero_ps();
            UNROLL
            for (int i = 0; i < 4; i++) z[4 * h + i] = wg.q[i];
            _mm256_store_ps(wd + 16 * g + 8 * h, wg.d);
            if (has_min(T)) _mm256_store_ps(wm + 16 * g + 8 * h, wg.m);
        }
        transpose16(z);
        UNROLL
        for (int c = 0; c < 8; c++) _mm512_store_si512((void *)(wt + 512 * g + 64 * c), z[c]);
    }
}

/* A 16-lane vector of a QA8 row's d or s for G16 g (nb blocks; zero past nb). */
INLINE __m512i ld16_tail(const void *p, int64_t nb, int64_t g) {
    int64_t left = nb - 16 * g;
    __mmask16 mk = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
    return _mm512_maskz_loadu_epi32(mk, (const int32_t *)p + 16 * g);
}

/* A token's QA8 quants (row xr, nb blocks) -> ng transposed G16 units at
 * xt (zero past nb). */
INLINE void transpose_x(uint8_t *xt, const uint8_t *xr, int64_t nb, int64_t ng) {
    for (int64_t g = 0; g < ng; g++) {
        __m512i xv[8];
        UNROLL
        for (int m = 0; m < 8; m++) {
            int64_t left = 32 * (nb - 16 * g - 2 * m); /* bytes of this pair present */
            __mmask64 mk = left >= 64 ? ~(__mmask64)0 : left <= 0 ? 0 : (((__mmask64)1 << left) - 1);
            xv[m] = _mm512_maskz_loadu_epi8(mk, xr + 512 * g + 64 * m);
        }
        transpose16(xv);
        UNROLL
        for (int m = 0; m < 8; m++) _mm512_store_si512((void *)(xt + 512 * g + 64 * m), xv[m]);
    }
}

/* One token (QA8 row xr, its quants transposed at xt) against RB
 * transposed rows (row stride wt_ld bytes, scales wd/wm at stride 16 * ng):
 * Y[r] for r < RB. */
INLINE void token_rows_t(int T, int RB, float *Y, const uint8_t *xr, const uint8_t *xt, const uint8_t *wt,
                         int64_t wt_ld, const float *wd, const float *wm, int64_t k, int64_t ng) {
    const int64_t nb = k / 32;
    __m256 acc[RB_MAX];
    UNROLL
    for (int r = 0; r < RB; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
        __m512i xv[8];
        UNROLL
        for (int m = 0; m < 8; m++) xv[m] = _mm512_load_si512((const void *)(xt + 512 * g + 64 * m));
        __m512 dx = _mm512_castsi512_ps(ld16_tail(xr + k, nb, g));
        __m512i sx = ld16_tail(xr + k + 4 * nb, nb, g);
        __m512i off = blk_off_log2(T) >= 0 ? _mm512_slli_epi32(sx, blk_off_log2(T)) : _mm512_setzero_si512();
        __m512 fs = _mm512_cvtepi32_ps(sx);
        /* c outer, rows inner: RB independent vpdpbusd chains in flight
         * (one row's 8 steps form a dependent chain) */
        __m512i is[RB_MAX];
        UNROLL
        for (int r = 0; r < RB; r++) is[r] = _mm512_setzero_si512();
        UNROLL
        for (int c = 0; c < 8; c++) {
            UNROLL
            for (int r = 0; r < RB; r++)
                is[r] = _mm512_dpbusd_epi32(is[r], _mm512_load_si512((const void *)(wt + r * wt_ld + 512 * g + 64 * c)),
                                            xv[c]);
        }
        UNROLL
        for (int r = 0; r < RB; r++) {
            __m512i isum = _mm512_sub_epi32(unpi(is[r]), off);
            __m512 f = _mm512_cvtepi32_ps(isum), p = _mm512_mul_ps(_mm512_load_ps(wd + r * 16 * ng + 16 * g), dx);
            acc[r] = _mm256_fmadd_ps(_mm512_castps512_ps256(p), _mm512_castps512_ps256(f), acc[r]);
            if (has_min(T)) {
                __m512 pm = _mm512_mul_ps(_mm512_load_ps(wm + r * 16 * ng + 16 * g), dx);
                acc[r] = _mm256_fmadd_ps(_mm512_castps512_ps256(pm), _mm512_castps512_ps256(fs), acc[r]);
                acc[r] = _mm256_fmadd_ps(_mm512_extractf32x8_ps(p, 1), _mm512_extractf32x8_ps(f, 1), acc[r]);
                acc[r] = _mm256_fmadd_ps(_mm512_extractf32x8_ps(pm, 1), _mm512_extractf32x8_ps(fs, 1), acc[r]);
            } else {
                acc[r] = _mm256_fmadd_ps(_mm512_extractf32x8_ps(p, 1), _mm512_extractf32x8_ps(f, 1), acc[r]);
            }
        }
    }
    UNROLL
    for (int r = 0; r < RB; r++) Y[r] = tree(acc[r]);
}

INLINE void matmul_q_prefill(int T, float *Y, int64_t ldy, const uint8_t *X, int64_t ldxq, int64_t n,
                             const uint8_t *W, int64_t k, int64_t o0, int64_t o1) {
    const int64_t nb = k / 32, ng = (nb + 15) / 16, rb = nb * blk_bytes(T), wt_ld = ng * 512;
    prefill_scratch *sc = kernels_scratch();
    uint8_t *wt = sc->wt, *xt = sc->xt;
    float *wd = sc->wd, *wm = sc->wm;
    int64_t rbmax = WT_CAP / wt_ld < RB_MAX ? WT_CAP / wt_ld : RB_MAX;
    int64_t tb = XT_CAP / wt_ld < TOK_BLOCK ? XT_CAP / wt_ld : TOK_BLOCK; /* a token's G16s take wt_ld bytes too */
    for (int64_t t0 = 0; t0 < n; t0 += tb) {
        int64_t t1 = t0 + tb < n ? t0 + tb : n;
        for (int64_t t = t0; t < t1; t++) transpose_x(xt + (t - t0) * wt_ld, X + t * ldxq, nb, ng);
        for (int64_t r0 = o0; r0 < o1; r0 += rbmax) {
            int64_t nr = o1 - r0 < rbmax ? o1 - r0 : rbmax;
            for (int64_t r = 0; r < nr; r++)
                transpose_w(T, wt + r * wt_ld, wd + r * 16 * ng, wm + r * 16 * ng, W + (r0 + r) * rb, nb, ng);
            for (int64_t t = t0; t < t1; t++) {
                float *y = Y + t * ldy + r0;
                const uint8_t *xr = X + t * ldxq, *xtt = xt + (t - t0) * wt_ld;
                switch (nr) {
#define ROWS(R)                                                              \
    case R: token_rows_t(T, R, y, xr, xtt, wt, wt_ld, wd, wm, k, ng); break;
                    ROWS(8) ROWS(7) ROWS(6) ROWS(5) ROWS(4) ROWS(3) ROWS(2) ROWS(1)
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
    if (n >= PREFILL_MIN && (k / 32 + 15) / 16 <= WT_MAX_G16) { /* at least one row fits */
        matmul_q_prefill(T, Y, ldy, X, ldxq, n, W, k, o0, o1);
        return;
    }
    matmul_q_decode(T, Y, ldy, X, ldxq, n, W, k, o0, o1);
}

/* The table's entries: the loop above, one type each. */
static void matmul_q_q8_0_avx512vnni(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                                int64_t k, int64_t o0, int64_t o1) {
    matmul_q_generic(QW_Q8_0, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}
static void matmul_q_q4_0_avx512vnni(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                                int64_t k, int64_t o0, int64_t o1) {
    matmul_q_generic(QW_Q4_0, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}
static void matmul_q_q4_1_avx512vnni(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                                int64_t k, int64_t o0, int64_t o1) {
    matmul_q_generic(QW_Q4_1, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}
static void matmul_q_q5_0_avx512vnni(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                                int64_t k, int64_t o0, int64_t o1) {
    matmul_q_generic(QW_Q5_0, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}
static void matmul_q_q5_1_avx512vnni(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                                int64_t k, int64_t o0, int64_t o1) {
    matmul_q_generic(QW_Q5_1, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}

/* quantize_qa8: the rule of kernels.h, 32 floats (2 zmm) per block. */
static void quantize_qa8_avx512vnni(void *dst, const float *x, int64_t k) {
    uint8_t *base = dst;
    const int64_t nb = k / 32;
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    for (int64_t b = 0; b < nb; b++) {
        __m512 a = _mm512_loadu_ps(x + 32 * b), c = _mm512_loadu_ps(x + 32 * b + 16);
        float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_and_ps(a, absmask), _mm512_and_ps(c, absmask)));
        float d = amax / 127.0f;
        float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        __m512 vid = _mm512_set1_ps(id);
        __m512i qa = _mm512_cvtps_epi32(_mm512_mul_ps(a, vid)), qc = _mm512_cvtps_epi32(_mm512_mul_ps(c, vid));
        _mm_storeu_si128((__m128i *)(base + 32 * b), _mm512_cvtepi32_epi8(qa));
        _mm_storeu_si128((__m128i *)(base + 32 * b + 16), _mm512_cvtepi32_epi8(qc));
        const int32_t h0 = _mm512_reduce_add_epi32(qa), h1 = _mm512_reduce_add_epi32(qc), s = h0 + h1;
        const int16_t h[2] = {(int16_t)h0, (int16_t)h1};
        memcpy(base + k + 12 * nb + 4 * b, h, 4);
        memcpy(base + k + 4 * b, &d, 4);
        memcpy(base + k + 4 * nb + 4 * b, &s, 4);
        const float ds = d * (float)s;
        memcpy(base + k + 8 * nb + 4 * b, &ds, 4);
    }
}

const qw_kernels kernels_qdot_avx512vnni = {
    .quantize_qa8 = quantize_qa8_avx512vnni,
    .matmul_q =
        {
            [QW_Q8_0] = matmul_q_q8_0_avx512vnni,
            [QW_Q4_0] = matmul_q_q4_0_avx512vnni,
            [QW_Q4_1] = matmul_q_q4_1_avx512vnni,
            [QW_Q5_0] = matmul_q_q5_0_avx512vnni,
            [QW_Q5_1] = matmul_q_q5_1_avx512vnni,
        },
};

#endif
