/* mode_cache.c - `qwenc list` and `qwenc rm`: the models in the Hugging Face
 * cache (src/hub/cache.h), as `ollama list` / `ollama rm` show them.
 *
 * list: one line per model: its name as MODEL takes it (REPO, or
 * REPO:QUANT for each .gguf of a GGUF repo), the size on disk (blobs that
 * snapshot links to; a partial download is listed as such), the format.
 * rm REPO removes the repo's whole cache folder; rm REPO:QUANT only that
 * file's links and the blobs nothing else links to (and the folder when
 * nothing is left in it).
 */
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <strings.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "hub/cache.h"
#include "hub/gguf_pick.h"

/* snprintf for paths: a path too long for PATH_MAX is cut (and then not
 * found), which is all this listing needs. */
static void spf(char *buf, size_t cap, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void spf(char *buf, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
}

static void fmt_size(char *out, size_t cap, double b) {
    if (b >= 1e9) spf(out, cap, "%.1f GB", b / 1e9);
    else if (b >= 1e6) spf(out, cap, "%.1f MB", b / 1e6);
    else if (b >= 1e3) spf(out, cap, "%.1f kB", b / 1e3);
    else spf(out, cap, "%.0f B", b);
}

/* ---- sizes of folders (nftw has no user pointer: a file-level sum) ---- */

static int64_t g_sum;
static int g_incomplete;

static int add_size(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)ftw;
    if (flag == FTW_F && S_ISREG(st->st_mode)) {
        g_sum += (int64_t)st->st_size;
        size_t n = strlen(path);
        if (n > 11 && !strcmp(path + n - 11, ".incomplete")) g_incomplete = 1;
    }
    return 0;
}

static int64_t tree_size(const char *dir, int *incomplete) {
    g_sum = 0;
    g_incomplete = 0;
    nftw(dir, add_size, 16, FTW_PHYS);
    if (incomplete) *incomplete = g_incomplete;
    return g_sum;
}

/* The snapshot folder of refs/main, else the only/any snapshot (malloc'd). */
static char *main_snapshot(const char *repo_dir) {
    char path[PATH_MAX], commit[128] = "";
    spf(path, sizeof path, "%s/refs/main", repo_dir);
    FILE *f = fopen(path, "rb");
    if (f) {
        size_t n = fread(commit, 1, sizeof commit - 1, f);
        fclose(f);
        commit[n] = 0;
        while (n && (commit[n - 1] == '\n' || commit[n - 1] == ' ')) commit[--n] = 0;
        if (hub_commit_valid(commit, NULL) != 0) commit[0] = 0;
    }
    if (!commit[0]) {
        spf(path, sizeof path, "%s/snapshots", repo_dir);
        DIR *d = opendir(path);
        struct dirent *e;
        while (d && (e = readdir(d)))
            if (e->d_name[0] != '.') spf(commit, sizeof commit, "%.100s", e->d_name);
        if (d) closedir(d);
        if (!commit[0]) return NULL;
    }
    spf(path, sizeof path, "%s/snapshots/%s", repo_dir, commit);
    return strdup(path);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted names of the entries of dir not starting with '.' (NULL-terminated). */
static char **list_dir(const char *dir, int *n_out) {
    DIR *d = opendir(dir);
    *n_out = 0;
    if (!d) return NULL;
    int cap = 16, n = 0;
    char **v = malloc((size_t)cap * sizeof *v);
    struct dirent *e;
    while (v && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (n + 1 >= cap) {
            char **nv = realloc(v, (size_t)(cap *= 2) * sizeof *v);
            if (!nv) break;
            v = nv;
        }
        v[n] = strdup(e->d_name);
        if (v[n]) n++;
    }
    closedir(d);
    if (!v) return NULL;
    v[n] = NULL;
    qsort(v, (size_t)n, sizeof *v, cmp_str);
    *n_out = n;
    return v;
}

static void free_list(char **v, int n) {
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

/* "models--ORG--NAME" -> "ORG/NAME" (names cannot hold "--": cache.h). */
static int repo_of(const char *folder, char *out, size_t cap) {
    if (strncmp(folder, "models--", 8) != 0) return -1;
    spf(out, cap, "%s", folder + 8);
    char *sep = strstr(out, "--");
    if (sep) {
        *sep = '/';
        memmove(sep + 1, sep + 2, strlen(sep + 2) + 1);
    }
    return hub_repo_valid(out, NULL);
}

static void list_usage(FILE *f) {
    fputs("usage: qwenc list\n"
          "Lists the models in the Hugging Face cache ($HF_HUB_CACHE, else $HF_HOME/hub, default\n"
          "~/.cache/huggingface/hub), as MODEL takes them: REPO, or REPO:QUANT for a GGUF file,\n"
          "with their size on disk.\n", f);
}

int mode_list(int argc, char **argv) {
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { list_usage(stdout); return 0; }
        fprintf(stderr, "qwenc list: unexpected argument '%s'\n", argv[i]);
        list_usage(stderr);
        return 2;
    }
    qw_err err = {{0}};
    char *cache = hub_cache_dir(&err);
    if (!cache) { fprintf(stderr, "qwenc list: %s\n", err.msg); return 1; }
    int n = 0;
    char **names = list_dir(cache, &n);
    printf("%-56s %10s  %s\n", "NAME", "SIZE", "FORMAT");
    int shown = 0;
    for (int i = 0; i < n; i++) {
        char repo[256], path[PATH_MAX];
        if (repo_of(names[i], repo, sizeof repo) != 0) continue;
        spf(path, sizeof path, "%s/%s", cache, names[i]);
        char *snap = main_snapshot(path);
        int n_files = 0, incomplete = 0;
        char **files = snap ? list_dir(snap, &n_files) : NULL;
        char sz[32];
        int ggufs = 0;
        for (int k = 0; k < n_files; k++) {
            char tag[64], full[PATH_MAX];
            int part, count;
            if (hub_gguf_quant(files[k], tag, sizeof tag, &part, &count) != 0) continue;
            if (count > 1 && part != 1) continue; /* a split model is one row, at its first part */
            struct stat st;
            spf(full, sizeof full, "%s/%s", snap, files[k]);
            if (stat(full, &st) != 0) continue;
            double bytes = (double)st.st_size;
            int parts = 1;
            for (int j = 0; j < n_files && count > 1; j++) {
                char tj[64];
                int pj, cj;
                if (j == k || hub_gguf_quant(files[j], tj, sizeof tj, &pj, &cj) != 0 || cj != count ||
                    strcmp(tj, tag) != 0)
                    continue;
                spf(full, sizeof full, "%s/%s", snap, files[j]);
                if (stat(full, &st) == 0) {
                    bytes += (double)st.st_size;
                    parts++;
                }
            }
            fmt_size(sz, sizeof sz, bytes);
            char name[400];
            spf(name, sizeof name, "%s:%s", repo, tag[0] ? tag : files[k]);
            if (count > 1)
                printf("%-56s %10s  GGUF, %d parts%s\n", name, sz, count,
                       parts < count ? " (parts missing: qwenc pull fetches them)" : "");
            else printf("%-56s %10s  GGUF\n", name, sz);
            ggufs++;
        }
        if (!ggufs) {
            int64_t total = tree_size(path, &incomplete);
            fmt_size(sz, sizeof sz, (double)total);
            int st_files = 0;
            for (int k = 0; k < n_files; k++) st_files += strstr(files[k], ".safetensors") != NULL;
            printf("%-56s %10s  %s%s\n", repo, sz, st_files ? "safetensors" : snap ? "no weights" : "no snapshot",
                   incomplete ? " (partial download: qwenc pull resumes it)" : "");
        }
        shown++;
        free_list(files, n_files);
        free(snap);
    }
    if (!shown) fprintf(stderr, "qwenc list: no models in %s (get one with qwenc pull REPO)\n", cache);
    free_list(names, n);
    free(cache);
    return 0;
}

/* ---- rm ---------------------------------------------------------------- */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st; (void)ftw;
    int rc = flag == FTW_DP ? rmdir(path) : unlink(path);
    if (rc != 0) fprintf(stderr, "qwenc rm: %s: %s\n", path, strerror(errno));
    return rc != 0;
}

static void rm_usage(FILE *f) {
    fputs("usage: qwenc rm REPO[:QUANT] ...\n"
          "Removes a model from the Hugging Face cache: REPO, every file of it; REPO:QUANT, only that\n"
          "GGUF file (blobs still linked from elsewhere are kept). See qwenc list.\n", f);
}

/* REPO:QUANT: unlink that file from every snapshot; remove its blob when no
 * other link points to it. */
static int rm_quant(const char *repo_dir, const char *spec, const char *quant, int64_t *freed) {
    char path[PATH_MAX];
    spf(path, sizeof path, "%s/snapshots", repo_dir);
    int n_snaps = 0, removed = 0;
    char **snaps = list_dir(path, &n_snaps);
    for (int s = 0; s < n_snaps; s++) {
        char snap[PATH_MAX];
        spf(snap, sizeof snap, "%s/%s", path, snaps[s]);
        int n_files = 0;
        char **files = list_dir(snap, &n_files);
        for (int k = 0; k < n_files; k++) {
            char tag[64], full[PATH_MAX], target[PATH_MAX];
            int part, count;
            if (hub_gguf_quant(files[k], tag, sizeof tag, &part, &count) != 0 || strcasecmp(tag, quant) != 0) continue;
            spf(full, sizeof full, "%s/%s", snap, files[k]);
            struct stat st;
            if (stat(full, &st) == 0) *freed += (int64_t)st.st_size;
            ssize_t tl = readlink(full, target, sizeof target - 1);
            if (unlink(full) != 0) {
                fprintf(stderr, "qwenc rm: %s: %s\n", full, strerror(errno));
                continue;
            }
            removed++;
            if (tl > 0) {
                /* ../../blobs/<etag>: gone unless another snapshot links it */
                target[tl] = 0;
                const char *b = strrchr(target, '/');
                char blob[PATH_MAX];
                spf(blob, sizeof blob, "%s/blobs/%s", repo_dir, b ? b + 1 : target);
                int still = 0;
                for (int s2 = 0; s2 < n_snaps && !still; s2++) {
                    char other[PATH_MAX];
                    spf(other, sizeof other, "%s/%s/%s", path, snaps[s2], files[k]);
                    still = access(other, F_OK) == 0;
                }
                if (!still) unlink(blob);
            }
        }
        free_list(files, n_files);
    }
    free_list(snaps, n_snaps);
    if (!removed) {
        fprintf(stderr, "qwenc rm: %s: no %s file in the cache (see qwenc list)\n", spec, quant);
        return 1;
    }
    return 0;
}

int mode_rm(int argc, char **argv) {
    if (argc == 0) { rm_usage(stderr); return 2; }
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { rm_usage(stdout); return 0; }
        else if (argv[i][0] == '-') {
            fprintf(stderr, "qwenc rm: unknown option '%s'\n", argv[i]);
            return 2;
        }
    int status = 0;
    for (int i = 0; i < argc; i++) {
        char repo[512];
        const char *quant;
        qw_err err = {{0}};
        if (hub_split_spec(argv[i], repo, sizeof repo, &quant) != 0 || hub_repo_valid(repo, &err) != 0) {
            fprintf(stderr, "qwenc rm: '%s': %s\n", argv[i], err.msg[0] ? err.msg : "expected REPO or REPO:QUANT");
            return 2;
        }
        char *dir = hub_repo_dir(repo, &err);
        struct stat st;
        if (!dir || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "qwenc rm: %s is not in the Hugging Face cache%s%s (see qwenc list)\n", repo,
                    dir ? ": no " : "", dir ? dir : "");
            free(dir);
            status = 1;
            continue;
        }
        int64_t freed = 0;
        int rc;
        if (quant) {
            rc = rm_quant(dir, argv[i], quant, &freed);
            /* Its last file gone: the repo's folder goes too (refs, empty snapshots). */
            char blobs[PATH_MAX];
            spf(blobs, sizeof blobs, "%s/blobs", dir);
            int n_left = 0;
            char **left = list_dir(blobs, &n_left);
            free_list(left, n_left);
            if (rc == 0 && n_left == 0) nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        } else {
            freed = tree_size(dir, NULL);
            rc = nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0;
        }
        char sz[32];
        fmt_size(sz, sizeof sz, (double)freed);
        if (rc == 0) printf("removed %s (%s)\n", argv[i], sz);
        else status = 1;
        free(dir);
    }
    return status;
}
