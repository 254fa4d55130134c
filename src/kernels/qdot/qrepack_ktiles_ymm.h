/* qrepack_ktiles_ymm.h - private to qrepack_avx2.c and qrepack_avxvnni.c:
 * the tile loops of the K-quants (Q4_K, Q5_K, Q6_K) on qrepack_layout.h's
 * K and Q6_K tile blocks, as two ymm parts of 8 rows (qrepack_ymm.h), and
 * the entries of the includer's table (QR_KQUANT_ENTRIES). What differs
 * per ISA is the integer dot product, from the including file:
 *   rk_dot(T, u, xq, xb): part p of sub-block j (u, 8 vectors of
 *     unsigned weights) against one token's block of 32 activations at
 *     xq: the exact int32 sum per row (xb: NULL, or the block's 8 dwords
 *     already broadcast, x_at in qrepack_ymm.h);
 *   q6_sc, q6_scales(tb, j, p, &s): sub-block j's two signed 6-bit scales
 *     of part p's rows, in the form q6_isum wants, once per tile block;
 *   q6_isum(u, &s, xq, xb, h): Q6_K's isum = sc_2j half_0 + sc_2j+1 half_1 as
 *     floats (exact: integers below 2^24), half = sum (q - 32) qx over 16
 *     weights, with h = the two halves' activation sums (the QA8 row's h
 *     section, kernels.h; xb[8], where xb is given, the pair broadcast).
 *
 * The float steps are qrepack_ref.c's (kquant_ref.c's), per row lane:
 *   Q4_K, Q5_K: dsc = d sc and dmn = dmin mn once per tile block and part,
 *     acc[j] = fmaf(dx, dsc dot, acc[j]), acc[j] = fmaf(-dmn, ds, acc[j]);
 *   Q6_K: acc[j] = fmaf(d dx, isum, acc[j]);
 * then tree_rows, so every row gets the reference's bits whatever n
 * (batch invariant). Tokens go in blocks of QR_TB_K, each part of a tile
 * block unpacked once per token block (rk_tile, tile_q6); decode (one
 * token: rk_one, q6_one) goes sub-block by sub-block, both parts under one
 * broadcast of the token's block, as the same steps per accumulator.
 * Without these tiles the avx2 level ran the row tiles of
 * kquant_avx2.c, whose horizontal sums per row and token left the real
 * 1.5B's prefill at 0.95x an AVX2 build of llama.cpp (Q4_K, Q5_K), and
 * its Q6_K matmuls (ffn_down and attn_v in half the layers, the 1.5B's
 * lm_head) at 1.6x the Q4_K ones per weight (docs/PERFORMANCE.md).
 * Included after qrepack_tiles.h.
 */
#ifndef QW_QREPACK_KTILES_YMM_H
#define QW_QREPACK_KTILES_YMM_H

INLINE void rk_nibbles(const uint8_t *q, int p, __m256i u[8]) {
    const __m256i lo4 = _mm256_set1_epi8(15);
    UNROLL
    for (int v = 0; v < 4; v++) { /* low nibbles: vector 2v, high: 2v + 1 */
        const __m256i z = _mm256_loadu_si256((const __m256i *)(const void *)(q + 64 * v + 32 * p));
        u[2 * v] = _mm256_and_si256(z, lo4);
        u[2 * v + 1] = _mm256_and_si256(_mm256_srli_epi16(z, 4), lo4);
    }
}

/* Part p of sub-block j's 8 weight vectors (lane: 4 weights of a row). */
INLINE void rk_unpack(int T, const uint8_t *tb, int j, int p, __m256i u[8]) {
    rk_nibbles(tb + k_q(T) + 256 * j, p, u);
    if (T == QW_Q5_K) add_plane(tb + K_QH + 64 * j, p, u);
}

/* Part p's 8 rows of sub-block j's 6-bit scale (or min) bytes, as floats. */
INLINE __m256 rk_bytes(const uint8_t *p8) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p8)));
}

/* NT tokens (2 .. QR_TB_K) against a whole K tile. */
INLINE void rk_tile(int T, float *Y, int64_t ldy, const uint8_t *X, int64_t ldxq, int NT, const uint8_t *tile,
                    int64_t k, int lo, int hi) {
    const int64_t nsb = k / 256, nb = k / 32;
    const int S = k_size(T);
    int p0, p1;
    parts_of(lo, hi, &p0, &p1);
    __m256 acc[QR_TB_K][QR_PARTS][8];
    for (int t = 0; t < NT; t++)
        for (int p = 0; p < QR_PARTS; p++)
            UNROLL
    for (int i = 0; i < 8; i++) acc[t][p][i] = _mm256_setzero_ps();
    for (int64_t B = 0; B < nsb; B++) {
        const uint8_t *tb = tile + B * S;
        for (int p = p0; p < p1; p++) {
            const __m256 d = vf_f16(tb, p), dmin = vf_f16(tb + 32, p);
            UNROLL
            for (int j = 0; j < 8; j++) {
                __m256i u[8];
                rk_unpack(T, tb, j, p, u);
                const __m256 dsc = _mm256_mul_ps(d, rk_bytes(tb + K_SC + 16 * j + 8 * p));
                const __m256 dmn = _mm256_mul_ps(dmin, rk_bytes(tb + K_MN + 16 * j + 8 * p));
                const int64_t b = 8 * B + j;
                for (int t = 0; t < NT; t++) {
                    const uint8_t *xr = X + t * ldxq;
                    float dx, ds;
                    memcpy(&dx, xr + k + 4 * b, 4);
                    memcpy(&ds, xr + k + 8 * nb + 4 * b, 4);
                    __m256 a = acc[t][p][j];
                    a = _mm256_fmadd_ps(_mm256_set1_ps(dx),
                                        _mm256_mul_ps(dsc, _mm256_cvtepi32_ps(rk_dot(T, u, xr + 32 * b, NULL))), a);
                    acc[t][p][j] = _mm256_fnmadd_ps(dmn, _mm256_set1_ps(ds), a); /* -(dmn ds) + a, one rounding */
                }
            }
        }
    }
    for (int t = 0; t < NT; t++)
        for (int p = p0; p < p1; p++) store_part(Y + t * ldy, p, lo, hi, tree_rows(acc[t][p]));
}

/* Part p of Q6_K sub-block j's 8 weight vectors, q in 0..63: vector m
 * (weights 4m..4m+3 of each row) has its low nibbles as a K block's and
 * its high two bits at bits 2(m % 4) of high plane m / 4. */
INLINE void q6_unpack(const uint8_t *tb, int j, int p, __m256i u[8]) {
    rk_nibbles(tb + q6_lo(j), p, u);
    UNROLL
    for (int h = 0; h < 2; h++) {
        const __m256i H = _mm256_loadu_si256((const __m256i *)(const void *)(tb + q6_hi(j) + 64 * h + 32 * p));
        /* bits 2m..2m+1 of each byte to bits 4..5 (masked first: nothing crosses a byte) */
        u[4 * h + 0] = _mm256_or_si256(u[4 * h + 0], _mm256_slli_epi16(_mm256_and_si256(H, _mm256_set1_epi8(0x03)), 4));
        u[4 * h + 1] = _mm256_or_si256(u[4 * h + 1], _mm256_slli_epi16(_mm256_and_si256(H, _mm256_set1_epi8(0x0c)), 2));
        u[4 * h + 2] = _mm256_or_si256(u[4 * h + 2], _mm256_and_si256(H, _mm256_set1_epi8(0x30)));
        u[4 * h + 3] = _mm256_or_si256(u[4 * h + 3],
                                       _mm256_srli_epi16(_mm256_and_si256(H, _mm256_set1_epi8((char)0xc0)), 2));
    }
}

INLINE void tile_q6(float *Y, int64_t ldy, const uint8_t *X, int64_t ldxq, int NT, const uint8_t *tile, int64_t k,
                    int lo, int hi) {
    const int64_t nsb = k / 256, nb = k / 32;
    int p0, p1;
    parts_of(lo, hi, &p0, &p1);
    __m256 acc[QR_TB_K][QR_PARTS][8];
    for (int t = 0; t < NT; t++)
        for (int p = 0; p < QR_PARTS; p++)
            UNROLL
    for (int i = 0; i < 8; i++) acc[t][p][i] = _mm256_setzero_ps();
    for (int64_t B = 0; B < nsb; B++) {
        const uint8_t *tb = tile + B * Q6_SIZE;
        for (int p = p0; p < p1; p++) {
            const __m256 d = vf_f16(tb, p);
            UNROLL
            for (int j = 0; j < 8; j++) {
                __m256i u[8];
                q6_unpack(tb, j, p, u);
                q6_sc s;
                q6_scales(tb, j, p, &s);
                const int64_t b = 8 * B + j;
                for (int t = 0; t < NT; t++) {
                    const uint8_t *xr = X + t * ldxq;
                    float dx;
                    int16_t h[2];
                    memcpy(&dx, xr + k + 4 * b, 4);
                    memcpy(h, xr + k + 12 * nb + 4 * b, 4);
                    const __m256 isum = q6_isum(u, &s, xr + 32 * b, NULL, h);
                    acc[t][p][j] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(dx)), isum, acc[t][p][j]);
                }
            }
        }
    }
    for (int t = 0; t < NT; t++)
        for (int p = p0; p < p1; p++) store_part(Y + t * ldy, p, lo, hi, tree_rows(acc[t][p]));
}

/* One token (decode), Q4_K / Q5_K: rk_tile's steps per part and
 * sub-block, in the order sub-block, then part, so the two parts share one
 * broadcast of the block's 8 activation dwords and of dx and ds (rk_tile
 * broadcasts them per part and token: the K types' decode was compute
 * bound on one thread, docs/PERFORMANCE.md). Same float steps per
 * accumulator, so the same bits. */
INLINE void rk_one(int T, float *y, const uint8_t *xr, const uint8_t *tile, int64_t k, int lo, int hi, int64_t pf) {
    const int64_t nsb = k / 256, nb = k / 32;
    const int S = k_size(T);
    int p0, p1;
    parts_of(lo, hi, &p0, &p1);
    __m256 acc[QR_PARTS][8];
    for (int p = 0; p < QR_PARTS; p++)
        UNROLL
    for (int i = 0; i < 8; i++) acc[p][i] = _mm256_setzero_ps();
    for (int64_t B = 0; B < nsb; B++) {
        const uint8_t *tb = tile + B * S;
        UNROLL
        for (int j = 0; j < 8; j++) {
            prefetch_ahead(tb + j * (S / 8), pf, S / 8);
            const int64_t b = 8 * B + j;
            const uint8_t *xq = xr + 32 * b;
            qr_xb xb;
            x_block(xq, &xb);
            float dx, ds;
            memcpy(&dx, xr + k + 4 * b, 4);
            memcpy(&ds, xr + k + 8 * nb + 4 * b, 4);
            const __m256 vdx = _mm256_set1_ps(dx), vds = _mm256_set1_ps(ds);
            for (int p = p0; p < p1; p++) {
                __m256i u[8];
                rk_unpack(T, tb, j, p, u);
                const __m256 dsc = _mm256_mul_ps(vf_f16(tb, p), rk_bytes(tb + K_SC + 16 * j + 8 * p));
                const __m256 dmn = _mm256_mul_ps(vf_f16(tb + 32, p), rk_bytes(tb + K_MN + 16 * j + 8 * p));
                __m256 a = _mm256_fmadd_ps(vdx, _mm256_mul_ps(dsc, _mm256_cvtepi32_ps(rk_dot(T, u, xq, xb.v))), acc[p][j]);
                acc[p][j] = _mm256_fnmadd_ps(dmn, vds, a);
            }
        }
    }
    for (int p = p0; p < p1; p++) store_part(y, p, lo, hi, tree_rows(acc[p]));
}

/* One token (decode), Q6_K: tile_q6's steps in rk_one's order, the parts
 * sharing the broadcast dwords, the h pair (xb[8]) and dx. */
INLINE void q6_one(float *y, const uint8_t *xr, const uint8_t *tile, int64_t k, int lo, int hi, int64_t pf) {
    const int64_t nsb = k / 256, nb = k / 32;
    int p0, p1;
    parts_of(lo, hi, &p0, &p1);
    __m256 acc[QR_PARTS][8];
    for (int p = 0; p < QR_PARTS; p++)
        UNROLL
    for (int i = 0; i < 8; i++) acc[p][i] = _mm256_setzero_ps();
    for (int64_t B = 0; B < nsb; B++) {
        const uint8_t *tb = tile + B * Q6_SIZE;
        UNROLL
        for (int j = 0; j < 8; j++) {
            prefetch_ahead(tb + j * (Q6_SIZE / 8), pf, Q6_SIZE / 8);
            const int64_t b = 8 * B + j;
            const uint8_t *xq = xr + 32 * b, *h = xr + k + 12 * nb + 4 * b;
            __m256i xb[9]; /* x_block's 8, then the h pair */
            UNROLL
            for (int i = 0; i < 8; i++) xb[i] = x_dword(xq, i);
            xb[8] = x_dword(h, 0);
            int16_t hh[2];
            memcpy(hh, h, 4);
            float dx;
            memcpy(&dx, xr + k + 4 * b, 4);
            const __m256 vdx = _mm256_set1_ps(dx);
            for (int p = p0; p < p1; p++) {
                __m256i u[8];
                q6_unpack(tb, j, p, u);
                q6_sc s;
                q6_scales(tb, j, p, &s);
                const __m256 isum = q6_isum(u, &s, xq, xb, hh);
                acc[p][j] = _mm256_fmadd_ps(_mm256_mul_ps(vf_f16(tb, p), vdx), isum, acc[p][j]);
            }
        }
    }
    for (int p = p0; p < p1; p++) store_part(y, p, lo, hi, tree_rows(acc[p]));
}

/* T: Q4_K, Q5_K or Q6_K. */
INLINE void matmul_qr_k(int T, float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                        int64_t k, int64_t o0, int64_t o1) {
    if (o1 <= o0 || n <= 0) return;
    const int64_t tile_bytes = k / 256 * (T == QW_Q6_K ? Q6_SIZE : k_size(T));
    const uint8_t *X = XQ;
    const int64_t group = qr_token_group(k, QR_TB_K), pf = kernels_decode_prefetch();
    if (n == 1) prefetch_head(W, tile_bytes, o0, o1, pf);
    for (int64_t g0 = 0; g0 < n; g0 += group) {
        const int64_t g1 = g0 + group < n ? g0 + group : n;
        for (int64_t r = o0 / QW_RP_ROWS; r * QW_RP_ROWS < o1; r++) {
            int lo, hi;
            tile_rows(r, o0, o1, &lo, &hi);
            float *y = Y + r * QW_RP_ROWS;
            const uint8_t *tile = (const uint8_t *)W + r * tile_bytes;
            for (int64_t t0 = g0; t0 < g1; t0 += QR_TB_K) {
                const int NT = g1 - t0 < QR_TB_K ? (int)(g1 - t0) : QR_TB_K;
                if (T == QW_Q6_K) {
                    if (NT == 1) q6_one(y + t0 * ldy, X + t0 * ldxq, tile, k, lo, hi, pf);
                    else tile_q6(y + t0 * ldy, ldy, X + t0 * ldxq, ldxq, NT, tile, k, lo, hi);
                } else {
                    if (NT == 1) rk_one(T, y + t0 * ldy, X + t0 * ldxq, tile, k, lo, hi, pf);
                    else rk_tile(T, y + t0 * ldy, ldy, X + t0 * ldxq, ldxq, NT, tile, k, lo, hi);
                }
            }
        }
    }
}

#define QR_K_ENTRY(NAME, DT)                                                                                   \
    static void NAME(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W, int64_t k, \
                     int64_t o0, int64_t o1) {                                                                 \
        matmul_qr_k(DT, Y, ldy, XQ, ldxq, n, W, k, o0, o1);                                                    \
    }
QR_K_ENTRY(matmul_qr_q4_k, QW_Q4_K)
QR_K_ENTRY(matmul_qr_q5_k, QW_Q5_K)
QR_K_ENTRY(matmul_qr_q6_k, QW_Q6_K)
#undef QR_K_ENTRY

/* The K-quant entries of the includer's table. */
#define QR_KQUANT_ENTRIES [QW_Q4_K] = matmul_qr_q4_k, [QW_Q5_K] = matmul_qr_q5_k, [QW_Q6_K] = matmul_qr_q6_k

#endif
