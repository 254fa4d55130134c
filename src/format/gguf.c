/* gguf.c - see gguf.h. */
#include "format/gguf.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"

/* Caps far above any real file (Qwen2.5-72B: ~1000 tensors, ~40 keys), so a
 * hostile count fails before we allocate for it. */
#define GGUF_MAX_KV (1u << 16)
#define GGUF_MAX_TENSORS (1u << 20)
#define GGUF_MAX_NAME 1024          /* key and tensor-name bytes */
#define GGUF_MAX_ALIGNMENT (1u << 24)

/* ggml type id -> name, elements per block, bytes per block (ggml.c's
 * type_traits; gaps are retired ids). */
static const struct {
    const char *name;
    uint32_t blck, size;
} ggml_types[] = {
    [0] = {"F32", 1, 4},        [1] = {"F16", 1, 2},        [2] = {"Q4_0", 32, 18},
    [3] = {"Q4_1", 32, 20},     [6] = {"Q5_0", 32, 22},     [7] = {"Q5_1", 32, 24},
    [8] = {"Q8_0", 32, 34},     [9] = {"Q8_1", 32, 40},     [10] = {"Q2_K", 256, 84},
    [11] = {"Q3_K", 256, 110},  [12] = {"Q4_K", 256, 144},  [13] = {"Q5_K", 256, 176},
    [14] = {"Q6_K", 256, 210},  [15] = {"Q8_K", 256, 292},  [16] = {"IQ2_XXS", 256, 66},
    [17] = {"IQ2_XS", 256, 74}, [18] = {"IQ3_XXS", 256, 98}, [19] = {"IQ1_S", 256, 50},
    [20] = {"IQ4_NL", 32, 18},  [21] = {"IQ3_S", 256, 110}, [22] = {"IQ2_S", 256, 82},
    [23] = {"IQ4_XS", 256, 136}, [24] = {"I8", 1, 1},       [25] = {"I16", 1, 2},
    [26] = {"I32", 1, 4},       [27] = {"I64", 1, 8},       [28] = {"F64", 1, 8},
    [29] = {"IQ1_M", 256, 56},  [30] = {"BF16", 1, 2},      [34] = {"TQ1_0", 256, 54},
    [35] = {"TQ2_0", 256, 66},  [39] = {"MXFP4", 32, 17},
};
#define N_GGML_TYPES (sizeof ggml_types / sizeof ggml_types[0])

static const char *const vtype_names[GGUF_T_COUNT] = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
    "bool", "string", "array", "uint64", "int64", "float64",
};
/* Bytes of a scalar of each value type (0: string / array). */
static const uint8_t vtype_size[GGUF_T_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

const char *gguf_type_name(uint32_t t) {
    return t < N_GGML_TYPES && ggml_types[t].name ? ggml_types[t].name : "?";
}

const char *gguf_vtype_name(uint32_t t) { return t < GGUF_T_COUNT ? vtype_names[t] : "?"; }

int gguf_is_path(const char *path) {
    size_t n = path ? strlen(path) : 0;
    if (n < 5) return 0;
    const char *e = path + n - 5;
    return e[0] == '.' && tolower((unsigned char)e[1]) == 'g' && tolower((unsigned char)e[2]) == 'g' &&
           tolower((unsigned char)e[3]) == 'u' && tolower((unsigned char)e[4]) == 'f';
}

/* ------------------------------------------------------------ reading */

typedef struct rd {
    const uint8_t *buf;
    uint64_t pos, size;
    const char *label;
    qw_err *err;
} rd;

static uint64_t le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* n bytes available at the cursor? what names the field for the message. */
static int need(rd *r, uint64_t n, const char *what, const char *who) {
    if (n > r->size - r->pos)
        return qw_errf(r->err, "gguf: %s: %s%s%s: needs %llu bytes at offset %llu, file has %llu (truncated?)",
                       r->label, who ? who : "", who ? ": " : "", what, (unsigned long long)n,
                       (unsigned long long)r->pos, (unsigned long long)r->size);
    return 0;
}

static int rd_uint(rd *r, int n, uint64_t *v, const char *what, const char *who) {
    if (need(r, (uint64_t)n, what, who)) return -1;
    *v = le(r->buf + r->pos, n);
    r->pos += (uint64_t)n;
    return 0;
}

/* A length-prefixed string, borrowed; max: cap on its length. */
static int rd_str(rd *r, const char **s, uint64_t *len, uint64_t max, const char *what, const char *who) {
    uint64_t n;
    if (rd_uint(r, 8, &n, what, who)) return -1;
    if (n > max)
        return qw_errf(r->err, "gguf: %s: %s%s%s: length %llu exceeds the limit %llu", r->label, who ? who : "",
                       who ? ": " : "", what, (unsigned long long)n, (unsigned long long)max);
    if (need(r, n, what, who)) return -1;
    *s = (const char *)r->buf + r->pos;
    *len = n;
    r->pos += n;
    return 0;
}

/* A key or tensor name as an owned C string: non-empty, no NUL. */
static char *rd_name(rd *r, const char *what) {
    const char *s;
    uint64_t n;
    if (rd_str(r, &s, &n, GGUF_MAX_NAME, what, NULL)) return NULL;
    if (n == 0 || memchr(s, 0, (size_t)n)) {
        qw_errf(r->err, "gguf: %s: %s at offset %llu is empty or contains a NUL byte", r->label, what,
                (unsigned long long)(r->pos - n));
        return NULL;
    }
    char *c = malloc((size_t)n + 1);
    if (!c) {
        qw_errf(r->err, "gguf: %s: out of memory", r->label);
        return NULL;
    }
    memcpy(c, s, (size_t)n);
    c[n] = 0;
    return c;
}

/* One value of type t (not ARRAY) into kv's scalar fields. */
static int rd_scalar(rd *r, gguf_kv *kv, uint32_t t) {
    if (t == GGUF_T_STRING) return rd_str(r, &kv->str, &kv->str_len, UINT64_MAX, "string value", kv->key);
    uint64_t v;
    if (rd_uint(r, vtype_size[t], &v, "value", kv->key)) return -1;
    switch (t) {
    case GGUF_T_U8: case GGUF_T_U16: case GGUF_T_U32: case GGUF_T_U64: kv->u = v; break;
    case GGUF_T_I8: kv->i = (int8_t)v; break;
    case GGUF_T_I16: kv->i = (int16_t)v; break;
    case GGUF_T_I32: kv->i = (int32_t)(uint32_t)v; break;
    case GGUF_T_I64: kv->i = (int64_t)v; break;
    case GGUF_T_BOOL:
        if (v > 1) return qw_errf(r->err, "gguf: %s: key '%s': bool value %llu is not 0 or 1", r->label, kv->key,
                                  (unsigned long long)v);
        kv->u = v;
        break;
    case GGUF_T_F32: {
        uint32_t b = (uint32_t)v;
        float x;
        memcpy(&x, &b, 4);
        kv->f = x;
        break;
    }
    case GGUF_T_F64: memcpy(&kv->f, &v, 8); break;
    }
    return 0;
}

static int rd_kv(rd *r, gguf_kv *kv) {
    uint64_t t;
    if (rd_uint(r, 4, &t, "value type", kv->key)) return -1;
    if (t >= GGUF_T_COUNT)
        return qw_errf(r->err, "gguf: %s: key '%s': unknown value type %llu", r->label, kv->key, (unsigned long long)t);
    kv->type = (uint32_t)t;
    if (t != GGUF_T_ARRAY) return rd_scalar(r, kv, kv->type);
    uint64_t et, n;
    if (rd_uint(r, 4, &et, "array element type", kv->key) || rd_uint(r, 8, &n, "array length", kv->key)) return -1;
    if (et >= GGUF_T_COUNT)
        return qw_errf(r->err, "gguf: %s: key '%s': unknown array element type %llu", r->label, kv->key,
                       (unsigned long long)et);
    if (et == GGUF_T_ARRAY)
        return qw_errf(r->err, "gguf: %s: key '%s': nested arrays are not supported", r->label, kv->key);
    kv->arr_type = (uint32_t)et;
    kv->arr_n = n;
    kv->arr = r->buf + r->pos;
    uint64_t start = r->pos;
    if (et == GGUF_T_STRING) {
        /* every string takes at least its 8-byte length */
        if (n > (r->size - r->pos) / 8)
            return qw_errf(r->err, "gguf: %s: key '%s': array of %llu strings cannot fit in the %llu bytes left",
                           r->label, kv->key, (unsigned long long)n, (unsigned long long)(r->size - r->pos));
        for (uint64_t i = 0; i < n; i++) {
            const char *s;
            uint64_t len;
            if (rd_str(r, &s, &len, UINT64_MAX, "string array element", kv->key)) return -1;
        }
    } else {
        uint64_t es = vtype_size[et];
        if (n > (r->size - r->pos) / es)
            return qw_errf(r->err, "gguf: %s: key '%s': array of %llu %s cannot fit in the %llu bytes left (truncated?)",
                           r->label, kv->key, (unsigned long long)n, vtype_names[et],
                           (unsigned long long)(r->size - r->pos));
        if (et == GGUF_T_BOOL)
            for (uint64_t i = 0; i < n; i++)
                if (r->buf[r->pos + i] > 1)
                    return qw_errf(r->err, "gguf: %s: key '%s': bool element %llu is not 0 or 1", r->label, kv->key,
                                   (unsigned long long)i);
        r->pos += n * es;
    }
    kv->arr_bytes = r->pos - start;
    return 0;
}

static int rd_tensor(rd *r, gguf_tensor *t) {
    uint64_t nd, ty;
    if (rd_uint(r, 4, &nd, "number of dimensions", t->name)) return -1;
    if (nd < 1 || nd > GGUF_MAX_DIMS)
        return qw_errf(r->err, "gguf: %s: tensor '%s': %llu dimensions (1 to %d supported)", r->label, t->name,
                       (unsigned long long)nd, GGUF_MAX_DIMS);
    t->n_dims = (int)nd;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (int d = 0; d < t->n_dims; d++) {
        uint64_t v;
        if (rd_uint(r, 8, &v, "dimension", t->name)) return -1;
        if (v > (UINT64_C(1) << 62))
            return qw_errf(r->err, "gguf: %s: tensor '%s': dimension %d = %llu is too large", r->label, t->name, d,
                           (unsigned long long)v);
        t->ne[d] = (int64_t)v;
    }
    if (rd_uint(r, 4, &ty, "type", t->name) || rd_uint(r, 8, &t->offset, "data offset", t->name)) return -1;
    if (ty >= N_GGML_TYPES || !ggml_types[ty].name)
        return qw_errf(r->err, "gguf: %s: tensor '%s': unknown GGML type %llu", r->label, t->name,
                       (unsigned long long)ty);
    t->type = (uint32_t)ty;
    t->type_name = ggml_types[ty].name;
    /* the block types are GGML's layouts: our kernels read them in place */
    switch (ty) {
    case GGML_T_F32: t->qdtype = QW_F32; break;
    case GGML_T_F16: t->qdtype = QW_F16; break;
    case GGML_T_BF16: t->qdtype = QW_BF16; break;
    case GGML_T_Q8_0: t->qdtype = QW_Q8_0; break;
    case GGML_T_Q4_0: t->qdtype = QW_Q4_0; break;
    case GGML_T_Q4_1: t->qdtype = QW_Q4_1; break;
    case GGML_T_Q5_0: t->qdtype = QW_Q5_0; break;
    case GGML_T_Q5_1: t->qdtype = QW_Q5_1; break;
    case GGML_T_Q4_K: t->qdtype = QW_Q4_K; break;
    case GGML_T_Q5_K: t->qdtype = QW_Q5_K; break;
    case GGML_T_Q6_K: t->qdtype = QW_Q6_K; break;
    default: t->qdtype = -1;
    }
    uint64_t blck = ggml_types[ty].blck, bs = ggml_types[ty].size;
    if ((uint64_t)t->ne[0] % blck)
        return qw_errf(r->err, "gguf: %s: tensor '%s': %lld columns is not a multiple of the %s block size %llu",
                       r->label, t->name, (long long)t->ne[0], t->type_name, (unsigned long long)blck);
    /* nbytes = ne0/blck * bs * ne1 * ne2 * ne3, kept below 2^62 */
    uint64_t nb = (uint64_t)t->ne[0] / blck * bs;
    for (int d = 1; d < GGUF_MAX_DIMS; d++) {
        uint64_t v = (uint64_t)t->ne[d];
        if (v && nb > (UINT64_C(1) << 62) / v)
            return qw_errf(r->err, "gguf: %s: tensor '%s': size overflows", r->label, t->name);
        nb *= v;
    }
    if (nb > (UINT64_C(1) << 62)) return qw_errf(r->err, "gguf: %s: tensor '%s': size overflows", r->label, t->name);
    t->nbytes = nb;
    return 0;
}

/* ---------------------------------------------------------------- parse */

void gguf_free(gguf_file *f) {
    if (!f) return;
    for (uint64_t i = 0; i < f->n_kv; i++) free(f->kvs[i].key);
    for (uint64_t i = 0; i < f->n_tensors; i++) free(f->tensors[i].name);
    free(f->kvs);
    free(f->tensors);
    free(f->label);
    memset(f, 0, sizeof *f);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int cmp_off(const void *a, const void *b) {
    const gguf_tensor *x = *(const gguf_tensor *const *)a, *y = *(const gguf_tensor *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return (x->nbytes > y->nbytes) - (x->nbytes < y->nbytes);
}

/* The first name that appears twice among names[n] (sorted in place), or NULL. */
static const char *dup_name(char **names, size_t n) {
    qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 1; i < n; i++)
        if (!strcmp(names[i - 1], names[i])) return names[i];
    return NULL;
}

int gguf_parse(gguf_file *f, const uint8_t *buf, uint64_t size, const char *label, qw_err *err) {
    memset(f, 0, sizeof *f);
    if (!label) label = "gguf";
    rd r = {.buf = buf, .size = size, .label = label, .err = err};
    if (size < 24) return qw_errf(err, "gguf: %s: file too short for a GGUF header (%llu bytes)", label,
                                  (unsigned long long)size);
    if (memcmp(buf, "GGUF", 4))
        return qw_errf(err, "gguf: %s: bad magic (not a GGUF file: first bytes %02x %02x %02x %02x)", label, buf[0],
                       buf[1], buf[2], buf[3]);
    uint32_t version = (uint32_t)le(buf + 4, 4);
    if (version == 1) return qw_errf(err, "gguf: %s: GGUF version 1 is not supported (v2 and v3 are)", label);
    if (version != 2 && version != 3) {
        if ((version & 0xFFFF) == 0)
            return qw_errf(err, "gguf: %s: big-endian GGUF files are not supported", label);
        return qw_errf(err, "gguf: %s: unsupported GGUF version %u (v2 and v3 are)", label, version);
    }
    uint64_t n_tensors = le(buf + 8, 8), n_kv = le(buf + 16, 8);
    r.pos = 24;
    /* A key/value is at least 8 (key length) + 1 (key) + 4 (type) + 1 bytes,
     * a tensor info at least 8 + 1 + 4 + 8 + 4 + 8. */
    if (n_kv > GGUF_MAX_KV || n_kv > (size - r.pos) / 14)
        return qw_errf(err, "gguf: %s: key/value count %llu is impossible for a %llu-byte file (limit %u)", label,
                       (unsigned long long)n_kv, (unsigned long long)size, GGUF_MAX_KV);
    if (n_tensors > GGUF_MAX_TENSORS || n_tensors > (size - r.pos) / 33)
        return qw_errf(err, "gguf: %s: tensor count %llu is impossible for a %llu-byte file (limit %u)", label,
                       (unsigned long long)n_tensors, (unsigned long long)size, GGUF_MAX_TENSORS);
    f->label = strdup(label);
    f->version = version;
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    f->kvs = calloc(n_kv ? (size_t)n_kv : 1, sizeof *f->kvs);
    f->tensors = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof *f->tensors);
    char **names = calloc((size_t)(n_kv > n_tensors ? n_kv : n_tensors) + 1, sizeof *names);
    gguf_tensor **order = calloc((size_t)n_tensors + 1, sizeof *order);
    if (!f->label || !f->kvs || !f->tensors || !names || !order) {
        qw_errf(err, "gguf: %s: out of memory", label);
        goto fail;
    }
    for (uint64_t i = 0; i < n_kv; i++) {
        gguf_kv *kv = &f->kvs[i];
        kv->key = rd_name(&r, "key");
        if (!kv->key) goto fail;
        f->n_kv = i + 1;
        if (rd_kv(&r, kv)) goto fail;
        names[i] = kv->key;
    }
    const char *d = dup_name(names, (size_t)n_kv);
    if (d) {
        qw_errf(err, "gguf: %s: key '%s' appears twice", label, d);
        goto fail;
    }
    const gguf_kv *al = gguf_find_kv(f, "general.alignment");
    if (al) {
        if (al->type != GGUF_T_U32) {
            qw_errf(err, "gguf: %s: key 'general.alignment': type %s, expected uint32", label,
                    gguf_vtype_name(al->type));
            goto fail;
        }
        if (al->u == 0 || (al->u & (al->u - 1)) || al->u > GGUF_MAX_ALIGNMENT) {
            qw_errf(err, "gguf: %s: key 'general.alignment': %llu is not a power of two up to %u", label,
                    (unsigned long long)al->u, GGUF_MAX_ALIGNMENT);
            goto fail;
        }
        f->alignment = (uint32_t)al->u;
    }
    for (uint64_t i = 0; i < n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        t->name = rd_name(&r, "tensor name");
        if (!t->name) goto fail;
        f->n_tensors = i + 1;
        if (rd_tensor(&r, t)) goto fail;
        names[i] = t->name;
        order[i] = t;
    }
    d = dup_name(names, (size_t)n_tensors);
    if (d) {
        qw_errf(err, "gguf: %s: tensor '%s' appears twice", label, d);
        goto fail;
    }
    /* The data section starts at the next multiple of the alignment (r.pos
     * <= size < 2^64 - 2^24, so this cannot wrap). */
    uint64_t a = f->alignment;
    f->data_offset = (r.pos + a - 1) / a * a;
    if (n_tensors && f->data_offset > size) {
        qw_errf(err, "gguf: %s: data section would start at %llu, past the end of the file (%llu bytes; truncated?)",
                label, (unsigned long long)f->data_offset, (unsigned long long)size);
        goto fail;
    }
    uint64_t data_size = f->data_offset <= size ? size - f->data_offset : 0;
    for (uint64_t i = 0; i < n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        if (t->offset % a) {
            qw_errf(err, "gguf: %s: tensor '%s': data offset %llu is not a multiple of the alignment %llu", label,
                    t->name, (unsigned long long)t->offset, (unsigned long long)a);
            goto fail;
        }
        if (t->offset > data_size || t->nbytes > data_size - t->offset) {
            qw_errf(err, "gguf: %s: tensor '%s': bytes [%llu, %llu) lie outside the %llu-byte data section (truncated?)",
                    label, t->name, (unsigned long long)t->offset, (unsigned long long)t->offset + t->nbytes,
                    (unsigned long long)data_size);
            goto fail;
        }
        t->data = buf + f->data_offset + t->offset;
    }
    qsort(order, (size_t)n_tensors, sizeof *order, cmp_off);
    for (uint64_t i = 1; i < n_tensors; i++) {
        const gguf_tensor *x = order[i - 1], *y = order[i];
        if (x->nbytes && y->nbytes && x->offset + x->nbytes > y->offset) {
            qw_errf(err, "gguf: %s: tensors '%s' and '%s' overlap", label, x->name, y->name);
            goto fail;
        }
    }
    free(names);
    free(order);
    return 0;
fail:
    free(names);
    free(order);
    gguf_free(f);
    return -1;
}

/* ------------------------------------------------------------- lookups */

const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key) {
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (!strcmp(f->kvs[i].key, key)) return &f->kvs[i];
    return NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name) {
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (!strcmp(f->tensors[i].name, name)) return &f->tensors[i];
    return NULL;
}

static const gguf_kv *get(const gguf_file *f, const char *key, int required, int *rc, qw_err *err) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    *rc = kv ? 1 : required ? qw_errf(err, "gguf: %s: missing key '%s'", f->label, key) : 0;
    return kv;
}

static int is_int_type(uint32_t t) {
    return t == GGUF_T_U8 || t == GGUF_T_I8 || t == GGUF_T_U16 || t == GGUF_T_I16 || t == GGUF_T_U32 ||
           t == GGUF_T_I32 || t == GGUF_T_U64 || t == GGUF_T_I64;
}

static int is_signed(uint32_t t) { return t == GGUF_T_I8 || t == GGUF_T_I16 || t == GGUF_T_I32 || t == GGUF_T_I64; }

int gguf_get_int(const gguf_file *f, const char *key, int required, int64_t lo, int64_t hi, int64_t *out,
                 qw_err *err) {
    int rc;
    const gguf_kv *kv = get(f, key, required, &rc, err);
    if (rc <= 0) return rc;
    if (!is_int_type(kv->type))
        return qw_errf(err, "gguf: %s: key '%s': type %s, expected an integer", f->label, key,
                       gguf_vtype_name(kv->type));
    int ok = is_signed(kv->type) ? kv->i >= lo && kv->i <= hi
                                 : kv->u <= (uint64_t)INT64_MAX && (int64_t)kv->u >= lo && (int64_t)kv->u <= hi;
    if (!ok) {
        if (is_signed(kv->type))
            return qw_errf(err, "gguf: %s: key '%s' = %lld out of range [%lld, %lld]", f->label, key,
                           (long long)kv->i, (long long)lo, (long long)hi);
        return qw_errf(err, "gguf: %s: key '%s' = %llu out of range [%lld, %lld]", f->label, key,
                       (unsigned long long)kv->u, (long long)lo, (long long)hi);
    }
    *out = is_signed(kv->type) ? kv->i : (int64_t)kv->u;
    return 1;
}

int gguf_get_num(const gguf_file *f, const char *key, int required, double lo, double hi, double *out,
                 qw_err *err) {
    int rc;
    const gguf_kv *kv = get(f, key, required, &rc, err);
    if (rc <= 0) return rc;
    if (kv->type != GGUF_T_F32 && kv->type != GGUF_T_F64)
        return qw_errf(err, "gguf: %s: key '%s': type %s, expected a float", f->label, key,
                       gguf_vtype_name(kv->type));
    if (!(kv->f >= lo && kv->f <= hi)) /* also refuses NaN */
        return qw_errf(err, "gguf: %s: key '%s' = %.17g out of range [%g, %g]", f->label, key, kv->f, lo, hi);
    *out = kv->f;
    return 1;
}

int gguf_get_str(const gguf_file *f, const char *key, int required, const char **s, uint64_t *len, qw_err *err) {
    int rc;
    const gguf_kv *kv = get(f, key, required, &rc, err);
    if (rc <= 0) return rc;
    if (kv->type != GGUF_T_STRING)
        return qw_errf(err, "gguf: %s: key '%s': type %s, expected a string", f->label, key,
                       gguf_vtype_name(kv->type));
    *s = kv->str;
    *len = kv->str_len;
    return 1;
}

int gguf_get_arr(const gguf_file *f, const char *key, int required, uint32_t elem_type, const gguf_kv **out,
                 qw_err *err) {
    int rc;
    const gguf_kv *kv = get(f, key, required, &rc, err);
    if (rc <= 0) return rc;
    int ok = kv->type == GGUF_T_ARRAY &&
             (kv->arr_type == elem_type || (is_int_type(elem_type) && is_int_type(kv->arr_type)));
    if (!ok)
        return qw_errf(err, "gguf: %s: key '%s': type %s%s%s, expected an array of %s", f->label, key,
                       gguf_vtype_name(kv->type), kv->type == GGUF_T_ARRAY ? " of " : "",
                       kv->type == GGUF_T_ARRAY ? gguf_vtype_name(kv->arr_type) : "", gguf_vtype_name(elem_type));
    *out = kv;
    return 1;
}

const char *gguf_arr_next_str(const uint8_t **it, uint64_t *len) {
    uint64_t n = le(*it, 8);
    const char *s = (const char *)*it + 8;
    *it += 8 + n;
    *len = n;
    return s;
}

int64_t gguf_arr_int(const gguf_kv *kv, uint64_t i) {
    int es = vtype_size[kv->arr_type];
    uint64_t v = le(kv->arr + i * (uint64_t)es, es);
    switch (kv->arr_type) {
    case GGUF_T_I8: return (int8_t)v;
    case GGUF_T_I16: return (int16_t)v;
    case GGUF_T_I32: return (int32_t)(uint32_t)v;
    default: return (int64_t)v;
    }
}

#define SUPPORTED "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K"

int gguf_tensor_check(const gguf_file *f, const gguf_tensor *t, qw_err *err) {
    if (t->qdtype >= 0) return 0;
    int quant = ggml_types[t->type].blck > 1;
    return qw_errf(err, "gguf: %s: tensor '%s' has type %s: %s", f->label, t->name, t->type_name,
                   quant ? "this quantized type is not supported yet (" SUPPORTED " are)"
                         : "only " SUPPORTED " tensors are supported");
}
