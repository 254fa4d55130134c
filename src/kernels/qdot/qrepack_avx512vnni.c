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
#include "kernels/qdot/qdot_x86.h"
#include "kernels/qdot/qrepack_layout.h"
#include "kernels/qdot/qrepack_zmm.h"

#define TB QR_TB /* tokens per block (the K tiles: QR_TB_K) */

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
    /* s * 2^k, not s << k: s is negative as often as not (a left shift of
     * a negative int is undefined in C; the vector shift is not). */
    if (off_log2(T) >= 0) isum = _mm512_sub_epi32(isum, _mm512_set1_epi32(s * (1 << off_log2(T))));
    const __m512 vdx = _mm512_set1_ps(dx);
    acc = _mm512_fmadd_ps(_mm512_mul_ps(d, vdx), _mm512_cvtepi32_ps(isum), acc);
    if (has_min(T)) acc = _mm512_fmadd_ps(_mm512_mul_ps(m, vdx), _mm512_set1_ps((float)s), acc);
    return acc;
}

/* One token against a whole tile, accumulators in registers (decode). The
 * tile is one in-order stream, in huge pages (model/repack.c); software
 * prefetch pf bytes ahead only where the CPU's prefetchers do not keep up
 * with it (cpu.c: Zen 5). On Zen 4, prefetching QR_PF_TILES blocks ahead
 * cost decode 5-14% (real 0.5B Q4_K_M 103.8 vs 118.2 tok/s, Q4_0 125.2 vs
 * 135.6, Q8_0 57.8 vs 60.6; 4 ABBA rounds, docs/PERFORMANCE.md). tile_many
 * prefetches QR_PF_TILES ahead: prefill was 1-2% faster with it. */
INLINE void tile_one(int T, float *y, const uint8_t *tile, const uint8_t *xr, int64_t k, __mmask16 keep,
                     int64_t pf) {
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
            prefetch_ahead(tb, pf, S);
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
        for (int off = 0; off < S; off += 64) _mm_prefetch((const char *)(tb + QR_PF_TILES * S + off), _MM_HINT_T0);
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
    const int64_t group = qr_token_group(k, TB), pf = kernels_decode_prefetch();
    if (n == 1) prefetch_head(W, tile_bytes, o0, o1, pf);
    for (int64_t g0 = 0; g0 < n; g0 += group) {
        const int64_t g1 = g0 + group < n ? g0 + group : n;
        for (int64_t r = o0 / QW_RP_ROWS; r * QW_RP_ROWS < o1; r++) {
            const int64_t base = r * QW_RP_ROWS;
            const __mmask16 keep = tile_keep(r, o0, o1);
            const uint8_t *tile = (const uint8_t *)W + r * tile_bytes;
            for (int64_t t0 = g0; t0 < g1; t0 += TB) {
                const int NT = g1 - t0 < TB ? (int)(g1 - t0) : TB;
                if (NT == 1) tile_one(T, Y + t0 * ldy + base, tile, X + t0 * ldxq, k, keep, pf);
                else tile_many(T, Y + t0 * ldy + base, ldy, X + t0 * ldxq, ldxq, NT, tile, k, keep);
            }
        }
    }
}

/* The K-quant tiles (below) issue no software prefetch in prefill, and in
 * decode only where the CPU asks for it (kernels_decode_prefetch, cpu.c:
 * Zen 5, 8 KB ahead): their tile blocks are whole 64-byte lines read in
 * order, which the hardware prefetchers of the CPUs measured before Zen 5
 * stream well. There (real 1.5B Q4_K_M, decode, 2 threads, ABBA),
 * prefetching the block 4 or 16 ahead into L2 made the Q6_K matmuls
 * 25-40% slower than none (lm_head 7.9-8.3 vs 5.7-6.1 ms per token, quiet
 * machine), and 2-4 ahead into L2 or L1 made Q4_K gate/up 25-30% slower
 * (busy machine). */

/* ---- Q4_K, Q5_K: a tile block is 16 rows' super-block (qrepack_ref.c's
 * K layout); sub-block j is unpacked and dotted as a block-32 tile block,
 * then kquant_ref.c's steps: dsc = d sc_j and dmn = dmin mn_j once per tile
 * block, acc[j] += dx (dsc dot), acc[j] += -dmn ds: per token and
 * sub-block one conversion, one multiply and two fma against the 8
 * vpdpbusd (the older steps took 8 float operations: 1.5B Q4_K_M pp512
 * 154 -> 180 tok/s, docs/PERFORMANCE.md). */
INLINE __m512 sub_dot(const __m512i w[8], __m512 dsc, __m512 dmn, const uint8_t *xr, int64_t k, int64_t nb,
                      int64_t b, __m512 acc) {
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
    float dx, ds;
    memcpy(&dx, xr + k + 4 * b, 4);
    memcpy(&ds, xr + k + 8 * nb + 4 * b, 4);
    /* fmaf(dx, dsc * dot, acc), then fmaf(-dmn, ds, acc) (fnmadd: one rounding) */
    acc = _mm512_fmadd_ps(_mm512_set1_ps(dx), _mm512_mul_ps(dsc, _mm512_cvtepi32_ps(_mm512_add_epi32(p0, p1))), acc);
    return _mm512_fnmadd_ps(dmn, _mm512_set1_ps(ds), acc);
}

/* NT (1..TB) tokens against a whole K tile; one token (decode) prefetches
 * pf bytes ahead, a sub-block's share of the tile block at a time. */
INLINE void tile_k(int T, float *Y, int64_t ldy, const uint8_t *X, int64_t ldxq, int NT, const uint8_t *tile,
                   int64_t k, __mmask16 keep, int64_t pf) {
    const int64_t nsb = k / 256, nb = k / 32;
    const int S = k_size(T);
    __m512 acc[QR_TB_K_MAX][8];
    for (int t = 0; t < NT; t++)
        UNROLL
    for (int i = 0; i < 8; i++) acc[t][i] = _mm512_setzero_ps();
    for (int64_t B = 0; B < nsb; B++) {
        const uint8_t *tb = tile + B * S;
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)tb));
        const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(tb + 32)));
        UNROLL
        for (int j = 0; j < 8; j++) {
            prefetch_ahead(tb + j * (S / 8), pf, S / 8);
            __m512i w[8];
            unpack_k(T, tb, j, w);
            /* the weight row's products, once per tile block for all tokens */
            const __m512 dsc = _mm512_mul_ps(d, k_bytes(tb + K_SC + 16 * j));
            const __m512 dmn = _mm512_mul_ps(dmin, k_bytes(tb + K_MN + 16 * j));
            for (int t = 0; t < NT; t++)
                acc[t][j] = sub_dot(w, dsc, dmn, X + t * ldxq, k, nb, 8 * B + j, acc[t][j]);
        }
    }
    for (int t = 0; t < NT; t++) _mm512_mask_storeu_ps(Y + t * ldy, keep, tree16(acc[t]));
}

INLINE void matmul_qr_k(int T, float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                        int64_t k, int64_t o0, int64_t o1) {
    if (o1 <= o0 || n <= 0) return;
    const int64_t tile_bytes = k / 256 * k_size(T);
    const uint8_t *X = XQ;
    const int64_t tbk = kernels_k_token_block(), group = qr_token_group(k, tbk), pf = kernels_decode_prefetch();
    if (n == 1) prefetch_head(W, tile_bytes, o0, o1, pf);
    for (int64_t g0 = 0; g0 < n; g0 += group) {
        const int64_t g1 = g0 + group < n ? g0 + group : n;
        for (int64_t r = o0 / QW_RP_ROWS; r * QW_RP_ROWS < o1; r++) {
            const int64_t base = r * QW_RP_ROWS;
            const __mmask16 keep = tile_keep(r, o0, o1);
            const uint8_t *tile = (const uint8_t *)W + r * tile_bytes;
            for (int64_t t0 = g0; t0 < g1; t0 += tbk) {
                const int NT = g1 - t0 < tbk ? (int)(g1 - t0) : (int)tbk;
                if (NT == 1) tile_k(T, Y + t0 * ldy + base, ldy, X + t0 * ldxq, ldxq, 1, tile, k, keep, pf);
                else tile_k(T, Y + t0 * ldy + base, ldy, X + t0 * ldxq, ldxq, NT, tile, k, keep, 0);
            }
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

/* ---- Q6_K (qrepack_ref.c's Q6_K layout): weights q in 0..63 against the
 * activations, and the -32 offset through each 16-weight half's activation
 * sum h (the QA8 row's h section, kernels.h):
 *   half_h = sum q qx - 32 h, isum = sc_2j half_0 + sc_2j+1 half_1
 * (exact, here in float: sub_dot_q6), acc[j] += (d dx) isum: kquant_ref.c's steps. (The sums
 * were once recomputed here per tile and token block: 20% of a Q6_K
 * prefill matmul, docs/PERFORMANCE.md.) */
INLINE __m512 sub_dot_q6(const __m512i w[8], __m512 d, __m512 sc0, __m512 sc1, const uint8_t *xr, int64_t k,
                         int64_t nb, int64_t b, __m512 acc) {
    const int32_t *x4 = (const int32_t *)(const void *)(xr + 32 * b);
    int16_t h[2];
    memcpy(h, xr + k + 12 * nb + 4 * b, 4);
    /* each half's vpdpbusd chain starts at its offset term -32 h */
    __m512i h0 = _mm512_set1_epi32(-32 * h[0]), h1 = _mm512_set1_epi32(-32 * h[1]);
    UNROLL
    for (int v = 0; v < 4; v++) {
        int32_t a, c;
        memcpy(&a, x4 + v, 4);
        memcpy(&c, x4 + 4 + v, 4);
        h0 = _mm512_dpbusd_epi32(h0, w[v], _mm512_set1_epi32(a));
        h1 = _mm512_dpbusd_epi32(h1, w[4 + v], _mm512_set1_epi32(c));
    }
    /* (float)isum without vpmulld (two uops on one port on Intel): each
     * half is sum (q - 32) qx, |half| <= 16 * 32 * 128, and |sc| <= 128,
     * so both products and their sum are integers of at most 2^24: exact
     * in float, the same bits as converting the int32 isum. */
    const __m512 isum = _mm512_fmadd_ps(sc1, _mm512_cvtepi32_ps(h1), _mm512_mul_ps(sc0, _mm512_cvtepi32_ps(h0)));
    float dx;
    memcpy(&dx, xr + k + 4 * b, 4);
    return _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(dx)), isum, acc);
}

/* NT (1..QR_TB_K_MAX) tokens against a whole Q6_K tile (pf: as tile_k's). */
INLINE void tile_q6(float *Y, int64_t ldy, const uint8_t *X, int64_t ldxq, int NT, const uint8_t *tile, int64_t k,
                    __mmask16 keep, int64_t pf) {
    const int64_t nsb = k / 256, nb = k / 32;
    __m512 acc[QR_TB_K_MAX][8];
    for (int t = 0; t < NT; t++)
        UNROLL
    for (int i = 0; i < 8; i++) acc[t][i] = _mm512_setzero_ps();
    for (int64_t B = 0; B < nsb; B++) {
        const uint8_t *tb = tile + B * Q6_SIZE;
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)tb));
        UNROLL
        for (int j = 0; j < 8; j++) {
            prefetch_ahead(tb + j * (Q6_SIZE / 8), pf, Q6_SIZE / 8);
            __m512i w[8];
            unpack_q6(tb, j, w);
            const __m512 sc0 = _mm512_cvtepi32_ps(sc_bytes(tb + Q6_SC + 32 * j)),
                         sc1 = _mm512_cvtepi32_ps(sc_bytes(tb + Q6_SC + 32 * j + 16));
            for (int t = 0; t < NT; t++)
                acc[t][j] = sub_dot_q6(w, d, sc0, sc1, X + t * ldxq, k, nb, 8 * B + j, acc[t][j]);
        }
    }
    for (int t = 0; t < NT; t++) _mm512_mask_storeu_ps(Y + t * ldy, keep, tree16(acc[t]));
}

static void matmul_qr_q6_k_avx512vnni(float *Y, int64_t ldy, const void *XQ, int64_t ldxq, int64_t n, const void *W,
                                      int64_t k, int64_t o0, int64_t o1) {
    if (o1 <= o0 || n <= 0) return;
    const int64_t tile_bytes = k / 256 * Q6_SIZE;
    const uint8_t *X = XQ;
    const int64_t tbk = kernels_k_token_block(), group = qr_token_group(k, tbk), pf = kernels_decode_prefetch();
    if (n == 1) prefetch_head(W, tile_bytes, o0, o1, pf);
    for (int64_t g0 = 0; g0 < n; g0 += group) {
        const int64_t g1 = g0 + group < n ? g0 + group : n;
        for (int64_t r = o0 / QW_RP_ROWS; r * QW_RP_ROWS < o1; r++) {
            const int64_t base = r * QW_RP_ROWS;
            const __mmask16 keep = tile_keep(r, o0, o1);
            const uint8_t *tile = (const uint8_t *)W + r * tile_bytes;
            for (int64_t t0 = g0; t0 < g1; t0 += tbk) {
                const int NT = g1 - t0 < tbk ? (int)(g1 - t0) : (int)tbk;
                if (NT == 1) tile_q6(Y + t0 * ldy + base, ldy, X + t0 * ldxq, ldxq, 1, tile, k, keep, pf);
                else tile_q6(Y + t0 * ldy + base, ldy, X + t0 * ldxq, ldxq, NT, tile, k, keep, 0);
            }
        }
    }
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
            [QW_Q6_K] = matmul_qr_q6_k_avx512vnni,
        },
};

#endif
