/* httphead.c - see httphead.h. RFC 9112 sections 3 (request line), 5
 * (field syntax), 6.1-6.3 (Transfer-Encoding, Content-Length, message body
 * length) and 3.2 (Host). */
#include "server/httphead.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

size_t httphead_end(const char *buf, size_t n) {
    for (size_t i = 0; i + 1 < n; i++) {
        if (buf[i] != '\n') continue;
        if (buf[i + 1] == '\n') return i + 2;
        if (buf[i + 1] == '\r' && i + 2 < n && buf[i + 2] == '\n') return i + 3;
    }
    return 0;
}

static int tchar(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int fail(char *why, size_t why_len, int status, const char *msg) {
    snprintf(why, why_len, "%s", msg);
    return status;
}

/* value [v, e) without surrounding spaces/tabs */
static void trim(const char **v, const char **e) {
    while (*v < *e && (**v == ' ' || **v == '\t')) (*v)++;
    while (*e > *v && ((*e)[-1] == ' ' || (*e)[-1] == '\t')) (*e)--;
}

int httphead_check(const char *buf, size_t n, char *why, size_t why_len) {
    if (memchr(buf, '\0', n)) return fail(why, why_len, 400, "a NUL byte in the request head");
    const char *p = buf, *end = buf + n;
    /* request line */
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (!eol) return fail(why, why_len, 400, "no request line");
    const char *le = eol > p && eol[-1] == '\r' ? eol - 1 : eol;
    const char *sp1 = memchr(p, ' ', (size_t)(le - p));
    const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(le - sp1 - 1)) : NULL;
    if (!sp1 || !sp2 || sp1 == p || sp2 == sp1 + 1) return fail(why, why_len, 400, "a malformed request line");
    for (const char *c = p; c < sp1; c++)
        if (!tchar((unsigned char)*c)) return fail(why, why_len, 400, "a malformed request method");
    size_t vl = (size_t)(le - sp2 - 1);
    int http10 = vl == 8 && !memcmp(sp2 + 1, "HTTP/1.0", 8);
    if (!http10 && !(vl == 8 && !memcmp(sp2 + 1, "HTTP/1.1", 8)))
        return fail(why, why_len, 400, "not an HTTP/1.0 or HTTP/1.1 request line");
    p = eol + 1;

    int n_host = 0, n_cl = 0, n_te = 0;
    const char *cl_v = NULL;
    size_t cl_len = 0;
    int te_ok = 1;
    while (p < end) {
        eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol) eol = end;
        le = eol > p && eol[-1] == '\r' ? eol - 1 : eol;
        if (le == p) break; /* the empty line */
        if (*p == ' ' || *p == '\t') return fail(why, why_len, 400, "a folded header line (obs-fold)");
        const char *colon = memchr(p, ':', (size_t)(le - p));
        if (!colon || colon == p) return fail(why, why_len, 400, "a header line without a name");
        for (const char *c = p; c < colon; c++)
            if (!tchar((unsigned char)*c)) return fail(why, why_len, 400, "a malformed header name");
        for (const char *c = p; c < le; c++)
            if (*c == '\r') return fail(why, why_len, 400, "a bare CR in a header line");
        size_t nl = (size_t)(colon - p);
        const char *v = colon + 1, *ve = le;
        trim(&v, &ve);
        if (nl == 4 && !strncasecmp(p, "host", 4)) {
            n_host++;
        } else if (nl == 14 && !strncasecmp(p, "content-length", 14)) {
            if (v == ve) return fail(why, why_len, 400, "an empty Content-Length");
            for (const char *c = v; c < ve; c++)
                if (*c < '0' || *c > '9')
                    return fail(why, why_len, 400, "a Content-Length that is not one decimal number");
            if (n_cl && ((size_t)(ve - v) != cl_len || memcmp(v, cl_v, cl_len)))
                return fail(why, why_len, 400, "conflicting Content-Length headers");
            n_cl++;
            cl_v = v;
            cl_len = (size_t)(ve - v);
        } else if (nl == 17 && !strncasecmp(p, "transfer-encoding", 17)) {
            n_te++;
            if (!((size_t)(ve - v) == 7 && !strncasecmp(v, "chunked", 7))) te_ok = 0;
        }
        p = eol + 1;
    }
    if (n_host > 1) return fail(why, why_len, 400, "more than one Host header");
    if (!http10 && n_host == 0) return fail(why, why_len, 400, "an HTTP/1.1 request without a Host header");
    if (n_te) {
        if (http10) return fail(why, why_len, 400, "Transfer-Encoding in an HTTP/1.0 request");
        if (!te_ok || n_te > 1)
            return fail(why, why_len, 501, "a Transfer-Encoding other than plain \"chunked\" (not implemented)");
        if (n_cl) return fail(why, why_len, 400, "both Transfer-Encoding and Content-Length");
    }
    return 0;
}

void httphead_frame(const char *buf, size_t n, httphead_framing *f) {
    memset(f, 0, sizeof *f);
    const char *p = buf, *end = buf + n;
    const char *eol = memchr(p, '\n', n);
    if (!eol) return;
    const char *le = eol > p && eol[-1] == '\r' ? eol - 1 : eol;
    f->http11 = le - p >= 8 && !memcmp(le - 8, "HTTP/1.1", 8);
    for (p = eol + 1; p < end; p = eol + 1) {
        eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol) eol = end;
        le = eol > p && eol[-1] == '\r' ? eol - 1 : eol;
        if (le == p) break;
        const char *colon = memchr(p, ':', (size_t)(le - p));
        if (!colon) continue;
        size_t nl = (size_t)(colon - p);
        const char *v = colon + 1, *ve = le;
        trim(&v, &ve);
        if (nl == 14 && !strncasecmp(p, "content-length", 14)) {
            unsigned long long x = 0;
            for (const char *c = v; c < ve; c++) {
                unsigned d = (unsigned)(*c - '0');
                if (x > (~0ULL - d) / 10) f->length_overflow = 1;
                x = x * 10 + d;
            }
            f->length = x;
        } else if (nl == 17 && !strncasecmp(p, "transfer-encoding", 17)) {
            f->chunked = 1; /* httphead_check() let through plain "chunked" only */
        } else if (nl == 6 && !strncasecmp(p, "expect", 6)) {
            f->expect_continue = ve - v == 12 && !strncasecmp(v, "100-continue", 12);
        }
    }
}

/* Scanner states. */
enum { CK_SIZE, CK_EXT, CK_DATA, CK_DATA_CR, CK_DATA_LF, CK_TRAILER, CK_TRAILER_LINE, CK_END_LF };

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int httpchunk_scan(httpchunk *c, const char *p, size_t n, unsigned long long max_data, size_t *used) {
    size_t i = 0;
    int r = HTTPCHUNK_MORE;
    while (i < n && r == HTTPCHUNK_MORE) {
        char ch = p[i];
        switch (c->state) {
        case CK_SIZE: {
            int h = hexval(ch);
            if (h >= 0) {
                if (c->size > (max_data >> 4) || c->total + ((c->size << 4) | (unsigned)h) > max_data) {
                    r = HTTPCHUNK_TOO_LARGE;
                    break;
                }
                c->size = (c->size << 4) | (unsigned)h;
                c->digits++;
                i++;
                break;
            }
            if (!c->digits) {
                r = HTTPCHUNK_BAD;
                break;
            }
            c->state = CK_EXT; /* this byte is the extension's, or the line's end */
            break;
        }
        case CK_EXT: /* chunk extensions (ignored) up to the line's end */
            i++;
            if (ch != '\n') break;
            c->digits = 0;
            if (c->size == 0) {
                c->state = CK_TRAILER;
            } else {
                c->total += c->size;
                c->left = c->size;
                c->size = 0;
                c->state = CK_DATA;
            }
            break;
        case CK_DATA: {
            size_t k = n - i;
            if (k > c->left) k = (size_t)c->left;
            i += k;
            c->left -= k;
            if (!c->left) c->state = CK_DATA_CR;
            break;
        }
        case CK_DATA_CR:
            i++;
            if (ch == '\r') c->state = CK_DATA_LF;
            else if (ch == '\n') c->state = CK_SIZE;
            else r = HTTPCHUNK_BAD;
            break;
        case CK_DATA_LF:
            i++;
            if (ch == '\n') c->state = CK_SIZE;
            else r = HTTPCHUNK_BAD;
            break;
        case CK_TRAILER: /* at the start of a trailer line, or of the empty line */
            i++;
            if (ch == '\n') r = HTTPCHUNK_DONE;
            else if (ch == '\r') c->state = CK_END_LF;
            else c->state = CK_TRAILER_LINE;
            break;
        case CK_TRAILER_LINE:
            i++;
            if (ch == '\n') c->state = CK_TRAILER;
            break;
        case CK_END_LF:
            i++;
            if (ch == '\n') r = HTTPCHUNK_DONE;
            else r = HTTPCHUNK_BAD;
            break;
        }
    }
    *used = i;
    return r;
}

unsigned long long httpchunk_skip(const httpchunk *c) { return c->state == CK_DATA ? c->left : 0; }
