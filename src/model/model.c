/* model.c - a Hugging Face Qwen2 folder -> qw_model (see model.h).
 *
 * Tensor names are transformers' Qwen2ForCausalLM state dict:
 *   model.embed_tokens.weight                         [vocab, hidden]
 *   model.layers.N.input_layernorm.weight             [hidden]
 *   model.layers.N.self_attn.{q,k,v}_proj.{weight,bias}
 *   model.layers.N.self_attn.o_proj.weight            [hidden, nh*hd]
 *   model.layers.N.post_attention_layernorm.weight    [hidden]
 *   model.layers.N.mlp.{gate,up}_proj.weight          [inter, hidden]
 *   model.layers.N.mlp.down_proj.weight               [hidden, inter]
 *   model.norm.weight                                 [hidden]
 *   lm_head.weight                                    [vocab, hidden] (absent when tied)
 * Matrices point into the mapping in their stored dtype; the norm weights
 * and biases (a few KB per layer) are converted to float32 copies.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/safetensors.h"
#include "base/log.h"
#include "model/model.h"

typedef struct model_priv {
    st_set st;
    float *vecs;   /* one block holding every converted vector */
    void **copies; /* aligned copies of misaligned tensors (rare) */
    int n_copies;
} model_priv;

/* Kernels read weights as arrays of their element type, so the data must
 * be aligned to the element size. Files written by transformers are (the
 * header is padded to 8 bytes); for a file that is not, the tensor is copied
 * once into an aligned buffer. Returns the pointer to use, NULL if out of
 * memory. */
static const void *aligned(model_priv *p, const st_tensor *t) {
    if (((uintptr_t)t->data % (uintptr_t)t->elem_size) == 0) return t->data;
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

static int find(const st_set *st, const char *dir, const char *name, const st_tensor **out, const char **file,
                qw_err *err) {
    *out = st_set_find(st, name, file);
    if (!*out) return qw_errf(err, "model: %s: tensor '%s' is missing", dir, name);
    if ((*out)->qdtype < 0)
        return qw_errf(err, "model: %s: tensor '%s' has unsupported dtype %s (BF16, F16 or F32 expected)", *file,
                       name, (*out)->dtype);
    return 0;
}

static int get_mat(qw_mat *m, model_priv *pv, const st_set *st, const char *dir, const char *name, int64_t rows, int64_t cols,
                   qw_err *err) {
    const st_tensor *t;
    const char *file = dir;
    if (find(st, dir, name, &t, &file, err)) return -1;
    if (t->n_dims != 2 || t->shape[0] != rows || t->shape[1] != cols)
        return qw_errf(err, "model: %s: tensor '%s' has shape [%lld%s%lld], expected [%lld, %lld]", file, name,
                       (long long)(t->n_dims > 0 ? t->shape[0] : 0), t->n_dims == 2 ? ", " : "?, ",
                       (long long)(t->n_dims > 1 ? t->shape[1] : 0), (long long)rows, (long long)cols);
    m->data = aligned(pv, t);
    if (!m->data) return qw_errf(err, "model: %s: out of memory", file);
    m->dtype = (qw_dtype)t->qdtype;
    m->rows = rows;
    m->cols = cols;
    return 0;
}

static int get_vec(float *dst, model_priv *pv, const st_set *st, const char *dir, const char *name, int64_t n, qw_err *err) {
    const st_tensor *t;
    const char *file = dir;
    if (find(st, dir, name, &t, &file, err)) return -1;
    if (t->n_dims != 1 || t->shape[0] != n)
        return qw_errf(err, "model: %s: tensor '%s' has %d dims / %lld elements, expected [%lld]", file, name,
                       t->n_dims, (long long)t->numel, (long long)n);
    const void *src = aligned(pv, t);
    if (!src) return qw_errf(err, "model: %s: out of memory", file);
    kernels()->to_f32[t->qdtype](dst, src, n);
    return 0;
}

static uint64_t mat_bytes(const qw_mat *m) { return (uint64_t)m->rows * (uint64_t)m->cols * (uint64_t)qw_dtype_size(m->dtype); }

int model_load(qw_model **out, const char *dir, qw_err *err) {
    *out = NULL;
    qw_model *m = calloc(1, sizeof *m);
    model_priv *p = calloc(1, sizeof *p);
    if (!m || !p) {
        free(m);
        free(p);
        return qw_errf(err, "model: %s: out of memory", dir);
    }
    m->priv = p;
    if (config_load(&m->cfg, dir, err)) goto fail;
    const qw_config *c = &m->cfg;
    m->dir = strdup(dir);
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/') dl--;
    size_t b = dl;
    while (b > 0 && dir[b - 1] != '/') b--;
    m->name = malloc(dl - b + 1);
    m->layers = calloc((size_t)c->n_layers, sizeof *m->layers);
    int64_t H = c->hidden, I = c->inter, Q = (int64_t)c->n_heads * c->head_dim,
            KV = (int64_t)c->n_kv_heads * c->head_dim;
    int64_t per_layer = 2 * H + Q + 2 * KV;
    p->vecs = malloc((size_t)(per_layer * c->n_layers + H) * sizeof(float));
    if (!m->dir || !m->name || !m->layers || !p->vecs) {
        qw_errf(err, "model: %s: out of memory", dir);
        goto fail;
    }
    memcpy(m->name, dir + b, dl - b);
    m->name[dl - b] = 0;

    if (st_open_dir(&p->st, dir, err)) goto fail;
    const st_set *st = &p->st;
    if (get_mat(&m->embed, p, st, dir, "model.embed_tokens.weight", c->vocab, H, err)) goto fail;
    m->weight_bytes = mat_bytes(&m->embed);
    if (c->tie_embeddings) {
        m->lm_head = m->embed;
    } else {
        if (get_mat(&m->lm_head, p, st, dir, "lm_head.weight", c->vocab, H, err)) goto fail;
        m->weight_bytes += mat_bytes(&m->lm_head);
    }
    float *v = p->vecs;
    m->final_norm = v;
    v += H;
    if (get_vec(m->final_norm, p, st, dir, "model.norm.weight", H, err)) goto fail;
    char name[256];
    for (int l = 0; l < c->n_layers; l++) {
        qw_layer *L = &m->layers[l];
        L->attn_norm = v, v += H;
        L->mlp_norm = v, v += H;
        L->bq = v, v += Q;
        L->bk = v, v += KV;
        L->bv = v, v += KV;
#define NAME(suffix) (snprintf(name, sizeof name, "model.layers.%d.%s", l, suffix), name)
        if (get_vec(L->attn_norm, p, st, dir, NAME("input_layernorm.weight"), H, err) ||
            get_vec(L->mlp_norm, p, st, dir, NAME("post_attention_layernorm.weight"), H, err) ||
            get_mat(&L->wq, p, st, dir, NAME("self_attn.q_proj.weight"), Q, H, err) ||
            get_vec(L->bq, p, st, dir, NAME("self_attn.q_proj.bias"), Q, err) ||
            get_mat(&L->wk, p, st, dir, NAME("self_attn.k_proj.weight"), KV, H, err) ||
            get_vec(L->bk, p, st, dir, NAME("self_attn.k_proj.bias"), KV, err) ||
            get_mat(&L->wv, p, st, dir, NAME("self_attn.v_proj.weight"), KV, H, err) ||
            get_vec(L->bv, p, st, dir, NAME("self_attn.v_proj.bias"), KV, err) ||
            get_mat(&L->wo, p, st, dir, NAME("self_attn.o_proj.weight"), H, Q, err) ||
            get_mat(&L->w_gate, p, st, dir, NAME("mlp.gate_proj.weight"), I, H, err) ||
            get_mat(&L->w_up, p, st, dir, NAME("mlp.up_proj.weight"), I, H, err) ||
            get_mat(&L->w_down, p, st, dir, NAME("mlp.down_proj.weight"), H, I, err))
            goto fail;
#undef NAME
        m->weight_bytes += mat_bytes(&L->wq) + mat_bytes(&L->wk) + mat_bytes(&L->wv) + mat_bytes(&L->wo) +
                           mat_bytes(&L->w_gate) + mat_bytes(&L->w_up) + mat_bytes(&L->w_down);
    }
    *out = m;
    return 0;
fail:
    model_free(m);
    return -1;
}

void model_free(qw_model *m) {
    if (!m) return;
    model_priv *p = m->priv;
    if (p) {
        st_close(&p->st);
        free(p->vecs);
        for (int i = 0; i < p->n_copies; i++) free(p->copies[i]);
        free(p->copies);
        free(p);
    }
    free(m->quant_buf);
    free(m->layers);
    free(m->dir);
    free(m->name);
    free(m);
}
