/* safetensors.c - see safetensors.h. */
#include "format/safetensors.h"

#include "base/regfile.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kernels/kernels.h"

/* The reference implementation caps the header at 100 MB. */
#define ST_MAX_HEADER (100u * 1000u * 1000u)

static const struct {
    const char *name;
    int size;
    int qdtype;
} st_dtypes[] = {
    {"F64", 8, -1},  {"F32", 4, QW_F32}, {"F16", 2, QW_F16}, {"BF16", 2, QW_BF16},
    {"I64", 8, -1},  {"I32", 4, -1},     {"I16", 2, -1},     {"I8", 1, -1},
    {"U64", 8, -1},  {"U32", 4, -1},     {"U16", 2, -1},     {"U8", 1, -1},
    {"BOOL", 1, -1}, {"F8_E4M3", 1, -1}, {"F8_E5M2", 1, -1},
};

void st_file_free(st_file *f) {
    if (!f) return;
    for (int i = 0; i < f->n; i++) free(f->tensors[i].name);
    free(f->tensors);
    f->tensors = NULL;
    f->n = 0;
}

/* A JSON number that is a non-negative integer below 2^53 (exact in double). */
static int json_u64(const cJSON *j, uint64_t *out) {
    if (!cJSON_IsNumber(j)) return -1;
    double v = j->valuedouble;
    if (!(v >= 0.0) || v > 9007199254740992.0 || floor(v) != v) return -1;
    *out = (uint64_t)v;
    return 0;
}

static int cmp_by_offset(const void *a, const void *b) {
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    if (x->data != y->data) return x->data < y->data ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

static int cmp_by_name(const void *a, const void *b) {
    return strcmp((*(const st_tensor *const *)a)->name, (*(const st_tensor *const *)b)->name);
}

int st_parse(st_file *f, const uint8_t *buf, uint64_t size, const char *label, qw_err *err) {
    memset(f, 0, sizeof *f);
    if (!label) label = "safetensors";
    if (size < 8) return qw_errf(err, "safetensors: %s: file too short (%llu bytes)", label, (unsigned long long)size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | buf[i];
    if (hlen > size - 8)
        return qw_errf(err, "safetensors: %s: header length %llu exceeds the file size %llu", label,
                       (unsigned long long)hlen, (unsigned long long)size);
    if (hlen < 2 || hlen > ST_MAX_HEADER)
        return qw_errf(err, "safetensors: %s: bad header length %llu", label, (unsigned long long)hlen);
    const uint8_t *data = buf + 8 + hlen;
    uint64_t data_size = size - 8 - hlen;

    cJSON *root = cJSON_ParseWithLength((const char *)buf + 8, (size_t)hlen);
    if (!root) return qw_errf(err, "safetensors: %s: header is not valid JSON", label);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return qw_errf(err, "safetensors: %s: header is not a JSON object", label);
    }
    int n = 0;
    for (cJSON *e = root->child; e; e = e->next)
        if (strcmp(e->string, "__metadata__") != 0) n++;
    st_tensor *ts = calloc(n ? (size_t)n : 1, sizeof *ts);
    st_tensor **order = calloc(n ? (size_t)n : 1, sizeof *order);
    if (!ts || !order) {
        free(ts);
        free(order);
        cJSON_Delete(root);
        return qw_errf(err, "safetensors: %s: out of memory", label);
    }
    f->tensors = ts;
    int k = 0;
    for (cJSON *e = root->child; e; e = e->next) {
        if (!strcmp(e->string, "__metadata__")) continue;
        st_tensor *t = &ts[k];
        const char *name = e->string;
        t->name = strdup(name);
        f->n = ++k;
        if (!t->name) {
            qw_errf(err, "safetensors: %s: out of memory", label);
            goto fail;
        }
        if (!cJSON_IsObject(e)) {
            qw_errf(err, "safetensors: %s: tensor '%s': entry is not an object", label, name);
            goto fail;
        }
        const cJSON *jd = cJSON_GetObjectItemCaseSensitive(e, "dtype");
        const cJSON *js = cJSON_GetObjectItemCaseSensitive(e, "shape");
        const cJSON *jo = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
        if (!cJSON_IsString(jd)) {
            qw_errf(err, "safetensors: %s: tensor '%s': missing dtype", label, name);
            goto fail;
        }
        t->dtype = NULL;
        for (size_t d = 0; d < sizeof st_dtypes / sizeof st_dtypes[0]; d++)
            if (!strcmp(jd->valuestring, st_dtypes[d].name)) {
                t->dtype = st_dtypes[d].name;
                t->elem_size = st_dtypes[d].size;
                t->qdtype = st_dtypes[d].qdtype;
            }
        if (!t->dtype) {
            qw_errf(err, "safetensors: %s: tensor '%s': unknown dtype '%.40s'", label, name, jd->valuestring);
            goto fail;
        }
        if (!cJSON_IsArray(js)) {
            qw_errf(err, "safetensors: %s: tensor '%s': missing shape", label, name);
            goto fail;
        }
        int nd = cJSON_GetArraySize(js);
        if (nd > ST_MAX_DIMS) {
            qw_errf(err, "safetensors: %s: tensor '%s': %d dimensions (at most %d)", label, name, nd, ST_MAX_DIMS);
            goto fail;
        }
        t->n_dims = nd;
        uint64_t numel = 1;
        int d = 0;
        for (const cJSON *x = js->child; x; x = x->next, d++) {
            uint64_t v;
            if (json_u64(x, &v)) {
                qw_errf(err, "safetensors: %s: tensor '%s': shape[%d] is not a non-negative integer", label, name, d);
                goto fail;
            }
            /* overflow-safe: numel * v must stay below 2^62 / elem_size */
            if (v != 0 && numel > (UINT64_C(1) << 62) / v) {
                qw_errf(err, "safetensors: %s: tensor '%s': shape product overflows", label, name);
                goto fail;
            }
            numel *= v;
            t->shape[d] = (int64_t)v;
        }
        if (numel > (UINT64_C(1) << 62) / (uint64_t)t->elem_size) {
            qw_errf(err, "safetensors: %s: tensor '%s': shape product overflows", label, name);
            goto fail;
        }
        t->numel = (int64_t)numel;
        uint64_t b, en;
        if (!cJSON_IsArray(jo) || cJSON_GetArraySize(jo) != 2 || json_u64(jo->child, &b) ||
            json_u64(jo->child->next, &en)) {
            qw_errf(err, "safetensors: %s: tensor '%s': data_offsets must be [begin, end] integers", label, name);
            goto fail;
        }
        if (en < b) {
            qw_errf(err, "safetensors: %s: tensor '%s': data_offsets end %llu < begin %llu", label, name,
                    (unsigned long long)en, (unsigned long long)b);
            goto fail;
        }
        if (en > data_size) {
            qw_errf(err, "safetensors: %s: tensor '%s': data_offsets [%llu, %llu) outside the data region (%llu bytes; file truncated?)",
                    label, name, (unsigned long long)b, (unsigned long long)en, (unsigned long long)data_size);
            goto fail;
        }
        if (en - b != numel * (uint64_t)t->elem_size) {
            qw_errf(err, "safetensors: %s: tensor '%s': %llu bytes for shape of %llu %s elements", label, name,
                    (unsigned long long)(en - b), (unsigned long long)numel, t->dtype);
            goto fail;
        }
        t->data = data + b;
        t->nbytes = en - b;
        order[k - 1] = t;
    }
    /* No two tensors may share bytes. */
    qsort(order, (size_t)n, sizeof *order, cmp_by_offset);
    for (int i = 1; i < n; i++) {
        const st_tensor *a = order[i - 1], *c = order[i];
        if (a->nbytes && c->nbytes && a->data + a->nbytes > c->data) {
            qw_errf(err, "safetensors: %s: tensors '%s' and '%s' overlap", label, a->name, c->name);
            goto fail;
        }
    }
    /* Duplicate names (cJSON keeps both) would make lookups ambiguous. */
    qsort(order, (size_t)n, sizeof *order, cmp_by_name);
    for (int i = 1; i < n; i++)
        if (!strcmp(order[i - 1]->name, order[i]->name)) {
            qw_errf(err, "safetensors: %s: tensor '%s' appears twice", label, order[i]->name);
            goto fail;
        }
    free(order);
    cJSON_Delete(root);
    return 0;
fail:
    free(order);
    cJSON_Delete(root);
    st_file_free(f);
    return -1;
}

const st_tensor *st_find(const st_file *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->tensors[i].name, name)) return &f->tensors[i];
    return NULL;
}

void st_close(st_set *s) {
    if (!s) return;
    for (int i = 0; i < s->n_files; i++) {
        if (s->files) st_file_free(&s->files[i]);
        if (s->maps) mapfile_close(&s->maps[i]);
    }
    free(s->files);
    free(s->maps);
    memset(s, 0, sizeof *s);
}

static int st_add(st_set *s, const char *path, qw_err *err) {
    qw_mapfile *m = realloc(s->maps, (size_t)(s->n_files + 1) * sizeof *m);
    if (!m) return qw_errf(err, "safetensors: out of memory");
    s->maps = m;
    st_file *f = realloc(s->files, (size_t)(s->n_files + 1) * sizeof *f);
    if (!f) return qw_errf(err, "safetensors: out of memory");
    s->files = f;
    if (mapfile_open(&s->maps[s->n_files], path, err)) return -1;
    if (st_parse(&s->files[s->n_files], s->maps[s->n_files].data, s->maps[s->n_files].size, path, err)) {
        mapfile_close(&s->maps[s->n_files]);
        return -1;
    }
    s->n_files++;
    return 0;
}

int st_open(st_set *s, const char *path, qw_err *err) {
    memset(s, 0, sizeof *s);
    if (st_add(s, path, err)) {
        st_close(s);
        return -1;
    }
    return 0;
}

static char *read_small_file(const char *path, size_t max, size_t *len, qw_err *err) {
    const char *why = NULL;
    FILE *fp = regfile_fopen(path, &why);
    if (!fp) {
        qw_errf(err, "%s: cannot open: %s", path, why);
        return NULL;
    }
    char *b = malloc(max + 1);
    if (!b) {
        fclose(fp);
        qw_errf(err, "%s: out of memory", path);
        return NULL;
    }
    size_t n = fread(b, 1, max + 1, fp);
    int bad = ferror(fp);
    fclose(fp);
    if (bad || n > max) {
        free(b);
        qw_errf(err, "%s: %s", path, bad ? "read error" : "file too large");
        return NULL;
    }
    b[n] = 0;
    *len = n;
    return b;
}

int st_open_dir(st_set *s, const char *dir, qw_err *err) {
    memset(s, 0, sizeof *s);
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (stat(path, &st) == 0) return st_open(s, path, err);

    char ipath[4096];
    snprintf(ipath, sizeof ipath, "%s/model.safetensors.index.json", dir);
    if (stat(ipath, &st) != 0)
        return qw_errf(err, "safetensors: %s: no model.safetensors nor model.safetensors.index.json", dir);
    size_t len;
    char *txt = read_small_file(ipath, 64u << 20, &len, err);
    if (!txt) return -1;
    cJSON *root = cJSON_ParseWithLength(txt, len);
    free(txt);
    const cJSON *wm = root ? cJSON_GetObjectItemCaseSensitive(root, "weight_map") : NULL;
    if (!cJSON_IsObject(wm)) {
        cJSON_Delete(root);
        return qw_errf(err, "safetensors: %s: %s", ipath, root ? "missing weight_map object" : "not valid JSON");
    }
    int rc = 0;
    /* Unique shard names, in first-seen order. */
    for (const cJSON *e = wm->child; e && !rc; e = e->next) {
        if (!cJSON_IsString(e)) {
            rc = qw_errf(err, "safetensors: %s: weight_map[\"%s\"] is not a file name", ipath, e->string);
            break;
        }
        const char *fn = e->valuestring;
        if (!fn[0] || strchr(fn, '/') || strchr(fn, '\\') || strstr(fn, "..")) {
            rc = qw_errf(err, "safetensors: %s: weight_map[\"%s\"]: bad shard file name '%.200s'", ipath,
                         e->string, fn);
            break;
        }
        int seen = 0;
        for (const cJSON *p = wm->child; p != e; p = p->next)
            if (!strcmp(p->valuestring, fn)) {
                seen = 1;
                break;
            }
        if (seen) continue;
        snprintf(path, sizeof path, "%s/%s", dir, fn);
        rc = st_add(s, path, err);
    }
    /* Every tensor the index names must be in a shard. */
    for (const cJSON *e = wm->child; e && !rc; e = e->next)
        if (!st_set_find(s, e->string, NULL))
            rc = qw_errf(err, "safetensors: %s: tensor '%s' is not in shard %s", ipath, e->string, e->valuestring);
    cJSON_Delete(root);
    if (rc) st_close(s);
    return rc;
}

const st_tensor *st_set_find(const st_set *s, const char *name, const char **path) {
    for (int i = 0; i < s->n_files; i++) {
        const st_tensor *t = st_find(&s->files[i], name);
        if (t) {
            if (path) *path = s->maps[i].path;
            return t;
        }
    }
    return NULL;
}
