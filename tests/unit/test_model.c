/* test_model.c - the model loader on hand-built folders: a valid tiny model
 * loads (F32, BF16, sharded) and runs; a missing tensor, a wrong shape, an
 * unsupported dtype, a truncated file are refused with a message naming the
 * file and the tensor; forward() refuses batches that break its rules. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "infer/forward.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "runtime/pool.h"
#include "test.h"

/* hidden 8, 2 heads of 4, 1 kv head, inter 12, vocab 16, 2 layers */
enum { H = 8, NH = 2, NKV = 1, HD = 4, I = 12, VOC = 16, NL = 2 };

typedef struct tdesc {
    char name[96];
    const char *dtype;
    int nd;
    int64_t shape[2];
} tdesc;

static tdesc T[64];
static int nt;

static void add(const char *name, int64_t r, int64_t c) {
    tdesc *t = &T[nt++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = "F32";
    t->nd = c ? 2 : 1;
    t->shape[0] = r;
    t->shape[1] = c;
}

static void build_list(int tied) {
    nt = 0;
    add("model.embed_tokens.weight", VOC, H);
    add("model.norm.weight", H, 0);
    if (!tied) add("lm_head.weight", VOC, H);
    char n[96];
    for (int l = 0; l < NL; l++) {
#define L(s) (snprintf(n, sizeof n, "model.layers.%d.%s", l, s), n)
        add(L("input_layernorm.weight"), H, 0);
        add(L("post_attention_layernorm.weight"), H, 0);
        add(L("self_attn.q_proj.weight"), NH * HD, H);
        add(L("self_attn.q_proj.bias"), NH * HD, 0);
        add(L("self_attn.k_proj.weight"), NKV * HD, H);
        add(L("self_attn.k_proj.bias"), NKV * HD, 0);
        add(L("self_attn.v_proj.weight"), NKV * HD, H);
        add(L("self_attn.v_proj.bias"), NKV * HD, 0);
        add(L("self_attn.o_proj.weight"), H, NH * HD);
        add(L("mlp.gate_proj.weight"), I, H);
        add(L("mlp.up_proj.weight"), I, H);
        add(L("mlp.down_proj.weight"), H, I);
#undef L
    }
}

static int g_pad = 1; /* pad the header to 8 bytes, as transformers does */
static int g_mis = 0; /* 1: one extra space so that every tensor is misaligned */
static int g_nan = 0; /* 1: the final norm weights are NaN */

static int esize(const char *dt) { return !strcmp(dt, "F32") || !strcmp(dt, "I32") ? 4 : 2; }

/* Writes tensors [from, to) of T into path; `cut` bytes removed from the end. */
static void write_st(const char *path, int from, int to, int cut) {
    char hdr[16384];
    size_t hl = 0;
    uint64_t off = 0;
    hl += (size_t)snprintf(hdr + hl, sizeof hdr - hl, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = from; i < to; i++) {
        uint64_t n = (uint64_t)T[i].shape[0] * (T[i].nd == 2 ? (uint64_t)T[i].shape[1] : 1) * esize(T[i].dtype);
        if (T[i].nd == 2)
            hl += (size_t)snprintf(hdr + hl, sizeof hdr - hl, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld,%lld],\"data_offsets\":[%llu,%llu]}",
                                   T[i].name, T[i].dtype, (long long)T[i].shape[0], (long long)T[i].shape[1],
                                   (unsigned long long)off, (unsigned long long)(off + n));
        else
            hl += (size_t)snprintf(hdr + hl, sizeof hdr - hl, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld],\"data_offsets\":[%llu,%llu]}",
                                   T[i].name, T[i].dtype, (long long)T[i].shape[0], (unsigned long long)off,
                                   (unsigned long long)(off + n));
        off += n;
    }
    hl += (size_t)snprintf(hdr + hl, sizeof hdr - hl, "}");
    while (g_pad && hl % 8) hdr[hl++] = ' ';
    if (g_mis) hdr[hl++] = ' ';
    uint8_t *data = malloc(off + 1);
    uint64_t seed = 99;
    for (int i = from, o = 0; i < to; i++) {
        int64_t n = T[i].shape[0] * (T[i].nd == 2 ? T[i].shape[1] : 1);
        for (int64_t k = 0; k < n; k++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            float v = (float)((int)(seed >> 40) % 2001 - 1000) / 4000.0f;
            if (T[i].nd == 1 && strstr(T[i].name, "norm")) v += 1.0f;
            if (g_nan && !strcmp(T[i].name, "model.norm.weight")) v = NAN;
            if (!strcmp(T[i].dtype, "F32")) {
                memcpy(data + o, &v, 4);
                o += 4;
            } else {
                uint32_t u;
                memcpy(&u, &v, 4);
                uint16_t h = (uint16_t)(u >> 16); /* BF16 by truncation (or an I16/F16 bit pattern) */
                memcpy(data + o, &h, 2);
                o += 2;
            }
        }
    }
    FILE *f = fopen(path, "wb");
    uint8_t len[8];
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    fwrite(len, 1, 8, f);
    fwrite(hdr, 1, hl, f);
    fwrite(data, 1, off - (uint64_t)cut, f);
    fclose(f);
    free(data);
}

static char dir[64];

static void write_config(int tied) {
    char p[128];
    snprintf(p, sizeof p, "%s/config.json", dir);
    FILE *f = fopen(p, "w");
    fprintf(f,
            "{\"architectures\":[\"Qwen2ForCausalLM\"],\"model_type\":\"qwen2\",\"hidden_size\":%d,"
            "\"intermediate_size\":%d,\"num_hidden_layers\":%d,\"num_attention_heads\":%d,"
            "\"num_key_value_heads\":%d,\"vocab_size\":%d,\"max_position_embeddings\":64,"
            "\"rms_norm_eps\":1e-6,\"rope_theta\":10000.0,\"tie_word_embeddings\":%s,\"eos_token_id\":15}",
            H, I, NL, NH, NKV, VOC, tied ? "true" : "false");
    fclose(f);
}

static void clean(void) {
    const char *names[] = {"config.json", "model.safetensors", "model.safetensors.index.json", "a.safetensors",
                           "b.safetensors"};
    char p[128];
    for (int i = 0; i < 5; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
}

static char st_path[128];

static void expect_fail(const char *what, const char *w1, const char *w2) {
    qw_model *m = NULL;
    qw_err err = {{0}};
    int rc = model_load(&m, dir, &err);
    CHECK(rc == -1 && m == NULL, "%s: loaded", what);
    CHECK(strstr(err.msg, w1) != NULL, "%s: message lacks '%s': %s", what, w1, err.msg);
    CHECK(!w2 || strstr(err.msg, w2) != NULL, "%s: message lacks '%s': %s", what, w2, err.msg);
    if (rc == 0) model_free(m);
}

static void remove_tensor(const char *name) {
    for (int i = 0; i < nt; i++)
        if (!strcmp(T[i].name, name)) {
            memmove(&T[i], &T[i + 1], (size_t)(nt - i - 1) * sizeof T[0]);
            nt--;
            return;
        }
}

static tdesc *tensor(const char *name) {
    for (int i = 0; i < nt; i++)
        if (!strcmp(T[i].name, name)) return &T[i];
    return NULL;
}

static int forward_tokens(qw_ctx *c, qw_pool *pool, int n, const int32_t *tok, const int32_t *pos,
                          const int32_t *slot, qw_err *err) {
    uint8_t want[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    qw_batch b = {.n = n, .tokens = tok, .pos = pos, .slot = slot, .want_logits = want};
    return forward(c, &b, pool, err);
}

/* The load log's description: the GGUF file type by llama.cpp's name, and
 * the tensor types most frequent first (issue 14: a Q4_K_M file was logged
 * as Q5_0, the type of its embedding). */
static void test_describe(void) {
    CHECK(!strcmp(model_gguf_file_type_name(15), "Q4_K_M"), "15");
    CHECK(!strcmp(model_gguf_file_type_name(17), "Q5_K_M"), "17");
    CHECK(!strcmp(model_gguf_file_type_name(7), "Q8_0"), "7");
    CHECK(!strcmp(model_gguf_file_type_name(32), "BF16"), "32");
    CHECK(!strcmp(model_gguf_file_type_name(0), "F32"), "0");
    CHECK(model_gguf_file_type_name(5) == NULL && model_gguf_file_type_name(-1) == NULL &&
              model_gguf_file_type_name(1000) == NULL, "undefined values have no name");
    qw_model m;
    memset(&m, 0, sizeof m);
    m.format = "GGUF";
    snprintf(m.file_type, sizeof m.file_type, "Q4_K_M");
    m.n_by_dtype[QW_Q5_0] = 133;
    m.n_by_dtype[QW_F32] = 121;
    m.n_by_dtype[QW_Q8_0] = 13;
    m.n_by_dtype[QW_Q4_K] = 12;
    char buf[256];
    model_describe(&m, buf, sizeof buf);
    CHECK(!strcmp(buf, "GGUF Q4_K_M; tensors Q5_0 x 133, F32 x 121, Q8_0 x 13, Q4_K x 12"), "%s", buf);
    char tiny[16];
    model_describe(&m, tiny, sizeof tiny); /* cut, not overrun */
    CHECK(strlen(tiny) == sizeof tiny - 1, "%s", tiny);
}

int main(void) {
    test_describe();
    qw_err err = {{0}};
    kernels_init(&err);
    strcpy(dir, "/tmp/qwenc_model_XXXXXX");
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return test_summary();
    }
    snprintf(st_path, sizeof st_path, "%s/model.safetensors", dir);
    qw_pool *pool = pool_create(2);

    /* valid: untied F32 */
    build_list(0);
    write_config(0);
    write_st(st_path, 0, nt, 0);
    qw_model *m = NULL;
    float first[VOC];
    CHECK(model_load(&m, dir, &err) == 0, "valid model: %s", err.msg);
    if (m) {
        CHECK(m->cfg.n_layers == NL && m->layers[1].wq.rows == NH * HD && m->layers[1].wq.cols == H &&
                  m->layers[1].wq.dtype == QW_F32 && m->lm_head.data != m->embed.data && m->cfg.n_eos == 1,
              "model fields");
        CHECK(m->final_norm[0] > 0.7f && m->final_norm[0] < 1.3f, "norm weight converted");
        CHECK(m->weight_bytes == (uint64_t)(2 * VOC * H + NL * (2 * NH * HD * H + 2 * NKV * HD * H + 3 * I * H)) * 4,
              "weight_bytes %llu", (unsigned long long)m->weight_bytes);
        CHECK(!strncmp(m->name, "qwenc_model_", 12), "name %s", m->name);
        qw_ctx *c = ctx_create(m, 2, 32, 4, &err);
        CHECK(c != NULL, "ctx_create: %s", err.msg);
        if (c) {
            int32_t tok[4] = {3, 7, 11, 2}, pos[4] = {0, 1, 2, 3}, sl[4] = {0, 0, 0, 0};
            /* prefill 3 at once == 3 decode steps */
            CHECK(forward_tokens(c, pool, 3, tok, pos, sl, &err) == 0, "prefill: %s", err.msg);
            float a[VOC], b[VOC];
            memcpy(a, ctx_logits(c, 2), sizeof a);
            memcpy(first, a, sizeof a);
            int finite = 1;
            for (int v = 0; v < VOC; v++) finite &= a[v] == a[v] && a[v] < 1e30f && a[v] > -1e30f;
            CHECK(finite, "logits not finite");
            for (int t = 0; t < 3; t++) {
                int32_t s1 = 1;
                CHECK(forward_tokens(c, pool, 1, tok + t, pos + t, &s1, &err) == 0, "decode: %s", err.msg);
            }
            memcpy(b, ctx_logits(c, 0), sizeof b);
            float md = 0;
            for (int v = 0; v < VOC; v++) {
                float d = a[v] > b[v] ? a[v] - b[v] : b[v] - a[v];
                if (d > md) md = d;
            }
            CHECK(md < 1e-5f, "prefill vs decode differ by %g", md);
            /* batch rules */
            int32_t p_gap[2] = {0, 2}, p_down[2] = {1, 0}, p_far[1] = {32}, s_bad[1] = {2}, t_bad[1] = {VOC};
            int32_t t_neg[1] = {-1};
            CHECK(forward_tokens(c, pool, 2, tok, p_gap, sl, &err) == -1 && strstr(err.msg, "does not follow"),
                  "gap in positions: %s", err.msg);
            CHECK(forward_tokens(c, pool, 2, tok, p_down, sl, &err) == -1 && strstr(err.msg, "does not follow"),
                  "decreasing positions: %s", err.msg);
            CHECK(forward_tokens(c, pool, 1, tok, p_far, sl, &err) == -1 && strstr(err.msg, "context"),
                  "position beyond n_ctx: %s", err.msg);
            CHECK(forward_tokens(c, pool, 1, tok, pos, s_bad, &err) == -1 && strstr(err.msg, "slot"),
                  "bad slot: %s", err.msg);
            CHECK(forward_tokens(c, pool, 1, t_bad, pos, sl, &err) == -1 && strstr(err.msg, "vocabulary"),
                  "token = vocab: %s", err.msg);
            CHECK(forward_tokens(c, pool, 1, t_neg, pos, sl, &err) == -1 && strstr(err.msg, "vocabulary"),
                  "negative token: %s", err.msg);
            CHECK(forward_tokens(c, pool, 0, tok, pos, sl, &err) == -1, "empty batch accepted");
            CHECK(forward_tokens(c, pool, 5, tok, pos, sl, &err) == -1, "batch above max_batch accepted");
            /* two slots interleaved in one batch are fine */
            int32_t p2[4] = {0, 0, 1, 1}, s2[4] = {0, 1, 0, 1};
            CHECK(forward_tokens(c, pool, 4, tok, p2, s2, &err) == 0, "interleaved slots: %s", err.msg);
            ctx_free(c);
        }
        CHECK(ctx_create(m, 1, 65, 4, &err) == NULL && strstr(err.msg, "max_position_embeddings"),
              "context above max_position_embeddings: %s", err.msg);
        model_free(m);
    }

    /* a file whose tensors are misaligned still loads and gives the same logits */
    g_mis = 1;
    write_st(st_path, 0, nt, 0);
    g_mis = 0;
    m = NULL;
    CHECK(model_load(&m, dir, &err) == 0, "misaligned model: %s", err.msg);
    if (m) {
        qw_ctx *c = ctx_create(m, 1, 16, 4, &err);
        int32_t tok[3] = {3, 7, 11}, pos[3] = {0, 1, 2};
        CHECK(c && forward_tokens(c, pool, 3, tok, pos, NULL, &err) == 0, "misaligned forward: %s", err.msg);
        if (c) CHECK(!memcmp(ctx_logits(c, 2), first, sizeof first), "misaligned model gives other logits");
        ctx_free(c);
        model_free(m);
    }

    /* tied embeddings: no lm_head.weight */
    build_list(1);
    write_config(1);
    write_st(st_path, 0, nt, 0);
    m = NULL;
    CHECK(model_load(&m, dir, &err) == 0 && m && m->lm_head.data == m->embed.data, "tied model: %s", err.msg);
    model_free(m);

    /* BF16 weights used in place */
    for (int i = 0; i < nt; i++) T[i].dtype = "BF16";
    write_st(st_path, 0, nt, 0);
    m = NULL;
    CHECK(model_load(&m, dir, &err) == 0 && m && m->embed.dtype == QW_BF16 && m->layers[0].w_down.dtype == QW_BF16,
          "BF16 model: %s", err.msg);
    if (m) {
        qw_ctx *c = ctx_create(m, 1, 16, 2, &err);
        int32_t tok[2] = {1, 2}, pos[2] = {0, 1};
        CHECK(c && forward_tokens(c, pool, 2, tok, pos, NULL, &err) == 0, "BF16 forward: %s", err.msg);
        ctx_free(c);
    }
    model_free(m);

    /* sharded: two files and an index */
    unlink(st_path);
    char p[160];
    snprintf(p, sizeof p, "%s/a.safetensors", dir);
    write_st(p, 0, nt / 2, 0);
    snprintf(p, sizeof p, "%s/b.safetensors", dir);
    write_st(p, nt / 2, nt, 0);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    FILE *f = fopen(p, "w");
    fprintf(f, "{\"metadata\":{\"total_size\":0},\"weight_map\":{");
    for (int i = 0; i < nt; i++) fprintf(f, "%s\"%s\":\"%s\"", i ? "," : "", T[i].name, i < nt / 2 ? "a.safetensors" : "b.safetensors");
    fprintf(f, "}}");
    fclose(f);
    m = NULL;
    CHECK(model_load(&m, dir, &err) == 0 && m, "sharded model: %s", err.msg);
    model_free(m);
    /* a shard missing */
    snprintf(p, sizeof p, "%s/b.safetensors", dir);
    unlink(p);
    expect_fail("missing shard", "b.safetensors", NULL);
    clean();

    /* errors, each naming the file and the tensor */
    build_list(0);
    write_config(0);
    remove_tensor("model.layers.1.mlp.up_proj.weight");
    write_st(st_path, 0, nt, 0);
    expect_fail("missing tensor", "model.layers.1.mlp.up_proj.weight", "missing");

    build_list(0);
    remove_tensor("lm_head.weight");
    write_st(st_path, 0, nt, 0);
    expect_fail("untied without lm_head", "lm_head.weight", "missing");

    build_list(0);
    tensor("model.layers.0.self_attn.q_proj.weight")->shape[1] = H + 1;
    write_st(st_path, 0, nt, 0);
    expect_fail("wrong shape", "model.safetensors", "model.layers.0.self_attn.q_proj.weight");

    build_list(0);
    tensor("model.layers.1.self_attn.k_proj.bias")->nd = 2;
    tensor("model.layers.1.self_attn.k_proj.bias")->shape[1] = 1;
    write_st(st_path, 0, nt, 0);
    expect_fail("2-D bias", "model.safetensors", "model.layers.1.self_attn.k_proj.bias");

    build_list(0);
    tensor("model.embed_tokens.weight")->shape[0] = VOC - 1;
    write_st(st_path, 0, nt, 0);
    expect_fail("vocab mismatch", "model.embed_tokens.weight", "expected [16, 8]");

    build_list(0);
    tensor("model.layers.0.mlp.down_proj.weight")->dtype = "I32";
    write_st(st_path, 0, nt, 0);
    expect_fail("unsupported dtype", "model.layers.0.mlp.down_proj.weight", "unsupported dtype I32");

    build_list(0);
    write_st(st_path, 0, nt, 10);
    expect_fail("truncated file", "model.safetensors", "outside the data region");

    /* NaN weights: the load-time check refuses them instead of letting the
     * sampler pick token 0 forever; the same model with finite weights passes. */
    build_list(0);
    write_config(0);
    for (int nan = 0; nan < 2; nan++) {
        g_nan = nan;
        write_st(st_path, 0, nt, 0);
        m = NULL;
        CHECK(model_load(&m, dir, &err) == 0, "nan=%d model: %s", nan, err.msg);
        qw_ctx *c = m ? ctx_create(m, 1, 16, 4, &err) : NULL;
        if (c) {
            int rc = ctx_check_finite(c, pool, &err);
            if (nan)
                CHECK(rc == -1 && strstr(err.msg, "NaN/Inf logits") && strstr(err.msg, "qwenc_model_"),
                      "NaN weights: rc %d: %s", rc, err.msg);
            else
                CHECK(rc == 0, "finite weights refused: %s", err.msg);
            ctx_free(c);
        }
        model_free(m);
    }
    g_nan = 0;

    unlink(st_path);
    expect_fail("no weights", "model.safetensors", NULL);

    clean();
    expect_fail("no config", "config.json", NULL);
    rmdir(dir);
    pool_free(pool);
    return test_summary();
}
