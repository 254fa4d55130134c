/* bpe.c - byte-pair encoding of one pre-token, as `tokenizers`' BPE model
 * (models/bpe/word.rs, merge_all) does it: start from one symbol per byte,
 * then repeatedly apply the applicable merge of lowest rank, the leftmost
 * one on ties, until none applies. Candidates sit in a binary min-heap keyed
 * by (rank, position) over a doubly linked list of symbols, with stale
 * entries skipped when popped, so a word of n bytes costs O(n log n) — a
 * 100 000-byte word is no worse than many short ones.
 *
 * Results for short words are kept in a direct-mapped cache shared by all
 * threads (striped mutexes); scratch memory belongs to the caller.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

typedef struct sym {
    int32_t id;
    int32_t prev, next; /* -1 = none */
    int32_t alive;
} sym;

typedef struct cand {
    int32_t rank, pos, id;  /* merge rank, left symbol, merged token */
    int32_t left, right;    /* the pair it was made for: stale if the symbols changed */
} cand;

int32_t tok_merge_find(const qw_tok *t, int32_t a, int32_t b, int32_t *id) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t mask = t->merge_cap - 1;
    size_t j = (size_t)((key * 0x9E3779B97F4A7C15ull) >> t->merge_shift);
    for (;;) {
        const tok_merge *m = &t->merges[j];
        if (m->key == key) {
            *id = m->id;
            return m->rank;
        }
        if (m->key == UINT64_MAX) return -1;
        j = (j + 1) & mask;
    }
}

int tok_ids_push(tok_ids *a, int32_t id) {
    if (a->n == a->cap) {
        size_t nc = a->cap ? a->cap * 2 : 256;
        if (nc > SIZE_MAX / sizeof *a->v) return -1;
        int32_t *nv = realloc(a->v, nc * sizeof *nv);
        if (!nv) return -1;
        a->v = nv;
        a->cap = nc;
    }
    a->v[a->n++] = id;
    return 0;
}

void bpe_scratch_free(bpe_scratch *sc) {
    free(sc->sym);
    free(sc->heap);
    memset(sc, 0, sizeof *sc);
}

static int scratch_reserve(bpe_scratch *sc, size_t n) {
    if (n <= sc->cap) return 0;
    size_t nc = sc->cap ? sc->cap : 64;
    while (nc < n) {
        if (nc > SIZE_MAX / 2 / sizeof(cand)) return -1;
        nc *= 2;
    }
    void *s = realloc(sc->sym, nc * sizeof(sym));
    if (!s) return -1;
    sc->sym = s;
    void *h = realloc(sc->heap, nc * sizeof(cand));
    if (!h) return -1;
    sc->heap = h;
    sc->cap = nc;
    return 0;
}

static inline int cand_less(const cand *a, const cand *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static inline void heap_push(cand *h, size_t *n, cand c) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(&c, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = c;
}

static inline cand heap_pop(cand *h, size_t *n) {
    cand top = h[0];
    cand last = h[--(*n)];
    size_t i = 0, m = *n;
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= m) break;
        size_t c = l;
        if (l + 1 < m && cand_less(&h[l + 1], &h[l])) c = l + 1;
        if (!cand_less(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (m) h[i] = last;
    return top;
}

/* The uncached BPE. */
static int bpe_run(const qw_tok *t, const unsigned char *w, size_t n, bpe_scratch *sc, tok_ids *out) {
    if (n > INT32_MAX - 1) return -1;
    /* The heap holds at most n-1 initial + one new candidate per merge (< n). */
    if (scratch_reserve(sc, 2 * n + 2)) return -1;
    sym *s = sc->sym;
    cand *h = sc->heap;
    size_t ns = 0, nh = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_id[w[i]];
        if (id < 0) continue; /* no token for this byte: dropped, as `tokenizers` does without unk */
        s[ns].id = id;
        s[ns].prev = (int32_t)ns - 1;
        s[ns].next = (int32_t)ns + 1;
        s[ns].alive = 1;
        ns++;
    }
    if (ns == 0) return 0;
    s[ns - 1].next = -1;
    for (size_t i = 0; i + 1 < ns; i++) {
        int32_t mid;
        int32_t r = tok_merge_find(t, s[i].id, s[i + 1].id, &mid);
        if (r >= 0) heap_push(h, &nh, (cand){r, (int32_t)i, mid, s[i].id, s[i + 1].id});
    }
    while (nh) {
        cand c = heap_pop(h, &nh);
        sym *l = &s[c.pos];
        if (!l->alive || l->next < 0) continue;
        sym *r = &s[l->next];
        int32_t mid;
        /* Stale if either side has changed since the candidate was made. */
        if (l->id != c.left || r->id != c.right) continue;
        l->id = c.id;
        r->alive = 0;
        l->next = r->next;
        if (r->next >= 0) s[r->next].prev = c.pos;
        if (l->prev >= 0) {
            int32_t rk = tok_merge_find(t, s[l->prev].id, l->id, &mid);
            if (rk >= 0) heap_push(h, &nh, (cand){rk, l->prev, mid, s[l->prev].id, l->id});
        }
        if (l->next >= 0) {
            int32_t rk = tok_merge_find(t, l->id, s[l->next].id, &mid);
            if (rk >= 0) heap_push(h, &nh, (cand){rk, c.pos, mid, l->id, s[l->next].id});
        }
    }
    for (int32_t i = 0; i >= 0; i = s[i].next)
        if (tok_ids_push(out, s[i].id)) return -1;
    return 0;
}

static uint64_t word_hash(const unsigned char *w, size_t n) {
    uint64_t h = 0x243F6A8885A308D3ull ^ n;
    for (size_t i = 0; i < n; i++) h = (h ^ w[i]) * 0x100000001B3ull;
    return h ^ (h >> 31);
}

int bpe_word(const qw_tok *t, const unsigned char *w, size_t n, bpe_scratch *sc, tok_ids *out) {
    if (n == 0) return 0;
    if (n == 1) {
        int32_t id = t->byte_id[w[0]];
        return id < 0 ? 0 : tok_ids_push(out, id);
    }
    if (n > TOK_CACHE_WMAX) return bpe_run(t, w, n, sc, out);

    uint64_t h = word_hash(w, n);
    size_t slot = (size_t)(h & (((size_t)1 << TOK_CACHE_BITS) - 1));
    pthread_mutex_t *mu = (pthread_mutex_t *)&t->cache_mu[slot % TOK_CACHE_LOCKS];
    tok_cache_slot *cs = &t->cache[slot];
    int32_t ids[TOK_CACHE_IMAX];
    int nid = -1;
    pthread_mutex_lock(mu);
    if (cs->hash == h && cs->wlen == n && !memcmp(cs->w, w, n)) {
        nid = cs->nid;
        memcpy(ids, cs->ids, (size_t)nid * sizeof *ids);
    }
    pthread_mutex_unlock(mu);
    if (nid >= 0) {
        for (int i = 0; i < nid; i++)
            if (tok_ids_push(out, ids[i])) return -1;
        return 0;
    }
    size_t before = out->n;
    if (bpe_run(t, w, n, sc, out)) return -1;
    size_t got = out->n - before;
    if (got <= TOK_CACHE_IMAX) {
        pthread_mutex_lock(mu);
        cs->hash = h;
        cs->wlen = (uint8_t)n;
        cs->nid = (uint8_t)got;
        memcpy(cs->w, w, n);
        memcpy(cs->ids, out->v + before, got * sizeof *ids);
        pthread_mutex_unlock(mu);
    }
    return 0;
}
