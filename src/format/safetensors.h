/* safetensors.h - the safetensors format: bytes -> tensor directory.
 *
 * Format (huggingface/safetensors): u64 little-endian N, then N bytes of a
 * JSON object {"name": {"dtype": "BF16", "shape": [r, c],
 * "data_offsets": [begin, end]}, ..., "__metadata__": {...}}, then the data
 * region; offsets are relative to the data region's start.
 *
 * st_parse() is a pure function over a byte buffer (fuzzable): everything in
 * it is untrusted, so the header length is checked against the buffer size,
 * shape products are overflow-checked, every [begin, end) must lie inside
 * the data region with end >= begin, its size must equal
 * product(shape) * dtype size, tensors must not overlap, and an unknown dtype
 * is an error naming the tensor. Tensor data pointers borrow from the buffer.
 *
 * st_open_dir() maps a model folder: model.safetensors, or the shards named
 * by model.safetensors.index.json's weight_map (plain file names only).
 */
#ifndef QW_SAFETENSORS_H
#define QW_SAFETENSORS_H

#include <stdint.h>

#include "base/err.h"
#include "format/mapfile.h"

#define ST_MAX_DIMS 8

typedef struct st_tensor {
    char *name;           /* owned */
    const char *dtype;    /* "BF16", "F32", ... (static string) */
    int qdtype;           /* qw_dtype (F32/F16/BF16) or -1 if not one of those */
    int elem_size;        /* bytes per element */
    int n_dims;
    int64_t shape[ST_MAX_DIMS];
    int64_t numel;        /* product of shape (1 for a scalar) */
    const uint8_t *data;  /* [nbytes] inside the parsed buffer */
    uint64_t nbytes;
} st_tensor;

typedef struct st_file {
    st_tensor *tensors;   /* [n] in header order */
    int n;
} st_file;

/* Parse buf[size]. `label` (the file name) prefixes messages. Returns 0, or
 * -1 with a message; on failure f is left empty (nothing to free). */
int st_parse(st_file *f, const uint8_t *buf, uint64_t size, const char *label, qw_err *err);
void st_file_free(st_file *f);
const st_tensor *st_find(const st_file *f, const char *name);

/* One or more mapped safetensors files (a model's shards). */
typedef struct st_set {
    int n_files;
    qw_mapfile *maps;     /* [n_files] */
    st_file *files;       /* [n_files] */
} st_set;

/* Map and parse one file. */
int st_open(st_set *s, const char *path, qw_err *err);
/* Map and parse a folder's model.safetensors, or, when absent, the shards
 * listed in model.safetensors.index.json. */
int st_open_dir(st_set *s, const char *dir, qw_err *err);
void st_close(st_set *s);
/* Find a tensor in any file; *path (optional) gets the file it is in. */
const st_tensor *st_set_find(const st_set *s, const char *name, const char **path);

#endif
