/* tojson.c - JSON re-serialised as Python's json.dumps(json.loads(s),
 * ensure_ascii=False) (tojson.h has the rules).
 *
 * A recursive-descent pass over the input that writes as it reads; objects
 * are scanned twice (once to list the members, so that a repeated key is
 * written where it first appeared with the value it had last, as a Python
 * dict does). Depth is capped so hostile input cannot exhaust the stack. */
#include "tokenizer/tojson.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "base/strbuf.h"

typedef struct jp {
    const char *s;
    size_t n, i;
    qw_err *err;
} jp;

static int fail(jp *p, const char *what) {
    return qw_errf(p->err, "tojson: %s at byte %zu", what, p->i);
}

static void skip_ws(jp *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
        p->i++;
}

/* Length of the valid UTF-8 character at s[0..n), 0 if invalid (utf8proc
 * refuses overlong forms, surrogates and code points past U+10FFFF). */
static size_t utf8_len(const unsigned char *s, size_t n) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t k = utf8proc_iterate(s, (utf8proc_ssize_t)n, &cp);
    return k > 0 ? (size_t)k : 0;
}

static void put_utf8(strbuf *b, unsigned cp) {
    char u[4];
    size_t k;
    if (cp < 0x80) { u[0] = (char)cp; k = 1; }
    else if (cp < 0x800) { u[0] = (char)(0xC0 | cp >> 6); u[1] = (char)(0x80 | (cp & 0x3F)); k = 2; }
    else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | cp >> 12); u[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); u[2] = (char)(0x80 | (cp & 0x3F));
        k = 3;
    } else {
        u[0] = (char)(0xF0 | cp >> 18); u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); u[3] = (char)(0x80 | (cp & 0x3F));
        k = 4;
    }
    sb_add(b, u, k);
}

static int hex4(jp *p, unsigned *out) {
    if (p->n - p->i < 4) return fail(p, "truncated \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        char c = p->s[p->i + k];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return fail(p, "bad \\u escape");
    }
    p->i += 4;
    *out = v;
    return 0;
}

/* Parse the string at p->i (on its '"') and append its decoded bytes to out
 * (out may be NULL to only validate). */
static int parse_string(jp *p, strbuf *out) {
    p->i++; /* '"' */
    for (;;) {
        if (p->i >= p->n) return fail(p, "unterminated string");
        unsigned char c = (unsigned char)p->s[p->i];
        if (c == '"') {
            p->i++;
            return 0;
        }
        if (c < 0x20) return fail(p, "control character in a string");
        if (c == '\\') {
            p->i++;
            if (p->i >= p->n) return fail(p, "unterminated string");
            char e = p->s[p->i++];
            unsigned cp;
            switch (e) {
            case '"': cp = '"'; break;
            case '\\': cp = '\\'; break;
            case '/': cp = '/'; break;
            case 'b': cp = '\b'; break;
            case 'f': cp = '\f'; break;
            case 'n': cp = '\n'; break;
            case 'r': cp = '\r'; break;
            case 't': cp = '\t'; break;
            case 'u':
                if (hex4(p, &cp)) return -1;
                if (cp >= 0xDC00 && cp <= 0xDFFF) return fail(p, "lone low surrogate escape");
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    unsigned lo;
                    if (p->n - p->i < 6 || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u')
                        return fail(p, "lone high surrogate escape");
                    p->i += 2;
                    if (hex4(p, &lo)) return -1;
                    if (lo < 0xDC00 || lo > 0xDFFF) return fail(p, "lone high surrogate escape");
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                }
                break;
            default: p->i--; return fail(p, "bad escape");
            }
            if (out) put_utf8(out, cp);
            continue;
        }
        size_t k = utf8_len((const unsigned char *)p->s + p->i, p->n - p->i);
        if (!k) return fail(p, "invalid UTF-8");
        if (out) sb_add(out, p->s + p->i, k);
        p->i += k;
    }
}

/* Python's json encoder for a str (ensure_ascii=False). */
static void dump_string(strbuf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    sb_chr(b, '"');
    size_t run = 0; /* bytes copied through unchanged, flushed in one go */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[7];
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (c < 0x20) {
                memcpy(u, "\\u00", 4);
                u[4] = hex[c >> 4];
                u[5] = hex[c & 15];
                u[6] = 0;
                esc = u;
            }
        }
        if (esc) {
            sb_add(b, s + i - run, run);
            run = 0;
            sb_str(b, esc);
        } else {
            run++;
        }
    }
    sb_add(b, s + n - run, run);
    sb_chr(b, '"');
}

/* Python's repr() of a finite double, or Infinity / -Infinity. */
static void dump_float(strbuf *b, double x) {
    if (isinf(x)) {
        sb_str(b, x < 0 ? "-Infinity" : "Infinity");
        return;
    }
    char buf[40];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec - 1, x);
        if (strtod(buf, NULL) == x) break;
    }
    /* buf: [-]d[.ddd]e(+|-)XX -> sign, digits, decimal exponent */
    const char *q = buf;
    int neg = 0;
    if (*q == '-') {
        neg = 1;
        q++;
    }
    char dig[20];
    int nd = 0;
    for (; *q && *q != 'e'; q++)
        if (*q != '.') dig[nd++] = *q;
    int e10 = atoi(q + 1);
    while (nd > 1 && dig[nd - 1] == '0') nd--;
    int decpt = e10 + 1; /* x = 0.DIGITS * 10^decpt */
    if (x == 0) decpt = 1;
    if (neg) sb_chr(b, '-');
    if (decpt <= -4 || decpt > 16) {
        sb_chr(b, dig[0]);
        if (nd > 1) {
            sb_chr(b, '.');
            sb_add(b, dig + 1, (size_t)nd - 1);
        }
        snprintf(buf, sizeof buf, "e%c%02d", e10 < 0 ? '-' : '+', e10 < 0 ? -e10 : e10);
        sb_str(b, buf);
    } else if (decpt <= 0) {
        sb_str(b, "0.");
        for (int k = 0; k < -decpt; k++) sb_chr(b, '0');
        sb_add(b, dig, (size_t)nd);
    } else if (nd <= decpt) {
        sb_add(b, dig, (size_t)nd);
        for (int k = nd; k < decpt; k++) sb_chr(b, '0');
        sb_str(b, ".0");
    } else {
        sb_add(b, dig, (size_t)decpt);
        sb_chr(b, '.');
        sb_add(b, dig + decpt, (size_t)(nd - decpt));
    }
}

static int parse_number(jp *p, strbuf *out) {
    size_t st = p->i;
    int is_float = 0;
    if (p->s[p->i] == '-') p->i++;
    if (p->i >= p->n) return fail(p, "bad number");
    if (p->s[p->i] == '0') p->i++;
    else if (p->s[p->i] >= '1' && p->s[p->i] <= '9')
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    else return fail(p, "bad number");
    if (p->i < p->n && p->s[p->i] == '.') {
        is_float = 1;
        p->i++;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') return fail(p, "bad number");
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        is_float = 1;
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') return fail(p, "bad number");
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    }
    if (!out) return 0;
    size_t len = p->i - st;
    if (!is_float) {
        if (len == 2 && p->s[st] == '-' && p->s[st + 1] == '0') sb_chr(out, '0');
        else sb_add(out, p->s + st, len);
        return 0;
    }
    char small[64];
    char *tmp = len < sizeof small ? small : malloc(len + 1);
    if (!tmp) {
        out->failed = 1;
        return 0;
    }
    memcpy(tmp, p->s + st, len);
    tmp[len] = 0;
    dump_float(out, strtod(tmp, NULL));
    if (tmp != small) free(tmp);
    return 0;
}

static int lit(jp *p, const char *w) {
    size_t k = strlen(w);
    if (p->n - p->i < k || memcmp(p->s + p->i, w, k)) return fail(p, "invalid literal");
    p->i += k;
    return 0;
}

static int value(jp *p, strbuf *out, int depth);

typedef struct member {
    size_t key_off, key_len; /* decoded key in the object's key buffer */
    size_t val_st;           /* the value's first byte in the input */
} member;

static int object(jp *p, strbuf *out, int depth) {
    p->i++; /* '{' */
    member *m = NULL;
    size_t nm = 0, cap = 0;
    strbuf keys = {0};
    int rc = -1;
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == '}') {
        p->i++;
        if (out) sb_str(out, "{}");
        return 0;
    }
    for (;;) {
        skip_ws(p);
        if (p->i >= p->n || p->s[p->i] != '"') {
            fail(p, "expected a key");
            goto out;
        }
        if (nm == cap) {
            cap = cap ? cap * 2 : 8;
            member *nmv = realloc(m, cap * sizeof *m);
            if (!nmv) {
                qw_errf(p->err, "tojson: out of memory");
                goto out;
            }
            m = nmv;
        }
        size_t ko = keys.n;
        if (parse_string(p, &keys)) goto out;
        m[nm].key_off = ko;
        m[nm].key_len = keys.n - ko;
        skip_ws(p);
        if (p->i >= p->n || p->s[p->i] != ':') {
            fail(p, "expected ':'");
            goto out;
        }
        p->i++;
        skip_ws(p);
        m[nm].val_st = p->i;
        if (value(p, NULL, depth + 1)) goto out;
        nm++;
        skip_ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->i < p->n && p->s[p->i] == '}') {
            p->i++;
            break;
        }
        fail(p, "expected ',' or '}'");
        goto out;
    }
    if (keys.failed) {
        qw_errf(p->err, "tojson: out of memory");
        goto out;
    }
    if (out) {
        size_t end = p->i;
        int first = 1;
        sb_chr(out, '{');
        for (size_t a = 0; a < nm; a++) {
            const char *ka = keys.p + m[a].key_off;
            int seen = 0;
            for (size_t c = 0; c < a && !seen; c++)
                seen = m[c].key_len == m[a].key_len && !memcmp(keys.p + m[c].key_off, ka, m[a].key_len);
            if (seen) continue;
            size_t last = a;
            for (size_t c = a + 1; c < nm; c++)
                if (m[c].key_len == m[a].key_len && !memcmp(keys.p + m[c].key_off, ka, m[a].key_len)) last = c;
            if (!first) sb_str(out, ", ");
            first = 0;
            dump_string(out, ka, m[a].key_len);
            sb_str(out, ": ");
            p->i = m[last].val_st;
            if (value(p, out, depth + 1)) goto out;
        }
        sb_chr(out, '}');
        p->i = end;
    }
    rc = 0;
out:
    free(m);
    free(keys.p);
    return rc;
}

static int array(jp *p, strbuf *out, int depth) {
    p->i++; /* '[' */
    skip_ws(p);
    if (out) sb_chr(out, '[');
    if (p->i < p->n && p->s[p->i] == ']') {
        p->i++;
        if (out) sb_chr(out, ']');
        return 0;
    }
    for (int first = 1;; first = 0) {
        skip_ws(p);
        if (!first && out) sb_str(out, ", ");
        if (value(p, out, depth + 1)) return -1;
        skip_ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->i < p->n && p->s[p->i] == ']') {
            p->i++;
            if (out) sb_chr(out, ']');
            return 0;
        }
        return fail(p, "expected ',' or ']'");
    }
}

static int value(jp *p, strbuf *out, int depth) {
    if (depth > TOJSON_MAX_DEPTH) return fail(p, "nesting too deep");
    skip_ws(p);
    if (p->i >= p->n) return fail(p, "expected a value");
    char c = p->s[p->i];
    switch (c) {
    case '{': return object(p, out, depth);
    case '[': return array(p, out, depth);
    case '"': {
        if (!out) return parse_string(p, NULL);
        strbuf tmp = {0};
        int rc = parse_string(p, &tmp);
        if (!rc) dump_string(out, tmp.p ? tmp.p : "", tmp.n);
        if (tmp.failed) out->failed = 1;
        free(tmp.p);
        return rc;
    }
    case 't':
        if (lit(p, "true")) return -1;
        if (out) sb_str(out, "true");
        return 0;
    case 'f':
        if (lit(p, "false")) return -1;
        if (out) sb_str(out, "false");
        return 0;
    case 'n':
        if (lit(p, "null")) return -1;
        if (out) sb_str(out, "null");
        return 0;
    default:
        if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p, out);
        return fail(p, "expected a value");
    }
}

/* Parse the whole input as one value (out may be NULL): trailing bytes other
 * than whitespace are an error. */
static int whole(jp *p, strbuf *out) {
    if (value(p, out, 0)) return -1;
    skip_ws(p);
    if (p->i != p->n) return fail(p, "trailing bytes after the value");
    return 0;
}

int tojson_dumps(const char *json, size_t len, char **out, size_t *out_len, qw_err *err) {
    *out = NULL;
    if (out_len) *out_len = 0;
    jp p = {json, len, 0, err};
    strbuf b = {0};
    if (whole(&p, &b)) {
        free(b.p);
        return -1;
    }
    sb_touch(&b);
    if (b.failed) {
        free(b.p);
        return qw_errf(err, "tojson: out of memory");
    }
    *out = b.p;
    if (out_len) *out_len = b.n;
    return 0;
}

char tojson_type(const char *json, size_t len) {
    jp p = {json, len, 0, NULL};
    skip_ws(&p);
    if (p.i >= p.n) return 0;
    switch (json[p.i]) {
    case '{': return 'o';
    case '[': return 'a';
    case '"': return 's';
    case 't': return 't';
    case 'f': return 'f';
    case 'n': return 'z';
    default: return (json[p.i] == '-' || (json[p.i] >= '0' && json[p.i] <= '9')) ? 'n' : 0;
    }
}

/* The value starting at p->i: its span after validation. */
static int span(jp *p, const char **val, size_t *val_len) {
    skip_ws(p);
    size_t st = p->i;
    if (value(p, NULL, 1)) return -1;
    *val = p->s + st;
    *val_len = p->i - st;
    return 0;
}

int tojson_member(const char *json, size_t len, const char *key, const char **val, size_t *val_len,
                  qw_err *err) {
    jp p = {json, len, 0, err};
    *val = NULL;
    *val_len = 0;
    if (whole(&p, NULL)) return -1;
    if (tojson_type(json, len) != 'o') return qw_errf(err, "tojson: not a JSON object");
    p.i = 0;
    skip_ws(&p);
    p.i++;
    skip_ws(&p);
    if (json[p.i] == '}') return 0;
    size_t klen = strlen(key);
    int found = 0;
    for (;;) {
        skip_ws(&p);
        strbuf k = {0};
        if (parse_string(&p, &k)) {
            free(k.p);
            return -1;
        }
        int match = k.n == klen && (klen == 0 || !memcmp(k.p, key, klen));
        free(k.p);
        skip_ws(&p);
        p.i++; /* ':' */
        const char *v;
        size_t vl;
        if (span(&p, &v, &vl)) return -1;
        if (match) {
            *val = v;
            *val_len = vl;
            found = 1;
        }
        skip_ws(&p);
        if (json[p.i++] == '}') return found;
    }
}

int tojson_item(const char *json, size_t len, size_t i, const char **val, size_t *val_len, qw_err *err) {
    jp p = {json, len, 0, err};
    *val = NULL;
    *val_len = 0;
    if (whole(&p, NULL)) return -1;
    if (tojson_type(json, len) != 'a') return qw_errf(err, "tojson: not a JSON array");
    p.i = 0;
    skip_ws(&p);
    p.i++;
    skip_ws(&p);
    if (json[p.i] == ']') return 0;
    for (size_t k = 0;; k++) {
        const char *v;
        size_t vl;
        if (span(&p, &v, &vl)) return -1;
        if (k == i) {
            *val = v;
            *val_len = vl;
            return 1;
        }
        skip_ws(&p);
        if (json[p.i++] == ']') return 0;
    }
}
