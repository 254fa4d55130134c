/* kquant_x86_tiles.h - private to kquant_avx2.c and kquant_avx512vnni.c:
 * the tiles and row / token loops of their K-quant kernels (see
 * kquant_x86.h for the tiling), over the including file's tok_q6,
 * prep_tok_q6, step_q45 and step_q6. DT (Q4_K, Q5_K, Q6_K) is a constant
 * in every specialised kernel, so each tile holds one type's row and
 * token and the dispatch below folds away.
 */
#ifndef QW_KQUANT_X86_TILES_H
#define QW_KQUANT_X86_TILES_H

/* One row's or one token's super-block, unpacked for the type (only the
 * member of DT's kind is used). */
typedef struct {
    row_q45 q45;
    row_q6 q6;
} kq_row;
typedef struct {
    tok_q45 q45;
    tok_q6 q6;
} kq_tok;

INLINE void kq_prep_row(int DT, kq_row *r, const uint8_t *b) {
    if (DT == QW_Q6_K) prep_row_q6(&r->q6, b);
    else prep_row_q45(&r->q45, b, DT == QW_Q5_K);
}
INLINE void kq_prep_tok(int DT, kq_tok *t, const uint8_t *row, int64_t k, int64_t B) {
    if (DT == QW_Q6_K) prep_tok_q6(&t->q6, row, k, B);
    else prep_tok_q45(&t->q45, row, k, B);
}
INLINE __m256 kq_step(int DT, __m256 acc, const kq_row *r, const kq_tok *t) {
    return DT == QW_Q6_K ? step_q6(acc, &r->q6, &t->q6) : step_q45(acc, &r->q45, &t->q45);
}

/* An R-row x T-token tile over the whole row (R, T constants after inlining). */
INLINE void kq_tile(int DT, float *Y, int64_t ldy, const uint8_t *XQ, int64_t ldxq, const uint8_t *W, int64_t k,
                    int64_t o, int64_t t, const int R, const int T) {
    const int64_t bytes = qw_type((qw_dtype)DT)->bytes, nsb = k / qw_type((qw_dtype)DT)->block, rb = nsb * bytes;
    __m256 acc[TILE_ROWS][TILE_TOKENS];
    UNROLL for (int r = 0; r < R; r++)
        UNROLL for (int u = 0; u < T; u++) acc[r][u] = _mm256_setzero_ps();
    for (int64_t B = 0; B < nsb; B++) {
        kq_tok tk[TILE_TOKENS];
        UNROLL for (int u = 0; u < T; u++) kq_prep_tok(DT, &tk[u], XQ + (t + u) * ldxq, k, B);
        /* one row's unpacked weights live at a time: no spills */
        UNROLL for (int r = 0; r < R; r++) {
            const uint8_t *wb = W + (o + r) * rb + B * bytes;
            kq_row rw;
            prefetch_ahead(wb + 2 * R * rb, (int)bytes);
            kq_prep_row(DT, &rw, wb);
            UNROLL for (int u = 0; u < T; u++) acc[r][u] = kq_step(DT, acc[r][u], &rw, &tk[u]);
        }
    }
    UNROLL for (int r = 0; r < R; r++)
        UNROLL for (int u = 0; u < T; u++) Y[(t + u) * ldy + o + r] = lanes_sum(acc[r][u]);
}

INLINE void kq_rows(int DT, float *Y, int64_t ldy, const uint8_t *XQ, int64_t ldxq, const uint8_t *W, int64_t k,
                    int64_t o, int64_t t0, int64_t t1, const int R) {
    int64_t t = t0;
    for (; t + TILE_TOKENS <= t1; t += TILE_TOKENS) kq_tile(DT, Y, ldy, XQ, ldxq, W, k, o, t, R, TILE_TOKENS);
    /* the rest as 4 + 2 + 1: few tile shapes, each token's result the same in any */
    if (t1 - t >= 4) kq_tile(DT, Y, ldy, XQ, ldxq, W, k, o, t, R, 4), t += 4;
    if (t1 - t >= 2) kq_tile(DT, Y, ldy, XQ, ldxq, W, k, o, t, R, 2), t += 2;
    if (t1 - t >= 1) kq_tile(DT, Y, ldy, XQ, ldxq, W, k, o, t, R, 1);
}

/* matmul_q of type DT on the tiles. */
INLINE void kq_matmul_tiles(int DT, float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                            int64_t k, int64_t o0, int64_t o1) {
    for (int64_t t0 = 0; t0 < n; t0 += TOKEN_BLOCK) {
        const int64_t t1 = t0 + TOKEN_BLOCK < n ? t0 + TOKEN_BLOCK : n;
        int64_t o = o0;
        /* decode (n <= 8): one row at a time, the weights stream as one sequential run */
        if (n > TILE_TOKENS)
            for (; o + TILE_ROWS <= o1; o += TILE_ROWS) kq_rows(DT, Y, ldy, XQ, ldxq, W, k, o, t0, t1, TILE_ROWS);
        for (; o < o1; o++) kq_rows(DT, Y, ldy, XQ, ldxq, W, k, o, t0, t1, 1);
    }
}

#endif
