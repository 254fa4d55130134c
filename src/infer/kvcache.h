/* kvcache.h - the paged KV cache and its prefix cache.
 *
 * The KV cache of a sequence (a slot) is a table of fixed pages: a page
 * holds page_rows consecutive positions of every layer and kv head, K and
 * V, and is allocated from a pool when the sequence first writes one of its
 * positions, so a context that is not used takes no memory. The attention
 * kernel reads rows through the table (kernels.h: qw_kv_rows) with the
 * float operations of a contiguous cache, so paging changes no bit.
 *
 * Prefix cache (vLLM's automatic prefix caching, learnt by reading): a full
 * page is identified by a hash chain over token ids, h_i = H(h_{i-1},
 * tokens of page i), and also keeps its parent's hash and its own token ids,
 * which a lookup compares, so pages match only on equal tokens and an equal
 * 64-bit chain hash of everything before. The KV of a position depends only
 * on the tokens up to it (forward() is batch invariant), so a sequence may
 * map a registered page instead of computing it, with bit-identical
 * results. Pages are refcounted. A page another sequence may read is never
 * written: kv_prepare_write copies it first (copy on write), so a rewind
 * (speculative decoding) can never change a shared or registered page.
 *
 * Concurrent requests with one prefix compute it once: a sequence that
 * starts claims the full pages of its prompt it did not find (registered
 * PENDING, with itself as writer); a later sequence maps those pages too and
 * waits (kv_slot_wait) until the writer has filled them. If the writer goes
 * away first, a waiter takes over the pages and computes them itself.
 *
 * Idle registered pages (no sequence holds them) stay in an LRU list whose
 * size is bounded by the cache budget (kv_set_cache_budget); the least
 * recently used go first, a chain's later pages before its earlier ones.
 * Budget 0 turns the prefix cache off (no lookups, no claims).
 *
 * Threads: one thread (the engine's) uses a qw_kv; kv_stats only reads.
 */
#ifndef QW_KVCACHE_H
#define QW_KVCACHE_H

#include <stdint.h>

#include "base/err.h"

typedef struct qw_kv qw_kv;

/* n_slots sequences of up to n_ctx positions; pages of page_rows positions
 * (a power of two) of page_elems K and V elements of elem_bytes each (4:
 * float32, 2: a 16-bit KV cache). A page's base pointer is typed float *
 * whatever the element; 64-byte aligned. Allocates the slot tables only.
 * NULL with a message on bad sizes or out of memory. */
qw_kv *kv_create(int n_slots, int n_ctx, int page_rows, int64_t page_elems, int elem_bytes, qw_err *err);
void kv_free(qw_kv *kv);

int kv_page_rows(const qw_kv *kv);
int kv_page_shift(const qw_kv *kv);

/* Bytes of idle registered pages to keep (0: prefix cache off, and the idle
 * pages go now). */
void kv_set_cache_budget(qw_kv *kv, int64_t bytes);
int64_t kv_cache_budget(const qw_kv *kv);

/* The slot's page table: [n_ctx / page_rows rounded up] base pointers, NULL
 * where no page is held. Valid until the next call that changes the slot. */
const float *const *kv_slot_pages(const qw_kv *kv, int slot);

/* Make the page holding position pos of the slot one the slot may write:
 * allocate it if absent, copy it first if another sequence may read it.
 * Returns its base pointer, or NULL when out of memory. */
float *kv_prepare_write(qw_kv *kv, int slot, int pos);

/* 1 if the slot holds pages for every position below n, else 0. */
int kv_slot_has(const qw_kv *kv, int slot, int n);

/* Map into the (empty) slot the longest registered chain of full pages that
 * prefixes toks[0..n), never all n tokens (at least one must be computed
 * to get logits). Returns the number of positions mapped (a multiple of
 * page_rows; 0 when the cache is off). */
int kv_prefix_map(qw_kv *kv, int slot, const int32_t *toks, int n);

/* Register the full pages of toks[from..n) (from a multiple of page_rows)
 * as PENDING with the slot as their writer, so that sequences starting
 * meanwhile share them. Returns the number of pages claimed. Out of memory
 * claims fewer (never an error: the pages are then computed privately). */
int kv_prefix_claim(qw_kv *kv, int slot, const int32_t *toks, int n, int from);

/* 1 if a page below *n_past of the slot is still being computed by another
 * slot (the slot must not run yet), else 0. A page whose writer went away is
 * taken over: the slot becomes its writer and *n_past moves back to it. */
int kv_slot_wait(qw_kv *kv, int slot, int *n_past);

/* The slot has filled positions [0, n_past): its PENDING pages wholly below
 * become readable by the others. */
void kv_slot_advance(qw_kv *kv, int slot, int n_past);

/* End of the slot's sequence: its full private pages below n_past (toks:
 * the token of each position) are registered when the cache is on; then
 * every page is dropped and the slot is empty. */
void kv_slot_release(qw_kv *kv, int slot, const int32_t *toks, int n_past);

typedef struct qw_kv_stats {
    int page_rows;
    int64_t page_bytes;    /* one page: page_rows positions, all layers and heads, K and V */
    int64_t pages_used;    /* held by at least one slot */
    int64_t pages_cached;  /* idle, kept for the prefix cache */
    int64_t pages_free;    /* allocated, kept for reuse */
    int64_t bytes;         /* page memory allocated in all */
    int64_t cache_budget;  /* bytes (kv_set_cache_budget) */
    uint64_t cow_copies;   /* pages copied before a write */
    uint64_t evictions;    /* idle pages dropped for the budget */
} qw_kv_stats;

void kv_stats(const qw_kv *kv, qw_kv_stats *st);

/* The chain hash of a page given its parent's (0 for the first page):
 * exposed for the tests. */
uint64_t kv_page_hash(uint64_t parent, const int32_t *toks, int n);

#endif
