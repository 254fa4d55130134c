/* qrepack_layout.h - private to the matmul_qr kernels (qrepack_ref.c, which
 * writes the layout, and every SIMD level's): the tile-block layouts of
 * qrepack_ref.c (kernels.h: "repacked weights") as offsets that fold for a
 * constant type (block-32, K-quant and Q6_K tile blocks, each in one place
 * here), the activation-sum offset, and which rows of a tile a row range
 * keeps. No intrinsics. The includer defines INLINE, blk_bytes(T) and
 * has_min(T) first (qdot_x86.h does on x86).
 */
#ifndef QW_QREPACK_LAYOUT_H
#define QW_QREPACK_LAYOUT_H

#define QR_TB 32   /* tokens per block of the block-32 prefill loop (16: 3-5% slower) */
#define QR_TB_K 16 /* the same for the K-quant tiles (32: 4-8% slower 1.5B pp512 on Zen 4) */
/* The avx512 K tiles take kernels_k_token_block() tokens per block, up to
 * this: 32 on Zen 5, QR_TB_K elsewhere (cpu.c). */
#define QR_TB_K_MAX QW_K_TOKEN_BLOCK_MAX
#define QR_PF_TILES 2 /* prefetch this many tile blocks ahead */

/* Bytes of QA8 rows a token group of the prefill loops may span: the
 * group's rows stay in L2 while every tile of the row range meets them
 * (down at 512 tokens spans 3.7 MB at k = 4864, and was read again from
 * L3 by every 16-row tile: 18-27% of the matmul, docs/PERFORMANCE.md).
 * 384 KB leaves room for the streaming tile in a Zen 3's 512 KB L2;
 * 128 KB to 768 KB measured the same on a 2 MB one. */
#define QR_GROUP_BYTES (384 * 1024)

/* Tokens per group (a multiple of the loop's token block tb, at least one). */
INLINE int64_t qr_token_group(int64_t k, int64_t tb) {
    const int64_t g = QR_GROUP_BYTES / qw_qa8_row_bytes(k) / tb * tb;
    return g < tb ? tb : g;
}

/* Prefetch the lines of [p, p + bytes): the one-token (decode) tiles ask
 * for their stream kernels_decode_prefetch() bytes ahead (cpu.c says on
 * which CPUs and why); pf = 0 asks for nothing. */
INLINE void prefetch_ahead(const uint8_t *p, int64_t pf, int bytes) {
    if (pf) qw_prefetch_lines(p + pf, bytes);
}

/* The head of a one-token call's stream, the tiles of rows [o0, o1)
 * (tile_bytes each) from W: the tiles prefetch pf bytes ahead of what they
 * read, so the call's first pf bytes are asked for here, or they would be
 * read on demand. Each matmul is cut into shares (forward.c), a stream
 * each: about 1300 stream heads per token of the 0.5B model. */
INLINE void prefetch_head(const void *W, int64_t tile_bytes, int64_t o0, int64_t o1, int64_t pf) {
    const int64_t r0 = o0 / QW_RP_ROWS, r1 = (o1 + QW_RP_ROWS - 1) / QW_RP_ROWS;
    const int64_t bytes = (r1 - r0) * tile_bytes, e = pf < bytes ? pf : bytes;
    qw_prefetch_lines((const uint8_t *)W + r0 * tile_bytes, e);
}

INLINE int has_qh(int T) { return qw_type((qw_dtype)T)->qh_off >= 0; }
/* Offsets in a tile block: d[16] @0, m[16], the qh bit plane (64 bytes), then q. */
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

/* K-quant tile block (Q4_K, Q5_K: 16 rows' super-block): d[16] binary16
 * @0, dmin[16] @32, the 6-bit scales sc[8][16] @64 and mins mn[8][16] @192
 * as bytes, Q5_K's high-bit planes qh[8][64] @320, then per sub-block
 * j four 64-byte nibble vectors (as a block-32 tile block's). */
enum { K_SC = 64, K_MN = 192, K_QH = 320 };
INLINE int k_q(int T) { return K_QH + (T == QW_Q5_K ? 512 : 0); }
INLINE int k_size(int T) { return k_q(T) + 8 * 256; }

/* Q6_K tile block: d[16] @0 (then 32 bytes of padding), sc[16][16] int8
 * @64, then per sub-block j at 320 + 384 j its two high 2-bit planes (2 x
 * 64 bytes) and its 4 low-nibble vectors (qrepack_ref.c says why 3392). */
enum { Q6_SC = 64, Q6_SUB = 320, Q6_SUB_BYTES = 384, Q6_SIZE = 3392 };
INLINE int q6_hi(int j) { return Q6_SUB + Q6_SUB_BYTES * j; }
INLINE int q6_lo(int j) { return Q6_SUB + Q6_SUB_BYTES * j + 128; }

/* The rows [*lo, *hi) of tile r (rows 16r..16r+15) that [o0, o1) covers. */
INLINE void tile_rows(int64_t r, int64_t o0, int64_t o1, int *lo, int *hi) {
    const int64_t base = r * QW_RP_ROWS;
    *lo = o0 > base ? (int)(o0 - base) : 0;
    *hi = o1 < base + QW_RP_ROWS ? (int)(o1 - base) : QW_RP_ROWS;
}

#endif
