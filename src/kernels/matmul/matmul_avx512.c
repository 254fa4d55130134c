/* matmul_avx512.c - the float-activation matmul and to_f32 with AVX-512
 * (x86-64: F, BW, VL, DQ, exactly what
 * the Makefile builds this file with and cpu.c gates the level on; VNNI or
 * BF16 kernels would go into files of their own, *_avx512vnni.c ...).
 *
 * Same algorithms as matmul_avx2.c, 16 floats per vector, with AVX-512
 * masks for every tail (masked loads read nothing outside the mask, so no
 * scalar tails and no over-reads):
 *  - matmul: batch invariant (see the matmul section); n == 1 runs the 4-row
 *    x 1-token tile with the AVX2 prefetch policy (next 4-row block for
 *    short rows); n <= SMALL_N converts the weights in registers for a
 *    4-row x up-to-6-token tile (24 accumulators of 16 floats, 29 of the 32
 *    zmm registers); larger n converts each 4-row x KC block once to float32
 *    on the stack (bf16: zero-extend and shift; f16: vcvtph2ps).
 * Activations are never rounded to bf16 here (the exact path); the fast
 * precision's vdpbf16ps kernel is bf16act_avx512bf16.c.
 * The checker (tests/kernels/test_kernels.c) runs it wherever the CPU has it.
 */
#include "kernels/kernels_impl.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 8")

/* Mask of the first m (0..16) lanes. */
INLINE __mmask16 lanes(int64_t m) { return m >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << m) - 1u); }

/* 16 weights -> 16 floats; masked variants load only the first lanes. */
INLINE __m512 ld16_f32(const float *p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
INLINE __m512 ld16_bf16(const uint16_t *p, __mmask16 m) {
    __m512i v = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}
INLINE __m512 ld16_f16(const uint16_t *p, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}
/* Elements [i, i + 16) (lanes m) of a row of 16/32-bit weights at w, by
 * type DT (F32, F16, BF16: a constant in every specialised caller). */
INLINE int64_t esize(int DT) { return qw_type((qw_dtype)DT)->bytes; }
INLINE __m512 ld16(int DT, const char *w, int64_t i, __mmask16 m) {
    const char *p = w + i * esize(DT);
    return DT == QW_F32   ? ld16_f32((const float *)p, m)
           : DT == QW_F16 ? ld16_f16((const uint16_t *)p, m)
                          : ld16_bf16((const uint16_t *)p, m);
}

/* {sum(a), sum(b), sum(c), sum(d)} */
INLINE __m128 hsum4x16(__m512 a, __m512 b, __m512 c, __m512 d) {
    __m256 a8 = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
    __m256 b8 = _mm256_add_ps(_mm512_castps512_ps256(b), _mm512_extractf32x8_ps(b, 1));
    __m256 c8 = _mm256_add_ps(_mm512_castps512_ps256(c), _mm512_extractf32x8_ps(c, 1));
    __m256 d8 = _mm256_add_ps(_mm512_castps512_ps256(d), _mm512_extractf32x8_ps(d, 1));
    __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(a8, b8), _mm256_hadd_ps(c8, d8));
    return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

/* ---- matmul ----
 * Batch invariance, as in matmul_avx2.c: every Y[t][o] is computed by the
 * same operations in the same order whatever n, the tile it lands in, its
 * position in the tile and the o0/o1 split:
 *  - k is cut into blocks of KC columns; within a block one 16-lane
 *    accumulator per (o, t) takes one FMA per 16 columns in column order
 *    (the last, partial, step masked: the masked-off lanes add 0 * 0);
 *  - the accumulator is reduced by hsum4x16 (lane r depends only on input
 *    r: a 1-row tile gives the same bits as a 4-row tile);
 *  - the block sum is stored (first block) or added to Y.
 * Weights are converted in registers straight from the mapping (n small)
 * or first into a float32 buffer (prefill); both conversions are exact. */
enum { PF_DIST = 1024, PF_NEAR = 16 * 1024, L2_BLOCK = 512 * 1024, KC = 512, SMALL_N = 8 };

/* One 16-column step at column i (lanes m) of every (row, token)
 * accumulator of an R-row x T-token tile of type DT: w and X point at
 * column c0 of row 0 / token 0 (weight row stride ws elements). pf: 0 no
 * software prefetch, 1 PF_DIST ahead in each row, 2 the next R-row block
 * in step with this one (short rows). */
INLINE void step(int DT, __m512 acc[4][6], const float *X, int64_t ldx, const char *w, int64_t ws, int64_t c0, int64_t i,
                 __mmask16 m, const int R, const int T, const int pf) {
    if (pf == 1 && (i & 31) == 0) {
        UNROLL for (int r = 0; r < R; r++) _mm_prefetch(w + (r * ws + i) * esize(DT) + PF_DIST, _MM_HINT_T0);
    } else if (pf == 2) {
        const char *nx = w + (R * ws + (R - 1) * c0 + R * i) * esize(DT);
        for (int64_t q = 0; q < R * 16 * esize(DT); q += 64) _mm_prefetch(nx + q, _MM_HINT_T0);
    }
    __m512 wv[4];
    UNROLL for (int r = 0; r < R; r++) wv[r] = ld16(DT, w, r * ws + i, m);
    UNROLL for (int t = 0; t < T; t++) {
        __m512 xv = _mm512_maskz_loadu_ps(m, X + t * ldx + i);
        UNROLL for (int r = 0; r < R; r++) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
    }
}

/* R rows (1 or 4) x T tokens (1..6) over the k block [c0, c0 + len), Y at
 * (token 0, row 0). 24 accumulators + 4 weights + x fit in the 32 zmm
 * registers. */
INLINE void tile(int DT, float *Y, int64_t ldy, const float *X, int64_t ldx, const char *w, int64_t ws, int64_t c0,
                 int64_t len, const int R, const int T, const int pf) {
    __m512 acc[4][6];
    UNROLL for (int r = 0; r < R; r++)
        UNROLL for (int t = 0; t < T; t++) acc[r][t] = _mm512_setzero_ps();
    /* whole 16-column steps unmasked, then at most one masked step: the
     * same FMAs as masking every step (a full mask loads every lane) */
    int64_t i = 0;
    for (; i + 16 <= len; i += 16) step(DT, acc, X, ldx, w, ws, c0, i, (__mmask16)0xffff, R, T, pf);
    if (i < len) step(DT, acc, X, ldx, w, ws, c0, i, lanes(len - i), R, T, pf);
    UNROLL for (int t = 0; t < T; t++) {
        float out[4];
        if (R == 4)
            _mm_storeu_ps(out, hsum4x16(acc[0][t], acc[1][t], acc[2][t], acc[3][t]));
        else
            out[0] = _mm_cvtss_f32(hsum4x16(acc[0][t], acc[0][t], acc[0][t], acc[0][t]));
        UNROLL for (int r = 0; r < R; r++) Y[t * ldy + r] = c0 > 0 ? Y[t * ldy + r] + out[r] : out[r];
    }
}

/* A 4-row tile of T tokens, pf a constant in each instance (no branch in
 * the k loop). */
INLINE void tile4_pf(int DT, float *Y, int64_t ldy, const float *X, int64_t ldx, const char *w, int64_t ws, int64_t c0,
                     int64_t len, const int T, int pf) {
    if (pf == 2) tile(DT, Y, ldy, X, ldx, w, ws, c0, len, 4, T, 2);
    else if (pf == 1) tile(DT, Y, ldy, X, ldx, w, ws, c0, len, 4, T, 1);
    else tile(DT, Y, ldy, X, ldx, w, ws, c0, len, 4, T, 0);
}

/* Rows [o, o + R) x tokens [t0, t1) x k block [c0, c0 + len) of type DT;
 * w at column c0 of row o. The first token group streams the weights
 * (prefetch); later ones hit L1. */
INLINE void rows(int DT, float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t t0, int64_t t1, const char *w,
                 int64_t ws, int64_t o, int64_t c0, int64_t len, int R, int pf) {
    for (int64_t t = t0; t < t1; t += 6) {
        int T = t1 - t < 6 ? (int)(t1 - t) : 6, p = t == t0 ? pf : 0;
        const float *x = X + t * ldx + c0;
        float *y = Y + t * ldy + o;
        if (R == 4) {
            switch (T) {
            case 6: tile4_pf(DT, y, ldy, x, ldx, w, ws, c0, len, 6, p); break;
            case 5: tile4_pf(DT, y, ldy, x, ldx, w, ws, c0, len, 5, p); break;
            case 4: tile4_pf(DT, y, ldy, x, ldx, w, ws, c0, len, 4, p); break;
            case 3: tile4_pf(DT, y, ldy, x, ldx, w, ws, c0, len, 3, p); break;
            case 2: tile4_pf(DT, y, ldy, x, ldx, w, ws, c0, len, 2, p); break;
            default: tile4_pf(DT, y, ldy, x, ldx, w, ws, c0, len, 1, p); break;
            }
        } else {
            switch (T) {
            case 6: tile(DT, y, ldy, x, ldx, w, ws, c0, len, 1, 6, 0); break;
            case 5: tile(DT, y, ldy, x, ldx, w, ws, c0, len, 1, 5, 0); break;
            case 4: tile(DT, y, ldy, x, ldx, w, ws, c0, len, 1, 4, 0); break;
            case 3: tile(DT, y, ldy, x, ldx, w, ws, c0, len, 1, 3, 0); break;
            case 2: tile(DT, y, ldy, x, ldx, w, ws, c0, len, 1, 2, 0); break;
            default: tile(DT, y, ldy, x, ldx, w, ws, c0, len, 1, 1, 0); break;
            }
        }
    }
}

/* One instance per weight type (the block types' tiles use rows_f32). */
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

/* The 16/32-bit types: tokens in L2-sized blocks; for each 4-row x KC
 * block the weights are read from the mapping once: n <= SMALL_N (and f32)
 * converts them in registers (a 4 x 6 tile covers 6 tokens per pass),
 * larger n converts them once into a float32 buffer reused by every token
 * of the block. */
INLINE void matmul_elem(int DT, float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, int64_t k,
                        int64_t o0, int64_t o1) {
    const char *w = W;
    if (k == 0) { /* empty sums: the k-block loop below would not store */
        for (int64_t t = 0; t < n; t++)
            for (int64_t o = o0; o < o1; o++) Y[t * ldy + o] = 0.0f;
        return;
    }
    float wbuf[4 * KC];
    const int direct = DT == QW_F32 || n <= SMALL_N;
    const int pf = 4 * k * esize(DT) <= PF_NEAR ? 2 : 1;
    int64_t nb = L2_BLOCK / (k * 4);
    nb = nb < 6 ? 6 : nb - nb % 6;
    for (int64_t t0 = 0; t0 < n; t0 += nb) {
        int64_t t1 = t0 + nb < n ? t0 + nb : n;
        for (int64_t o = o0; o < o1;) {
            int R = o + 4 <= o1 ? 4 : 1;
            for (int64_t c0 = 0; c0 < k; c0 += KC) {
                int64_t len = k - c0 < KC ? k - c0 : KC;
                if (direct) {
                    const char *wb = w + (o * k + c0) * esize(DT);
                    if (DT == QW_F32) rows_f32(Y, ldy, X, ldx, t0, t1, (const float *)wb, k, o, c0, len, R, pf);
                    else if (DT == QW_F16) rows_f16(Y, ldy, X, ldx, t0, t1, wb, k, o, c0, len, R, pf);
                    else rows_bf16(Y, ldy, X, ldx, t0, t1, wb, k, o, c0, len, R, pf);
                    continue;
                }
                for (int r = 0; r < R; r++) {
                    const char *src = w + ((o + r) * k + c0) * esize(DT);
                    for (int64_t j = 0; j < len; j += 16) {
                        __mmask16 m = lanes(len - j);
                        _mm_prefetch(src + j * esize(DT) + PF_DIST, _MM_HINT_T0);
                        _mm512_mask_storeu_ps(wbuf + r * KC + j, m, ld16(DT, src, j, m));
                    }
                }
                rows_f32(Y, ldy, X, ldx, t0, t1, wbuf, KC, o, c0, len, R, 0);
            }
            o += R;
        }
    }
}

static void matmul_f32_avx512(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, int64_t k,
                              int64_t o0, int64_t o1) {
    matmul_elem(QW_F32, Y, ldy, X, ldx, n, W, k, o0, o1);
}
static void matmul_f16_avx512(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W, int64_t k,
                              int64_t o0, int64_t o1) {
    matmul_elem(QW_F16, Y, ldy, X, ldx, n, W, k, o0, o1);
}
static void matmul_bf16_avx512(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W,
                               int64_t k, int64_t o0, int64_t o1) {
    matmul_elem(QW_BF16, Y, ldy, X, ldx, n, W, k, o0, o1);
}

/* ---- GGML's block types (Q8_0, Q4_0 ... Q6_K) ----
 * Promise (kernels.h, README): a quantized file gives bitwise the logits of
 * the same weights stored as F32. So every block type computes exactly what
 * matmul_f32_avx512 computes on the dequantized weights: each 4-row x KC
 * block is converted exactly (the AVX2 level's converters, bit for bit the
 * reference's values) into a float32 buffer and run through rows_f32, with
 * the same KC blocks, tiles and reductions as the f32 path, for every n
 * (one code path: batch invariant as the f32 matmul is). Loop order as in
 * matmul_avx2.c's matmul_prefill: a token block of X stays in L2, rows in
 * chunks of OC so Y stays in L2, the next group's rows prefetched while a
 * group runs. KC (512) is a multiple of every block size (32, 256). */
enum { OC = 128 };

static void matmul_conv(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const char *W, int64_t k,
                        int64_t o0, int64_t o1, qw_dtype dt) {
    const qw_conv_fn conv = kernels_conv_avx2[dt];
    if (k == 0) { /* empty sums: the k-block loop below would not store */
        for (int64_t t = 0; t < n; t++)
            for (int64_t o = o0; o < o1; o++) Y[t * ldy + o] = 0.0f;
        return;
    }
    float wbuf[4 * KC];
    const int64_t rb = qw_dtype_row_bytes(dt, k), kc = k < KC ? k : KC;
    int64_t nb = L2_BLOCK / (kc * 4);
    nb = nb < 6 ? 6 : nb - nb % 6;
    /* decode and small batches: X is tiny, so each 4-row group runs its k
     * blocks back to back and its rows stream from memory end to end
     * (measured, one core: 896 x 4864 n = 1 Q5_0 0.86 -> 0.58 ms, Q6_K 0.95 -> 0.63) */
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

/* Q8_0 with n <= SMALL_N (decode: memory bound, the lm_head of most GGUF
 * files): the weights are converted in registers straight from the mapping
 * (int8 -> float32 times the f16 scale, an exact product), 16 at a time, and
 * fed to the same FMA sequence, reduction and Y update as tile_f32 on the
 * converted weights (the k blocks are whole Q8_0 blocks: no masked lanes),
 * so this path and matmul_conv give the same bits. pf as in TILE. */
INLINE __m512 ld16_q8(const uint8_t *q, __m512 d) {
    __m128i v = _mm_loadu_si128((const __m128i *)q);
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(v)), d);
}

INLINE void tile_q8(float *Y, int64_t ldy, const float *X, int64_t ldx, const uint8_t *w, int64_t rb, int64_t c0,
                    int64_t len, const int R, const int T, const int pf) {
    __m512 acc[4][6];
    UNROLL for (int r = 0; r < R; r++)
        UNROLL for (int t = 0; t < T; t++) acc[r][t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < len; i += qw_type(QW_Q8_0)->block) {
        const uint8_t *b[4];
        __m512 d[4];
        UNROLL for (int r = 0; r < R; r++) {
            b[r] = w + r * rb + i / qw_type(QW_Q8_0)->block * qw_type(QW_Q8_0)->bytes;
            if (pf == 1) _mm_prefetch((const char *)b[r] + PF_DIST, _MM_HINT_T0);
            d[r] = _mm512_set1_ps(qw_f16_at(b[r]));
        }
        if (pf == 2) { /* short rows: the next 4-row group (contiguous), in step with this one */
            /* w is at column c0 of row 0: the group's bytes for columns c0 + i are at 4 x their offset */
            const int64_t coff = c0 / qw_type(QW_Q8_0)->block * qw_type(QW_Q8_0)->bytes;
            const char *nx = (const char *)w + 4 * rb + 3 * coff + 4 * (i / qw_type(QW_Q8_0)->block * qw_type(QW_Q8_0)->bytes);
            _mm_prefetch(nx, _MM_HINT_T0);
            _mm_prefetch(nx + 64, _MM_HINT_T0);
            _mm_prefetch(nx + 128, _MM_HINT_T0);
        }
        UNROLL for (int s = 0; s < 2; s++) {
            __m512 wv[4];
            UNROLL for (int r = 0; r < R; r++) wv[r] = ld16_q8(b[r] + 2 + 16 * s, d[r]);
            UNROLL for (int t = 0; t < T; t++) {
                __m512 xv = _mm512_loadu_ps(X + t * ldx + i + 16 * s);
                UNROLL for (int r = 0; r < R; r++) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
            }
        }
    }
    UNROLL for (int t = 0; t < T; t++) {
        float out[4];
        if (R == 4)
            _mm_storeu_ps(out, hsum4x16(acc[0][t], acc[1][t], acc[2][t], acc[3][t]));
        else
            out[0] = _mm_cvtss_f32(hsum4x16(acc[0][t], acc[0][t], acc[0][t], acc[0][t]));
        UNROLL for (int r = 0; r < R; r++) Y[t * ldy + r] = c0 > 0 ? Y[t * ldy + r] + out[r] : out[r];
    }
}

#define Q8_CASES(T)                                                                              \
    case T * 3: tile_q8(Y, ldy, X, ldx, w, rb, c0, len, 4, T, 0); break;                         \
    case T * 3 + 1: tile_q8(Y, ldy, X, ldx, w, rb, c0, len, 4, T, 1); break;                     \
    case T * 3 + 2: tile_q8(Y, ldy, X, ldx, w, rb, c0, len, 4, T, 2); break;                     \
    case 100 + T: tile_q8(Y, ldy, X, ldx, w, rb, c0, len, 1, T, 0); break;
/* One R-row x T-token tile (R 1 or 4, T 1..6), pf a constant in each case. */
static void tile_q8_any(float *Y, int64_t ldy, const float *X, int64_t ldx, const uint8_t *w, int64_t rb,
                        int64_t c0, int64_t len, int R, int T, int pf) {
    switch (R == 4 ? T * 3 + pf : 100 + T) {
    Q8_CASES(6) Q8_CASES(5) Q8_CASES(4) Q8_CASES(3) Q8_CASES(2) Q8_CASES(1)
    default: break;
    }
}
#undef Q8_CASES

static void matmul_q8_0_direct(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const uint8_t *w,
                               int64_t k, int64_t o0, int64_t o1) {
    const int64_t rb = k / qw_type(QW_Q8_0)->block * qw_type(QW_Q8_0)->bytes;
    const int pf = 4 * rb <= PF_NEAR ? 2 : 1;
    for (int64_t o = o0; o < o1;) {
        int R = o + 4 <= o1 ? 4 : 1;
        int p = pf == 2 && o + 8 > o1 ? 0 : pf; /* pf 2 reads into the next group: only inside the range */
        for (int64_t c0 = 0; c0 < k; c0 += KC) {
            int64_t len = k - c0 < KC ? k - c0 : KC;
            const uint8_t *wb = w + o * rb + c0 / qw_type(QW_Q8_0)->block * qw_type(QW_Q8_0)->bytes;
            for (int64_t t = 0; t < n; t += 6) { /* the first token tile streams, the rest hit L1 */
                int T = n - t < 6 ? (int)(n - t) : 6;
                tile_q8_any(Y + t * ldy + o, ldy, X + t * ldx + c0, ldx, wb, rb, c0, len, R, T, t == 0 ? p : 0);
            }
        }
        o += R;
    }
}

static void matmul_q8_0_avx512(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W,
                               int64_t k, int64_t o0, int64_t o1) {
    if (n <= SMALL_N && k > 0) matmul_q8_0_direct(Y, ldy, X, ldx, n, W, k, o0, o1);
    else matmul_conv(Y, ldy, X, ldx, n, W, k, o0, o1, QW_Q8_0);
}

static void matmul_q4_0_avx512(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W,
                               int64_t k, int64_t o0, int64_t o1) {
    matmul_conv(Y, ldy, X, ldx, n, W, k, o0, o1, QW_Q4_0);
}
static void matmul_q4_1_avx512(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W,
                               int64_t k, int64_t o0, int64_t o1) {
    matmul_conv(Y, ldy, X, ldx, n, W, k, o0, o1, QW_Q4_1);
}
static void matmul_q5_0_avx512(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W,
                               int64_t k, int64_t o0, int64_t o1) {
    matmul_conv(Y, ldy, X, ldx, n, W, k, o0, o1, QW_Q5_0);
}
static void matmul_q5_1_avx512(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W,
                               int64_t k, int64_t o0, int64_t o1) {
    matmul_conv(Y, ldy, X, ldx, n, W, k, o0, o1, QW_Q5_1);
}
static void matmul_q4_k_avx512(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W,
                               int64_t k, int64_t o0, int64_t o1) {
    matmul_conv(Y, ldy, X, ldx, n, W, k, o0, o1, QW_Q4_K);
}
static void matmul_q5_k_avx512(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W,
                               int64_t k, int64_t o0, int64_t o1) {
    matmul_conv(Y, ldy, X, ldx, n, W, k, o0, o1, QW_Q5_K);
}
static void matmul_q6_k_avx512(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n, const void *W,
                               int64_t k, int64_t o0, int64_t o1) {
    matmul_conv(Y, ldy, X, ldx, n, W, k, o0, o1, QW_Q6_K);
}

static void to_f32_bf16_avx512(float *y, const void *x, int64_t n) {
    const uint16_t *h = x;
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes(n - i);
        _mm512_mask_storeu_ps(y + i, m, ld16_bf16(h + i, m));
    }
}

static void to_f32_f16_avx512(float *y, const void *x, int64_t n) {
    const uint16_t *h = x;
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes(n - i);
        _mm512_mask_storeu_ps(y + i, m, ld16_f16(h + i, m));
    }
}

/* Every matmul entry is this file's (one summation order for all weight
 * types: a quantized file == its F32 twin on this level). Inherited from
 * avx2: to_f32 of the block types and quantize_q8_0 (exact conversions,
 * bit for bit the reference on every level). */
const qw_kernels kernels_matmul_avx512 = {
    .matmul =
        {
            [QW_F32] = matmul_f32_avx512,
            [QW_F16] = matmul_f16_avx512,
            [QW_BF16] = matmul_bf16_avx512,
            [QW_Q8_0] = matmul_q8_0_avx512,
            [QW_Q4_0] = matmul_q4_0_avx512,
            [QW_Q4_1] = matmul_q4_1_avx512,
            [QW_Q5_0] = matmul_q5_0_avx512,
            [QW_Q5_1] = matmul_q5_1_avx512,
            [QW_Q4_K] = matmul_q4_k_avx512,
            [QW_Q5_K] = matmul_q5_k_avx512,
            [QW_Q6_K] = matmul_q6_k_avx512,
        },
    .to_f32 =
        {
            [QW_F16] = to_f32_f16_avx512,
            [QW_BF16] = to_f32_bf16_avx512,
        },
};

#endif
