/* pool.h - a persistent thread pool for data-parallel loops.
 *
 * The pool owns its threads; kernels never start threads. pool_run() runs
 * fn(arg, tid, nth) on every thread (the caller is thread 0) and returns when
 * all have finished. Workers spin briefly then sleep on a condition variable
 * between jobs, so a decode step pays no thread start-up cost.
 *
 * Not reentrant: one pool_run() at a time per pool (the engine thread owns it).
 */
#ifndef QW_POOL_H
#define QW_POOL_H

#include <stdint.h>

typedef struct qw_pool qw_pool;
typedef void (*qw_pool_fn)(void *arg, int tid, int nth);

/* n_threads >= 1 (total, including the caller). Returns NULL on failure. */
qw_pool *pool_create(int n_threads);
void pool_free(qw_pool *p);
int pool_threads(const qw_pool *p);
void pool_run(qw_pool *p, qw_pool_fn fn, void *arg);

/* The same job cut into n_shares pieces (fn(arg, share, n_shares) for every
 * share, on whichever thread claims it): more shares than threads keep a
 * preempted thread from holding back a large fraction of the work on a
 * shared machine. Share indices are unique within a job; fn must not use
 * them as thread ids. */
void pool_run_n(qw_pool *p, qw_pool_fn fn, void *arg, int n_shares);

/* Split [0, n) into nth near-equal chunks, rounded to multiples of `align`;
 * returns thread tid's chunk in *lo, *hi (possibly empty). */
void pool_split(int64_t n, int64_t align, int tid, int nth, int64_t *lo, int64_t *hi);

/* Physical core count (falls back to online CPUs; at least 1). */
int pool_default_threads(void);

#endif
