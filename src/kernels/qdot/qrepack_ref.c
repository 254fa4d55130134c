/* qrepack_ref.c - the repacked layout of the block-32 types (kernels.h:
 * "repacked weights"): the conversion at load (qw_repack_q, plain C, not
 * per level) and the plain-C twin of matmul_qr, which reads the repacked
 * tiles back weight by weight and runs qdot_ref.c's float steps per row,
 * so its result is bitwise the reference matmul_q on the original.
 */
#include <math.h>

#include "kernels/kernels_impl.h"

#define INLINE static inline __attribute__((always_inline))
INLINE int blk_bytes(int T) { return qw_type((qw_dtype)T)->bytes; }
INLINE int has_min(int T) { return qw_type((qw_dtype)T)->m_off >= 0; }
#include "kernels/qdot/qrepack_layout.h"

int qw_repack_ok(qw_dtype t) {
    return t == QW_Q8_0 || t == QW_Q4_0 || t == QW_Q4_1 || t == QW_Q5_0 || t == QW_Q5_1 || t == QW_Q4_K ||
           t == QW_Q5_K || t == QW_Q6_K;
}

/* Q6_K tile blocks (offsets: qrepack_layout.h): 3392 bytes, 212 per row
 * and super-block instead of 210, so that a tile block is whole 64-byte
 * lines read strictly in order: with 3360 bytes (every other block
 * starting mid-line) and the planes and nibbles in two separate runs, the
 * hardware prefetchers lost the stream (one thread, n = 1, 65536 x 1536
 * from DRAM: 5-9 GB/s against 14-17 for the row path; in the model the
 * lm_head was ~13% slower than unrepacked). High plane h of sub-block j:
 * byte 4i + c holds bits 4-5 of weights 4v + c, v = 4h..4h+3, at bits
 * 2 (v % 4). */

/* Weight p = 128 h + i of a Q6_K super-block (0..63): low 4 bits nibble
 * i / 64 of ql[64 h + i % 64], high 2 bits bits 2 (i / 32) of
 * qh[32 h + i % 32] (kquant_ref.c). */

static int is_k(qw_dtype t) { return t == QW_Q4_K || t == QW_Q5_K; }

int64_t qw_repack_bytes(qw_dtype t, int64_t rows, int64_t k) {
    if (t == QW_Q6_K) return rows / QW_RP_ROWS * (k / 256) * Q6_SIZE;
    if (is_k(t)) return rows / QW_RP_ROWS * (k / 256) * k_size(t);
    return qw_dtype_row_bytes(t, k) * rows;
}

/* Byte offsets inside a tile block (16 rows' block b): d, m, qh, q. */
typedef struct {
    int m, qh, q, size;
} tb_layout;

static inline __attribute__((always_inline)) tb_layout layout(qw_dtype t) {
    const qw_type_traits *tt = qw_type(t);
    tb_layout L;
    int o = 2 * QW_RP_ROWS;
    L.m = tt->m_off >= 0 ? o : -1;
    if (tt->m_off >= 0) o += 2 * QW_RP_ROWS;
    L.qh = tt->qh_off >= 0 ? o : -1;
    if (tt->qh_off >= 0) o += 8 * 8;
    L.q = o;
    L.size = QW_RP_ROWS * tt->bytes;
    return L;
}

/* Row i's block blk of type t into tile block tb (zeroed), byte-wise: it
 * runs once per weight at load, so no per-weight work. Weight j of the
 * original: j < 16 the low nibble of qs[j], else the high nibble of
 * qs[j - 16], plus bit j of qh as its bit 4 (Q5_*); Q8_0 stored + 128. */
static inline __attribute__((always_inline)) void repack_row(qw_dtype t, const tb_layout *L, uint8_t *tb, const uint8_t *blk, int i) {
    const qw_type_traits *tt = qw_type(t);
    memcpy(tb + 2 * i, blk + tt->d_off, 2);
    if (L->m >= 0) memcpy(tb + L->m + 2 * i, blk + tt->m_off, 2);
    const uint8_t *qs = blk + tt->qs_off;
    /* Four bytes at a time as one 32-bit word: every mask and shift below
     * keeps each byte's bits inside that byte, so the word's byte order
     * does not matter. */
    if (t == QW_Q8_0) {
        for (int g = 0; g < 8; g++) {
            uint32_t w = qw_u32_at(qs + 4 * g) ^ 0x80808080u;
            memcpy(tb + L->q + 64 * g + 4 * i, &w, 4);
        }
        return;
    }
    /* nibble vector v: byte c holds weight 8v + c (low) and 8v + 4 + c
     * (high); weights 0..15 are qs's low nibbles, 16..31 its high ones */
    for (int v = 0; v < 4; v++) {
        const uint32_t a = qw_u32_at(qs + 8 * (v & 1)), b = qw_u32_at(qs + 8 * (v & 1) + 4);
        const uint32_t o = v < 2 ? (a & 0x0F0F0F0Fu) | (b & 0x0F0F0F0Fu) << 4 : (a >> 4 & 0x0F0F0F0Fu) | (b & 0xF0F0F0F0u);
        memcpy(tb + L->q + 64 * v + 4 * i, &o, 4);
    }
    if (L->qh >= 0) { /* the plane: bit w / 4 of byte 4i + w % 4 is bit w of qh */
        const uint32_t qh = qw_u32_at(blk + tt->qh_off);
        for (int w = 0; w < 32; w++) tb[L->qh + 4 * i + w % 4] |= (uint8_t)(((qh >> w) & 1) << (w / 4));
    }
}

/* Specialised per type (t a constant after inlining: every offset folds). */
static inline __attribute__((always_inline)) void repack_tiles(qw_dtype t, void *dst, const void *src, int64_t rows,
                                                              int64_t k) {
    const qw_type_traits *tt = qw_type(t);
    const tb_layout L = layout(t);
    const int64_t nb = k / 32, rb = nb * tt->bytes;
    for (int64_t r0 = 0; r0 < rows; r0 += QW_RP_ROWS)
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *tb = (uint8_t *)dst + (r0 / QW_RP_ROWS * nb + b) * L.size;
            memset(tb, 0, (size_t)L.size);
            for (int i = 0; i < QW_RP_ROWS; i++)
                repack_row(t, &L, tb, (const uint8_t *)src + (r0 + i) * rb + b * tt->bytes, i);
        }
}

/* Row i's super-block blk (Q4_K / Q5_K) into K tile block tb (zeroed). */
static inline __attribute__((always_inline)) void repack_row_k(qw_dtype t, uint8_t *tb, const uint8_t *blk, int i) {
    memcpy(tb + 2 * i, blk, 2);
    memcpy(tb + 32 + 2 * i, blk + 2, 2);
    const int five = t == QW_Q5_K;
    const uint8_t *qh = blk + 16, *qs = blk + (five ? 48 : 16);
    for (int j = 0; j < 8; j++) {
        int sc, mn;
        qw_kquant_scale_min(blk + 4, j, &sc, &mn);
        tb[K_SC + 16 * j + i] = (uint8_t)sc;
        tb[K_MN + 16 * j + i] = (uint8_t)mn;
        uint8_t *q = tb + k_q(t) + 256 * j;
        const uint8_t *src = qs + 32 * (j / 2);
        const int sh = 4 * (j % 2);
        for (int v = 0; v < 4; v++) { /* bytes 4i..4i+3 of vector v: weights 8v + c, 8v + 4 + c (as above) */
            const uint32_t a = qw_u32_at(src + 8 * v) >> sh & 0x0F0F0F0Fu, b = qw_u32_at(src + 8 * v + 4) >> sh & 0x0F0F0F0Fu;
            const uint32_t o = a | b << 4;
            memcpy(q + 64 * v + 4 * i, &o, 4);
        }
        if (five) /* plane j: bit l / 4 of byte 4i + l % 4 is weight l's high bit, bit j of qh[l] */
            for (int l = 0; l < 32; l++) tb[K_QH + 64 * j + 4 * i + l % 4] |= (uint8_t)(((qh[l] >> j) & 1) << (l / 4));
    }
}

static inline __attribute__((always_inline)) void repack_k(qw_dtype t, void *dst, const void *src, int64_t rows, int64_t k) {
    const int64_t nsb = k / 256, rb = nsb * qw_type(t)->bytes;
    for (int64_t r0 = 0; r0 < rows; r0 += QW_RP_ROWS)
        for (int64_t B = 0; B < nsb; B++) {
            uint8_t *tb = (uint8_t *)dst + (r0 / QW_RP_ROWS * nsb + B) * k_size(t);
            memset(tb, 0, (size_t)k_size(t));
            for (int i = 0; i < QW_RP_ROWS; i++)
                repack_row_k(t, tb, (const uint8_t *)src + (r0 + i) * rb + B * qw_type(t)->bytes, i);
        }
}

/* Byte-wise masks for moving four weights at once (repack_q6_k). */
#define LO4 0x0F0F0F0Fu
#define LO2 0x03030303u

static void repack_q6_k(void *dst, const void *src, int64_t rows, int64_t k) {
    const int64_t nsb = k / 256, rb = nsb * 210;
    for (int64_t r0 = 0; r0 < rows; r0 += QW_RP_ROWS)
        for (int64_t B = 0; B < nsb; B++) {
            uint8_t *tb = (uint8_t *)dst + (r0 / QW_RP_ROWS * nsb + B) * Q6_SIZE;
            memset(tb, 0, Q6_SIZE);
            for (int i = 0; i < QW_RP_ROWS; i++) {
                const uint8_t *blk = (const uint8_t *)src + (r0 + i) * rb + B * 210;
                memcpy(tb + 2 * i, blk + 208, 2);
                for (int g = 0; g < 16; g++) tb[Q6_SC + 16 * g + i] = blk[192 + g];
                /* The 256 weights as 64 words of 4 (weights 4m..4m+3 in
                 * bytes 0..3, whatever the byte order: memcpy in and out),
                 * moved four at a time with byte-wise masks; no shift
                 * carries a bit across a byte once masked. */
                uint32_t all[64];
                for (int h = 0; h < 2; h++)
                    for (int l = 0; l < 32; l += 4) {
                        uint32_t a, b, hb;
                        memcpy(&a, blk + 64 * h + l, 4);
                        memcpy(&b, blk + 64 * h + 32 + l, 4);
                        memcpy(&hb, blk + 128 + 32 * h + l, 4);
                        const int m = (128 * h + l) / 4;
                        all[m] = (a & LO4) | (hb & LO2) << 4;
                        all[m + 8] = (b & LO4) | ((hb >> 2) & LO2) << 4;
                        all[m + 16] = ((a >> 4) & LO4) | ((hb >> 4) & LO2) << 4;
                        all[m + 24] = ((b >> 4) & LO4) | ((hb >> 6) & LO2) << 4;
                    }
                for (int j = 0; j < 8; j++) {
                    const uint32_t *w = all + 8 * j; /* sub-block j's 32 weights */
                    for (int v = 0; v < 4; v++) {    /* low nibbles: 8v + c low, 8v + 4 + c high */
                        const uint32_t lo = (w[2 * v] & LO4) | (w[2 * v + 1] & LO4) << 4;
                        memcpy(tb + q6_lo(j) + 64 * v + 4 * i, &lo, 4);
                    }
                    for (int H = 0; H < 2; H++) { /* high 2-bit planes: weight 4 (4H + m) + c at bits 2m */
                        uint32_t hi = 0;
                        for (int m = 0; m < 4; m++) hi |= ((w[4 * H + m] >> 4) & LO2) << (2 * m);
                        memcpy(tb + q6_hi(j) + 64 * H + 4 * i, &hi, 4);
                    }
                }
            }
        }
}

void qw_repack_q(qw_dtype t, void *dst, const void *src, int64_t rows, int64_t k) {
    switch (t) {
    case QW_Q6_K: repack_q6_k(dst, src, rows, k); break;
    case QW_Q4_K: repack_k(QW_Q4_K, dst, src, rows, k); break;
    case QW_Q5_K: repack_k(QW_Q5_K, dst, src, rows, k); break;
    case QW_Q8_0: repack_tiles(QW_Q8_0, dst, src, rows, k); break;
    case QW_Q4_0: repack_tiles(QW_Q4_0, dst, src, rows, k); break;
    case QW_Q4_1: repack_tiles(QW_Q4_1, dst, src, rows, k); break;
    case QW_Q5_0: repack_tiles(QW_Q5_0, dst, src, rows, k); break;
    case QW_Q5_1: repack_tiles(QW_Q5_1, dst, src, rows, k); break;
    default: break;
    }
}

/* Weight j of row i of a tile block as a small unsigned integer (Q8_0:
 * q + 128; the rest: nibble plus high bit). */
static int tb_weight(qw_dtype t, const tb_layout *L, const uint8_t *tb, int i, int j) {
    int vec = j / 4, c = j % 4;
    if (t == QW_Q8_0) return tb[L->q + 64 * vec + 4 * i + c];
    int v = tb[L->q + 64 * (j / 8) + 4 * i + c];
    v = vec % 2 ? v >> 4 : v & 15;
    if (L->qh >= 0) v |= ((tb[L->qh + 4 * i + c] >> vec) & 1) << 4;
    return v;
}

/* What sum(w_unsigned * qx) exceeds isum by, in units of s: Q8_0 stored
 * + 128, Q4_0 and Q5_0 their zero, the types with a min nothing. */
static int offset_of(qw_dtype t) { return t == QW_Q8_0 ? 128 : qw_type(t)->zero; }

static void matmul_qr_blocks(qw_dtype dt, float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n,
                             const void *W, int64_t k, int64_t o0, int64_t o1) {
    const tb_layout L = layout(dt);
    const int64_t nb = k / 32;
    const int off = offset_of(dt);
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *xr = (const uint8_t *)XQ + t * ldxq;
        const int8_t *qx = (const int8_t *)xr;
        for (int64_t o = o0; o < o1; o++) {
            const int i = (int)(o % QW_RP_ROWS);
            const uint8_t *tile = (const uint8_t *)W + o / QW_RP_ROWS * nb * L.size;
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *tb = tile + b * L.size;
                float dx;
                int32_t s, isum = 0;
                memcpy(&dx, xr + k + 4 * b, 4);
                memcpy(&s, xr + k + 4 * nb + 4 * b, 4);
                for (int j = 0; j < 32; j++) isum += tb_weight(dt, &L, tb, i, j) * qx[32 * b + j];
                isum -= off * s;
                acc[b % 8] = fmaf(qw_f16_at(tb + 2 * i) * dx, (float)isum, acc[b % 8]);
                if (L.m >= 0) acc[b % 8] = fmaf(qw_f16_at(tb + L.m + 2 * i) * dx, (float)s, acc[b % 8]);
            }
            Y[t * ldy + o] = qw_qdot_tree(acc);
        }
    }
}

/* kquant_ref.c's float steps, per row, from the K tile blocks. */
static void matmul_qr_k(qw_dtype dt, float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                        int64_t k, int64_t o0, int64_t o1) {
    const int64_t nsb = k / 256, nb = k / 32, S = k_size(dt);
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *xr = (const uint8_t *)XQ + t * ldxq;
        const int8_t *qx = (const int8_t *)xr;
        for (int64_t o = o0; o < o1; o++) {
            const int i = (int)(o % QW_RP_ROWS);
            const uint8_t *tile = (const uint8_t *)W + o / QW_RP_ROWS * nsb * S;
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (int64_t B = 0; B < nsb; B++) {
                const uint8_t *tb = tile + B * S;
                const float d = qw_f16_at(tb + 2 * i), dmin = qw_f16_at(tb + 32 + 2 * i);
                for (int j = 0; j < 8; j++) {
                    const int64_t b = 8 * B + j;
                    const uint8_t *q = tb + k_q(dt) + 256 * j;
                    int32_t dot = 0;
                    for (int l = 0; l < 32; l++) {
                        int v = q[64 * (l / 8) + 4 * i + l % 4];
                        v = (l / 4) % 2 ? v >> 4 : v & 15;
                        if (dt == QW_Q5_K) v |= ((tb[K_QH + 64 * j + 4 * i + l % 4] >> (l / 4)) & 1) << 4;
                        dot += v * qx[32 * b + l];
                    }
                    float dx, ds;
                    memcpy(&dx, xr + k + 4 * b, 4);
                    memcpy(&ds, xr + k + 8 * nb + 4 * b, 4);
                    const float dsc = d * (float)tb[K_SC + 16 * j + i], dmn = dmin * (float)tb[K_MN + 16 * j + i];
                    acc[j] = fmaf(dx, dsc * (float)dot, acc[j]);
                    acc[j] = fmaf(-dmn, ds, acc[j]);
                }
            }
            Y[t * ldy + o] = qw_qdot_tree(acc);
        }
    }
}

/* kquant_ref.c's Q6_K steps, per row, from the Q6_K tile blocks. */
static void matmul_qr_q6_k_ref(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                               int64_t k, int64_t o0, int64_t o1) {
    const int64_t nsb = k / 256;
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *xr = (const uint8_t *)XQ + t * ldxq;
        const int8_t *qx = (const int8_t *)xr;
        for (int64_t o = o0; o < o1; o++) {
            const int i = (int)(o % QW_RP_ROWS);
            const uint8_t *tile = (const uint8_t *)W + o / QW_RP_ROWS * nsb * Q6_SIZE;
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (int64_t B = 0; B < nsb; B++) {
                const uint8_t *tb = tile + B * Q6_SIZE;
                const float d = qw_f16_at(tb + 2 * i);
                for (int j = 0; j < 8; j++) {
                    const int64_t b = 8 * B + j;
                    int32_t half[2] = {0, 0};
                    for (int l = 0; l < 32; l++) {
                        int lo = tb[q6_lo(j) + 64 * (l / 8) + 4 * i + l % 4];
                        lo = (l / 4) % 2 ? lo >> 4 : lo & 15;
                        int v = l / 4;
                        int hi = (tb[q6_hi(j) + 64 * (v / 4) + 4 * i + l % 4] >> (2 * (v % 4))) & 3;
                        half[l / 16] += ((lo | hi << 4) - 32) * qx[32 * b + l];
                    }
                    const int32_t isum = (int8_t)tb[Q6_SC + 16 * (2 * j) + i] * half[0] +
                                         (int8_t)tb[Q6_SC + 16 * (2 * j + 1) + i] * half[1];
                    float dx;
                    memcpy(&dx, xr + k + 4 * b, 4);
                    acc[j] = fmaf(d * dx, (float)isum, acc[j]);
                }
            }
            Y[t * ldy + o] = qw_qdot_tree(acc);
        }
    }
}

static void matmul_qr_q4_k_ref(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                               int64_t k, int64_t o0, int64_t o1) {
    matmul_qr_k(QW_Q4_K, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}
static void matmul_qr_q5_k_ref(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                               int64_t k, int64_t o0, int64_t o1) {
    matmul_qr_k(QW_Q5_K, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}

#define QR_REF(NAME, DT)                                                                                       \
    static void NAME(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W, int64_t k, \
                     int64_t o0, int64_t o1) {                                                                 \
        matmul_qr_blocks(DT, Y, ldy, XQ, ldxq, n, W, k, o0, o1);                                               \
    }
QR_REF(matmul_qr_q8_0_ref, QW_Q8_0)
QR_REF(matmul_qr_q4_0_ref, QW_Q4_0)
QR_REF(matmul_qr_q4_1_ref, QW_Q4_1)
QR_REF(matmul_qr_q5_0_ref, QW_Q5_0)
QR_REF(matmul_qr_q5_1_ref, QW_Q5_1)

const qw_kernels kernels_qrepack_ref = {
    .matmul_qr =
        {
            [QW_Q8_0] = matmul_qr_q8_0_ref,
            [QW_Q4_0] = matmul_qr_q4_0_ref,
            [QW_Q4_1] = matmul_qr_q4_1_ref,
            [QW_Q5_0] = matmul_qr_q5_0_ref,
            [QW_Q5_1] = matmul_qr_q5_1_ref,
            [QW_Q4_K] = matmul_qr_q4_k_ref,
            [QW_Q5_K] = matmul_qr_q5_k_ref,
            [QW_Q6_K] = matmul_qr_q6_k_ref,
        },
};
