/* mapfile.h - a whole file mapped read-only into memory.
 *
 * POSIX mmap (PROT_READ, MAP_PRIVATE); the pages are touched only when read,
 * so opening a multi-GB model costs nothing until the weights are used.
 * madvise(MADV_WILLNEED) hints the kernel to start reading ahead where
 * available. An empty file maps to data == NULL, size == 0.
 */
#ifndef QW_MAPFILE_H
#define QW_MAPFILE_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

typedef struct qw_mapfile {
    const uint8_t *data; /* [size] bytes, read-only */
    uint64_t size;
    char *path;          /* owned copy, for messages */
} qw_mapfile;

/* Map `path`. Returns 0, or -1 with a message naming the file. */
int mapfile_open(qw_mapfile *m, const char *path, qw_err *err);
/* The same; willneed 0 skips the read-ahead hint (for reading only a file's
 * header, e.g. a GGUF file's tokenizer metadata). */
int mapfile_open_ex(qw_mapfile *m, const char *path, int willneed, qw_err *err);
/* Unmap; safe on a zeroed or already-closed qw_mapfile. */
void mapfile_close(qw_mapfile *m);

#endif
