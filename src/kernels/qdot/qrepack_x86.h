/* qrepack_x86.h - private to the x86 matmul_qr kernels of the block-32
 * types (qrepack_avx512vnni.c, and qrepack_avx2.c / qrepack_avxvnni.c
 * through qrepack_x86_ymm.h): the tile-block layout of qrepack_ref.c
 * (kernels.h: "repacked weights") as offsets that fold for a constant
 * type, the activation-sum offset, and which rows of a tile a row range
 * keeps. Included after qdot_x86.h (INLINE, blk_bytes, has_min).
 */
#ifndef QW_QREPACK_X86_H
#define QW_QREPACK_X86_H

#define QR_TB 16      /* tokens per block of the prefill loop */
#define QR_PF_TILES 2 /* prefetch this many tile blocks ahead */

INLINE int has_qh(int T) { return qw_type((qw_dtype)T)->qh_off >= 0; }
/* Offsets in a tile block: d[16] @0, m[16], qh[8] masks, then q. */
INLINE int off_m(int T) { return 32; }
INLINE int off_qh(int T) { return has_min(T) ? 64 : 32; }
INLINE int off_q(int T) { return off_qh(T) + (has_qh(T) ? 64 : 0); }
INLINE int tile_block_bytes(int T) { return QW_RP_ROWS * blk_bytes(T); }

/* log2 of what sum(w_unsigned * qx) exceeds isum by, in units of the
 * block's activation sum s (Q8_0: stored + 128; Q4_0 / Q5_0: their zero;
 * -1: nothing, the types with a min). */
INLINE int off_log2(int T) {
    const int z = T == QW_Q8_0 ? 128 : qw_type((qw_dtype)T)->zero;
    return z == 128 ? 7 : z == 16 ? 4 : z == 8 ? 3 : -1;
}

/* The rows [*lo, *hi) of tile r (rows 16r..16r+15) that [o0, o1) covers. */
INLINE void tile_rows(int64_t r, int64_t o0, int64_t o1, int *lo, int *hi) {
    const int64_t base = r * QW_RP_ROWS;
    *lo = o0 > base ? (int)(o0 - base) : 0;
    *hi = o1 < base + QW_RP_ROWS ? (int)(o1 - base) : QW_RP_ROWS;
}

/* ---- ymm (qrepack_avx2.c, qrepack_avxvnni.c): a 16-row tile block is
 * two halves of 8 rows, half h one ymm per weight vector (its 32 bytes at
 * 32 h of each 64-byte vector: rows 8h..8h+7, lane i - 8h of row i). */

/* Half h's 8 weight vectors as stored, unsigned (lane: 4 weights of a
 * row; Q8_0: q + 128; the others: nibble plus 16 for a set high bit). */
INLINE void unpack_half_u(int T, const uint8_t *tb, int h, __m256i u[8]) {
    const uint8_t *q = tb + off_q(T) + 32 * h;
    if (T == QW_Q8_0) {
        UNROLL
        for (int j = 0; j < 8; j++) u[j] = _mm256_loadu_si256((const __m256i *)(const void *)(q + 64 * j));
        return;
    }
    const __m256i lo4 = _mm256_set1_epi8(15);
    UNROLL
    for (int v = 0; v < 4; v++) { /* low nibbles: vector 2v, high: 2v + 1 */
        const __m256i z = _mm256_loadu_si256((const __m256i *)(const void *)(q + 64 * v));
        u[2 * v] = _mm256_and_si256(z, lo4);
        u[2 * v + 1] = _mm256_and_si256(_mm256_srli_epi16(z, 4), lo4);
    }
    if (has_qh(T)) { /* mask j's bits 32h..32h+31: byte n of the half is bit 32h + n */
        UNROLL
        for (int j = 0; j < 8; j++) u[j] = _mm256_or_si256(u[j], high_bits(ld_u32(tb + off_qh(T) + 8 * j + 4 * h)));
    }
}

#endif
