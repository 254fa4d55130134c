/* matmul_avx2.c - the float-activation matmul, to_f32 and quantize_q8_0
 * with AVX2 + FMA + F16C (x86-64); the reference is matmul_ref.c.
 *
 * Compiled with -mavx2 -mfma -mf16c (Makefile rule for *_avx2.c) and only
 * ever called after cpu.c confirmed the CPU and the OS (XCR0) support them.
 * The body is under __x86_64__ so the file compiles to nothing elsewhere.
 *
 * Matmul: weights are converted to float32 (bf16: zero-extend and shift
 * left 16; f16: vcvtph2ps; GGML's block types: see their sections) and
 * multiplied with f32 FMA; the activations are never rounded. The 4/5/6-bit
 * block types (Q4_0 ... Q6_K, a separate section near the end) always take
 * the prefill path below, whatever n. Batch invariant: each output gets the same operation
 * sequence whatever n, tile and o0/o1 (see the matmul section). Regimes:
 *  - n <= SMALL_N (decode, small continuous batches): memory bound. For
 *    each 4-row x KC block the weights are streamed from the mapping once,
 *    with software prefetch (PF_NEAR / PF_DIST), and converted in registers
 *    for every group of 2 tokens (the block stays in L1), so a step with n
 *    tokens costs little more than n = 1;
 *  - larger n (prefill): compute bound. A block of tokens x one k block of
 *    X stays in L2; each 4-row x KC block of weights is converted once per
 *    token block to float32 on the stack (L1) and a 4-row x 3-token register
 *    tile runs over it: 3 activation vectors in registers, one weight vector
 *    loaded per row, 12 accumulators (16 ymm, no spill). KC = 1024 keeps the
 *    per-block reduction and Y update rare (measured with
 *    tools/bench_matmul.sh: 58 -> 82 GFLOP/s on one Zen 3 core, 896 x 896).
 * Horizontal sums of 4 accumulators are done together (hadd); the k % 8
 * tail is scalar FMA, with memcpy loads (weights may be misaligned).
 */
#include "kernels/kernels_impl.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>

#define INLINE static inline __attribute__((always_inline))
/* Fully unroll the tile loops over rows and tokens so the accumulator arrays
 * live in registers (GCC and clang both honour this spelling). */
#define UNROLL _Pragma("GCC unroll 8")

/* ---- loads: 8 weights -> 8 floats ---- */
INLINE __m256 ld8_f32(const float *p) { return _mm256_loadu_ps(p); }
INLINE __m256 ld8_bf16(const uint16_t *p) {
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
INLINE __m256 ld8_f16(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}
/* Element i of a row of 16/32-bit weights at w, by type DT (F32, F16,
 * BF16: a constant in every specialised caller, so these fold). */
INLINE int64_t esize(int DT) { return qw_type((qw_dtype)DT)->bytes; }
INLINE __m256 ld8(int DT, const char *w, int64_t i) {
    const char *p = w + i * esize(DT);
    return DT == QW_F32 ? ld8_f32((const float *)p) : DT == QW_F16 ? ld8_f16((const uint16_t *)p) : ld8_bf16((const uint16_t *)p);
}
INLINE float ld1(int DT, const char *w, int64_t i) {
    const char *p = w + i * esize(DT);
    return DT == QW_F32 ? ld1_f32((const float *)p) : DT == QW_F16 ? ld1_f16((const uint16_t *)p) : ld1_bf16((const uint16_t *)p);
}

/* {sum(a), sum(b), sum(c), sum(d)} */
INLINE __m128 hsum4x8(__m256 a, __m256 b, __m256 c, __m256 d) {
    __m256 ab = _mm256_hadd_ps(a, b); /* a01 a23 b01 b23 | a45 a67 b45 b67 */
    __m256 cd = _mm256_hadd_ps(c, d);
    __m256 s = _mm256_hadd_ps(ab, cd); /* a0-3 b0-3 c0-3 d0-3 | a4-7 ... */
    return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

/* ---- matmul ----
 * Batch invariance: every output Y[t][o] is computed by exactly the same
 * sequence of float operations whatever n, the tile it lands in, its
 * position in the tile and the o0/o1 split (the scheduler batches one token
 * per request, so a request's logits must not depend on the others):
 *  - k is cut into blocks of KC columns; within a block one 8-lane
 *    accumulator per (o, t) takes one FMA per 8 columns, in column order;
 *  - the accumulator is reduced by hsum4x8 (lane r only depends on input
 *    r, so a 1-row tile gives the same bits as a 4-row tile);
 *  - the block's k % 8 tail (last block only) is added with scalar FMAs in
 *    column order; the block sum is stored (first block) or added to Y.
 * The weights may be converted in registers (n small: straight from the
 * mapping) or first into a float32 buffer (prefill): the conversion is
 * exact, so both give the same bits. */
enum { PF_DIST_Q8 = 1024, PF_DIST = 512, PF_NEAR = 16 * 1024, L2_BLOCK = 256 * 1024, KC = 1024, OC = 128, SMALL_N = 8 };

INLINE float fma1(float a, float b, float c) {
    return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}

/* R rows (1 or 4) x T tokens (1..3) of weight type DT over the k block
 * [c0, c0 + len): w and X point at column c0 of row 0 / token 0 (weight
 * row stride ws elements), Y at (token 0, row 0). pf: 0 no software
 * prefetch, 1 prefetch PF_DIST ahead in each row, 2 prefetch the next
 * R-row block in step with this one (short rows). */
INLINE void tile(int DT, float *Y, int64_t ldy, const float *X, int64_t ldx, const char *w, int64_t ws, int64_t c0,
                 int64_t len, const int R, const int T, const int pf) {
    __m256 acc[4][3];
    UNROLL for (int r = 0; r < R; r++)
        UNROLL for (int t = 0; t < T; t++) acc[r][t] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= len; i += 8) {
        if (pf == 1 && (i & 15) == 0) {
            UNROLL for (int r = 0; r < R; r++) _mm_prefetch(w + (r * ws + i) * esize(DT) + PF_DIST, _MM_HINT_T0);
        } else if (pf == 2 && (i & 15) == 0) {
            const char *nx = w + (R * ws + (R - 1) * c0 + R * i) * esize(DT);
            _mm_prefetch(nx, _MM_HINT_T0);
            _mm_prefetch(nx + 64, _MM_HINT_T0);
        }
        __m256 xv[3];
        UNROLL for (int t = 0; t < T; t++) xv[t] = _mm256_loadu_ps(X + t * ldx + i);
        UNROLL for (int r = 0; r < R; r++) {
            __m256 wv = ld8(DT, w, r * ws + i);
            UNROLL for (int t = 0; t < T; t++) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
        }
    }
    UNROLL for (int t = 0; t < T; t++) {
        float out[4];
        if (R == 4)
            _mm_storeu_ps(out, hsum4x8(acc[0][t], acc[1][t], acc[2][t], acc[3][t]));
        else
            out[0] = _mm_cvtss_f32(hsum4x8(acc[0][t], acc[0][t], acc[0][t], acc[0][t]));
        UNROLL for (int r = 0; r < R; r++) {
            for (int64_t j = i; j < len; j++) out[r] = fma1(X[t * ldx + j], ld1(DT, w, r * ws + j), out[r]);
            Y[t * ldy + r] = c0 > 0 ? Y[t * ldy + r] + out[r] : out[r];
        }
    }
}

/* Rows [o, o + R) x tokens [t0, t1) x k block [c0, c0 + len) of type DT;
 * w at column c0 of row o. The T and pf of each tile are constants in
 * its case (no branch in the k loop). */
INLINE void rows(int DT, float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t t0, int64_t t1, const char *w,
                 int64_t ws, int64_t o, int64_t c0, int64_t len, int R, int pf) {
    /* 3 tokens: 12 accumulators + 3 activations + 1 weight vector = 16 ymm */
    const int tmax = 3;
    for (int64_t t = t0; t < t1; t += tmax) {
        int T = t1 - t < tmax ? (int)(t1 - t) : tmax;
        const float *x = X + t * ldx + c0;
        float *y = Y + t * ldy + o;
        /* Y is read back after the tile's k loop when c0 > 0: ask for its lines
         * now, so the epilogue does not wait on L3 (large k: Y left L2). */
        if (c0 > 0)
            for (int u = 0; u < T; u++) _mm_prefetch((const char *)(Y + (t + u) * ldy + o), _MM_HINT_T0);
        if (R == 4) {
            switch (T * 4 + (t == t0 ? pf : 0)) {
            case 12: tile(DT, y, ldy, x, ldx, w, ws, c0, len, 4, 3, 0); break;
            case 13: tile(DT, y, ldy, x, ldx, w, ws, c0, len, 4, 3, 1); break;
            case 14: tile(DT, y, ldy, x, ldx, w, ws, c0, len, 4, 3, 2); break;
            case 8: tile(DT, y, ldy, x, ldx, w, ws, c0, len, 4, 2, 0); break;
            case 9: tile(DT, y, ldy, x, ldx, w, ws, c0, len, 4, 2, 1); break;
            case 10: tile(DT, y, ldy, x, ldx, w, ws, c0, len, 4, 2, 2); break;
            case 4: tile(DT, y, ldy, x, ldx, w, ws, c0, len, 4, 1, 0); break;
            case 5: tile(DT, y, ldy, x, ldx, w, ws, c0, len, 4, 1, 1); break;
            default: tile(DT, y, ldy, x, ldx, w, ws, c0, len, 4, 1, 2); break;
            }
        } else if (T == 3) {
            tile(DT, y, ldy, x, ldx, w, ws, c0, len, 1, 3, 0);
        } else if (T == 2) {
            tile(DT, y, ldy, x, ldx, w, ws, c0, len, 1, 2, 0);
        } else {
            tile(DT, y, ldy, x, ldx, w, ws, c0, len, 1, 1, 0);
        }
    }
}

/* One instance per weight type (the prefill tiles use rows_f32). */
static void rows_f32(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t t0, int64_t t1, const float *w,
                     int64_t ws, int64_t o, int64_t c0, int64_t len, int R, int pf) {
    rows(QW_F32, Y, ldy, X, ldx, t0, t1, (const char *)w, ws, o, c0, len, R, pf);
}
static void rows_f16(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t t0, int64_t t1, const char *w,
                     int64_t ws, int64_t o, int64_t c0, int64_t len, int R, int pf) {
    rows(QW_F16, Y, ldy, X, ldx, t0, t1, w, ws, o, c0, len, R, pf);
}
static void rows_bf16(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t t0, int64_t t1, const char *w,
                      int64_t ws, int64_t o, int64_t c0, int64_t len, int R, int pf) {
    rows(QW_BF16, Y, ldy, X, ldx, t0, t1, w, ws, o, c0, len, R, pf);
}

/* ---- prefill: weights converted to float32 blocks ----
 * A block of tokens x one k block of X stays in L2 while every 4-row group
 * of a chunk of rows is converted to float32 (once per token block) into a
 * buffer on the stack (L1) and multiplied with it by the f32 tiles; Y takes
 * the k blocks' sums in k order and stays in L2 (row chunks of OC).
 * conv_fn: columns [c0, c0 + len) of one row, src at column c0, into dst;
 * nx: the same columns of the row 4 below (the next group), to prefetch into
 * L2 while this group's tiles run, or NULL. */

static void matmul_prefill(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const char *W,
                           int64_t k, int64_t o0, int64_t o1, qw_dtype dt, qw_conv_fn conv) {
    float wbuf[4 * KC];
    const int64_t rb = qw_dtype_row_bytes(dt, k);
    int64_t kc = k < KC ? k : KC;
    int64_t nb = L2_BLOCK / (kc * 4);
    nb = nb < 3 ? 3 : nb - nb % 3;
    /* decode and small batches: X is tiny, so each 4-row group runs its k
     * blocks back to back and its rows stream from memory end to end */
    const int64_t ocs = n <= SMALL_N ? 4 : OC;
    for (int64_t t0 = 0; t0 < n; t0 += nb)
        for (int64_t oc = o0; oc < o1; oc += ocs) {
            int64_t t1 = t0 + nb < n ? t0 + nb : n, oc1 = oc + ocs < o1 ? oc + ocs : o1;
            for (int64_t c0 = 0; c0 < k; c0 += KC) {
                int64_t len = k - c0 < KC ? k - c0 : KC, coff = qw_dtype_row_bytes(dt, c0);
                for (int64_t o = oc; o < oc1;) {
                    int R = o + 4 <= oc1 ? 4 : 1;
                    for (int r = 0; r < R; r++) {
                        const char *src = W + (o + r) * rb + coff;
                        conv(wbuf + r * KC, src, len, o + 4 + r < o1 ? src + 4 * rb : NULL);
                    }
                    rows_f32(Y, ldy, X, ldx, t0, t1, wbuf, KC, o, c0, len, R, 0);
                    o += R;
                }
            }
        }
}

/* 16-bit weights to float32 (exact), for the prefill tiles and to_f32. */
INLINE void conv16(int DT, float *dst, const char *src, int64_t len, const char *nx) {
    int64_t j = 0;
    for (; j + 8 <= len; j += 8) {
        if (nx && (j & 31) == 0) _mm_prefetch(nx + esize(DT) * j, _MM_HINT_T1);
        _mm256_storeu_ps(dst + j, ld8(DT, src, j));
    }
    for (; j < len; j++) dst[j] = ld1(DT, src, j);
}
static void conv_f16(float *dst, const char *src, int64_t len, const char *nx) { conv16(QW_F16, dst, src, len, nx); }
static void conv_bf16(float *dst, const char *src, int64_t len, const char *nx) { conv16(QW_BF16, dst, src, len, nx); }

/* The 16/32-bit weight types. n <= SMALL_N (decode and small batches) and
 * f32 weights: each 4-row group streams its rows from the mapping once per
 * token block, converting in registers for every token group (the block
 * stays in L1). Larger n (16-bit): matmul_prefill. Both give each output
 * the same operations (see above). */
INLINE void matmul_elem(int DT, float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W,
                        int64_t k, int64_t o0, int64_t o1) {
    const char *w = W;
    if (k == 0) { /* empty sums: the k-block loop below would not store */
        for (int64_t t = 0; t < n; t++)
            for (int64_t o = o0; o < o1; o++) Y[t * ldy + o] = 0.0f;
        return;
    }
    if (DT != QW_F32 && n > SMALL_N) {
        matmul_prefill(Y, ldy, X, ldx, n, W, k, o0, o1, (qw_dtype)DT, DT == QW_F16 ? conv_f16 : conv_bf16);
        return;
    }
    const int pf = 4 * k * esize(DT) <= PF_NEAR ? 2 : 1;
    int64_t nb = L2_BLOCK / (k * 4);
    nb = nb < 3 ? 3 : nb - nb % 3;
    for (int64_t t0 = 0; t0 < n; t0 += nb) {
        int64_t t1 = t0 + nb < n ? t0 + nb : n;
        for (int64_t o = o0; o < o1;) {
            int R = o + 4 <= o1 ? 4 : 1;
            for (int64_t c0 = 0; c0 < k; c0 += KC) {
                int64_t len = k - c0 < KC ? k - c0 : KC;
                const char *wb = w + (o * k + c0) * esize(DT);
                if (DT == QW_F32) rows_f32(Y, ldy, X, ldx, t0, t1, (const float *)wb, k, o, c0, len, R, pf);
                else if (DT == QW_F16) rows_f16(Y, ldy, X, ldx, t0, t1, wb, k, o, c0, len, R, pf);
                else rows_bf16(Y, ldy, X, ldx, t0, t1, wb, k, o, c0, len, R, pf);
            }
            o += R;
        }
    }
}

static void matmul_f32_avx2(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, int64_t k,
                            int64_t o0, int64_t o1) {
    matmul_elem(QW_F32, Y, ldy, X, ldx, n, W, k, o0, o1);
}
static void matmul_f16_avx2(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, int64_t k,
                            int64_t o0, int64_t o1) {
    matmul_elem(QW_F16, Y, ldy, X, ldx, n, W, k, o0, o1);
}
static void matmul_bf16_avx2(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, int64_t k,
                             int64_t o0, int64_t o1) {
    matmul_elem(QW_BF16, Y, ldy, X, ldx, n, W, k, o0, o1);
}

/* ---- Q8_0 ----
 * Each weight is converted exactly (int8 * f16 scale: 8 x 11 significant
 * bits fit a float32 significand), then multiplied like any float32 weight,
 * so the direct path (converting in registers) and the prefill path
 * (converting into the buffer) give the same bits, and the result equals the
 * f32 matmul of the dequantized weights bit for bit (test_kernels checks). */
INLINE __m256 ld8_q8(const uint8_t *q, __m256 d) {
    __m128i v = _mm_loadl_epi64((const __m128i *)q);
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)), d);
}
INLINE __m256 scale8_q8(const uint8_t *blk) {
    uint16_t h;
    memcpy(&h, blk, sizeof h);
    return _mm256_broadcastss_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

static void conv_q8_0(float *dst, const char *src, int64_t len, const char *nx) {
    const uint8_t *b = (const uint8_t *)src;
    for (int64_t j = 0; j < len; j += qw_type(QW_Q8_0)->block, b += qw_type(QW_Q8_0)->bytes) {
        if (nx && (j & 63) == 0) _mm_prefetch(nx + j / qw_type(QW_Q8_0)->block * qw_type(QW_Q8_0)->bytes, _MM_HINT_T1);
        __m256 d = scale8_q8(b);
        UNROLL for (int s = 0; s < 4; s++) _mm256_storeu_ps(dst + j + 8 * s, ld8_q8(b + 2 + 8 * s, d));
    }
}

/* R rows (1 or 4) x T tokens (1..3) over the k block [c0, c0 + len), len a
 * multiple of 32; w at that block of row 0, rb bytes per row. The same
 * accumulation and reduction as tile_f32 on the converted weights. */
INLINE void tile_q8(float *Y, int64_t ldy, const float *X, int64_t ldx, const uint8_t *w, int64_t rb,
                    int64_t c0, int64_t len, const int R, const int T, const int pf) {
    __m256 acc[4][3];
    UNROLL for (int r = 0; r < R; r++)
        UNROLL for (int t = 0; t < T; t++) acc[r][t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < len; i += qw_type(QW_Q8_0)->block) {
        const uint8_t *b[4];
        __m256 d[4];
        UNROLL for (int r = 0; r < R; r++) {
            b[r] = w + r * rb + i / qw_type(QW_Q8_0)->block * qw_type(QW_Q8_0)->bytes;
            if (pf == 1) _mm_prefetch((const char *)b[r] + PF_DIST_Q8, _MM_HINT_T0);
            d[r] = scale8_q8(b[r]);
        }
        if (pf == 2) { /* short rows: the next 4-row group (contiguous), in step with this one */
            const char *nx = (const char *)w + 4 * rb + 4 * (i / qw_type(QW_Q8_0)->block * qw_type(QW_Q8_0)->bytes);
            _mm_prefetch(nx, _MM_HINT_T0);
            _mm_prefetch(nx + 64, _MM_HINT_T0);
            _mm_prefetch(nx + 128, _MM_HINT_T0);
        }
        UNROLL for (int s = 0; s < 4; s++) {
            __m256 xv[3];
            UNROLL for (int t = 0; t < T; t++) xv[t] = _mm256_loadu_ps(X + t * ldx + i + 8 * s);
            UNROLL for (int r = 0; r < R; r++) {
                __m256 wv = ld8_q8(b[r] + 2 + 8 * s, d[r]);
                UNROLL for (int t = 0; t < T; t++) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
            }
        }
    }
    UNROLL for (int t = 0; t < T; t++) {
        float out[4];
        if (R == 4)
            _mm_storeu_ps(out, hsum4x8(acc[0][t], acc[1][t], acc[2][t], acc[3][t]));
        else
            out[0] = _mm_cvtss_f32(hsum4x8(acc[0][t], acc[0][t], acc[0][t], acc[0][t]));
        UNROLL for (int r = 0; r < R; r++) Y[t * ldy + r] = c0 > 0 ? Y[t * ldy + r] + out[r] : out[r];
    }
}

/* pf as in TILE: 1 prefetch ahead in each row, 2 the next group (short rows);
 * only the first token tile of a group prefetches (the rest hit L1). */
static void rows_q8(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t t0, int64_t t1,
                    const uint8_t *w, int64_t rb, int64_t o, int64_t c0, int64_t len, int R, int pf) {
    for (int64_t t = t0; t < t1; t += 3) {
        int T = t1 - t < 3 ? (int)(t1 - t) : 3;
        const float *x = X + t * ldx + c0;
        float *y = Y + t * ldy + o;
        if (R == 4) {
            if (t == t0 && pf == 2) {
                if (T == 3) tile_q8(y, ldy, x, ldx, w, rb, c0, len, 4, 3, 2);
                else if (T == 2) tile_q8(y, ldy, x, ldx, w, rb, c0, len, 4, 2, 2);
                else tile_q8(y, ldy, x, ldx, w, rb, c0, len, 4, 1, 2);
            } else if (t == t0) {
                if (T == 3) tile_q8(y, ldy, x, ldx, w, rb, c0, len, 4, 3, 1);
                else if (T == 2) tile_q8(y, ldy, x, ldx, w, rb, c0, len, 4, 2, 1);
                else tile_q8(y, ldy, x, ldx, w, rb, c0, len, 4, 1, 1);
            } else {
                if (T == 3) tile_q8(y, ldy, x, ldx, w, rb, c0, len, 4, 3, 0);
                else if (T == 2) tile_q8(y, ldy, x, ldx, w, rb, c0, len, 4, 2, 0);
                else tile_q8(y, ldy, x, ldx, w, rb, c0, len, 4, 1, 0);
            }
        } else {
            if (T == 3) tile_q8(y, ldy, x, ldx, w, rb, c0, len, 1, 3, 0);
            else if (T == 2) tile_q8(y, ldy, x, ldx, w, rb, c0, len, 1, 2, 0);
            else tile_q8(y, ldy, x, ldx, w, rb, c0, len, 1, 1, 0);
        }
    }
}

static void matmul_q8_0_avx2(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W,
                             int64_t k, int64_t o0, int64_t o1) {
    if (k == 0) {
        for (int64_t t = 0; t < n; t++)
            for (int64_t o = o0; o < o1; o++) Y[t * ldy + o] = 0.0f;
        return;
    }
    if (n > SMALL_N) {
        matmul_prefill(Y, ldy, X, ldx, n, W, k, o0, o1, QW_Q8_0, conv_q8_0);
        return;
    }
    const uint8_t *w = W;
    const int64_t rb = k / qw_type(QW_Q8_0)->block * qw_type(QW_Q8_0)->bytes;
    const int pf = 4 * rb <= PF_NEAR ? 2 : 1;
    for (int64_t o = o0; o < o1;) {
        int R = o + 4 <= o1 ? 4 : 1;
        /* pf 2 reads ahead into the next group: only if it is in the range */
        int p = pf == 2 && o + 8 > o1 ? 0 : pf;
        for (int64_t c0 = 0; c0 < k; c0 += KC) {
            int64_t len = k - c0 < KC ? k - c0 : KC;
            rows_q8(Y, ldy, X, ldx, 0, n, w + o * rb + c0 / qw_type(QW_Q8_0)->block * qw_type(QW_Q8_0)->bytes, rb, o, c0, len, R, p);
        }
        o += R;
    }
}

static void to_f32_q8_0_avx2(float *y, const void *x, int64_t n) { conv_q8_0(y, x, n, NULL); }

/* ==== 4/5/6-bit block types: Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K ====
 * One conv_<type> per type writes a k block of one row as float32, each
 * weight the reference's float32 expression (src/kernels/matmul/matmul_ref.c): the
 * products are exact (binary16 scales x small integers), so the fused
 * multiply-adds below round once, exactly like the reference's
 * multiply-then-add, and to_f32 agrees with the reference (and gguf) bit for
 * bit. The matmul always goes through matmul_prefill, for every n (decode
 * included): one code path for all n makes batch invariance automatic, and
 * the result is the f32 matmul of the dequantized weights bit for bit
 * (tests/kernels/test_kquant.c checks all three).
 * nx (the same columns of the row 4 below, or NULL) is prefetched into L2 a
 * cache line per 64 bytes of blocks, as conv_q8_0 does. Decode (n = 1) is
 * bound by the conversion, not by memory: a 128 MB matrix from DRAM converts
 * at the rate of one in L1 (one Zen 3 core: 5-9 G weights/s by type), so
 * matmul_prefill and its prefetch are unchanged. */

/* Q6_K's quants are unpacked 32 at a time as bytes (shifts and masks),
 * then widened 8 at a time: dst[0..8) = d * q (exact). (Widening from memory
 * as the other types do measured slower for Q6_K: 6.4 against 9.2 G
 * weights/s to_f32, its 6 bits come from three loads.) */
INLINE void emit8_mul(float *dst, __m128i q8, __m256 d) {
    _mm256_storeu_ps(dst, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8))));
}
/* 16 int8 quants (one xmm) -> 16 floats */
INLINE void emit16_mul(float *dst, __m128i q, __m256 d) {
    emit8_mul(dst, q, d);
    emit8_mul(dst + 8, _mm_srli_si128(q, 8), d);
}

/* The other types: 8 quant bytes at p widened straight from memory
 * (vpmovzxbd m64, which keeps the shuffle unit free: measured Q4_0 to_f32
 * 9.0 -> 15.0 G weights/s against unpacking 32 as bytes first), as the low
 * nibbles and the high nibbles, 2 x 8 int32. */
INLINE void nib16(const uint8_t *p, __m256i *lo, __m256i *hi) {
    __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
    *lo = _mm256_and_si256(v, _mm256_set1_epi32(15));
    *hi = _mm256_srli_epi32(v, 4);
}

/* Prefetch the lines of [off, off + bytes) of the next group's row. */
INLINE void pf_next(const char *nx, int64_t off, int bytes) {
    if (!nx) return;
    for (int o = 0; o < bytes; o += 64) _mm_prefetch(nx + off + o, _MM_HINT_T1);
}

static void conv_q4_0(float *dst, const char *src, int64_t len, const char *nx) {
    const uint8_t *b = (const uint8_t *)src;
    const __m256i eight = _mm256_set1_epi32(8);
    const int bytes = qw_type(QW_Q4_0)->bytes;
    for (int64_t j = 0; j < len; j += 32, b += bytes) {
        if ((j & 63) == 0) pf_next(nx, j / 32 * bytes, 64);
        __m256 d = _mm256_set1_ps(qw_f16_at_f16c(b));
        UNROLL for (int g = 0; g < 2; g++) {
            __m256i lo, hi;
            nib16(b + 2 + 8 * g, &lo, &hi);
            _mm256_storeu_ps(dst + j + 8 * g, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_sub_epi32(lo, eight))));
            _mm256_storeu_ps(dst + j + 16 + 8 * g, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_sub_epi32(hi, eight))));
        }
    }
}

static void conv_q4_1(float *dst, const char *src, int64_t len, const char *nx) {
    const uint8_t *b = (const uint8_t *)src;
    const int bytes = qw_type(QW_Q4_1)->bytes;
    for (int64_t j = 0; j < len; j += 32, b += bytes) {
        if ((j & 63) == 0) pf_next(nx, j / 32 * bytes, 64);
        __m256 d = _mm256_set1_ps(qw_f16_at_f16c(b)), m = _mm256_set1_ps(qw_f16_at_f16c(b + 2));
        UNROLL for (int g = 0; g < 2; g++) {
            __m256i lo, hi;
            nib16(b + 4 + 8 * g, &lo, &hi);
            _mm256_storeu_ps(dst + j + 8 * g, _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lo), m));
            _mm256_storeu_ps(dst + j + 16 + 8 * g, _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(hi), m));
        }
    }
}

/* Q5_0 / Q5_1: for weights j0 .. j0 + 7, 0 where bit j of qh is set and
 * -16 where it is not (so lo + hneg = q - 16; Q5_1 adds 16 back). */
INLINE __m256i hneg8(__m256i qhv, int j0) {
    __m256i bit = _mm256_sllv_epi32(_mm256_set1_epi32(1),
                                    _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(j0)));
    __m256i clear = _mm256_cmpeq_epi32(_mm256_and_si256(qhv, bit), _mm256_setzero_si256());
    return _mm256_and_si256(clear, _mm256_set1_epi32(-16));
}

static void conv_q5_0(float *dst, const char *src, int64_t len, const char *nx) {
    const uint8_t *b = (const uint8_t *)src;
    const int bytes = qw_type(QW_Q5_0)->bytes;
    for (int64_t j = 0; j < len; j += 32, b += bytes) {
        if ((j & 63) == 0) pf_next(nx, j / 32 * bytes, 64);
        __m256 d = _mm256_set1_ps(qw_f16_at_f16c(b));
        uint32_t qh;
        memcpy(&qh, b + 2, 4);
        __m256i qhv = _mm256_set1_epi32((int)qh);
        UNROLL for (int g = 0; g < 2; g++) {
            __m256i lo, hi;
            nib16(b + 6 + 8 * g, &lo, &hi);
            lo = _mm256_add_epi32(lo, hneg8(qhv, 8 * g));
            hi = _mm256_add_epi32(hi, hneg8(qhv, 16 + 8 * g));
            _mm256_storeu_ps(dst + j + 8 * g, _mm256_mul_ps(d, _mm256_cvtepi32_ps(lo)));
            _mm256_storeu_ps(dst + j + 16 + 8 * g, _mm256_mul_ps(d, _mm256_cvtepi32_ps(hi)));
        }
    }
}

static void conv_q5_1(float *dst, const char *src, int64_t len, const char *nx) {
    const uint8_t *b = (const uint8_t *)src;
    const __m256i k16 = _mm256_set1_epi32(16);
    const int bytes = qw_type(QW_Q5_1)->bytes;
    for (int64_t j = 0; j < len; j += 32, b += bytes) {
        if ((j & 63) == 0) pf_next(nx, j / 32 * bytes, 64);
        __m256 d = _mm256_set1_ps(qw_f16_at_f16c(b)), m = _mm256_set1_ps(qw_f16_at_f16c(b + 2));
        uint32_t qh;
        memcpy(&qh, b + 4, 4);
        __m256i qhv = _mm256_set1_epi32((int)qh);
        UNROLL for (int g = 0; g < 2; g++) {
            __m256i lo, hi;
            nib16(b + 8 + 8 * g, &lo, &hi);
            lo = _mm256_add_epi32(lo, _mm256_add_epi32(hneg8(qhv, 8 * g), k16));
            hi = _mm256_add_epi32(hi, _mm256_add_epi32(hneg8(qhv, 16 + 8 * g), k16));
            _mm256_storeu_ps(dst + j + 8 * g, _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lo), m));
            _mm256_storeu_ps(dst + j + 16 + 8 * g, _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(hi), m));
        }
    }
}

/* Q4_K / Q5_K: the 32 bytes qs[32 c ..] hold sub-blocks 2c (low nibbles)
 * and 2c + 1 (high); sub-block s: (d * sc) * q - dmin * mn, the two scalar
 * products as the reference computes them (exact). Q5_K's bit 4 of weight l
 * of sub-block s is bit s of qh[l]. */
static void conv_q4_k(float *dst, const char *src, int64_t len, const char *nx) {
    const uint8_t *b = (const uint8_t *)src;
    const int bytes = qw_type(QW_Q4_K)->bytes;
    for (int64_t j = 0; j < len; j += 256, b += bytes) {
        pf_next(nx, j / 256 * bytes, bytes);
        float d = qw_f16_at_f16c(b), dmin = qw_f16_at_f16c(b + 2);
        for (int c = 0; c < 4; c++) {
            int sc0, mn0, sc1, mn1;
            qw_kquant_scale_min(b + 4, 2 * c, &sc0, &mn0);
            qw_kquant_scale_min(b + 4, 2 * c + 1, &sc1, &mn1);
            __m256 ds0 = _mm256_set1_ps(d * (float)sc0), dm0 = _mm256_set1_ps(dmin * (float)mn0);
            __m256 ds1 = _mm256_set1_ps(d * (float)sc1), dm1 = _mm256_set1_ps(dmin * (float)mn1);
            float *o = dst + j + 64 * c;
            UNROLL for (int l = 0; l < 32; l += 8) {
                __m256i lo, hi;
                nib16(b + 16 + 32 * c + l, &lo, &hi);
                _mm256_storeu_ps(o + l, _mm256_fmsub_ps(ds0, _mm256_cvtepi32_ps(lo), dm0));
                _mm256_storeu_ps(o + 32 + l, _mm256_fmsub_ps(ds1, _mm256_cvtepi32_ps(hi), dm1));
            }
        }
    }
}

static void conv_q5_k(float *dst, const char *src, int64_t len, const char *nx) {
    const uint8_t *b = (const uint8_t *)src;
    const __m256i k16 = _mm256_set1_epi32(16);
    const int bytes = qw_type(QW_Q5_K)->bytes;
    for (int64_t j = 0; j < len; j += 256, b += bytes) {
        pf_next(nx, j / 256 * bytes, bytes);
        float d = qw_f16_at_f16c(b), dmin = qw_f16_at_f16c(b + 2);
        const uint8_t *qh = b + 16;
        for (int c = 0; c < 4; c++) {
            int sc0, mn0, sc1, mn1;
            qw_kquant_scale_min(b + 4, 2 * c, &sc0, &mn0);
            qw_kquant_scale_min(b + 4, 2 * c + 1, &sc1, &mn1);
            __m256 ds0 = _mm256_set1_ps(d * (float)sc0), dm0 = _mm256_set1_ps(dmin * (float)mn0);
            __m256 ds1 = _mm256_set1_ps(d * (float)sc1), dm1 = _mm256_set1_ps(dmin * (float)mn1);
            __m128i s0 = _mm_cvtsi32_si128(2 * c), s1 = _mm_cvtsi32_si128(2 * c + 1);
            float *o = dst + j + 64 * c;
            UNROLL for (int l = 0; l < 32; l += 8) {
                __m256i lo, hi;
                nib16(b + 48 + 32 * c + l, &lo, &hi);
                __m256i h = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(qh + l)));
                lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi32(_mm256_srl_epi32(h, s0), 4), k16));
                hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi32(_mm256_srl_epi32(h, s1), 4), k16));
                _mm256_storeu_ps(o + l, _mm256_fmsub_ps(ds0, _mm256_cvtepi32_ps(lo), dm0));
                _mm256_storeu_ps(o + 32 + l, _mm256_fmsub_ps(ds1, _mm256_cvtepi32_ps(hi), dm1));
            }
        }
    }
}

/* Q6_K: half h (128 weights): ql[64 h ..] (v0, v1: 32 bytes each) and
 * qh[32 h ..] (H): weights 0..31 = v0 low | H bits 0-1, 32..63 = v1 low |
 * bits 2-3, 64..95 = v0 high | bits 4-5, 96..127 = v1 high | bits 6-7, each
 * q - 32; weight p's scale (d * sc[p / 16]) as the reference computes it. */
static void conv_q6_k(float *dst, const char *src, int64_t len, const char *nx) {
    const uint8_t *b = (const uint8_t *)src;
    const __m256i m15 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30), k32 = _mm256_set1_epi8(32);
    const int bytes = qw_type(QW_Q6_K)->bytes;
    for (int64_t j = 0; j < len; j += 256, b += bytes) {
        pf_next(nx, j / 256 * bytes, bytes);
        const int8_t *sc = (const int8_t *)(b + 192);
        float d = qw_f16_at_f16c(b + 208);
        for (int h = 0; h < 2; h++) {
            __m256i v0 = _mm256_loadu_si256((const __m256i *)(b + 64 * h));
            __m256i v1 = _mm256_loadu_si256((const __m256i *)(b + 64 * h + 32));
            __m256i H = _mm256_loadu_si256((const __m256i *)(b + 128 + 32 * h));
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(v0, m15), _mm256_and_si256(_mm256_slli_epi16(H, 4), m30));
            q[1] = _mm256_or_si256(_mm256_and_si256(v1, m15), _mm256_and_si256(_mm256_slli_epi16(H, 2), m30));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v0, 4), m15), _mm256_and_si256(H, m30));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v1, 4), m15),
                                   _mm256_and_si256(_mm256_srli_epi16(H, 2), m30));
            float *o = dst + j + 128 * h;
            const int8_t *s = sc + 8 * h;
            UNROLL for (int g = 0; g < 4; g++) {
                __m256i qq = _mm256_sub_epi8(q[g], k32);
                emit16_mul(o + 32 * g, _mm256_castsi256_si128(qq), _mm256_set1_ps(d * (float)s[2 * g]));
                emit16_mul(o + 32 * g + 16, _mm256_extracti128_si256(qq, 1), _mm256_set1_ps(d * (float)s[2 * g + 1]));
            }
        }
    }
}

/* Each block type's exact converter, by type: this level's to_f32 and the
 * feed of its prefill tiles, and (kernels_impl.h) the avx512 level's, so
 * that each level's block-type matmul is its own f32 matmul of the
 * converted weights. */
const qw_conv_fn kernels_conv_avx2[QW_DTYPE_COUNT] = {
    [QW_F16] = conv_f16,   [QW_BF16] = conv_bf16, [QW_Q8_0] = conv_q8_0, [QW_Q4_0] = conv_q4_0,
    [QW_Q4_1] = conv_q4_1, [QW_Q5_0] = conv_q5_0, [QW_Q5_1] = conv_q5_1, [QW_Q4_K] = conv_q4_k,
    [QW_Q5_K] = conv_q5_k, [QW_Q6_K] = conv_q6_k,
};

/* The 4/5/6-bit types: always matmul_prefill (see the section's head). */
static void matmul_blocks(qw_dtype dt, float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W,
                          int64_t k, int64_t o0, int64_t o1) {
    if (k == 0) {
        for (int64_t t = 0; t < n; t++)
            for (int64_t o = o0; o < o1; o++) Y[t * ldy + o] = 0.0f;
        return;
    }
    matmul_prefill(Y, ldy, X, ldx, n, W, k, o0, o1, dt, kernels_conv_avx2[dt]);
}

static void to_f32_blocks(qw_dtype dt, float *y, const void *x, int64_t n) { kernels_conv_avx2[dt](y, x, n, NULL); }

static void matmul_q4_0_avx2(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, int64_t k,
                             int64_t o0, int64_t o1) {
    matmul_blocks(QW_Q4_0, Y, ldy, X, ldx, n, W, k, o0, o1);
}
static void to_f32_q4_0_avx2(float *y, const void *x, int64_t n) { to_f32_blocks(QW_Q4_0, y, x, n); }
static void matmul_q4_1_avx2(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, int64_t k,
                             int64_t o0, int64_t o1) {
    matmul_blocks(QW_Q4_1, Y, ldy, X, ldx, n, W, k, o0, o1);
}
static void to_f32_q4_1_avx2(float *y, const void *x, int64_t n) { to_f32_blocks(QW_Q4_1, y, x, n); }
static void matmul_q5_0_avx2(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, int64_t k,
                             int64_t o0, int64_t o1) {
    matmul_blocks(QW_Q5_0, Y, ldy, X, ldx, n, W, k, o0, o1);
}
static void to_f32_q5_0_avx2(float *y, const void *x, int64_t n) { to_f32_blocks(QW_Q5_0, y, x, n); }
static void matmul_q5_1_avx2(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, int64_t k,
                             int64_t o0, int64_t o1) {
    matmul_blocks(QW_Q5_1, Y, ldy, X, ldx, n, W, k, o0, o1);
}
static void to_f32_q5_1_avx2(float *y, const void *x, int64_t n) { to_f32_blocks(QW_Q5_1, y, x, n); }
static void matmul_q4_k_avx2(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, int64_t k,
                             int64_t o0, int64_t o1) {
    matmul_blocks(QW_Q4_K, Y, ldy, X, ldx, n, W, k, o0, o1);
}
static void to_f32_q4_k_avx2(float *y, const void *x, int64_t n) { to_f32_blocks(QW_Q4_K, y, x, n); }
static void matmul_q5_k_avx2(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, int64_t k,
                             int64_t o0, int64_t o1) {
    matmul_blocks(QW_Q5_K, Y, ldy, X, ldx, n, W, k, o0, o1);
}
static void to_f32_q5_k_avx2(float *y, const void *x, int64_t n) { to_f32_blocks(QW_Q5_K, y, x, n); }
static void matmul_q6_k_avx2(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, int64_t k,
                             int64_t o0, int64_t o1) {
    matmul_blocks(QW_Q6_K, Y, ldy, X, ldx, n, W, k, o0, o1);
}
static void to_f32_q6_k_avx2(float *y, const void *x, int64_t n) { to_f32_blocks(QW_Q6_K, y, x, n); }

/* qw_quantize_q8_0 in 8 lanes, the same float operations: max |x| (max is
 * exact, any order), d = amax / 127, id = 1 / d, q = round half away from
 * zero of x * id (trunc, then +-1 when the exact remainder reaches 0.5). */
static void quantize_q8_0_avx2(void *dst, const float *x, int64_t n) {
    uint8_t *out = dst;
    const __m256 sign = _mm256_set1_ps(-0.0f), half = _mm256_set1_ps(0.5f), mhalf = _mm256_set1_ps(-0.5f);
    for (int64_t b = 0; b + qw_type(QW_Q8_0)->block <= n; b += qw_type(QW_Q8_0)->block, out += qw_type(QW_Q8_0)->bytes) {
        __m256 v[4], m = _mm256_setzero_ps();
        UNROLL for (int s = 0; s < 4; s++) {
            v[s] = _mm256_loadu_ps(x + b + 8 * s);
            m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[s]));
        }
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h = _mm_max_ss(h, _mm_movehdup_ps(h));
        float amax = _mm_cvtss_f32(h);
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        uint16_t hd = qw_f32_to_f16(d);
        memcpy(out, &hd, sizeof hd);
        __m256 idv = _mm256_set1_ps(id);
        __m256i q[4];
        UNROLL for (int s = 0; s < 4; s++) {
            __m256 p = _mm256_mul_ps(v[s], idv);
            __m256 t = _mm256_round_ps(p, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
            __m256 f = _mm256_sub_ps(p, t);
            __m256i up = _mm256_castps_si256(_mm256_cmp_ps(f, half, _CMP_GE_OQ));   /* -1 where f >= 0.5 */
            __m256i dn = _mm256_castps_si256(_mm256_cmp_ps(f, mhalf, _CMP_LE_OQ));  /* -1 where f <= -0.5 */
            q[s] = _mm256_add_epi32(_mm256_sub_epi32(_mm256_cvttps_epi32(t), up), dn);
        }
        /* 32 int32 -> 32 int8 in order: packs work per 128-bit lane, permute back */
        __m256i a = _mm256_packs_epi32(q[0], q[1]), c = _mm256_packs_epi32(q[2], q[3]);
        __m256i bytes = _mm256_packs_epi16(a, c);
        bytes = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(out + 2), bytes);
    }
}

/* ---- conversions ---- */
static void to_f32_bf16_avx2(float *y, const void *x, int64_t n) {
    const uint16_t *h = x;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, ld8_bf16(h + i));
    for (; i < n; i++) y[i] = qw_bf16_to_f32(h[i]);
}

static void to_f32_f16_avx2(float *y, const void *x, int64_t n) {
    const uint16_t *h = x;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, ld8_f16(h + i));
    for (; i < n; i++) y[i] = qw_f16_to_f32(h[i]);
}

/* ---- vector kernels ---- */
/* The level's matmul entries (the ones it accelerates; init.c lays them over
 * the reference). */
const qw_kernels kernels_matmul_avx2 = {
    .matmul =
        {
            [QW_F32] = matmul_f32_avx2,
            [QW_F16] = matmul_f16_avx2,
            [QW_BF16] = matmul_bf16_avx2,
            [QW_Q8_0] = matmul_q8_0_avx2,
            [QW_Q4_0] = matmul_q4_0_avx2,
            [QW_Q4_1] = matmul_q4_1_avx2,
            [QW_Q5_0] = matmul_q5_0_avx2,
            [QW_Q5_1] = matmul_q5_1_avx2,
            [QW_Q4_K] = matmul_q4_k_avx2,
            [QW_Q5_K] = matmul_q5_k_avx2,
            [QW_Q6_K] = matmul_q6_k_avx2,
        },
    .to_f32 =
        {
            [QW_F16] = to_f32_f16_avx2,
            [QW_BF16] = to_f32_bf16_avx2,
            [QW_Q8_0] = to_f32_q8_0_avx2,
            [QW_Q4_0] = to_f32_q4_0_avx2,
            [QW_Q4_1] = to_f32_q4_1_avx2,
            [QW_Q5_0] = to_f32_q5_0_avx2,
            [QW_Q5_1] = to_f32_q5_1_avx2,
            [QW_Q4_K] = to_f32_q4_k_avx2,
            [QW_Q5_K] = to_f32_q5_k_avx2,
            [QW_Q6_K] = to_f32_q6_k_avx2,
        },
    .quantize_q8_0 = quantize_q8_0_avx2,
};

#endif
