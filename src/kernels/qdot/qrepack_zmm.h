/* qrepack_zmm.h - private to the AVX-512 matmul_qr kernels
 * (qrepack_avx512vnni.c, qrepack_amx.c): qrepack_ref.c's tile blocks
 * unpacked into zmm registers (lane i, or bytes 4i..4i+3, belong to row i
 * of the tile), the store mask of a partly covered tile and the
 * reference's accumulator tree. The includer
 * includes qdot_x86.h and qrepack_layout.h first.
 */
#ifndef QW_QREPACK_ZMM_H
#define QW_QREPACK_ZMM_H

/* The rows of tile r that [o0, o1) covers, as a store mask. */
INLINE __mmask16 tile_keep(int64_t r, int64_t o0, int64_t o1) {
    int lo, hi;
    tile_rows(r, o0, o1, &lo, &hi);
    return (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
}

/* 4 vectors of nibbles at q as 8 weight vectors: vector v's low nibbles
 * (weights 8v..8v+3 of each row) to w[2v], its high ones to w[2v + 1]. */
INLINE void unpack_nibbles(const uint8_t *q, __m512i w[8]) {
    const __m512i lo4 = _mm512_set1_epi8(15);
    UNROLL
    for (int v = 0; v < 4; v++) {
        __m512i z = _mm512_loadu_si512((const void *)(q + 64 * v));
        w[2 * v] = _mm512_and_si512(z, lo4);
        w[2 * v + 1] = _mm512_and_si512(_mm512_srli_epi16(z, 4), lo4);
    }
}

/* Bit 4 of every weight from the 64-byte bit plane at plane (bit j of
 * byte n: the high bit of byte n of w[j]): a test for bit j gives w[j]'s
 * mask, one masked add puts it in. */
INLINE void add_high_bits(const uint8_t *plane, __m512i w[8]) {
    const __m512i sixteen = _mm512_set1_epi8(16), P = _mm512_loadu_si512((const void *)plane);
    UNROLL
    for (int j = 0; j < 8; j++)
        w[j] = _mm512_mask_add_epi8(w[j], _mm512_test_epi8_mask(P, _mm512_set1_epi8((char)(1 << j))), w[j], sixteen);
}

/* A tile block's 8 weight vectors (lane i: 4 unsigned weights of row i). */
INLINE void unpack(int T, const uint8_t *tb, __m512i w[8]) {
    const uint8_t *q = tb + off_q(T);
    if (T == QW_Q8_0) {
        UNROLL
        for (int j = 0; j < 8; j++) w[j] = _mm512_loadu_si512((const void *)(q + 64 * j));
        return;
    }
    unpack_nibbles(q, w);
    if (has_qh(T)) {
        add_high_bits(tb + off_qh(T), w);
    }
}

/* The tree ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), per row. */
INLINE __m512 tree16(const __m512 a[8]) {
    return _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a[0], a[4]), _mm512_add_ps(a[2], a[6])),
                         _mm512_add_ps(_mm512_add_ps(a[1], a[5]), _mm512_add_ps(a[3], a[7])));
}

/* ---- K-quant tile blocks (qrepack_layout.h's K layout) */
/* Sub-block j's 8 weight vectors. */
INLINE void unpack_k(int T, const uint8_t *tb, int j, __m512i w[8]) {
    const uint8_t *q = tb + k_q(T) + 256 * j;
    unpack_nibbles(q, w);
    if (T == QW_Q5_K) {
        add_high_bits(tb + K_QH + 64 * j, w);
    }
}

/* 16 unsigned bytes as floats (exact). */
INLINE __m512 k_bytes(const uint8_t *p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p)));
}

/* ---- Q6_K tile blocks (qrepack_layout.h's Q6_K layout) */
INLINE void unpack_q6(const uint8_t *tb, int j, __m512i w[8]) {
    unpack_nibbles(tb + q6_lo(j), w);
    UNROLL
    for (int h = 0; h < 2; h++) {
        const __m512i H = _mm512_loadu_si512((const void *)(tb + q6_hi(j) + 64 * h));
        /* bits 2m..2m+1 of each byte to bits 4..5 (masked first: nothing crosses a byte) */
        w[4 * h + 0] = _mm512_or_si512(w[4 * h + 0], _mm512_slli_epi16(_mm512_and_si512(H, _mm512_set1_epi8(0x03)), 4));
        w[4 * h + 1] = _mm512_or_si512(w[4 * h + 1], _mm512_slli_epi16(_mm512_and_si512(H, _mm512_set1_epi8(0x0c)), 2));
        w[4 * h + 2] = _mm512_or_si512(w[4 * h + 2], _mm512_and_si512(H, _mm512_set1_epi8(0x30)));
        w[4 * h + 3] = _mm512_or_si512(w[4 * h + 3],
                                       _mm512_srli_epi16(_mm512_and_si512(H, _mm512_set1_epi8((char)0xc0)), 2));
    }
}

INLINE __m512i sc_bytes(const uint8_t *p) { return _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)); }

#endif
