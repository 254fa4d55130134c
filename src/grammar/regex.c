/* regex.c - a JSON Schema "pattern" (ECMA-262 regex) -> a GBNF expression
 * over the JSON-escaped text of a string (grammar_internal.h: regex_to_gbnf).
 *
 * The pattern describes the decoded string; the grammar must spell its JSON
 * form. So every character class is split into what JSON writes as is and
 * what it must escape: '"' -> \", '\' -> \\, U+0000..U+001F -> \u00XX (one
 * spelling per character is enough: the output only has to decode right).
 *
 * Supported (a safe subset: no construct whose language is not regular):
 *   literals, escapes \. \\ \/ \- \t \n \r \f \v \0 \xHH \uHHHH, the classes
 *   . \d \w \s \D \W \S and [...] / [^...] (ranges, the class escapes
 *   inside), groups ( ) and (?: ), alternation |, quantifiers * + ? {n}
 *   {n,} {n,m} (and their lazy forms, which match the same strings), ^ at
 *   the start and $ at the end of an alternative.
 * Refused with a message: backreferences, lookaround, \b \B, named groups,
 * anchors elsewhere, counts above 1000. Unanchored ends match anything, as
 * JSON Schema's pattern is a search, not a full match.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "grammar/grammar_internal.h"

#define MAX_COUNT 1000
#define MAX_RANGES 256 /* per class: sets live on the stack (no statics: requests parse on many threads) */

typedef struct rx {
    const char *p, *end;
    char *out;
    size_t len, cap;
    int oom;
    char *err;
    size_t errlen;
    int failed;
    const char *any; /* GBNF rule: one JSON string character */
    int depth;
} rx;

static void emit(rx *x, const char *s) {
    size_t n = strlen(s);
    if (x->oom) return;
    if (x->len + n + 1 > x->cap) {
        size_t nc = x->cap ? x->cap * 2 : 256;
        while (nc < x->len + n + 1) nc *= 2;
        char *q = realloc(x->out, nc);
        if (!q) {
            x->oom = 1;
            return;
        }
        x->out = q;
        x->cap = nc;
    }
    memcpy(x->out + x->len, s, n + 1);
    x->len += n;
}

static int rfail(rx *x, const char *fmt, ...) {
    if (!x->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(x->err, x->errlen, fmt, ap);
        va_end(ap);
    }
    x->failed = 1;
    return -1;
}

/* ---- code point sets ---------------------------------------------------- */

typedef struct cset {
    long r[MAX_RANGES * 2];
    int n; /* ranges */
} cset;

static int cset_add(cset *s, long lo, long hi) {
    if (s->n >= MAX_RANGES) return -1;
    s->r[2 * s->n] = lo;
    s->r[2 * s->n + 1] = hi;
    s->n++;
    return 0;
}

static int cmp_r(const void *a, const void *b) {
    const long *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

static void cset_norm(cset *s) {
    qsort(s->r, (size_t)s->n, 2 * sizeof(long), cmp_r);
    int w = 0;
    for (int i = 0; i < s->n; i++) {
        long lo = s->r[2 * i], hi = s->r[2 * i + 1];
        if (w && lo <= s->r[2 * w - 1] + 1) {
            if (hi > s->r[2 * w - 1]) s->r[2 * w - 1] = hi;
        } else {
            s->r[2 * w] = lo;
            s->r[2 * w + 1] = hi;
            w++;
        }
    }
    s->n = w;
}

static void cset_negate(cset *s) {
    cset_norm(s);
    cset t;
    t.n = 0;
    long prev = 0;
    for (int i = 0; i < s->n; i++) {
        if (s->r[2 * i] > prev) cset_add(&t, prev, s->r[2 * i] - 1);
        prev = s->r[2 * i + 1] + 1;
    }
    if (prev <= 0x10FFFF) cset_add(&t, prev, 0x10FFFF);
    memcpy(s, &t, sizeof t);
}

static void add_class_escape(cset *s, char c) {
    switch (c) {
    case 'd': cset_add(s, '0', '9'); break;
    case 'w':
        cset_add(s, '0', '9'), cset_add(s, 'A', 'Z'), cset_add(s, 'a', 'z'), cset_add(s, '_', '_');
        break;
    case 's':
        cset_add(s, 9, 13), cset_add(s, ' ', ' '), cset_add(s, 0xA0, 0xA0), cset_add(s, 0x1680, 0x1680);
        cset_add(s, 0x2000, 0x200A), cset_add(s, 0x2028, 0x2029), cset_add(s, 0x202F, 0x202F);
        cset_add(s, 0x205F, 0x205F), cset_add(s, 0x3000, 0x3000), cset_add(s, 0xFEFF, 0xFEFF);
        break;
    }
}

/* The set as a GBNF expression over JSON-escaped text. */
static void emit_cset(rx *x, cset *s) {
    cset_norm(s);
    char buf[64];
    int alts = 0;
    /* the part JSON writes as is: >= 0x20, not '"' or '\', not surrogates */
    cset plain;
    plain.n = 0;
    for (int i = 0; i < s->n; i++) {
        long lo = s->r[2 * i], hi = s->r[2 * i + 1];
        long cuts[][2] = {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0xD7FF}, {0xE000, 0x10FFFF}};
        for (int k = 0; k < 4; k++) {
            long a = lo > cuts[k][0] ? lo : cuts[k][0], b = hi < cuts[k][1] ? hi : cuts[k][1];
            if (a <= b) cset_add(&plain, a, b);
        }
    }
    emit(x, " (");
    if (plain.n) {
        emit(x, " [");
        for (int i = 0; i < plain.n; i++) {
            snprintf(buf, sizeof buf, "\\U%08lX-\\U%08lX", plain.r[2 * i], plain.r[2 * i + 1]);
            emit(x, buf);
        }
        emit(x, "]");
        alts++;
    }
    for (int i = 0; i < s->n; i++) {
        for (long c = s->r[2 * i]; c <= s->r[2 * i + 1] && c <= 0x5C; c++) {
            const char *lit = NULL;
            if (c == '"') lit = "\"\\\\\\\"\""; /* GBNF "\\\"" = JSON \" */
            else if (c == '\\') lit = "\"\\\\\\\\\""; /* GBNF "\\\\" = JSON \\ */
            else if (c < 0x20) {
                snprintf(buf, sizeof buf, "\"\\\\u%04lx\"", c);
                lit = buf;
            }
            if (!lit) continue;
            emit(x, alts++ ? " | " : " ");
            emit(x, lit);
        }
    }
    if (!alts) emit(x, " [^\\U00000000-\\U0010FFFF]"); /* the empty set: matches nothing */
    emit(x, " )");
}

/* ---- parser ----------------------------------------------------------- */

/* One UTF-8 character of the pattern; -1 if invalid (utf8proc refuses
 * overlong forms, surrogates and code points past U+10FFFF). */
static long utf8_cp(rx *x) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)x->p, x->end - x->p, &cp);
    if (k <= 0) return -1;
    x->p += k;
    return cp;
}

static int hexv(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* An escape after '\' as a code point, or -2 for a class escape (added to
 * *cls), -1 on error. */
static long parse_escape(rx *x, cset *cls, int in_class) {
    if (x->p >= x->end) return rfail(x, "pattern ends with '\\'"), -1;
    char c = *x->p++;
    switch (c) {
    case 'd': case 'w': case 's': case 'D': case 'W': case 'S': {
        cset t;
        t.n = 0;
        add_class_escape(&t, (char)(c | 0x20));
        if (c < 'a') cset_negate(&t);
        for (int i = 0; i < t.n; i++) cset_add(cls, t.r[2 * i], t.r[2 * i + 1]);
        return -2;
    }
    case 't': return '\t';
    case 'n': return '\n';
    case 'r': return '\r';
    case 'f': return '\f';
    case 'v': return '\v';
    case '0': return 0;
    case 'x': case 'u': {
        int nd = c == 'x' ? 2 : 4;
        long v = 0;
        for (int i = 0; i < nd; i++) {
            int h = x->p < x->end ? hexv(*x->p) : -1;
            if (h < 0) return rfail(x, "bad \\%c escape in pattern", c), -1;
            v = v * 16 + h;
            x->p++;
        }
        if (v >= 0xD800 && v <= 0xDFFF) return rfail(x, "surrogate \\u escapes in patterns are not supported"), -1;
        return v;
    }
    case 'b':
        if (in_class) return 8;
        return rfail(x, "'\\b' (word boundary) in pattern is not supported"), -1;
    case 'B': return rfail(x, "'\\B' in pattern is not supported"), -1;
    case 'k': return rfail(x, "named backreferences in pattern are not supported"), -1;
    default:
        if (c >= '1' && c <= '9') return rfail(x, "backreferences in pattern are not supported"), -1;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
            return rfail(x, "unknown escape '\\%c' in pattern", c), -1;
        return (unsigned char)c; /* an escaped punctuation character: itself */
    }
}

static int parse_alt(rx *x);

/* One atom into *cls (a character set) or, for a group, emitted directly
 * (returns 1 then); 0 for a set; -1 on error. */
static int parse_atom(rx *x, cset *cls) {
    cls->n = 0;
    char c = *x->p;
    if (c == '(') {
        x->p++;
        if (x->p < x->end && *x->p == '?') {
            if (x->p + 1 < x->end && x->p[1] == ':') {
                x->p += 2;
            } else {
                return rfail(x, "lookaround and named groups '(?' in pattern are not supported");
            }
        }
        if (++x->depth > 50) return rfail(x, "pattern nested too deeply");
        emit(x, " (");
        if (parse_alt(x)) return -1;
        emit(x, " )");
        x->depth--;
        if (x->p >= x->end || *x->p != ')') return rfail(x, "missing ')' in pattern");
        x->p++;
        return 1;
    }
    if (c == '[') {
        x->p++;
        int neg = 0;
        if (x->p < x->end && *x->p == '^') {
            neg = 1;
            x->p++;
        }
        int first = 1;
        for (;;) {
            if (x->p >= x->end) return rfail(x, "missing ']' in pattern");
            if (*x->p == ']' && !first) break;
            first = 0;
            long lo;
            if (*x->p == '\\') {
                x->p++;
                lo = parse_escape(x, cls, 1);
                if (lo == -1) return -1;
                if (lo == -2) continue;
            } else {
                lo = utf8_cp(x);
                if (lo < 0) return rfail(x, "invalid UTF-8 in pattern");
            }
            long hi = lo;
            if (x->p + 1 < x->end && *x->p == '-' && x->p[1] != ']') {
                x->p++;
                if (*x->p == '\\') {
                    x->p++;
                    hi = parse_escape(x, cls, 1);
                    if (hi == -1) return -1;
                    if (hi == -2) return rfail(x, "a class escape cannot end a range in pattern");
                } else {
                    hi = utf8_cp(x);
                    if (hi < 0) return rfail(x, "invalid UTF-8 in pattern");
                }
                if (hi < lo) return rfail(x, "range out of order in pattern");
            }
            if (cset_add(cls, lo, hi)) return rfail(x, "character class too large in pattern");
        }
        x->p++;
        if (neg) cset_negate(cls);
        return 0;
    }
    if (c == '.') {
        x->p++;
        cset_add(cls, '\n', '\n'), cset_add(cls, '\r', '\r'), cset_add(cls, 0x2028, 0x2029);
        cset_negate(cls);
        return 0;
    }
    if (c == '\\') {
        x->p++;
        long cp = parse_escape(x, cls, 0);
        if (cp == -1) return -1;
        if (cp >= 0) cset_add(cls, cp, cp);
        return 0;
    }
    if (c == '^' || c == '$') return rfail(x, "anchors ('%c') inside a pattern are not supported, only at its ends", c);
    if (c == '*' || c == '+' || c == '?' || c == '{') return rfail(x, "nothing to repeat at '%c' in pattern", c);
    long cp = utf8_cp(x);
    if (cp < 0) return rfail(x, "invalid UTF-8 in pattern");
    cset_add(cls, cp, cp);
    return 0;
}

static int parse_count(rx *x, long *v) {
    if (x->p >= x->end || *x->p < '0' || *x->p > '9') return -1;
    *v = 0;
    while (x->p < x->end && *x->p >= '0' && *x->p <= '9') {
        *v = *v * 10 + (*x->p++ - '0');
        if (*v > MAX_COUNT) return rfail(x, "repetition count above %d in pattern", MAX_COUNT);
    }
    return 0;
}

/* A sequence up to '|' or ')' or the end. */
static int parse_seq(rx *x) {
    cset cls;
    int any = 0;
    while (x->p < x->end && *x->p != '|' && *x->p != ')') {
        if (*x->p == '$' && (x->p + 1 == x->end || x->p[1] == '|' || x->p[1] == ')') && x->depth == 0) break;
        size_t mark = x->len;
        int r = parse_atom(x, &cls);
        if (r < 0) return -1;
        if (r == 0) emit_cset(x, &cls);
        /* quantifier: wrap what was emitted since mark */
        if (x->p < x->end && (*x->p == '*' || *x->p == '+' || *x->p == '?' || *x->p == '{')) {
            char q = *x->p;
            char suffix[64];
            if (q == '{') {
                const char *save = x->p;
                x->p++;
                long a, b;
                if (parse_count(x, &a)) {
                    if (x->failed) return -1;
                    /* a literal '{' (ECMA-262 annex B): treat as the character */
                    x->p = save;
                    goto literal_brace;
                }
                b = a;
                if (x->p < x->end && *x->p == ',') {
                    x->p++;
                    b = -1;
                    if (x->p < x->end && *x->p != '}' && parse_count(x, &b)) return rfail(x, "bad {n,m} in pattern");
                }
                if (x->p >= x->end || *x->p != '}') return rfail(x, "missing '}' in pattern");
                x->p++;
                if (b >= 0 && b < a) return rfail(x, "{n,m} with m < n in pattern");
                if (b < 0) snprintf(suffix, sizeof suffix, "{%ld,}", a);
                else snprintf(suffix, sizeof suffix, "{%ld,%ld}", a, b);
            } else {
                x->p++;
                snprintf(suffix, sizeof suffix, "%c", q);
            }
            if (x->p < x->end && *x->p == '?') x->p++; /* lazy: same strings */
            if (x->p < x->end && (*x->p == '*' || *x->p == '+' || *x->p == '{'))
                return rfail(x, "a quantifier after a quantifier in pattern is not supported");
            /* wrap [mark, len) in a group */
            char *body = strdup(x->out ? x->out + mark : "");
            if (!body) {
                x->oom = 1;
                return -1;
            }
            x->len = mark;
            if (x->out) x->out[mark] = 0;
            emit(x, " (");
            emit(x, body);
            emit(x, " )");
            emit(x, suffix);
            free(body);
        }
        any = 1;
        continue;
    literal_brace:
        x->p++;
        emit(x, " \"{\"");
        any = 1;
    }
    if (!any) emit(x, " \"\"");
    return 0;
}

/* Alternatives; at depth 0 each one handles its own ^ and $. */
static int parse_alt(rx *x) {
    int first = 1;
    for (;;) {
        if (!first) emit(x, " |");
        first = 0;
        int start_anchor = 0, end_anchor = 0;
        if (x->depth == 0 && x->p < x->end && *x->p == '^') {
            start_anchor = 1;
            x->p++;
        }
        if (x->depth == 0 && !start_anchor) {
            emit(x, " ");
            emit(x, x->any);
            emit(x, "*");
        }
        if (parse_seq(x)) return -1;
        if (x->depth == 0 && x->p < x->end && *x->p == '$') {
            end_anchor = 1;
            x->p++;
        }
        if (x->depth == 0 && !end_anchor) {
            emit(x, " ");
            emit(x, x->any);
            emit(x, "*");
        }
        if (x->p < x->end && *x->p == '|') {
            x->p++;
            continue;
        }
        return 0;
    }
}

int regex_to_gbnf(const char *pattern, const char *any_char_rule, char **out, char *err, size_t errlen) {
    rx x = {.p = pattern, .end = pattern + strlen(pattern), .err = err, .errlen = errlen, .any = any_char_rule};
    *out = NULL;
    emit(&x, " (");
    int rc = parse_alt(&x);
    if (!rc && x.p < x.end) rc = rfail(&x, "unbalanced ')' in pattern");
    emit(&x, " )");
    if (!rc && x.oom) rc = rfail(&x, "out of memory");
    if (rc) {
        free(x.out);
        return -1;
    }
    *out = x.out;
    return 0;
}
