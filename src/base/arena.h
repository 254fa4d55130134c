/* arena.h - one memory pool per request, freed at once (after h2o's
 * h2o_mem_pool_t): a chain of blocks from which allocations are bumped off,
 * never freed one by one. A request's parse results, reply buffers and
 * streamed text all come from its arena, so an error path anywhere in the
 * lifecycle frees everything by freeing the arena, and a cap bounds what one
 * request may take (a request past it gets an error, the process carries
 * on).
 *
 * Not thread-safe: one arena belongs to one request, used by one thread at
 * a time.
 */
#ifndef QW_ARENA_H
#define QW_ARENA_H

#include <stddef.h>

typedef struct qw_arena_block qw_arena_block;

typedef struct qw_arena {
    qw_arena_block *head; /* newest block first */
    size_t used;          /* bytes taken from the system, blocks included */
    size_t cap;           /* most bytes this arena may take; 0 = no limit */
} qw_arena;

/* An empty arena that may take up to cap bytes (0: no limit). */
void arena_init(qw_arena *a, size_t cap);

/* Free every block; the arena is empty again (and reusable). */
void arena_free(qw_arena *a);

/* n bytes aligned for any type, or NULL when out of memory or past the cap.
 * Valid until arena_free. */
void *arena_alloc(qw_arena *a, size_t n);

/* n bytes copied (NULL as above). */
void *arena_memdup(qw_arena *a, const void *p, size_t n);

/* A copy of s, NUL-terminated (NULL as above). */
char *arena_strdup(qw_arena *a, const char *s);

/* A growable byte buffer whose storage lives in an arena: growth takes a
 * new block twice the size and copies (the old one is reclaimed with the
 * arena), so appending n bytes costs O(n) amortised. data is NUL-terminated
 * after each append. */
typedef struct qw_abuf {
    char *data;
    size_t len, cap;
} qw_abuf;

/* Append n bytes; returns 0, or -1 when the arena refuses (buffer unchanged). */
int abuf_add(qw_arena *a, qw_abuf *b, const void *p, size_t n);

#endif
