/* arena.c - per-request memory pool (arena.h). */
#include "base/arena.h"

#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK_MIN 4096

struct qw_arena_block {
    qw_arena_block *next;
    size_t size, off; /* usable bytes after the header, bytes taken */
    alignas(max_align_t) unsigned char data[];
};

void arena_init(qw_arena *a, size_t cap) {
    a->head = NULL;
    a->used = 0;
    a->cap = cap;
}

void arena_free(qw_arena *a) {
    qw_arena_block *b = a->head;
    while (b) {
        qw_arena_block *n = b->next;
        free(b);
        b = n;
    }
    a->head = NULL;
    a->used = 0;
}

void *arena_alloc(qw_arena *a, size_t n) {
    const size_t al = alignof(max_align_t);
    if (n > ((size_t)-1) / 4) return NULL;
    n = (n + al - 1) & ~(al - 1);
    if (n == 0) n = al;
    qw_arena_block *b = a->head;
    if (!b || b->size - b->off < n) {
        size_t size = n > BLOCK_MIN ? n : BLOCK_MIN;
        if (a->cap && a->used + sizeof *b + size > a->cap) return NULL;
        b = malloc(sizeof *b + size);
        if (!b) return NULL;
        b->size = size;
        b->off = 0;
        /* A big one-off block goes behind the head so the head's free
         * space stays usable for small allocations. */
        if (a->head && size > BLOCK_MIN) {
            b->next = a->head->next;
            a->head->next = b;
        } else {
            b->next = a->head;
            a->head = b;
        }
        a->used += sizeof *b + size;
    }
    void *p = b->data + b->off;
    b->off += n;
    return p;
}

void *arena_memdup(qw_arena *a, const void *p, size_t n) {
    void *q = arena_alloc(a, n);
    if (q && n) memcpy(q, p, n);
    return q;
}

char *arena_strdup(qw_arena *a, const char *s) {
    size_t n = strlen(s);
    char *q = arena_alloc(a, n + 1);
    if (q) memcpy(q, s, n + 1);
    return q;
}

int abuf_add(qw_arena *a, qw_abuf *b, const void *p, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *d = arena_alloc(a, cap);
        if (!d) return -1;
        if (b->len) memcpy(d, b->data, b->len);
        b->data = d;
        b->cap = cap;
    }
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}
