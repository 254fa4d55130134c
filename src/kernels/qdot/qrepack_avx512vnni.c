/* qrepack_avx512vnni.c - matmul_qr with AVX-512 VNNI: the integer path of
 * the block-32 types on repacked weights (kernels.h: "repacked weights";
 * the layout is qrepack_ref.c's, whose float steps it reproduces bit for
 * bit). Installed into the avx512 table only when cpu.c sets
 * QW_CPU_AVX512VNNI.
 *
 * A tile block (16 rows' block b) unpacks to 8 zmm whose int32 lane i holds
 * 4 weights of row i; 8 vpdpbusd against the token's 8 activation dwords,
 * each broadcast to every lane, leave each row's exact block sum in its own
 * lane, with no horizontal reduction and no shuffle. One fmadd per block
 * applies d * dx to the 16 rows at once into accumulator b % 8 (a vector of
 * 16 rows), and the final tree is 7 vertical adds: the reference's steps,
 * per lane. The tile's weights are one sequential stream (decode: ~1.5x
 * fewer instructions per weight byte than the row-at-a-time path of
 * qdot_avx512vnni.c, whose reduction and unpacking limit Q5_0 and Q4_0).
 *
 * Tokens go in blocks of up to TB; each tile block is unpacked once per
 * token block and meets every token of it, whose 8 accumulators per tile
 * live in a small stack array (L1). Every token, whatever n and its place,
 * gets the same operations: batch invariant. Rows outside [o0, o1) of a
 * partly covered tile are computed and not stored.
 */
#include "kernels/kernels_impl.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16")

#define TB 16             /* tokens per block */
#define PF_TILES 2        /* prefetch this many tile blocks ahead */

INLINE int blk_bytes(int T) { return qw_type((qw_dtype)T)->bytes; }
INLINE int has_min(int T) { return qw_type((qw_dtype)T)->m_off >= 0; }
INLINE int has_qh(int T) { return qw_type((qw_dtype)T)->qh_off >= 0; }
/* Offsets in a tile block (qrepack_ref.c's layout). */
INLINE int off_m(int T) { return 32; }
INLINE int off_qh(int T) { return has_min(T) ? 64 : 32; }
INLINE int off_q(int T) { return off_qh(T) + (has_qh(T) ? 64 : 0); }
/* log2 of what sum(w_unsigned * qx) exceeds isum by, in units of s (-1: nothing). */
INLINE int off_log2(int T) {
    const int z = T == QW_Q8_0 ? 128 : qw_type((qw_dtype)T)->zero;
    return z == 128 ? 7 : z == 16 ? 4 : z == 8 ? 3 : -1;
}

/* A tile block's 8 weight vectors (lane i: 4 unsigned weights of row i). */
INLINE void unpack(int T, const uint8_t *tb, __m512i w[8]) {
    const uint8_t *q = tb + off_q(T);
    if (T == QW_Q8_0) {
        UNROLL
        for (int j = 0; j < 8; j++) w[j] = _mm512_loadu_si512((const void *)(q + 64 * j));
        return;
    }
    const __m512i lo4 = _mm512_set1_epi8(15);
    UNROLL
    for (int v = 0; v < 4; v++) {
        __m512i z = _mm512_loadu_si512((const void *)(q + 64 * v));
        w[2 * v] = _mm512_and_si512(z, lo4);
        w[2 * v + 1] = _mm512_and_si512(_mm512_srli_epi16(z, 4), lo4);
    }
    if (has_qh(T)) {
        const __m512i sixteen = _mm512_set1_epi8(16);
        UNROLL
        for (int j = 0; j < 8; j++) {
            uint64_t m;
            memcpy(&m, tb + off_qh(T) + 8 * j, 8);
            w[j] = _mm512_mask_add_epi8(w[j], (__mmask64)m, w[j], sixteen);
        }
    }
}

/* acc (16 rows) += one token's terms for this tile block, the reference's steps. */
INLINE __m512 block_dot(int T, const __m512i w[8], __m512 d, __m512 m, const uint8_t *xr, int64_t k, int64_t nb,
                        int64_t b, __m512 acc) {
    const int32_t *x4 = (const int32_t *)(const void *)(xr + 32 * b);
    __m512i p0 = _mm512_setzero_si512(), p1 = _mm512_setzero_si512();
    UNROLL
    for (int j = 0; j < 8; j += 2) { /* two chains: half the latency */
        int32_t a, c;
        memcpy(&a, x4 + j, 4);
        memcpy(&c, x4 + j + 1, 4);
        p0 = _mm512_dpbusd_epi32(p0, w[j], _mm512_set1_epi32(a));
        p1 = _mm512_dpbusd_epi32(p1, w[j + 1], _mm512_set1_epi32(c));
    }
    __m512i isum = _mm512_add_epi32(p0, p1);
    float dx;
    int32_t s;
    memcpy(&dx, xr + k + 4 * b, 4);
    memcpy(&s, xr + k + 4 * nb + 4 * b, 4);
    if (off_log2(T) >= 0) isum = _mm512_sub_epi32(isum, _mm512_set1_epi32(s << off_log2(T)));
    const __m512 vdx = _mm512_set1_ps(dx);
    acc = _mm512_fmadd_ps(_mm512_mul_ps(d, vdx), _mm512_cvtepi32_ps(isum), acc);
    if (has_min(T)) acc = _mm512_fmadd_ps(_mm512_mul_ps(m, vdx), _mm512_set1_ps((float)s), acc);
    return acc;
}

/* The tree ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), per row. */
INLINE __m512 tree16(const __m512 a[8]) {
    return _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a[0], a[4]), _mm512_add_ps(a[2], a[6])),
                         _mm512_add_ps(_mm512_add_ps(a[1], a[5]), _mm512_add_ps(a[3], a[7])));
}

/* One token against a whole tile, accumulators in registers (decode). */
INLINE void tile_one(int T, float *y, const uint8_t *tile, const uint8_t *xr, int64_t k, __mmask16 keep) {
    const int64_t nb = k / 32;
    const int S = QW_RP_ROWS * blk_bytes(T);
    __m512 acc[8];
    UNROLL
    for (int i = 0; i < 8; i++) acc[i] = _mm512_setzero_ps();
    for (int64_t g = 0; g < nb; g += 8) {
        UNROLL
        for (int i = 0; i < 8; i++) {
            if (g + i >= nb) break;
            const uint8_t *tb = tile + (g + i) * S;
            UNROLL
            for (int off = 0; off < S; off += 64)
                _mm_prefetch((const char *)(tb + PF_TILES * S + off), _MM_HINT_T0);
            __m512i w[8];
            unpack(T, tb, w);
            __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)tb));
            __m512 m = has_min(T) ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(tb + off_m(T))))
                                  : _mm512_setzero_ps();
            acc[i] = block_dot(T, w, d, m, xr, k, nb, g + i, acc[i]);
        }
    }
    _mm512_mask_storeu_ps(y, keep, tree16(acc));
}

/* NT (2..TB) tokens against a whole tile: each tile block unpacked once. */
INLINE void tile_many(int T, float *Y, int64_t ldy, const uint8_t *X, int64_t ldxq, int NT, const uint8_t *tile,
                      int64_t k, __mmask16 keep) {
    const int64_t nb = k / 32;
    const int S = QW_RP_ROWS * blk_bytes(T);
    __m512 acc[TB][8];
    for (int t = 0; t < NT; t++)
        UNROLL
    for (int i = 0; i < 8; i++) acc[t][i] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *tb = tile + b * S;
        UNROLL
        for (int off = 0; off < S; off += 64) _mm_prefetch((const char *)(tb + PF_TILES * S + off), _MM_HINT_T0);
        __m512i w[8];
        unpack(T, tb, w);
        __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)tb));
        __m512 m = has_min(T) ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(tb + off_m(T))))
                              : _mm512_setzero_ps();
        const int a = (int)(b % 8);
        for (int t = 0; t < NT; t++) acc[t][a] = block_dot(T, w, d, m, X + t * ldxq, k, nb, b, acc[t][a]);
    }
    for (int t = 0; t < NT; t++) _mm512_mask_storeu_ps(Y + t * ldy, keep, tree16(acc[t]));
}

INLINE void matmul_qr(int T, float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W, int64_t k,
                      int64_t o0, int64_t o1) {
    if (o1 <= o0 || n <= 0) return;
    const int64_t nb = k / 32, tile_bytes = nb * QW_RP_ROWS * blk_bytes(T);
    const uint8_t *X = XQ;
    for (int64_t r = o0 / QW_RP_ROWS; r * QW_RP_ROWS < o1; r++) {
        const int64_t base = r * QW_RP_ROWS;
        const int64_t lo = o0 > base ? o0 - base : 0, hi = o1 < base + QW_RP_ROWS ? o1 - base : QW_RP_ROWS;
        const __mmask16 keep = (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
        const uint8_t *tile = (const uint8_t *)W + r * tile_bytes;
        for (int64_t t0 = 0; t0 < n; t0 += TB) {
            const int NT = n - t0 < TB ? (int)(n - t0) : TB;
            if (NT == 1) tile_one(T, Y + t0 * ldy + base, tile, X + t0 * ldxq, k, keep);
            else tile_many(T, Y + t0 * ldy + base, ldy, X + t0 * ldxq, ldxq, NT, tile, k, keep);
        }
    }
}

/* ---- Q4_K, Q5_K: a tile block is 16 rows' super-block (qrepack_ref.c's
 * K layout); sub-block j is unpacked and dotted as a block-32 tile block,
 * then kquant_ref.c's steps: isum = sc_j * dot, msum = mn_j * s (exact
 * float products), acc[j] += (d dx) isum, acc[j] += -(dmin dx) msum. */
enum { K_SC = 64, K_MN = 192, K_QH = 320 };
INLINE int k_q(int T) { return K_QH + (T == QW_Q5_K ? 512 : 0); }
INLINE int k_size(int T) { return k_q(T) + 8 * 256; }

/* Sub-block j's 8 weight vectors. */
INLINE void unpack_k(int T, const uint8_t *tb, int j, __m512i w[8]) {
    const uint8_t *q = tb + k_q(T) + 256 * j;
    const __m512i lo4 = _mm512_set1_epi8(15);
    UNROLL
    for (int v = 0; v < 4; v++) {
        __m512i z = _mm512_loadu_si512((const void *)(q + 64 * v));
        w[2 * v] = _mm512_and_si512(z, lo4);
        w[2 * v + 1] = _mm512_and_si512(_mm512_srli_epi16(z, 4), lo4);
    }
    if (T == QW_Q5_K) {
        const __m512i sixteen = _mm512_set1_epi8(16);
        UNROLL
        for (int v = 0; v < 8; v++) {
            uint64_t m;
            memcpy(&m, tb + K_QH + 64 * j + 8 * v, 8);
            w[v] = _mm512_mask_add_epi8(w[v], (__mmask64)m, w[v], sixteen);
        }
    }
}

INLINE __m512 sub_dot(const __m512i w[8], __m512 d, __m512 dmin, __m512 sc, __m512 mn, const uint8_t *xr, int64_t k,
                      int64_t nb, int64_t b, __m512 acc) {
    const int32_t *x4 = (const int32_t *)(const void *)(xr + 32 * b);
    __m512i p0 = _mm512_setzero_si512(), p1 = _mm512_setzero_si512();
    UNROLL
    for (int j = 0; j < 8; j += 2) {
        int32_t a, c;
        memcpy(&a, x4 + j, 4);
        memcpy(&c, x4 + j + 1, 4);
        p0 = _mm512_dpbusd_epi32(p0, w[j], _mm512_set1_epi32(a));
        p1 = _mm512_dpbusd_epi32(p1, w[j + 1], _mm512_set1_epi32(c));
    }
    float dx;
    int32_t s;
    memcpy(&dx, xr + k + 4 * b, 4);
    memcpy(&s, xr + k + 4 * nb + 4 * b, 4);
    /* (float)(sc * dot) and (float)(mn * s) as float products: both
     * factors and the product are integers below 2^24, so exact, the same
     * values (and bits) as the reference's int32 products converted */
    const __m512 isum = _mm512_mul_ps(sc, _mm512_cvtepi32_ps(_mm512_add_epi32(p0, p1)));
    const __m512 msum = _mm512_mul_ps(mn, _mm512_set1_ps((float)s));
    const __m512 vdx = _mm512_set1_ps(dx);
    const __m512 negm = _mm512_castsi512_ps(
        _mm512_xor_si512(_mm512_castps_si512(_mm512_mul_ps(dmin, vdx)), _mm512_set1_epi32((int)0x80000000u)));
    acc = _mm512_fmadd_ps(_mm512_mul_ps(d, vdx), isum, acc);
    return _mm512_fmadd_ps(negm, msum, acc);
}

/* 16 unsigned bytes as floats (exact). */
INLINE __m512 k_bytes(const uint8_t *p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p)));
}

/* NT (1..TB) tokens against a whole K tile. */
INLINE void tile_k(int T, float *Y, int64_t ldy, const uint8_t *X, int64_t ldxq, int NT, const uint8_t *tile,
                   int64_t k, __mmask16 keep) {
    const int64_t nsb = k / 256, nb = k / 32;
    const int S = k_size(T);
    __m512 acc[TB][8];
    for (int t = 0; t < NT; t++)
        UNROLL
    for (int i = 0; i < 8; i++) acc[t][i] = _mm512_setzero_ps();
    for (int64_t B = 0; B < nsb; B++) {
        const uint8_t *tb = tile + B * S;
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)tb));
        const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(tb + 32)));
        UNROLL
        for (int off = 0; off < S; off += 64) _mm_prefetch((const char *)(tb + S + off), _MM_HINT_T0);
        UNROLL
        for (int j = 0; j < 8; j++) {
            __m512i w[8];
            unpack_k(T, tb, j, w);
            const __m512 sc = k_bytes(tb + K_SC + 16 * j), mn = k_bytes(tb + K_MN + 16 * j);
            for (int t = 0; t < NT; t++)
                acc[t][j] = sub_dot(w, d, dmin, sc, mn, X + t * ldxq, k, nb, 8 * B + j, acc[t][j]);
        }
    }
    for (int t = 0; t < NT; t++) _mm512_mask_storeu_ps(Y + t * ldy, keep, tree16(acc[t]));
}

INLINE void matmul_qr_k(int T, float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                        int64_t k, int64_t o0, int64_t o1) {
    if (o1 <= o0 || n <= 0) return;
    const int64_t tile_bytes = k / 256 * k_size(T);
    const uint8_t *X = XQ;
    for (int64_t r = o0 / QW_RP_ROWS; r * QW_RP_ROWS < o1; r++) {
        const int64_t base = r * QW_RP_ROWS;
        const int64_t lo = o0 > base ? o0 - base : 0, hi = o1 < base + QW_RP_ROWS ? o1 - base : QW_RP_ROWS;
        const __mmask16 keep = (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
        const uint8_t *tile = (const uint8_t *)W + r * tile_bytes;
        for (int64_t t0 = 0; t0 < n; t0 += TB) {
            const int NT = n - t0 < TB ? (int)(n - t0) : TB;
            if (NT == 1) tile_k(T, Y + t0 * ldy + base, ldy, X + t0 * ldxq, ldxq, 1, tile, k, keep);
            else tile_k(T, Y + t0 * ldy + base, ldy, X + t0 * ldxq, ldxq, NT, tile, k, keep);
        }
    }
}

static void matmul_qr_q4_k_avx512vnni(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                                      int64_t k, int64_t o0, int64_t o1) {
    matmul_qr_k(QW_Q4_K, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}
static void matmul_qr_q5_k_avx512vnni(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                                      int64_t k, int64_t o0, int64_t o1) {
    matmul_qr_k(QW_Q5_K, Y, ldy, XQ, ldxq, n, W, k, o0, o1);
}

#define QR(NAME, DT)                                                                                           \
    static void NAME(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W, int64_t k, \
                     int64_t o0, int64_t o1) {                                                                 \
        matmul_qr(DT, Y, ldy, XQ, ldxq, n, W, k, o0, o1);                                                      \
    }
QR(matmul_qr_q8_0_avx512vnni, QW_Q8_0)
QR(matmul_qr_q4_0_avx512vnni, QW_Q4_0)
QR(matmul_qr_q4_1_avx512vnni, QW_Q4_1)
QR(matmul_qr_q5_0_avx512vnni, QW_Q5_0)
QR(matmul_qr_q5_1_avx512vnni, QW_Q5_1)

const qw_kernels kernels_qrepack_avx512vnni = {
    .matmul_qr =
        {
            [QW_Q8_0] = matmul_qr_q8_0_avx512vnni,
            [QW_Q4_0] = matmul_qr_q4_0_avx512vnni,
            [QW_Q4_1] = matmul_qr_q4_1_avx512vnni,
            [QW_Q5_0] = matmul_qr_q5_0_avx512vnni,
            [QW_Q5_1] = matmul_qr_q5_1_avx512vnni,
            [QW_Q4_K] = matmul_qr_q4_k_avx512vnni,
            [QW_Q5_K] = matmul_qr_q5_k_avx512vnni,
        },
};

#endif
