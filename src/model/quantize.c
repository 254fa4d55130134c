/* quantize.c - convert a loaded model's matrices to a block type (Q8_0).
 *
 * `--quant q8_0` for a BF16/F16/F32 Hugging Face folder: every matrix (the
 * embedding and lm_head too, as llama.cpp's Q8_0 files have them) becomes
 * Q8_0 in one buffer the model owns, quantized row by row with GGML's rule
 * (src/kernels/matmul/matmul_ref.c), so decode reads 34 bytes per 32 weights instead
 * of 64. The 16-bit originals in the mapping are then released from memory
 * (madvise DONTNEED: they are file-backed and read-only, so the pages are
 * simply dropped; nothing reads them again).
 *
 * Matrices that are already of a block type (a GGUF file's Q8_0, Q4_0, Q4_K,
 * Q6_K ... tensors) are kept as they are: re-quantizing a 4-bit matrix to
 * Q8_0 would cost memory and speed and could only add error.
 *
 * One matrix at a time, rows split over a temporary thread pool: each thread
 * converts a row to float32 (the kernel table's exact to_f32) and quantizes
 * it (the table's quantize_q8_0, byte-identical to the reference); then the
 * matrix's source pages are released, so the peak stays near the quantized
 * size plus one 16-bit matrix.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "model/model.h"
#include "runtime/pool.h"

typedef struct {
    qw_mat *mat;
    char name[96];
    int64_t offset; /* bytes into the buffer */
} quant_item;

typedef struct {
    const quant_item *item; /* the matrix being quantized */
    char *buf;
    float *rows;            /* [threads][max_cols] float32 scratch */
    int64_t max_cols;
} quant_job;

static void quant_run(void *arg, int tid, int nth) {
    const quant_job *j = arg;
    const qw_kernels *K = kernels();
    const qw_mat *m = j->item->mat;
    float *row = j->rows + (int64_t)tid * j->max_cols;
    int64_t lo, hi, rb_in = qw_dtype_row_bytes(m->dtype, m->cols), rb_out = qw_dtype_row_bytes(QW_Q8_0, m->cols);
    pool_split(m->rows, 1, tid, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        K->to_f32[m->dtype](row, (const char *)m->data + r * rb_in, m->cols);
        K->quantize_q8_0(j->buf + j->item->offset + r * rb_out, row, m->cols);
    }
}

/* Drop the pages wholly inside [p, p + n) from this process's memory. */
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

int model_quantize(qw_model *m, qw_dtype to, int threads, qw_err *err) {
    if (to != QW_Q8_0) return qw_errf(err, "quantize: only Q8_0 is supported, not %s", qw_dtype_name(to));
    const int L = m->cfg.n_layers, tied = m->lm_head.data == m->embed.data;
    int cap = 9 * L + 2, n = 0;
    quant_item *items = calloc((size_t)cap, sizeof *items);
    if (!items) return qw_errf(err, "quantize: out of memory");
#define ADD(M, ...)                                                                                  \
    do {                                                                                           \
        items[n].mat = (M);                                                                        \
        snprintf(items[n].name, sizeof items[n].name, __VA_ARGS__);                                \
        n++;                                                                                       \
    } while (0)
    ADD(&m->embed, "model.embed_tokens.weight");
    if (!tied) ADD(&m->lm_head, "lm_head.weight");
    for (int l = 0; l < L; l++) {
        qw_layer *y = &m->layers[l];
        ADD(&y->wq, "model.layers.%d.self_attn.q_proj.weight", l);
        ADD(&y->wk, "model.layers.%d.self_attn.k_proj.weight", l);
        ADD(&y->wv, "model.layers.%d.self_attn.v_proj.weight", l);
        ADD(&y->wo, "model.layers.%d.self_attn.o_proj.weight", l);
        ADD(&y->w_gate, "model.layers.%d.mlp.gate_proj.weight", l);
        ADD(&y->w_up, "model.layers.%d.mlp.up_proj.weight", l);
        ADD(&y->w_down, "model.layers.%d.mlp.down_proj.weight", l);
    }
#undef ADD
    quant_job j = {NULL, NULL, NULL, 0};
    int n_q = 0;
    m->n_quant_kept = 0;
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        qw_mat *mt = items[i].mat;
        if (qw_dtype_quantized(mt->dtype)) { /* already quantized (a GGUF Q8_0, Q4_K, ... tensor): kept */
            m->n_quant_kept++;
            continue;
        }
        int64_t rb = qw_dtype_row_bytes(to, mt->cols);
        if (rb < 0) {
            qw_errf(err, "--quant %s: %s has %lld columns, not a multiple of %d", qw_dtype_name(to), items[i].name,
                    (long long)mt->cols, qw_dtype_block(to));
            free(items);
            return -1;
        }
        items[n_q] = items[i];
        items[n_q].offset = total;
        n_q++;
        total += rb * mt->rows;
        if (mt->cols > j.max_cols) j.max_cols = mt->cols;
    }
    if (n_q == 0) {
        free(items);
        return 0;
    }
    if (threads < 1) threads = 1;
    j.buf = malloc((size_t)total);
    j.rows = malloc((size_t)threads * (size_t)j.max_cols * sizeof(float));
    qw_pool *pool = pool_create(threads);
    if (!j.buf || !j.rows || !pool) {
        free(j.buf);
        free(j.rows);
        free(items);
        pool_free(pool);
        return qw_errf(err, "quantize: cannot allocate %lld MB", (long long)(total >> 20));
    }
    /* One matrix at a time, its source released right after: the peak is the
     * quantized copy plus one 16-bit matrix, not both models. */
    for (int i = 0; i < n_q; i++) {
        qw_mat *mt = items[i].mat;
        j.item = &items[i];
        pool_run(pool, quant_run, &j);
        release(mt->data, qw_dtype_row_bytes(mt->dtype, mt->cols) * mt->rows);
        mt->data = j.buf + items[i].offset;
        mt->dtype = to;
    }
    pool_free(pool);
    free(j.rows);
    if (tied) m->lm_head = m->embed;
    free(m->quant_buf);
    m->quant_buf = j.buf;
    uint64_t wb = 0; /* as model_load counts: the embedding once, lm_head if untied */
    for (int i = 0; i < n; i++) wb += (uint64_t)qw_dtype_row_bytes(items[i].mat->dtype, items[i].mat->cols) *
                                      (uint64_t)items[i].mat->rows;
    m->weight_bytes = wb;
    free(items);
    return 0;
}
