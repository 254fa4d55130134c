/* membw.c - memory read bandwidth, for the decode roofline in tools/bench.sh.
 *
 *   membw [THREADS [MIB [REPS]]]      defaults: 1 thread, 1024 MiB, 5 repetitions
 *
 * Each thread sums its own slice of one large array (page-faulted in by the
 * thread that reads it, so the pages sit near it), with several independent
 * accumulators so the loop is bound by loads, not by an add chain. The array is
 * far larger than the caches, so every pass streams from DRAM, like decode does
 * with the weights. The array is asked for in 2 MiB pages (MADV_HUGEPAGE,
 * where the system has it), as qwenc's weights are (src/base/bigmem.h): in
 * 4 KiB pages this loop read ~10% less on Zen 4 (54 vs 61 GB/s, 5
 * alternations), so a 4 KiB probe put the roofline under what decode reaches.
 * Prints one line of JSON:
 *   {"threads": T, "mib": M, "best_gbs": X, "median_gbs": Y, "hugepages": 0|1}
 * GB/s are 1e9 bytes per second. Build: cc -O3 -march=native -pthread membw.c
 * (a measuring tool for this machine, not part of qwenc).
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

typedef struct {
    const uint64_t *p; /* this thread's slice */
    size_t n;          /* words in the slice */
    uint64_t sum;      /* result, kept so the loads are not optimised away */
    pthread_barrier_t *bar;
    int reps;
    double *t_pass; /* (reps) seconds per pass, written by thread 0 */
} job;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t sum_words(const uint64_t *p, size_t n) {
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        a0 += p[i];
        a1 += p[i + 1];
        a2 += p[i + 2];
        a3 += p[i + 3];
        a4 += p[i + 4];
        a5 += p[i + 5];
        a6 += p[i + 6];
        a7 += p[i + 7];
    }
    for (; i < n; i++) a0 += p[i];
    return a0 ^ a1 ^ a2 ^ a3 ^ a4 ^ a5 ^ a6 ^ a7;
}

static void *worker(void *arg) {
    job *j = arg;
    /* First touch by the reading thread. */
    memset((void *)j->p, 1, j->n * sizeof *j->p);
    uint64_t s = 0;
    for (int r = 0; r < j->reps; r++) {
        pthread_barrier_wait(j->bar);
        double t0 = now();
        s += sum_words(j->p, j->n);
        pthread_barrier_wait(j->bar);
        if (j->t_pass) j->t_pass[r] = now() - t0;
    }
    j->sum = s;
    return NULL;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    long mib = argc > 2 ? atol(argv[2]) : 1024;
    int reps = argc > 3 ? atoi(argv[3]) : 5;
    if (threads < 1 || threads > 256 || mib < 1 || mib > 1L << 20 || reps < 1 || reps > 1000) {
        fprintf(stderr, "usage: membw [THREADS 1..256 [MIB [REPS]]]\n");
        return 2;
    }
    size_t words = (size_t)mib * 1024 * 1024 / sizeof(uint64_t);
    uint64_t *buf = NULL;
    if (posix_memalign((void **)&buf, 2 << 20, words * sizeof *buf)) {
        fprintf(stderr, "membw: cannot allocate %ld MiB\n", mib);
        return 1;
    }
    int huge = 0;
#ifdef MADV_HUGEPAGE
    huge = madvise(buf, words * sizeof *buf, MADV_HUGEPAGE) == 0;
#endif
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)threads);
    job *jobs = calloc((size_t)threads, sizeof *jobs);
    pthread_t *tid = calloc((size_t)threads, sizeof *tid);
    double *t_pass = calloc((size_t)reps, sizeof *t_pass);
    if (!jobs || !tid || !t_pass) {
        fprintf(stderr, "membw: out of memory\n");
        return 1;
    }
    size_t per = words / (size_t)threads;
    for (int t = 0; t < threads; t++) {
        jobs[t].p = buf + (size_t)t * per;
        jobs[t].n = t == threads - 1 ? words - (size_t)t * per : per;
        jobs[t].bar = &bar;
        jobs[t].reps = reps;
        jobs[t].t_pass = t == 0 ? t_pass : NULL;
        if (pthread_create(&tid[t], NULL, worker, &jobs[t])) {
            fprintf(stderr, "membw: cannot start thread %d\n", t);
            return 1;
        }
    }
    uint64_t x = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(tid[t], NULL);
        x ^= jobs[t].sum;
    }
    qsort(t_pass, (size_t)reps, sizeof *t_pass, cmp_double);
    double bytes = (double)words * sizeof *buf;
    printf("{\"threads\": %d, \"mib\": %ld, \"best_gbs\": %.2f, \"median_gbs\": %.2f, \"hugepages\": %d, \"check\": %u}\n",
           threads, mib, bytes / t_pass[0] / 1e9, bytes / t_pass[reps / 2] / 1e9, huge, (unsigned)(x & 1));
    pthread_barrier_destroy(&bar);
    free(t_pass);
    free(tid);
    free(jobs);
    free(buf);
    return 0;
}
