/* strbuf.h - a growable, always NUL-terminated byte buffer for the text
 * renderers (chat template, tojson, tool calls, infill).
 *
 * Allocation failure (or a size that would overflow) sets `failed` and makes
 * every later append a no-op, so a renderer appends freely and checks once at
 * the end. Free p with free(); a zeroed strbuf is empty and valid. */
#ifndef QW_STRBUF_H
#define QW_STRBUF_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct strbuf {
    char *p;    /* NULL until the first append */
    size_t n;   /* bytes used, excluding the NUL */
    size_t cap; /* bytes allocated */
    int failed;
} strbuf;

static inline void sb_add(strbuf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (n > SIZE_MAX / 2 - b->n - 1) {
        b->failed = 1;
        return;
    }
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n + 1) nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np) {
            b->failed = 1;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

/* NULL appends nothing. */
static inline void sb_str(strbuf *b, const char *s) {
    if (s) sb_add(b, s, strlen(s));
}

static inline void sb_chr(strbuf *b, char c) { sb_add(b, &c, 1); }

/* Make sure p is allocated (an empty result is "" rather than NULL). */
static inline void sb_touch(strbuf *b) { sb_add(b, "", 0); }

#endif
