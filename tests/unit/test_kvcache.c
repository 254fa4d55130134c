/* test_kvcache.c - the paged KV cache and its prefix cache (src/infer/kvcache.h),
 * without a model: pages hold marker values, so every check says which
 * page a slot reads.
 *   - pages come as positions are written (a fresh cache holds no memory);
 *   - the hash chain tells pages apart by token, order and parent;
 *   - a released sequence's full pages are found again, never for the
 *     whole prompt, and only along an unbroken chain;
 *   - copy on write: writing into a mapped page leaves the cached one as it
 *     was (what a speculative rewind into a shared page would do);
 *   - the LRU budget drops a chain's last pages first;
 *   - claimed pages make later slots wait until written, and a waiter takes
 *     over pages whose writer went away;
 *   - budget 0: no lookups, no claims, pages freed at release;
 *   - 16-bit pages (--kv-type f16|bf16): half the bytes, counted so in the
 *     stats and the budget; copy on write copies every 16-bit element and
 *     the page's token ids still find it (an odd element count pads the
 *     ids to 8 bytes); a bad element size is an error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/kvcache.h"
#include "test.h"

#define P 16     /* rows per page */
#define FLOATS 8 /* floats per page: only markers live there */
#define N_CTX 128

static qw_kv *make(int n_slots, int64_t budget) {
    qw_err err;
    qw_kv *kv = kv_create(n_slots, N_CTX, P, FLOATS, 4, &err);
    CHECK(kv != NULL, "kv_create: %s", kv ? "" : err.msg);
    if (kv) kv_set_cache_budget(kv, budget);
    return kv;
}

static int64_t page_bytes(void) { return FLOATS * 4 + P * 4; }

/* Write positions [from, to) of the slot, marking each page's first float
 * with the page index plus tag. */
static void fill(qw_kv *kv, int slot, int from, int to, float tag) {
    for (int p = from; p < to; p++) {
        float *pg = kv_prepare_write(kv, slot, p);
        CHECK(pg != NULL, "prepare_write %d", p);
        if (pg) pg[0] = (float)(p / P) + tag;
    }
}

static float mark(qw_kv *kv, int slot, int page) { return kv_slot_pages(kv, slot)[page][0]; }

static void toks_of(int32_t *t, int n, int seed) {
    for (int i = 0; i < n; i++) t[i] = (int32_t)((i * 7 + seed * 13) % 97);
}

static void test_on_demand(void) {
    qw_kv *kv = make(16, 0);
    if (!kv) return;
    qw_kv_stats st;
    kv_stats(kv, &st);
    CHECK(st.bytes == 0 && st.pages_used == 0, "fresh cache holds %lld bytes", (long long)st.bytes);
    CHECK(kv_slot_has(kv, 3, 0) && !kv_slot_has(kv, 3, 1), "slot_has on an empty slot");
    fill(kv, 3, 0, P, 0);
    kv_stats(kv, &st);
    CHECK(st.pages_used == 1 && st.bytes == page_bytes(), "one page after %d positions: %lld used", P,
          (long long)st.pages_used);
    fill(kv, 3, P, P + 1, 0);
    kv_stats(kv, &st);
    CHECK(st.pages_used == 2, "a second page at position %d", P);
    CHECK(kv_slot_has(kv, 3, P + 1) && !kv_slot_has(kv, 3, 2 * P + 1), "slot_has after two pages");
    CHECK(kv_slot_pages(kv, 4)[0] == NULL, "another slot holds nothing");
    kv_slot_release(kv, 3, NULL, P + 1);
    kv_stats(kv, &st);
    CHECK(st.pages_used == 0 && st.pages_cached == 0, "released: %lld used, %lld cached", (long long)st.pages_used,
          (long long)st.pages_cached);
    kv_free(kv);
}

static void test_hash(void) {
    int32_t a[P], b[P];
    toks_of(a, P, 1);
    memcpy(b, a, sizeof a);
    CHECK(kv_page_hash(0, a, P) == kv_page_hash(0, b, P), "same tokens, same hash");
    b[P - 1]++;
    CHECK(kv_page_hash(0, a, P) != kv_page_hash(0, b, P), "last token changed, same hash");
    memcpy(b, a, sizeof a);
    int32_t t = b[0];
    b[0] = b[1], b[1] = t;
    CHECK(b[0] == b[1] || kv_page_hash(0, a, P) != kv_page_hash(0, b, P), "swapped tokens, same hash");
    CHECK(kv_page_hash(1, a, P) != kv_page_hash(2, a, P), "parent ignored");
}

static void test_map_cow_evict(void) {
    qw_kv *kv = make(4, 1 << 20);
    if (!kv) return;
    int32_t t[4 * P], u[4 * P];
    toks_of(t, 4 * P, 1);
    fill(kv, 0, 0, 3 * P + 5, 100);
    kv_slot_release(kv, 0, t, 3 * P + 5); /* 3 full pages registered */
    qw_kv_stats st;
    kv_stats(kv, &st);
    CHECK(st.pages_cached == 3, "%lld pages cached after release (3 full)", (long long)st.pages_cached);

    CHECK(kv_prefix_map(kv, 1, t, 4 * P) == 3 * P, "map of a longer prompt");
    CHECK(mark(kv, 1, 0) == 100 && mark(kv, 1, 2) == 102, "mapped pages hold the first sequence's data");
    kv_slot_release(kv, 1, t, 3 * P);
    CHECK(kv_prefix_map(kv, 1, t, 3 * P) == 2 * P, "never the whole prompt: %d", 3 * P);
    kv_slot_release(kv, 1, t, 2 * P);
    memcpy(u, t, sizeof u);
    u[P + 3]++;
    CHECK(kv_prefix_map(kv, 1, u, 4 * P) == P, "a changed token in page 1 stops the chain after page 0");
    kv_slot_release(kv, 1, u, P);

    /* copy on write: slot 2 maps, then writes into page 1 (a rewind) */
    CHECK(kv_prefix_map(kv, 2, t, 4 * P) == 3 * P, "map again");
    const float *shared = kv_slot_pages(kv, 2)[1];
    float *w = kv_prepare_write(kv, 2, P + 4);
    CHECK(w && w != shared && w[0] == 101, "copy on write: new page %p vs %p, copied mark %g", (void *)w,
          (const void *)shared, w ? w[0] : -1.0);
    if (w) w[0] = -5;
    kv_stats(kv, &st);
    CHECK(st.cow_copies == 1, "%llu copies", (unsigned long long)st.cow_copies);
    CHECK(kv_prefix_map(kv, 3, t, 4 * P) == 3 * P && mark(kv, 3, 1) == 101,
          "the cached page is unchanged by the other slot's write");
    CHECK(kv_prepare_write(kv, 2, P + 5) == w, "the copy is the slot's own: no second copy");
    kv_slot_release(kv, 2, NULL, 0);
    kv_slot_release(kv, 3, NULL, 0);

    /* a budget of 2 pages: the chain loses its last page, not its first */
    kv_set_cache_budget(kv, 2 * page_bytes());
    kv_stats(kv, &st);
    CHECK(st.pages_cached == 2 && st.evictions == 1, "budget 2 pages: %lld cached, %llu evicted",
          (long long)st.pages_cached, (unsigned long long)st.evictions);
    CHECK(kv_prefix_map(kv, 1, t, 4 * P) == 2 * P, "after eviction the first two pages still map");
    kv_slot_release(kv, 1, NULL, 0);
    kv_set_cache_budget(kv, 0);
    kv_stats(kv, &st);
    CHECK(st.pages_cached == 0, "budget 0 drops the cache");
    CHECK(kv_prefix_map(kv, 1, t, 4 * P) == 0 && kv_prefix_claim(kv, 1, t, 4 * P, 0) == 0, "off: no map, no claim");
    kv_free(kv);
}

static void test_pending(void) {
    qw_kv *kv = make(3, 1 << 20);
    if (!kv) return;
    int32_t t[4 * P];
    toks_of(t, 4 * P, 2);
    /* slot 0 starts the prompt: claims pages 0..3 */
    CHECK(kv_prefix_map(kv, 0, t, 4 * P) == 0, "cold map");
    CHECK(kv_prefix_claim(kv, 0, t, 4 * P, 0) == 4, "claim 4 pages");
    /* slot 1 with the same prompt maps 3 pages, all pending */
    int np = kv_prefix_map(kv, 1, t, 4 * P);
    CHECK(np == 3 * P, "map of pending pages: %d", np);
    CHECK(kv_slot_wait(kv, 1, &np) == 1, "waits while slot 0 computes");
    fill(kv, 0, 0, 2 * P, 200);
    kv_slot_advance(kv, 0, 2 * P);
    CHECK(kv_slot_wait(kv, 1, &np) == 1 && np == 3 * P, "still waits for page 2");
    fill(kv, 0, 2 * P, 3 * P, 200);
    kv_slot_advance(kv, 0, 3 * P);
    CHECK(kv_slot_wait(kv, 1, &np) == 0 && np == 3 * P, "runs once pages 0..2 are written");
    CHECK(mark(kv, 1, 2) == 202, "and reads slot 0's data");
    kv_slot_release(kv, 1, NULL, 0);
    kv_slot_release(kv, 0, t, 3 * P);

    /* takeover: slot 0 claims and writes page 0 only, then goes away */
    toks_of(t, 4 * P, 3);
    kv_prefix_claim(kv, 0, t, 4 * P, kv_prefix_map(kv, 0, t, 4 * P));
    np = kv_prefix_map(kv, 1, t, 4 * P);
    int np2 = kv_prefix_map(kv, 2, t, 4 * P);
    fill(kv, 0, 0, P + 3, 300);
    kv_slot_advance(kv, 0, P + 3);
    kv_slot_release(kv, 0, t, P + 3);
    CHECK(kv_slot_wait(kv, 1, &np) == 0 && np == P, "slot 1 takes over at page 1: n_past %d", np);
    CHECK(kv_slot_wait(kv, 2, &np2) == 1, "slot 2 now waits for slot 1");
    const float *pg1 = kv_slot_pages(kv, 1)[1];
    CHECK(kv_prepare_write(kv, 1, P) == pg1, "the new writer writes the shared page in place");
    fill(kv, 1, P, 3 * P, 400);
    kv_slot_advance(kv, 1, 3 * P);
    CHECK(kv_slot_wait(kv, 2, &np2) == 0 && np2 == 3 * P && mark(kv, 2, 2) == 402, "slot 2 reads slot 1's pages");
    kv_slot_release(kv, 1, t, 3 * P);
    kv_slot_release(kv, 2, t, 3 * P);
    qw_kv_stats st;
    kv_stats(kv, &st);
    CHECK(st.pages_used == 0, "%lld pages still held", (long long)st.pages_used);
    kv_free(kv);
}

/* 16-bit pages: ELEMS16 uint16 elements (odd: the token ids after them
 * must stay aligned), every one marked, so a copy that moved only half the
 * bytes (page_floats * 4 of a 2-byte cache, or the reverse) shows. */
#define ELEMS16 37
static void test_16bit(void) {
    qw_err err;
    CHECK(kv_create(2, N_CTX, P, ELEMS16, 3, &err) == NULL && strstr(err.msg, "3 bytes"),
          "an element of 3 bytes is refused: %s", err.msg);
    qw_kv *kv = kv_create(4, N_CTX, P, ELEMS16, 2, &err);
    CHECK(kv != NULL, "kv_create 16-bit: %s", kv ? "" : err.msg);
    if (!kv) return;
    kv_set_cache_budget(kv, 1 << 20);
    int32_t t[3 * P];
    toks_of(t, 3 * P, 5);
    for (int p = 0; p < 2 * P; p++) {
        uint16_t *pg = (uint16_t *)(void *)kv_prepare_write(kv, 0, p);
        CHECK(pg != NULL && ((uintptr_t)pg & 63) == 0, "16-bit page aligned");
        if (pg)
            for (int e = 0; e < ELEMS16; e++) pg[e] = (uint16_t)(1000 * (p / P + 1) + e);
    }
    qw_kv_stats st;
    kv_stats(kv, &st);
    int64_t pb = (ELEMS16 * 2 + 7) / 8 * 8 + P * 4;
    CHECK(st.page_bytes == pb && st.bytes == 2 * pb, "16-bit page of %lld bytes (want %lld), %lld in all",
          (long long)st.page_bytes, (long long)pb, (long long)st.bytes);
    kv_slot_release(kv, 0, t, 2 * P);
    CHECK(kv_prefix_map(kv, 1, t, 3 * P) == 2 * P, "16-bit pages found again by their token ids");
    const uint16_t *shared = (const uint16_t *)(const void *)kv_slot_pages(kv, 1)[1];
    uint16_t *w = (uint16_t *)(void *)kv_prepare_write(kv, 1, P + 2);
    int same = w && w != shared;
    for (int e = 0; same && e < ELEMS16; e++) same = w[e] == 2000 + e;
    CHECK(same, "copy on write copies all %d 16-bit elements", ELEMS16);
    if (w) w[ELEMS16 - 1] = 7;
    CHECK(kv_prefix_map(kv, 2, t, 3 * P) == 2 * P &&
              ((const uint16_t *)(const void *)kv_slot_pages(kv, 2)[1])[ELEMS16 - 1] == 2000 + ELEMS16 - 1,
          "the cached 16-bit page is unchanged by the copy's write");
    kv_slot_release(kv, 1, NULL, 0);
    kv_slot_release(kv, 2, NULL, 0);
    kv_set_cache_budget(kv, pb);
    kv_stats(kv, &st);
    CHECK(st.pages_cached == 1, "a budget of one 16-bit page keeps one: %lld", (long long)st.pages_cached);
    kv_free(kv);
}

int main(void) {
    test_16bit();
    test_on_demand();
    test_hash();
    test_map_cow_evict();
    test_pending();
    return test_summary();
}
