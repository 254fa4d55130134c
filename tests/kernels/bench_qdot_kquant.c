/* bench_qdot_kquant.c - the K-quants' integer path against their float path
 * (not a test; `make build/tests/kernels/bench_qdot_kquant`).
 *
 * For every level this CPU runs and Q4_K, Q6_K, Q5_K, one thread, CPU time
 * (steadier than wall time on a shared machine), the best of 5 runs:
 *  - decode, n = 1: GB/s of weights streamed by matmul_q and by matmul (the
 *    float32-activation path), Qwen2.5-1.5B's 8960 x 1536 gate/up shape,
 *    rotated over copies worth >= 256 MiB so the weights come from DRAM;
 *    the same from DRAM on 2 threads (wall clock, rows split as the forward
 *    pass splits them); and "cached": 1536 x 1536 over and over (L2 / L3),
 *    the compute rate;
 *  - prefill, n = 512 tokens (ref: 32), 1536 x 1536: GOP/s (2 n rows k).
 * The activations' QA8 quantization is not timed (quantize_qa8 is a
 * separate kernel, run once per matmul input).
 * Usage: bench_qdot_kquant [level ...]   (default: every level)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/kernels.h"
#include "kernels/kernels_impl.h"
#include "runtime/pool.h"

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double wall_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A decode matmul split over the pool's threads by rows, as the forward
 * pass splits it. */
typedef struct {
    const qw_kernels *L;
    qw_dtype dt;
    int integer;
    float *Y;
    const float *X;
    const void *XQ, *W;
    int64_t rows, k;
} dec_job;

static void dec_fn(void *arg, int tid, int nth) {
    const dec_job *j = arg;
    int64_t lo, hi;
    pool_split(j->rows, 16, tid, nth, &lo, &hi);
    if (lo >= hi) return;
    if (j->integer) j->L->matmul_q[j->dt](j->Y, j->rows, j->XQ, qw_qa8_row_bytes(j->k), 1, j->W, j->k, lo, hi);
    else j->L->matmul[j->dt](j->Y, j->rows, j->X, j->k, 1, j->W, j->k, lo, hi);
}

static uint64_t g_rng = 0x853c49e6748fea9bull;
static uint64_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}
static float frand(void) { return (float)((double)(rnd() >> 11) / 9007199254740992.0) * 2.0f - 1.0f; }

/* The QA8 rule of kernels.h (the table's quantize_qa8 when it has one). */
static void qa8(const qw_kernels *L, void *dst, const float *x, int64_t k) {
    if (L->quantize_qa8) {
        L->quantize_qa8(dst, x, k);
        return;
    }
    int8_t *q = dst;
    float *dd = (float *)((uint8_t *)dst + k);
    int32_t *ss = (int32_t *)((uint8_t *)dst + k + 4 * (k / 32));
    for (int64_t b = 0; b < k / 32; b++) {
        float amax = 0.0f;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[32 * b + i]));
        float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        int32_t s = 0;
        for (int i = 0; i < 32; i++) s += q[32 * b + i] = (int8_t)rintf(x[32 * b + i] * id);
        dd[b] = amax / 127.0f;
        ss[b] = s;
    }
}

static void fill(uint8_t *w, int64_t nblk, qw_dtype dt) {
    const int bytes = (int)qw_dtype_row_bytes(dt, 256);
    for (int64_t i = 0; i < nblk * bytes; i++) w[i] = (uint8_t)rnd();
    for (int64_t B = 0; B < nblk; B++) {
        uint16_t d = qw_f32_to_f16(0.002f * (1.0f + frand())), m = qw_f32_to_f16(0.001f * (1.0f + frand()));
        memcpy(w + B * bytes + (dt == QW_Q6_K ? 208 : 0), &d, 2);
        if (dt != QW_Q6_K) memcpy(w + B * bytes + 2, &m, 2);
    }
}

int main(int argc, char **argv) {
    static const qw_dtype types[] = {QW_Q4_K, QW_Q6_K, QW_Q5_K};
    const char *const *names = kernels_level_names();
    printf("one thread, CPU time, busy shared machine: figures are indicative\n");
    for (int li = 0; names[li]; li++) {
        int want = argc < 2;
        for (int a = 1; a < argc; a++) want |= !strcmp(argv[a], names[li]);
        const qw_kernels *L = kernels_level(names[li]);
        if (!want || !L) continue;
        for (int ti = 0; ti < 3; ti++) {
            const qw_dtype dt = types[ti];
            if (!L->matmul_q[dt]) continue;
            /* decode */
            const int64_t rows = 8960, k = 1536, rb = qw_dtype_row_bytes(dt, k), mb = rows * rb;
            const int copies = (int)((256ll << 20) / mb + 1);
            uint8_t *W = malloc((size_t)(mb * copies));
            float *X = malloc(sizeof(float) * 512 * 1536), *Y = malloc(sizeof(float) * 512 * 8960);
            uint8_t *XQ = malloc((size_t)(512 * qw_qa8_row_bytes(1536)));
            if (!W || !X || !Y || !XQ) return 1;
            fill(W, rows * copies * (k / 256), dt);
            for (int64_t i = 0; i < 512 * 1536; i++) X[i] = frand();
            for (int64_t t = 0; t < 512; t++) qa8(L, XQ + t * qw_qa8_row_bytes(1536), X + t * 1536, 1536);
            double gbs[2][2]; /* [cached][path]: the best of 5 passes (a busy machine only slows down) */
            for (int cached = 0; cached < 2; cached++)
                for (int path = 0; path < 2; path++) {
                    /* cached: the first 1536 rows (1.3-2 MB) over and over, from L2 / L3 */
                    const int64_t cr = cached ? 1536 : rows, cm = cr * rb;
                    const int reps = copies * (int)(mb / cm), passes = !strcmp(L->name, "ref") ? 1 : 5;
                    double best = 1e30;
                    for (int pass = 0; pass < passes; pass++) {
                        double t0 = cpu_now();
                        for (int r = 0; r < reps; r++) {
                            const uint8_t *w = W + (cached ? 0 : (int64_t)(r % copies) * mb);
                            if (path == 0) L->matmul_q[dt](Y, cr, XQ, qw_qa8_row_bytes(k), 1, w, k, 0, cr);
                            else L->matmul[dt](Y, cr, X, k, 1, w, k, 0, cr);
                        }
                        double t = cpu_now() - t0;
                        if (t < best) best = t;
                    }
                    gbs[cached][path] = (double)cm * reps / best * 1e-9;
                }
            /* decode from DRAM on 2 threads, wall clock (the forward pass's split) */
            double gbs2[2] = {0, 0};
            if (strcmp(L->name, "ref") != 0) {
                qw_pool *pool = pool_create(2);
                if (!pool) return 1;
                for (int path = 0; path < 2; path++) {
                    dec_job j = {L, dt, path == 0, Y, X, XQ, W, rows, k};
                    double best = 1e30;
                    for (int pass = 0; pass < 5; pass++) {
                        double t0 = wall_now();
                        for (int r = 0; r < copies; r++) {
                            j.W = W + (int64_t)r * mb;
                            pool_run(pool, dec_fn, &j);
                        }
                        double t = wall_now() - t0;
                        if (t < best) best = t;
                    }
                    gbs2[path] = (double)mb * copies / best * 1e-9;
                }
                pool_free(pool);
            }
            /* prefill */
            const int64_t pr = 1536, pk = 1536, n = !strcmp(L->name, "ref") ? 32 : 512;
            double gops[2];
            for (int path = 0; path < 2; path++) {
                double best = 1e30;
                for (int r = 0; r < 5; r++) {
                    double t0 = cpu_now();
                    if (path == 0) L->matmul_q[dt](Y, pr, XQ, qw_qa8_row_bytes(pk), n, W, pk, 0, pr);
                    else L->matmul[dt](Y, pr, X, pk, n, W, pk, 0, pr);
                    double t = cpu_now() - t0;
                    if (t < best) best = t;
                }
                gops[path] = 2.0 * (double)n * pr * pk / best * 1e-9;
            }
            printf("%-6s %s  decode n=1 GB/s: DRAM %5.1f (float path %5.1f), 2 threads %5.1f (%5.1f), cached "
                   "%5.1f (%5.1f)   prefill n=%lld GOP/s %6.1f (float path %6.1f)\n",
                   L->name, qw_dtype_name(dt), gbs[0][0], gbs[0][1], gbs2[0], gbs2[1], gbs[1][0], gbs[1][1],
                   (long long)n, gops[0], gops[1]);
            free(W);
            free(X);
            free(Y);
            free(XQ);
        }
    }
    return 0;
}
