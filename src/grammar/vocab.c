/* vocab.c - the vocabulary as a byte trie (qw_gvocab, grammar.h).
 *
 * Tokens are sorted by their decoded bytes and laid out as a trie in
 * preorder, so that the mask walk (match.c) is a forward scan that jumps
 * over a rejected prefix's whole subtree at once (the idea behind
 * XGrammar's and llama.cpp's prefix sharing: tokens that share a prefix
 * share the work of matching it).
 */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_internal.h"
#include "tokenizer/tokenizer.h"

static const qw_gvocab *sort_v;

static int cmp_tok(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    const qw_gvocab *v = sort_v;
    uint32_t lx = v->off[x + 1] - v->off[x], ly = v->off[y + 1] - v->off[y];
    int c = memcmp(v->bytes + v->off[x], v->bytes + v->off[y], lx < ly ? lx : ly);
    if (c) return c;
    if (lx != ly) return lx < ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* The bytes of token id (NULL / 0 = none), special tokens excluded. */
typedef const char *(*bytes_fn)(const void *ctx, int32_t id, size_t *len);

static const char *tok_bytes_fn(const void *ctx, int32_t id, size_t *len) {
    const qw_tok *t = ctx;
    *len = 0;
    const char *b = tok_token_bytes(t, id, len);
    if (!b || tok_is_special(t, id)) *len = 0;
    return b;
}

static const char *byte_fn(const void *ctx, int32_t id, size_t *len) {
    const char *all = ctx; /* [256]: all[b] = b */
    *len = id < 256 ? 1 : 0;
    return id < 256 ? all + id : NULL;
}

static qw_gvocab *build(bytes_fn fn, const void *ctx, int n_vocab, const int32_t *eos_ids, int n_eos,
                        qw_err *err) {
    qw_gvocab *v = calloc(1, sizeof *v);
    int32_t *order = NULL;
    if (!v || n_vocab <= 0) goto oom;
    v->n_vocab = n_vocab;
    v->off = calloc((size_t)n_vocab + 1, sizeof(uint32_t));
    v->dup = malloc((size_t)n_vocab * sizeof(int32_t));
    v->eos = malloc(((size_t)n_eos + 1) * sizeof(int32_t));
    order = malloc((size_t)n_vocab * sizeof(int32_t));
    if (!v->off || !v->dup || !v->eos || !order) goto oom;
    size_t total = 0;
    for (int i = 0; i < n_vocab; i++) {
        size_t len = 0;
        const char *b = fn(ctx, i, &len);
        /* special tokens (<|im_end|>, ...) never spell grammar text; nor do
         * tokens longer than the trie's depth limit */
        if (!b || len > 255) len = 0;
        total += len;
        if (total > 0xffffffffu) goto oom;
        v->off[i + 1] = (uint32_t)total;
    }
    v->bytes = malloc(total + 1);
    if (!v->bytes) goto oom;
    int n_tok = 0;
    for (int i = 0; i < n_vocab; i++) {
        v->dup[i] = -1;
        uint32_t len = v->off[i + 1] - v->off[i];
        if (!len) continue;
        size_t l2;
        memcpy(v->bytes + v->off[i], fn(ctx, i, &l2), len);
        order[n_tok++] = i;
    }
    sort_v = v; /* qsort has no context argument in C11; gvocab_create is called at load time */
    qsort(order, (size_t)n_tok, sizeof(int32_t), cmp_tok);
    /* nodes: at most total bytes */
    v->nodes = malloc((total + 1) * sizeof(gtrie_node));
    if (!v->nodes) goto oom;
    int open[256]; /* open[d] = node index at depth d on the current path */
    int n_open = 0, n = 0;
    const char *prev = NULL;
    uint32_t prev_len = 0;
    int32_t prev_tok = -1;
    for (int k = 0; k < n_tok; k++) {
        int32_t id = order[k];
        const char *b = v->bytes + v->off[id];
        uint32_t len = v->off[id + 1] - v->off[id];
        uint32_t lcp = 0;
        while (prev && lcp < len && lcp < prev_len && b[lcp] == prev[lcp]) lcp++;
        if (prev && lcp == len && len == prev_len) {
            /* same bytes as the previous token: chain it */
            v->dup[id] = v->dup[prev_tok];
            v->dup[prev_tok] = id;
            v->nodes[n - 1].has_dup = 1;
            continue;
        }
        while (n_open > (int)lcp) v->nodes[open[--n_open]].skip = n;
        for (uint32_t d = lcp; d < len; d++) {
            v->nodes[n] = (gtrie_node){.skip = -1, .tok = -1, .byte = (uint8_t)b[d], .depth = (uint8_t)(d + 1),
                                       .has_dup = 0};
            open[n_open++] = n++;
        }
        v->nodes[n - 1].tok = id;
        if ((int)len > v->max_depth) v->max_depth = (int)len;
        prev = b;
        prev_len = len;
        prev_tok = id;
    }
    while (n_open) v->nodes[open[--n_open]].skip = n;
    v->n_nodes = n;
    for (int i = 0; i < n_eos; i++) v->eos[i] = eos_ids[i];
    v->n_eos = n_eos;
    free(order);
    return v;
oom:
    free(order);
    gvocab_free(v);
    qw_errf(err, "gvocab_create: out of memory or bad vocabulary size %d", n_vocab);
    return NULL;
}

qw_gvocab *gvocab_create(const qw_tok *t, int n_vocab, const int32_t *eos_ids, int n_eos,
                         qw_err *err) {
    return build(tok_bytes_fn, t, n_vocab, eos_ids, n_eos, err);
}

qw_gvocab *gvocab_create_bytes(int n_vocab, const int32_t *eos_ids, int n_eos) {
    char all[256];
    for (int i = 0; i < 256; i++) all[i] = (char)i;
    return build(byte_fn, all, n_vocab, eos_ids, n_eos, NULL);
}

void gvocab_free(qw_gvocab *v) {
    if (!v) return;
    free(v->nodes);
    free(v->dup);
    free(v->eos);
    free(v->off);
    free(v->bytes);
    free(v);
}

int gvocab_n_vocab(const qw_gvocab *v) { return v->n_vocab; }
