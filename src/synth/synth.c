/* synth.c - random-weight Qwen2ForCausalLM folders; see synth.h.
 *
 * The safetensors layout follows the format's spec
 * (https://github.com/huggingface/safetensors#format): 8-byte little-endian
 * header length N, N bytes of JSON {name: {dtype, shape, data_offsets}} padded
 * with spaces to a multiple of 8, then the tensors back to back with no holes.
 * Tensor names and shapes are the ones transformers' Qwen2ForCausalLM saves.
 *
 * Values: each tensor has its own PRNG stream seeded from (seed, name), so a
 * tensor's values do not depend on which tensors precede it. A normal-ish
 * value is the Irwin-Hall sum of four 16-bit uniforms, rescaled to unit
 * variance (bounded by +-3.46: no outliers that could overflow f16).
 */
#include "synth/synth.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "base/regfile.h"

/* Qwen/Qwen2.5-0.5B-Instruct config.json, as the hub ships it. */
static const char k_default_config[] =
    "{\n"
    "  \"architectures\": [\"Qwen2ForCausalLM\"],\n"
    "  \"attention_dropout\": 0.0,\n"
    "  \"bos_token_id\": 151643,\n"
    "  \"eos_token_id\": 151645,\n"
    "  \"hidden_act\": \"silu\",\n"
    "  \"hidden_size\": 896,\n"
    "  \"initializer_range\": 0.02,\n"
    "  \"intermediate_size\": 4864,\n"
    "  \"max_position_embeddings\": 32768,\n"
    "  \"max_window_layers\": 21,\n"
    "  \"model_type\": \"qwen2\",\n"
    "  \"num_attention_heads\": 14,\n"
    "  \"num_hidden_layers\": 24,\n"
    "  \"num_key_value_heads\": 2,\n"
    "  \"rms_norm_eps\": 1e-06,\n"
    "  \"rope_theta\": 1000000.0,\n"
    "  \"sliding_window\": 32768,\n"
    "  \"tie_word_embeddings\": true,\n"
    "  \"torch_dtype\": \"bfloat16\",\n"
    "  \"transformers_version\": \"4.43.1\",\n"
    "  \"use_cache\": true,\n"
    "  \"use_sliding_window\": false,\n"
    "  \"vocab_size\": 151936\n"
    "}\n";

/* generation_config.json: Qwen/Qwen2.5-0.5B-Instruct's (EOS <|im_end|> and
 * <|endoftext|>, BOS <|endoftext|>, its sampling defaults). For a smaller
 * vocabulary, ids outside it are left out: the config's own eos_token_id
 * when in range, else the last id, so that the folder always loads. */
static int gen_config(char *out, size_t cap, const cJSON *root, int64_t vocab) {
    int64_t eos[8];
    int n = 0;
    if (151645 < vocab) eos[n++] = 151645;
    if (151643 < vocab) eos[n++] = 151643;
    if (n == 0) {
        const cJSON *ce = cJSON_GetObjectItemCaseSensitive(root, "eos_token_id");
        const cJSON *it;
        if (cJSON_IsNumber(ce) && ce->valuedouble >= 0 && ce->valuedouble < (double)vocab)
            eos[n++] = (int64_t)ce->valuedouble;
        else if (cJSON_IsArray(ce))
            cJSON_ArrayForEach(it, ce) if (n < 8 && cJSON_IsNumber(it) && it->valuedouble >= 0 &&
                                            it->valuedouble < (double)vocab) eos[n++] = (int64_t)it->valuedouble;
        if (n == 0) eos[n++] = vocab - 1;
    }
    char list[256] = "";
    size_t k = 0;
    for (int i = 0; i < n; i++)
        k += (size_t)snprintf(list + k, sizeof list - k, "%s\n    %lld", i ? "," : "", (long long)eos[i]);
    char bos[64] = "";
    if (151643 < vocab) snprintf(bos, sizeof bos, "  \"bos_token_id\": 151643,\n  \"pad_token_id\": 151643,\n");
    int w = snprintf(out, cap,
                     "{\n%s"
                     "  \"do_sample\": true,\n"
                     "  \"eos_token_id\": [%s\n  ],\n"
                     "  \"repetition_penalty\": 1.1,\n"
                     "  \"temperature\": 0.7,\n"
                     "  \"top_p\": 0.8,\n"
                     "  \"top_k\": 20,\n"
                     "  \"transformers_version\": \"4.37.0\"\n"
                     "}\n", bos, list);
    return w > 0 && (size_t)w < cap ? w : -1;
}

const char *synth_default_config(void) { return k_default_config; }

void synth_opts_default(synth_opts *o) {
    memset(o, 0, sizeof *o);
    o->dtype = QW_BF16;
    o->seed = 0;
    o->scale = 0.02f;
}

/* ---- shapes ---------------------------------------------------------------- */

typedef struct shapes {
    int64_t hidden, inter, n_layers, n_heads, n_kv, head_dim, vocab;
    int tied;
} shapes;

enum { T_MATRIX, T_BIAS, T_NORM };

typedef struct tensor {
    char name[96];
    int64_t dims[2];
    int ndim;
    int kind; /* T_* */
} tensor;

/* Enumerate the tensors in file order; returns the count. out may be NULL. */
static int64_t tensors_list(const shapes *s, tensor *out) {
    int64_t n = 0;
#define ADD(kind_, nd_, d0_, d1_, ...)                                              \
    do {                                                                            \
        if (out) {                                                                  \
            tensor *t = &out[n];                                                    \
            snprintf(t->name, sizeof t->name, __VA_ARGS__);                         \
            t->ndim = (nd_); t->dims[0] = (d0_); t->dims[1] = (d1_); t->kind = (kind_); \
        }                                                                           \
        n++;                                                                        \
    } while (0)
    int64_t q = s->n_heads * s->head_dim, kv = s->n_kv * s->head_dim;
    ADD(T_MATRIX, 2, s->vocab, s->hidden, "model.embed_tokens.weight");
    for (int64_t l = 0; l < s->n_layers; l++) {
        const char *p = "model.layers";
        ADD(T_NORM, 1, s->hidden, 0, "%s.%lld.input_layernorm.weight", p, (long long)l);
        ADD(T_MATRIX, 2, q, s->hidden, "%s.%lld.self_attn.q_proj.weight", p, (long long)l);
        ADD(T_BIAS, 1, q, 0, "%s.%lld.self_attn.q_proj.bias", p, (long long)l);
        ADD(T_MATRIX, 2, kv, s->hidden, "%s.%lld.self_attn.k_proj.weight", p, (long long)l);
        ADD(T_BIAS, 1, kv, 0, "%s.%lld.self_attn.k_proj.bias", p, (long long)l);
        ADD(T_MATRIX, 2, kv, s->hidden, "%s.%lld.self_attn.v_proj.weight", p, (long long)l);
        ADD(T_BIAS, 1, kv, 0, "%s.%lld.self_attn.v_proj.bias", p, (long long)l);
        ADD(T_MATRIX, 2, s->hidden, q, "%s.%lld.self_attn.o_proj.weight", p, (long long)l);
        ADD(T_NORM, 1, s->hidden, 0, "%s.%lld.post_attention_layernorm.weight", p, (long long)l);
        ADD(T_MATRIX, 2, s->inter, s->hidden, "%s.%lld.mlp.gate_proj.weight", p, (long long)l);
        ADD(T_MATRIX, 2, s->inter, s->hidden, "%s.%lld.mlp.up_proj.weight", p, (long long)l);
        ADD(T_MATRIX, 2, s->hidden, s->inter, "%s.%lld.mlp.down_proj.weight", p, (long long)l);
    }
    ADD(T_NORM, 1, s->hidden, 0, "model.norm.weight");
    if (!s->tied) ADD(T_MATRIX, 2, s->vocab, s->hidden, "lm_head.weight");
#undef ADD
    return n;
}

static int64_t tensor_numel(const tensor *t) {
    return t->ndim == 2 ? t->dims[0] * t->dims[1] : t->dims[0];
}

/* A positive integer field of config.json. */
static int cfg_int(const cJSON *root, const char *file, const char *key, int required, int64_t lo,
                   int64_t hi, int64_t *out, qw_err *err) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!it || cJSON_IsNull(it)) {
        if (required) return qw_errf(err, "synth: %s: missing field \"%s\"", file, key);
        return 0;
    }
    double v = it->valuedouble;
    if (!cJSON_IsNumber(it) || v != floor(v) || v < (double)lo || v > (double)hi)
        return qw_errf(err, "synth: %s: field \"%s\" must be an integer in [%lld, %lld]", file,
                       key, (long long)lo, (long long)hi);
    *out = (int64_t)v;
    return 1;
}

static int shapes_from_config(shapes *s, const cJSON *root, const char *file, qw_err *err) {
    memset(s, 0, sizeof *s);
    const int64_t big = 1 << 20, vbig = 1 << 24;
    if (!cJSON_IsObject(root)) return qw_errf(err, "synth: %s: not a JSON object", file);
    if (cfg_int(root, file, "hidden_size", 1, 1, big, &s->hidden, err) < 0 ||
        cfg_int(root, file, "intermediate_size", 1, 1, big, &s->inter, err) < 0 ||
        cfg_int(root, file, "num_hidden_layers", 1, 1, 4096, &s->n_layers, err) < 0 ||
        cfg_int(root, file, "num_attention_heads", 1, 1, 4096, &s->n_heads, err) < 0 ||
        cfg_int(root, file, "vocab_size", 1, 1, vbig, &s->vocab, err) < 0)
        return -1;
    s->n_kv = s->n_heads;
    if (cfg_int(root, file, "num_key_value_heads", 0, 1, 4096, &s->n_kv, err) < 0) return -1;
    int hd = cfg_int(root, file, "head_dim", 0, 1, 4096, &s->head_dim, err);
    if (hd < 0) return -1;
    if (hd == 0) {
        if (s->hidden % s->n_heads)
            return qw_errf(err, "synth: %s: field \"hidden_size\" (%lld) is not a multiple of "
                           "\"num_attention_heads\" (%lld) and there is no \"head_dim\"",
                           file, (long long)s->hidden, (long long)s->n_heads);
        s->head_dim = s->hidden / s->n_heads;
    }
    if (s->n_heads % s->n_kv)
        return qw_errf(err, "synth: %s: field \"num_attention_heads\" (%lld) is not a multiple of "
                       "\"num_key_value_heads\" (%lld)", file, (long long)s->n_heads, (long long)s->n_kv);
    if (s->head_dim % 2)
        return qw_errf(err, "synth: %s: head_dim %lld must be even (rotary embedding)", file,
                       (long long)s->head_dim);
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(root, "tie_word_embeddings");
    if (tie && !cJSON_IsBool(tie) && !cJSON_IsNull(tie))
        return qw_errf(err, "synth: %s: field \"tie_word_embeddings\" must be true or false", file);
    s->tied = tie && cJSON_IsTrue(tie); /* transformers' Qwen2Config default: false */
    return 0;
}

/* ---- files ----------------------------------------------------------------- */

static int mkdir_p(const char *path, qw_err *err) {
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) return qw_errf(err, "synth: bad output folder '%s'", path);
    memcpy(buf, path, n + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return qw_errf(err, "synth: mkdir %s: %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return qw_errf(err, "synth: mkdir %s: %s", buf, strerror(errno));
    struct stat st;
    if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
        return qw_errf(err, "synth: %s is not a folder", buf);
    return 0;
}

static char *path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

/* Write data to dir/name via dir/name.tmp + rename. */
static int write_file_atomic(const char *dir, const char *name, const void *data, size_t n,
                             qw_err *err) {
    char *path = path_join(dir, name), *tmp = NULL;
    int rc = -1;
    if (!path) return qw_errf(err, "synth: out of memory");
    size_t pl = strlen(path);
    tmp = malloc(pl + 5);
    if (!tmp) { qw_errf(err, "synth: out of memory"); goto out; }
    memcpy(tmp, path, pl);
    memcpy(tmp + pl, ".tmp", 5);
    FILE *f = fopen(tmp, "wb");
    if (!f) { qw_errf(err, "synth: %s: %s", tmp, strerror(errno)); goto out; }
    size_t w = fwrite(data, 1, n, f);
    if (fclose(f) != 0 || w != n) {
        qw_errf(err, "synth: %s: write failed: %s", tmp, strerror(errno));
        unlink(tmp);
        goto out;
    }
    if (rename(tmp, path) != 0) {
        qw_errf(err, "synth: rename %s -> %s: %s", tmp, path, strerror(errno));
        unlink(tmp);
        goto out;
    }
    rc = 0;
out:
    free(path);
    free(tmp);
    return rc;
}

static char *read_file(const char *path, size_t max, qw_err *err) {
    const char *why = NULL;
    FILE *f = regfile_fopen(path, &why);
    if (!f) { qw_errf(err, "synth: %s: %s", path, why); return NULL; }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        if (n == cap) {
            if (cap >= max) { qw_errf(err, "synth: %s: larger than %zu bytes", path, max); break; }
            cap *= 2;
            char *nb = realloc(buf, cap + 1);
            if (!nb) break;
            buf = nb;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) {
            if (ferror(f)) { qw_errf(err, "synth: %s: read error", path); break; }
            fclose(f);
            buf[n] = 0;
            return buf;
        }
    }
    if (!buf) qw_errf(err, "synth: out of memory reading %s", path);
    free(buf);
    fclose(f);
    return NULL;
}

/* ---- values ---------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t fnv1a(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* Unit-variance, zero-mean, bounded value. */
static float normalish(uint64_t *s) {
    uint64_t r = splitmix64(s);
    double u = (double)(r & 0xffff) + (double)((r >> 16) & 0xffff) + (double)((r >> 32) & 0xffff) +
               (double)(r >> 48);
    /* sum of four U(0, 65536): mean 131070, var 4 * 65536^2 / 12 */
    return (float)((u - 131070.0) * (1.7320508075688772 / 65536.0));
}

static uint16_t f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40); /* NaN */
    x += 0x7fff + ((x >> 16) & 1); /* round to nearest even */
    return (uint16_t)(x >> 16);
}

static uint16_t f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    int32_t e = (int32_t)((x >> 23) & 0xff) - 127 + 15;
    uint32_t m = x & 0x7fffff;
    if (((x >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00 | (m ? 0x200 : 0));
    if (e >= 31) return (uint16_t)(sign | 0x7c00);
    if (e <= 0) {
        if (e < -10) return (uint16_t)sign;
        m |= 0x800000;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t h = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (m >> 13), rem = m & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++; /* may carry into the exponent: fine */
    return (uint16_t)(sign | h);
}

static const char *st_dtype(qw_dtype t) {
    return t == QW_F32 ? "F32" : t == QW_F16 ? "F16" : "BF16";
}
static int esize(qw_dtype t) { return t == QW_F32 ? 4 : 2; }

/* ---- the safetensors file --------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void sb_printf(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) { b->oom = 1; return; }
        if (b->p && b->n + (size_t)k < b->cap) { b->n += (size_t)k; return; }
        size_t nc = b->cap ? b->cap * 2 : 4096;
        while (nc <= b->n + (size_t)k) nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np) { b->oom = 1; return; }
        b->p = np;
        b->cap = nc;
    }
}

static int write_safetensors(const char *dir, const shapes *s, const synth_opts *o, qw_err *err) {
    int rc = -1;
    int64_t nt = tensors_list(s, NULL);
    tensor *ts = calloc((size_t)nt, sizeof *ts);
    char *path = path_join(dir, "model.safetensors"), *tmp = path_join(dir, "model.safetensors.tmp");
    sbuf h = {0};
    FILE *f = NULL;
    void *chunk = NULL;
    if (!ts || !path || !tmp) { qw_errf(err, "synth: out of memory"); goto out; }
    tensors_list(s, ts);

    /* Header JSON. Names are ours (no characters to escape). */
    int64_t off = 0, es = esize(o->dtype);
    sb_printf(&h, "{\"__metadata__\":{\"format\":\"pt\",\"qwenc\":\"random weights (qwenc synth, seed %llu)\"}",
              (unsigned long long)o->seed);
    for (int64_t i = 0; i < nt; i++) {
        const tensor *t = &ts[i];
        int64_t bytes = tensor_numel(t) * es;
        if (t->ndim == 2)
            sb_printf(&h, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld,%lld],\"data_offsets\":[%lld,%lld]}",
                      t->name, st_dtype(o->dtype), (long long)t->dims[0], (long long)t->dims[1],
                      (long long)off, (long long)(off + bytes));
        else
            sb_printf(&h, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld],\"data_offsets\":[%lld,%lld]}",
                      t->name, st_dtype(o->dtype), (long long)t->dims[0], (long long)off,
                      (long long)(off + bytes));
        off += bytes;
    }
    sb_printf(&h, "}");
    while (!h.oom && h.n % 8) sb_printf(&h, " ");
    if (h.oom) { qw_errf(err, "synth: out of memory building the safetensors header"); goto out; }
    int64_t total = off;

    f = fopen(tmp, "wb");
    if (!f) { qw_errf(err, "synth: %s: %s", tmp, strerror(errno)); goto out; }
    unsigned char len8[8];
    for (int k = 0; k < 8; k++) len8[k] = (unsigned char)((uint64_t)h.n >> (8 * k));
    if (fwrite(len8, 1, 8, f) != 8 || fwrite(h.p, 1, h.n, f) != h.n) goto werr;

    enum { CHUNK = 1 << 18 }; /* elements per write */
    chunk = malloc((size_t)CHUNK * 4);
    if (!chunk) { qw_errf(err, "synth: out of memory"); goto out; }
    int64_t done = 0, next_report = total / 10;
    double t0 = qw_now();
    for (int64_t i = 0; i < nt; i++) {
        const tensor *t = &ts[i];
        uint64_t st = fnv1a(t->name) ^ (o->seed * 0x9E3779B97F4A7C15ull);
        int64_t n = tensor_numel(t);
        float base = t->kind == T_NORM ? 1.0f : 0.0f;
        float sd = t->kind == T_NORM ? 0.1f * o->scale : o->scale;
        for (int64_t a = 0; a < n; a += CHUNK) {
            int64_t m = n - a < CHUNK ? n - a : CHUNK;
            for (int64_t j = 0; j < m; j++) {
                float v = base + sd * normalish(&st);
                if (o->dtype == QW_F32) ((float *)chunk)[j] = v;
                else if (o->dtype == QW_F16) ((uint16_t *)chunk)[j] = f32_to_f16(v);
                else ((uint16_t *)chunk)[j] = f32_to_bf16(v);
            }
            if (fwrite(chunk, (size_t)es, (size_t)m, f) != (size_t)m) goto werr;
            done += m * es;
            if (!o->quiet && done >= next_report && total > (64 << 20)) {
                LOG_INFO("synth: %s %3.0f%% (%.0f of %.0f MB, %.1f s)", "model.safetensors",
                         100.0 * (double)done / (double)total, done / 1e6, total / 1e6, qw_now() - t0);
                next_report += total / 10;
            }
        }
    }
    if (fflush(f) != 0) goto werr;
    if (fclose(f) != 0) { f = NULL; goto werr; }
    f = NULL;
    if (rename(tmp, path) != 0) {
        qw_errf(err, "synth: rename %s -> %s: %s", tmp, path, strerror(errno));
        unlink(tmp);
        goto out;
    }
    rc = 0;
    goto out;
werr:
    qw_errf(err, "synth: %s: write failed: %s", tmp, strerror(errno));
    if (f) fclose(f);
    f = NULL;
    unlink(tmp);
out:
    if (f) { fclose(f); unlink(tmp); }
    free(chunk);
    free(h.p);
    free(ts);
    free(path);
    free(tmp);
    return rc;
}

int synth_write(const char *out_dir, const synth_opts *o, qw_err *err) {
    char *text = NULL, *printed = NULL;
    cJSON *root = NULL;
    int rc = -1;
    const char *file = o->config_path ? o->config_path : "(built-in Qwen2.5-0.5B-Instruct config)";
    if (o->dtype != QW_BF16 && o->dtype != QW_F16 && o->dtype != QW_F32)
        return qw_errf(err, "synth: unsupported dtype %d", (int)o->dtype);
    if (!(o->scale >= 0 && o->scale <= 10))
        return qw_errf(err, "synth: scale %g out of range [0, 10]", (double)o->scale);
    if (o->config_path) {
        text = read_file(o->config_path, 16 << 20, err);
        if (!text) return -1;
    }
    root = cJSON_Parse(text ? text : k_default_config);
    if (!root) { qw_errf(err, "synth: %s: not valid JSON", file); goto out; }
    shapes s;
    if (shapes_from_config(&s, root, file, err) != 0) goto out;
    /* Refuse sizes whose byte count would overflow (or be absurd). */
    double bytes = (double)s.vocab * (double)s.hidden * (s.tied ? 1 : 2) +
                   (double)s.n_layers * ((double)s.hidden * (double)s.head_dim * 2 * (double)(s.n_heads + s.n_kv) +
                                         3.0 * (double)s.hidden * (double)s.inter);
    bytes *= esize(o->dtype);
    if (bytes > 1e12) { qw_errf(err, "synth: %s: the model would take %.0f GB", file, bytes / 1e9); goto out; }

    /* Keep the given text as it is (so the default is byte for byte the
     * hub's file) and add the marker before the closing brace. */
    const char *src = text ? text : k_default_config;
    const cJSON *mark = cJSON_GetObjectItemCaseSensitive(root, "qwenc_random_weights");
    if (mark) {
        cJSON_DeleteItemFromObjectCaseSensitive(root, "qwenc_random_weights");
        if (!cJSON_AddTrueToObject(root, "qwenc_random_weights")) { qw_errf(err, "synth: out of memory"); goto out; }
        printed = cJSON_Print(root);
        if (!printed) { qw_errf(err, "synth: out of memory"); goto out; }
    } else {
        const char *close = strrchr(src, '}');
        if (!close) { qw_errf(err, "synth: %s: no closing brace", file); goto out; }
        size_t head = (size_t)(close - src);
        while (head > 0 && (src[head - 1] == ' ' || src[head - 1] == '\n' || src[head - 1] == '\r' ||
                            src[head - 1] == '\t'))
            head--;
        static const char add[] = ",\n  \"qwenc_random_weights\": true\n}";
        printed = malloc(head + sizeof add);
        if (!printed) { qw_errf(err, "synth: out of memory"); goto out; }
        memcpy(printed, src, head);
        memcpy(printed + head, add, sizeof add);
        if (!text && o->dtype != QW_BF16) {
            /* The default names its dtype: keep it true to the file. */
            char *td = strstr(printed, "\"bfloat16\"");
            const char *nm = o->dtype == QW_F32 ? "\"float32\"" : "\"float16\"";
            if (td) {
                size_t tl = strlen(td), nl = strlen(nm);
                char *np = malloc(head + sizeof add + 8);
                if (!np) { qw_errf(err, "synth: out of memory"); goto out; }
                size_t pre = (size_t)(td - printed);
                memcpy(np, printed, pre);
                memcpy(np + pre, nm, nl);
                memcpy(np + pre + nl, td + 10, tl - 10 + 1);
                free(printed);
                printed = np;
            }
        }
    }

    if (mkdir_p(out_dir, err) != 0) goto out;
    size_t pl = strlen(printed);
    char *withnl = realloc(printed, pl + 2);
    if (!withnl) { qw_errf(err, "synth: out of memory"); goto out; }
    printed = withnl;
    printed[pl] = '\n';
    printed[pl + 1] = 0;
    if (write_file_atomic(out_dir, "config.json", printed, pl + 1, err) != 0) goto out;
    char gen[1024];
    int gl = gen_config(gen, sizeof gen, root, s.vocab);
    if (gl < 0) { qw_errf(err, "synth: generation_config.json too long"); goto out; }
    if (write_file_atomic(out_dir, "generation_config.json", gen, (size_t)gl, err) != 0) goto out;
    if (!o->quiet)
        LOG_INFO("synth: writing %s/model.safetensors: %lld layers, hidden %lld, vocab %lld, %s, %.0f MB",
                 out_dir, (long long)s.n_layers, (long long)s.hidden, (long long)s.vocab,
                 st_dtype(o->dtype), bytes / 1e6);
    if (write_safetensors(out_dir, &s, o, err) != 0) goto out;
    rc = 0;
out:
    cJSON_Delete(root);
    free(text);
    free(printed);
    return rc;
}

static int copy_file(const char *src, const char *dst, qw_err *err) {
    const char *why = NULL;
    FILE *in = regfile_fopen(src, &why);
    if (!in) return qw_errf(err, "synth: %s: %s", src, why);
    size_t dl = strlen(dst);
    char *tmp = malloc(dl + 5);
    if (!tmp) { fclose(in); return qw_errf(err, "synth: out of memory"); }
    memcpy(tmp, dst, dl);
    memcpy(tmp + dl, ".tmp", 5);
    FILE *out = fopen(tmp, "wb");
    if (!out) {
        qw_errf(err, "synth: %s: %s", tmp, strerror(errno));
        fclose(in);
        free(tmp);
        return -1;
    }
    char buf[1 << 16];
    size_t r;
    int bad = 0;
    while ((r = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, r, out) != r) { bad = 1; break; }
    if (ferror(in)) bad = 2;
    fclose(in);
    if (fclose(out) != 0) bad = 1;
    if (!bad && rename(tmp, dst) != 0) bad = 3;
    if (bad) {
        qw_errf(err, "synth: copying %s to %s: %s", src, dst,
                bad == 2 ? "read error" : strerror(errno));
        unlink(tmp);
    }
    free(tmp);
    return bad ? -1 : 0;
}

int synth_copy_tokenizer(const char *src_dir, const char *out_dir, qw_err *err) {
    static const char *files[] = {"tokenizer.json", "tokenizer_config.json", "vocab.json",
                                  "merges.txt", "special_tokens_map.json", "added_tokens.json"};
    int copied = 0;
    if (mkdir_p(out_dir, err) != 0) return -1;
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char *src = path_join(src_dir, files[i]), *dst = path_join(out_dir, files[i]);
        int rc = 0;
        if (!src || !dst) rc = qw_errf(err, "synth: out of memory");
        else if (access(src, R_OK) != 0) {
            if (i == 0) rc = qw_errf(err, "synth: %s: %s (a tokenizer folder needs tokenizer.json)",
                                     src, strerror(errno));
        } else if ((rc = copy_file(src, dst, err)) == 0) copied++;
        free(src);
        free(dst);
        if (rc != 0) return -1;
    }
    return copied;
}
