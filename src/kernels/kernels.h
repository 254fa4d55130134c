/* kernels.h - the compute kernels, one table per instruction-set level.
 *
 * Modelled on dav1d: every signature is declared once here; kernels_init()
 * fills the table with the plain-C reference, then upgrades it in
 * ascending order (avx2, avx512 on x86-64; neon on arm64) as far as both the
 * CPU and the OS allow (cpuid + XCR0 on x86). The kernels live by op family
 * (matmul/, qdot/, attn/, elementwise/), each reference beside its SIMD
 * twins (kernels_impl.h lists them). QWENC_ISA=ref|avx2|avx512|neon
 * forces a level (an unavailable level is an error, not a silent fallback).
 *
 * Contract for every kernel:
 *  - pure functions over the pointers given; no threads, no allocation;
 *  - float32 accumulation;
 *  - a kernel works on any size (tails handled), any alignment;
 *  - the reference is plain C built without -ffast-math, and
 *    tests/kernels/test_kernels.c checks every level against it.
 * Threads split work by calling a kernel on a sub-range (o0..o1 for matmul).
 */
#ifndef QW_KERNELS_H
#define QW_KERNELS_H

#include <stdint.h>

#include "base/err.h"

/* Weight types, as stored in safetensors / GGUF files.
 * The block types are GGML's (ggml-common.h), so GGUF tensors of these types
 * are used in place: a row is cut into blocks of 32 (or 256 for the
 * K-quants) weights, and every row must hold a whole number of blocks.
 *   Q8_0: f16 d, 32 x int8 q                        w = d * q       (34 B)
 *   Q4_0: f16 d, 16 B of nibbles                    w = d * (q - 8) (18 B)
 *   Q4_1: f16 d, f16 m, 16 B of nibbles             w = d * q + m   (20 B)
 *   Q5_0: f16 d, 32 high bits, 16 B of nibbles      w = d * (q - 16) (22 B)
 *   Q5_1: f16 d, f16 m, 32 high bits, nibbles       w = d * q + m   (24 B)
 *   Q4_K: f16 d, f16 dmin, 12 B of 6-bit scales / mins for 8 sub-blocks of
 *         32, 128 B of nibbles      w = (d * sc) * q - dmin * mn    (144 B)
 *   Q5_K: Q4_K plus 32 B of high bits                               (176 B)
 *   Q6_K: 128 B low nibbles, 64 B high 2-bit pairs, 16 int8 scales (one per
 *         16 weights), f16 d        w = (d * sc) * (q - 32)         (210 B)
 * The nibble order is GGML's: weight j of a 32-weight group is the low
 * nibble of byte j (j < 16) or the high nibble of byte j - 16 (Q4_0..Q5_1);
 * src/kernels/matmul/matmul_ref.c spells out every layout. Each weight is one
 * float32 expression of exact products (at most one rounding), so every
 * level converts to the same bits. */
typedef enum {
    QW_F32 = 0,
    QW_F16 = 1,
    QW_BF16 = 2,
    QW_Q8_0 = 3,
    QW_Q4_0 = 4,
    QW_Q4_1 = 5,
    QW_Q5_0 = 6,
    QW_Q5_1 = 7,
    QW_Q4_K = 8,
    QW_Q5_K = 9,
    QW_Q6_K = 10,
    QW_DTYPE_COUNT = 11
} qw_dtype;

/* The fast precision's activation format for a weight type (kernels.h
 * below): QA8 where the type has an integer kernel (matmul_q: every block
 * type, on every level), bf16 where its kernel takes bf16 activations
 * (matmul_bf16act: BF16, on the levels with a bf16 dot product), else
 * float32 (the exact path). */
typedef enum { QW_ACT_F32 = 0, QW_ACT_BF16 = 1, QW_ACT_QA8 = 2 } qw_act;

/* What a weight type is: the one table of sizes and block layouts that
 * every kernel, loader and tool reads (no block size or byte count is
 * written anywhere else). Byte offsets are within a block; -1 where the
 * type has no such field. */
typedef struct qw_type_traits {
    const char *name; /* "Q4_K", as GGUF and safetensors spell it */
    int block;        /* weights per block: 1 (element types), 32, or 256 (K-quants) */
    int bytes;        /* bytes per block (element types: per element) */
    qw_act act;       /* the fast precision's activations (QA8: has an integer kernel) */
    int d_off;        /* the binary16 scale d (K-quants: the super-block's d) */
    int m_off;        /* the binary16 min m (Q4_1, Q5_1) or dmin (Q4_K, Q5_K) */
    int qh_off;       /* the high bits (Q5_0, Q5_1: 32 bits; Q5_K: 32 bytes; Q6_K: 64 bytes) */
    int qs_off;       /* the quants (Q8_0: int8; Q4_*, Q5_*: nibbles; Q6_K: its low 4 bits) */
    int zero;         /* w = d * (q - zero): Q4_0 8, Q5_0 16, Q6_K 32, else 0 */
} qw_type_traits;

/* The traits of t (a valid qw_dtype). Inline, so that in a kernel
 * specialised for one type every field is a compile-time constant. */
static inline const qw_type_traits *qw_type(qw_dtype t) {
    static const qw_type_traits k_traits[QW_DTYPE_COUNT] = {
        /*           name    block bytes act          d    m   qh   qs  zero */
        [QW_F32] = {"F32", 1, 4, QW_ACT_F32, -1, -1, -1, 0, 0},
        [QW_F16] = {"F16", 1, 2, QW_ACT_F32, -1, -1, -1, 0, 0},
        [QW_BF16] = {"BF16", 1, 2, QW_ACT_BF16, -1, -1, -1, 0, 0},
        [QW_Q8_0] = {"Q8_0", 32, 34, QW_ACT_QA8, 0, -1, -1, 2, 0},
        [QW_Q4_0] = {"Q4_0", 32, 18, QW_ACT_QA8, 0, -1, -1, 2, 8},
        [QW_Q4_1] = {"Q4_1", 32, 20, QW_ACT_QA8, 0, 2, -1, 4, 0},
        [QW_Q5_0] = {"Q5_0", 32, 22, QW_ACT_QA8, 0, -1, 2, 6, 16},
        [QW_Q5_1] = {"Q5_1", 32, 24, QW_ACT_QA8, 0, 2, 4, 8, 0},
        [QW_Q4_K] = {"Q4_K", 256, 144, QW_ACT_QA8, 0, 2, -1, 16, 0},
        [QW_Q5_K] = {"Q5_K", 256, 176, QW_ACT_QA8, 0, 2, 16, 48, 0},
        [QW_Q6_K] = {"Q6_K", 256, 210, QW_ACT_QA8, 208, -1, 128, 0, 32},
    };
    return &k_traits[t];
}

/* True for the block (quantized) types. */
int qw_dtype_quantized(qw_dtype t);
/* Bytes per element of an element type (F32, F16, BF16); 0 for block types. */
int qw_dtype_size(qw_dtype t);
/* Weights per block: 1 for element types, 32 or 256 for block types. */
int qw_dtype_block(qw_dtype t);
/* Bytes of a row of `cols` weights, or -1 if cols is negative or not a whole
 * number of blocks. */
int64_t qw_dtype_row_bytes(qw_dtype t, int64_t cols);
const char *qw_dtype_name(qw_dtype t);

/* Quantize n floats (n a multiple of 32) to Q8_0 blocks at dst, exactly as
 * GGML's reference quantize_row_q8_0 does (d = max|x| / 127 stored as f16,
 * q = round(x / d) with the unrounded d), so our files and llama.cpp's agree.
 * Plain C, not per level: it runs once at load. */
void qw_quantize_q8_0(void *dst, const float *x, int64_t n);

/* Y[t*ldy + o] = sum_i X[t*ldx + i] * W[o*k + i]
 *   for t in [0, n) and o in [o0, o1).
 * X: n x k float32 activations (row stride ldx). W: rows x k weights of the
 * table's dtype, row-major, used in place from the mapping. Y row stride ldy.
 * n = 1 is decode (matrix-vector: memory bound); n > 1 is prefill or a batch
 * of decode steps (matrix-matrix: weights are read once per tile and reused
 * across the n rows of X).
 * Batch invariance: every output Y[t][o] is computed with the same sequence
 * of floating-point operations whatever n, t's place in the batch and the
 * o0..o1 split are, so a row's result is bitwise identical alone or batched
 * (continuous batching must not change a request's tokens; checked in
 * tests/kernels/test_kernels.c).
 * One order per level: on every level, matmul[t] of a block type gives
 * bitwise what the same level's matmul[QW_F32] gives on the dequantized
 * (to_f32) weights, so a quantized file has the logits of its F32 twin
 * whatever level the CPU picks (test_kernels checks every level). */
typedef void (*qw_matmul_fn)(float *Y, int64_t ldy, const float *X, int64_t ldx, int64_t n,
                             const void *W, int64_t k, int64_t o0, int64_t o1);

/* ---- the integer path ("fast" precision) ----
 * The default precision quantizes each matmul input once to 8-bit blocks
 * ("QA8") and multiplies with integer dot products; --precision exact keeps
 * the float32-activation matmul above, bit for bit.
 *
 * QA8 row: k floats (k % 32 == 0) become qw_qa8_row_bytes(k) bytes:
 *   int8_t  q[k]        at offset 0
 *   float   d[k / 32]   at offset k               scale of each block of 32
 *   int32_t s[k / 32]   at offset k + 4 * (k/32)  sum of the block's q
 *   float   ds[k / 32]  at offset k + 8 * (k/32)  d * s (the K-quants' min term)
 *   int16_t h[2 * (k/32)] at offset k + 12 * (k/32)  h[2b] the sum of block b's
 *                       first 16 q, h[2b + 1] of its last 16 (Q6_K's halves)
 * Rule, bit for bit on every level: amax = max |x| over the block;
 * d = amax / 127 (float32 division); id = amax != 0 ? 127 / amax : 0
 * (float32 division); q = round-half-even(x * id) (float32 product), which
 * lies in [-127, 127]; s = sum of q; ds = d * (float)s (one float32
 * product; (float)s is exact); h: the halves' sums (|h| <= 2032). Rows are stored one after another at a
 * stride of qw_qa8_row_bytes(k) (a multiple of 4 bytes).
 *
 * matmul_q[dtype]: Y[t*ldy + o] = sum_i X[t][i] * W[o][i] for t < n,
 * o in [o0, o1), X given as n QA8 rows at stride ldxq bytes; NULL for types
 * without an integer path (F32, F16, BF16 keep the float matmul).
 * Float order (the same on every level, so every SIMD kernel is bitwise its
 * plain-C twin, and batch invariant as matmul): the 32-weight blocks of a
 * row are b = 0, 1, ... (a K-quant super-block of 256 holds blocks 8B..8B+7,
 * one per 32-weight sub-block); each block's integer dot products are exact;
 * block b's float terms go, in ascending b, into accumulator lane b % 8 of
 * 8 float32 lanes (starting at +0) by the steps the reference of its type
 * spells out (fmaf with the products it names); the result is
 *   ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)),
 * stored to Y (never added). Independent of n, of t's place in the batch
 * and of o0/o1. */
#define QW_QA8_BLOCK 32
static inline int64_t qw_qa8_row_bytes(int64_t k) { return k + (k / QW_QA8_BLOCK) * 16; }

typedef void (*qw_matmul_q_fn)(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n,
                               const void *W, int64_t k, int64_t o0, int64_t o1);

/* ---- repacked weights (fast precision, block-32 types and K-quants) ----
 * At load, a matrix of a block-32 type (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) whose
 * rows are a multiple of QW_RP_ROWS may be rearranged ("repacked") into
 * tiles of QW_RP_ROWS rows, so that one activation block meets 16 rows'
 * blocks in one stream and an int32 lane is one row: no horizontal sums.
 * Tile r (rows 16r..16r+15), block b is one "tile block" of 16 x the
 * type's block bytes, tile blocks in order (r, b), i.e. a tile's blocks are
 * contiguous. A tile block holds, in this order:
 *   d[16]      binary16, row i's d
 *   m[16]      binary16, row i's m (Q4_1, Q5_1 only)
 *   qh[64]     a bit plane (Q5_0, Q5_1 only): bit j of byte 4i + c is the
 *              high bit of weight 4j + c of row i (bit j of byte n: byte
 *              n of weight vector j below, so a shift and an and, or a
 *              bit test, give a vector's high bits)
 *   q          Q8_0: 8 x 64 bytes, byte 4i + c of vector j = weight
 *              4j + c of row i, stored as q + 128 (q ^ 0x80);
 *              nibble types: 4 x 64 bytes, byte 4i + c of vector v holds
 *              weight 8v + c of row i in its low nibble and weight
 *              8v + 4 + c in its high nibble
 * (weight j of a block is GGML's: j < 16 the low nibble of qs[j], else the
 * high nibble of qs[j - 16]). Same bytes as the original, so the copy
 * replaces the mapped pages (model/repack.c).
 * Q4_K and Q5_K: a tile block is 16 rows' super-block B (256 weights, 8
 * sub-blocks of 32), holding d[16], dmin[16] (binary16), sc[8][16] and
 * mn[8][16] (the 6-bit scales and mins of sub-block j, row i, one byte
 * each), Q5_K's qh[8][64] bit planes (sub-block j's, as above), then per
 * sub-block j the 4 nibble vectors as above: 148 (Q5_K 180) bytes per row
 * and super-block instead of 144 (176). Q6_K: d[16] (binary16) and 32
 * bytes of padding, its int8 scales sc[16][16], per sub-block its high
 * 2-bit planes, then its low-nibble vectors (qrepack_ref.c): 212 bytes per
 * row and super-block instead of 210, every tile block whole 64-byte lines.
 * qw_repack_q: the plain-C conversion (once at load), rows % QW_RP_ROWS
 * == 0 and k a whole number of the type's blocks; qw_repack_ok: the types
 * it takes; qw_repack_bytes: the size of the copy.
 * matmul_qr[dtype]: matmul_q on a repacked W (o0, o1 any sub-range, n any):
 * bitwise the reference matmul_q on the original (the same float steps,
 * per row). NULL on levels without a kernel for that layout (the caller
 * then uses matmul_q on the original); the plain-C twin
 * (kernels_qrepack_ref) is not in any level's table, only the checker's
 * reference (tests/kernels/test_qrepack.c). */
#define QW_RP_ROWS 16
int qw_repack_ok(qw_dtype t);
int64_t qw_repack_bytes(qw_dtype t, int64_t rows, int64_t k);
void qw_repack_q(qw_dtype t, void *dst, const void *src, int64_t rows, int64_t k);

/* ---- bf16 activations ("fast" precision, 16-bit weights) ----
 * Where the CPU has a bf16 dot-product instruction (AVX512-BF16 vdpbf16ps),
 * the fast precision rounds each matmul input once to bf16 and multiplies it
 * with BF16 weights as bf16 pairs, as llama.cpp does.
 *
 * to_bf16: n floats to n bf16, the rule of vcvtneps2bf16: round to nearest
 * even; a subnormal input becomes a zero of its sign; NaN stays NaN (quiet).
 * Rows are stored at a stride of ldxb bf16 elements.
 *
 * matmul_bf16act[dtype]: Y[t*ldy + o] = sum_i XB[t][i] * W[o][i], t < n,
 * o in [o0, o1); NULL where the level has no such kernel (the caller then
 * uses matmul on float32 activations). Only levels with a native bf16 dot
 * product fill it (a plain-C or AVX2 emulation would be slower than the
 * float32 matmul); the reference (kernels_matmul_bf16act_ref) defines every
 * bit and the checker (tests/kernels/test_bf16act.c) compares against it.
 * Float order, vdpbf16ps's: 16 float32 lanes (starting at +0); the row is
 * cut into chunks of 32 columns (the last one padded with +0 on both
 * sides); lane j of chunk c does, with DAZ on the bf16 inputs (a subnormal
 * is a zero of its sign) and FTZ on each result:
 *   l[j] = fma(x[32c+2j+1], w[32c+2j+1], l[j]);
 *   l[j] = fma(x[32c+2j],   w[32c+2j],   l[j]);
 * (the products of two bf16 are exact in float32, so only the adds round);
 * then the halves are folded: l[j] += l[j+8] (j < 8), l[j] += l[j+4]
 * (j < 4), l[j] += l[j+2] (j < 2), Y = l[0] + l[1], stored. Independent of
 * n, of t's place in the batch and of o0/o1 (batch invariant). */
typedef void (*qw_matmul_bf16act_fn)(float *Y, int64_t ldy, const uint16_t *XB, int64_t ldxb, int64_t n,
                                     const void *W, int64_t k, int64_t o0, int64_t o1);

/* How the KV cache stores K and V (--kv-type): float32, or 16-bit rounded
 * to nearest even when stored (IEEE binary16, or bf16: the top half of a
 * float32). A 16-bit cache value converts to float32 exactly, so the
 * attention kernels for 16-bit rows do the float operations of the float32
 * kernel on the converted values: a 16-bit cache gives the bits of a float32
 * cache holding the rounded values. */
typedef enum { QW_KV_F32 = 0, QW_KV_F16 = 1, QW_KV_BF16 = 2, QW_KV_TYPE_COUNT } qw_kv_type;

/* Bytes of one cached element of type t (4 or 2). */
static inline int qw_kv_type_size(qw_kv_type t) { return t == QW_KV_F32 ? 4 : 2; }

/* Where the attention kernel finds cache row p: rows live in pages of
 * 1 << shift rows (the paged KV cache, infer/kvcache.h); within a page, K
 * rows start k_off elements after the page's base, V rows v_off elements,
 * and consecutive rows are ld elements apart; an element is a float (the
 * attn kernel) or a uint16_t (attn16: binary16 or bf16 bits). A contiguous
 * cache is one page with a shift larger than any row index. */
typedef struct qw_kv_rows {
    const float *const *pages; /* [ceil(n / (1 << shift))] page base pointers (16-bit rows: cast) */
    int64_t k_off, v_off;      /* elements from a page's base to its row 0 of K / of V */
    int64_t ld;                /* elements between consecutive rows of a page */
    int shift;                 /* log2 of the rows per page, 0..62 */
} qw_kv_rows;

/* Row p of K (off = k_off) or V (off = v_off). */
static inline const float *qw_kv_row(const qw_kv_rows *kv, int64_t off, int64_t p) {
    return kv->pages[p >> kv->shift] + off + (p & (((int64_t)1 << kv->shift) - 1)) * kv->ld;
}

/* The same for a cache of 16-bit elements. */
static inline const uint16_t *qw_kv_row16(const qw_kv_rows *kv, int64_t off, int64_t p) {
    return (const uint16_t *)(const void *)kv->pages[p >> kv->shift] + off +
           (p & (((int64_t)1 << kv->shift) - 1)) * kv->ld;
}

/* Row p of K or V as bytes, for a cache of type t (the SIMD attention
 * kernels address 16-bit and float32 rows alike and convert as they load). */
static inline const char *qw_kv_row_bytes(const qw_kv_rows *kv, int64_t off, int64_t p, qw_kv_type t) {
    return t == QW_KV_F32 ? (const char *)qw_kv_row(kv, off, p) : (const char *)(const void *)qw_kv_row16(kv, off, p);
}

/* The attention kernel's signature (qw_kernels.attn below). */
typedef void (*qw_attn_fn)(float *out, const float *q, int64_t ldq, int64_t nt, int64_t nq, int64_t hd,
                           const qw_kv_rows *kv, int64_t n, float scale, float *S);

/* Scratch floats an attention call needs (qw_kernels.attn): nq scores for
 * each row of each token of the run. */
static inline int64_t qw_attn_scratch(int64_t nt, int64_t nq, int64_t n) { return nq * (nt * n + nt * (nt - 1) / 2); }

/* Where token j of a run finds its scores in that scratch: one row of n + j
 * floats per head, from S + nq * (j * n + j * (j - 1) / 2). */
static inline float *qw_attn_run_scores(float *S, int64_t nq, int64_t n, int64_t j) {
    return S + nq * (j * n + j * (j - 1) / 2);
}

typedef struct qw_kernels {
    const char *name; /* "ref", "avx2", "avx512", "neon" */

    qw_matmul_fn matmul[QW_DTYPE_COUNT]; /* indexed by qw_dtype of W */

    /* The integer path (see QA8 above). quantize_qa8: one row of k floats
     * (k % 32 == 0) into a QA8 row at dst. matmul_q: NULL where a type has
     * no integer kernel (the caller then uses matmul). */
    void (*quantize_qa8)(void *dst, const float *x, int64_t k);
    qw_matmul_q_fn matmul_q[QW_DTYPE_COUNT];
    qw_matmul_q_fn matmul_qr[QW_DTYPE_COUNT]; /* repacked W (see above); NULL: none */

    /* bf16 activations (see above): to_bf16 on every level; matmul_bf16act
     * NULL except where the CPU has a bf16 dot product. */
    void (*to_bf16)(uint16_t *y, const float *x, int64_t n);
    qw_matmul_bf16act_fn matmul_bf16act[QW_DTYPE_COUNT];

    /* Convert n elements of dtype t to float32 (embedding rows, norm weights).
     * Block types: x at a block start, n a multiple of the block size. */
    void (*to_f32[QW_DTYPE_COUNT])(float *y, const void *x, int64_t n);

    /* Q8_0 blocks of n floats (n a multiple of 32): bit for bit what
     * qw_quantize_q8_0 (the reference, GGML's rule) gives. */
    void (*quantize_q8_0)(void *dst, const float *x, int64_t n);

    /* y[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]  (Qwen2RMSNorm: the mean of
     * squares in float32, then weight multiply). y may equal x. */
    void (*rmsnorm)(float *y, const float *x, const float *w, int64_t n, float eps);
    /* g[i] = silu(g[i]) * u[i], silu(x) = x / (1 + exp(-x)) */
    void (*silu_mul)(float *g, const float *u, int64_t n);
    /* y[i] += x[i] */
    void (*add)(float *y, const float *x, int64_t n);

    /* Attention of nq query heads sharing one kv head, for a run of nt >= 1
     * consecutive tokens of one sequence: token j (0 <= j < nt) attends
     * cache rows 0..n+j-1 (n >= 1), as transformers' eager attention
     * computes it:
     *   s[j][h][p] = (q[j][h] . K[p]) * scale
     *   out[j][h]  = sum_p softmax(s[j][h])[p] * V[p]
     * q, out: token j's nq rows of hd floats start at q + j * ldq and
     * out + j * ldq (row stride hd; out must not overlap q, K, V or S). K,
     * V: n + nt - 1 rows of hd floats, found through the page table kv
     * (qw_kv_rows below: the paged KV cache). S: scratch of
     * qw_attn_scratch(nt, nq, n) floats. Every cache row is read once for
     * all the run's tokens and heads (in chunks of up to 32 of each), in one
     * pass over K and one over V: a prefill reads the cache once per run,
     * not once per token.
     * Invariance: each (token, head)'s output is computed with the same
     * sequence of float operations whatever nt, nq and its place among
     * them, so splitting a group's heads over threads, running a token
     * alone, in a run or in a batch, gives the same bits; and whatever the
     * page size, so a paged cache gives the bits of a contiguous one. */
    qw_attn_fn attn;
    /* The same over 16-bit K and V (qw_kv_row16), indexed by qw_kv_type
     * (attn16[QW_KV_F32] is NULL; use qw_attn_for): out is bit for bit
     * what attn gives on a float32 copy of the rows (the conversion is
     * exact), so the invariances above hold as they are. */
    qw_attn_fn attn16[QW_KV_TYPE_COUNT];
    /* Round n floats to the 16-bit type t (QW_KV_F16 or QW_KV_BF16), to
     * nearest even: the KV cache's store. */
    void (*kv_store16[QW_KV_TYPE_COUNT])(uint16_t *y, const float *x, int64_t n);
} qw_kernels;

/* The attention kernel of level K for a cache of type t. */
static inline qw_attn_fn qw_attn_for(const qw_kernels *K, qw_kv_type t) {
    return t == QW_KV_F32 ? K->attn : K->attn16[t];
}

/* Detect the CPU and select the best level (or the one QWENC_ISA names).
 * Returns 0, or -1 with a message when QWENC_ISA names an unknown or
 * unavailable level. Safe to call more than once. */
int kernels_init(qw_err *err);

/* The selected table (kernels_init must have succeeded; before that, ref). */
const qw_kernels *kernels(void);

/* The table of a named level if this CPU and OS support it, else NULL.
 * Used by the kernel checker and the fidelity tests to run every level. */
const qw_kernels *kernels_level(const char *name);

/* Make the named level the one kernels() returns (tests run every level
 * through the whole forward pass this way). -1 with a message if this CPU or
 * OS cannot run it. Not thread safe: call between forward passes. */
int kernels_use(const char *name, qw_err *err);

/* Names of all levels compiled into this binary, NULL-terminated,
 * in ascending order ("ref" first). */
const char *const *kernels_level_names(void);

/* Human-readable CPU features line for logs, e.g. "x86-64 avx2 fma f16c". */
const char *kernels_cpu_features(void);

#endif
