/* draft.h - n-gram drafts for speculative decoding ("prompt lookup").
 *
 * Guesses the next tokens of a sequence by finding its last N tokens
 * (N = 3, 2, 1: longest first) earlier in the same sequence (prompt and
 * generated tokens) and proposing what followed them there (of several
 * places, the one that matches the longest context). Code edits,
 * summaries and answers about a given file copy long spans of the prompt,
 * so such guesses are often right; the verifier (sched.c, generate.c)
 * checks every guess against the model, so a wrong one costs time only.
 *
 * How many tokens to propose adapts to the recent outcome: it grows while
 * whole drafts are accepted, shrinks to what was accepted plus one after a
 * partial miss, and after a few drafts in a row of which nothing was
 * accepted it drops to 0 for a while (free text: decode costs what plain
 * decode costs), probing again after a back-off that doubles on every
 * failed probe.
 *
 * The drafter is a plain struct with no heap memory: the lookup scans the
 * caller's token array, so nothing is allocated per step or per request.
 */
#ifndef QW_DRAFT_H
#define QW_DRAFT_H

#include <stdint.h>

/* Longest n-gram tried (then shorter ones down to 1). */
#define QW_DRAFT_MAX_NGRAM 3

typedef struct qw_drafter {
    int max_k;    /* ceiling of tokens per draft; 0 = never draft */
    int k;        /* tokens the next draft may hold (adaptive) */
    int misses;   /* drafts in a row with nothing accepted */
    int pause;    /* drafts to skip before probing again */
    int backoff;  /* the next pause length */
    uint64_t n_drafted, n_accepted; /* totals for the request */
} qw_drafter;

/* Start a sequence: max_k drafts at most per step (0 = off). */
void drafter_init(qw_drafter *d, int max_k);

/* Propose up to min(d->k, limit, the match length) tokens that may follow toks[0..n) and write
 * them to out (out may be toks + n: the copy runs forward, so a draft may
 * continue a repeating tail). Returns the count, 0 if no n-gram matched,
 * drafting is paused or off. */
int drafter_propose(qw_drafter *d, const int32_t *toks, int n, int limit, int32_t *out);

/* Report the outcome of the last proposal: drafted tokens sent to the
 * model, accepted the leading ones that matched its choice. */
void drafter_feedback(qw_drafter *d, int drafted, int accepted);

/* The lookup alone (no adaptation): the continuation of an earlier
 * occurrence of the longest matching suffix of N <= max_ngram tokens, at
 * most max tokens. Of several occurrences, the one whose match extends
 * furthest back (up to 32 tokens more), the most recent among equals.
 * *match_len (if not NULL): the length of that match (N plus the extension),
 * 0 if none. Exposed for tests. */
int draft_lookup(const int32_t *toks, int n, int max_ngram, int max, int32_t *out, int *match_len);

#endif
