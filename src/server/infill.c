/* infill.c - /infill and suffix requests as Qwen2.5-Coder FIM prompts (infill.h). */
#include "server/infill.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int present(const cJSON *j) { return j && !cJSON_IsNull(j); }

int infill_parse(const void *json, api_infill *in, api_error *e) {
    const cJSON *o = json;
    memset(in, 0, sizeof *in);
    if (api_get_str(o, "input_prefix", &in->fim.prefix, e) < 0 ||
        api_get_str(o, "input_suffix", &in->fim.suffix, e) < 0 || api_get_str(o, "prompt", &in->fim.prompt, e) < 0 ||
        api_get_str(o, "repo_name", &in->fim.repo_name, e) < 0 ||
        api_get_str(o, "filename", &in->fim.file_name, e) < 0)
        return -1;
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, "input_extra");
    if (!present(x)) return 0;
    if (!cJSON_IsArray(x))
        return api_fail(e, 400, "invalid_type", "input_extra", "'input_extra' must be a list of {filename, text}");
    int n = cJSON_GetArraySize(x);
    if (!n) return 0;
    in->files = calloc((size_t)n, sizeof *in->files);
    if (!in->files) return api_fail(e, 500, "out_of_memory", NULL, "out of memory");
    int i = 0;
    const cJSON *f;
    cJSON_ArrayForEach(f, x) {
        char param[64];
        snprintf(param, sizeof param, "input_extra[%d]", i);
        if (!cJSON_IsObject(f)) {
            infill_free(in);
            return api_fail(e, 400, "invalid_type", param, "'%s' must be an object {filename, text}", param);
        }
        static const char *const keys[] = {"filename", "text"};
        const char *v[2];
        for (int k = 0; k < 2; k++) {
            const cJSON *s = cJSON_GetObjectItemCaseSensitive(f, keys[k]);
            v[k] = NULL;
            if (!present(s)) continue;
            if (!cJSON_IsString(s)) {
                snprintf(param, sizeof param, "input_extra[%d].%s", i, keys[k]);
                infill_free(in);
                return api_fail(e, 400, "invalid_type", param, "'%s' must be a string", param);
            }
            v[k] = s->valuestring;
        }
        in->files[i].name = v[0];
        in->files[i].text = v[1];
        i++;
    }
    in->fim.files = in->files;
    in->fim.n_files = (size_t)i;
    return 0;
}

void infill_free(api_infill *in) {
    free(in->files);
    in->files = NULL;
    in->fim.files = NULL;
    in->fim.n_files = 0;
}

int infill_encode(const api_infill *in, const qw_tok *tok, int32_t **ids, size_t *n, api_error *e) {
    qw_err err;
    if (!fim_supported(tok, in->fim.n_files > 0, &err))
        return api_fail(e, 400, "unsupported_model", in->fim.n_files ? "input_extra" : NULL, "%s", err.msg);
    if (fim_encode(tok, &in->fim, ids, n, &err))
        return api_fail(e, 500, "tokenizer_error", NULL, "cannot encode the infill prompt: %s", err.msg);
    return 0;
}

static double round3(double x) { return isfinite(x) ? floor(x * 1000.0 + 0.5) / 1000.0 : 0.0; }

char *infill_json(const api_result *r) {
    cJSON *root = cJSON_CreateObject();
    char *tmp = malloc(r->text_len + 1);
    if (tmp) {
        memcpy(tmp, r->text, r->text_len);
        tmp[r->text_len] = 0;
    }
    cJSON_AddStringToObject(root, "content", tmp ? tmp : "");
    free(tmp);
    cJSON_AddNumberToObject(root, "tokens_evaluated", r->prompt_tokens);
    cJSON_AddNumberToObject(root, "tokens_predicted", r->gen_tokens);
    cJSON_AddBoolToObject(root, "stop", 1);
    cJSON_AddStringToObject(root, "finish_reason", r->finish ? r->finish : "stop");
    cJSON *t = cJSON_AddObjectToObject(root, "timings");
    cJSON_AddNumberToObject(t, "prefill_tps", round3(r->prefill_tps));
    cJSON_AddNumberToObject(t, "decode_tps", round3(r->decode_tps));
    cJSON_AddNumberToObject(t, "elapsed_s", round3(r->elapsed_s));
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

/* "data: " json "\n\n" (json taken). */
static char *sse_event(char *json) {
    if (!json) return NULL;
    size_t n = strlen(json);
    char *s = malloc(n + 9);
    if (s) {
        memcpy(s, "data: ", 6);
        memcpy(s + 6, json, n);
        memcpy(s + 6 + n, "\n\n", 3);
    }
    free(json);
    return s;
}

char *infill_sse_chunk(const char *text, size_t len) {
    char *tmp = malloc(len + 1);
    if (!tmp) return NULL;
    memcpy(tmp, text, len);
    tmp[len] = 0;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "content", tmp);
    cJSON_AddBoolToObject(root, "stop", 0);
    free(tmp);
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return sse_event(s);
}

char *infill_sse_final(const api_result *r) {
    api_result last = *r;
    last.text = "";
    last.text_len = 0;
    return sse_event(infill_json(&last));
}
