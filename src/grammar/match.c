/* match.c - the per-request matcher and the token mask (qw_gmatch, grammar.h).
 *
 * State: a set of heads. A head is (DFA state, frame): the state says where
 * in the current rule we are, the frame chain says where to continue in the
 * callers once the rule ends (a frame is (return state, parent frame)).
 * Frames are immutable and shared between heads (a graph-structured stack,
 * as in llama.cpp's llama-grammar.cpp stacks but without copying them).
 * Heads are kept "byte-ready": every call a state may make before reading
 * a byte has been expanded, and every rule end popped (expand()).
 *
 * The mask walks the vocabulary trie (vocab.c) in preorder, one head set per
 * depth; a byte nobody accepts skips the node's whole subtree. Inside a
 * rule's DFA (a string's characters, a number's digits) one byte costs one
 * table lookup. Frames made while walking are rolled back per depth, so
 * the walk allocates nothing.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_internal.h"

#define MAX_FRAMES (1 << 17)
#define MAX_HEADS 512        /* heads at one position (an ambiguity bound) */
#define MAX_VISIT 1024
#define CACHE_N 4            /* masks remembered per matcher */
#define CACHE_KEY 128        /* heads + frames of a state that may be remembered */

/* A remembered mask: the matcher state it was computed in (heads, the
 * frames below them, the complete flag) and the result. Inside a JSON
 * string the state after every whole character is the same, so all the
 * tokens of a string after the first reuse its mask. */
typedef struct mask_cache {
    uint64_t hash;
    int n_heads, n_frames, complete, count, valid;
    int32_t key[CACHE_KEY * 2];
    uint32_t *mask;
} mask_cache;

typedef struct gframe {
    int32_t ret, parent;
} gframe;

typedef struct ghead {
    int32_t state, frame;
} ghead;

struct qw_gmatch {
    qw_grammar *g;
    const qw_gvocab *v;
    gframe *frames;      /* [MAX_FRAMES]: [0, n_frames) persistent, above: scratch */
    gframe *frames2;     /* compaction target */
    int32_t *remap;      /* [MAX_FRAMES] compaction map, -1 = unset */
    int n_frames, top;   /* top: next free scratch frame */
    ghead heads[MAX_HEADS];
    int n_heads;
    int complete, finished;
    ghead *hbuf;         /* mask walk: heads per depth */
    int hcap;
    int *lvl_start, *lvl_count, *lvl_top; /* [max_depth + 1] */
    ghead visit[MAX_VISIT];
    int n_visit;
    uint32_t *mask;      /* gmatch_apply's own mask */
    int overflow;
    mask_cache cache[CACHE_N];
    int cache_next;      /* round robin victim */
};

/* Expand (s, f) into byte-ready heads appended to out[*n] (cap max).
 * Sets *complete when the root rule can end here. */
static void expand(qw_gmatch *m, int32_t s, int32_t f, ghead *out, int *n, int max, int *complete,
                   int depth) {
    const qw_grammar *g = m->g;
    for (int i = 0; i < m->n_visit; i++)
        if (m->visit[i].state == s && m->visit[i].frame == f) return;
    if (m->n_visit >= MAX_VISIT || depth > 4096) {
        m->overflow = 1;
        return;
    }
    m->visit[m->n_visit++] = (ghead){s, f};
    if (g->has_bytes[s]) {
        if (*n >= max) {
            m->overflow = 1;
            return;
        }
        out[(*n)++] = (ghead){s, f};
    }
    for (int c = g->call0[s]; c < g->call0[s + 1]; c++) {
        if (m->top >= MAX_FRAMES) {
            m->overflow = 1;
            return;
        }
        int32_t nf = m->top++;
        m->frames[nf] = (gframe){g->calls[c].ret, f};
        expand(m, g->rule_start[g->calls[c].rule], nf, out, n, max, complete, depth + 1);
    }
    if (g->accept[s]) {
        if (f < 0)
            *complete = 1;
        else
            expand(m, m->frames[f].ret, m->frames[f].parent, out, n, max, complete, depth + 1);
    }
}

/* Heads after reading byte b from in[n_in]; returns their count (in out, cap max). */
static int step(qw_gmatch *m, const ghead *in, int n_in, int b, ghead *out, int max, int *complete) {
    const int32_t *next = m->g->next;
    int n = 0;
    *complete = 0;
    m->n_visit = 0;
    const uint8_t *simple = m->g->simple;
    for (int i = 0; i < n_in; i++) {
        int32_t t = next[(size_t)in[i].state * 256 + b];
        if (t < 0) continue;
        if (simple[t]) {
            /* nothing to expand: the head moves within its rule */
            int dup = 0;
            for (int k = 0; k < n; k++) dup |= out[k].state == t && out[k].frame == in[i].frame;
            if (dup) continue;
            if (n >= max) {
                m->overflow = 1;
                break;
            }
            out[n++] = (ghead){t, in[i].frame};
            /* keep expand()'s visited set consistent for later heads */
            if (m->n_visit < MAX_VISIT) m->visit[m->n_visit++] = (ghead){t, in[i].frame};
            continue;
        }
        expand(m, t, in[i].frame, out, &n, max, complete, 0);
    }
    return n;
}

/* Copy the frames the heads use to the bottom of the frame store. */
static void compact(qw_gmatch *m, ghead *h, int n) {
    int nn = 0;
    for (int i = 0; i < n; i++) {
        /* walk up to the first frame already copied, then copy down the path */
        int32_t path[256];
        int np = 0;
        int32_t f = h[i].frame;
        while (f >= 0 && m->remap[f] < 0) {
            if (np == 256) {
                /* deep stacks: copy iteratively without the path buffer */
                break;
            }
            path[np++] = f;
            f = m->frames[f].parent;
        }
        if (f >= 0 && m->remap[f] < 0) {
            /* deeper than 256: fall back to a slow but simple recursion-free pass */
            int32_t g0 = h[i].frame;
            while (g0 >= 0 && m->remap[g0] < 0) {
                int32_t g1 = g0;
                while (m->frames[g1].parent >= 0 && m->remap[m->frames[g1].parent] < 0) g1 = m->frames[g1].parent;
                int32_t p = m->frames[g1].parent;
                m->frames2[nn] = (gframe){m->frames[g1].ret, p < 0 ? -1 : m->remap[p]};
                m->remap[g1] = nn++;
            }
            np = 0;
        }
        while (np) {
            int32_t x = path[--np];
            int32_t p = m->frames[x].parent;
            m->frames2[nn] = (gframe){m->frames[x].ret, p < 0 ? -1 : m->remap[p]};
            m->remap[x] = nn++;
        }
    }
    for (int i = 0; i < n; i++)
        if (h[i].frame >= 0) h[i].frame = m->remap[h[i].frame];
    /* reset the map: every frame below top that got mapped */
    for (int i = 0; i < m->top; i++) m->remap[i] = -1;
    gframe *t = m->frames;
    m->frames = m->frames2;
    m->frames2 = t;
    m->n_frames = m->top = nn;
}

void gmatch_reset(qw_gmatch *m) {
    /* the cache stays: it is keyed by the state, which reset revisits */
    m->n_frames = m->top = 0;
    m->finished = 0;
    m->complete = 0;
    m->n_visit = 0;
    m->overflow = 0;
    int n = 0;
    expand(m, m->g->rule_start[m->g->root], -1, m->heads, &n, MAX_HEADS, &m->complete, 0);
    m->n_heads = n;
    compact(m, m->heads, n);
}

qw_gmatch *gmatch_create(const qw_grammar *g, const qw_gvocab *v) {
    qw_gmatch *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->g = grammar_retain((qw_grammar *)g);
    m->v = v;
    int depth = v->max_depth + 1;
    m->frames = malloc(MAX_FRAMES * sizeof(gframe));
    m->frames2 = malloc(MAX_FRAMES * sizeof(gframe));
    m->remap = malloc(MAX_FRAMES * sizeof(int32_t));
    m->hcap = MAX_HEADS * 8 + MAX_HEADS;
    m->hbuf = malloc((size_t)m->hcap * sizeof(ghead));
    m->lvl_start = malloc((size_t)depth * 3 * sizeof(int));
    m->mask = malloc(((size_t)v->n_vocab + 31) / 32 * sizeof(uint32_t));
    if (!m->frames || !m->frames2 || !m->remap || !m->hbuf || !m->lvl_start || !m->mask) {
        gmatch_free(m);
        return NULL;
    }
    m->lvl_count = m->lvl_start + depth;
    m->lvl_top = m->lvl_count + depth;
    for (int i = 0; i < MAX_FRAMES; i++) m->remap[i] = -1;
    for (int i = 0; i < CACHE_N; i++) {
        m->cache[i].mask = malloc(((size_t)v->n_vocab + 31) / 32 * sizeof(uint32_t));
        if (!m->cache[i].mask) {
            gmatch_free(m);
            return NULL;
        }
    }
    gmatch_reset(m);
    return m;
}

const qw_gvocab *gmatch_vocab(const qw_gmatch *m) { return m->v; }

void gmatch_free(qw_gmatch *m) {
    if (!m) return;
    grammar_release(m->g);
    free(m->frames);
    free(m->frames2);
    free(m->remap);
    free(m->hbuf);
    free(m->lvl_start);
    free(m->mask);
    for (int i = 0; i < CACHE_N; i++) free(m->cache[i].mask);
    free(m);
}

static int run_bytes(qw_gmatch *m, const char *bytes, size_t len, int commit) {
    if (m->finished) return 0;
    if (!len) return 1;
    /* ping-pong between two halves of hbuf; commit only at the end */
    ghead *a = m->hbuf, *b = m->hbuf + MAX_HEADS;
    const ghead *cur = m->heads;
    int n = m->n_heads, complete = m->complete;
    m->overflow = 0;
    for (size_t i = 0; i < len; i++) {
        if (!n) return (m->top = m->n_frames), 0;
        n = step(m, cur, n, (unsigned char)bytes[i], a, MAX_HEADS, &complete);
        if (m->overflow) return (m->top = m->n_frames), 0;
        cur = a;
        ghead *t = a;
        a = b;
        b = t;
    }
    if (!n && !complete) return (m->top = m->n_frames), 0;
    if (!commit) return (m->top = m->n_frames), 1;
    memcpy(m->heads, cur, (size_t)n * sizeof(ghead));
    m->n_heads = n;
    m->complete = complete;
    compact(m, m->heads, n);
    return 1;
}

int gmatch_accept_bytes(qw_gmatch *m, const char *bytes, size_t len) {
    return run_bytes(m, bytes, len, 1);
}

int gmatch_try_bytes(qw_gmatch *m, const char *bytes, size_t len) {
    return run_bytes(m, bytes, len, 0);
}

static int is_eos(const qw_gvocab *v, int32_t id) {
    for (int i = 0; i < v->n_eos; i++)
        if (v->eos[i] == id) return 1;
    return 0;
}

int gmatch_accept_token(qw_gmatch *m, int32_t id) {
    const qw_gvocab *v = m->v;
    if (m->finished || id < 0 || id >= v->n_vocab) return 0;
    if (is_eos(v, id)) {
        if (!m->complete) return 0;
        m->finished = 1;
        return 1;
    }
    uint32_t len = v->off[id + 1] - v->off[id];
    if (!len) return 0;
    return gmatch_accept_bytes(m, v->bytes + v->off[id], len);
}

int gmatch_is_complete(const qw_gmatch *m) { return !m->finished && m->complete; }

int gmatch_is_finished(const qw_gmatch *m) { return m->finished; }

static inline void set_bit(uint32_t *mask, int32_t id) { mask[id >> 5] |= 1u << (id & 31); }

/* The state as a flat key: heads, then frames (compacted, so equal states
 * give equal keys); 0 if too large to remember. */
static int state_key(const qw_gmatch *m, int32_t *key, uint64_t *hash) {
    int n = m->n_heads + m->n_frames;
    if (n > CACHE_KEY) return 0;
    int k = 0;
    for (int i = 0; i < m->n_heads; i++) key[k++] = m->heads[i].state, key[k++] = m->heads[i].frame;
    for (int i = 0; i < m->n_frames; i++) key[k++] = m->frames[i].ret, key[k++] = m->frames[i].parent;
    uint64_t h = 1469598103934665603ull ^ (uint64_t)(m->n_heads * 2 + m->complete);
    for (int i = 0; i < k; i++) h = (h ^ (uint32_t)key[i]) * 1099511628211ull;
    *hash = h;
    return 1;
}

static int fill_mask_walk(qw_gmatch *m, uint32_t *mask);

int gmatch_fill_mask(qw_gmatch *m, uint32_t *mask) {
    const qw_gvocab *v = m->v;
    size_t words = ((size_t)v->n_vocab + 31) / 32;
    if (m->finished) {
        memset(mask, 0, words * sizeof(uint32_t));
        return 0;
    }
    int32_t key[CACHE_KEY * 2];
    uint64_t h = 0;
    int cacheable = state_key(m, key, &h);
    if (cacheable) {
        for (int i = 0; i < CACHE_N; i++) {
            mask_cache *c = &m->cache[i];
            if (c->valid && c->hash == h && c->n_heads == m->n_heads && c->n_frames == m->n_frames &&
                c->complete == m->complete &&
                !memcmp(c->key, key, (size_t)(m->n_heads + m->n_frames) * 2 * sizeof(int32_t))) {
                memcpy(mask, c->mask, words * sizeof(uint32_t));
                return c->count;
            }
        }
    }
    int count = fill_mask_walk(m, mask);
    if (cacheable) {
        mask_cache *c = &m->cache[m->cache_next];
        m->cache_next = (m->cache_next + 1) % CACHE_N;
        c->valid = 1;
        c->hash = h;
        c->n_heads = m->n_heads;
        c->n_frames = m->n_frames;
        c->complete = m->complete;
        c->count = count;
        memcpy(c->key, key, (size_t)(m->n_heads + m->n_frames) * 2 * sizeof(int32_t));
        memcpy(c->mask, mask, words * sizeof(uint32_t));
    }
    return count;
}

/* The walk over the vocabulary trie. */
static int fill_mask_walk(qw_gmatch *m, uint32_t *mask) {
    const qw_gvocab *v = m->v;
    size_t words = ((size_t)v->n_vocab + 31) / 32;
    memset(mask, 0, words * sizeof(uint32_t));
    int allowed = 0;
    if (m->complete)
        for (int i = 0; i < v->n_eos; i++)
            if (v->eos[i] >= 0 && v->eos[i] < v->n_vocab) set_bit(mask, v->eos[i]);
    if (m->n_heads) {
        /* level 0: the current heads */
        memcpy(m->hbuf, m->heads, (size_t)m->n_heads * sizeof(ghead));
        m->lvl_start[0] = 0;
        m->lvl_count[0] = m->n_heads;
        m->lvl_top[0] = m->n_frames;
        const gtrie_node *nd = v->nodes;
        const int32_t *next = m->g->next;
        const uint8_t *simple = m->g->simple;
        int i = 0, n_nodes = v->n_nodes;
        while (i < n_nodes) {
            int d = nd[i].depth;
            int ps = m->lvl_start[d - 1], pc = m->lvl_count[d - 1];
            int os = ps + pc;
            m->top = m->lvl_top[d - 1];
            int room = m->hcap - os < MAX_HEADS ? m->hcap - os : MAX_HEADS;
            int complete = 0, cnt;
            int32_t t;
            if (pc == 1 && room > 0 && (t = next[(size_t)m->hbuf[ps].state * 256 + nd[i].byte]) >= 0 && simple[t]) {
                /* one head moving inside its rule (a string's characters): no step() */
                m->hbuf[os] = (ghead){t, m->hbuf[ps].frame};
                cnt = 1;
            } else {
                m->overflow = 0;
                cnt = room > 0 ? step(m, m->hbuf + ps, pc, nd[i].byte, m->hbuf + os, room, &complete) : 0;
                if (m->overflow) cnt = 0, complete = 0;
            }
            if (!cnt && !complete) {
                i = nd[i].skip;
                continue;
            }
            if (nd[i].tok >= 0) {
                set_bit(mask, nd[i].tok);
                if (nd[i].has_dup)
                    for (int32_t u = v->dup[nd[i].tok]; u >= 0; u = v->dup[u]) set_bit(mask, u);
            }
            if (!cnt) {
                i = nd[i].skip;
                continue;
            }
            m->lvl_start[d] = os;
            m->lvl_count[d] = cnt;
            m->lvl_top[d] = m->top;
            i++;
        }
        m->top = m->n_frames;
    }
    for (size_t w = 0; w < words; w++) allowed += __builtin_popcount(mask[w]);
    return allowed;
}

int gmatch_apply(qw_gmatch *m, float *logits) {
    int n = gmatch_fill_mask(m, m->mask);
    for (int i = 0; i < m->v->n_vocab; i++)
        if (!(m->mask[i >> 5] >> (i & 31) & 1)) logits[i] = -INFINITY;
    return n;
}
