/* bench_kernels.c - kernel benchmark (not a test; `make build/tests/kernels/bench_kernels`).
 *
 * Prints, for every level this CPU runs:
 *  - decode matvec (n = 1) GB/s of weights streamed, BF16, at the shapes of
 *    Qwen2.5-0.5B (896 x 4864 down_proj, 4864 x 896 gate/up, 151936 x 896
 *    lm_head), 1 and 2 threads through the pool. The small matrices are
 *    rotated over enough copies (>= 256 MiB) that they stream from DRAM as in
 *    a real decode step rather than sitting in the last-level cache;
 *  - matmul GFLOP/s (2 n rows k) for n = 32, 128, 512 tokens on 4864 x 896
 *    (BF16, F16, F32), 1 and 2 threads;
 *  and a memory read-bandwidth probe (plain C streaming sum, 1 and 2 threads).
 *  - a kernel-only decode step of Qwen2.5-0.5B (24 layers of q/k/v/o/gate/
 *    up/down matmuls plus the 151936 x 896 lm_head, each weight in its own
 *    buffer, ~1 GB of BF16 streamed from DRAM) for n = 1, 2, 4, 8 tokens:
 *    min and median ms per step, GB/s, and the cost relative to n = 1;
 *  - pool_run overhead of an empty job (a decode step makes ~170 calls).
 * Usage: bench_kernels [decode] [level ...]   (default: every level; ref skips
 * n >= 128; decode: only the decode steps)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "kernels/kernels.h"
#include "runtime/pool.h"

#include <time.h>

/* CPU time of the calling thread: on a shared machine, single-thread rates
 * per CPU-second are steadier than wall-clock rates. */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct {
    const qw_kernels *L;
    qw_dtype dt;
    float *Y;
    const float *X;
    int64_t n, k, rows;
    const void *W;
} mm_job;

static void mm_fn(void *arg, int tid, int nth) {
    mm_job *j = arg;
    int64_t lo, hi;
    pool_split(j->rows, 16, tid, nth, &lo, &hi);
    if (lo < hi) j->L->matmul[j->dt](j->Y, j->rows, j->X, j->k, j->n, j->W, j->k, lo, hi);
}

typedef struct {
    const uint64_t *p;
    int64_t n;
    uint64_t sum[16];
} bw_job;

static void bw_fn(void *arg, int tid, int nth) {
    bw_job *j = arg;
    int64_t lo, hi;
    pool_split(j->n, 64, tid, nth, &lo, &hi);
    uint64_t a = 0, b = 0, c = 0, d = 0, e = 0, f = 0, g = 0, h = 0;
    for (int64_t i = lo; i + 8 <= hi; i += 8) {
        a += j->p[i], b += j->p[i + 1], c += j->p[i + 2], d += j->p[i + 3];
        e += j->p[i + 4], f += j->p[i + 5], g += j->p[i + 6], h += j->p[i + 7];
    }
    j->sum[tid] = a + b + c + d + e + f + g + h;
}

static void *alloc_fill(size_t bytes) {
    uint8_t *p = malloc(bytes);
    if (!p) return NULL;
    uint32_t s = 12345;
    for (size_t i = 0; i < bytes; i += 2) { /* small random bf16/f16-safe values */
        s = s * 1664525u + 1013904223u;
        uint16_t v = (uint16_t)(0x3c00 | ((s >> 16) & 0x03ff)) ^ (uint16_t)((s >> 31) << 15);
        memcpy(p + i, &v, 2);
    }
    return p;
}

static void bench_bw(qw_pool *pools[2]) {
    int64_t bytes = 512ll << 20;
    uint64_t *p = alloc_fill((size_t)bytes);
    if (!p) return;
    for (int ti = 0; ti < 2; ti++) {
        bw_job j = {.p = p, .n = bytes / 8};
        pool_run(pools[ti], bw_fn, &j); /* warm */
        double best = 0;
        for (int r = 0; r < 3; r++) {
            double t0 = qw_now();
            pool_run(pools[ti], bw_fn, &j);
            double gbs = (double)bytes / (qw_now() - t0) / 1e9;
            if (gbs > best) best = gbs;
        }
        printf("memory read bandwidth, %d thread%s: %.1f GB/s (best of 3, 512 MiB)\n", ti + 1,
               ti ? "s" : "", best);
    }
    free(p);
}

static void bench_matvec(const qw_kernels *L, qw_pool *pools[2], int64_t rows, int64_t k) {
    size_t mbytes = (size_t)(rows * k * 2);
    int copies = (int)((256ull << 20) / mbytes) + 1;
    if (mbytes > (64u << 20)) copies = 1;
    uint8_t *W = alloc_fill(mbytes * (size_t)copies);
    float *X = malloc((size_t)k * 4), *Y = malloc((size_t)rows * 4);
    if (!W || !X || !Y) goto out;
    for (int64_t i = 0; i < k; i++) X[i] = (float)(i % 7) * 0.1f - 0.3f;
    for (int ti = 0; ti < 2; ti++) {
        mm_job j = {.L = L, .dt = QW_BF16, .Y = Y, .X = X, .n = 1, .k = k, .rows = rows};
        double best = 0, bestc = 0;
        int reps = copies > 1 ? copies : 3;
        for (int pass = 0; pass < 3; pass++) {
            double t0 = qw_now(), c0 = cpu_now();
            for (int r = 0; r < reps; r++) {
                j.W = W + mbytes * (size_t)(r % copies);
                pool_run(pools[ti], mm_fn, &j);
            }
            double gbs = (double)mbytes * reps / (qw_now() - t0) / 1e9;
            double gbc = (double)mbytes * reps / (cpu_now() - c0) / 1e9;
            if (gbs > best) best = gbs;
            if (gbc > bestc) bestc = gbc;
        }
        printf("  %-6s matvec BF16 %6lld x %-5lld %d thr: %6.1f GB/s", L->name, (long long)rows,
               (long long)k, ti + 1, best);
        if (ti == 0) printf("  (%.1f per CPU-second)", bestc);
        printf("\n");
    }
out:
    free(W);
    free(X);
    free(Y);
}

static void bench_matmul(const qw_kernels *L, qw_pool *pools[2], qw_dtype dt, int64_t n) {
    const int64_t rows = 4864, k = 896;
    size_t es = (size_t)qw_dtype_size(dt);
    void *W = alloc_fill((size_t)(rows * k) * es);
    float *X = malloc((size_t)(n * k) * 4), *Y = malloc((size_t)(n * rows) * 4);
    if (!W || !X || !Y) goto out;
    if (dt == QW_F32) /* alloc_fill's bit patterns are 16-bit; give F32 real values */
        for (int64_t i = 0; i < rows * k; i++) ((float *)W)[i] = (float)(i % 13) * 0.01f;
    for (int64_t i = 0; i < n * k; i++) X[i] = (float)(i % 7) * 0.1f - 0.3f;
    for (int ti = 0; ti < 2; ti++) {
        mm_job j = {.L = L, .dt = dt, .Y = Y, .X = X, .n = n, .k = k, .rows = rows, .W = W};
        pool_run(pools[ti], mm_fn, &j);
        double flops = 2.0 * (double)n * (double)rows * (double)k, best = 0, bestc = 0;
        int reps = n >= 512 ? 2 : n >= 128 ? 4 : 10;
        for (int r = 0; r < reps; r++) {
            double t0 = qw_now(), c0 = cpu_now();
            pool_run(pools[ti], mm_fn, &j);
            double g = flops / (qw_now() - t0) / 1e9, gc = flops / (cpu_now() - c0) / 1e9;
            if (g > best) best = g;
            if (gc > bestc) bestc = gc;
        }
        printf("  %-6s matmul %-4s 4864 x 896, n=%-3lld %d thr: %6.1f GFLOP/s", L->name,
               qw_dtype_name(dt), (long long)n, ti + 1, best);
        if (ti == 0) printf("  (%.1f per CPU-second)", bestc);
        printf("\n");
    }
out:
    free(W);
    free(X);
    free(Y);
}

/* One decode step's matmuls over distinct weights (Qwen2.5-0.5B shapes),
 * for a batch of n = 1, 2, 4, 8 tokens (continuous batching: one token per
 * request). Memory bound: a step with n tokens should cost barely more than
 * n = 1, since every weight is streamed once for all n tokens. */
static void bench_decode_step(const qw_kernels *L, qw_pool *pools[2]) {
    static const int64_t shapes[7][2] = {{896, 896}, {128, 896}, {128, 896}, {896, 896},
                                         {4864, 896}, {4864, 896}, {896, 4864}};
    const int layers = 24, nmax = 8;
    size_t total = (size_t)151936 * 896 * 2;
    for (int s = 0; s < 7; s++) total += (size_t)layers * (size_t)(shapes[s][0] * shapes[s][1] * 2);
    uint8_t *W = alloc_fill(total);
    float *X = malloc((size_t)nmax * 4864 * 4), *Y = malloc((size_t)nmax * 151936 * 4);
    if (!W || !X || !Y) goto out;
    for (int i = 0; i < nmax * 4864; i++) X[i] = (float)(i % 7) * 0.1f - 0.3f;
    for (int ti = 0; ti < 2; ti++) {
        double t1 = 0, c1 = 0; /* n = 1 wall and CPU (caller thread) times */
        for (int n = 1; n <= nmax; n *= 2) {
            double ts[5], cpu = 1e9;
            const int reps = 5;
            for (int rep = 0; rep < reps; rep++) {
                size_t off = 0;
                double t0 = qw_now(), c0 = cpu_now();
                for (int l = 0; l < layers; l++)
                    for (int s = 0; s < 7; s++) {
                        mm_job j = {.L = L, .dt = QW_BF16, .Y = Y, .X = X, .n = n,
                                    .k = shapes[s][1], .rows = shapes[s][0], .W = W + off};
                        pool_run(pools[ti], mm_fn, &j);
                        off += (size_t)(shapes[s][0] * shapes[s][1] * 2);
                    }
                mm_job j = {.L = L, .dt = QW_BF16, .Y = Y, .X = X, .n = n, .k = 896,
                            .rows = 151936, .W = W + off};
                pool_run(pools[ti], mm_fn, &j);
                ts[rep] = qw_now() - t0;
                if (cpu_now() - c0 < cpu) cpu = cpu_now() - c0;
            }
            for (int a = 0; a < reps; a++) /* sort: min and median */
                for (int b = a + 1; b < reps; b++)
                    if (ts[b] < ts[a]) {
                        double tmp = ts[a];
                        ts[a] = ts[b];
                        ts[b] = tmp;
                    }
            if (n == 1) t1 = ts[0];
            if (n == 1) c1 = cpu;
            printf("  %-6s decode step n=%d (24 layers + lm_head, %.0f MB BF16) %d thr: min %6.1f ms "
                   "(median %6.1f), %5.1f GB/s, x%.2f of n=1",
                   L->name, n, (double)total / 1e6, ti + 1, ts[0] * 1e3, ts[reps / 2] * 1e3,
                   (double)total / ts[0] / 1e9, ts[0] / t1);
            if (ti == 0) printf("; CPU %6.1f ms, x%.2f", cpu * 1e3, cpu / c1);
            printf("\n");
        }
    }
out:
    free(W);
    free(X);
    free(Y);
}

/* pool_run overhead: an empty job, many times. */
static void noop_fn(void *arg, int tid, int nth) {
    (void)arg, (void)tid, (void)nth;
}
static void bench_pool(qw_pool *pools[2]) {
    for (int ti = 0; ti < 2; ti++) {
        const int reps = 20000;
        pool_run(pools[ti], noop_fn, NULL);
        double t0 = qw_now();
        for (int r = 0; r < reps; r++) pool_run(pools[ti], noop_fn, NULL);
        printf("pool_run empty job, %d thread%s: %.2f us per call\n", ti + 1, ti ? "s" : "",
               (qw_now() - t0) / reps * 1e6);
    }
}

int main(int argc, char **argv) {
    qw_err err;
    qw_log_set_level(QW_LOG_WARN);
    if (kernels_init(&err) < 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    qw_pool *pools[2] = {pool_create(1), pool_create(2)};
    if (!pools[0] || !pools[1]) return 1;
    printf("cpu: %s\n", kernels_cpu_features());
    bench_bw(pools);
    bench_pool(pools);
    const char *const *names = kernels_level_names();
    int decode_only = 0, nlev = 0; /* "decode": only the decode steps */
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "decode")) decode_only = 1;
        else nlev++;
    }
    for (int i = 0; names[i]; i++) {
        int want = nlev == 0;
        for (int a = 1; a < argc; a++) want |= !strcmp(argv[a], names[i]);
        const qw_kernels *L = kernels_level(names[i]);
        if (!want || !L) continue;
        bench_decode_step(L, pools);
        if (decode_only) continue;
        bench_matvec(L, pools, 896, 4864);
        bench_matvec(L, pools, 4864, 896);
        bench_matvec(L, pools, 151936, 896);
        for (int dt = QW_BF16; dt >= 0; dt--)
            for (int64_t n = 32; n <= 512; n *= 4) {
                if (!strcmp(L->name, "ref") && n > 32) continue;
                if (dt != QW_BF16 && n != 128) continue;
                bench_matmul(L, pools, (qw_dtype)dt, n);
            }
    }
    pool_free(pools[0]);
    pool_free(pools[1]);
    return 0;
}
