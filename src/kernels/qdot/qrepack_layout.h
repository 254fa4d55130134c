/* qrepack_layout.h - private to the SIMD matmul_qr kernels of the block-32
 * types (qrepack_avx512vnni.c, qrepack_avx2.c, qrepack_avxvnni.c,
 * qrepack_neon.c): the tile-block layout of qrepack_ref.c (kernels.h:
 * "repacked weights") as offsets that fold for a constant type, the
 * activation-sum offset, and which rows of a tile a row range keeps. No
 * intrinsics. The includer defines INLINE, blk_bytes(T) and has_min(T)
 * first (qdot_x86.h does on x86).
 */
#ifndef QW_QREPACK_LAYOUT_H
#define QW_QREPACK_LAYOUT_H

#define QR_TB 32   /* tokens per block of the block-32 prefill loop (16: 3-5% slower) */
#define QR_TB_K 16 /* the same for the K-quant tiles (32: 4-8% slower 1.5B pp512) */
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

#endif
