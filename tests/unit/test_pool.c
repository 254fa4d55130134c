/* test_pool.c - the thread pool: every index covered exactly once, for many
 * sizes and thread counts, thousands of back-to-back jobs (races show up as
 * lost or doubled counts; run under TSan too), sleep/wake after idle, and
 * the properties of pool_split. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/pool.h"
#include "test.h"

typedef struct {
    int64_t n, align;
    atomic_int *hits;  /* n counters */
    atomic_int calls;  /* fn invocations */
    int bad_tid;
} job;

static void cover(void *arg, int tid, int nth) {
    job *j = arg;
    int64_t lo, hi;
    if (tid < 0 || tid >= nth) j->bad_tid = 1;
    pool_split(j->n, j->align, tid, nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) atomic_fetch_add_explicit(&j->hits[i], 1, memory_order_relaxed);
    atomic_fetch_add(&j->calls, 1);
}

/* Plain (non-atomic) writes by workers, read by the caller after pool_run:
 * checks that pool_run's completion publishes the workers' memory. */
typedef struct {
    int64_t *out;
    int64_t n;
    int64_t round;
} plain_job;

static void plain(void *arg, int tid, int nth) {
    plain_job *j = arg;
    int64_t lo, hi;
    pool_split(j->n, 1, tid, nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) j->out[i] = j->round * 1000003 + i;
}

static void check_split(void) {
    int bad = 0;
    for (int64_t n = 0; n < 300; n += (n < 40 ? 1 : 37))
        for (int64_t align = 1; align <= 16; align = align * 2 + (align == 4))
            for (int nth = 1; nth <= 9; nth++) {
                int64_t expect = 0, maxc = 0, minc = INT64_MAX;
                for (int t = 0; t < nth; t++) {
                    int64_t lo, hi;
                    pool_split(n, align, t, nth, &lo, &hi);
                    if (lo != expect || hi < lo || hi > n) bad++;
                    if (lo < n && lo % align) bad++;      /* chunks start on the grid */
                    if (hi < n && hi % align) bad++;
                    expect = hi;
                    int64_t c = (hi - lo + align - 1) / align;
                    if (c > maxc) maxc = c;
                    if (c < minc) minc = c;
                }
                if (expect != (n > 0 ? n : 0)) bad++;   /* contiguous cover of [0, n) */
                if (maxc - minc > 1) bad++;              /* near-equal in align units */
            }
    CHECK(bad == 0, "pool_split: %d property violations", bad);
    int64_t lo, hi;
    pool_split(10, 4, 0, 2, &lo, &hi);
    CHECK(lo == 0 && hi == 8, "split 10/4 t0: [%lld,%lld)", (long long)lo, (long long)hi);
    pool_split(10, 4, 1, 2, &lo, &hi);
    CHECK(lo == 8 && hi == 10, "split 10/4 t1: [%lld,%lld)", (long long)lo, (long long)hi);
}

int main(void) {
    check_split();
    CHECK(pool_default_threads() >= 1, "default threads");
    CHECK(pool_create(0) == NULL, "0 threads rejected");

    static const int64_t sizes[] = {0, 1, 2, 3, 5, 7, 8, 31, 64, 100, 896, 4864, 10007};
    enum { NS = sizeof sizes / sizeof sizes[0] };
    for (int nth = 1; nth <= 6; nth++) {
        qw_pool *p = pool_create(nth);
        CHECK(p != NULL, "pool_create(%d)", nth);
        if (!p) continue;
        CHECK(pool_threads(p) == nth, "pool_threads");
        atomic_int *hits = malloc(10007 * sizeof *hits);
        int bad = 0, bad_calls = 0, bad_tid = 0;
        int reps = nth <= 2 ? 3000 : 200; /* thousands of jobs back to back */
        for (int r = 0; r < reps; r++) {
            job j = {.n = sizes[r % NS], .align = 1 + r % 5, .hits = hits};
            for (int64_t i = 0; i < j.n; i++) atomic_init(&hits[i], 0);
            atomic_init(&j.calls, 0);
            pool_run(p, cover, &j);
            for (int64_t i = 0; i < j.n; i++)
                if (atomic_load(&hits[i]) != 1) bad++;
            if (atomic_load(&j.calls) != nth) bad_calls++;
            bad_tid |= j.bad_tid;
        }
        CHECK(bad == 0, "nth=%d: %d indices not covered exactly once", nth, bad);
        CHECK(bad_calls == 0, "nth=%d: %d jobs without exactly nth calls", nth, bad_calls);
        CHECK(!bad_tid, "nth=%d: tid out of range", nth);

        int64_t out[257];
        int bad_plain = 0;
        for (int r = 0; r < 1000; r++) {
            plain_job pj = {.out = out, .n = 257, .round = r};
            pool_run(p, plain, &pj);
            for (int64_t i = 0; i < 257; i++)
                if (out[i] != r * 1000003 + i) bad_plain++;
            if (r == 500) { /* let the workers fall asleep, then wake them */
                struct timespec ts = {0, 5 * 1000 * 1000};
                nanosleep(&ts, NULL);
            }
        }
        CHECK(bad_plain == 0, "nth=%d: %d plain writes not visible after pool_run", nth, bad_plain);

        /* pool_run_n: any number of shares, interleaved with pool_run jobs of
         * nth shares (a late worker must never run a share of the wrong job) */
        static const int share_counts[] = {1, 2, 3, 7, 16, 64};
        bad = bad_calls = bad_tid = 0;
        for (int r = 0; r < (nth <= 2 ? 3000 : 300); r++) {
            int ns = share_counts[r % 6];
            job j = {.n = sizes[(r * 7) % NS], .align = 1 + r % 3, .hits = hits};
            for (int64_t i = 0; i < j.n; i++) atomic_init(&hits[i], 0);
            atomic_init(&j.calls, 0);
            if (r % 4 == 3) {
                pool_run(p, cover, &j);
                ns = nth;
            } else
                pool_run_n(p, cover, &j, ns);
            for (int64_t i = 0; i < j.n; i++)
                if (atomic_load(&hits[i]) != 1) bad++;
            if (atomic_load(&j.calls) != ns) bad_calls++;
            bad_tid |= j.bad_tid;
        }
        CHECK(bad == 0, "nth=%d pool_run_n: %d indices not covered exactly once", nth, bad);
        CHECK(bad_calls == 0, "nth=%d pool_run_n: %d jobs without exactly n_shares calls", nth, bad_calls);
        CHECK(!bad_tid, "nth=%d pool_run_n: share index out of range", nth);
        free(hits);
        pool_free(p);
    }
    pool_free(NULL);
    return test_summary();
}
