/* fim.c - Qwen2.5-Coder fill-in-the-middle prompts (fim.h). */
#include "tokenizer/fim.h"

#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"

int fim_render(const fim_req *r, char **out, size_t *len, qw_err *err) {
    *out = NULL;
    *len = 0;
    strbuf b = {0};
    if (r->n_files) {
        sb_str(&b, "<|repo_name|>");
        sb_str(&b, r->repo_name ? r->repo_name : FIM_DEFAULT_REPO);
        sb_chr(&b, '\n');
        for (size_t i = 0; i < r->n_files; i++) {
            const char *text = r->files[i].text ? r->files[i].text : "";
            size_t tl = strlen(text);
            sb_str(&b, "<|file_sep|>");
            sb_str(&b, r->files[i].name ? r->files[i].name : "tmp");
            sb_chr(&b, '\n');
            sb_add(&b, text, tl);
            if (tl && text[tl - 1] != '\n') sb_chr(&b, '\n');
        }
        sb_str(&b, "<|file_sep|>");
        sb_str(&b, r->file_name ? r->file_name : FIM_DEFAULT_FILE);
        sb_chr(&b, '\n');
    }
    sb_str(&b, "<|fim_prefix|>");
    sb_str(&b, r->prefix);
    sb_str(&b, r->prompt);
    sb_str(&b, "<|fim_suffix|>");
    sb_str(&b, r->suffix);
    sb_str(&b, "<|fim_middle|>");
    if (b.failed) {
        free(b.p);
        return qw_errf(err, "fim_render: out of memory");
    }
    *out = b.p;
    *len = b.n;
    return 0;
}

int fim_supported(const qw_tok *t, int with_files, qw_err *err) {
    static const char *const need[] = {"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|repo_name|>",
                                       "<|file_sep|>"};
    for (int i = 0; i < (with_files ? 5 : 3); i++)
        if (tok_token_id(t, need[i]) < 0) {
            qw_errf(err, "the model's tokenizer has no %s token: it was not trained for fill-in-the-middle%s",
                    need[i], i >= 3 ? " with repository context" : "");
            return 0;
        }
    return 1;
}

int fim_encode(const qw_tok *t, const fim_req *r, int32_t **ids, size_t *n, qw_err *err) {
    *ids = NULL;
    *n = 0;
    if (!fim_supported(t, r->n_files > 0, err)) return -1;
    char *s;
    size_t len;
    if (fim_render(r, &s, &len, err)) return -1;
    int rc = tok_encode(t, s, len, ids, n, err);
    free(s);
    return rc;
}

int fim_stop_ids(const qw_tok *t, int32_t *ids, int cap) {
    static const char *const stops[] = {"<|endoftext|>", "<|im_end|>",   "<|fim_prefix|>", "<|fim_middle|>",
                                        "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>",  "<|file_sep|>"};
    int n = 0;
    for (size_t i = 0; i < sizeof stops / sizeof *stops && n < cap; i++) {
        int32_t id = tok_token_id(t, stops[i]);
        if (id >= 0) ids[n++] = id;
    }
    return n;
}
