/* qdot_x86_decode.h - private to qdot_avx2.c and qdot_avx512vnni.c: the
 * decode loop (one row at a time, one sequential weight stream, against
 * chunks of up to 4 tokens that share each unpacked group). Included after
 * the file's own wgroup / xgroup, load_group, load_x and group_dot, which
 * it runs; every path of either file gives the reference's bits.
 */
#ifndef QW_QDOT_X86_DECODE_H
#define QW_QDOT_X86_DECODE_H

/* One row against NT (1..4) tokens. */
INLINE void row_tokens(int T, int NT, float *Y, int64_t ldy, const uint8_t *X0, int64_t ldxq, const uint8_t *w,
                       int64_t k) {
    const int64_t nb = k / 32;
    const int B = blk_bytes(T);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t g = 0; g * 8 < nb; g++) {
        int nbl = nb - 8 * g >= 8 ? 8 : (int)(nb - 8 * g);
        const uint8_t *wg = w + 8 * g * B;
        UNROLL
        for (int off = 0; off < 8 * B; off += 64) _mm_prefetch((const char *)(wg + PF_DIST + off), _MM_HINT_T0);
        wgroup wv;
        load_group(T, &wv, wg, nbl);
        UNROLL
        for (int t = 0; t < NT; t++) {
            xgroup xv;
            load_x(&xv, X0 + t * ldxq, k, nb, g, nbl);
            acc[t] = group_dot(T, &wv, &xv, acc[t]);
        }
    }
    UNROLL
    for (int t = 0; t < NT; t++) Y[t * ldy] = tree(acc[t]);
}

INLINE void matmul_q_decode(int T, float *Y, int64_t ldy, const uint8_t *X, int64_t ldxq, int64_t n, const void *W,
                            int64_t k, int64_t o0, int64_t o1) {
    const int64_t rb = k / 32 * blk_bytes(T);
    for (int64_t t0 = 0; t0 < n; t0 += TOK_BLOCK) {
        int64_t t1 = t0 + TOK_BLOCK < n ? t0 + TOK_BLOCK : n;
        for (int64_t o = o0; o < o1; o++) {
            const uint8_t *w = (const uint8_t *)W + o * rb;
            int64_t t = t0;
            for (; t + 4 <= t1; t += 4) row_tokens(T, 4, Y + t * ldy + o, ldy, X + t * ldxq, ldxq, w, k);
            switch (t1 - t) {
            case 3: row_tokens(T, 3, Y + t * ldy + o, ldy, X + t * ldxq, ldxq, w, k); break;
            case 2: row_tokens(T, 2, Y + t * ldy + o, ldy, X + t * ldxq, ldxq, w, k); break;
            case 1: row_tokens(T, 1, Y + t * ldy + o, ldy, X + t * ldxq, ldxq, w, k); break;
            default: break;
            }
        }
    }
}

#endif
