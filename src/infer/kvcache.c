/* kvcache.c - pages, slot tables and the prefix cache (see kvcache.h).
 *
 * Every page has an id (an index into kv->pg, which grows by doubling; code
 * never keeps a kv_page pointer across a call that may allocate). A page
 * is in one state:
 *   FREE     on the free list, with or without memory (up to warm_max keep
 *            theirs, so a busy server does not go back to malloc per page);
 *   PRIVATE  held by one slot, not in the hash table;
 *   PENDING  in the hash table, being computed by `writer` (-1: the writer
 *            went away; a waiter takes it over);
 *   READY    in the hash table, complete and never written again; when no
 *            slot holds it, it waits in the LRU list (the prefix cache).
 */
#include "infer/kvcache.h"

#include <stdlib.h>
#include <string.h>

enum { PG_FREE, PG_PRIVATE, PG_PENDING, PG_READY };

typedef struct kv_page {
    float *data;      /* kv_bytes of K and V (floats or 16-bit), then page_rows token ids; NULL: none */
    uint64_t hash, parent;
    int refs;         /* slot tables holding the page */
    int writer;       /* PENDING: the slot computing it, -1 = nobody */
    int state;
    int32_t hnext;    /* next id in the hash bucket */
    int32_t prev, next; /* LRU neighbours (idle READY), or next free id */
} kv_page;

struct qw_kv {
    int n_slots, n_ctx, page_rows, shift, per_slot;
    int64_t kv_bytes;    /* K and V of a page: page_elems elements of elem_bytes, rounded up to 8 */
    int64_t page_bytes;  /* K and V and token ids */
    int32_t *tab_id;     /* [n_slots][per_slot] page ids, -1 = none */
    float **tab_ptr;     /* [n_slots][per_slot] their data */
    int *adv;            /* [n_slots] pages below this were made READY by kv_slot_advance */
    kv_page *pg;
    int32_t n_pg, cap_pg;
    int32_t free_head;
    int32_t *bucket;     /* [n_bucket] first id, -1 = empty */
    int32_t n_bucket;    /* a power of two, >= 2 cap_pg */
    int32_t lru_head, lru_tail;
    int64_t n_used, n_cached, n_free_data, n_data;
    int64_t budget, warm_max;
    uint64_t cow, evictions;
};

static int32_t *page_toks(const qw_kv *kv, int32_t id) {
    return (int32_t *)(void *)((char *)kv->pg[id].data + kv->kv_bytes);
}

/* splitmix64's finaliser: every input bit moves every output bit. */
static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

uint64_t kv_page_hash(uint64_t parent, const int32_t *toks, int n) {
    uint64_t h = mix64(parent ^ 0x9e3779b97f4a7c15ULL);
    for (int i = 0; i < n; i++) h = mix64(h ^ (uint32_t)toks[i] ^ ((uint64_t)(i + 1) << 32));
    return h;
}

qw_kv *kv_create(int n_slots, int n_ctx, int page_rows, int64_t page_elems, int elem_bytes, qw_err *err) {
    if (n_slots < 1 || n_ctx < 1 || page_rows < 1 || (page_rows & (page_rows - 1)) || page_elems < 1 ||
        (elem_bytes != 2 && elem_bytes != 4)) {
        qw_errf(err, "kv_create: %d slots, context %d, pages of %d rows (a power of two) and %lld elements of %d bytes",
                n_slots, n_ctx, page_rows, (long long)page_elems, elem_bytes);
        return NULL;
    }
    qw_kv *kv = calloc(1, sizeof *kv);
    if (!kv) goto oom;
    kv->n_slots = n_slots;
    kv->n_ctx = n_ctx;
    kv->page_rows = page_rows;
    while ((1 << kv->shift) < page_rows) kv->shift++;
    kv->per_slot = (n_ctx + page_rows - 1) / page_rows;
    kv->kv_bytes = (page_elems * elem_bytes + 7) / 8 * 8; /* the token ids after it stay aligned */
    kv->page_bytes = kv->kv_bytes + (int64_t)page_rows * (int64_t)sizeof(int32_t);
    kv->free_head = kv->lru_head = kv->lru_tail = -1;
    kv->warm_max = n_slots;
    size_t cells = (size_t)n_slots * (size_t)kv->per_slot;
    kv->tab_id = malloc(cells * sizeof(int32_t));
    kv->tab_ptr = calloc(cells, sizeof(float *));
    kv->adv = calloc((size_t)n_slots, sizeof(int));
    if (!kv->tab_id || !kv->tab_ptr || !kv->adv) goto oom;
    for (size_t i = 0; i < cells; i++) kv->tab_id[i] = -1;
    return kv;
oom:
    kv_free(kv);
    qw_errf(err, "kv_create: out of memory");
    return NULL;
}

void kv_free(qw_kv *kv) {
    if (!kv) return;
    for (int32_t i = 0; i < kv->n_pg; i++) free(kv->pg[i].data);
    free(kv->pg);
    free(kv->bucket);
    free(kv->tab_id);
    free(kv->tab_ptr);
    free(kv->adv);
    free(kv);
}

int kv_page_rows(const qw_kv *kv) { return kv->page_rows; }
int kv_page_shift(const qw_kv *kv) { return kv->shift; }
int64_t kv_cache_budget(const qw_kv *kv) { return kv->budget; }

const float *const *kv_slot_pages(const qw_kv *kv, int slot) {
    return (const float *const *)kv->tab_ptr + (int64_t)slot * kv->per_slot;
}

static int32_t *tab(qw_kv *kv, int slot) { return kv->tab_id + (int64_t)slot * kv->per_slot; }

static void tab_set(qw_kv *kv, int slot, int i, int32_t id) {
    tab(kv, slot)[i] = id;
    kv->tab_ptr[(int64_t)slot * kv->per_slot + i] = id >= 0 ? kv->pg[id].data : NULL;
}

/* ---- hash table and LRU ------------------------------------------------ */

static int32_t *bucket_of(qw_kv *kv, uint64_t h) { return &kv->bucket[h & (uint64_t)(kv->n_bucket - 1)]; }

static void hash_insert(qw_kv *kv, int32_t id) {
    int32_t *b = bucket_of(kv, kv->pg[id].hash);
    kv->pg[id].hnext = *b;
    *b = id;
}

static void hash_remove(qw_kv *kv, int32_t id) {
    for (int32_t *pp = bucket_of(kv, kv->pg[id].hash); *pp >= 0; pp = &kv->pg[*pp].hnext)
        if (*pp == id) {
            *pp = kv->pg[id].hnext;
            return;
        }
}

/* The registered page for (hash, parent, tokens), or -1. */
static int32_t hash_find(qw_kv *kv, uint64_t h, uint64_t parent, const int32_t *toks) {
    if (!kv->bucket) return -1;
    for (int32_t id = *bucket_of(kv, h); id >= 0; id = kv->pg[id].hnext)
        if (kv->pg[id].hash == h && kv->pg[id].parent == parent &&
            !memcmp(page_toks(kv, id), toks, (size_t)kv->page_rows * sizeof(int32_t)))
            return id;
    return -1;
}

static void lru_remove(qw_kv *kv, int32_t id) {
    kv_page *p = &kv->pg[id];
    if (p->prev >= 0) kv->pg[p->prev].next = p->next;
    else kv->lru_head = p->next;
    if (p->next >= 0) kv->pg[p->next].prev = p->prev;
    else kv->lru_tail = p->prev;
    p->prev = p->next = -1;
    kv->n_cached--;
}

static void lru_push(qw_kv *kv, int32_t id) {
    kv_page *p = &kv->pg[id];
    p->prev = kv->lru_tail;
    p->next = -1;
    if (kv->lru_tail >= 0) kv->pg[kv->lru_tail].next = id;
    else kv->lru_head = id;
    kv->lru_tail = id;
    kv->n_cached++;
}

/* ---- page life --------------------------------------------------------- */

/* More page ids (and a hash table twice their number). 0 or -1. */
static int grow(qw_kv *kv) {
    int32_t cap = kv->cap_pg ? kv->cap_pg * 2 : 64;
    kv_page *pg = realloc(kv->pg, (size_t)cap * sizeof *pg);
    if (!pg) return -1;
    kv->pg = pg;
    int32_t nb = kv->n_bucket ? kv->n_bucket : 128;
    while (nb < 2 * cap) nb *= 2;
    if (nb != kv->n_bucket) {
        int32_t *b = malloc((size_t)nb * sizeof(int32_t));
        if (!b) return -1;
        for (int32_t i = 0; i < nb; i++) b[i] = -1;
        free(kv->bucket);
        kv->bucket = b;
        kv->n_bucket = nb;
        for (int32_t id = 0; id < kv->n_pg; id++)
            if (kv->pg[id].state == PG_PENDING || kv->pg[id].state == PG_READY) hash_insert(kv, id);
    }
    kv->cap_pg = cap;
    return 0;
}

/* A page with memory, PRIVATE with no holder yet; -1 when out of memory. */
static int32_t page_new(qw_kv *kv) {
    int32_t id = kv->free_head;
    if (id >= 0) {
        kv->free_head = kv->pg[id].next;
    } else {
        if (kv->n_pg == kv->cap_pg && grow(kv)) return -1;
        id = kv->n_pg++;
        memset(&kv->pg[id], 0, sizeof kv->pg[id]);
    }
    kv_page *p = &kv->pg[id];
    if (p->data) {
        kv->n_free_data--;
    } else {
        void *d = NULL;
        if (posix_memalign(&d, 64, (size_t)kv->page_bytes) != 0) {
            p->state = PG_FREE;
            p->next = kv->free_head;
            kv->free_head = id;
            return -1;
        }
        p->data = d;
        kv->n_data++;
    }
    p->state = PG_PRIVATE;
    p->refs = 0;
    p->writer = -1;
    p->prev = p->next = p->hnext = -1;
    return id;
}

/* Back to the free list (out of the hash table if it was in it). */
static void page_drop(qw_kv *kv, int32_t id) {
    kv_page *p = &kv->pg[id];
    if (p->state == PG_PENDING || p->state == PG_READY) hash_remove(kv, id);
    p->state = PG_FREE;
    if (kv->n_free_data < kv->warm_max) {
        kv->n_free_data++;
    } else {
        free(p->data);
        p->data = NULL;
        kv->n_data--;
    }
    p->next = kv->free_head;
    kv->free_head = id;
}

static void evict(qw_kv *kv) {
    while (kv->lru_head >= 0 && kv->n_cached * kv->page_bytes > kv->budget) {
        int32_t id = kv->lru_head;
        lru_remove(kv, id);
        page_drop(kv, id);
        kv->evictions++;
    }
}

static void page_ref(qw_kv *kv, int32_t id) {
    kv_page *p = &kv->pg[id];
    if (p->refs == 0) {
        if (p->state == PG_READY && (p->prev >= 0 || kv->lru_head == id)) lru_remove(kv, id);
        kv->n_used++;
    }
    p->refs++;
}

static void page_unref(qw_kv *kv, int32_t id) {
    kv_page *p = &kv->pg[id];
    if (--p->refs > 0) return;
    kv->n_used--;
    if (p->state == PG_READY && kv->budget > 0) {
        lru_push(kv, id);
        evict(kv);
    } else {
        page_drop(kv, id);
    }
}

void kv_set_cache_budget(qw_kv *kv, int64_t bytes) {
    kv->budget = bytes > 0 ? bytes : 0;
    evict(kv);
}

/* ---- writing ------------------------------------------------------------ */

float *kv_prepare_write(qw_kv *kv, int slot, int pos) {
    int i = pos >> kv->shift;
    int32_t old = tab(kv, slot)[i];
    if (old >= 0) {
        kv_page *p = &kv->pg[old];
        if ((p->state == PG_PRIVATE && p->refs == 1) || (p->state == PG_PENDING && p->writer == slot))
            return p->data;
    }
    int32_t id = page_new(kv);
    if (id < 0) return NULL;
    if (old >= 0) {
        /* copy on write: the rows below pos (and any above, which the
         * sequence overwrites before reading) stay as they were */
        memcpy(kv->pg[id].data, kv->pg[old].data, (size_t)kv->kv_bytes);
        kv->cow++;
    }
    page_ref(kv, id);
    tab_set(kv, slot, i, id);
    if (old >= 0) page_unref(kv, old);
    return kv->pg[id].data;
}

int kv_slot_has(const qw_kv *kv, int slot, int n) {
    const int32_t *t = kv->tab_id + (int64_t)slot * kv->per_slot;
    for (int i = 0; i < (n + kv->page_rows - 1) >> kv->shift; i++)
        if (t[i] < 0) return 0;
    return 1;
}

/* ---- the prefix cache --------------------------------------------------- */

int kv_prefix_map(qw_kv *kv, int slot, const int32_t *toks, int n) {
    if (kv->budget <= 0 || n < 2) return 0;
    int max = (n - 1) >> kv->shift, i = 0;
    uint64_t parent = 0;
    for (; i < max; i++) {
        const int32_t *t = toks + ((int64_t)i << kv->shift);
        uint64_t h = kv_page_hash(parent, t, kv->page_rows);
        int32_t id = hash_find(kv, h, parent, t);
        if (id < 0) break;
        int32_t old = tab(kv, slot)[i];
        page_ref(kv, id);
        tab_set(kv, slot, i, id);
        if (old >= 0) page_unref(kv, old);
        parent = h;
    }
    return i << kv->shift;
}

int kv_prefix_claim(qw_kv *kv, int slot, const int32_t *toks, int n, int from) {
    if (kv->budget <= 0) return 0;
    uint64_t parent = 0;
    int first = from >> kv->shift, claimed = 0;
    for (int i = 0; i < (n >> kv->shift); i++) {
        const int32_t *t = toks + ((int64_t)i << kv->shift);
        uint64_t h = kv_page_hash(parent, t, kv->page_rows);
        if (i >= first && hash_find(kv, h, parent, t) < 0) {
            int32_t id = tab(kv, slot)[i];
            if (id < 0) {
                id = page_new(kv);
                if (id < 0) break;
                page_ref(kv, id);
                tab_set(kv, slot, i, id);
            }
            kv_page *p = &kv->pg[id];
            if (p->state == PG_PRIVATE && p->refs == 1) {
                p->state = PG_PENDING;
                p->writer = slot;
                p->hash = h;
                p->parent = parent;
                memcpy(page_toks(kv, id), t, (size_t)kv->page_rows * sizeof(int32_t));
                hash_insert(kv, id);
                claimed++;
            }
        }
        parent = h;
    }
    return claimed;
}

int kv_slot_wait(qw_kv *kv, int slot, int *n_past) {
    int32_t *t = tab(kv, slot);
    int lim = (*n_past + kv->page_rows - 1) >> kv->shift;
    for (int i = 0; i < lim; i++) {
        if (t[i] < 0) continue;
        kv_page *p = &kv->pg[t[i]];
        if (p->state != PG_PENDING || p->writer == slot) continue;
        if (p->writer >= 0) return 1;
        /* abandoned: this slot computes it, and the abandoned pages right
         * after it; the rest of the mapped range it recomputes privately */
        int j = i;
        while (j < lim && t[j] >= 0 && kv->pg[t[j]].state == PG_PENDING && kv->pg[t[j]].writer < 0)
            kv->pg[t[j++]].writer = slot;
        for (int k = j; k < lim; k++)
            if (t[k] >= 0) {
                int32_t id = t[k];
                tab_set(kv, slot, k, -1);
                page_unref(kv, id);
            }
        *n_past = i << kv->shift;
        if (kv->adv[slot] > i) kv->adv[slot] = i;
        return 0;
    }
    return 0;
}

void kv_slot_advance(qw_kv *kv, int slot, int n_past) {
    int32_t *t = tab(kv, slot);
    int full = n_past >> kv->shift;
    for (int i = kv->adv[slot]; i < full; i++)
        if (t[i] >= 0 && kv->pg[t[i]].state == PG_PENDING && kv->pg[t[i]].writer == slot) {
            kv->pg[t[i]].state = PG_READY;
            kv->pg[t[i]].writer = -1;
        }
    if (full > kv->adv[slot]) kv->adv[slot] = full;
}

void kv_slot_release(qw_kv *kv, int slot, const int32_t *toks, int n_past) {
    int32_t *t = tab(kv, slot);
    kv_slot_advance(kv, slot, n_past);
    if (kv->budget > 0 && toks) {
        uint64_t parent = 0;
        for (int i = 0; i < (n_past >> kv->shift); i++) {
            const int32_t *tk = toks + ((int64_t)i << kv->shift);
            uint64_t h = kv_page_hash(parent, tk, kv->page_rows);
            int32_t id = t[i];
            if (id >= 0 && kv->pg[id].state == PG_PRIVATE && kv->pg[id].refs == 1 && hash_find(kv, h, parent, tk) < 0) {
                kv_page *p = &kv->pg[id];
                p->state = PG_READY;
                p->hash = h;
                p->parent = parent;
                memcpy(page_toks(kv, id), tk, (size_t)kv->page_rows * sizeof(int32_t));
                hash_insert(kv, id);
            }
            parent = h;
        }
    }
    /* last page first: the LRU then drops a chain from its end */
    for (int i = kv->per_slot - 1; i >= 0; i--) {
        int32_t id = t[i];
        if (id < 0) continue;
        if (kv->pg[id].state == PG_PENDING && kv->pg[id].writer == slot) kv->pg[id].writer = -1;
        tab_set(kv, slot, i, -1);
        page_unref(kv, id);
    }
    kv->adv[slot] = 0;
}

void kv_stats(const qw_kv *kv, qw_kv_stats *st) {
    memset(st, 0, sizeof *st);
    st->page_rows = kv->page_rows;
    st->page_bytes = kv->page_bytes;
    st->pages_used = kv->n_used;
    st->pages_cached = kv->n_cached;
    st->pages_free = kv->n_free_data;
    st->bytes = kv->n_data * kv->page_bytes;
    st->cache_budget = kv->budget;
    st->cow_copies = kv->cow;
    st->evictions = kv->evictions;
}
