/* draft.c - n-gram drafts (see draft.h). */
#include "engine/draft.h"

/* Drafts in a row with nothing accepted before drafting pauses. */
#define MISS_LIMIT 3
/* Steps of the first pause, and the ceiling the doubling stops at: a
 * request that turned to copying is found again within that many steps. */
#define BACKOFF_FIRST 8
#define BACKOFF_MAX 128
/* How far back past the n-gram a candidate's match is compared (tokens). */
#define MATCH_EXT_MAX 32

void drafter_init(qw_drafter *d, int max_k) {
    d->max_k = max_k > 0 ? max_k : 0;
    d->k = d->max_k;
    d->misses = 0;
    d->pause = 0;
    d->backoff = BACKOFF_FIRST;
    d->n_drafted = 0;
    d->n_accepted = 0;
}

int draft_lookup(const int32_t *toks, int n, int max_ngram, int max, int32_t *out, int *match_len) {
    if (match_len) *match_len = 0;
    if (max <= 0) return 0;
    for (int N = max_ngram; N >= 1; N--) {
        if (n < N + 1) continue;
        const int32_t *key = toks + n - N;
        /* Of the occurrences of the last N tokens (each followed by at least
         * one token: i + N <= n - 1), take the one whose match reaches
         * furthest back past the N tokens, the most recent among equals.
         * When the answer copies a span of the prompt, short n-grams such as
         * "self." or an indent recur all over; the longer context tells the
         * span being copied from the others. */
        int best = -1, best_ext = -1;
        for (int i = n - N - 1; i >= 0; i--) {
            int j = 0;
            while (j < N && toks[i + j] == key[j]) j++;
            if (j < N) continue;
            int ext = 0;
            while (ext < MATCH_EXT_MAX && i - 1 - ext >= 0 && toks[i - 1 - ext] == toks[n - N - 1 - ext]) ext++;
            if (ext > best_ext) {
                best = i;
                best_ext = ext;
                if (ext == MATCH_EXT_MAX) break;
            }
        }
        if (best < 0) continue;
        /* Read past the end from out itself: a match inside a repeating
         * tail continues the repetition. */
        for (int c = 0; c < max; c++) {
            int src = best + N + c;
            out[c] = src < n ? toks[src] : out[src - n];
        }
        if (match_len) *match_len = N + best_ext;
        return max;
    }
    return 0;
}

int drafter_propose(qw_drafter *d, const int32_t *toks, int n, int limit, int32_t *out) {
    if (d->max_k == 0) return 0;
    if (d->pause > 0) {
        d->pause--;
        return 0;
    }
    int max = d->k < limit ? d->k : limit;
    int len;
    int got = draft_lookup(toks, n, QW_DRAFT_MAX_NGRAM, max, out, &len);
    /* A continuation is about as trustworthy as its match is long: a lone
     * shared token or a common phrase predicts a token or two, a copied
     * span predicts much more. Rejected drafts cost batch rows. */
    return got < len ? got : len;
}

void drafter_feedback(qw_drafter *d, int drafted, int accepted) {
    if (drafted <= 0) return;
    d->n_drafted += (uint64_t)drafted;
    d->n_accepted += (uint64_t)accepted;
    if (accepted > 0) {
        d->misses = 0;
        d->backoff = BACKOFF_FIRST;
        /* All taken: the span goes on, ask for more next time; else the
         * span ended, so the next draft needs to be about as long as what
         * matched. */
        int k = accepted == drafted ? 2 * d->k : accepted + 1;
        d->k = k < d->max_k ? k : d->max_k;
        if (d->k < 1) d->k = 1;
        return;
    }
    d->k = d->k / 2 > 1 ? d->k / 2 : 1;
    if (++d->misses >= MISS_LIMIT) {
        d->pause = d->backoff;
        d->backoff = 2 * d->backoff < BACKOFF_MAX ? 2 * d->backoff : BACKOFF_MAX;
        /* One failed probe after the pause is enough to pause again. */
        d->misses = MISS_LIMIT - 1;
    }
}
