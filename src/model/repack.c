/* repack.c - rearrange a loaded model's quantized matrices (block-32:
 * Q8_0, Q4_0, Q4_1, Q5_0, Q5_1; K-quants: Q4_K, Q5_K, Q6_K) into the
 * row-interleaved tiles of kernels.h ("repacked weights"), for the fast
 * precision's integer kernels.
 *
 * Only where the selected kernel level has a matmul_qr kernel for the type
 * (otherwise its matmul_q on the original rows is the faster path), and
 * only for matrices whose rows are a multiple of QW_RP_ROWS. The K-quants
 * are repacked by default too (QWENC_REPACK=block32 leaves them): since
 * their tile blocks are read strictly in order, whole 64-byte lines, with
 * no software prefetch (the hardware's streams do better), the repacked
 * kernels beat the row-at-a-time ones in decode as well as prefill (real
 * 1.5B Q4_K_M, docs/PERFORMANCE.md). The copy has the original's size
 * (K-quants: Q4_K / Q5_K 3% more, their scales unpacked to bytes; Q6_K 1%,
 * padding); the original's pages in the mapping are released
 * right after (madvise DONTNEED: file-backed and read-only, so they are
 * dropped, not copied), so repacking does not double the weights' memory.
 * The original stays valid: the embedding lookup (a tied lm_head is the
 * embedding) and the exact precision read it, faulting back in only the
 * pages they touch. One matrix at a time, tiles split over a temporary
 * pool, so the peak is the repacked copy plus one mapped matrix.
 *
 * 16-bit matrices (BF16, F16) are copied as they are, in the same pass: the
 * copy lives in huge pages (base/bigmem.h) and the matrix's data points at
 * it from then on (exact and fast precision read the same bytes), the
 * mapped pages released as above. Their 1-row decode stream reads the whole
 * model per token; in 4 KiB file pages it stalled at every page boundary
 * (BF16 decode 0.80x llama.cpp, docs/PERFORMANCE.md). The repacked
 * quantized copies share that buffer and its huge pages.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/bigmem.h"
#include "base/log.h"
#include "model/model_internal.h"
#include "runtime/pool.h"

typedef struct {
    const qw_mat *mat;
    uint8_t *dst;
} repack_job;

static int is_16bit(qw_dtype t) { return t == QW_BF16 || t == QW_F16; }

static void repack_run(void *arg, int tid, int nth) {
    const repack_job *j = arg;
    const qw_mat *m = j->mat;
    int64_t lo, hi, rb = qw_dtype_row_bytes(m->dtype, m->cols);
    if (is_16bit(m->dtype)) { /* a plain copy, rows split over the pool */
        pool_split(m->rows, 1, tid, nth, &lo, &hi);
        if (hi > lo) memcpy(j->dst + lo * rb, (const uint8_t *)m->data + lo * rb, (size_t)((hi - lo) * rb));
        return;
    }
    int64_t tb = qw_repack_bytes(m->dtype, QW_RP_ROWS, m->cols); /* one tile's copy */
    pool_split(m->rows / QW_RP_ROWS, 1, tid, nth, &lo, &hi);
    if (hi > lo)
        qw_repack_q(m->dtype, j->dst + lo * tb, (const uint8_t *)m->data + lo * QW_RP_ROWS * rb,
                    (hi - lo) * QW_RP_ROWS, m->cols);
}

/* Whether [p, p + n) lies in one of the model's file mappings (read-only,
 * MAP_PRIVATE: dropping its pages loses nothing). A matrix in memory the
 * model owns (model_quantize's buffer, an aligned copy) is not: there
 * MADV_DONTNEED would zero it. */
static int in_map(const qw_mapfile *mf, const void *p, int64_t n) {
    const uint8_t *a = p;
    return mf->data && a >= mf->data && a + n <= mf->data + mf->size;
}

static int file_backed(const qw_model *m, const void *p, int64_t n) {
    const model_priv *pv = m->priv;
    if (!pv) return 0;
    if (in_map(&pv->gg.map, p, n)) return 1;
    for (int i = 0; i < pv->st.n_files; i++)
        if (in_map(&pv->st.maps[i], p, n)) return 1;
    return 0;
}

/* Drop the pages wholly inside [p, p + n) (file-backed) from this process's memory. */
static void release(const void *p, int64_t n) {
#ifdef MADV_DONTNEED
    long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0) return;
    uintptr_t a = ((uintptr_t)p + (uintptr_t)pg - 1) / (uintptr_t)pg * (uintptr_t)pg;
    uintptr_t e = ((uintptr_t)p + (uintptr_t)n) / (uintptr_t)pg * (uintptr_t)pg;
    if (e > a) madvise((void *)a, e - a, MADV_DONTNEED);
#else
    (void)p;
    (void)n;
#endif
}

/* Each copy starts on a 64-byte line: the K-quant tile blocks are whole
 * lines, and a vector load that straddles two lines costs (kernels.h). */
static int64_t line_padded(int64_t bytes) { return (bytes + 63) / 64 * 64; }

/* Bytes of w's copy: the repacked tiles, or the 16-bit rows as they are. */
static int64_t copy_bytes(const qw_mat *w) {
    return is_16bit(w->dtype) ? qw_dtype_row_bytes(w->dtype, w->cols) * w->rows
                              : qw_repack_bytes(w->dtype, w->rows, w->cols);
}

/* Whether w is a 16-bit matrix that model_repack copies into huge pages:
 * only one in a file mapping, whose pages the copy replaces (one already in
 * memory the model owns, e.g. an aligned copy, would be doubled). */
static int copyable(const qw_model *m, const qw_mat *w, int which) {
    return w->data && which > 0 && is_16bit(w->dtype) && w->rows > 0 && w->cols > 0 &&
           file_backed(m, w->data, qw_dtype_row_bytes(w->dtype, w->cols) * w->rows);
}

int model_repackable(const qw_mat *w, int which) {
    const int kq = qw_dtype_block(w->dtype) == 256;
    return w->data && which > 0 && (!kq || which == QW_REPACK_ALL) && qw_repack_ok(w->dtype) &&
           kernels()->matmul_qr[w->dtype] && w->rows % QW_RP_ROWS == 0 &&
           qw_dtype_row_bytes(w->dtype, w->cols) > 0;
}

int model_repack(qw_model *m, int which, int threads, qw_err *err) {
    const int L = m->cfg.n_layers, tied = m->lm_head.data == m->embed.data;
    qw_mat *mats[9 * 64 + 2];
    int n = 0;
    if (L > 64) return qw_errf(err, "repack: %d layers: more than this build handles (64)", L);
    if (m->repack_buf) return 0; /* done */
    mats[n++] = &m->lm_head; /* the embedding itself is only looked up by row (a tied one moves with lm_head) */
    for (int l = 0; l < L; l++) {
        qw_layer *y = &m->layers[l];
        qw_mat *all[7] = {&y->wq, &y->wk, &y->wv, &y->wo, &y->w_gate, &y->w_up, &y->w_down};
        for (int i = 0; i < 7; i++) mats[n++] = all[i];
    }
    int64_t total = 0;
    for (int i = 0; i < n; i++)
        if (model_repackable(mats[i], which) || copyable(m, mats[i], which)) total += line_padded(copy_bytes(mats[i]));
    if (total == 0) return 0;
    uint8_t *buf = bigmem_alloc((size_t)total, &m->repack_huge);
    qw_pool *pool = pool_create(threads < 1 ? 1 : threads);
    if (!buf || !pool) {
        bigmem_free(buf, (size_t)total);
        pool_free(pool);
        return qw_errf(err, "repack: cannot allocate %lld MB", (long long)(total >> 20));
    }
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        qw_mat *w = mats[i];
        const int copy = copyable(m, w, which);
        if (!copy && !model_repackable(w, which)) continue;
        int64_t bytes = qw_dtype_row_bytes(w->dtype, w->cols) * w->rows;
        const void *orig = w->data;
        repack_job j = {w, buf + off};
        pool_run(pool, repack_run, &j);
        if (file_backed(m, orig, bytes)) release(orig, bytes); /* a tied lm_head: its lookups fault in a page per token */
        if (copy) {
            w->data = buf + off;
            m->repack_copied += line_padded(copy_bytes(w));
        } else
            w->rp = buf + off;
        off += line_padded(copy_bytes(w));
    }
    pool_free(pool);
    if (tied) m->embed = m->lm_head;
    m->repack_buf = buf;
    m->repack_bytes = total;
    return 0;
}

int model_repack_wanted(int precision) {
    const char *e = getenv("QWENC_REPACK");
    if (precision != 0 || (e && !strcmp(e, "0"))) return 0;
    return e && !strcmp(e, "block32") ? QW_REPACK_BLOCK32 : QW_REPACK_ALL;
}

int model_repack_logged(qw_model *m, int which, int threads, qw_err *err) {
    double t0 = qw_now();
    if (model_repack(m, which, threads, err)) return -1;
    const int64_t tiles = m->repack_bytes - m->repack_copied;
    if (tiles)
        LOG_INFO("repacked %.0f MB of quantized weights into %d-row tiles%s in %.2f s", (double)tiles / 1e6,
                 QW_RP_ROWS, m->repack_huge ? " (huge pages)" : "", qw_now() - t0);
    if (m->repack_copied)
        LOG_INFO("copied %.0f MB of 16-bit weights into %s in %.2f s", (double)m->repack_copied / 1e6,
                 m->repack_huge ? "huge pages" : "memory", qw_now() - t0);
    return 0;
}
