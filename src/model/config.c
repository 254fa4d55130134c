/* config.c - config.json and generation_config.json -> qw_config.
 *
 * Reads what transformers' Qwen2Config reads: the 4.x layout (rope_theta at
 * the top level) and the 5.x one (rope_parameters.rope_theta). Both files
 * are untrusted: every number is type- and range-checked and every error
 * names the file and the field. Features we do not implement (rope scaling,
 * sliding-window attention, another activation) are refused rather than
 * silently computed differently.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/regfile.h"
#include "model/model.h"

#define MAX_JSON (16u << 20)

static char *slurp(const char *path, size_t *len, int *missing, qw_err *err) {
    *missing = 0;
    const char *why = NULL;
    FILE *fp = regfile_fopen(path, &why);
    if (!fp) {
        *missing = errno == ENOENT;
        qw_errf(err, "config: %s: cannot open: %s", path, why);
        return NULL;
    }
    char *b = malloc(MAX_JSON + 1);
    if (!b) {
        fclose(fp);
        qw_errf(err, "config: %s: out of memory", path);
        return NULL;
    }
    size_t n = fread(b, 1, MAX_JSON + 1, fp);
    int bad = ferror(fp);
    fclose(fp);
    if (bad || n > MAX_JSON) {
        free(b);
        qw_errf(err, "config: %s: %s", path, bad ? "read error" : "file too large");
        return NULL;
    }
    b[n] = 0;
    *len = n;
    return b;
}

static cJSON *parse_json(const char *txt, size_t len, const char *path, qw_err *err) {
    cJSON *j = cJSON_ParseWithLength(txt, len);
    if (!j) {
        qw_errf(err, "config: %s: not valid JSON", path);
        return NULL;
    }
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        qw_errf(err, "config: %s: not a JSON object", path);
        return NULL;
    }
    return j;
}

static cJSON *load_json(const char *path, int *missing, qw_err *err) {
    size_t len;
    char *txt = slurp(path, &len, missing, err);
    if (!txt) return NULL;
    cJSON *j = parse_json(txt, len, path, err);
    free(txt);
    return j;
}

static const cJSON *item(const cJSON *o, const char *key) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNull(j) ? NULL : j;
}

/* Integer field in [lo, hi]. required: absent is an error; else *out keeps
 * its value. Returns 1 if present, 0 if absent, -1 on error. */
static int get_int(const cJSON *o, const char *key, int required, long lo, long hi, int *out, const char *path,
                   qw_err *err) {
    const cJSON *j = item(o, key);
    if (!j) return required ? qw_errf(err, "config: %s: missing field '%s'", path, key) : 0;
    double v = j->valuedouble;
    if (!cJSON_IsNumber(j) || floor(v) != v)
        return qw_errf(err, "config: %s: field '%s' must be an integer", path, key);
    if (v < (double)lo || v > (double)hi)
        return qw_errf(err, "config: %s: field '%s' = %.17g out of range [%ld, %ld]", path, key, v, lo, hi);
    *out = (int)v;
    return 1;
}

/* Number field, finite, in [lo, hi]. */
static int get_num(const cJSON *o, const char *key, int required, double lo, double hi, float *out,
                   const char *path, qw_err *err) {
    const cJSON *j = item(o, key);
    if (!j) return required ? qw_errf(err, "config: %s: missing field '%s'", path, key) : 0;
    if (!cJSON_IsNumber(j)) return qw_errf(err, "config: %s: field '%s' must be a number", path, key);
    double v = j->valuedouble;
    if (!isfinite(v) || v < lo || v > hi)
        return qw_errf(err, "config: %s: field '%s' = %.17g out of range [%g, %g]", path, key, v, lo, hi);
    *out = (float)v;
    return 1;
}

static int get_bool(const cJSON *o, const char *key, int *out, const char *path, qw_err *err) {
    const cJSON *j = item(o, key);
    if (!j) return 0;
    if (!cJSON_IsBool(j)) return qw_errf(err, "config: %s: field '%s' must be true or false", path, key);
    *out = cJSON_IsTrue(j);
    return 1;
}

/* eos_token_id: an integer or a list of integers. */
static int get_eos(const cJSON *o, qw_config *c, int vocab, const char *path, qw_err *err) {
    const cJSON *j = item(o, "eos_token_id");
    if (!j) return 0;
    int n = 0;
    const cJSON *x = cJSON_IsArray(j) ? j->child : j;
    for (; x; x = cJSON_IsArray(j) ? x->next : NULL) {
        double v = x->valuedouble;
        if (!cJSON_IsNumber(x) || floor(v) != v || v < 0 || v >= vocab)
            return qw_errf(err, "config: %s: field 'eos_token_id' must be token ids in [0, %d)", path, vocab);
        if (n >= QW_MAX_EOS)
            return qw_errf(err, "config: %s: field 'eos_token_id' has more than %d ids", path, QW_MAX_EOS);
        c->eos_ids[n++] = (int)v;
    }
    c->n_eos = n;
    return 1;
}

static int parse_config(qw_config *c, const cJSON *j, const char *path, qw_err *err) {
    const cJSON *mt = item(j, "model_type");
    if (!cJSON_IsString(mt)) return qw_errf(err, "config: %s: missing field 'model_type'", path);
    if (strcmp(mt->valuestring, "qwen2") != 0)
        return qw_errf(err, "config: %s: field 'model_type' is '%.60s'; only 'qwen2' is supported", path,
                       mt->valuestring);
    const cJSON *ar = item(j, "architectures");
    if (ar) {
        int ok = 0;
        if (cJSON_IsArray(ar))
            for (const cJSON *x = ar->child; x; x = x->next)
                if (cJSON_IsString(x) && !strcmp(x->valuestring, "Qwen2ForCausalLM")) ok = 1;
        if (!ok) return qw_errf(err, "config: %s: field 'architectures' does not name Qwen2ForCausalLM", path);
    }
    const long BIG = 1L << 20;
    if (get_int(j, "hidden_size", 1, 1, BIG, &c->hidden, path, err) < 0) return -1;
    if (get_int(j, "intermediate_size", 1, 1, 4 * BIG, &c->inter, path, err) < 0) return -1;
    if (get_int(j, "num_hidden_layers", 1, 1, 4096, &c->n_layers, path, err) < 0) return -1;
    if (get_int(j, "num_attention_heads", 1, 1, 4096, &c->n_heads, path, err) < 0) return -1;
    c->n_kv_heads = c->n_heads;
    if (get_int(j, "num_key_value_heads", 0, 1, 4096, &c->n_kv_heads, path, err) < 0) return -1;
    if (get_int(j, "vocab_size", 1, 1, 16 * BIG, &c->vocab, path, err) < 0) return -1;
    c->max_pos = 32768;
    if (get_int(j, "max_position_embeddings", 0, 1, 1L << 26, &c->max_pos, path, err) < 0) return -1;
    c->rms_eps = 1e-6f;
    if (get_num(j, "rms_norm_eps", 0, 1e-30, 1.0, &c->rms_eps, path, err) < 0) return -1;
    if (c->n_heads % c->n_kv_heads)
        return qw_errf(err, "config: %s: num_attention_heads %d is not a multiple of num_key_value_heads %d", path,
                       c->n_heads, c->n_kv_heads);
    c->head_dim = 0;
    int hd = get_int(j, "head_dim", 0, 2, 65536, &c->head_dim, path, err);
    if (hd < 0) return -1;
    if (!hd) {
        if (c->hidden % c->n_heads)
            return qw_errf(err, "config: %s: hidden_size %d is not a multiple of num_attention_heads %d", path,
                           c->hidden, c->n_heads);
        c->head_dim = c->hidden / c->n_heads;
    }
    if (c->head_dim % 2)
        return qw_errf(err, "config: %s: head_dim %d must be even (rotary embedding)", path, c->head_dim);
    if ((int64_t)c->n_heads * c->head_dim > BIG)
        return qw_errf(err, "config: %s: num_attention_heads * head_dim too large", path);

    /* rope: 4.x rope_theta at the top level, 5.x rope_parameters.rope_theta */
    c->rope_theta = 10000.0f;
    const cJSON *rp = item(j, "rope_parameters");
    int have_theta = get_num(j, "rope_theta", 0, 1e-3, 1e12, &c->rope_theta, path, err);
    if (have_theta < 0) return -1;
    if (rp) {
        if (!cJSON_IsObject(rp)) return qw_errf(err, "config: %s: field 'rope_parameters' must be an object", path);
        const cJSON *rt = item(rp, "rope_type");
        if (rt && (!cJSON_IsString(rt) || strcmp(rt->valuestring, "default")))
            return qw_errf(err, "config: %s: field 'rope_parameters.rope_type': only 'default' is supported", path);
        int t = get_num(rp, "rope_theta", 0, 1e-3, 1e12, &c->rope_theta, path, err);
        if (t < 0) return qw_err_prefix(err, "rope_parameters");
    }
    const cJSON *rs = item(j, "rope_scaling");
    if (rs) {
        const cJSON *rt = cJSON_IsObject(rs) ? item(rs, "rope_type") : NULL;
        if (!rt && cJSON_IsObject(rs)) rt = item(rs, "type");
        if (!rt || !cJSON_IsString(rt) || strcmp(rt->valuestring, "default"))
            return qw_errf(err, "config: %s: field 'rope_scaling': rope scaling is not supported", path);
    }
    int sw = 0;
    if (get_bool(j, "use_sliding_window", &sw, path, err) < 0) return -1;
    if (sw) return qw_errf(err, "config: %s: field 'use_sliding_window': sliding-window attention is not supported", path);
    const cJSON *lt = item(j, "layer_types"); /* transformers 5.x */
    if (lt) {
        if (!cJSON_IsArray(lt)) return qw_errf(err, "config: %s: field 'layer_types' must be a list", path);
        for (const cJSON *x = lt->child; x; x = x->next)
            if (!cJSON_IsString(x) || strcmp(x->valuestring, "full_attention"))
                return qw_errf(err, "config: %s: field 'layer_types': only 'full_attention' layers are supported",
                               path);
    }
    const cJSON *act = item(j, "hidden_act");
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu")))
        return qw_errf(err, "config: %s: field 'hidden_act': only 'silu' is supported", path);

    c->tie_embeddings = 0;
    if (get_bool(j, "tie_word_embeddings", &c->tie_embeddings, path, err) < 0) return -1;
    if (get_bool(j, "qwenc_random_weights", &c->random_weights, path, err) < 0) return -1;
    c->bos_id = -1;
    if (get_int(j, "bos_token_id", 0, 0, c->vocab - 1, &c->bos_id, path, err) < 0) return -1;
    if (get_eos(j, c, c->vocab, path, err) < 0) return -1;
    return 0;
}

static int parse_generation(qw_config *c, const cJSON *j, const char *path, qw_err *err) {
    if (get_int(j, "bos_token_id", 0, 0, c->vocab - 1, &c->bos_id, path, err) < 0) return -1;
    if (get_eos(j, c, c->vocab, path, err) < 0) return -1;
    if (get_num(j, "temperature", 0, 0.0, 100.0, &c->gen_temperature, path, err) < 0) return -1;
    if (get_num(j, "top_p", 0, 0.0, 1.0, &c->gen_top_p, path, err) < 0) return -1;
    if (get_int(j, "top_k", 0, 0, 1L << 30, &c->gen_top_k, path, err) < 0) return -1;
    if (get_num(j, "repetition_penalty", 0, 1e-3, 100.0, &c->gen_repeat_penalty, path, err) < 0) return -1;
    /* transformers samples only with do_sample = true: otherwise greedy. */
    int ds = 0;
    int have_ds = get_bool(j, "do_sample", &ds, path, err);
    if (have_ds < 0) return -1;
    if (!ds) c->gen_temperature = 0.0f;
    return 0;
}

int config_parse(qw_config *cfg, const char *json, size_t len, int generation, const char *label, qw_err *err) {
    if (!generation) memset(cfg, 0, sizeof *cfg);
    cJSON *j = parse_json(json, len, label, err);
    if (!j) return -1;
    int rc = generation ? parse_generation(cfg, j, label, err) : parse_config(cfg, j, label, err);
    cJSON_Delete(j);
    return rc ? -1 : 0;
}

int config_load(qw_config *cfg, const char *dir, qw_err *err) {
    memset(cfg, 0, sizeof *cfg);
    char path[4096];
    int missing;
    snprintf(path, sizeof path, "%s/config.json", dir);
    cJSON *j = load_json(path, &missing, err);
    if (!j) return -1;
    int rc = parse_config(cfg, j, path, err);
    cJSON_Delete(j);
    if (rc) return -1;

    cfg->gen_temperature = 0.0f;
    cfg->gen_top_p = 1.0f;
    cfg->gen_top_k = 0;
    cfg->gen_repeat_penalty = 1.0f;
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    j = load_json(path, &missing, err);
    if (!j) {
        if (missing) return 0;
        return -1;
    }
    rc = parse_generation(cfg, j, path, err);
    cJSON_Delete(j);
    return rc ? -1 : 0;
}
