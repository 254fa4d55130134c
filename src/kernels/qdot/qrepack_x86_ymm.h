/* qrepack_x86_ymm.h - private to qrepack_avx2.c and qrepack_avxvnni.c:
 * matmul_qr of the block-32 types with 256-bit vectors, over the including
 * file's weight form qr_w, load_half (half h of a tile block, for its dot)
 * and half_isum (one token's block against it: the reference's exact isum
 * per row, int32 lane i = row 8h + i), which is all that differs between
 * vpmaddubsw + vpmaddwd and AVX-VNNI's vpdpbusd. Then the table
 * QR_YMM_TABLE (a name the file defines).
 *
 * As qrepack_avx512vnni.c, but a tile block's 16 rows are two ymm halves:
 * per token, accumulator b % 8 of each half takes one fmadd per block (the
 * reference's float steps per lane) and the final tree is 7 vertical adds,
 * so every row gets qrepack_ref.c's bits, whatever n and the token's place
 * (batch invariant). Decode (one token): the blocks go in groups of 8, each
 * half's 8 accumulators in registers through the group (the group's tile
 * blocks, at most 5.6 KB, are still in L1 for the second half). More tokens
 * (prefill, and batched decode): tokens in blocks of up to QR_TB, each half
 * tile block loaded and unpacked once per token block, the accumulators in
 * a stack array (L1). A half outside the row range is skipped; rows of a
 * half partly outside it are computed and not stored.
 */
#ifndef QW_QREPACK_X86_YMM_H
#define QW_QREPACK_X86_YMM_H

/* One token's block b on a half tile block: the reference's float steps,
 * on 8 rows at once. */
INLINE __m256 block_step(int T, const qr_w *w, __m256 d, __m256 m, const uint8_t *xr, int64_t k, int64_t nb,
                         int64_t b, __m256 acc) {
    float dx;
    int32_t s;
    memcpy(&dx, xr + k + 4 * b, 4);
    memcpy(&s, xr + k + 4 * nb + 4 * b, 4);
    const __m256i isum = half_isum(T, w, xr + 32 * b, s);
    const __m256 vdx = _mm256_set1_ps(dx);
    acc = _mm256_fmadd_ps(_mm256_mul_ps(d, vdx), _mm256_cvtepi32_ps(isum), acc);
    if (has_min(T)) acc = _mm256_fmadd_ps(_mm256_mul_ps(m, vdx), _mm256_set1_ps((float)s), acc);
    return acc;
}

/* Half h's d (m) of a tile block as floats. */
INLINE __m256 half_f16(const uint8_t *p, int h) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p + 16 * h)));
}
INLINE __m256 half_m(int T, const uint8_t *tb, int h) {
    return has_min(T) ? half_f16(tb + off_m(T), h) : _mm256_setzero_ps();
}

/* The tree ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), per row. */
INLINE __m256 tree_rows(const __m256 a[8]) {
    return _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a[0], a[4]), _mm256_add_ps(a[2], a[6])),
                         _mm256_add_ps(_mm256_add_ps(a[1], a[5]), _mm256_add_ps(a[3], a[7])));
}

/* Rows [lo, hi) of half h's 8 (y: the tile's first row). */
INLINE void store_half(float *y, int h, int lo, int hi, __m256 v) {
    if (lo <= 8 * h && hi >= 8 * h + 8) {
        _mm256_storeu_ps(y + 8 * h, v);
        return;
    }
    const __m256i row = _mm256_add_epi32(_mm256_set1_epi32(8 * h), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256i keep = _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(lo), row),
                                             _mm256_cmpgt_epi32(_mm256_set1_epi32(hi), row));
    _mm256_maskstore_ps(y + 8 * h, keep, v);
}

INLINE void prefetch_block(int T, const uint8_t *tb) {
    const int S = tile_block_bytes(T);
    UNROLL
    for (int off = 0; off < S; off += 64) _mm_prefetch((const char *)(tb + QR_PF_TILES * S + off), _MM_HINT_T0);
}

/* One token against a whole tile (decode). */
INLINE void tile_one(int T, float *y, const uint8_t *tile, const uint8_t *xr, int64_t k, int lo, int hi) {
    const int64_t nb = k / 32;
    const int S = tile_block_bytes(T), h0 = lo >= 8, h1 = hi > 8 ? 2 : 1;
    __m256 acc[2][8];
    for (int h = 0; h < 2; h++)
        UNROLL
    for (int i = 0; i < 8; i++) acc[h][i] = _mm256_setzero_ps();
    for (int64_t g = 0; g < nb; g += 8)
        for (int h = h0; h < h1; h++) {
            __m256 a[8];
            UNROLL
            for (int i = 0; i < 8; i++) a[i] = acc[h][i];
            UNROLL
            for (int i = 0; i < 8; i++) {
                if (g + i >= nb) break;
                const uint8_t *tb = tile + (g + i) * S;
                if (h == h0) prefetch_block(T, tb);
                qr_w w;
                load_half(T, tb, h, &w);
                a[i] = block_step(T, &w, half_f16(tb, h), half_m(T, tb, h), xr, k, nb, g + i, a[i]);
            }
            UNROLL
            for (int i = 0; i < 8; i++) acc[h][i] = a[i];
        }
    for (int h = h0; h < h1; h++) store_half(y, h, lo, hi, tree_rows(acc[h]));
}

/* NT (2..QR_TB) tokens against a whole tile: each half tile block
 * unpacked once. */
INLINE void tile_many(int T, float *Y, int64_t ldy, const uint8_t *X, int64_t ldxq, int NT, const uint8_t *tile,
                      int64_t k, int lo, int hi) {
    const int64_t nb = k / 32;
    const int S = tile_block_bytes(T), h0 = lo >= 8, h1 = hi > 8 ? 2 : 1;
    __m256 acc[QR_TB][2][8];
    for (int t = 0; t < NT; t++)
        for (int h = 0; h < 2; h++)
            UNROLL
    for (int i = 0; i < 8; i++) acc[t][h][i] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *tb = tile + b * S;
        const int a = (int)(b % 8);
        prefetch_block(T, tb);
        for (int h = h0; h < h1; h++) {
            qr_w w;
            load_half(T, tb, h, &w);
            const __m256 d = half_f16(tb, h), m = half_m(T, tb, h);
            for (int t = 0; t < NT; t++) acc[t][h][a] = block_step(T, &w, d, m, X + t * ldxq, k, nb, b, acc[t][h][a]);
        }
    }
    for (int t = 0; t < NT; t++)
        for (int h = h0; h < h1; h++) store_half(Y + t * ldy, h, lo, hi, tree_rows(acc[t][h]));
}

INLINE void matmul_qr_ymm(int T, float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                          int64_t k, int64_t o0, int64_t o1) {
    if (o1 <= o0 || n <= 0) return;
    const int64_t tile_bytes = k / 32 * tile_block_bytes(T);
    const uint8_t *X = XQ;
    for (int64_t r = o0 / QW_RP_ROWS; r * QW_RP_ROWS < o1; r++) {
        int lo, hi;
        tile_rows(r, o0, o1, &lo, &hi);
        float *y = Y + r * QW_RP_ROWS;
        const uint8_t *tile = (const uint8_t *)W + r * tile_bytes;
        for (int64_t t0 = 0; t0 < n; t0 += QR_TB) {
            const int NT = n - t0 < QR_TB ? (int)(n - t0) : QR_TB;
            if (NT == 1) tile_one(T, y + t0 * ldy, tile, X + t0 * ldxq, k, lo, hi);
            else tile_many(T, y + t0 * ldy, ldy, X + t0 * ldxq, ldxq, NT, tile, k, lo, hi);
        }
    }
}

#define QR_ENTRY(NAME, DT)                                                                                     \
    static void NAME(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W, int64_t k, \
                     int64_t o0, int64_t o1) {                                                                 \
        matmul_qr_ymm(DT, Y, ldy, XQ, ldxq, n, W, k, o0, o1);                                                  \
    }
QR_ENTRY(matmul_qr_q8_0, QW_Q8_0)
QR_ENTRY(matmul_qr_q4_0, QW_Q4_0)
QR_ENTRY(matmul_qr_q4_1, QW_Q4_1)
QR_ENTRY(matmul_qr_q5_0, QW_Q5_0)
QR_ENTRY(matmul_qr_q5_1, QW_Q5_1)
#undef QR_ENTRY

const qw_kernels QR_YMM_TABLE = {
    .matmul_qr =
        {
            [QW_Q8_0] = matmul_qr_q8_0,
            [QW_Q4_0] = matmul_qr_q4_0,
            [QW_Q4_1] = matmul_qr_q4_1,
            [QW_Q5_0] = matmul_qr_q5_0,
            [QW_Q5_1] = matmul_qr_q5_1,
        },
};

#endif
