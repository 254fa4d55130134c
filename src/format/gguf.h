/* gguf.h - the GGUF format (v2 and v3, little-endian): bytes -> metadata and
 * a tensor directory.
 *
 * Format (ggml-org/ggml docs/gguf.md): "GGUF", u32 version, u64 n_tensors,
 * u64 n_kv; n_kv key/values (string key, u32 value type, value); n_tensors
 * tensor infos (string name, u32 n_dims, u64 ne[n_dims], u32 ggml type,
 * u64 offset); padding to general.alignment (default 32); the data section.
 * Strings are a u64 length and that many bytes (no NUL). Arrays are a u32
 * element type, a u64 count and the elements. Dimensions are listed
 * innermost first: ne[0] is the number of columns of a matrix, so a
 * [rows, cols] matrix has ne = {cols, rows}.
 *
 * gguf_parse() is a pure function over a byte buffer (fuzzable). Everything
 * in it is untrusted: each count, length, offset and size is checked with
 * overflow-safe arithmetic against the bytes really there before it is used;
 * counts are capped; keys and tensor names must be unique, non-empty and
 * free of NUL bytes; nested arrays are refused; every tensor must start at a
 * multiple of the alignment inside the data section, have the size its type
 * and shape imply, and not overlap another. Any failure is a message naming
 * the file and the key or tensor. v1 files (u32 counts) and big-endian files
 * are refused.
 *
 * The parsed structures borrow from the buffer (string values and array
 * data point into it); keys and tensor names are owned NUL-terminated copies.
 * Tensor data is used in place: F32, F16 and BF16 tensors get qdtype set;
 * the quantized types are parsed (their sizes are checked) but have qdtype
 * -1, and gguf_tensor_check() refuses them by name.
 */
#ifndef QW_GGUF_H
#define QW_GGUF_H

#include <stdint.h>

#include "base/err.h"
#include "format/mapfile.h"

#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32

/* Metadata value types (the numbers are the file's). */
enum {
    GGUF_T_U8 = 0, GGUF_T_I8 = 1, GGUF_T_U16 = 2, GGUF_T_I16 = 3, GGUF_T_U32 = 4, GGUF_T_I32 = 5,
    GGUF_T_F32 = 6, GGUF_T_BOOL = 7, GGUF_T_STRING = 8, GGUF_T_ARRAY = 9, GGUF_T_U64 = 10,
    GGUF_T_I64 = 11, GGUF_T_F64 = 12, GGUF_T_COUNT
};

/* GGML tensor types we can use in place. */
enum {
    GGML_T_F32 = 0,
    GGML_T_F16 = 1,
    GGML_T_Q4_0 = 2,
    GGML_T_Q4_1 = 3,
    GGML_T_Q5_0 = 6,
    GGML_T_Q5_1 = 7,
    GGML_T_Q8_0 = 8,
    GGML_T_Q4_K = 12,
    GGML_T_Q5_K = 13,
    GGML_T_Q6_K = 14,
    GGML_T_BF16 = 30
};

typedef struct gguf_kv {
    char *key;               /* owned, NUL-terminated */
    uint32_t type;           /* GGUF_T_* */
    /* scalars (integers widened, bool as 0/1, floats as double) */
    uint64_t u;              /* unsigned integers and bool */
    int64_t i;               /* signed integers */
    double f;                /* F32 / F64 */
    /* STRING: str[str_len] (not NUL-terminated), inside the buffer */
    const char *str;
    uint64_t str_len;
    /* ARRAY: arr_n elements of arr_type starting at arr (inside the buffer) */
    uint32_t arr_type;
    uint64_t arr_n;
    const uint8_t *arr;
    uint64_t arr_bytes;      /* total bytes of the elements */
} gguf_kv;

typedef struct gguf_tensor {
    char *name;              /* owned, NUL-terminated */
    uint32_t type;           /* ggml type id */
    const char *type_name;   /* "F32", "Q4_K", ... (static) */
    int qdtype;              /* qw_dtype (QW_F32/F16/BF16) or -1 */
    int n_dims;              /* 1..GGUF_MAX_DIMS */
    int64_t ne[GGUF_MAX_DIMS]; /* innermost first; unused dims are 1 */
    uint64_t offset;         /* from the start of the data section */
    const uint8_t *data;     /* [nbytes] inside the buffer */
    uint64_t nbytes;
} gguf_tensor;

typedef struct gguf_file {
    char *label;             /* owned copy of the file name, for messages */
    uint32_t version;
    uint32_t alignment;
    gguf_kv *kvs;            /* [n_kv] in file order */
    uint64_t n_kv;
    gguf_tensor *tensors;    /* [n_tensors] in file order */
    uint64_t n_tensors;
    uint64_t data_offset;    /* where the data section starts in the buffer */
} gguf_file;

/* Parse buf[size]; `label` (the file name) prefixes messages. Returns 0, or
 * -1 with a message; on failure f is left empty (nothing to free). */
int gguf_parse(gguf_file *f, const uint8_t *buf, uint64_t size, const char *label, qw_err *err);
void gguf_free(gguf_file *f);

const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key);
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);

/* Typed metadata getters. Return 1 if present (and *out set), 0 if absent
 * (required == 0; *out untouched), -1 with a message naming the file and key
 * if absent but required, of the wrong type, or out of [lo, hi]. Any integer
 * type is accepted by gguf_get_int; F32 or F64 by gguf_get_num. */
int gguf_get_int(const gguf_file *f, const char *key, int required, int64_t lo, int64_t hi, int64_t *out,
                 qw_err *err);
int gguf_get_num(const gguf_file *f, const char *key, int required, double lo, double hi, double *out,
                 qw_err *err);
int gguf_get_str(const gguf_file *f, const char *key, int required, const char **s, uint64_t *len, qw_err *err);
/* An array whose elements have type elem_type. */
int gguf_get_arr(const gguf_file *f, const char *key, int required, uint32_t elem_type, const gguf_kv **out,
                 qw_err *err);

/* Walk a string array (already bounds-checked by gguf_parse): start with
 * it = kv->arr, call n = kv->arr_n times. */
const char *gguf_arr_next_str(const uint8_t **it, uint64_t *len);
/* Element i of an integer array of any integer type, widened. */
int64_t gguf_arr_int(const gguf_kv *kv, uint64_t i);

/* 0 if t is F32, F16, BF16 or one of the block types qwenc reads in place
 * (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K); else -1 with a message
 * naming the tensor and its type ("Q3_K: this quantized type is not
 * supported yet"). */
int gguf_tensor_check(const gguf_file *f, const gguf_tensor *t, qw_err *err);

const char *gguf_type_name(uint32_t ggml_type);   /* "?" if unknown */
const char *gguf_vtype_name(uint32_t value_type); /* "uint32", ... */

/* A mapped and parsed GGUF model: one file, or every part of a split model
 * (gguf_open.c): f has the first part's metadata and all parts' tensors. */
typedef struct gguf_map {
    qw_mapfile map;          /* the file, or the first part */
    gguf_file f;
    qw_mapfile *parts;       /* [n_parts - 1]: parts 2.. of a split model */
    int n_parts;             /* 1 unless split */
    uint64_t size;           /* bytes of every part mapped */
} gguf_map;

/* Map and parse path; for a split model (any of its parts may be named)
 * every part. gguf_open_meta() is for callers that read only the metadata
 * (the tokenizer): the first part only, no read-ahead of tensor data. */
int gguf_open(gguf_map *g, const char *path, qw_err *err);
int gguf_open_meta(gguf_map *g, const char *path, qw_err *err);
void gguf_close(gguf_map *g);

/* 1 if path ends in "-NNNNN-of-MMMMM.gguf" (1 <= N <= M): *prefix_len
 * bytes come before it, *no = N, *count = M; else 0. */
int gguf_split_name(const char *path, size_t *prefix_len, int *no, int *count);

/* 1 if path ends in ".gguf" (any case). */
int gguf_is_path(const char *path);

/* The one *.gguf model in folder dir (the parts of one split model count
 * as one, named by its first part): returns 1 and *path (malloc'd), 0 if
 * there is none (or dir cannot be read), -1 with a message if there are
 * several (which one is meant is ambiguous). */
int gguf_dir_single(const char *dir, char **path, qw_err *err);

#endif
