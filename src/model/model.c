/* model.c - MODEL (a Hugging Face folder or a GGUF file) -> qw_model (see
 * model.h).
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
 * (GGUF names: model_gguf.c.) This file picks the format and finds
 * safetensors tensors; model_build() (model_build.c) is shared by both
 * formats: it looks each tensor up through a format's find function and
 * checks dtype and shape in one place.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/bigmem.h"
#include "base/log.h"
#include "model/model_internal.h"

static const model_names hf_names = {
    "model.embed_tokens.weight", "lm_head.weight", "model.norm.weight",
    "model.layers.%d.input_layernorm.weight", "model.layers.%d.post_attention_layernorm.weight",
    "model.layers.%d.self_attn.q_proj.weight", "model.layers.%d.self_attn.q_proj.bias",
    "model.layers.%d.self_attn.k_proj.weight", "model.layers.%d.self_attn.k_proj.bias",
    "model.layers.%d.self_attn.v_proj.weight", "model.layers.%d.self_attn.v_proj.bias",
    "model.layers.%d.self_attn.o_proj.weight", "model.layers.%d.mlp.gate_proj.weight",
    "model.layers.%d.mlp.up_proj.weight", "model.layers.%d.mlp.down_proj.weight",
};

static int st_find_fn(const void *src, const char *name, model_tensor *out, qw_err *err) {
    const char *file = NULL;
    const st_tensor *t = st_set_find(src, name, &file);
    if (!t) return 0;
    if (t->qdtype < 0)
        return qw_errf(err, "model: %s: tensor '%s' has unsupported dtype %s (BF16, F16 or F32 expected)", file, name,
                       t->dtype);
    memset(out, 0, sizeof *out);
    out->name = t->name;
    out->file = file;
    out->dtype = (qw_dtype)t->qdtype;
    out->n_dims = t->n_dims;
    for (int d = 0; d < t->n_dims && d < MODEL_MAX_DIMS; d++) out->shape[d] = t->shape[d];
    out->numel = t->numel;
    out->data = t->data;
    out->nbytes = t->nbytes;
    return 1;
}

static int file_exists(const char *dir, const char *name) {
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0;
}

int model_load(qw_model **out, const char *path, qw_err *err) {
    *out = NULL;
    qw_model *m = calloc(1, sizeof *m);
    model_priv *p = calloc(1, sizeof *p);
    if (!m || !p) {
        free(m);
        free(p);
        return qw_errf(err, "model: %s: out of memory", path);
    }
    m->priv = p;
    /* A file is a GGUF file; a folder with safetensors is a Hugging Face
     * model; a folder without them but with exactly one .gguf is that. */
    struct stat st;
    char *gpath = NULL;
    if (stat(path, &st) == 0 && !S_ISDIR(st.st_mode)) {
        if (model_load_gguf(m, p, path, err)) goto fail;
        goto done;
    }
    if (!file_exists(path, "model.safetensors") && !file_exists(path, "model.safetensors.index.json")) {
        int rc = gguf_dir_single(path, &gpath, err);
        if (rc < 0) goto fail;
        if (rc > 0) {
            rc = model_load_gguf(m, p, gpath, err);
            free(gpath);
            if (rc) goto fail;
            goto done;
        }
    }
    m->format = "safetensors";
    if (config_load(&m->cfg, path, err)) goto fail;
    if (model_set_name(m, path, NULL, err)) goto fail;
    if (st_open_dir(&p->st, path, err)) goto fail;
    uint64_t bytes = 0;
    for (int i = 0; i < p->st.n_files; i++) bytes += p->st.maps[i].size;
    if (model_build(m, &hf_names, st_find_fn, &p->st, path, bytes, err)) goto fail;
done:
    if (qw_log_level() <= QW_LOG_INFO) {
        char desc[512];
        model_describe(m, desc, sizeof desc);
        LOG_INFO("model: %s: %s", m->name, desc);
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
        gguf_close(&p->gg);
        free(p->vecs);
        for (int i = 0; i < p->n_copies; i++) free(p->copies[i]);
        free(p->copies);
        free(p);
    }
    free(m->quant_buf);
    bigmem_free(m->repack_buf, (size_t)m->repack_bytes);
    free(m->layers);
    free(m->dir);
    free(m->name);
    free(m);
}
