/* test_synth.c - synth_write() (src/synth): a random-weight folder that the
 * project's own safetensors parser and model loader accept, with every
 * Qwen2ForCausalLM tensor, the requested dtype, the requested spread, the
 * same bytes for the same seed, and errors that name the file and field. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/safetensors.h"
#include "model/model.h"
#include "synth/synth.h"
#include "test.h"

static const char *TINY =
    "{\"model_type\": \"qwen2\", \"hidden_size\": 64, \"intermediate_size\": 96, \"num_hidden_layers\": 2,\n"
    " \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"vocab_size\": 1000,\n"
    " \"max_position_embeddings\": 256, \"rms_norm_eps\": 1e-6, \"rope_theta\": 10000.0,\n"
    " \"tie_word_embeddings\": false, \"eos_token_id\": 7}\n";

static char g_root[] = "/tmp/qwenc_test_synth_XXXXXX";

static char *tmp_path(const char *name) {
    static char buf[4][512];
    static int k;
    char *p = buf[k++ & 3];
    snprintf(p, 512, "%s/%s", g_root, name);
    return p;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static float bf16(uint16_t h) {
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static float half(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    float v = e == 0 ? ldexpf((float)m, -24) : ldexpf((float)(m | 1024), e - 25);
    return (h & 0x8000) ? -v : v;
}

static void moments(const st_tensor *t, double *mean, double *sd) {
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < t->numel; i++) {
        double v;
        if (t->qdtype == QW_F32) { float f; memcpy(&f, t->data + 4 * i, 4); v = f; }
        else {
            uint16_t h;
            memcpy(&h, t->data + 2 * i, 2);
            v = t->qdtype == QW_BF16 ? bf16(h) : half(h);
        }
        s += v;
        s2 += v * v;
    }
    *mean = s / (double)t->numel;
    *sd = sqrt(s2 / (double)t->numel - *mean * *mean);
}

static long file_bytes(const char *p, char **out) {
    FILE *f = fopen(p, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *out = malloc((size_t)n);
    if (*out && fread(*out, 1, (size_t)n, f) != (size_t)n) n = -1;
    fclose(f);
    return n;
}

int main(void) {
    qw_err e;
    if (!mkdtemp(g_root)) {
        perror("mkdtemp");
        return 1;
    }
    write_text(tmp_path("tiny.json"), TINY);
    char tiny_path[512], bad_path[512];
    snprintf(tiny_path, sizeof tiny_path, "%s", tmp_path("tiny.json"));
    snprintf(bad_path, sizeof bad_path, "%s", tmp_path("bad.json"));

    const qw_dtype dts[] = {QW_BF16, QW_F16, QW_F32};
    const char *names[] = {"bf16", "f16", "f32"};
    for (int k = 0; k < 3; k++) {
        synth_opts o;
        synth_opts_default(&o);
        o.config_path = tiny_path;
        o.dtype = dts[k];
        o.quiet = 1;
        o.seed = 11;
        const char *dir = tmp_path(names[k]);
        CHECK(synth_write(dir, &o, &e) == 0, "%s: %s", names[k], e.msg);
        st_set s;
        if (st_open_dir(&s, dir, &e) != 0) {
            CHECK(0, "st_open_dir %s: %s", dir, e.msg);
            continue;
        }
        int n = 0;
        for (int f = 0; f < s.n_files; f++) n += s.files[f].n;
        CHECK(n == 1 + 2 * 12 + 1 + 1, "%s: %d tensors", names[k], n);
        const st_tensor *t = st_set_find(&s, "lm_head.weight", NULL);
        CHECK(t && t->shape[0] == 1000 && t->shape[1] == 64 && t->qdtype == (int)dts[k], "lm_head");
        t = st_set_find(&s, "model.layers.1.self_attn.k_proj.weight", NULL);
        CHECK(t && t->shape[0] == 32 && t->shape[1] == 64, "k_proj shape");
        t = st_set_find(&s, "model.layers.0.self_attn.v_proj.bias", NULL);
        CHECK(t && t->n_dims == 1 && t->shape[0] == 32, "v bias");
        t = st_set_find(&s, "model.embed_tokens.weight", NULL);
        double m, sd;
        if (t) {
            moments(t, &m, &sd);
            CHECK(fabs(m) < 0.001 && fabs(sd - 0.02) < 0.001, "%s embed mean %g sd %g", names[k], m, sd);
        }
        t = st_set_find(&s, "model.layers.1.post_attention_layernorm.weight", NULL);
        if (t) {
            moments(t, &m, &sd);
            CHECK(fabs(m - 1) < 0.01 && sd < 0.02, "%s norm mean %g sd %g", names[k], m, sd);
        }
        st_close(&s);

        qw_model *model = NULL;
        CHECK(model_load(&model, dir, &e) == 0, "%s: model_load: %s", names[k], e.msg);
        if (model) {
            CHECK(model->cfg.random_weights == 1, "random_weights flag");
            /* Qwen's EOS ids are outside this vocabulary: the config's own. */
            CHECK(model->cfg.n_eos == 1 && model->cfg.eos_ids[0] == 7, "eos from generation_config");
            CHECK(!model->cfg.tie_embeddings && model->lm_head.data != model->embed.data, "untied");
            model_free(model);
        }
    }

    /* Same seed: same bytes; other seed: other bytes. */
    char *a = NULL, *b = NULL;
    synth_opts o;
    synth_opts_default(&o);
    o.config_path = tiny_path;
    o.quiet = 1;
    o.seed = 11;
    CHECK(synth_write(tmp_path("again"), &o, &e) == 0, "%s", e.msg);
    long na = file_bytes(tmp_path("bf16/model.safetensors"), &a);
    long nb = file_bytes(tmp_path("again/model.safetensors"), &b);
    CHECK(na > 0 && na == nb && !memcmp(a, b, (size_t)na), "same seed, different bytes");
    free(b);
    o.seed = 12;
    CHECK(synth_write(tmp_path("again"), &o, &e) == 0, "%s", e.msg);
    nb = file_bytes(tmp_path("again/model.safetensors"), &b);
    CHECK(na == nb && memcmp(a, b, (size_t)na) != 0, "other seed, same bytes");
    free(a);
    free(b);

    /* --scale: the spread follows. */
    o.scale = 0.5f;
    CHECK(synth_write(tmp_path("wide"), &o, &e) == 0, "%s", e.msg);
    st_set s;
    if (st_open_dir(&s, tmp_path("wide"), &e) == 0) {
        const st_tensor *t = st_find(&s.files[0], "model.layers.0.mlp.up_proj.weight");
        double m, sd;
        if (t) {
            moments(t, &m, &sd);
            CHECK(fabs(sd - 0.5) < 0.02, "scale 0.5: sd %g", sd);
        }
        st_close(&s);
    } else
        CHECK(0, "%s", e.msg);

    /* Bad configs: the message names the file and the field. */
    struct { const char *text, *word; } bad[] = {
        {"{\"hidden_size\": 64}", "intermediate_size"},
        {"{\"hidden_size\": -3, \"intermediate_size\": 8}", "hidden_size"},
        {"{\"hidden_size\": 64, \"intermediate_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 5,"
         " \"vocab_size\": 10}", "num_attention_heads"},
        {"{\"hidden_size\": 64, \"intermediate_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 4,"
         " \"vocab_size\": 10, \"tie_word_embeddings\": 3}", "tie_word_embeddings"},
        {"{\"hidden_size\": 6.5, \"intermediate_size\": 8}", "hidden_size"},
        {"{\"hidden_size\": 1048576, \"intermediate_size\": 1048576, \"num_hidden_layers\": 4096,"
         " \"num_attention_heads\": 1, \"vocab_size\": 16777216}", "GB"},
        {"not json", "JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        write_text(bad_path, bad[i].text);
        o.config_path = bad_path;
        e.msg[0] = 0;
        CHECK(synth_write(tmp_path("bad"), &o, &e) == -1 && strstr(e.msg, "bad.json") && strstr(e.msg, bad[i].word),
              "config %zu: '%s'", i, e.msg);
    }
    CHECK(access(tmp_path("bad/model.safetensors"), F_OK) != 0, "a model was written for a bad config");
    o.config_path = tmp_path("missing.json");
    CHECK(synth_write(tmp_path("bad"), &o, &e) == -1 && strstr(e.msg, "missing.json"), "%s", e.msg);

    /* Tokenizer copy. */
    char mk[600];
    snprintf(mk, sizeof mk, "mkdir -p '%s' && echo '{}' > '%s/tokenizer.json' && echo x > '%s/merges.txt'",
             tmp_path("tok"), tmp_path("tok"), tmp_path("tok"));
    CHECK(system(mk) == 0, "mkdir");
    CHECK(synth_copy_tokenizer(tmp_path("tok"), tmp_path("bf16"), &e) == 2, "%s", e.msg);
    CHECK(access(tmp_path("bf16/merges.txt"), R_OK) == 0, "merges.txt copied");
    CHECK(synth_copy_tokenizer(tmp_path("nope"), tmp_path("bf16"), &e) == -1 && strstr(e.msg, "tokenizer.json"),
          "%s", e.msg);

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
    CHECK(system(cmd) == 0, "cleanup");
    return test_summary();
}
