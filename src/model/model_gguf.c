/* model_gguf.c - a GGUF file -> qw_model (tensor types: model.h).
 *
 * Follows what llama.cpp's convert_hf_to_gguf.py writes for architecture
 * "qwen2" (and tools/to_gguf.py, which writes the same):
 *   config: qwen2.block_count, .context_length, .embedding_length,
 *     .feed_forward_length, .attention.head_count, .attention.head_count_kv,
 *     .attention.key_length (head_dim, optional), .rope.freq_base,
 *     .attention.layer_norm_rms_epsilon; vocab = rows of token_embd.weight
 *     (which must equal the length of tokenizer.ggml.tokens when present);
 *     tied embeddings when there is no output.weight;
 *     EOS = tokenizer.ggml.eos_token_id, plus eot_token_id / eom_token_id
 *     when the file names them; no sampling defaults (greedy).
 *   tensors: token_embd.weight, blk.N.attn_norm.weight,
 *     blk.N.attn_{q,k,v}.{weight,bias}, blk.N.attn_output.weight,
 *     blk.N.ffn_norm.weight, blk.N.ffn_{gate,up,down}.weight,
 *     output_norm.weight, output.weight.
 * Q and K are stored as transformers has them: the converter permutes them
 * only for llama-style (interleaved) rope, and qwen2 uses NEOX rope (checked
 * by tests/e2e/test_gguf.py: logits bitwise equal to the safetensors model).
 * GGUF lists dims innermost first; they are reversed here so model_build()
 * sees [rows, cols] as for safetensors.
 * Features we do not compute (rope scaling, partial rotary, value length !=
 * key length) are refused rather than computed differently.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_internal.h"

static const model_names gguf_names = {
    "token_embd.weight",         "output.weight",            "output_norm.weight",
    "blk.%d.attn_norm.weight",   "blk.%d.ffn_norm.weight",   "blk.%d.attn_q.weight",
    "blk.%d.attn_q.bias",        "blk.%d.attn_k.weight",     "blk.%d.attn_k.bias",
    "blk.%d.attn_v.weight",      "blk.%d.attn_v.bias",       "blk.%d.attn_output.weight",
    "blk.%d.ffn_gate.weight",    "blk.%d.ffn_up.weight",     "blk.%d.ffn_down.weight",
};

static int gguf_find_fn(const void *src, const char *name, model_tensor *out, qw_err *err) {
    const gguf_file *f = src;
    const gguf_tensor *t = gguf_find_tensor(f, name);
    if (!t) return 0;
    if (gguf_tensor_check(f, t, err)) return -1;
    memset(out, 0, sizeof *out);
    out->name = t->name;
    out->file = f->label;
    out->dtype = (qw_dtype)t->qdtype;
    out->n_dims = t->n_dims;
    out->numel = 1;
    for (int d = 0; d < t->n_dims; d++) {
        out->shape[d] = t->ne[t->n_dims - 1 - d];
        out->numel *= t->ne[d];
    }
    out->data = t->data;
    out->nbytes = t->nbytes;
    return 1;
}

/* An integer key into an int; rc as gguf_get_int. */
static int get_i(const gguf_file *f, const char *key, int required, int64_t lo, int64_t hi, int *out, qw_err *err) {
    int64_t v;
    int rc = gguf_get_int(f, key, required, lo, hi, &v, err);
    if (rc == 1) *out = (int)v;
    return rc;
}

static int add_eos(qw_config *c, int id) {
    for (int i = 0; i < c->n_eos; i++)
        if (c->eos_ids[i] == id) return 0;
    if (c->n_eos < QW_MAX_EOS) c->eos_ids[c->n_eos++] = id;
    return 0;
}

static int gguf_config(qw_config *c, const gguf_file *f, qw_err *err) {
    memset(c, 0, sizeof *c);
    const char *lab = f->label, *s;
    uint64_t sl;
    if (gguf_get_str(f, "general.architecture", 1, &s, &sl, err) < 0) return -1;
    if (sl != 5 || memcmp(s, "qwen2", 5))
        return qw_errf(err, "model: %s: general.architecture is '%.*s'; only 'qwen2' is supported", lab,
                       (int)(sl > 60 ? 60 : sl), s);
    const int64_t BIG = 1L << 20;
    if (get_i(f, "qwen2.block_count", 1, 1, 4096, &c->n_layers, err) < 0 ||
        get_i(f, "qwen2.embedding_length", 1, 1, BIG, &c->hidden, err) < 0 ||
        get_i(f, "qwen2.feed_forward_length", 1, 1, 4 * BIG, &c->inter, err) < 0 ||
        get_i(f, "qwen2.attention.head_count", 1, 1, 4096, &c->n_heads, err) < 0)
        return -1;
    c->n_kv_heads = c->n_heads;
    c->max_pos = 32768;
    if (get_i(f, "qwen2.attention.head_count_kv", 0, 1, 4096, &c->n_kv_heads, err) < 0 ||
        get_i(f, "qwen2.context_length", 0, 1, 1L << 26, &c->max_pos, err) < 0)
        return -1;
    if (c->n_heads % c->n_kv_heads)
        return qw_errf(err, "model: %s: qwen2.attention.head_count %d is not a multiple of head_count_kv %d", lab,
                       c->n_heads, c->n_kv_heads);
    int hd = get_i(f, "qwen2.attention.key_length", 0, 2, 65536, &c->head_dim, err);
    if (hd < 0) return -1;
    if (!hd) {
        if (c->hidden % c->n_heads)
            return qw_errf(err, "model: %s: qwen2.embedding_length %d is not a multiple of head_count %d", lab,
                           c->hidden, c->n_heads);
        c->head_dim = c->hidden / c->n_heads;
    }
    int vl = c->head_dim, rd = c->head_dim;
    if (get_i(f, "qwen2.attention.value_length", 0, 1, 65536, &vl, err) < 0 ||
        get_i(f, "qwen2.rope.dimension_count", 0, 1, 65536, &rd, err) < 0)
        return -1;
    if (vl != c->head_dim)
        return qw_errf(err, "model: %s: qwen2.attention.value_length %d != key_length %d is not supported", lab, vl,
                       c->head_dim);
    if (rd != c->head_dim)
        return qw_errf(err, "model: %s: qwen2.rope.dimension_count %d != head dim %d (partial rotary) is not supported",
                       lab, rd, c->head_dim);
    if (c->head_dim % 2)
        return qw_errf(err, "model: %s: head dim %d must be even (rotary embedding)", lab, c->head_dim);
    if ((int64_t)c->n_heads * c->head_dim > BIG)
        return qw_errf(err, "model: %s: head_count * head dim too large", lab);
    double v = 10000.0;
    if (gguf_get_num(f, "qwen2.rope.freq_base", 0, 1e-3, 1e12, &v, err) < 0) return -1;
    c->rope_theta = (float)v;
    v = 1e-6;
    if (gguf_get_num(f, "qwen2.attention.layer_norm_rms_epsilon", 0, 1e-30, 1.0, &v, err) < 0) return -1;
    c->rms_eps = (float)v;
    if (gguf_get_str(f, "qwen2.rope.scaling.type", 0, &s, &sl, err) < 0) return -1;
    if (gguf_find_kv(f, "qwen2.rope.scaling.type") && !(sl == 4 && !memcmp(s, "none", 4)))
        return qw_errf(err, "model: %s: qwen2.rope.scaling.type '%.*s': rope scaling is not supported", lab,
                       (int)(sl > 40 ? 40 : sl), s);

    /* vocab: the embedding's rows; the token list, if any, must agree */
    const gguf_tensor *emb = gguf_find_tensor(f, "token_embd.weight");
    if (!emb) return qw_errf(err, "model: %s: tensor 'token_embd.weight' is missing", lab);
    if (emb->n_dims != 2 || emb->ne[1] < 1 || emb->ne[1] > 16 * BIG)
        return qw_errf(err, "model: %s: tensor 'token_embd.weight' must be 2-D with 1 to %lld rows", lab,
                       (long long)(16 * BIG));
    c->vocab = (int)emb->ne[1];
    const gguf_kv *toks;
    int rc = gguf_get_arr(f, "tokenizer.ggml.tokens", 0, GGUF_T_STRING, &toks, err);
    if (rc < 0) return -1;
    if (rc && toks->arr_n != (uint64_t)c->vocab)
        return qw_errf(err, "model: %s: tokenizer.ggml.tokens has %llu tokens but token_embd.weight %d rows", lab,
                       (unsigned long long)toks->arr_n, c->vocab);
    c->tie_embeddings = gguf_find_tensor(f, "output.weight") == NULL;

    c->bos_id = -1;
    if (get_i(f, "tokenizer.ggml.bos_token_id", 0, 0, c->vocab - 1, &c->bos_id, err) < 0) return -1;
    static const char *const eos_keys[] = {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                                           "tokenizer.ggml.eom_token_id"};
    for (int i = 0; i < 3; i++) {
        int id = -1;
        rc = get_i(f, eos_keys[i], 0, 0, c->vocab - 1, &id, err);
        if (rc < 0) return -1;
        if (rc) add_eos(c, id);
    }
    int64_t rw = 0;
    const gguf_kv *mark = gguf_find_kv(f, "qwenc.random_weights");
    if (mark && mark->type == GGUF_T_BOOL) rw = (int64_t)mark->u;
    c->random_weights = (int)rw;
    c->gen_temperature = 0.0f; /* no generation_config: greedy, as config_load without one */
    c->gen_top_p = 1.0f;
    c->gen_top_k = 0;
    c->gen_repeat_penalty = 1.0f;
    return 0;
}

const char *model_gguf_file_type_name(int64_t ftype) {
    /* llama.cpp's llama_ftype (llama.h); 4-6 and 33-35 were removed there. */
    static const char *const names[] = {
        [0] = "F32",     [1] = "F16",      [2] = "Q4_0",     [3] = "Q4_1",     [7] = "Q8_0",
        [8] = "Q5_0",    [9] = "Q5_1",     [10] = "Q2_K",    [11] = "Q3_K_S",  [12] = "Q3_K_M",
        [13] = "Q3_K_L", [14] = "Q4_K_S",  [15] = "Q4_K_M",  [16] = "Q5_K_S",  [17] = "Q5_K_M",
        [18] = "Q6_K",   [19] = "IQ2_XXS", [20] = "IQ2_XS",  [21] = "Q2_K_S",  [22] = "IQ3_XS",
        [23] = "IQ3_XXS", [24] = "IQ1_S",  [25] = "IQ4_NL",  [26] = "IQ3_S",   [27] = "IQ3_M",
        [28] = "IQ2_S",  [29] = "IQ2_M",   [30] = "IQ4_XS",  [31] = "IQ1_M",   [32] = "BF16",
        [36] = "TQ1_0",  [37] = "TQ2_0",
    };
    if (ftype < 0 || ftype >= (int64_t)(sizeof names / sizeof *names)) return NULL;
    return names[ftype];
}

/* general.file_type as a name into m->file_type; "" when absent. llama.cpp
 * sets bit 10 when it guessed the type from the tensors. */
static int gguf_file_type(qw_model *m, const gguf_file *f, qw_err *err) {
    int64_t ft;
    int rc = gguf_get_int(f, "general.file_type", 0, 0, INT32_MAX, &ft, err);
    if (rc <= 0) return rc;
    const char *name = model_gguf_file_type_name(ft & ~(int64_t)1024);
    if (name) snprintf(m->file_type, sizeof m->file_type, "%s%s", name, ft & 1024 ? " (guessed)" : "");
    else snprintf(m->file_type, sizeof m->file_type, "file type %lld", (long long)ft);
    return 0;
}

int model_load_gguf(qw_model *m, model_priv *p, const char *path, qw_err *err) {
    m->format = "GGUF";
    if (gguf_open(&p->gg, path, err)) return -1;
    if (gguf_config(&m->cfg, &p->gg.f, err)) return -1;
    if (gguf_file_type(m, &p->gg.f, err) < 0) return -1;
    if (model_set_name(m, path, ".gguf", err)) return -1;
    /* The name the file gives itself, if any, serves as the model's name
     * (/v1/models); else the file name. */
    const char *gn = NULL;
    uint64_t gl = 0;
    if (gguf_get_str(&p->gg.f, "general.name", 0, &gn, &gl, err) < 0) return -1;
    if (gn && gl > 0 && gl < 256) {
        char *n = malloc(gl + 1);
        if (!n) return qw_errf(err, "model: %s: out of memory", path);
        memcpy(n, gn, gl);
        n[gl] = '\0';
        free(m->name);
        m->name = n;
    }
    return model_build(m, &gguf_names, gguf_find_fn, &p->gg.f, path, p->gg.size, err);
}
