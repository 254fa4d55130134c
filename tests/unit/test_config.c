/* test_config.c - config.json / generation_config.json loading: the 4.x and
 * 5.x rope layouts, head_dim, EOS forms, and rejection of missing or bad
 * fields with a message naming the file and the field. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/model.h"
#include "test.h"

static char dir[64];

static void put(const char *name, const char *text) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (!text) {
        unlink(p);
        return;
    }
    FILE *f = fopen(p, "wb");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* The 0.5B config as transformers 4.43 wrote it, with one substitution. */
static const char *BASE =
    "{\"architectures\": [\"Qwen2ForCausalLM\"], \"bos_token_id\": 151643, \"eos_token_id\": 151645,"
    " \"hidden_act\": \"silu\", \"hidden_size\": 896, \"intermediate_size\": 4864,"
    " \"max_position_embeddings\": 32768, \"model_type\": \"qwen2\", \"num_attention_heads\": 14,"
    " \"num_hidden_layers\": 24, \"num_key_value_heads\": 2, \"rms_norm_eps\": 1e-06,"
    " \"rope_theta\": 1000000.0, \"sliding_window\": 32768, \"tie_word_embeddings\": true,"
    " \"use_sliding_window\": false, \"vocab_size\": 151936 %s}";

static char text[4096];
static const char *with(const char *extra) {
    snprintf(text, sizeof text, BASE, extra);
    return text;
}

/* Replace the first occurrence of `from` in BASE-with-nothing by `to`. */
static const char *edit(const char *from, const char *to) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, BASE, "");
    char *p = strstr(tmp, from);
    if (!p) return tmp[0] = 0, strcpy(text, "{}");
    *p = 0;
    snprintf(text, sizeof text, "%s%s%s", tmp, to, p + strlen(from));
    return text;
}

static void bad(const char *what, const char *cfg, const char *field) {
    put("config.json", cfg);
    qw_config c;
    qw_err err = {{0}};
    int rc = config_load(&c, dir, &err);
    CHECK(rc == -1, "%s: accepted", what);
    CHECK(strstr(err.msg, "config.json") != NULL, "%s: message lacks the file: %s", what, err.msg);
    CHECK(strstr(err.msg, field) != NULL, "%s: message lacks '%s': %s", what, field, err.msg);
}

int main(void) {
    strcpy(dir, "/tmp/qwenc_cfg_XXXXXX");
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return test_summary();
    }
    qw_config c;
    qw_err err = {{0}};

    /* 4.x: rope_theta at the top level; no generation_config.json */
    put("config.json", with(""));
    CHECK(config_load(&c, dir, &err) == 0, "4.x config: %s", err.msg);
    CHECK(c.hidden == 896 && c.inter == 4864 && c.n_layers == 24 && c.n_heads == 14 && c.n_kv_heads == 2 &&
              c.head_dim == 64 && c.vocab == 151936 && c.max_pos == 32768 && c.tie_embeddings == 1,
          "4.x numbers wrong");
    CHECK(c.rope_theta == 1000000.0f && c.rms_eps == 1e-6f, "rope_theta %g eps %g", c.rope_theta, c.rms_eps);
    CHECK(c.bos_id == 151643 && c.n_eos == 1 && c.eos_ids[0] == 151645, "eos from config.json");
    CHECK(c.gen_temperature == 0.0f && c.gen_top_p == 1.0f && c.gen_top_k == 0 && c.gen_repeat_penalty == 1.0f,
          "generation defaults without generation_config.json");
    CHECK(c.random_weights == 0, "random_weights default");

    /* 5.x: rope_parameters */
    put("config.json", edit("\"rope_theta\": 1000000.0,", "\"rope_parameters\": {\"rope_theta\": 500000.0, "
                                                           "\"rope_type\": \"default\"}, \"layer_types\": [],"));
    CHECK(config_load(&c, dir, &err) == 0, "5.x config: %s", err.msg);
    CHECK(c.rope_theta == 500000.0f, "5.x rope_theta %g", c.rope_theta);

    /* head_dim given (not hidden / heads) */
    put("config.json", with(", \"head_dim\": 128"));
    CHECK(config_load(&c, dir, &err) == 0 && c.head_dim == 128, "head_dim given: %s", err.msg);
    put("config.json", with(", \"head_dim\": null"));
    CHECK(config_load(&c, dir, &err) == 0 && c.head_dim == 64, "head_dim null: %s", err.msg);

    /* untied, GQA absent (= MHA), random weights flag */
    put("config.json", edit("\"num_key_value_heads\": 2,", "\"qwenc_random_weights\": true,"));
    CHECK(config_load(&c, dir, &err) == 0 && c.n_kv_heads == 14 && c.random_weights == 1, "no kv heads: %s",
          err.msg);

    /* generation_config.json: eos list, sampling values */
    put("config.json", with(""));
    put("generation_config.json",
        "{\"bos_token_id\": 151643, \"do_sample\": true, \"eos_token_id\": [151645, 151643],"
        " \"repetition_penalty\": 1.1, \"temperature\": 0.7, \"top_k\": 20, \"top_p\": 0.8}");
    CHECK(config_load(&c, dir, &err) == 0, "generation config: %s", err.msg);
    CHECK(c.n_eos == 2 && c.eos_ids[0] == 151645 && c.eos_ids[1] == 151643, "eos list");
    CHECK(c.gen_temperature == 0.7f && c.gen_top_k == 20 && c.gen_top_p == 0.8f && c.gen_repeat_penalty == 1.1f,
          "sampling defaults");
    put("generation_config.json", "{\"eos_token_id\": 7, \"temperature\": 0.7}");
    CHECK(config_load(&c, dir, &err) == 0 && c.n_eos == 1 && c.eos_ids[0] == 7 && c.gen_temperature == 0.0f,
          "without do_sample transformers decodes greedily: %s", err.msg);
    put("generation_config.json", "{\"eos_token_id\": [1, \"x\"]}");
    CHECK(config_load(&c, dir, &err) == -1 && strstr(err.msg, "generation_config.json") &&
              strstr(err.msg, "eos_token_id"),
          "bad eos list: %s", err.msg);
    put("generation_config.json", "{\"top_p\": 3}");
    CHECK(config_load(&c, dir, &err) == -1 && strstr(err.msg, "top_p"), "bad top_p: %s", err.msg);
    put("generation_config.json", "not json");
    CHECK(config_load(&c, dir, &err) == -1 && strstr(err.msg, "generation_config.json"), "bad json: %s", err.msg);
    put("generation_config.json", NULL);

    /* missing and bad fields */
    bad("missing hidden_size", edit("\"hidden_size\": 896,", ""), "hidden_size");
    bad("missing vocab_size", edit(", \"vocab_size\": 151936", ""), "vocab_size");
    bad("missing layers", edit("\"num_hidden_layers\": 24,", ""), "num_hidden_layers");
    bad("zero hidden", edit("\"hidden_size\": 896", "\"hidden_size\": 0"), "hidden_size");
    bad("negative layers", edit("\"num_hidden_layers\": 24", "\"num_hidden_layers\": -1"), "num_hidden_layers");
    bad("string heads", edit("\"num_attention_heads\": 14", "\"num_attention_heads\": \"14\""), "num_attention_heads");
    bad("fractional inter", edit("\"intermediate_size\": 4864", "\"intermediate_size\": 48.5"), "intermediate_size");
    bad("heads not divisible by kv", edit("\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3"),
        "num_key_value_heads");
    bad("hidden not divisible by heads", edit("\"hidden_size\": 896", "\"hidden_size\": 900"), "num_attention_heads");
    bad("odd head_dim", with(", \"head_dim\": 63"), "head_dim");
    bad("huge hidden", edit("\"hidden_size\": 896", "\"hidden_size\": 1e300"), "hidden_size");
    bad("bad eps", edit("\"rms_norm_eps\": 1e-06", "\"rms_norm_eps\": -1"), "rms_norm_eps");
    bad("bad theta", edit("\"rope_theta\": 1000000.0", "\"rope_theta\": \"big\""), "rope_theta");
    bad("wrong model_type", edit("\"model_type\": \"qwen2\"", "\"model_type\": \"llama\""), "model_type");
    bad("missing model_type", edit("\"model_type\": \"qwen2\",", ""), "model_type");
    bad("wrong architecture", edit("Qwen2ForCausalLM", "LlamaForCausalLM"), "architectures");
    bad("sliding window", edit("\"use_sliding_window\": false", "\"use_sliding_window\": true"), "use_sliding_window");
    bad("rope scaling", with(", \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4.0}"), "rope_scaling");
    bad("rope type", edit("\"rope_theta\": 1000000.0,", "\"rope_parameters\": {\"rope_theta\": 1.0, "
                                                        "\"rope_type\": \"yarn\"},"),
        "rope_type");
    bad("sliding layer", with(", \"layer_types\": [\"full_attention\", \"sliding_attention\"]"), "layer_types");
    bad("activation", edit("\"silu\"", "\"gelu\""), "hidden_act");
    bad("tie not bool", edit("\"tie_word_embeddings\": true", "\"tie_word_embeddings\": 1"), "tie_word_embeddings");
    bad("eos outside vocab", edit("\"eos_token_id\": 151645", "\"eos_token_id\": 999999"), "eos_token_id");
    bad("not json", "{\"hidden_size\": ", "not valid JSON");
    bad("not an object", "[]", "not a JSON object");
    put("config.json", NULL);
    CHECK(config_load(&c, dir, &err) == -1 && strstr(err.msg, "config.json"), "missing file: %s", err.msg);

    rmdir(dir);
    return test_summary();
}
