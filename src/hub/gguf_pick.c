/* gguf_pick.c - quant tags of .gguf file names; see gguf_pick.h. */
#include "hub/gguf_pick.h"

#include <dirent.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hub/cache.h"

/* "-00001-of-00003" right before ".gguf": its length, and the numbers. */
static size_t split_suffix(const char *s, size_t n, int *part, int *count) {
    /* the shortest form llama.cpp writes is 5 digits each: -00001-of-00003 */
    if (n < 15) return 0;
    const char *p = s + n - 15;
    if (p[0] != '-' || memcmp(p + 6, "-of-", 4) != 0) return 0;
    for (int i = 1; i <= 5; i++)
        if (!isdigit((unsigned char)p[i]) || !isdigit((unsigned char)p[9 + i])) return 0;
    *part = atoi(p + 1);
    *count = atoi(p + 10);
    if (*part < 1 || *count < 1 || *part > *count) return 0;
    return 15;
}

int hub_gguf_quant(const char *name, char *tag, size_t cap, int *part, int *count) {
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    size_t n = strlen(base);
    *part = *count = 1;
    if (n <= 5 || strcasecmp(base + n - 5, ".gguf") != 0) return -1;
    n -= 5;
    n -= split_suffix(base, n, part, count);
    size_t start = n;
    while (start > 0 && base[start - 1] != '-' && base[start - 1] != '.') start--;
    size_t len = n - start;
    if (len == 0 || len >= cap) {
        if (cap) tag[0] = 0;
        return 0;
    }
    for (size_t i = 0; i < len; i++) tag[i] = (char)toupper((unsigned char)base[start + i]);
    tag[len] = 0;
    return 0;
}

int hub_gguf_pick(const char *const *names, int n, const char *quant, const char *what, int *picked,
                  qw_err *err) {
    char tags[1024] = "";
    size_t tl = 0;
    int n_tags = 0, n_picked = 0, count = 0;
    char tag[64], first_tag[64] = "";
    for (int i = 0; i < n; i++) {
        int part, cnt;
        if (hub_gguf_quant(names[i], tag, sizeof tag, &part, &cnt) != 0) continue;
        if (!tag[0]) snprintf(tag, sizeof tag, "%s", names[i]); /* no tag: the file name stands for it */
        /* every distinct tag once, for messages */
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) {
            char t2[64];
            int p2, c2;
            if (hub_gguf_quant(names[j], t2, sizeof t2, &p2, &c2) == 0)
                seen = !strcmp(t2[0] ? t2 : names[j], tag);
        }
        if (!seen) {
            if (n_tags == 0) snprintf(first_tag, sizeof first_tag, "%s", tag);
            n_tags++;
            if (tl + strlen(tag) + 3 < sizeof tags)
                tl += (size_t)snprintf(tags + tl, sizeof tags - tl, "%s%s", tl ? ", " : "", tag);
        }
        if (quant ? strcasecmp(tag, quant) == 0 : 1) {
            picked[n_picked++] = i;
            count = cnt;
        }
    }
    if (n_tags == 0) return qw_errf(err, "%s has no .gguf file", what);
    if (!quant && n_tags > 1)
        return qw_errf(err, "%s has several quantizations (%s): pick one with %s:QUANT", what, tags, what);
    if (n_picked == 0)
        return qw_errf(err, "%s has no %s file; it has %s", what, quant, tags);
    /* a split model: every part once, in order (insertion sort by part) */
    for (int j = 1; j < n_picked; j++) {
        int v = picked[j], pv, cv, k = j;
        hub_gguf_quant(names[v], tag, sizeof tag, &pv, &cv);
        while (k > 0) {
            int pk, ck;
            hub_gguf_quant(names[picked[k - 1]], tag, sizeof tag, &pk, &ck);
            if (pk <= pv) break;
            picked[k] = picked[k - 1];
            k--;
        }
        picked[k] = v;
    }
    for (int j = 0; j <= n_picked; j++) {
        int pj = count + 1, cj = count;
        if (j < n_picked) hub_gguf_quant(names[picked[j]], tag, sizeof tag, &pj, &cj);
        if (j == n_picked && n_picked == count) break;
        if (pj != j + 1 || cj != count)
            return qw_errf(err, "%s: the %s files are not one whole model: part %d of %d is %s", what,
                           quant ? quant : first_tag, j + 1, count, pj < j + 1 ? "doubled" : "missing");
    }
    return n_picked;
}

int hub_split_spec(const char *spec, char *repo_buf, size_t cap, const char **quant) {
    const char *colon = strchr(spec, ':');
    size_t n = colon ? (size_t)(colon - spec) : strlen(spec);
    if (n >= cap) return -1;
    memcpy(repo_buf, spec, n);
    repo_buf[n] = 0;
    *quant = colon ? colon + 1 : NULL;
    if (colon && !colon[1]) return -1;
    return 0;
}

char *hub_cached_gguf(const char *repo, const char *rev, const char *quant, qw_err *err) {
    char *snap = hub_snapshot_dir(repo, rev, err);
    if (!snap) return NULL;
    DIR *d = opendir(snap);
    char **names = NULL, *path = NULL;
    int n = 0, cap = 0, *picked = NULL;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            char **nv = realloc(names, (size_t)(cap = cap ? cap * 2 : 16) * sizeof *nv);
            if (!nv) break;
            names = nv;
        }
        if ((names[n] = strdup(e->d_name))) n++;
    }
    if (d) closedir(d);
    picked = malloc((size_t)(n > 0 ? n : 1) * sizeof *picked);
    char what[600];
    snprintf(what, sizeof what, "%s (cached)", repo);
    int k = picked ? hub_gguf_pick((const char *const *)names, n, quant, what, picked, err) : -1;
    if (k >= 1) path = hub_path_join(snap, names[picked[0]]); /* a split model: its first part */
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    free(picked);
    free(snap);
    return path;
}
