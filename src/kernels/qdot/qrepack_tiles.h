/* qrepack_tiles.h - private to the matmul_qr kernels whose vectors hold a
 * part of a tile block's 16 rows (qrepack_avx2.c, qrepack_avxvnni.c: two
 * ymm parts of 8 rows, qrepack_ymm.h; qrepack_neon.c: four parts of 4):
 * the tile loops and the block-32 entries of the includer's table
 * (QR_BLOCK32_ENTRIES). What differs per ISA comes from the including file:
 *   QR_PARTS, the float vector qr_vf and vf_* (zero, set1, add, mul,
 *   fmadd = a b + c with one rounding, of_i32, f16: part p's 16-bit d or
 *   m as floats), store_part (rows [lo, hi) of part p);
 *   qr_w, load_part (part p of a tile block's weights, in the form its dot
 *   product wants) and part_isum (one token's block against it: the
 *   reference's exact isum, one int32 lane per row);
 *   qr_xb: a token's block in a form several parts' part_isum can share
 *   (xb; NULL: the part reads it from xq), and, where the includer
 *   defines QR_X_SHARED, x_block to make it (decode then goes block by
 *   block, else part by part).
 *
 * As qrepack_avx512vnni.c (which holds all 16 rows in one zmm): per token,
 * accumulator b % 8 of each part takes one fmadd per block (the
 * reference's float steps per lane) and the final tree is 7 vertical adds,
 * so every row gets qrepack_ref.c's bits, whatever n and the token's place
 * (batch invariant). Decode (one token): the blocks go in groups of 8 and,
 * within a group, part by part, that part's 8 accumulators in registers
 * (the group's tile blocks, at most 5.6 KB, are still in L1 for the next
 * part). More tokens (prefill, batched decode): tokens in groups whose
 * QA8 rows stay in L2 (qr_token_group), and in blocks of up to QR_TB, each part of a tile block loaded and unpacked once per token
 * block, the accumulators in a stack array (L1). A part outside the row
 * range is skipped; rows of a part partly outside it are computed and not
 * stored.
 */
#ifndef QW_QREPACK_TILES_H
#define QW_QREPACK_TILES_H

#define QR_ROWS_PER_PART (QW_RP_ROWS / QR_PARTS)

/* One token's block b on part p of a tile block: the reference's float
 * steps (xb: NULL, or the block as x_block made it). */
INLINE qr_vf block_step(int T, const qr_w *w, qr_vf d, qr_vf m, const uint8_t *xr, int64_t k, int64_t nb, int64_t b,
                        const qr_xb *xb, qr_vf acc) {
    float dx;
    int32_t s;
    memcpy(&dx, xr + k + 4 * b, 4);
    memcpy(&s, xr + k + 4 * nb + 4 * b, 4);
    const qr_vf vdx = vf_set1(dx);
    acc = vf_fmadd(vf_mul(d, vdx), vf_of_i32(part_isum(T, w, xr + 32 * b, xb, s)), acc);
    if (has_min(T)) acc = vf_fmadd(vf_mul(m, vdx), vf_set1((float)s), acc);
    return acc;
}

INLINE qr_vf part_m(int T, const uint8_t *tb, int p) { return has_min(T) ? vf_f16(tb + off_m(T), p) : vf_zero(); }

/* The tree ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), per row. */
INLINE qr_vf tree_rows(const qr_vf a[8]) {
    return vf_add(vf_add(vf_add(a[0], a[4]), vf_add(a[2], a[6])), vf_add(vf_add(a[1], a[5]), vf_add(a[3], a[7])));
}

/* The parts [*p0, *p1) that hold rows of [lo, hi). */
INLINE void parts_of(int lo, int hi, int *p0, int *p1) {
    *p0 = lo / QR_ROWS_PER_PART;
    *p1 = (hi + QR_ROWS_PER_PART - 1) / QR_ROWS_PER_PART;
}

INLINE void prefetch_block(int T, const uint8_t *tb) {
    const int S = tile_block_bytes(T);
    UNROLL
    for (int off = 0; off < S; off += 64) __builtin_prefetch(tb + QR_PF_TILES * S + off);
}

#ifdef QR_X_SHARED
/* One token against a whole tile (decode), where the includer defines
 * QR_X_SHARED (the ymm levels): block by block, the parts sharing one
 * broadcast of the token's block (x_block; vpbroadcastd takes an FP pipe
 * on Zen 3 and these kernels run close to their compute bound on one
 * thread, docs/PERFORMANCE.md), the accumulators in a stack array (L1).
 * The same float steps per accumulator as the version below. */
INLINE void tile_one(int T, float *y, const uint8_t *tile, const uint8_t *xr, int64_t k, int lo, int hi,
                     int64_t pf) {
    const int64_t nb = k / 32;
    const int S = tile_block_bytes(T);
    int p0, p1;
    parts_of(lo, hi, &p0, &p1);
    qr_vf acc[QR_PARTS][8];
    for (int p = 0; p < QR_PARTS; p++)
        UNROLL
    for (int i = 0; i < 8; i++) acc[p][i] = vf_zero();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *tb = tile + b * S;
        prefetch_ahead(tb, pf, S);
        qr_xb xb;
        x_block(xr + 32 * b, &xb);
        for (int p = p0; p < p1; p++) {
            qr_w w;
            load_part(T, tb, p, &w);
            acc[p][b % 8] = block_step(T, &w, vf_f16(tb, p), part_m(T, tb, p), xr, k, nb, b, &xb, acc[p][b % 8]);
        }
    }
    for (int p = p0; p < p1; p++) store_part(y, p, lo, hi, tree_rows(acc[p]));
}
#else
/* One token against a whole tile (decode). The tile is one in-order
 * stream in huge pages (model/repack.c), prefetched pf bytes ahead only
 * where the CPU's prefetchers do not keep up (cpu.c); prefetching
 * QR_PF_TILES blocks ahead cost the avx2 level's decode 3-12% on Zen 4
 * (docs/PERFORMANCE.md). tile_many (prefill, batches) keeps that. */
INLINE void tile_one(int T, float *y, const uint8_t *tile, const uint8_t *xr, int64_t k, int lo, int hi,
                     int64_t pf) {
    const int64_t nb = k / 32;
    const int S = tile_block_bytes(T);
    int p0, p1;
    parts_of(lo, hi, &p0, &p1);
    qr_vf acc[QR_PARTS][8];
    for (int p = 0; p < QR_PARTS; p++)
        UNROLL
    for (int i = 0; i < 8; i++) acc[p][i] = vf_zero();
    for (int64_t g = 0; g < nb; g += 8)
        for (int p = p0; p < p1; p++) {
            qr_vf a[8];
            UNROLL
            for (int i = 0; i < 8; i++) a[i] = acc[p][i];
            UNROLL
            for (int i = 0; i < 8; i++) {
                if (g + i >= nb) break;
                const uint8_t *tb = tile + (g + i) * S;
                if (p == p0) prefetch_ahead(tb, pf, S);
                qr_w w;
                load_part(T, tb, p, &w);
                a[i] = block_step(T, &w, vf_f16(tb, p), part_m(T, tb, p), xr, k, nb, g + i, NULL, a[i]);
            }
            UNROLL
            for (int i = 0; i < 8; i++) acc[p][i] = a[i];
        }
    for (int p = p0; p < p1; p++) store_part(y, p, lo, hi, tree_rows(acc[p]));
}
#endif

/* NT (2..QR_TB) tokens against a whole tile: each part of a tile block
 * unpacked once. */
INLINE void tile_many(int T, float *Y, int64_t ldy, const uint8_t *X, int64_t ldxq, int NT, const uint8_t *tile,
                      int64_t k, int lo, int hi) {
    const int64_t nb = k / 32;
    const int S = tile_block_bytes(T);
    int p0, p1;
    parts_of(lo, hi, &p0, &p1);
    qr_vf acc[QR_TB][QR_PARTS][8];
    for (int t = 0; t < NT; t++)
        for (int p = 0; p < QR_PARTS; p++)
            UNROLL
    for (int i = 0; i < 8; i++) acc[t][p][i] = vf_zero();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *tb = tile + b * S;
        const int a = (int)(b % 8);
        prefetch_block(T, tb);
        for (int p = p0; p < p1; p++) {
            qr_w w;
            load_part(T, tb, p, &w);
            const qr_vf d = vf_f16(tb, p), m = part_m(T, tb, p);
            for (int t = 0; t < NT; t++) acc[t][p][a] = block_step(T, &w, d, m, X + t * ldxq, k, nb, b, NULL, acc[t][p][a]);
        }
    }
    for (int t = 0; t < NT; t++)
        for (int p = p0; p < p1; p++) store_part(Y + t * ldy, p, lo, hi, tree_rows(acc[t][p]));
}

INLINE void matmul_qr_parts(int T, float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                            int64_t k, int64_t o0, int64_t o1) {
    if (o1 <= o0 || n <= 0) return;
    const int64_t tile_bytes = k / 32 * tile_block_bytes(T);
    const uint8_t *X = XQ;
    const int64_t group = qr_token_group(k, QR_TB), pf = kernels_decode_prefetch();
    if (n == 1) prefetch_head(W, tile_bytes, o0, o1, pf);
    for (int64_t g0 = 0; g0 < n; g0 += group) {
        const int64_t g1 = g0 + group < n ? g0 + group : n;
        for (int64_t r = o0 / QW_RP_ROWS; r * QW_RP_ROWS < o1; r++) {
            int lo, hi;
            tile_rows(r, o0, o1, &lo, &hi);
            float *y = Y + r * QW_RP_ROWS;
            const uint8_t *tile = (const uint8_t *)W + r * tile_bytes;
            for (int64_t t0 = g0; t0 < g1; t0 += QR_TB) {
                const int NT = g1 - t0 < QR_TB ? (int)(g1 - t0) : QR_TB;
                if (NT == 1) tile_one(T, y + t0 * ldy, tile, X + t0 * ldxq, k, lo, hi, pf);
                else tile_many(T, y + t0 * ldy, ldy, X + t0 * ldxq, ldxq, NT, tile, k, lo, hi);
            }
        }
    }
}

#define QR_ENTRY(NAME, DT)                                                                                     \
    static void NAME(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W, int64_t k, \
                     int64_t o0, int64_t o1) {                                                                 \
        matmul_qr_parts(DT, Y, ldy, XQ, ldxq, n, W, k, o0, o1);                                                \
    }
QR_ENTRY(matmul_qr_q8_0, QW_Q8_0)
QR_ENTRY(matmul_qr_q4_0, QW_Q4_0)
QR_ENTRY(matmul_qr_q4_1, QW_Q4_1)
QR_ENTRY(matmul_qr_q5_0, QW_Q5_0)
QR_ENTRY(matmul_qr_q5_1, QW_Q5_1)
#undef QR_ENTRY

/* The block-32 entries of the includer's table (which may add its own). */
#define QR_BLOCK32_ENTRIES                                                                                     \
    [QW_Q8_0] = matmul_qr_q8_0, [QW_Q4_0] = matmul_qr_q4_0, [QW_Q4_1] = matmul_qr_q4_1,                        \
    [QW_Q5_0] = matmul_qr_q5_0, [QW_Q5_1] = matmul_qr_q5_1

#endif
