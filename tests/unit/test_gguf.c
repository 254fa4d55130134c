/* test_gguf.c - the GGUF reader, the model and tokenizer built from a GGUF
 * file, on files written byte by byte (tests/gguf_writer.h):
 *   - a valid tiny qwen2 model (F32, F16, BF16 matrices; tied and untied)
 *     loads: config from the metadata, matrices in place with the right
 *     [rows, cols], vectors converted; a folder holding only the .gguf loads
 *     too, two .gguf files in one folder are refused;
 *   - its tokenizer metadata builds a working qw_tok;
 *   - each malformation (truncation at every length, bad magic / version,
 *     huge counts, strings and arrays past EOF, tensor data past EOF,
 *     misaligned or overlapping data, duplicated tensors and keys, wrong
 *     shape, quantized or unknown types, wrong architecture, missing tensor
 *     or key, ...) is refused with a message naming the file and the key or
 *     tensor, never a crash;
 *   - 20 000 random mutations through gguf_parse (exact-size buffers, so
 *     ASan sees any over-read) and 300 through model_load + tok_load. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/gguf.h"
#include "gguf_writer.h"
#include "model/model.h"
#include "model/model_internal.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

/* hidden 8, 2 heads of 4, 1 kv head, inter 256 (so ffn_down's rows fit a
 * 256-element quantization block), vocab 16, 2 layers */
enum { H = 8, NH = 2, NKV = 1, HD = 4, I = 256, VOC = 16, NL = 2 };

static char g_dir[64];
static char g_path[128];
static float *g_data[96]; /* per-tensor F32 values (what the file holds for F32 tensors) */
static uint16_t *g_half[96];
static int g_nd;

/* Tokenizer: byte-level spellings; "Ġ" is the space byte. */
static const char *const TOKS[VOC] = {"a", "b", "c", "Ġ", "ab", "abc", "Ġa", "h", "i", "hi", "x", "y",
                                      "<tool>", "[PAD13]", "[PAD14]", "<|end|>"};
static const int32_t TTYPES[VOC] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 4, 5, 5, 3};
static const char *const MERGES[] = {"a b", "ab c", "Ġ a", "h i"};

static float val(int t, uint64_t i) { return (float)((int)((t * 131 + i * 7919) % 2001) - 1000) / 1000.0f; }

/* dtype for the matrices: 0 F32, 1 F16, 30 BF16 */
static void make_model(gw *w, int tied, uint32_t mt) {
    gw_free(w); /* w is zeroed or a previous model */
    gw_init(w);
    gw_kv_str(w, "general.architecture", "qwen2");
    gw_kv_str(w, "general.name", "tiny");
    gw_kv_u32(w, "general.alignment", 32);
    gw_kv_u32(w, "qwen2.block_count", NL);
    gw_kv_u32(w, "qwen2.context_length", 64);
    gw_kv_u32(w, "qwen2.embedding_length", H);
    gw_kv_u32(w, "qwen2.feed_forward_length", I);
    gw_kv_u32(w, "qwen2.attention.head_count", NH);
    gw_kv_u32(w, "qwen2.attention.head_count_kv", NKV);
    gw_kv_f32(w, "qwen2.rope.freq_base", 10000.0f);
    gw_kv_f32(w, "qwen2.attention.layer_norm_rms_epsilon", 1e-5f);
    gw_kv_str(w, "tokenizer.ggml.model", "gpt2");
    gw_kv_str(w, "tokenizer.ggml.pre", "qwen2");
    gw_kv_strs(w, "tokenizer.ggml.tokens", TOKS, VOC);
    gw_kv_i32s(w, "tokenizer.ggml.token_type", TTYPES, VOC);
    gw_kv_strs(w, "tokenizer.ggml.merges", MERGES, 4);
    gw_kv_u32(w, "tokenizer.ggml.eos_token_id", 15);
    gw_kv_u32(w, "tokenizer.ggml.eot_token_id", 12);

    struct ent {
        const char *name;
        uint64_t r, c;
    } list[96];
    int n = 0;
    list[n++] = (struct ent){"token_embd.weight", VOC, H};
    list[n++] = (struct ent){"output_norm.weight", H, 0};
    if (!tied) list[n++] = (struct ent){"output.weight", VOC, H};
    static char names[NL][12][64];
    const char *sfx[12] = {"attn_norm.weight", "ffn_norm.weight", "attn_q.weight", "attn_q.bias",
                           "attn_k.weight",    "attn_k.bias",     "attn_v.weight", "attn_v.bias",
                           "attn_output.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"};
    const uint64_t rows[12] = {H, H, NH * HD, NH * HD, NKV * HD, NKV * HD, NKV * HD, NKV * HD, H, I, I, H};
    const uint64_t cols[12] = {0, 0, H, 0, H, 0, H, 0, NH * HD, H, H, I};
    for (int l = 0; l < NL; l++)
        for (int j = 0; j < 12; j++) {
            snprintf(names[l][j], sizeof names[l][j], "blk.%d.%s", l, sfx[j]);
            list[n++] = (struct ent){names[l][j], rows[j], cols[j]};
        }
    for (int i = 0; i < g_nd; i++) free(g_data[i]), free(g_half[i]);
    g_nd = n;
    for (int i = 0; i < n; i++) {
        uint64_t ne = list[i].r * (list[i].c ? list[i].c : 1);
        g_data[i] = malloc(ne * sizeof(float));
        g_half[i] = malloc(ne * sizeof(uint16_t));
        for (uint64_t k = 0; k < ne; k++) {
            float v = val(i, k);
            if (mt == 30 && list[i].c) { /* the F32 value a BF16 holds exactly */
                uint32_t b;
                memcpy(&b, &v, 4);
                b &= 0xFFFF0000u;
                memcpy(&v, &b, 4);
                g_half[i][k] = (uint16_t)(b >> 16);
            } else if (mt == 1 && list[i].c) { /* k/1024 in [0, 1): exact in F16 */
                int q = (int)(k % 1024);
                v = (float)q / 1024.0f;
                /* F16 of q/1024: 0 or 2^e * (1 + m/1024) */
                uint16_t h = 0;
                if (q) {
                    int e = 0;
                    while ((q << e) < 1024) e++;
                    h = (uint16_t)(((15 - e) << 10) | (((q << e) - 1024) & 0x3FF));
                }
                g_half[i][k] = h;
            }
            g_data[i][k] = v;
        }
        gw_add_tensor(w, list[i].name, list[i].c ? mt : 0, list[i].r, list[i].c,
                      list[i].c && mt ? (const void *)g_half[i] : (const void *)g_data[i]);
    }
    gw_build(w);
}

static int data_index(const char *name, gw *w) {
    for (int i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name)) return i;
    return -1;
}

static void set_shape(gw_tensor *t, uint64_t rows, uint64_t cols) {
    t->ne[0] = cols, t->ne[1] = rows;
    t->nbytes = rows * cols * (t->type == 0 ? 4 : 2);
    t->data = NULL; /* zeros: the old values no longer fit */
}

/* -------------------------------------------------------------- valid */

static void check_valid(void) {
    static const uint32_t types[3] = {0, 1, 30};
    for (int k = 0; k < 3; k++)
        for (int tied = 0; tied < 2; tied++) {
            gw w = {0};
            make_model(&w, tied, types[k]);
            CHECK(gw_write(&w, g_path, w.n) == 0, "write %s", g_path);
            qw_model *m = NULL;
            qw_err err = {{0}};
            int rc = model_load(&m, g_path, &err);
            CHECK(rc == 0 && m, "type %u tied %d: %s", types[k], tied, err.msg);
            if (rc == 0) {
                const qw_config *c = &m->cfg;
                CHECK(c->n_layers == NL && c->hidden == H && c->inter == I && c->n_heads == NH &&
                          c->n_kv_heads == NKV && c->head_dim == HD && c->vocab == VOC && c->max_pos == 64,
                      "config numbers");
                CHECK(c->rope_theta == 10000.0f && c->rms_eps == 1e-5f, "rope %g eps %g", c->rope_theta, c->rms_eps);
                CHECK(c->tie_embeddings == tied, "tied %d", c->tie_embeddings);
                CHECK(c->n_eos == 2 && c->eos_ids[0] == 15 && c->eos_ids[1] == 12, "eos %d", c->n_eos);
                CHECK(!strcmp(m->name, "tiny"), "name '%s'", m->name);
                qw_dtype want = types[k] == 0 ? QW_F32 : types[k] == 1 ? QW_F16 : QW_BF16;
                CHECK(m->embed.dtype == want && m->layers[1].w_down.dtype == want, "dtype");
                CHECK(m->embed.rows == VOC && m->embed.cols == H, "embed %lld x %lld", (long long)m->embed.rows,
                      (long long)m->embed.cols);
                CHECK(m->layers[1].w_down.rows == H && m->layers[1].w_down.cols == I, "ffn_down shape");
                CHECK(m->layers[0].wo.rows == H && m->layers[0].wo.cols == NH * HD, "attn_output shape");
                CHECK(tied ? m->lm_head.data == m->embed.data : m->lm_head.data != m->embed.data, "lm_head");
                /* in place: pointers into the mapping, no copy */
                const model_priv *pv = m->priv;
                const uint8_t *lo = pv->gg.map.data, *hi = lo + pv->gg.map.size;
                const uint8_t *pe = m->embed.data, *pd = m->layers[1].w_down.data;
                CHECK(pv->n_copies == 0 && pe >= lo && pe < hi && pd >= lo && pd < hi, "matrices not in the mapping");
                int di = data_index("blk.1.ffn_down.weight", &w);
                const void *src = types[k] ? (const void *)g_half[di] : (const void *)g_data[di];
                CHECK(!memcmp(m->layers[1].w_down.data, src, (size_t)H * I * (types[k] ? 2 : 4)),
                      "ffn_down bytes");
                /* row 5, column 200 of ffn_down: GGUF ne = {cols, rows} is row-major [rows][cols] */
                float x;
                size_t at = (size_t)5 * I + 200;
                if (types[k] == 0) x = ((const float *)m->layers[1].w_down.data)[at];
                else if (types[k] == 30) {
                    uint32_t b = (uint32_t)((const uint16_t *)m->layers[1].w_down.data)[at] << 16;
                    memcpy(&x, &b, 4);
                } else x = g_data[di][at];
                CHECK(x == g_data[di][at], "ffn_down[5][200] %g != %g", x, g_data[di][at]);
                di = data_index("blk.0.attn_k.bias", &w);
                CHECK(m->layers[0].bk[3] == g_data[di][3], "attn_k.bias[3]");
                di = data_index("output_norm.weight", &w);
                CHECK(m->final_norm[7] == g_data[di][7], "output_norm[7]");
                model_free(m);
            }
            gw_free(&w);
        }

    /* general.alignment 1: F32 data at odd offsets is copied once, aligned */
    {
        gw w = {0};
        make_model(&w, 0, 0);
        w.alignment = 1;
        gw_find_kv(&w, "general.alignment")->u = 1;
        gw_kv_str(&w, "general.pad", "x"); /* makes the header length odd */
        gw_build(&w);
        gw_write(&w, g_path, w.n);
        qw_model *m = NULL;
        qw_err err = {{0}};
        int rc = model_load(&m, g_path, &err);
        CHECK(rc == 0 && m, "alignment 1: %s", err.msg);
        if (m) {
            const model_priv *pv = m->priv;
            int di = data_index("blk.1.ffn_down.weight", &w);
            CHECK(w.pos_data % 4 != 0 && pv->n_copies > 0, "alignment 1: data at %zu, %d copies", w.pos_data,
                  pv->n_copies);
            CHECK((uintptr_t)m->layers[1].w_down.data % 4 == 0 &&
                      !memcmp(m->layers[1].w_down.data, g_data[di], (size_t)H * I * 4),
                  "alignment 1: aligned copy with the file's values");
            model_free(m);
        }
        gw_free(&w);
    }

    /* tokenizer from the same file */
    gw w = {0};
    make_model(&w, 1, 30);
    gw_write(&w, g_path, w.n);
    gw_free(&w);
    qw_tok *t = NULL;
    qw_err err = {{0}};
    int rc = tok_load(&t, g_path, &err);
    CHECK(rc == 0 && t, "tok_load gguf: %s", err.msg);
    if (t) {
        int32_t *ids = NULL;
        size_t n = 0;
        const char *text = "abc hi a<|end|>x<tool>";
        tok_encode(t, text, strlen(text), &ids, &n, NULL);
        const int32_t want[] = {5, 3, 9, 6, 15, 10, 12};
        CHECK(n == 7 && !memcmp(ids, want, sizeof want), "encode: %zu ids [%d %d %d ...]", n, n ? ids[0] : -1,
              n > 1 ? ids[1] : -1, n > 2 ? ids[2] : -1);
        free(ids);
        CHECK(tok_is_special(t, 15) && !tok_is_special(t, 12) && !tok_is_special(t, 5), "special flags");
        CHECK(tok_token_id(t, "[PAD13]") == -1 && tok_token_bytes(t, 13, NULL) == NULL, "unused ids are no tokens");
        size_t bl;
        const char *b = tok_token_bytes(t, 6, &bl);
        CHECK(b && bl == 2 && !memcmp(b, " a", 2), "byte-level decode of 'Ġa'");
        CHECK(tok_vocab_size(t) == VOC, "vocab size %d", tok_vocab_size(t));
        tok_free(t);
    }

    /* a folder holding only the .gguf: model and tokenizer load from it */
    qw_model *m = NULL;
    rc = model_load(&m, g_dir, &err);
    CHECK(rc == 0 && m && m->cfg.vocab == VOC, "folder with one .gguf: %s", err.msg);
    model_free(m);
    t = NULL;
    rc = tok_load(&t, g_dir, &err);
    CHECK(rc == 0 && t, "tok_load folder with one .gguf: %s", err.msg);
    tok_free(t);
    /* a tokenizer.json beside it wins for the folder form, the file form keeps its own */
    char p2[256];
    snprintf(p2, sizeof p2, "%s/tokenizer.json", g_dir);
    FILE *f = fopen(p2, "w");
    fputs("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"c\":2},\"merges\":[]},\"normalizer\":null,"
          "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false},\"decoder\":{\"type\":\"ByteLevel\"}}",
          f);
    fclose(f);
    t = NULL;
    rc = tok_load(&t, g_dir, &err);
    CHECK(rc == 0 && t && tok_vocab_size(t) == 3, "folder: tokenizer.json preferred: %s", err.msg);
    tok_free(t);
    t = NULL;
    rc = tok_load(&t, g_path, &err);
    CHECK(rc == 0 && t && tok_vocab_size(t) == VOC, "file: the GGUF's own tokenizer: %s", err.msg);
    tok_free(t);
    unlink(p2);
    /* two .gguf files: ambiguous */
    snprintf(p2, sizeof p2, "%s/other.gguf", g_dir);
    make_model(&w, 1, 0);
    gw_write(&w, p2, w.n);
    gw_free(&w);
    m = NULL;
    rc = model_load(&m, g_dir, &err);
    CHECK(rc == -1 && m == NULL && strstr(err.msg, "several .gguf"), "two .gguf files: %s", err.msg);
    t = NULL;
    rc = tok_load(&t, g_dir, &err);
    CHECK(rc == -1 && t == NULL && strstr(err.msg, "several .gguf"), "tok_load two .gguf files: %s", err.msg);
    unlink(p2);
}

/* ---------------------------------------------------------- malformed */

/* model_load(g_path) of w.buf[len] must fail naming the file, w1 and w2. */
static void expect_model_fail(gw *w, size_t len, const char *what, const char *w1, const char *w2) {
    gw_write(w, g_path, len);
    qw_model *m = NULL;
    qw_err err = {{0}};
    int rc = model_load(&m, g_path, &err);
    CHECK(rc == -1 && m == NULL, "%s: loaded", what);
    CHECK(strstr(err.msg, g_path) != NULL, "%s: message lacks the file: %s", what, err.msg);
    CHECK(!w1 || strstr(err.msg, w1) != NULL, "%s: message lacks '%s': %s", what, w1, err.msg);
    CHECK(!w2 || strstr(err.msg, w2) != NULL, "%s: message lacks '%s': %s", what, w2, err.msg);
    if (rc == 0) model_free(m);
}

static void expect_model_ok(gw *w, const char *what) {
    gw_write(w, g_path, w->n);
    qw_model *m = NULL;
    qw_err err = {{0}};
    CHECK(model_load(&m, g_path, &err) == 0 && m, "%s: %s", what, err.msg);
    model_free(m);
}

static void expect_tok_fail(gw *w, const char *what, const char *w1) {
    gw_build(w);
    gw_write(w, g_path, w->n);
    qw_tok *t = NULL;
    qw_err err = {{0}};
    int rc = tok_load(&t, g_path, &err);
    CHECK(rc == -1 && t == NULL, "%s: loaded", what);
    CHECK(strstr(err.msg, g_path) && strstr(err.msg, w1), "%s: message lacks the file or '%s': %s", what, w1,
          err.msg);
    if (rc == 0) tok_free(t);
}

static void check_malformed(void) {
    gw w = {0};
    qw_err err = {{0}};
    make_model(&w, 0, 0);

    /* every truncation fails to parse */
    int all = 1;
    for (size_t cut = 0; cut < w.n; cut++) {
        uint8_t *copy = malloc(cut ? cut : 1);
        memcpy(copy, w.buf, cut);
        gguf_file f;
        if (gguf_parse(&f, copy, cut, "t", &err) == 0) {
            all = 0;
            gguf_free(&f);
        }
        free(copy);
    }
    CHECK(all, "a truncated file was accepted");
    expect_model_ok(&w, "valid file");
    expect_model_fail(&w, w.n - 1, "truncated file", "blk.1.ffn_down.weight", "truncated");
    expect_model_fail(&w, 100, "cut in the metadata", "key/value count 18 is impossible", NULL);
    expect_model_fail(&w, w.t[5].pos_ne + 3, "cut in the tensor infos", w.t[5].name, "truncated");
    expect_model_fail(&w, 0, "empty file", "too short", NULL);

    uint8_t keep[8];
    memcpy(keep, w.buf, 8);
    w.buf[0] = 'X';
    expect_model_fail(&w, w.n, "bad magic", "magic", NULL);
    memcpy(w.buf, keep, 8);
    gw_patch(&w, 4, 1, 4);
    expect_model_fail(&w, w.n, "version 1", "version 1", NULL);
    gw_patch(&w, 4, 7, 4);
    expect_model_fail(&w, w.n, "version 7", "version 7", NULL);
    gw_patch(&w, 4, 0x03000000u, 4);
    expect_model_fail(&w, w.n, "big-endian", "big-endian", NULL);
    gw_patch(&w, 4, 3, 4);

    gw_patch(&w, w.pos_counts, UINT64_C(1) << 62, 8);
    expect_model_fail(&w, w.n, "huge tensor count", "tensor count", NULL);
    gw_patch(&w, w.pos_counts, (uint64_t)w.n_t, 8);
    gw_patch(&w, w.pos_counts + 8, UINT64_MAX, 8);
    expect_model_fail(&w, w.n, "huge kv count", "key/value count", NULL);
    gw_patch(&w, w.pos_counts + 8, (uint64_t)w.n_kv, 8);
    gw_patch(&w, w.pos_counts, (uint64_t)w.n_t + 1, 8);
    expect_model_fail(&w, w.n, "one tensor more than there is", NULL, NULL);
    gw_patch(&w, w.pos_counts, (uint64_t)w.n_t, 8);

    /* a key length past EOF, a string value length past EOF */
    gw_patch(&w, w.pos_kv[1], UINT64_C(1) << 40, 8);
    expect_model_fail(&w, w.n, "key length past EOF", "key", "length");
    gw_patch(&w, w.pos_kv[1], strlen("general.name"), 8);
    size_t sv = w.pos_kv[0] + 8 + strlen("general.architecture") + 4;
    gw_patch(&w, sv, (uint64_t)w.n, 8);
    expect_model_fail(&w, w.n, "string value past EOF", "general.architecture", "string value");
    gw_patch(&w, sv, 5, 8);
    /* the token array: huge count, nested, unknown value type */
    int ti = -1;
    for (int i = 0; i < w.n_kv; i++)
        if (!strcmp(w.kv[i].key, "tokenizer.ggml.tokens")) ti = i;
    size_t at = w.pos_kv[ti] + 8 + strlen("tokenizer.ggml.tokens") + 4;
    gw_patch(&w, at + 4, UINT64_C(1) << 61, 8);
    expect_model_fail(&w, w.n, "huge array", "tokenizer.ggml.tokens", "cannot fit");
    gw_patch(&w, at + 4, VOC, 8);
    gw_patch(&w, at, 9, 4);
    expect_model_fail(&w, w.n, "nested array", "tokenizer.ggml.tokens", "nested");
    gw_patch(&w, at, 8, 4);
    gw_patch(&w, at - 4, 13, 4);
    expect_model_fail(&w, w.n, "unknown value type", "tokenizer.ggml.tokens", "unknown value type");
    gw_patch(&w, at - 4, 9, 4);
    expect_model_ok(&w, "header patches restored");

    /* tensor infos: offset / size past EOF, misaligned, overlap, dims, type */
    gw_tensor *last = &w.t[w.n_t - 1];
    uint64_t off = last->pos_data - w.pos_data;
    gw_patch(&w, last->pos_off, off + 4096, 8);
    expect_model_fail(&w, w.n, "offset past EOF", last->name, "outside");
    gw_patch(&w, last->pos_off, off, 8);
    gw_patch(&w, last->pos_ne + 8, 1000000, 8);
    expect_model_fail(&w, w.n, "size past EOF", last->name, "outside");
    gw_patch(&w, last->pos_ne + 8, last->ne[1], 8);
    gw_patch(&w, last->pos_off, off + 4, 8);
    expect_model_fail(&w, w.n, "misaligned offset", last->name, "alignment");
    gw_patch(&w, last->pos_off, w.t[w.n_t - 2].pos_data - w.pos_data, 8);
    expect_model_fail(&w, w.n, "overlap", "overlap", NULL);
    gw_patch(&w, last->pos_off, off, 8);
    gw_patch(&w, last->pos_nd, 5, 4);
    expect_model_fail(&w, w.n, "5 dims", last->name, "dimensions");
    gw_patch(&w, last->pos_nd, 2, 4);
    gw_patch(&w, last->pos_type, 99, 4);
    expect_model_fail(&w, w.n, "unknown ggml type", last->name, "unknown GGML type 99");
    gw_patch(&w, last->pos_ne, UINT64_C(1) << 63, 8);
    expect_model_fail(&w, w.n, "huge dimension", last->name, "too large");
    gw_free(&w);

    /* rebuilt files, one thing wrong each */
    make_model(&w, 0, 0);
    snprintf(w.t[3].name, sizeof w.t[3].name, "%s", w.t[2].name);
    gw_build(&w);
    expect_model_fail(&w, w.n, "duplicated tensor", w.t[2].name, "twice");
    make_model(&w, 0, 0);
    gw_kv_u32(&w, "qwen2.block_count", 2);
    gw_build(&w);
    expect_model_fail(&w, w.n, "duplicated key", "qwen2.block_count", "twice");
    make_model(&w, 0, 0);
    set_shape(gw_find_tensor(&w, "blk.0.attn_q.weight"), NH * HD, H + 1);
    gw_build(&w);
    expect_model_fail(&w, w.n, "wrong shape", "blk.0.attn_q.weight", "expected [8, 8]");
    make_model(&w, 0, 0);
    gw_tensor *t = gw_find_tensor(&w, "blk.1.attn_v.bias");
    t->nd = 2, t->ne[1] = 1;
    gw_build(&w);
    expect_model_fail(&w, w.n, "2-D bias", "blk.1.attn_v.bias", NULL);
    make_model(&w, 0, 0);
    t = gw_find_tensor(&w, "blk.1.ffn_down.weight"); /* [8, 256]: one Q4_K block per row */
    t->type = 11, t->nbytes = (uint64_t)H * 110; /* Q3_K: not supported */
    gw_build(&w);
    expect_model_fail(&w, w.n, "Q3_K", "blk.1.ffn_down.weight", "Q3_K: this quantized type is not supported yet");
    make_model(&w, 0, 0);
    t = gw_find_tensor(&w, "blk.1.ffn_down.weight");
    t->type = 12, t->nbytes = (uint64_t)H * 144; /* Q4_K is used in place */
    gw_build(&w);
    expect_model_ok(&w, "Q4_K ffn_down");
    make_model(&w, 0, 0);
    t = gw_find_tensor(&w, "blk.1.ffn_down.weight");
    t->type = 8, t->nbytes = (uint64_t)H * 8 * 34; /* Q8_0 is used in place */
    gw_build(&w);
    expect_model_ok(&w, "Q8_0 ffn_down");
    make_model(&w, 0, 0);
    t = gw_find_tensor(&w, "blk.1.ffn_down.weight");
    t->type = 6, t->nbytes = (uint64_t)H * 8 * 22; /* Q5_0 */
    gw_build(&w);
    expect_model_ok(&w, "Q5_0 ffn_down");
    make_model(&w, 0, 0);
    t = gw_find_tensor(&w, "blk.1.ffn_down.weight");
    t->type = 20, t->nbytes = (uint64_t)H * 8 * 18; /* IQ4_NL: not supported */
    gw_build(&w);
    expect_model_fail(&w, w.n, "IQ4_NL", "blk.1.ffn_down.weight", "IQ4_NL: this quantized type is not supported yet");
    make_model(&w, 0, 0);
    t = gw_find_tensor(&w, "blk.0.ffn_gate.weight"); /* 8 columns: not a multiple of Q4_K's 256 */
    t->type = 12;
    gw_build(&w);
    expect_model_fail(&w, w.n, "Q4_K bad row", "blk.0.ffn_gate.weight", "block size");
    make_model(&w, 0, 0);
    t = gw_find_tensor(&w, "blk.0.ffn_gate.weight"); /* Q6_K too */
    t->type = 14;
    gw_build(&w);
    expect_model_fail(&w, w.n, "Q6_K bad row", "blk.0.ffn_gate.weight", "not a multiple of the Q6_K block size 256");
    make_model(&w, 0, 0);
    t = gw_find_tensor(&w, "blk.0.ffn_gate.weight");
    t->type = 26; /* I32: same size as F32, not a float type */
    gw_build(&w);
    expect_model_fail(&w, w.n, "I32 tensor", "blk.0.ffn_gate.weight", "I32");
    make_model(&w, 0, 0);
    gw_find_kv(&w, "general.architecture")->s = "llama";
    gw_build(&w);
    expect_model_fail(&w, w.n, "wrong architecture", "general.architecture", "llama");
    make_model(&w, 0, 0);
    gw_del_tensor(&w, "blk.1.ffn_up.weight");
    gw_build(&w);
    expect_model_fail(&w, w.n, "missing tensor", "blk.1.ffn_up.weight", "missing");
    make_model(&w, 0, 0);
    gw_del_tensor(&w, "token_embd.weight");
    gw_build(&w);
    expect_model_fail(&w, w.n, "missing embedding", "token_embd.weight", "missing");
    make_model(&w, 0, 0);
    gw_del_kv(&w, "qwen2.block_count");
    gw_build(&w);
    expect_model_fail(&w, w.n, "missing key", "qwen2.block_count", "missing");
    make_model(&w, 0, 0);
    gw_del_kv(&w, "general.architecture");
    gw_build(&w);
    expect_model_fail(&w, w.n, "missing architecture", "general.architecture", "missing");
    make_model(&w, 0, 0);
    gw_kv *k = gw_find_kv(&w, "qwen2.embedding_length");
    k->type = GW_STR, k->s = "8";
    gw_build(&w);
    expect_model_fail(&w, w.n, "key of the wrong type", "qwen2.embedding_length", "expected an integer");
    make_model(&w, 0, 0);
    gw_find_kv(&w, "qwen2.attention.head_count_kv")->u = 3;
    gw_build(&w);
    expect_model_fail(&w, w.n, "heads not a multiple of kv heads", "head_count", NULL);
    make_model(&w, 0, 0);
    gw_find_kv(&w, "qwen2.block_count")->u = 0;
    gw_build(&w);
    expect_model_fail(&w, w.n, "zero layers", "qwen2.block_count", "out of range");
    make_model(&w, 0, 0);
    gw_find_kv(&w, "general.alignment")->u = 24;
    gw_build(&w);
    expect_model_fail(&w, w.n, "alignment 24", "general.alignment", "power of two");
    make_model(&w, 0, 0);
    gw_find_kv(&w, "general.alignment")->type = GW_STR;
    gw_find_kv(&w, "general.alignment")->s = "32";
    gw_build(&w);
    expect_model_fail(&w, w.n, "alignment as a string", "general.alignment", "uint32");
    make_model(&w, 0, 0);
    gw_kv_str(&w, "qwen2.rope.scaling.type", "yarn");
    gw_build(&w);
    expect_model_fail(&w, w.n, "rope scaling", "rope.scaling", "yarn");
    make_model(&w, 0, 0);
    gw_kv_u32(&w, "qwen2.attention.key_length", 5);
    gw_kv_u32(&w, "qwen2.attention.value_length", 5);
    gw_kv_u32(&w, "qwen2.rope.dimension_count", 5);
    gw_build(&w);
    expect_model_fail(&w, w.n, "odd head dim", "head dim 5", "even");
    make_model(&w, 0, 0);
    gw_find_kv(&w, "tokenizer.ggml.tokens")->arr_n = VOC - 1;
    gw_find_kv(&w, "tokenizer.ggml.token_type")->arr_n = VOC - 1;
    gw_build(&w);
    expect_model_fail(&w, w.n, "token count != embedding rows", "tokenizer.ggml.tokens", "token_embd.weight");
    make_model(&w, 0, 0);
    gw_find_kv(&w, "tokenizer.ggml.eos_token_id")->u = VOC;
    gw_build(&w);
    expect_model_fail(&w, w.n, "eos out of range", "tokenizer.ggml.eos_token_id", "out of range");
    make_model(&w, 0, 0);
    gw_find_kv(&w, "qwen2.rope.freq_base")->f = -1.0f;
    gw_build(&w);
    expect_model_fail(&w, w.n, "negative rope base", "qwen2.rope.freq_base", "out of range");

    /* tokenizer metadata */
    make_model(&w, 0, 0);
    gw_find_kv(&w, "tokenizer.ggml.model")->s = "llama";
    expect_tok_fail(&w, "tokenizer model llama", "tokenizer.ggml.model 'llama'");
    gw_find_kv(&w, "tokenizer.ggml.model")->s = "gpt2";
    gw_find_kv(&w, "tokenizer.ggml.pre")->s = "llama-bpe";
    expect_tok_fail(&w, "pre-tokenizer llama-bpe", "tokenizer.ggml.pre 'llama-bpe'");
    gw_find_kv(&w, "tokenizer.ggml.pre")->s = "qwen2";
    gw_del_kv(&w, "tokenizer.ggml.merges");
    expect_tok_fail(&w, "no merges", "tokenizer.ggml.merges");
    static const char *const bad_merges[] = {"a b", "a x"};
    gw_kv_strs(&w, "tokenizer.ggml.merges", bad_merges, 2);
    expect_tok_fail(&w, "merge of a missing token", "not in the vocabulary");
    static const char *const bad_merges2[] = {"a b c"};
    gw_find_kv(&w, "tokenizer.ggml.merges")->arr_s = bad_merges2;
    gw_find_kv(&w, "tokenizer.ggml.merges")->arr_n = 1;
    expect_tok_fail(&w, "merge with two spaces", "tokenizer.ggml.merges[0]");
    gw_find_kv(&w, "tokenizer.ggml.merges")->arr_s = MERGES;
    gw_find_kv(&w, "tokenizer.ggml.merges")->arr_n = 4;
    static const int32_t byte_types[VOC] = {6, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 4, 5, 5, 3};
    gw_find_kv(&w, "tokenizer.ggml.token_type")->arr_i = byte_types;
    expect_tok_fail(&w, "BYTE token type", "token_type[0]");
    gw_find_kv(&w, "tokenizer.ggml.token_type")->arr_i = TTYPES;
    gw_find_kv(&w, "tokenizer.ggml.token_type")->arr_n = 3;
    expect_tok_fail(&w, "types count mismatch", "token_type");
    gw_free(&w);
}

/* ----------------------------------------------------------- mutations */

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

static void mutate(uint8_t *m, size_t n, int edits) {
    for (int e = 0; e < edits; e++) {
        uint64_t r = next(), at = r % n;
        switch ((r >> 40) % 4) {
        case 0: m[at] ^= (uint8_t)(1u << ((r >> 9) & 7)); break;
        case 1: m[at] = (uint8_t)(r >> 16); break;
        case 2: m[at] = 0xFF; break;
        default: m[at] = 0; break;
        }
    }
}

static void check_mutations(void) {
    gw w = {0};
    make_model(&w, 0, 30);
    /* mutate mostly the header: the metadata and tensor infos */
    size_t hdr = w.pos_data;
    int accepted = 0, bad = 0;
    qw_err err;
    for (int it = 0; it < 20000; it++) {
        size_t sz = w.n - (it % 9 == 0 ? (size_t)(next() % 64) : 0);
        uint8_t *m = malloc(sz);
        memcpy(m, w.buf, sz);
        mutate(m, it % 3 ? hdr : sz, 1 + it % 4);
        gguf_file f;
        if (gguf_parse(&f, m, sz, "fuzz", &err) == 0) {
            accepted++;
            for (uint64_t i = 0; i < f.n_tensors; i++) {
                const gguf_tensor *t = &f.tensors[i];
                if (t->data < m + f.data_offset || t->nbytes > sz || t->data + t->nbytes > m + sz ||
                    (uint64_t)(t->data - m - f.data_offset) % f.alignment)
                    bad++;
            }
            for (uint64_t i = 0; i < f.n_kv; i++) {
                const gguf_kv *kv = &f.kvs[i];
                if (kv->type == GGUF_T_STRING && ((const uint8_t *)kv->str < m || kv->str_len > sz ||
                                                  (const uint8_t *)kv->str + kv->str_len > m + sz))
                    bad++;
                if (kv->type == GGUF_T_ARRAY && (kv->arr < m || kv->arr + kv->arr_bytes > m + sz)) bad++;
            }
            gguf_free(&f);
        }
        free(m);
    }
    CHECK(bad == 0, "%d accepted mutants break the invariants", bad);
    CHECK(accepted > 0 && accepted < 20000, "mutation run accepted %d of 20000", accepted);

    /* through the whole loaders: no crash, and a failure always says why */
    int ok = 0, quiet = 0;
    uint8_t *m = malloc(w.n);
    for (int it = 0; it < 300; it++) {
        memcpy(m, w.buf, w.n);
        mutate(m, hdr, 1 + it % 3);
        FILE *f = fopen(g_path, "wb");
        fwrite(m, 1, w.n, f);
        fclose(f);
        qw_model *mo = NULL;
        memset(&err, 0, sizeof err);
        if (model_load(&mo, g_path, &err) == 0) ok++, model_free(mo);
        else if (!err.msg[0]) quiet++;
        qw_tok *t = NULL;
        memset(&err, 0, sizeof err);
        if (tok_load(&t, g_path, &err) == 0) tok_free(t);
        else if (!err.msg[0]) quiet++;
    }
    free(m);
    CHECK(quiet == 0, "%d failures without a message", quiet);
    CHECK(ok < 300, "every model mutant loaded (%d)", ok);
    gw_free(&w);
}

/* llama-gguf-split's part names: "<prefix>-NNNNN-of-MMMMM.gguf", 1 <= N <= M. */
static void test_split_names(void) {
    static const struct {
        const char *path;
        int ok, prefix, no, count;
    } cases[] = {
        {"m-00001-of-00003.gguf", 1, 1, 1, 3},
        {"/x/qwen2.5-7b-q4_k_m-00002-of-00002.GGUF", 1, 20, 2, 2},
        {"-00001-of-00001.gguf", 0, 0, 0, 0},     /* no prefix */
        {"m-00000-of-00003.gguf", 0, 0, 0, 0},    /* parts count from 1 */
        {"m-00004-of-00003.gguf", 0, 0, 0, 0},
        {"m-0001-of-00003.gguf", 0, 0, 0, 0},
        {"m-00001_of-00003.gguf", 0, 0, 0, 0},
        {"m-00001-of-0000x.gguf", 0, 0, 0, 0},
        {"m-00001-of-00003.bin", 0, 0, 0, 0},
        {"model.gguf", 0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t pl = 0;
        int no = 0, count = 0;
        int ok = gguf_split_name(cases[i].path, &pl, &no, &count);
        CHECK(ok == cases[i].ok && (!ok || ((int)pl == cases[i].prefix && no == cases[i].no &&
                                            count == cases[i].count)),
              "split name %s: %d (prefix %zu, part %d of %d)", cases[i].path, ok, pl, no, count);
    }
}

int main(void) {
    test_split_names();
    snprintf(g_dir, sizeof g_dir, "/tmp/qwenc_gguf_XXXXXX");
    if (!mkdtemp(g_dir)) {
        CHECK(0, "mkdtemp");
        return test_summary();
    }
    snprintf(g_path, sizeof g_path, "%s/tiny.gguf", g_dir);
    check_valid();
    check_malformed();
    check_mutations();
    unlink(g_path);
    rmdir(g_dir);
    for (int i = 0; i < g_nd; i++) free(g_data[i]), free(g_half[i]);
    return test_summary();
}
