/* model_internal.h - what model.c (Hugging Face folders) and model_gguf.c
 * (GGUF files) share: a format-neutral view of a tensor, the tensor names of
 * each format, and model_build(), which looks every tensor up, checks its
 * dtype and shape and fills a qw_model. Private to src/model/. */
#ifndef QW_MODEL_INTERNAL_H
#define QW_MODEL_INTERNAL_H

#include <stdint.h>

#include "format/gguf.h"
#include "format/safetensors.h"
#include "model/model.h"

#define MODEL_MAX_DIMS 8

/* A tensor as a file holds it. shape is outermost first (row-major: a
 * [rows, cols] matrix has shape {rows, cols}), whatever the file's order. */
typedef struct model_tensor {
    const char *name;     /* as the file names it */
    const char *file;     /* the file it is in, for messages */
    qw_dtype dtype;       /* only F32 / F16 / BF16 reach model_build */
    int n_dims;
    int64_t shape[MODEL_MAX_DIMS];
    int64_t numel;
    const void *data;     /* [nbytes] in the mapping */
    uint64_t nbytes;
} model_tensor;

/* Finds `name` in src. Returns 1 and *out, 0 if absent, or -1 with a
 * message if present but unusable (a dtype we cannot compute with). */
typedef int (*model_find_fn)(const void *src, const char *name, model_tensor *out, qw_err *err);

/* One format's tensor names; the per-layer ones are printf formats taking
 * the layer number. */
typedef struct model_names {
    const char *embed, *lm_head, *final_norm;
    const char *attn_norm, *mlp_norm, *wq, *bq, *wk, *bk, *wv, *bv, *wo, *gate, *up, *down;
} model_names;

typedef struct model_priv {
    st_set st;     /* Hugging Face folder */
    gguf_map gg;   /* or a GGUF file */
    float *vecs;   /* one block holding every converted vector */
    void **copies; /* aligned copies of misaligned tensors (rare) */
    int n_copies;
} model_priv;

/* Fill m's tensors (m->cfg already set): look every tensor up with find,
 * check dtype and shape, point matrices into the mapping, convert vectors
 * to float32. m->cfg.tie_embeddings decides whether lm_head is read.
 * `label` names the model in "missing" messages. file_bytes (the size of
 * the weight files) bounds what the config may ask for before anything is
 * allocated for it. Returns 0 or -1. */
int model_build(qw_model *m, const model_names *names, model_find_fn find, const void *src, const char *label,
                uint64_t file_bytes, qw_err *err);

/* Set m->dir (a copy of path) and m->name (its base name, without a
 * trailing "/" or `strip_ext`). Returns 0 or -1 (out of memory). */
int model_set_name(qw_model *m, const char *path, const char *strip_ext, qw_err *err);

/* model_gguf.c: m->cfg from the metadata of p->gg, then model_build(). */
int model_load_gguf(qw_model *m, model_priv *p, const char *path, qw_err *err);

#endif
