/* test_draft.c - n-gram drafts (src/engine/draft.h): the lookup (longest
 * n-gram first, most recent occurrence, a repeating tail continued, limits)
 * and the adaptive draft length (grows on full acceptance, shrinks on a
 * partial one, pauses after repeated misses, probes again, backs off). */
#include <string.h>

#include "engine/draft.h"
#include "test.h"

static void test_lookup(void) {
    int32_t out[16];
    /* "1 2 3 4 5 ... 1 2 3" -> the 3-gram "1 2 3" matched, "4 5 6" follows. */
    int32_t a[] = {1, 2, 3, 4, 5, 6, 9, 9, 1, 2, 3};
    int n = draft_lookup(a, 11, 3, 3, out, NULL);
    CHECK(n == 3 && out[0] == 4 && out[1] == 5 && out[2] == 6, "3-gram: %d [%d %d %d]", n, out[0], out[1], out[2]);

    /* The longest n-gram wins over a more recent shorter one: "7 2 3" later
     * matches only "2 3"; "1 2 3" earlier matches all three. */
    int32_t b[] = {1, 2, 3, 40, 41, 7, 2, 3, 50, 8, 1, 2, 3};
    n = draft_lookup(b, 13, 3, 2, out, NULL);
    CHECK(n == 2 && out[0] == 40 && out[1] == 41, "longest first: %d [%d %d]", n, out[0], out[1]);
    /* With 2-grams at most, "2 3" occurs twice; the earlier one is also
     * preceded by "1" as the query is: the longer context wins. */
    n = draft_lookup(b, 13, 2, 1, out, NULL);
    CHECK(n == 1 && out[0] == 40, "longer context: %d [%d]", n, out[0]);
    /* Equal context: the most recent occurrence wins. */
    int32_t b2[] = {1, 2, 3, 40, 5, 2, 3, 50, 6, 2, 3};
    n = draft_lookup(b2, 11, 3, 1, out, NULL);
    CHECK(n == 1 && out[0] == 50, "most recent: %d [%d]", n, out[0]);
    /* Copying: "x self . y" copied as "x self ." after another "self ." in
     * the output: the occurrence with the longer matching context (the
     * copy source) wins over the more recent one. */
    int32_t b3[] = {20, 21, 22, 30, 31, 99, 8, 30, 31, 98, 20, 21, 22, 30, 31};
    n = draft_lookup(b3, 15, 2, 1, out, NULL);
    CHECK(n == 1 && out[0] == 99, "copy source: %d [%d]", n, out[0]);

    /* Only a 1-gram matches. */
    int32_t c[] = {5, 6, 7, 8, 6};
    n = draft_lookup(c, 5, 3, 2, out, NULL);
    CHECK(n == 2 && out[0] == 7 && out[1] == 8, "1-gram: %d [%d %d]", n, out[0], out[1]);

    /* No earlier occurrence of the last token: nothing. */
    int32_t d[] = {1, 2, 3, 4};
    CHECK(draft_lookup(d, 4, 3, 4, out, NULL) == 0, "no match drafted something");
    CHECK(draft_lookup(d, 1, 3, 4, out, NULL) == 0, "one token drafted something");
    CHECK(draft_lookup(a, 11, 3, 0, out, NULL) == 0, "max 0 drafted something");

    /* A repeating tail: "1 2 1 2" -> the match at 0 continues into the
     * draft itself: 1 2 1 2 1 ... */
    int32_t e[16] = {1, 2, 1, 2};
    n = draft_lookup(e, 4, 3, 5, out, NULL);
    CHECK(n == 5 && out[0] == 1 && out[1] == 2 && out[2] == 1 && out[3] == 2 && out[4] == 1,
          "repeating tail: %d [%d %d %d %d %d]", n, out[0], out[1], out[2], out[3], out[4]);
    /* ...and in place, right after the sequence (how sched.c calls it). */
    n = draft_lookup(e, 4, 3, 6, e + 4, NULL);
    CHECK(n == 6 && e[4] == 1 && e[5] == 2 && e[8] == 1 && e[9] == 2, "in place: %d [%d %d .. %d %d]", n, e[4], e[5],
          e[8], e[9]);
}

static void test_adaptive(void) {
    /* 1..12 then 1..10: the last 3 tokens match with 7 more before them. */
    int32_t seq[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    int32_t out[16];
    int len;
    CHECK(draft_lookup(seq, 22, 3, 4, out, &len) == 4 && len == 10 && out[0] == 11, "match length %d", len);
    qw_drafter d;

    drafter_init(&d, 0);
    CHECK(drafter_propose(&d, seq, 22, 8, out) == 0, "max_k 0 drafted");

    drafter_init(&d, 8);
    CHECK(drafter_propose(&d, seq, 22, 8, out) == 8 && out[0] == 11, "first draft: max_k tokens");
    /* A short match proposes no more than its length: "6 7" after "40"
     * matches 2 tokens. */
    int32_t shortm[] = {5, 6, 7, 8, 9, 10, 11, 40, 6, 7};
    CHECK(drafter_propose(&d, shortm, 10, 8, out) == 2 && out[0] == 8 && out[1] == 9, "short match: 2 tokens");
    CHECK(drafter_propose(&d, seq, 22, 3, out) == 3, "limit caps the draft");
    /* Partial: 2 of 8 accepted -> next draft 3. */
    drafter_feedback(&d, 8, 2);
    CHECK(d.k == 3 && drafter_propose(&d, seq, 22, 8, out) == 3, "after 2 of 8: k %d", d.k);
    /* Full: doubles, capped at max_k. */
    drafter_feedback(&d, 3, 3);
    CHECK(d.k == 6, "after 3 of 3: k %d", d.k);
    drafter_feedback(&d, 6, 6);
    CHECK(d.k == 8, "after 6 of 6: k %d (max 8)", d.k);
    CHECK(d.n_drafted == 17 && d.n_accepted == 11, "totals %llu / %llu", (unsigned long long)d.n_drafted,
          (unsigned long long)d.n_accepted);

    /* Three misses in a row: drafting pauses for 8 steps, then probes. */
    for (int i = 0; i < 3; i++) {
        CHECK(drafter_propose(&d, seq, 22, 8, out) > 0, "miss %d: no draft before the pause", i);
        drafter_feedback(&d, d.k, 0);
    }
    int paused = 0;
    while (drafter_propose(&d, seq, 22, 8, out) == 0 && paused < 1000) paused++;
    CHECK(paused == 8, "first pause %d steps, want 8", paused);
    CHECK(d.k == 1, "probe with one token, k %d", d.k);
    /* A failed probe pauses again, twice as long. */
    drafter_feedback(&d, 1, 0);
    paused = 0;
    while (drafter_propose(&d, seq, 22, 8, out) == 0 && paused < 1000) paused++;
    CHECK(paused == 16, "second pause %d steps, want 16", paused);
    /* A successful probe ends the back-off: growth resumes, and it takes
     * three misses again to pause. */
    drafter_feedback(&d, 1, 1);
    CHECK(d.k == 2 && d.misses == 0 && d.backoff == 8, "after a good probe: k %d misses %d backoff %d", d.k, d.misses,
          d.backoff);
    /* Back-off stops doubling at its ceiling. */
    for (int round = 0; round < 10; round++) {
        for (int i = 0; i < 3; i++) drafter_feedback(&d, 1, 0);
        while (drafter_propose(&d, seq, 22, 8, out) == 0) {}
    }
    CHECK(d.backoff == 128, "backoff ceiling %d", d.backoff);
    /* No feedback for a step that drafted nothing. */
    int k = d.k;
    drafter_feedback(&d, 0, 0);
    CHECK(d.k == k, "empty feedback changed k");
}

int main(void) {
    test_lookup();
    test_adaptive();
    return test_summary();
}
