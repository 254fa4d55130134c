/* gguf_writer.h - a small GGUF writer for tests (header-only).
 *
 * Writes the format as ggml-org/ggml docs/gguf.md describes it, byte by byte,
 * so that tests can build valid files and then break exactly one thing:
 * metadata and tensor infos are kept in tables the test edits before
 * gw_build(), and gw_build() records where each field landed so a test can
 * patch bytes afterwards (a bad offset, a huge count, ...). Tensor data is
 * whatever the test puts there (gw_tensor.data, or zero bytes).
 */
#ifndef QW_GGUF_WRITER_H
#define QW_GGUF_WRITER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { GW_U32 = 4, GW_I32 = 5, GW_F32 = 6, GW_BOOL = 7, GW_STR = 8, GW_ARR = 9, GW_U64 = 10 };

typedef struct gw_kv {
    char key[128];
    int type;              /* GW_* */
    uint64_t u;            /* U32 / U64 / I32 / BOOL */
    float f;
    const char *s;         /* STR (NUL-terminated) */
    int arr_type;          /* ARR of GW_STR or GW_I32 */
    size_t arr_n;
    const char *const *arr_s;
    const int32_t *arr_i;
} gw_kv;

typedef struct gw_tensor {
    char name[128];
    uint32_t type;         /* ggml type: 0 F32, 1 F16, 30 BF16, 12 Q4_K, ... */
    int nd;
    uint64_t ne[4];        /* innermost first */
    uint64_t nbytes;       /* data bytes (the writer trusts this) */
    const void *data;      /* NULL: zero bytes */
    /* filled by gw_build: byte positions in the output */
    size_t pos_nd, pos_ne, pos_type, pos_off, pos_data;
} gw_tensor;

typedef struct gw {
    uint32_t version;      /* 3 */
    uint32_t alignment;    /* what the data is padded to (general.alignment is a kv the test adds) */
    gw_kv kv[64];
    int n_kv;
    gw_tensor t[96];
    int n_t;
    /* output */
    uint8_t *buf;
    size_t n, cap;
    size_t pos_counts;     /* where n_tensors (u64) then n_kv (u64) are */
    size_t pos_kv[64];     /* where each key's length starts */
    size_t pos_data;       /* data section start */
} gw;

static inline void gw_init(gw *w) {
    memset(w, 0, sizeof *w);
    w->version = 3;
    w->alignment = 32;
}

static inline void gw_raw(gw *w, const void *p, size_t n) {
    if (w->n + n > w->cap) {
        size_t c = w->cap ? w->cap : 4096;
        while (c < w->n + n) c *= 2;
        w->buf = realloc(w->buf, c);
        w->cap = c;
    }
    if (p) memcpy(w->buf + w->n, p, n);
    else memset(w->buf + w->n, 0, n);
    w->n += n;
}

static inline void gw_u(gw *w, uint64_t v, int bytes) {
    uint8_t b[8];
    for (int i = 0; i < bytes; i++) b[i] = (uint8_t)(v >> (8 * i));
    gw_raw(w, b, (size_t)bytes);
}

static inline void gw_str(gw *w, const char *s) {
    gw_u(w, strlen(s), 8);
    gw_raw(w, s, strlen(s));
}

static inline gw_kv *gw_add(gw *w, const char *key, int type) {
    gw_kv *k = &w->kv[w->n_kv++];
    memset(k, 0, sizeof *k);
    snprintf(k->key, sizeof k->key, "%s", key);
    k->type = type;
    return k;
}
static inline void gw_kv_u32(gw *w, const char *key, uint32_t v) { gw_add(w, key, GW_U32)->u = v; }
static inline void gw_kv_f32(gw *w, const char *key, float v) { gw_add(w, key, GW_F32)->f = v; }
static inline void gw_kv_str(gw *w, const char *key, const char *s) { gw_add(w, key, GW_STR)->s = s; }
static inline void gw_kv_strs(gw *w, const char *key, const char *const *s, size_t n) {
    gw_kv *k = gw_add(w, key, GW_ARR);
    k->arr_type = GW_STR, k->arr_s = s, k->arr_n = n;
}
static inline void gw_kv_i32s(gw *w, const char *key, const int32_t *v, size_t n) {
    gw_kv *k = gw_add(w, key, GW_ARR);
    k->arr_type = GW_I32, k->arr_i = v, k->arr_n = n;
}

static inline gw_kv *gw_find_kv(gw *w, const char *key) {
    for (int i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, key)) return &w->kv[i];
    return NULL;
}

static inline void gw_del_kv(gw *w, const char *key) {
    for (int i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, key)) {
            memmove(&w->kv[i], &w->kv[i + 1], (size_t)(w->n_kv - i - 1) * sizeof w->kv[0]);
            w->n_kv--;
            return;
        }
}

/* A 2-D [rows, cols] (nd 2, ne = {cols, rows}) or 1-D tensor of F32/F16/BF16. */
static inline gw_tensor *gw_add_tensor(gw *w, const char *name, uint32_t type, uint64_t rows, uint64_t cols,
                                const void *data) {
    gw_tensor *t = &w->t[w->n_t++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = type;
    int es = type == 0 ? 4 : 2;
    if (cols) {
        t->nd = 2, t->ne[0] = cols, t->ne[1] = rows;
    } else {
        t->nd = 1, t->ne[0] = rows;
    }
    t->nbytes = rows * (cols ? cols : 1) * (uint64_t)es;
    t->data = data;
    return t;
}

static inline gw_tensor *gw_find_tensor(gw *w, const char *name) {
    for (int i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name)) return &w->t[i];
    return NULL;
}

static inline void gw_del_tensor(gw *w, const char *name) {
    for (int i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name)) {
            memmove(&w->t[i], &w->t[i + 1], (size_t)(w->n_t - i - 1) * sizeof w->t[0]);
            w->n_t--;
            return;
        }
}

/* Serialize into w->buf[w->n] (replacing an earlier build). */
static inline void gw_build(gw *w) {
    w->n = 0;
    gw_raw(w, "GGUF", 4);
    gw_u(w, w->version, 4);
    w->pos_counts = w->n;
    gw_u(w, (uint64_t)w->n_t, 8);
    gw_u(w, (uint64_t)w->n_kv, 8);
    for (int i = 0; i < w->n_kv; i++) {
        gw_kv *k = &w->kv[i];
        w->pos_kv[i] = w->n;
        gw_str(w, k->key);
        gw_u(w, (uint64_t)k->type, 4);
        switch (k->type) {
        case GW_U32: case GW_I32: gw_u(w, k->u, 4); break;
        case GW_U64: gw_u(w, k->u, 8); break;
        case GW_BOOL: gw_u(w, k->u, 1); break;
        case GW_F32: {
            uint32_t b;
            memcpy(&b, &k->f, 4);
            gw_u(w, b, 4);
            break;
        }
        case GW_STR: gw_str(w, k->s); break;
        case GW_ARR:
            gw_u(w, (uint64_t)k->arr_type, 4);
            gw_u(w, k->arr_n, 8);
            for (size_t j = 0; j < k->arr_n; j++) {
                if (k->arr_type == GW_STR) gw_str(w, k->arr_s[j]);
                else gw_u(w, (uint32_t)k->arr_i[j], 4);
            }
            break;
        }
    }
    uint64_t off = 0;
    for (int i = 0; i < w->n_t; i++) {
        gw_tensor *t = &w->t[i];
        gw_str(w, t->name);
        t->pos_nd = w->n;
        gw_u(w, (uint64_t)t->nd, 4);
        t->pos_ne = w->n;
        for (int d = 0; d < t->nd; d++) gw_u(w, t->ne[d], 8);
        t->pos_type = w->n;
        gw_u(w, t->type, 4);
        t->pos_off = w->n;
        gw_u(w, off, 8);
        t->pos_data = (size_t)off; /* relative for now */
        off += (t->nbytes + w->alignment - 1) / w->alignment * w->alignment;
    }
    while (w->n % w->alignment) gw_raw(w, NULL, 1);
    w->pos_data = w->n;
    for (int i = 0; i < w->n_t; i++) {
        gw_tensor *t = &w->t[i];
        t->pos_data += w->pos_data;
        gw_raw(w, t->data, (size_t)t->nbytes);
        while ((w->n - w->pos_data) % w->alignment) gw_raw(w, NULL, 1);
    }
}

/* Overwrite `bytes` little-endian bytes at pos. */
static inline void gw_patch(gw *w, size_t pos, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) w->buf[pos + (size_t)i] = (uint8_t)(v >> (8 * i));
}

static inline int gw_write(const gw *w, const char *path, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t r = fwrite(w->buf, 1, len, f);
    return fclose(f) || r != len ? -1 : 0;
}

static inline void gw_free(gw *w) {
    free(w->buf);
    w->buf = NULL;
    w->n = w->cap = 0;
}

#endif
