/* gguf_open.c - mapping GGUF models from disk: one file, or a model split
 * into parts.
 *
 * A split model (llama.cpp's llama-gguf-split, gguf-py's GGUFWriter with
 * split_max_tensors/size: how the hub's big GGUF repos ship) is a set of
 * complete GGUF files named "<prefix>-00001-of-00003.gguf" ... Each part
 * carries split.no (0-based), split.count and split.tensors.count; the first
 * part holds the metadata, every part a share of the tensors, each in its
 * own data section. gguf_open() of any part maps every part and presents
 * one gguf_file: the first part's metadata and all parts' tensors (each
 * tensor's data points into its own part's mapping). Missing, doubled,
 * mismatched parts and a tensor found in two parts are refused by name.
 */
#include "format/gguf.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPLIT_SUFFIX_LEN 20 /* "-00001-of-00003.gguf" */

int gguf_split_name(const char *path, size_t *prefix_len, int *no, int *count) {
    size_t n = path ? strlen(path) : 0;
    if (n <= SPLIT_SUFFIX_LEN || !gguf_is_path(path)) return 0;
    const char *s = path + n - SPLIT_SUFFIX_LEN;
    int a = 0, b = 0;
    if (s[0] != '-' || memcmp(s + 6, "-of-", 4) != 0) return 0;
    for (int i = 0; i < 5; i++) {
        if (s[1 + i] < '0' || s[1 + i] > '9' || s[10 + i] < '0' || s[10 + i] > '9') return 0;
        a = a * 10 + (s[1 + i] - '0');
        b = b * 10 + (s[10 + i] - '0');
    }
    if (a < 1 || b < 1 || a > b) return 0;
    *prefix_len = n - SPLIT_SUFFIX_LEN;
    *no = a;
    *count = b;
    return 1;
}

/* "<prefix>-%05d-of-%05d.gguf" (malloc'd), the name llama.cpp gives part
 * `no` (1-based) of `count`. */
static char *part_path(const char *path, size_t prefix_len, int no, int count) {
    size_t len = prefix_len + SPLIT_SUFFIX_LEN + 1;
    char *p = malloc(len);
    if (p) snprintf(p, len, "%.*s-%05d-of-%05d.gguf", (int)prefix_len, path, no, count);
    return p;
}

/* split.no / split.count of a parsed file: 0 (not split) or 1; -1 with a
 * message when present but malformed. */
static int split_keys(const gguf_file *f, int *no, int *count, int64_t *tensors, qw_err *err) {
    int64_t v;
    *no = 0;
    *count = 1;
    *tensors = -1;
    int rc = gguf_get_int(f, "split.count", 0, 1, 65535, &v, err);
    if (rc <= 0) return rc;
    *count = (int)v;
    if (gguf_get_int(f, "split.no", 1, 0, *count - 1, &v, err) < 0) return -1;
    *no = (int)v;
    if (gguf_get_int(f, "split.tensors.count", 0, 0, INT32_MAX, tensors, err) < 0) return -1;
    return *count > 1;
}

static int map_one(qw_mapfile *m, gguf_file *f, const char *path, int willneed, qw_err *err) {
    if (mapfile_open_ex(m, path, willneed, err)) return -1;
    if (gguf_parse(f, m->data, m->size, path, err)) {
        mapfile_close(m);
        return -1;
    }
    return 0;
}

/* Parts 2..count of the split model whose first part is g (named path):
 * map each, check its numbering, move its tensors into g->f. */
static int add_parts(gguf_map *g, const char *path, size_t prefix_len, int count, int64_t want_tensors,
                     qw_err *err) {
    g->parts = calloc((size_t)count - 1, sizeof *g->parts);
    if (!g->parts) return qw_errf(err, "gguf: %s: out of memory", path);
    for (int k = 1; k < count; k++) {
        char *pp = part_path(path, prefix_len, k + 1, count);
        if (!pp) return qw_errf(err, "gguf: %s: out of memory", path);
        gguf_file pf;
        int rc = map_one(&g->parts[k - 1], &pf, pp, 1, err);
        if (rc) {
            free(pp);
            return qw_err_prefix(err, "gguf: part %d of %d of the split model %s", k + 1, count, path);
        }
        g->n_parts++;
        g->size += g->parts[k - 1].size;
        int no, cnt;
        int64_t nt;
        rc = split_keys(&pf, &no, &cnt, &nt, err);
        if (rc >= 0 && (rc == 0 || no != k || cnt != count))
            rc = qw_errf(err, "gguf: %s: expected part %d of %d of %s, but the file says %s part %d of %d", pp,
                         k + 1, count, path, rc ? "it is" : "it is not split:", no + 1, cnt);
        gguf_tensor *nt_arr = rc < 0 ? NULL
                                     : realloc(g->f.tensors, (size_t)(g->f.n_tensors + pf.n_tensors) * sizeof *nt_arr);
        if (rc >= 0 && !nt_arr) rc = qw_errf(err, "gguf: %s: out of memory", pp);
        if (rc >= 0) {
            g->f.tensors = nt_arr;
            for (uint64_t i = 0; i < pf.n_tensors && rc >= 0; i++) {
                if (gguf_find_tensor(&g->f, pf.tensors[i].name))
                    rc = qw_errf(err, "gguf: %s: tensor '%s' is also in an earlier part of %s", pp,
                                 pf.tensors[i].name, path);
                else {
                    g->f.tensors[g->f.n_tensors++] = pf.tensors[i]; /* the name moves with it */
                    pf.tensors[i].name = NULL;
                }
            }
        }
        gguf_free(&pf);
        free(pp);
        if (rc < 0) return -1;
    }
    if (want_tensors >= 0 && (uint64_t)want_tensors != g->f.n_tensors)
        return qw_errf(err, "gguf: %s: split.tensors.count says %lld tensors, the %d parts hold %llu", path,
                       (long long)want_tensors, count, (unsigned long long)g->f.n_tensors);
    return 0;
}

static int open_map(gguf_map *g, const char *path, int willneed, qw_err *err) {
    memset(g, 0, sizeof *g);
    if (map_one(&g->map, &g->f, path, willneed, err)) return -1;
    g->n_parts = 1;
    g->size = g->map.size;
    int no, count;
    int64_t tensors;
    int rc = split_keys(&g->f, &no, &count, &tensors, err);
    if (rc <= 0) {
        if (rc < 0) gguf_close(g);
        return rc;
    }
    size_t pl;
    int name_no, name_count;
    if (!gguf_split_name(path, &pl, &name_no, &name_count) || name_no != no + 1 || name_count != count) {
        qw_errf(err, "gguf: %s: part %d of %d of a split model, but its name does not end in -%05d-of-%05d.gguf, "
                "so the other parts cannot be found (keep the names llama-gguf-split gave them)", path, no + 1,
                count, no + 1, count);
        gguf_close(g);
        return -1;
    }
    if (no != 0) { /* a later part was named: the model starts at the first */
        gguf_close(g);
        char *first = part_path(path, pl, 1, count);
        if (!first) return qw_errf(err, "gguf: %s: out of memory", path);
        rc = open_map(g, first, willneed, err);
        int fno, fcount;
        if (rc == 0 && (split_keys(&g->f, &fno, &fcount, &tensors, err) < 0 || fcount != count)) {
            qw_errf(err, "gguf: %s is part %d of %d, but %s says it is part %d of %d", path, no + 1, count, first,
                    fno + 1, fcount); /* the first part must agree on the count */
            gguf_close(g);
            rc = -1;
        }
        free(first);
        return rc;
    }
    /* Metadata readers (the tokenizer) need only the first part. */
    if (!willneed) return 0;
    if (add_parts(g, path, pl, count, tensors, err)) {
        gguf_close(g);
        return -1;
    }
    return 0;
}

int gguf_open(gguf_map *g, const char *path, qw_err *err) { return open_map(g, path, 1, err); }
int gguf_open_meta(gguf_map *g, const char *path, qw_err *err) { return open_map(g, path, 0, err); }

void gguf_close(gguf_map *g) {
    if (!g) return;
    gguf_free(&g->f);
    mapfile_close(&g->map);
    for (int k = 0; k + 1 < g->n_parts; k++) mapfile_close(&g->parts[k]);
    free(g->parts);
    memset(g, 0, sizeof *g);
}

int gguf_dir_single(const char *dir, char **path, qw_err *err) {
    *path = NULL;
    DIR *d = opendir(dir);
    if (!d) return 0;
    char first[512] = "", other[512] = "";
    size_t first_pl = 0;
    int n = 0, n_models = 0, first_count = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.' || !gguf_is_path(e->d_name)) continue;
        size_t pl;
        int no, count;
        int split = gguf_split_name(e->d_name, &pl, &no, &count);
        /* the parts of one split model count as one model, named by part 1 */
        int same = n > 0 && split && first_count > 0 && count == first_count && pl == first_pl &&
                   !strncmp(e->d_name, first, pl);
        if (same) continue;
        if (n++ == 0) {
            snprintf(first, sizeof first, "%s", e->d_name);
            first_pl = split ? pl : 0;
            first_count = split ? count : 0;
            if (split && no != 1) /* name the model by its first part */
                snprintf(first + pl, sizeof first - pl, "-%05d-of-%05d.gguf", 1, count);
        } else if (!other[0]) {
            snprintf(other, sizeof other, "%s", e->d_name);
        }
        n_models = n;
    }
    closedir(d);
    if (n_models > 1)
        return qw_errf(err, "model: %s: several .gguf files (%s, %s, ...): name the one to load", dir, first, other);
    if (!n_models) return 0;
    size_t len = strlen(dir) + strlen(first) + 2;
    *path = malloc(len);
    if (!*path) return qw_errf(err, "model: %s: out of memory", dir);
    snprintf(*path, len, "%s/%s", dir, first);
    return 1;
}
