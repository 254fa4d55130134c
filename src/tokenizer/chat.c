/* chat.c - the Qwen2.5-Instruct chat template (ChatML) without tools.
 *
 * This is the Jinja template of Qwen/Qwen2.5-*-Instruct's
 * tokenizer_config.json, branch `not tools`, written out in C:
 *
 *   system turn: messages[0] if its role is "system", else the default
 *   for each message:
 *     user, assistant, or system not first -> <|im_start|>{role}\n{content}<|im_end|>\n
 *     tool -> grouped into one user turn of <tool_response> blocks
 *     (the first system message was already rendered; other roles: nothing)
 *   add_generation_prompt -> <|im_start|>assistant\n
 *
 * tests/tokenizer/test_tokenizer.c compares it with transformers'
 * apply_chat_template output stored by tools/make_tok_corpus.py.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int failed;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (n > SIZE_MAX - b->n - 1) {
        b->failed = 1;
        return;
    }
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n + 1) nc = nc > SIZE_MAX / 2 ? SIZE_MAX : nc * 2;
        char *np = realloc(b->p, nc);
        if (!np) {
            b->failed = 1;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_str(sbuf *b, const char *s) { sb_add(b, s ? s : "", s ? strlen(s) : 0); }

static int role_is(const qw_chat_msg *m, const char *r) { return m->role && !strcmp(m->role, r); }

int chat_render(const qw_chat_msg *msgs, size_t n_msgs, int add_generation_prompt, char **out, size_t *len,
                qw_err *err) {
    *out = NULL;
    *len = 0;
    if (n_msgs && !msgs) return qw_errf(err, "chat_render: NULL messages");
    sbuf b = {0};
    sb_str(&b, "<|im_start|>system\n");
    if (n_msgs && role_is(&msgs[0], "system")) sb_str(&b, msgs[0].content);
    else sb_str(&b, QW_DEFAULT_SYSTEM);
    sb_str(&b, "<|im_end|>\n");
    for (size_t i = 0; i < n_msgs; i++) {
        const qw_chat_msg *m = &msgs[i];
        if (role_is(m, "user") || role_is(m, "assistant") || (role_is(m, "system") && i > 0)) {
            sb_str(&b, "<|im_start|>");
            sb_str(&b, m->role);
            sb_str(&b, "\n");
            sb_str(&b, m->content);
            sb_str(&b, "<|im_end|>\n");
        } else if (role_is(m, "tool")) {
            if (i == 0 || !role_is(&msgs[i - 1], "tool")) sb_str(&b, "<|im_start|>user");
            sb_str(&b, "\n<tool_response>\n");
            sb_str(&b, m->content);
            sb_str(&b, "\n</tool_response>");
            if (i + 1 == n_msgs || !role_is(&msgs[i + 1], "tool")) sb_str(&b, "<|im_end|>\n");
        }
    }
    if (add_generation_prompt) sb_str(&b, "<|im_start|>assistant\n");
    if (b.failed) {
        free(b.p);
        return qw_errf(err, "chat_render: out of memory");
    }
    *out = b.p;
    *len = b.n;
    return 0;
}

int chat_encode(const qw_tok *t, const qw_chat_msg *msgs, size_t n_msgs, int add_generation_prompt,
                int32_t **ids, size_t *n, qw_err *err) {
    *ids = NULL;
    *n = 0;
    char *s;
    size_t len;
    if (chat_render(msgs, n_msgs, add_generation_prompt, &s, &len, err)) return -1;
    int rc = tok_encode(t, s, len, ids, n, err);
    free(s);
    return rc;
}
