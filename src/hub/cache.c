/* cache.c - the Hugging Face cache layout and name validation; see cache.h.
 *
 * Follows huggingface_hub's file_download.py / constants.py: HF_HUB_CACHE,
 * else HF_HOME/hub, else ~/.cache/huggingface/hub (XDG_CACHE_HOME honoured
 * as huggingface_hub does); repo folders "models--" + id with '/' -> "--".
 * Validation is deliberately stricter than the hub's: a name that would not
 * be safe as a path is refused rather than escaped.
 */
#include "hub/cache.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char *dup_printf(const char *a, const char *b, const char *c) {
    size_t n = strlen(a) + strlen(b) + strlen(c) + 1;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s%s%s", a, b, c);
    return p;
}

char *hub_path_join(const char *a, const char *b) { return dup_printf(a, "/", b); }

int hub_mkdir_p(const char *path, qw_err *err) {
    size_t n = strlen(path);
    char *buf = malloc(n + 1);
    if (!buf) return qw_errf(err, "hub: out of memory");
    memcpy(buf, path, n + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
            qw_errf(err, "hub: mkdir %s: %s", buf, strerror(errno));
            free(buf);
            return -1;
        }
        *p = '/';
    }
    int rc = 0;
    struct stat st;
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        rc = qw_errf(err, "hub: mkdir %s: %s", buf, strerror(errno));
    else if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
        rc = qw_errf(err, "hub: %s exists and is not a folder", buf);
    free(buf);
    return rc;
}

char *hub_cache_dir(qw_err *err) {
    const char *v = getenv("HF_HUB_CACHE");
    if (!v || !*v) v = getenv("HUGGINGFACE_HUB_CACHE");
    if (v && *v) {
        char *p = strdup(v);
        if (!p) qw_errf(err, "hub: out of memory");
        return p;
    }
    const char *home = getenv("HF_HOME");
    char *p;
    if (home && *home) p = dup_printf(home, "/hub", "");
    else {
        const char *xdg = getenv("XDG_CACHE_HOME");
        const char *h = getenv("HOME");
        if (xdg && *xdg) p = dup_printf(xdg, "/huggingface/hub", "");
        else if (h && *h) p = dup_printf(h, "/.cache/huggingface/hub", "");
        else {
            qw_errf(err, "hub: neither HF_HOME nor HOME is set: no cache folder");
            return NULL;
        }
    }
    if (!p) qw_errf(err, "hub: out of memory");
    return p;
}

static int name_char(int c, int plus) {
    return isalnum(c) || c == '.' || c == '_' || c == '-' || (plus && c == '+');
}

int hub_repo_valid(const char *repo, qw_err *err) {
    if (!repo || !*repo) return qw_errf(err, "hub: empty repo id");
    size_t n = strlen(repo);
    if (n > 200) return qw_errf(err, "hub: repo id too long (%zu characters)", n);
    const char *slash = strchr(repo, '/');
    if (slash && strchr(slash + 1, '/'))
        return qw_errf(err, "hub: repo id '%s' must be ORG/NAME (one '/')", repo);
    const char *parts[2] = {repo, slash ? slash + 1 : NULL};
    for (int i = 0; i < 2 && parts[i]; i++) {
        const char *p = parts[i];
        size_t len = (i == 0 && slash) ? (size_t)(slash - repo) : strlen(p);
        if (len == 0 || len > 96)
            return qw_errf(err, "hub: repo id '%s': each part must have 1 to 96 characters", repo);
        for (size_t k = 0; k < len; k++)
            if (!name_char((unsigned char)p[k], 0))
                return qw_errf(err, "hub: repo id '%s': character '%c' not allowed (use A-Z a-z 0-9 . _ -)",
                               repo, isprint((unsigned char)p[k]) ? p[k] : '?');
        if (p[0] == '.' || p[0] == '-' || p[len - 1] == '.' || p[len - 1] == '-')
            return qw_errf(err, "hub: repo id '%s': a part may not start or end with '.' or '-'", repo);
    }
    if (strstr(repo, "--") || strstr(repo, ".."))
        return qw_errf(err, "hub: repo id '%s': \"--\" and \"..\" are not allowed", repo);
    return 0;
}

/* '/'-separated parts of allowed characters; none empty, "." or "..". */
static int parts_valid(const char *s, size_t max, int plus, const char *what, qw_err *err) {
    if (!s || !*s) return qw_errf(err, "hub: empty %s", what);
    size_t n = strlen(s);
    if (n > max) return qw_errf(err, "hub: %s too long (%zu characters)", what, n);
    if (s[0] == '/') return qw_errf(err, "hub: %s '%s' must not be an absolute path", what, s);
    const char *p = s;
    while (*p) {
        const char *e = strchr(p, '/');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == 0) return qw_errf(err, "hub: %s '%s' has an empty path part", what, s);
        if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
            return qw_errf(err, "hub: %s '%s' must not contain '.' or '..' parts", what, s);
        for (size_t k = 0; k < len; k++)
            if (!name_char((unsigned char)p[k], plus))
                return qw_errf(err, "hub: %s '%.200s': character 0x%02x not allowed", what, s,
                               (unsigned char)p[k]);
        p += len;
        if (*p == '/') {
            p++;
            if (!*p) return qw_errf(err, "hub: %s '%s' ends with '/'", what, s);
        }
    }
    return 0;
}

int hub_revision_valid(const char *rev, qw_err *err) {
    return parts_valid(rev, 256, 0, "revision", err);
}

int hub_filename_valid(const char *name, qw_err *err) {
    return parts_valid(name, 512, 1, "file name", err);
}

int hub_etag_valid(const char *etag, qw_err *err) {
    size_t n = etag ? strlen(etag) : 0;
    if (n == 0 || n > 128) return qw_errf(err, "hub: bad ETag length %zu", n);
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)etag[i]))
            return qw_errf(err, "hub: ETag '%.130s' has a character other than A-Z a-z 0-9", etag);
    return 0;
}

int hub_commit_valid(const char *commit, qw_err *err) {
    size_t n = commit ? strlen(commit) : 0;
    if (n != 40 && n != 64) return qw_errf(err, "hub: commit '%.80s' is not 40 hex digits", commit ? commit : "");
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)commit[i]))
            return qw_errf(err, "hub: commit '%.80s' is not hexadecimal", commit);
    return 0;
}

char *hub_repo_dir(const char *repo, qw_err *err) {
    if (hub_repo_valid(repo, err) != 0) return NULL;
    char *cache = hub_cache_dir(err);
    if (!cache) return NULL;
    char name[256] = "models--";
    size_t k = strlen(name);
    for (const char *p = repo; *p && k + 3 < sizeof name; p++) {
        if (*p == '/') { name[k++] = '-'; name[k++] = '-'; }
        else name[k++] = *p;
    }
    name[k] = 0;
    char *dir = hub_path_join(cache, name);
    free(cache);
    if (!dir) qw_errf(err, "hub: out of memory");
    return dir;
}

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

char *hub_snapshot_dir(const char *repo, const char *rev, qw_err *err) {
    if (!rev) rev = "main";
    if (hub_revision_valid(rev, err) != 0) return NULL;
    char *rdir = hub_repo_dir(repo, err);
    if (!rdir) return NULL;
    char *refpath = dup_printf(rdir, "/refs/", rev), *snap = NULL;
    char commit[128] = {0};
    if (!refpath) { qw_errf(err, "hub: out of memory"); goto out; }
    FILE *f = fopen(refpath, "rb");
    if (f) {
        size_t n = fread(commit, 1, sizeof commit - 1, f);
        fclose(f);
        commit[n] = 0;
        while (n > 0 && isspace((unsigned char)commit[n - 1])) commit[--n] = 0;
        if (hub_commit_valid(commit, err) != 0) {
            qw_err_prefix(err, "hub: %s", refpath);
            goto out;
        }
    } else if (hub_commit_valid(rev, NULL) == 0) {
        snprintf(commit, sizeof commit, "%s", rev);
    } else {
        if (!is_dir(rdir))
            qw_errf(err, "hub: '%s' is neither a folder nor a model in the Hugging Face cache (%s "
                    "not found); download it with: qwenc pull %s", repo, rdir, repo);
        else
            qw_errf(err, "hub: %s: no revision '%s' in the cache (%s missing); download it with: "
                    "qwenc pull %s --revision %s", repo, rev, refpath, repo, rev);
        goto out;
    }
    snap = dup_printf(rdir, "/snapshots/", commit);
    if (!snap) { qw_errf(err, "hub: out of memory"); goto out; }
    if (!is_dir(snap)) {
        qw_errf(err, "hub: %s: snapshot folder %s is missing (incomplete download?); run: qwenc pull %s",
                repo, snap, repo);
        free(snap);
        snap = NULL;
    }
out:
    free(refpath);
    free(rdir);
    return snap;
}
