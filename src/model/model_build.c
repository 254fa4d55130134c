/* model_build.c - the format-independent half of loading (model_internal.h):
 * model_build() looks every tensor up through a format's find function
 * (safetensors in model.c, GGUF in model_gguf.c), checks dtype and shape in
 * one place, points the matrices into the mapping in their stored dtype and
 * converts the norm weights and biases (a few KB per layer) to float32.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "model/model_internal.h"

/* Kernels read weights as arrays of their element type, so the data must
 * be aligned to the element size. Files written by transformers are (the
 * header is padded to 8 bytes), GGUF data is aligned to general.alignment;
 * for a file that is not, the tensor is copied once into an aligned buffer.
 * Returns the pointer to use, NULL if out of memory. */
static const void *aligned(model_priv *p, const model_tensor *t) {
    int align = qw_dtype_size(t->dtype); /* block types (Q8_0): byte loads, any address */
    if (align <= 1 || ((uintptr_t)t->data % (uintptr_t)align) == 0) return t->data;
    void **c = realloc(p->copies, (size_t)(p->n_copies + 1) * sizeof *c);
    if (!c) return NULL;
    p->copies = c;
    void *d = malloc(t->nbytes ? (size_t)t->nbytes : 1);
    if (!d) return NULL;
    memcpy(d, t->data, (size_t)t->nbytes);
    p->copies[p->n_copies++] = d;
    if (p->n_copies == 1) LOG_WARN("model: tensor '%s' is not aligned in its file: copying misaligned tensors", t->name);
    return d;
}

typedef struct build {
    qw_model *m;
    model_priv *p;
    model_find_fn find;
    const void *src;
    const char *label;
    qw_err *err;
} build;

static int find(build *b, const char *name, model_tensor *t) {
    int rc = b->find(b->src, name, t, b->err);
    if (rc < 0) return -1;
    if (rc == 0) return qw_errf(b->err, "model: %s: tensor '%s' is missing", b->label, name);
    if ((unsigned)t->dtype < QW_DTYPE_COUNT) b->m->n_by_dtype[t->dtype]++;
    return 0;
}

static int get_mat(build *b, qw_mat *m, const char *name, int64_t rows, int64_t cols) {
    model_tensor t;
    if (find(b, name, &t)) return -1;
    if (t.n_dims != 2 || t.shape[0] != rows || t.shape[1] != cols)
        return qw_errf(b->err, "model: %s: tensor '%s' has shape [%lld%s%lld], expected [%lld, %lld]", t.file, name,
                       (long long)(t.n_dims > 0 ? t.shape[0] : 0), t.n_dims == 2 ? ", " : "?, ",
                       (long long)(t.n_dims > 1 ? t.shape[1] : 0), (long long)rows, (long long)cols);
    m->data = aligned(b->p, &t);
    if (!m->data) return qw_errf(b->err, "model: %s: out of memory", t.file);
    m->dtype = t.dtype;
    m->rows = rows;
    m->cols = cols;
    return 0;
}

static int get_vec(build *b, float *dst, const char *name, int64_t n) {
    model_tensor t;
    if (find(b, name, &t)) return -1;
    if (t.n_dims != 1 || t.shape[0] != n)
        return qw_errf(b->err, "model: %s: tensor '%s' has %d dims / %lld elements, expected [%lld]", t.file, name,
                       t.n_dims, (long long)t.numel, (long long)n);
    const void *src = aligned(b->p, &t);
    if (!src) return qw_errf(b->err, "model: %s: out of memory", t.file);
    kernels()->to_f32[t.dtype](dst, src, n);
    return 0;
}

static uint64_t mat_bytes(const qw_mat *m) {
    return (uint64_t)m->rows * (uint64_t)qw_dtype_row_bytes(m->dtype, m->cols);
}

int model_build(qw_model *m, const model_names *nm, model_find_fn findfn, const void *src, const char *label,
                uint64_t file_bytes, qw_err *err) {
    model_priv *p = m->priv;
    const qw_config *c = &m->cfg;
    build b = {m, p, findfn, src, label, err};
    int64_t H = c->hidden, I = c->inter, Q = (int64_t)c->n_heads * c->head_dim,
            KV = (int64_t)c->n_kv_heads * c->head_dim;
    int64_t per_layer = 2 * H + Q + 2 * KV;
    /* Every vector element comes from at least 2 bytes of the files: a
     * config asking for more cannot match them (and must not make us
     * allocate gigabytes before the tensors are looked at). */
    if ((uint64_t)(per_layer * c->n_layers + H) * 2 > file_bytes)
        return qw_errf(err, "model: %s: the config asks for more weights than the files hold (%llu bytes)", label,
                       (unsigned long long)file_bytes);
    m->layers = calloc((size_t)c->n_layers, sizeof *m->layers);
    p->vecs = malloc((size_t)(per_layer * c->n_layers + H) * sizeof(float));
    if (!m->layers || !p->vecs) return qw_errf(err, "model: %s: out of memory", label);

    if (get_mat(&b, &m->embed, nm->embed, c->vocab, H)) return -1;
    m->weight_bytes = mat_bytes(&m->embed);
    if (c->tie_embeddings) {
        m->lm_head = m->embed;
    } else {
        if (get_mat(&b, &m->lm_head, nm->lm_head, c->vocab, H)) return -1;
        m->weight_bytes += mat_bytes(&m->lm_head);
    }
    float *v = p->vecs;
    m->final_norm = v;
    v += H;
    if (get_vec(&b, m->final_norm, nm->final_norm, H)) return -1;
    char name[256];
    for (int l = 0; l < c->n_layers; l++) {
        qw_layer *L = &m->layers[l];
        L->attn_norm = v, v += H;
        L->mlp_norm = v, v += H;
        L->bq = v, v += Q;
        L->bk = v, v += KV;
        L->bv = v, v += KV;
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
#endif
#define NAME(fmt) (snprintf(name, sizeof name, fmt, l), name)
        if (get_vec(&b, L->attn_norm, NAME(nm->attn_norm), H) || get_vec(&b, L->mlp_norm, NAME(nm->mlp_norm), H) ||
            get_mat(&b, &L->wq, NAME(nm->wq), Q, H) || get_vec(&b, L->bq, NAME(nm->bq), Q) ||
            get_mat(&b, &L->wk, NAME(nm->wk), KV, H) || get_vec(&b, L->bk, NAME(nm->bk), KV) ||
            get_mat(&b, &L->wv, NAME(nm->wv), KV, H) || get_vec(&b, L->bv, NAME(nm->bv), KV) ||
            get_mat(&b, &L->wo, NAME(nm->wo), H, Q) || get_mat(&b, &L->w_gate, NAME(nm->gate), I, H) ||
            get_mat(&b, &L->w_up, NAME(nm->up), I, H) || get_mat(&b, &L->w_down, NAME(nm->down), H, I))
            return -1;
#undef NAME
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
        m->weight_bytes += mat_bytes(&L->wq) + mat_bytes(&L->wk) + mat_bytes(&L->wv) + mat_bytes(&L->wo) +
                           mat_bytes(&L->w_gate) + mat_bytes(&L->w_up) + mat_bytes(&L->w_down);
    }
    return 0;
}

void model_describe(const qw_model *m, char *buf, size_t cap) {
    int done[QW_DTYPE_COUNT] = {0};
    size_t n = (size_t)snprintf(buf, cap, "%s%s%s; tensors ", m->format ? m->format : "?", m->file_type[0] ? " " : "",
                                m->file_type);
    for (int k = 0; k < QW_DTYPE_COUNT && n < cap; k++) {
        int best = -1;
        for (int t = 0; t < QW_DTYPE_COUNT; t++)
            if (!done[t] && m->n_by_dtype[t] > 0 && (best < 0 || m->n_by_dtype[t] > m->n_by_dtype[best])) best = t;
        if (best < 0) break;
        done[best] = 1;
        n += (size_t)snprintf(buf + n, cap - n, "%s%s x %d", k ? ", " : "", qw_dtype_name((qw_dtype)best),
                              m->n_by_dtype[best]);
    }
}

/* ------------------------------------------------- Hugging Face folders */

int model_set_name(qw_model *m, const char *path, const char *strip_ext, qw_err *err) {
    m->dir = strdup(path);
    size_t dl = strlen(path);
    while (dl > 1 && path[dl - 1] == '/') dl--;
    size_t b = dl;
    while (b > 0 && path[b - 1] != '/') b--;
    size_t el = strip_ext ? strlen(strip_ext) : 0;
    if (el && dl - b > el && !strcmp(path + dl - el, strip_ext)) dl -= el;
    m->name = malloc(dl - b + 1);
    if (!m->dir || !m->name) return qw_errf(err, "model: %s: out of memory", path);
    memcpy(m->name, path + b, dl - b);
    m->name[dl - b] = 0;
    return 0;
}
