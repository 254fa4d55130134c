/* qrepack_ymm.h - private to qrepack_avx2.c and qrepack_avxvnni.c: a
 * 16-row tile block as two ymm parts of 8 rows (part p: the 32 bytes at
 * 32p of each 64-byte weight vector, rows 8p..8p+7, int32 lane i of row
 * 8p + i), and the float vector of a part for qrepack_tiles.h. Included
 * after qdot_x86.h and qrepack_layout.h.
 */
#ifndef QW_QREPACK_YMM_H
#define QW_QREPACK_YMM_H

#define QR_PARTS 2
typedef __m256 qr_vf;

/* The high bits of weight vector j (16 where set) from part p's 32 bytes
 * of a bit plane (bit j of byte n: the high bit of byte n of vector j):
 * one shift and one and, where a mask per vector took six operations
 * (qdot_x86.h's high_bits); the shifts are of 16-bit lanes, but only bit
 * j of a byte lands on that byte's bit 4. */
INLINE __m256i plane_high_bits(__m256i P, int j) {
    const __m256i s = j < 4 ? _mm256_slli_epi16(P, 4 - j) : j > 4 ? _mm256_srli_epi16(P, j - 4) : P;
    return _mm256_and_si256(s, _mm256_set1_epi8(16));
}
INLINE void add_plane(const uint8_t *plane, int p, __m256i u[8]) {
    const __m256i P = _mm256_loadu_si256((const __m256i *)(const void *)(plane + 32 * p));
    UNROLL
    for (int j = 0; j < 8; j++) u[j] = _mm256_or_si256(u[j], plane_high_bits(P, j));
}

/* Part p's 8 weight vectors as stored, unsigned (lane: 4 weights of a
 * row; Q8_0: q + 128; the others: nibble plus 16 for a set high bit). */
INLINE void unpack_part_u(int T, const uint8_t *tb, int p, __m256i u[8]) {
    const uint8_t *q = tb + off_q(T) + 32 * p;
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
    if (has_qh(T)) add_plane(tb + off_qh(T), p, u);
}

/* Activation dword j of a block (4 quants at xq + 4 j), in every lane;
 * x_at: xb[j] where the caller broadcast the block's dwords once for
 * both parts (xb != NULL: the decode loops of qrepack_tiles.h and
 * qrepack_ktiles_ymm.h), else x_dword. */
INLINE __m256i x_dword(const uint8_t *xq, int j) { return _mm256_set1_epi32((int)ld_u32(xq + 4 * j)); }
INLINE __m256i x_at(const uint8_t *xq, const __m256i *xb, int j) { return xb ? xb[j] : x_dword(xq, j); }

/* A token's block, its 8 dwords each in every lane, made once for the two
 * parts of a decode step (qrepack_tiles.h's QR_X_SHARED: vpbroadcastd
 * takes an FP pipe on Zen 3, so broadcasting per part cost the decode
 * loops, which run close to their compute bound on one thread). */
typedef struct {
    __m256i v[8];
} qr_xb;
#define QR_X_SHARED 1
INLINE void x_block(const uint8_t *xq, qr_xb *xb) {
    UNROLL
    for (int j = 0; j < 8; j++) xb->v[j] = x_dword(xq, j);
}

INLINE qr_vf vf_zero(void) { return _mm256_setzero_ps(); }
INLINE qr_vf vf_set1(float x) { return _mm256_set1_ps(x); }
INLINE qr_vf vf_add(qr_vf a, qr_vf b) { return _mm256_add_ps(a, b); }
INLINE qr_vf vf_mul(qr_vf a, qr_vf b) { return _mm256_mul_ps(a, b); }
INLINE qr_vf vf_fmadd(qr_vf a, qr_vf b, qr_vf c) { return _mm256_fmadd_ps(a, b, c); } /* a b + c, one rounding */
INLINE qr_vf vf_of_i32(__m256i v) { return _mm256_cvtepi32_ps(v); }
/* Part p's 8 binary16 of the 16 at p16 (d or m), as floats. */
INLINE qr_vf vf_f16(const uint8_t *p16, int p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p16 + 16 * p)));
}

/* Part p's 8 rows of a signed byte each (at p8: Q6_K's scales), as int32. */
INLINE __m256i q6_sc_i32(const uint8_t *p8) {
    return _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p8));
}

/* Rows [lo, hi) of part p's 8 (y: the tile's first row). */
INLINE void store_part(float *y, int p, int lo, int hi, qr_vf v) {
    if (lo <= 8 * p && hi >= 8 * p + 8) {
        _mm256_storeu_ps(y + 8 * p, v);
        return;
    }
    const __m256i row = _mm256_add_epi32(_mm256_set1_epi32(8 * p), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256i keep = _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(lo), row),
                                             _mm256_cmpgt_epi32(_mm256_set1_epi32(hi), row));
    _mm256_maskstore_ps(y + 8 * p, keep, v);
}

#endif
