/* pool.c - persistent pthread pool for data-parallel loops (see pool.h).
 *
 * A job is n shares, fn(arg, share, n) for share in [0, n) (n = the thread
 * count for pool_run, any n >= 1 for pool_run_n). It is published by
 * writing fn/arg/shares, the count of unfinished shares (pending) and the
 * next unclaimed share (the claim word, see struct qw_pool), then bumping the generation counter
 * `gen`. Workers spin on `gen` for up to SPIN_US microseconds after each
 * job, so the ~170 jobs of a decode step each cost well under a microsecond
 * to dispatch; after that they sleep on a condition variable.
 *
 * Shares are claimed with fetch_add on the claim word, not bound to threads: the
 * caller runs share 0, then claims whatever shares are still unclaimed. On a
 * shared machine a descheduled worker thus costs nothing: the caller does
 * its share instead of waiting for it to be scheduled again (measured: an
 * empty pool_run took ~100 us with 2 threads under load before this). A
 * share's result does not depend on which thread runs it, so outputs stay
 * deterministic. The caller returns when `pending` reaches zero (acquire),
 * so every share's writes are visible then. A worker that wakes late sees
 * its job exhausted (or the word already reset for a newer job, whose fn/arg it then
 * reads after an acquiring claim) and goes back to waiting.
 *
 * Lost wake-ups are impossible: a worker announces itself in `sleepers` and
 * re-reads `gen` under the mutex before waiting; pool_run() bumps `gen` and
 * then reads `sleepers` (both sequentially consistent, Dekker style), and
 * broadcasts under the mutex whenever anyone may be asleep.
 */
#include "runtime/pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__APPLE__)
#include <sys/sysctl.h>
#include <sys/types.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ volatile("yield" ::: "memory")
#else
#define CPU_RELAX() ((void)0)
#endif

enum { SPIN_US = 100 };

typedef struct worker {
    qw_pool *pool;
    int tid;
    pthread_t th;
} worker;

struct qw_pool {
    int n;        /* threads including the caller */
    worker *w;    /* n - 1 workers */
    qw_pool_fn fn;
    void *arg;
    atomic_uint gen;
    atomic_int pending; /* shares not yet finished */
    /* The claim word: the current job's share count in bits 24..39 and the
     * next unclaimed share in bits 0..23, in one atomic so that a claim
     * returns its own job's count. A worker still looping on a finished job
     * whose claim lands after the next job is published then reads the new
     * job's count with it; one that lands before it sees its old count
     * exhausted. (With a separate count, a stale claim could read the new,
     * larger count and run a share that was never published.) */
    atomic_ullong claim;
    atomic_int sleepers;
    atomic_int stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* Wait until gen differs from seen; returns the new generation. */
static unsigned wait_job(qw_pool *p, unsigned seen) {
    unsigned g;
    double t0 = 0;
    for (int i = 0;; i++) {
        g = atomic_load_explicit(&p->gen, memory_order_acquire);
        if (g != seen) return g;
        CPU_RELAX();
        if ((i & 63) == 63) {
            double t = now_us();
            if (t0 == 0) t0 = t;
            else if (t - t0 > SPIN_US) break;
        }
    }
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->sleepers, 1);
    while ((g = atomic_load(&p->gen)) == seen) pthread_cond_wait(&p->cv, &p->mu);
    atomic_fetch_sub(&p->sleepers, 1);
    pthread_mutex_unlock(&p->mu);
    return g;
}

/* Claim and run unclaimed shares of the current job until none is left. */
static void run_shares(qw_pool *p) {
    for (;;) {
        unsigned long long c = atomic_fetch_add_explicit(&p->claim, 1, memory_order_acq_rel);
        int share = (int)(c & 0xffffff), n = (int)((c >> 24) & 0xffff);
        if (share >= n) return;
        p->fn(p->arg, share, n);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
    }
}

static void *worker_main(void *arg) {
    worker *w = arg;
    qw_pool *p = w->pool;
    unsigned seen = 0;
    for (;;) {
        seen = wait_job(p, seen);
        if (atomic_load_explicit(&p->stop, memory_order_acquire)) break;
        run_shares(p);
    }
    return NULL;
}

static void publish(qw_pool *p) {
    atomic_fetch_add(&p->gen, 1); /* seq_cst: ordered before the sleepers read */
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
}

qw_pool *pool_create(int n_threads) {
    if (n_threads < 1) return NULL;
    qw_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n_threads;
    atomic_init(&p->gen, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->claim, 0); /* no job: 0 shares, nothing to claim */
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->stop, 0);
    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        free(p);
        return NULL;
    }
    if (pthread_cond_init(&p->cv, NULL) != 0) {
        pthread_mutex_destroy(&p->mu);
        free(p);
        return NULL;
    }
    if (n_threads > 1) {
        p->w = calloc((size_t)(n_threads - 1), sizeof *p->w);
        if (!p->w) goto err;
    }
    for (int i = 0; i < n_threads - 1; i++) {
        p->w[i].pool = p;
        p->w[i].tid = i + 1;
        if (pthread_create(&p->w[i].th, NULL, worker_main, &p->w[i]) != 0) {
            p->n = i + 1; /* free() joins the ones that started */
            goto err;
        }
    }
    return p;
err:
    pool_free(p);
    return NULL;
}

void pool_free(qw_pool *p) {
    if (!p) return;
    atomic_store(&p->stop, 1);
    publish(p);
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n - 1 && p->w; i++) pthread_join(p->w[i].th, NULL);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p->w);
    free(p);
}

int pool_threads(const qw_pool *p) { return p ? p->n : 1; }

void pool_run(qw_pool *p, qw_pool_fn fn, void *arg) { pool_run_n(p, fn, arg, p ? p->n : 1); }

void pool_run_n(qw_pool *p, qw_pool_fn fn, void *arg, int n_shares) {
    if (n_shares < 1) n_shares = 1;
    if (n_shares > 0xffff) n_shares = 0xffff;
    if (!p || p->n == 1) {
        for (int s = 0; s < n_shares; s++) fn(arg, s, n_shares);
        return;
    }
    if (n_shares == 1) { /* nothing to share: no dispatch */
        fn(arg, 0, 1);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    atomic_store_explicit(&p->pending, n_shares - 1, memory_order_relaxed);
    /* share 0 is the caller's: claims start at 1 (release: after fn/arg/pending) */
    atomic_store_explicit(&p->claim, ((unsigned long long)n_shares << 24) | 1u, memory_order_release);
    publish(p); /* fn, arg, pending and the claim word are visible to workers */
    fn(arg, 0, n_shares);
    run_shares(p); /* the shares no worker has claimed yet */
    /* Claimed shares normally finish within microseconds; if the machine is
     * oversubscribed and a worker was preempted mid-share, give it the CPU. */
    for (int i = 0; atomic_load_explicit(&p->pending, memory_order_acquire) != 0; i++) {
        CPU_RELAX();
        if (i > 2000) sched_yield();
    }
}

void pool_split(int64_t n, int64_t align, int tid, int nth, int64_t *lo, int64_t *hi) {
    if (align < 1) align = 1;
    if (nth < 1) nth = 1;
    if (n <= 0 || tid < 0 || tid >= nth) {
        *lo = *hi = n > 0 ? n : 0;
        return;
    }
    int64_t units = (n + align - 1) / align;
    int64_t per = units / nth, rem = units % nth;
    int64_t u0 = (int64_t)tid * per + (tid < rem ? tid : rem);
    int64_t u1 = u0 + per + (tid < rem ? 1 : 0);
    int64_t a = u0 * align, b = u1 * align;
    *lo = a < n ? a : n;
    *hi = b < n ? b : n;
}

#if defined(__linux__)
/* Unique (package, core) pairs from sysfs; 0 if unavailable. */
static int count_cores_sysfs(void) {
    enum { MAXC = 1024 };
    long pairs[MAXC][2];
    int np = 0, misses = 0;
    for (int cpu = 0; cpu < MAXC && misses < 64; cpu++) {
        char path[128];
        long pkg = -1, core = -1;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
        FILE *f = fopen(path, "r");
        if (!f) {
            if (cpu == 0) return 0;
            misses++; /* offline CPU or gap in numbering */
            continue;
        }
        misses = 0;
        if (fscanf(f, "%ld", &core) != 1) core = -1;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id",
                 cpu);
        f = fopen(path, "r");
        if (f) {
            if (fscanf(f, "%ld", &pkg) != 1) pkg = -1;
            fclose(f);
        }
        if (core < 0) return 0;
        int seen = 0;
        for (int i = 0; i < np; i++)
            if (pairs[i][0] == pkg && pairs[i][1] == core) seen = 1;
        if (!seen && np < MAXC) {
            pairs[np][0] = pkg;
            pairs[np][1] = core;
            np++;
        }
    }
    return np;
}
#endif

int pool_default_threads(void) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (online < 1) online = 1;
    int n = 0;
#if defined(__APPLE__)
    int v = 0;
    size_t len = sizeof v;
    if (sysctlbyname("hw.physicalcpu", &v, &len, NULL, 0) == 0 && v > 0) n = v;
#elif defined(__linux__)
    n = count_cores_sysfs();
#endif
    if (n < 1 || n > online) n = (int)online;
    return n;
}
