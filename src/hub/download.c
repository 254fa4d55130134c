/* download.c - the hub downloader behind `qwenc pull`; see download.h.
 *
 * One libcurl easy handle is reused for every request (keep-alive). What the
 * server says is untrusted: ETags and commits become path components only
 * after hub_etag_valid / hub_commit_valid, file names from an index only
 * after hub_filename_valid, and a body larger than the announced size is cut
 * off rather than filling the disk.
 */
#include "hub/download.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/version.h"
#include "hub/cache.h"
#include "hub/gguf_pick.h"
#include "hub/sha.h"

/* Only http(s), also after redirects (CURLOPT_PROTOCOLS_STR is curl >= 7.85). */
#if LIBCURL_VERSION_NUM >= 0x075500
#define SET_PROTOCOLS(c)                                                   \
    do {                                                                   \
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");          \
        curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");    \
    } while (0)
#else
#define SET_PROTOCOLS(c)                                                                    \
    do {                                                                                    \
        curl_easy_setopt(c, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));   \
        curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS)); \
    } while (0)
#endif

void hub_pull_opts_default(hub_pull_opts *o) {
    memset(o, 0, sizeof *o);
    o->retries = 3;
    o->offline_ok = 1;
}

/* ---- one HTTP exchange --------------------------------------------------- */

typedef struct resp {
    char etag[160], linked_etag[160], commit[96], location[2048], content_range[128];
    int64_t content_length, linked_size; /* -1 = absent */
} resp;

static void resp_reset(resp *r) {
    memset(r, 0, sizeof *r);
    r->content_length = r->linked_size = -1;
}

static int64_t parse_i64(const char *s) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || v < 0) return -1;
    return v;
}

static void setstr(char *dst, size_t cap, const char *src) {
    size_t n = strlen(src);
    if (n >= cap) n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

/* libcurl header callback: one header line per call, every response of a
 * redirect chain included. A status line starts a new response. */
static size_t on_header(char *buf, size_t size, size_t n, void *user) {
    resp *r = user;
    size_t len = size * n;
    if (len >= 5 && !strncmp(buf, "HTTP/", 5)) {
        /* Keep the commit across hops (relative redirects); reset the rest. */
        char commit[96];
        memcpy(commit, r->commit, sizeof commit);
        resp_reset(r);
        memcpy(r->commit, commit, sizeof commit);
        return len;
    }
    const char *colon = memchr(buf, ':', len);
    if (!colon) return len;
    size_t klen = (size_t)(colon - buf);
    const char *v = colon + 1;
    size_t vlen = len - klen - 1;
    while (vlen && (*v == ' ' || *v == '\t')) { v++; vlen--; }
    while (vlen && (v[vlen - 1] == '\r' || v[vlen - 1] == '\n' || v[vlen - 1] == ' ')) vlen--;
    char val[2048];
    if (vlen >= sizeof val) vlen = sizeof val - 1;
    memcpy(val, v, vlen);
    val[vlen] = 0;
#define IS(name) (klen == sizeof(name) - 1 && !strncasecmp(buf, name, klen))
    if (IS("ETag")) setstr(r->etag, sizeof r->etag, val);
    else if (IS("X-Linked-Etag")) setstr(r->linked_etag, sizeof r->linked_etag, val);
    else if (IS("X-Repo-Commit")) setstr(r->commit, sizeof r->commit, val);
    else if (IS("Location")) setstr(r->location, sizeof r->location, val);
    else if (IS("Content-Range")) setstr(r->content_range, sizeof r->content_range, val);
    else if (IS("Content-Length")) r->content_length = parse_i64(val);
    else if (IS("X-Linked-Size")) r->linked_size = parse_i64(val);
#undef IS
    return len;
}

/* An ETag as a bare name: strip W/ and the quotes. */
static void etag_normalize(char *dst, size_t cap, const char *src) {
    if (!strncmp(src, "W/", 2)) src += 2;
    size_t n = strlen(src);
    if (n >= 2 && src[0] == '"' && src[n - 1] == '"') { src++; n -= 2; }
    if (n >= cap) n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

typedef struct puller {
    CURL *curl;
    struct curl_slist *headers;
    const char *endpoint; /* without trailing '/' */
    const char *repo;
    char *repo_dir;       /* $CACHE/models--ORG--NAME */
    char commit[96];
    int progress;
    int retries;
    int n_downloaded, n_cached;
    int64_t bytes_downloaded;
} puller;

static int is_network_error(CURLcode c) {
    return c == CURLE_COULDNT_RESOLVE_HOST || c == CURLE_COULDNT_CONNECT ||
           c == CURLE_COULDNT_RESOLVE_PROXY || c == CURLE_OPERATION_TIMEDOUT ||
           c == CURLE_SSL_CONNECT_ERROR || c == CURLE_SEND_ERROR || c == CURLE_RECV_ERROR ||
           c == CURLE_GOT_NOTHING;
}

static char *file_url(const puller *p, const char *rev, const char *file) {
    size_t n = strlen(p->endpoint) + strlen(p->repo) + strlen(rev) + strlen(file) + 32;
    char *u = malloc(n);
    if (u) snprintf(u, n, "%s/%s/resolve/%s/%s", p->endpoint, p->repo, rev, file);
    return u;
}

static size_t discard_body(char *buf, size_t size, size_t n, void *user) {
    (void)buf; (void)user;
    return size * n;
}

/* HEAD the resolve URL, following relative redirects (repo renames, the
 * hub's resolve cache) but not absolute ones (the CDN holding LFS files):
 * the hub's metadata headers are on the resolve response. Returns the HTTP
 * status (> 0), or -1 with a message on a transport error; *neterr = 1 when
 * the host could not be reached at all. */
static long http_head(puller *p, const char *url0, resp *r, int *neterr, qw_err *err) {
    char url[4096];
    snprintf(url, sizeof url, "%s", url0);
    resp_reset(r);
    for (int hop = 0; hop < 6; hop++) {
        CURL *c = p->curl;
        curl_easy_reset(c);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
        curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, p->headers);
        curl_easy_setopt(c, CURLOPT_USERAGENT, "qwenc/" QWENC_VERSION);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard_body);
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 15L);
        curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
        SET_PROTOCOLS(c);
        CURLcode cc = curl_easy_perform(c);
        if (cc != CURLE_OK) {
            *neterr = is_network_error(cc);
            return qw_errf(err, "hub: HEAD %s: %s", url, curl_easy_strerror(cc));
        }
        long status = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        if (status >= 300 && status < 400 && r->location[0] == '/') {
            /* Relative redirect: same host. */
            const char *host_end = strstr(p->endpoint, "://");
            host_end = host_end ? strchr(host_end + 3, '/') : NULL;
            size_t base = host_end ? (size_t)(host_end - p->endpoint) : strlen(p->endpoint);
            if (base + strlen(r->location) >= sizeof url)
                return qw_errf(err, "hub: HEAD %s: redirect too long", url0);
            char loc[2048];
            snprintf(loc, sizeof loc, "%s", r->location);
            snprintf(url, sizeof url, "%.*s%s", (int)base, p->endpoint, loc);
            continue;
        }
        return status;
    }
    return qw_errf(err, "hub: HEAD %s: too many redirects", url0);
}

/* ---- progress -------------------------------------------------------------- */

typedef struct xfer {
    puller *p;
    const char *name;
    FILE *f;
    int64_t start;      /* bytes already on disk when this transfer began */
    int64_t written;    /* bytes written by this transfer */
    int64_t expected;   /* full size, -1 unknown */
    int checked;        /* response status checked */
    int bad_range;      /* a 206 for another range: restart from 0 */
    int too_big;        /* more than announced: stop */
    int io_error;
    double t0, last;
    int bar_shown;
} xfer;

static void fmt_bytes(char *out, size_t cap, double b) {
    if (b >= 1e9) snprintf(out, cap, "%.2f GB", b / 1e9);
    else if (b >= 1e6) snprintf(out, cap, "%.1f MB", b / 1e6);
    else if (b >= 1e3) snprintf(out, cap, "%.1f kB", b / 1e3);
    else snprintf(out, cap, "%.0f B", b);
}

static void fmt_eta(char *out, size_t cap, double s) {
    if (!(s >= 0) || s > 359999) { snprintf(out, cap, "--:--"); return; }
    int t = (int)(s + 0.5);
    if (t >= 3600) snprintf(out, cap, "%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60);
    else snprintf(out, cap, "%d:%02d", t / 60, t % 60);
}

static void progress_show(xfer *x, int final) {
    double now = qw_now(), dt = now - x->t0;
    int mode = x->p->progress;
    if (mode == HUB_PROGRESS_NONE) return;
    if (!final && now - x->last < (mode == HUB_PROGRESS_BAR ? 0.2 : 5.0)) return;
    if (!final && mode == HUB_PROGRESS_LINES && dt < 5.0) return;
    x->last = now;
    int64_t have = x->start + x->written;
    double speed = dt > 0 ? (double)x->written / dt : 0;
    char hb[32], tb[32], sb[32], eb[32];
    fmt_bytes(hb, sizeof hb, (double)have);
    fmt_bytes(tb, sizeof tb, (double)(x->expected > 0 ? x->expected : have));
    fmt_bytes(sb, sizeof sb, speed);
    double eta = (x->expected > 0 && speed > 0) ? (double)(x->expected - have) / speed : -1;
    fmt_eta(eb, sizeof eb, final ? 0 : eta);
    double frac = x->expected > 0 ? (double)have / (double)x->expected : 0;
    if (frac > 1) frac = 1;
    if (mode == HUB_PROGRESS_BAR) {
        char bar[31];
        int fill = (int)(frac * 30);
        for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
        bar[30] = 0;
        fprintf(stderr, "\r  %-28.28s [%s] %3.0f%% %9s / %-9s %9s/s  ETA %s \x1b[K", x->name, bar,
                100 * frac, hb, tb, sb, eb);
        if (final) fputc('\n', stderr);
        fflush(stderr);
        x->bar_shown = !final;
    } else {
        fprintf(stderr, "  %s: %s / %s (%.0f%%), %s/s, ETA %s%s\n", x->name, hb, tb, 100 * frac, sb,
                eb, final ? ", done" : "");
    }
}

static int on_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow) {
    (void)dltotal; (void)dlnow; (void)ultotal; (void)ulnow;
    progress_show(user, 0);
    return 0;
}

static size_t on_body(char *buf, size_t size, size_t n, void *user) {
    xfer *x = user;
    size_t len = size * n;
    if (!x->checked) {
        x->checked = 1;
        long status = 0;
        curl_easy_getinfo(x->p->curl, CURLINFO_RESPONSE_CODE, &status);
        if (x->start > 0 && status == 200) {
            /* The server ignored the Range: start the file over. */
            if (fflush(x->f) != 0 || ftruncate(fileno(x->f), 0) != 0 || fseek(x->f, 0, SEEK_SET) != 0) {
                x->io_error = errno ? errno : EIO;
                return 0;
            }
            x->start = 0;
        }
    }
    if (x->expected >= 0 && x->start + x->written + (int64_t)len > x->expected) {
        x->too_big = 1;
        return 0;
    }
    if (fwrite(buf, 1, len, x->f) != len) {
        x->io_error = errno ? errno : EIO;
        return 0;
    }
    x->written += (int64_t)len;
    return len;
}

/* "bytes START-END/TOTAL": START must be where our file ends. */
static int range_ok(const char *cr, int64_t start) {
    if (!cr[0]) return 0;
    const char *p = cr;
    if (strncasecmp(p, "bytes", 5) == 0) p += 5;
    while (*p == ' ' || *p == '=') p++;
    char *end;
    long long s = strtoll(p, &end, 10);
    return end != p && s == start;
}

static int64_t file_size(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return -1;
    return (int64_t)st.st_size;
}

/* GET url into path (appending from its current size with Range). Returns
 * 0 when the transfer completed, 1 when it broke off and may be resumed,
 * -1 on a hard error (message set). */
static int http_get(puller *p, const char *url, const char *path, const char *name, int64_t expected,
                    qw_err *err) {
    int64_t have = file_size(path);
    if (have < 0) have = 0;
    if (expected >= 0 && have > expected) {
        unlink(path);
        have = 0;
    }
    if (expected >= 0 && have == expected) return 0;
    FILE *f = fopen(path, have > 0 ? "ab" : "wb");
    if (!f) return qw_errf(err, "hub: %s: %s", path, strerror(errno));
    xfer x = {.p = p, .name = name, .f = f, .start = have, .expected = expected};
    x.t0 = x.last = qw_now();
    resp r;
    resp_reset(&r);
    CURL *c = p->curl;
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, p->headers);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "qwenc/" QWENC_VERSION);
    curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &x);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 15L);
    /* A stalled transfer (under 1 kB/s for 60 s) is broken off and resumed. */
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
    SET_PROTOCOLS(c);
    if (have > 0) curl_easy_setopt(c, CURLOPT_RESUME_FROM_LARGE, (curl_off_t)have);
    CURLcode cc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    /* A bar left half-drawn by a failed transfer gets its line ended. */
    if (x.bar_shown && (cc != CURLE_OK || x.too_big || x.io_error)) fputc('\n', stderr);
    int closed = fclose(f);
    if (x.io_error || (cc == CURLE_OK && closed != 0))
        return qw_errf(err, "hub: %s: write failed: %s", path, strerror(x.io_error ? x.io_error : errno));
    if (x.too_big) {
        unlink(path);
        return qw_errf(err, "hub: %s: the server sent more than the announced %lld bytes", name,
                       (long long)expected);
    }
    if (cc == CURLE_HTTP_RETURNED_ERROR && status == 416 && have > 0) {
        /* Range not satisfiable: what we have may already be all of it. */
        return 0;
    }
    if (cc == CURLE_HTTP_RETURNED_ERROR)
        return qw_errf(err, "hub: GET %s: HTTP %ld%s", url, status,
                       status == 401 || status == 403 ? " (gated or private repo? set HF_TOKEN)" : "");
    if (have > 0 && status == 206 && !range_ok(r.content_range, have)) {
        unlink(path);
        LOG_WARN("hub: %s: the server answered a different range (%s): starting over", name, r.content_range);
        return 1;
    }
    if (cc != CURLE_OK) {
        if (cc == CURLE_PARTIAL_FILE || cc == CURLE_RECV_ERROR || cc == CURLE_OPERATION_TIMEDOUT ||
            cc == CURLE_GOT_NOTHING || cc == CURLE_COULDNT_CONNECT || cc == CURLE_SEND_ERROR ||
            cc == CURLE_HTTP2_STREAM || cc == CURLE_HTTP2) {
            qw_errf(err, "hub: GET %s: %s after %lld bytes", url, curl_easy_strerror(cc),
                    (long long)(x.start + x.written));
            return 1;
        }
        return qw_errf(err, "hub: GET %s: %s", url, curl_easy_strerror(cc));
    }
    progress_show(&x, 1);
    p->bytes_downloaded += x.written;
    return 0;
}

/* ---- cache files ---------------------------------------------------------------- */

static char *join3(const char *a, const char *b, const char *c) {
    size_t n = strlen(a) + strlen(b) + strlen(c) + 1;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s%s%s", a, b, c);
    return s;
}

static int mkdir_parent(const char *path, qw_err *err) {
    char *d = strdup(path);
    if (!d) return qw_errf(err, "hub: out of memory");
    char *slash = strrchr(d, '/');
    int rc = 0;
    if (slash && slash != d) {
        *slash = 0;
        rc = hub_mkdir_p(d, err);
    }
    free(d);
    return rc;
}

/* snapshots/<commit>/<file> -> ../../blobs/<etag> (one more ../ per '/' in file). */
static int link_snapshot(puller *p, const char *file, const char *etag, qw_err *err) {
    char *snapfile = NULL, *target = NULL;
    int rc = -1;
    size_t depth = 2;
    for (const char *s = file; *s; s++) depth += *s == '/';
    size_t tl = depth * 3 + strlen("blobs/") + strlen(etag) + 1;
    target = malloc(tl);
    snapfile = join3(p->repo_dir, "/snapshots/", p->commit);
    if (!target || !snapfile) { qw_errf(err, "hub: out of memory"); goto out; }
    target[0] = 0;
    for (size_t i = 0; i < depth; i++) strcat(target, "../");
    strcat(target, "blobs/");
    strcat(target, etag);
    char *full = join3(snapfile, "/", file);
    free(snapfile);
    snapfile = full;
    if (!snapfile) { qw_errf(err, "hub: out of memory"); goto out; }
    if (mkdir_parent(snapfile, err) != 0) goto out;
    char cur[512];
    ssize_t n = readlink(snapfile, cur, sizeof cur - 1);
    if (n > 0) {
        cur[n] = 0;
        if (!strcmp(cur, target)) { rc = 0; goto out; }
    }
    if (unlink(snapfile) != 0 && errno != ENOENT) {
        qw_errf(err, "hub: %s: %s", snapfile, strerror(errno));
        goto out;
    }
    if (symlink(target, snapfile) != 0) {
        qw_errf(err, "hub: symlink %s -> %s: %s", snapfile, target, strerror(errno));
        goto out;
    }
    rc = 0;
out:
    free(snapfile);
    free(target);
    return rc;
}

static int write_ref(puller *p, const char *rev, qw_err *err) {
    char *path = join3(p->repo_dir, "/refs/", rev), *tmp = NULL;
    int rc = -1;
    if (!path) return qw_errf(err, "hub: out of memory");
    tmp = join3(path, ".tmp", "");
    if (!tmp) { qw_errf(err, "hub: out of memory"); goto out; }
    if (mkdir_parent(path, err) != 0) goto out;
    FILE *f = fopen(tmp, "wb");
    if (!f) { qw_errf(err, "hub: %s: %s", tmp, strerror(errno)); goto out; }
    size_t n = strlen(p->commit);
    int bad = fwrite(p->commit, 1, n, f) != n;
    if (fclose(f) != 0) bad = 1;
    if (bad || rename(tmp, path) != 0) {
        qw_errf(err, "hub: writing %s: %s", path, strerror(errno));
        unlink(tmp);
        goto out;
    }
    rc = 0;
out:
    free(path);
    free(tmp);
    return rc;
}

/* Does the file at path match etag? 1 yes, 0 no (*got set), -1 error.
 * A 64-hex ETag is an LFS sha256; a 40-hex one a git blob id; anything
 * else cannot be checked (2: size check only). */
static int verify(const char *path, const char *etag, char got[65], qw_err *err) {
    size_t n = strlen(etag);
    int hex = 1;
    for (size_t i = 0; i < n; i++) hex &= isxdigit((unsigned char)etag[i]) != 0;
    int kind = hex && n == 64 ? SHA_256 : hex && n == 40 ? SHA_GIT_BLOB : 0;
    if (!kind) return 2;
    if (sha_file(path, kind, got, err) != 0) return -1;
    return strcasecmp(got, etag) == 0;
}

/* Fetch one file of the repo into the cache. Returns 0 done, 1 not on the
 * hub (404) and optional, -1 error. */
static int fetch(puller *p, const char *rev, const char *file, int required, qw_err *err) {
    if (hub_filename_valid(file, err) != 0) return -1;
    char *url = file_url(p, p->commit[0] ? p->commit : rev, file);
    char *blob = NULL, *part = NULL;
    int rc = -1, neterr = 0;
    if (!url) return qw_errf(err, "hub: out of memory");
    resp r;
    long status = http_head(p, url, &r, &neterr, err);
    if (status < 0) goto out;
    if (status == 404) {
        if (!required) {
            LOG_DEBUG("hub: %s: not in %s (optional)", file, p->repo);
            rc = 1;
        } else {
            qw_errf(err, "hub: %s: %s not found (HTTP 404 for %s)", p->repo, file, url);
        }
        goto out;
    }
    if (status == 401 || status == 403) {
        qw_errf(err, "hub: %s: HTTP %ld for %s: the repo is gated, private or missing%s", file, status,
                url, getenv("HF_TOKEN") ? " (HF_TOKEN was sent)" : "; set HF_TOKEN");
        goto out;
    }
    if (status >= 400 || status < 200) {
        qw_errf(err, "hub: %s: HTTP %ld for HEAD %s", file, status, url);
        goto out;
    }
    /* Metadata. */
    if (!p->commit[0]) {
        if (!r.commit[0]) {
            qw_errf(err, "hub: %s: the server sent no X-Repo-Commit header: %s does not look like a "
                    "Hugging Face hub (check HF_ENDPOINT)", url, p->endpoint);
            goto out;
        }
        if (hub_commit_valid(r.commit, err) != 0) { qw_err_prefix(err, "hub: X-Repo-Commit of %s", url); goto out; }
        snprintf(p->commit, sizeof p->commit, "%s", r.commit);
    } else if (r.commit[0] && strcmp(r.commit, p->commit) != 0) {
        qw_errf(err, "hub: %s: X-Repo-Commit %s differs from %s, asked for", file, r.commit, p->commit);
        goto out;
    }
    char etag[160];
    etag_normalize(etag, sizeof etag, r.linked_etag[0] ? r.linked_etag : r.etag);
    if (hub_etag_valid(etag, err) != 0) { qw_err_prefix(err, "hub: %s: ETag", file); goto out; }
    int64_t size = r.linked_etag[0] ? r.linked_size : r.content_length;
    if (r.linked_etag[0] && size < 0) size = -1;

    blob = join3(p->repo_dir, "/blobs/", etag);
    part = join3(blob, ".incomplete", "");
    if (!blob || !part) { qw_errf(err, "hub: out of memory"); goto out; }
    if (hub_mkdir_p(p->repo_dir, err) != 0 || mkdir_parent(blob, err) != 0) goto out;

    int64_t have = file_size(blob);
    if (have >= 0 && (size < 0 || have == size)) {
        /* Blobs only get their name after verification. */
        p->n_cached++;
        char hb[32];
        fmt_bytes(hb, sizeof hb, (double)have);
        if (p->progress != HUB_PROGRESS_NONE) fprintf(stderr, "  %-28s %9s  cached\n", file, hb);
        rc = link_snapshot(p, file, etag, err);
        goto out;
    }
    if (size > 0) {
        /* Fail early rather than half-way through a large file. */
        struct statvfs vfs;
        int64_t part_have = file_size(part);
        int64_t need = size - (part_have > 0 ? part_have : 0);
        if (statvfs(p->repo_dir, &vfs) == 0) {
            double avail = (double)vfs.f_bavail * (double)vfs.f_frsize;
            if (avail < (double)need) {
                char nb[32], ab[32];
                fmt_bytes(nb, sizeof nb, (double)need);
                fmt_bytes(ab, sizeof ab, avail);
                qw_errf(err, "hub: %s: needs %s but only %s are free in %s", file, nb, ab, p->repo_dir);
                goto out;
            }
        }
    }
    int from_zero_retry = 1;
    for (int attempt = 0;; attempt++) {
        int64_t before = file_size(part);
        if (before > 0 && p->progress != HUB_PROGRESS_NONE)
            fprintf(stderr, "  %s: resuming at byte %lld\n", file, (long long)before);
        int g = http_get(p, url, part, file, size, err);
        if (g < 0) goto out;
        if (g == 1) {
            if (attempt >= p->retries) {
                qw_err_prefix(err, "hub: %s: download broke off (the part is kept; run the same "
                              "command again to resume)", file);
                goto out;
            }
            LOG_WARN("%s; resuming (attempt %d of %d)", err->msg, attempt + 2, p->retries + 1);
            struct timespec ts = {1, 0};
            nanosleep(&ts, NULL);
            continue;
        }
        int64_t got_size = file_size(part);
        if (size >= 0 && got_size != size) {
            if (attempt < p->retries) {
                LOG_WARN("hub: %s: got %lld of %lld bytes; resuming", file, (long long)got_size,
                         (long long)size);
                continue;
            }
            qw_errf(err, "hub: %s: got %lld bytes, the hub announced %lld", file, (long long)got_size,
                    (long long)size);
            goto out;
        }
        char got[65];
        int v = verify(part, etag, got, err);
        if (v < 0) goto out;
        if (v == 0) {
            unlink(part);
            if (before > 0 && from_zero_retry) {
                /* A resumed part may hold bytes of another version: once from scratch. */
                from_zero_retry = 0;
                LOG_WARN("hub: %s: checksum mismatch after resuming; downloading again from the start", file);
                continue;
            }
            qw_errf(err, "hub: %s: corrupted download: %s of the content is %s but the hub's ETag is %s "
                    "(the file was removed; run again)", file, strlen(etag) == 64 ? "sha256" : "git blob id",
                    got, etag);
            goto out;
        }
        if (v == 2) LOG_WARN("hub: %s: ETag '%s' is not a checksum: only the size was checked", file, etag);
        if (rename(part, blob) != 0) {
            qw_errf(err, "hub: rename %s -> %s: %s", part, blob, strerror(errno));
            goto out;
        }
        p->n_downloaded++;
        break;
    }
    rc = link_snapshot(p, file, etag, err);
out:
    free(url);
    free(blob);
    free(part);
    return rc;
}

/* Shard names of a model.safetensors.index.json in the snapshot. */
static int read_index(puller *p, char ***names, int *n_names, qw_err *err) {
    char *path = join3(p->repo_dir, "/snapshots/", p->commit), *text = NULL;
    cJSON *root = NULL;
    int rc = -1;
    *names = NULL;
    *n_names = 0;
    char *full = path ? join3(path, "/", "model.safetensors.index.json") : NULL;
    free(path);
    if (!full) return qw_errf(err, "hub: out of memory");
    FILE *f = fopen(full, "rb");
    if (!f) { qw_errf(err, "hub: %s: %s", full, strerror(errno)); goto out; }
    size_t cap = 1 << 16, n = 0;
    text = malloc(cap + 1);
    size_t k;
    while (text && (k = fread(text + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) {
            if (cap > (64u << 20)) break;
            char *t = realloc(text, cap * 2 + 1);
            if (!t) { free(text); text = NULL; break; }
            text = t;
            cap *= 2;
        }
    }
    fclose(f);
    if (!text) { qw_errf(err, "hub: %s: out of memory", full); goto out; }
    text[n] = 0;
    root = cJSON_Parse(text);
    const cJSON *map = root ? cJSON_GetObjectItemCaseSensitive(root, "weight_map") : NULL;
    if (!cJSON_IsObject(map)) {
        qw_errf(err, "hub: %s: no \"weight_map\" object", full);
        goto out;
    }
    int total = cJSON_GetArraySize(map);
    *names = calloc((size_t)total + 1, sizeof **names);
    if (!*names) { qw_errf(err, "hub: out of memory"); goto out; }
    const cJSON *it;
    cJSON_ArrayForEach(it, map) {
        if (!cJSON_IsString(it)) {
            qw_errf(err, "hub: %s: weight_map[\"%.100s\"] is not a string", full, it->string);
            goto out;
        }
        if (hub_filename_valid(it->valuestring, err) != 0) {
            qw_err_prefix(err, "hub: %s: weight_map[\"%.100s\"]", full, it->string);
            goto out;
        }
        int seen = 0;
        for (int i = 0; i < *n_names && !seen; i++) seen = !strcmp((*names)[i], it->valuestring);
        if (seen) continue;
        (*names)[*n_names] = strdup(it->valuestring);
        if (!(*names)[*n_names]) { qw_errf(err, "hub: out of memory"); goto out; }
        (*n_names)++;
    }
    if (*n_names == 0) { qw_errf(err, "hub: %s: empty weight_map", full); goto out; }
    rc = 0;
out:
    cJSON_Delete(root);
    free(text);
    free(full);
    return rc;
}

/* ---- the repo's file list (GGUF repos) ------------------------------------ */

typedef struct membuf {
    char *data;
    size_t len, cap;
    int too_big;
} membuf;

static size_t on_mem(char *buf, size_t size, size_t n, void *user) {
    membuf *m = user;
    size_t len = size * n;
    if (m->len + len + 1 > (16u << 20)) { m->too_big = 1; return 0; } /* a listing is KBs */
    if (m->len + len + 1 > m->cap) {
        size_t cap = m->cap ? m->cap : 1 << 16;
        while (cap < m->len + len + 1) cap *= 2;
        char *d = realloc(m->data, cap);
        if (!d) return 0;
        m->data = d;
        m->cap = cap;
    }
    memcpy(m->data + m->len, buf, len);
    m->len += len;
    m->data[m->len] = 0;
    return len;
}

/* GET {endpoint}/api/models/{repo}/tree/{rev}?recursive=true: the hub's
 * listing, a JSON array of {"type": "file"|"directory", "path": ...}. Only
 * the first page is read (huggingface.co pages at 1000 entries, far more
 * than a GGUF repo holds).
 * Returns the file paths (malloc'd array of malloc'd strings), or -1 with a
 * message; *neterr = 1 when the host could not be reached. */
static int list_files(puller *p, const char *rev, char ***names, int *n_names, int *neterr, qw_err *err) {
    *names = NULL;
    *n_names = 0;
    char *erev = curl_easy_escape(p->curl, rev, 0);
    if (!erev) return qw_errf(err, "hub: out of memory");
    size_t n = strlen(p->endpoint) + strlen(p->repo) + strlen(erev) + 64;
    char *url = malloc(n);
    if (!url) { curl_free(erev); return qw_errf(err, "hub: out of memory"); }
    snprintf(url, n, "%s/api/models/%s/tree/%s?recursive=true", p->endpoint, p->repo, erev);
    curl_free(erev);
    membuf mb = {0};
    cJSON *root = NULL;
    int rc = -1;
    CURL *c = p->curl;
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, p->headers);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "qwenc/" QWENC_VERSION);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_mem);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &mb);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 15L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    SET_PROTOCOLS(c);
    CURLcode cc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    if (cc != CURLE_OK) {
        *neterr = is_network_error(cc);
        qw_errf(err, "hub: GET %s: %s", url, mb.too_big ? "listing larger than 16 MB" : curl_easy_strerror(cc));
        goto out;
    }
    if (status == 401 || status == 403) {
        qw_errf(err, "hub: %s: HTTP %ld listing the repo's files: the repo is gated, private or missing%s", p->repo,
                status, getenv("HF_TOKEN") ? " (HF_TOKEN was sent)" : "; set HF_TOKEN");
        goto out;
    }
    if (status == 404) {
        qw_errf(err, "hub: %s: no such repo or revision '%s' (HTTP 404 for %s)", p->repo, rev, url);
        goto out;
    }
    if (status != 200) {
        qw_errf(err, "hub: GET %s: HTTP %ld", url, status);
        goto out;
    }
    root = mb.data ? cJSON_Parse(mb.data) : NULL;
    if (!cJSON_IsArray(root)) {
        qw_errf(err, "hub: GET %s: not a JSON array of files (does HF_ENDPOINT point at a Hugging Face hub?)", url);
        goto out;
    }
    int total = cJSON_GetArraySize(root);
    *names = calloc((size_t)total + 1, sizeof **names);
    if (!*names) { qw_errf(err, "hub: out of memory"); goto out; }
    const cJSON *it;
    cJSON_ArrayForEach(it, root) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(it, "type");
        const cJSON *path = cJSON_GetObjectItemCaseSensitive(it, "path");
        if (!cJSON_IsString(path) || (cJSON_IsString(type) && strcmp(type->valuestring, "file") != 0)) continue;
        if (!((*names)[*n_names] = strdup(path->valuestring))) { qw_errf(err, "hub: out of memory"); goto out; }
        (*n_names)++;
    }
    rc = 0;
out:
    if (rc != 0 && *names) {
        for (int i = 0; i < *n_names; i++) free((*names)[i]);
        free(*names);
        *names = NULL;
        *n_names = 0;
    }
    cJSON_Delete(root);
    free(mb.data);
    free(url);
    return rc;
}

/* The .gguf file(s) of p->quant in the listing: *n_parts names (several,
 * in part order, for a split model) into *parts (malloc'd), or -1 with a
 * message (none, several quants, parts missing). */
static int pick_gguf(puller *p, char **names, int n, const char *quant, char ***parts, int *n_parts, qw_err *err) {
    *parts = NULL;
    *n_parts = 0;
    int *picked = malloc((size_t)(n > 0 ? n : 1) * sizeof *picked);
    if (!picked) return qw_errf(err, "hub: out of memory");
    int k = hub_gguf_pick((const char *const *)names, n, quant, p->repo, picked, err);
    if (k < 0) {
        free(picked);
        return qw_err_prefix(err, "hub");
    }
    *parts = calloc((size_t)k, sizeof **parts);
    for (int i = 0; *parts && i < k; i++) {
        if (!((*parts)[i] = strdup(names[picked[i]]))) break;
        (*n_parts)++;
    }
    free(picked);
    if (*n_parts != k) return qw_errf(err, "hub: out of memory");
    return 0;
}

static char *endpoint_from(const hub_pull_opts *o) {
    const char *e = o->endpoint;
    if (!e || !*e) e = getenv("HF_ENDPOINT");
    if (!e || !*e) e = "https://huggingface.co";
    char *s = strdup(e);
    if (!s) return NULL;
    size_t n = strlen(s);
    while (n > 0 && s[n - 1] == '/') s[--n] = 0;
    return s;
}

int hub_pull(const char *repo, const hub_pull_opts *o, char **snapshot, qw_err *err) {
    static const char *meta[] = {"config.json", "generation_config.json", "tokenizer.json",
                                 "tokenizer_config.json", "vocab.json", "merges.txt"};
    const char *rev = o->revision ? o->revision : "main";
    puller p = {0};
    char *endpoint = NULL, **shards = NULL, **files = NULL, **gguf_parts = NULL;
    int n_shards = 0, n_files = 0, n_gguf_parts = 0, rc = -1;
    *snapshot = NULL;
    if (hub_repo_valid(repo, err) != 0 || hub_revision_valid(rev, err) != 0) return -1;
    endpoint = endpoint_from(o);
    if (!endpoint) return qw_errf(err, "hub: out of memory");
    if (strncmp(endpoint, "http://", 7) && strncmp(endpoint, "https://", 8)) {
        qw_errf(err, "hub: HF_ENDPOINT '%s' must start with http:// or https://", endpoint);
        free(endpoint);
        return -1;
    }
    p.endpoint = endpoint;
    p.repo = repo;
    p.retries = o->retries < 0 ? 0 : o->retries;
    p.progress = o->progress == HUB_PROGRESS_AUTO ? (isatty(2) ? HUB_PROGRESS_BAR : HUB_PROGRESS_LINES)
                                                  : o->progress;
    p.repo_dir = hub_repo_dir(repo, err);
    if (!p.repo_dir) goto out;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) { qw_errf(err, "hub: curl_global_init failed"); goto out; }
    p.curl = curl_easy_init();
    if (!p.curl) { qw_errf(err, "hub: curl_easy_init failed"); goto out_global; }
    p.headers = curl_slist_append(NULL, "Accept-Encoding: identity");
    const char *tok = o->token ? o->token : getenv("HF_TOKEN");
    if (tok && *tok) {
        if (strpbrk(tok, "\r\n")) { qw_errf(err, "hub: HF_TOKEN contains a line break"); goto out_curl; }
        char *h = join3("Authorization: Bearer ", tok, "");
        struct curl_slist *nh = h ? curl_slist_append(p.headers, h) : NULL;
        free(h);
        if (!nh) { qw_errf(err, "hub: out of memory"); goto out_curl; }
        p.headers = nh;
    }
    if (!p.headers) { qw_errf(err, "hub: out of memory"); goto out_curl; }
    if (hub_commit_valid(rev, NULL) == 0) snprintf(p.commit, sizeof p.commit, "%s", rev);

    const char *off = getenv("HF_HUB_OFFLINE");
    if (off && *off && strcmp(off, "0") != 0 && strcasecmp(off, "false") != 0) {
        /* huggingface_hub's offline mode: the cache or nothing. */
        *snapshot = o->quant ? hub_cached_gguf(repo, rev, o->quant, err) : hub_snapshot_dir(repo, rev, err);
        if (*snapshot) {
            if (p.progress != HUB_PROGRESS_NONE)
                fprintf(stderr, "qwenc pull: HF_HUB_OFFLINE is set: using the cached %s\n", *snapshot);
            rc = 0;
        } else {
            qw_err_prefix(err, "hub: HF_HUB_OFFLINE is set and %s is not cached", repo);
        }
        goto out_curl;
    }
    if (p.progress != HUB_PROGRESS_NONE) fprintf(stderr, "qwenc pull: %s (%s) from %s\n", repo, rev, endpoint);
    /* config.json first: it tells the commit (REPO:QUANT: the file list).
     * The hub unreachable is not an error when this revision is already in
     * the cache. A repo without config.json may be a GGUF repo. */
    int gguf = o->quant != NULL;
    {
        int neterr = 0;
        long st;
        if (gguf) {
            st = list_files(&p, rev, &files, &n_files, &neterr, err);
        } else {
            char *url = file_url(&p, rev, "config.json");
            resp r;
            st = url ? http_head(&p, url, &r, &neterr, err) : qw_errf(err, "hub: out of memory");
            free(url);
        }
        if (st < 0) {
            if (neterr && o->offline_ok) {
                char *snap = gguf ? hub_cached_gguf(repo, rev, o->quant, NULL) : hub_snapshot_dir(repo, rev, NULL);
                if (snap) {
                    LOG_WARN("hub: %s is unreachable (%s); using the cached snapshot %s", endpoint,
                             err->msg, snap);
                    *snapshot = snap;
                    rc = 0;
                    goto out_curl;
                }
            }
            if (neterr) qw_err_prefix(err, "hub: cannot reach %s (offline?)", endpoint);
            goto out_curl;
        }
        if (!gguf && st == 404) {
            /* No config.json: a GGUF repo? Its listing says. */
            qw_err lerr = {{0}};
            if (list_files(&p, rev, &files, &n_files, &neterr, &lerr) == 0) {
                for (int i = 0; i < n_files && !gguf; i++) {
                    char tag[64];
                    int part, count;
                    gguf = hub_gguf_quant(files[i], tag, sizeof tag, &part, &count) == 0;
                }
            }
        }
    }
    if (gguf) {
        if (pick_gguf(&p, files, n_files, o->quant, &gguf_parts, &n_gguf_parts, err) < 0) goto out_curl;
        for (int i = 0; i < n_gguf_parts; i++) /* every part of a split model */
            if (fetch(&p, rev, gguf_parts[i], 1, err) < 0) goto out_curl;
    } else {
        for (size_t i = 0; i < sizeof meta / sizeof *meta; i++) {
            int f = fetch(&p, rev, meta[i], i == 0, err);
            if (f < 0) goto out_curl;
        }
        int idx = fetch(&p, rev, "model.safetensors.index.json", 0, err);
        if (idx < 0) goto out_curl;
        if (idx == 0) {
            if (read_index(&p, &shards, &n_shards, err) != 0) goto out_curl;
            for (int i = 0; i < n_shards; i++)
                if (fetch(&p, rev, shards[i], 1, err) < 0) goto out_curl;
        } else if (fetch(&p, rev, "model.safetensors", 1, err) < 0) {
            goto out_curl;
        }
    }
    if (strcmp(rev, p.commit) != 0 && write_ref(&p, rev, err) != 0) goto out_curl;
    *snapshot = join3(p.repo_dir, "/snapshots/", p.commit);
    if (*snapshot && n_gguf_parts) { /* the model is named by its (first) file */
        char *f = join3(*snapshot, "/", gguf_parts[0]);
        free(*snapshot);
        *snapshot = f;
    }
    if (!*snapshot) { qw_errf(err, "hub: out of memory"); goto out_curl; }
    if (p.progress != HUB_PROGRESS_NONE) {
        char b[32];
        fmt_bytes(b, sizeof b, (double)p.bytes_downloaded);
        fprintf(stderr, "qwenc pull: %s at %.12s: %d files downloaded (%s), %d already cached\n", repo,
                p.commit, p.n_downloaded, b, p.n_cached);
    }
    rc = 0;
out_curl:
    curl_slist_free_all(p.headers);
    curl_easy_cleanup(p.curl);
out_global:
    curl_global_cleanup();
out:
    for (int i = 0; i < n_shards; i++) free(shards[i]);
    free(shards);
    for (int i = 0; i < n_files; i++) free(files[i]);
    free(files);
    for (int i = 0; i < n_gguf_parts; i++) free(gguf_parts[i]);
    free(gguf_parts);
    free(p.repo_dir);
    free(endpoint);
    return rc;
}
