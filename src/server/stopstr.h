/* stopstr.h - stop strings over streamed text, never partly leaked.
 *
 * OpenAI's `stop`: generation ends at the first occurrence of any stop
 * string, and neither the stop string nor any part of it reaches the client.
 * Text arrives in pieces (one per decoded token), so a piece that ends with
 * the beginning of a stop string ("Hel" of "Hello") is held back until the
 * next piece decides it: either the stop string completes (the held text is
 * dropped and the stream ends) or it cannot (the held text is released).
 *
 * Pure and single-threaded; the caller owns the struct. Input pieces are
 * complete UTF-8 (from the tokenizer's streaming decoder) and stop strings
 * are valid UTF-8, so held-back text always starts on a character boundary.
 */
#ifndef QW_STOPSTR_H
#define QW_STOPSTR_H

#include <stddef.h>

typedef struct qw_stopstr {
    const char *const *stops; /* [n_stops] NUL-terminated, non-empty; borrowed */
    int n_stops;
    char *held;               /* text not yet released */
    size_t held_len, held_cap;
    char *out;                /* the text released by the last feed */
    size_t out_cap;
    int hit;                  /* 1 once a stop string was found */
    int hit_index;            /* which one */
} qw_stopstr;

/* stops may be NULL when n_stops == 0. Empty strings in stops are ignored. */
void stopstr_init(qw_stopstr *s, const char *const *stops, int n_stops);
void stopstr_free(qw_stopstr *s);

/* Add a piece of text. On return *out[*out_len] is the text that may be
 * released now (borrowed from s, valid until the next call). After a stop
 * string is found (s->hit set) further input is ignored and nothing more
 * is released. Returns 0, or -1 on allocation failure. */
int stopstr_feed(qw_stopstr *s, const char *text, size_t len, const char **out, size_t *out_len);

/* End of generation without a stop string: release everything held. */
void stopstr_flush(qw_stopstr *s, const char **out, size_t *out_len);

/* Length of the longest suffix of text[len] that is a proper prefix of
 * some stop string (the part that must be held back). */
size_t stopstr_partial(const char *const *stops, int n_stops, const char *text, size_t len);

#endif
