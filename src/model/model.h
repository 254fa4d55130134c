/* model.h - a Qwen2-family model loaded from a Hugging Face folder or a
 * GGUF file.
 *
 * MODEL is one of:
 *   - a folder with config.json and model.safetensors, or sharded
 *     model-0000N-of-0000M.safetensors with model.safetensors.index.json;
 *     every number comes from config.json (transformers 4.x top-level
 *     rope_theta and 5.x rope_parameters both read); generation_config.json,
 *     if present, supplies EOS ids and default sampling values;
 *   - a GGUF file (v2/v3, general.architecture "qwen2", as llama.cpp's
 *     convert_hf_to_gguf.py or tools/to_gguf.py write it) with F32, F16,
 *     BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K or Q6_K tensors (used in
 *     place: the kernels read GGML's block layouts); the numbers come from
 *     the qwen2.* metadata, EOS from tokenizer.ggml.eos_token_id (+ eot / eom
 *     ids when present), sampling defaults are greedy (GGUF carries none).
 *     Other quantized types (Q3_K, IQ4_NL, ...) are refused with a message
 *     naming the tensor and type (src/model/model_gguf.c);
 *   - a folder with no safetensors but exactly one *.gguf: that file.
 * The files are mmapped; matrices are used in place in their stored dtype
 * (no conversion step, no f32 copy): the model owns the mappings and every
 * qw_mat borrows from them. Only small vectors (norm weights, biases) are
 * converted to float32 copies at load. All file contents are untrusted:
 * offsets and sizes are checked against the real file sizes.
 */
#ifndef QW_MODEL_H
#define QW_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "kernels/kernels.h"

#define QW_MAX_EOS 8

typedef struct qw_config {
    int hidden;       /* hidden_size */
    int inter;        /* intermediate_size */
    int n_layers;     /* num_hidden_layers */
    int n_heads;      /* num_attention_heads */
    int n_kv_heads;   /* num_key_value_heads */
    int head_dim;     /* head_dim, or hidden / n_heads */
    int vocab;        /* vocab_size */
    int max_pos;      /* max_position_embeddings */
    float rms_eps;    /* rms_norm_eps */
    float rope_theta; /* rope_theta or rope_parameters.rope_theta */
    int tie_embeddings;
    int bos_id;                /* -1 if none */
    int eos_ids[QW_MAX_EOS];   /* from generation_config.json, else config.json */
    int n_eos;
    /* generation_config.json defaults (0 / 1 where absent) */
    float gen_temperature, gen_top_p, gen_repeat_penalty;
    int gen_top_k;
    int random_weights;        /* config.json "qwenc_random_weights": true (synth models) */
} qw_config;

/* A row-major matrix in the mapping: rows x cols elements of dtype. */
typedef struct qw_mat {
    const void *data;
    qw_dtype dtype;
    int64_t rows, cols;
    const void *rp; /* the repacked copy (model_repack), or NULL */
} qw_mat;

typedef struct qw_layer {
    float *attn_norm;       /* [hidden] input_layernorm.weight */
    qw_mat wq, wk, wv, wo;  /* q_proj [nh*hd, hidden], k/v_proj [nkv*hd, hidden], o_proj [hidden, nh*hd] */
    float *bq, *bk, *bv;    /* biases [nh*hd], [nkv*hd], [nkv*hd] */
    float *mlp_norm;        /* [hidden] post_attention_layernorm.weight */
    qw_mat w_gate, w_up;    /* [inter, hidden] */
    qw_mat w_down;          /* [hidden, inter] */
} qw_layer;

typedef struct qw_model {
    qw_config cfg;
    char *dir;          /* the folder or GGUF file it was loaded from */
    char *name;         /* GGUF general.name, else the folder base name / file name
                         * without .gguf; for /v1/models */
    qw_mat embed;       /* [vocab, hidden] model.embed_tokens.weight */
    qw_mat lm_head;     /* [vocab, hidden]; == embed when tied */
    float *final_norm;  /* [hidden] model.norm.weight */
    qw_layer *layers;   /* [n_layers] */
    uint64_t weight_bytes; /* bytes of all matrices, for roofline reports */
    /* What the file says it is, for the load log: a GGUF's general.file_type
     * by llama.cpp's name ("Q4_K_M": a file's tensors mix several types, so
     * no single tensor's type names it); "" when the file does not say
     * (safetensors, or a GGUF without the key). */
    const char *format;             /* "GGUF" or "safetensors" */
    char file_type[40];
    int n_by_dtype[QW_DTYPE_COUNT]; /* tensors read at load, by stored dtype */
    int n_quant_kept;   /* model_quantize: matrices already of a block type, kept as stored */
    void *quant_buf;    /* matrices made by model_quantize (owned) */
    void *repack_buf;   /* the repacked copies and 16-bit copies (model_repack; base/bigmem.h, owned) */
    int64_t repack_bytes;   /* all of repack_buf's copies */
    int64_t repack_copied;  /* of which 16-bit matrices copied as they are */
    int repack_huge;        /* repack_buf was given MADV_HUGEPAGE */
    void *priv;         /* mappings and owned buffers */
} qw_model;

/* Load config.json (+ generation_config.json) only. */
int config_load(qw_config *cfg, const char *dir, qw_err *err);

/* The same from text in memory (the fuzz harness's entry): generation 0
 * parses config.json text into a cleared cfg, 1 generation_config.json text
 * on top of it. label names the text in messages. */
int config_parse(qw_config *cfg, const char *json, size_t len, int generation, const char *label, qw_err *err);

/* Load MODEL (a folder or a .gguf file, see above). Returns 0 and *out, or
 * -1 with a message naming the file and the tensor or field at fault. */
int model_load(qw_model **out, const char *path, qw_err *err);
void model_free(qw_model *m);

/* One line for the load log: "GGUF Q4_K_M; tensors Q5_0 x 133, F32 x 121,
 * Q8_0 x 13, ..." (most frequent type first). model_load() logs it at info
 * level. */
void model_describe(const qw_model *m, char *buf, size_t cap);

/* llama.cpp's name of a GGUF general.file_type value ("Q4_K_M" for 15), or
 * NULL for a value it does not define. */
const char *model_gguf_file_type_name(int64_t ftype);

/* Quantize every matrix (the embedding and lm_head too) to `to` (only
 * QW_Q8_0) in memory the model owns, with `threads` threads; the mapped
 * originals are released. Matrices already of a block type (a GGUF's Q8_0,
 * Q4_K, ... tensors) are kept as they are. -1 with a
 * message naming the tensor when a row is not a whole number of blocks. */
int model_quantize(qw_model *m, qw_dtype to, int threads, qw_err *err);

/* Give every matrix that can use the current kernel level's matmul_qr
 * (model_repackable: a type `which` takes, QW_REPACK_BLOCK32 or
 * QW_REPACK_ALL with the K-quants, rows a multiple of QW_RP_ROWS) a
 * repacked copy in W->rp (kernels.h: "repacked weights"), with `threads`
 * threads; each original's mapped pages are released as its copy is made,
 * so memory is not doubled (the originals stay readable from the file).
 * 16-bit matrices (BF16, F16) are copied as they are into the same
 * huge-page buffer and W->data points at the copy (repack.c: why).
 * For the fast precision only: the exact one never reads the tiles.
 * Nothing to do (0) where the level has no such kernel. Call after
 * model_quantize and kernels_init. -1 when out of memory. */
enum { QW_REPACK_BLOCK32 = 1, QW_REPACK_ALL = 2 };
int model_repack(qw_model *m, int which, int threads, qw_err *err);
int model_repackable(const qw_mat *w, int which);
/* What to repack (0: nothing) for this precision (a qw_precision: only
 * fast, 0) and environment: QWENC_REPACK=0 nothing (the before/after
 * switch), =block32 the block-32 types only, else (unset, =all) the
 * K-quants too: on the real 1.5B Q4_K_M file they take prefill up ~50% and
 * decode ~19% (docs/PERFORMANCE.md, "K-quants repacked by default"). */
int model_repack_wanted(int precision);
/* model_repack, with an info line saying how much and how long. */
int model_repack_logged(qw_model *m, int which, int threads, qw_err *err);

#endif
