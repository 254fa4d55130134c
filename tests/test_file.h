/* test_file.h - whole-file read and write for the test programs that load
 * fixtures (tokenizer corpora, chat-template corpora) and write scratch
 * model folders. Test code: an allocation failure aborts. */
#ifndef QW_TEST_FILE_H
#define QW_TEST_FILE_H

#include <stdio.h>
#include <stdlib.h>

/* The file's bytes, NUL-terminated (malloc'd; *len set if len), or NULL if
 * it cannot be opened. */
static inline char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    for (;;) {
        if (!b) abort();
        if (n == cap) {
            b = realloc(b, (cap *= 2) + 1);
            continue;
        }
        size_t r = fread(b + n, 1, cap - n, f);
        if (!r) break;
        n += r;
    }
    fclose(f);
    b[n] = 0;
    if (len) *len = n;
    return b;
}

/* Write the string s to path. 0, or -1 on any failure. */
static inline int write_file(const char *path, const char *s) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    fputs(s, f);
    return fclose(f) ? -1 : 0;
}

#endif
