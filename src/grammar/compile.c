/* compile.c - GBNF text -> per-rule byte DFAs with call edges (grammar_internal.h).
 *
 * The accepted syntax is llama.cpp's GBNF (grammars/README.md there):
 *   name ::= alternatives          one rule per line; a rule continues over
 *                                  newlines inside ( ) and after |
 *   "literal"  [class] [^class]    escapes \n \r \t \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH
 *   .          any character
 *   name       a rule reference
 *   ( ... )    grouping;  x* x+ x?  x{m} x{m,} x{m,n}  repetition
 *   # comment  to the end of the line
 * Not supported: token references <[id]> (refused with a message).
 *
 * Pipeline: text -> syntax tree per rule -> Thompson NFA over bytes (UTF-8
 * ranges of character classes split into byte-range sequences, RE2's
 * method) -> subset construction, where a rule reference is one more
 * symbol of the alphabet -> global state tables. Then nullable rules and
 * left recursion (which a top-down matcher cannot run) are checked.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "grammar/grammar_internal.h"

#define MAX_NFA_STATES 500000  /* per rule; ~10 MB while compiling */
#define MAX_DFA_STATES 20000   /* 1 KiB of transitions each: 20 MB at most per grammar */
#define MAX_REPEAT 10000
#define MAX_GROUP_DEPTH 64 /* nested ( ) groups */

/* ---- syntax tree ----------------------------------------------------- */

enum { N_BYTES, N_CLASS, N_REF, N_SEQ, N_ALT, N_REP };

typedef struct node {
    int kind;
    int a, b;       /* N_REF: rule; N_REP: min, max (-1 = unbounded) */
    int *kids;      /* N_SEQ, N_ALT, N_REP (one kid); N_BYTES: bytes; N_CLASS: lo,hi pairs */
    int n, cap;
} node;

typedef struct rule {
    char *name;
    int body;       /* node index, -1 = referenced but not defined yet */
    int line;       /* where first referenced / defined */
} rule;

typedef struct parser {
    const char *s, *end, *p;
    node *nodes;
    int n_nodes, cap_nodes;
    rule *rules;
    int n_rules, cap_rules;
    qw_err *err;
    int failed;
    int depth; /* ( ) groups open now: the parser recurses once per group */
} parser;

static int grow(void **ptr, int *cap, int need, size_t elem) {
    if (need <= *cap) return 0;
    int nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    void *q = realloc(*ptr, (size_t)nc * elem);
    if (!q) return -1;
    *ptr = q;
    *cap = nc;
    return 0;
}

static void pos_of(const parser *ps, const char *at, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (const char *q = ps->s; q < at && q < ps->end; q++) {
        if (*q == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

static int perr(parser *ps, const char *what) {
    if (!ps->failed) {
        int line, col;
        pos_of(ps, ps->p, &line, &col);
        qw_errf(ps->err, "grammar: line %d, column %d: %s", line, col, what);
    }
    ps->failed = 1;
    return -1;
}

static int new_node(parser *ps, int kind) {
    if (grow((void **)&ps->nodes, &ps->cap_nodes, ps->n_nodes + 1, sizeof(node)))
        return perr(ps, "out of memory");
    node *n = &ps->nodes[ps->n_nodes];
    memset(n, 0, sizeof *n);
    n->kind = kind;
    return ps->n_nodes++;
}

static int node_push(parser *ps, int ni, int v) {
    node *n = &ps->nodes[ni];
    if (grow((void **)&n->kids, &n->cap, n->n + 1, sizeof(int))) return perr(ps, "out of memory");
    n->kids[n->n++] = v;
    return 0;
}

static int rule_find(parser *ps, const char *name, size_t len, int line) {
    for (int i = 0; i < ps->n_rules; i++)
        if (strlen(ps->rules[i].name) == len && !memcmp(ps->rules[i].name, name, len)) return i;
    if (grow((void **)&ps->rules, &ps->cap_rules, ps->n_rules + 1, sizeof(rule)))
        return perr(ps, "out of memory");
    rule *r = &ps->rules[ps->n_rules];
    r->name = malloc(len + 1);
    if (!r->name) return perr(ps, "out of memory");
    memcpy(r->name, name, len);
    r->name[len] = 0;
    r->body = -1;
    r->line = line;
    return ps->n_rules++;
}

static int is_name_char(int c) { return isalnum(c) || c == '-' || c == '_'; }

static void skip_space(parser *ps, int newlines) {
    while (ps->p < ps->end) {
        char c = *ps->p;
        if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
            ps->p++;
        } else if (c == '#') {
            while (ps->p < ps->end && *ps->p != '\n') ps->p++;
        } else {
            break;
        }
    }
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Decode one UTF-8 character of the grammar text; -1 if invalid
 * (utf8proc: overlong forms, surrogates and past U+10FFFF too). */
static long utf8_next(parser *ps) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)ps->p, ps->end - ps->p, &cp);
    if (k <= 0) return -1;
    ps->p += k;
    return cp;
}

/* One character of a literal or class, escapes decoded. */
static long parse_char(parser *ps) {
    if (ps->p >= ps->end) return perr(ps, "unexpected end of grammar"), -1;
    if (*ps->p != '\\') {
        long cp = utf8_next(ps);
        if (cp < 0) return perr(ps, "invalid UTF-8"), -1;
        return cp;
    }
    ps->p++;
    if (ps->p >= ps->end) return perr(ps, "unexpected end after \\"), -1;
    char c = *ps->p++;
    int digits = 0;
    switch (c) {
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case '\\': case '"': case '[': case ']': case '-': case '^': case '/': case '\'': return c;
    case 'x': digits = 2; break;
    case 'u': digits = 4; break;
    case 'U': digits = 8; break;
    default: ps->p--; return perr(ps, "unknown escape"), -1;
    }
    long v = 0;
    for (int i = 0; i < digits; i++) {
        int h = ps->p < ps->end ? hexval(*ps->p) : -1;
        if (h < 0) return perr(ps, "bad hex escape"), -1;
        v = v * 16 + h;
        ps->p++;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return perr(ps, "escape is not a Unicode scalar value"), -1;
    return v;
}

static int push_utf8(parser *ps, int ni, long cp) {
    unsigned char b[4];
    int n;
    if (cp < 0x80) {
        b[0] = (unsigned char)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (unsigned char)(0xc0 | (cp >> 6));
        b[1] = (unsigned char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (unsigned char)(0xe0 | (cp >> 12));
        b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        b[2] = (unsigned char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        b[0] = (unsigned char)(0xf0 | (cp >> 18));
        b[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
        b[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        b[3] = (unsigned char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    for (int i = 0; i < n; i++)
        if (node_push(ps, ni, b[i])) return -1;
    return 0;
}

static int cmp_range(const void *a, const void *b) {
    const int *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Sort and merge the class's ranges; complement if negated; drop surrogates. */
static int class_finish(parser *ps, int ni, int negated) {
    node *n = &ps->nodes[ni];
    int m = n->n / 2;
    if (m) qsort(n->kids, (size_t)m, 2 * sizeof(int), cmp_range); /* kids is NULL for "." and "[]" */
    int w = 0;
    for (int i = 0; i < m; i++) {
        int lo = n->kids[2 * i], hi = n->kids[2 * i + 1];
        if (w && lo <= n->kids[2 * w - 1] + 1) {
            if (hi > n->kids[2 * w - 1]) n->kids[2 * w - 1] = hi;
        } else {
            n->kids[2 * w] = lo;
            n->kids[2 * w + 1] = hi;
            w++;
        }
    }
    n->n = 2 * w;
    int *src = n->kids, cnt = w;
    int *out = NULL, no = 0, oc = 0;
    /* complement (if negated) and surrogate removal, into a fresh list */
    int prev = 0;
    for (int i = 0; i <= cnt; i++) {
        int lo, hi;
        if (negated) {
            lo = prev;
            hi = i < cnt ? src[2 * i] - 1 : 0x10FFFF;
            if (i < cnt) prev = src[2 * i + 1] + 1;
        } else {
            if (i == cnt) break;
            lo = src[2 * i];
            hi = src[2 * i + 1];
        }
        int parts[4] = {lo, hi < 0xD7FF ? hi : 0xD7FF, lo > 0xE000 ? lo : 0xE000, hi};
        for (int k = 0; k < 2; k++) {
            if (parts[2 * k] > parts[2 * k + 1]) continue;
            if (grow((void **)&out, &oc, no + 2, sizeof(int))) {
                free(out);
                return perr(ps, "out of memory");
            }
            out[no++] = parts[2 * k];
            out[no++] = parts[2 * k + 1];
        }
    }
    free(n->kids);
    n->kids = out;
    n->n = no;
    n->cap = oc;
    return 0;
}

static int parse_alts(parser *ps, int nested);

static int parse_seq(parser *ps, int nested) {
    int seq = new_node(ps, N_SEQ);
    if (seq < 0) return -1;
    for (;;) {
        if (ps->p >= ps->end) break;
        char c = *ps->p;
        int el = -1;
        if (c == '"') {
            ps->p++;
            el = new_node(ps, N_BYTES);
            if (el < 0) return -1;
            for (;;) {
                if (ps->p >= ps->end || *ps->p == '\n') return perr(ps, "unterminated literal");
                if (*ps->p == '"') {
                    ps->p++;
                    break;
                }
                long cp = parse_char(ps);
                if (cp < 0 || push_utf8(ps, el, cp)) return -1;
            }
        } else if (c == '[') {
            ps->p++;
            int negated = 0;
            if (ps->p < ps->end && *ps->p == '^') {
                negated = 1;
                ps->p++;
            }
            el = new_node(ps, N_CLASS);
            if (el < 0) return -1;
            for (;;) {
                if (ps->p >= ps->end || *ps->p == '\n') return perr(ps, "unterminated character class");
                if (*ps->p == ']') {
                    ps->p++;
                    break;
                }
                long lo = parse_char(ps), hi = lo;
                if (lo < 0) return -1;
                if (ps->p + 1 < ps->end && *ps->p == '-' && ps->p[1] != ']') {
                    ps->p++;
                    hi = parse_char(ps);
                    if (hi < 0) return -1;
                    if (hi < lo) return perr(ps, "character range out of order");
                }
                if (node_push(ps, el, (int)lo) || node_push(ps, el, (int)hi)) return -1;
            }
            if (class_finish(ps, el, negated)) return -1;
        } else if (c == '.') {
            ps->p++;
            el = new_node(ps, N_CLASS);
            if (el < 0 || class_finish(ps, el, 1)) return -1;
        } else if (is_name_char((unsigned char)c)) {
            const char *st = ps->p;
            while (ps->p < ps->end && is_name_char((unsigned char)*ps->p)) ps->p++;
            int line, col;
            pos_of(ps, st, &line, &col);
            int r = rule_find(ps, st, (size_t)(ps->p - st), line);
            if (r < 0) return -1;
            el = new_node(ps, N_REF);
            if (el < 0) return -1;
            ps->nodes[el].a = r;
        } else if (c == '(') {
            /* A request's grammar is untrusted: "((((..." must be an
             * error, not one stack frame per byte until the stack ends. */
            if (ps->depth >= MAX_GROUP_DEPTH) return perr(ps, "groups nested too deeply (at most 64)");
            ps->p++;
            skip_space(ps, 1);
            ps->depth++;
            el = parse_alts(ps, 1);
            ps->depth--;
            if (el < 0) return -1;
            if (ps->p >= ps->end || *ps->p != ')') return perr(ps, "expected ')'");
            ps->p++;
        } else if (c == '<') {
            return perr(ps, "token references <[id]> are not supported");
        } else {
            break;
        }
        /* postfix repetition operators */
        for (;;) {
            skip_space(ps, nested);
            if (ps->p >= ps->end) break;
            int mn, mx;
            char op = *ps->p;
            if (op == '*') {
                mn = 0, mx = -1;
                ps->p++;
            } else if (op == '+') {
                mn = 1, mx = -1;
                ps->p++;
            } else if (op == '?') {
                mn = 0, mx = 1;
                ps->p++;
            } else if (op == '{') {
                ps->p++;
                skip_space(ps, 0);
                long a = 0, b;
                if (ps->p >= ps->end || !isdigit((unsigned char)*ps->p)) return perr(ps, "expected a number after '{'");
                while (ps->p < ps->end && isdigit((unsigned char)*ps->p) && a <= MAX_REPEAT) a = a * 10 + (*ps->p++ - '0');
                skip_space(ps, 0);
                b = a;
                if (ps->p < ps->end && *ps->p == ',') {
                    ps->p++;
                    skip_space(ps, 0);
                    b = -1;
                    if (ps->p < ps->end && isdigit((unsigned char)*ps->p)) {
                        b = 0;
                        while (ps->p < ps->end && isdigit((unsigned char)*ps->p) && b <= MAX_REPEAT) b = b * 10 + (*ps->p++ - '0');
                    }
                    skip_space(ps, 0);
                }
                if (ps->p >= ps->end || *ps->p != '}') return perr(ps, "expected '}'");
                ps->p++;
                if (a > MAX_REPEAT || b > MAX_REPEAT) return perr(ps, "repetition count too large (at most 10000)");
                if (b >= 0 && b < a) return perr(ps, "repetition {m,n} with n < m");
                mn = (int)a, mx = (int)b;
            } else {
                break;
            }
            int rep = new_node(ps, N_REP);
            if (rep < 0) return -1;
            ps->nodes[rep].a = mn;
            ps->nodes[rep].b = mx;
            if (node_push(ps, rep, el)) return -1;
            el = rep;
        }
        if (node_push(ps, seq, el)) return -1;
    }
    return seq;
}

static int parse_alts(parser *ps, int nested) {
    int alt = new_node(ps, N_ALT);
    if (alt < 0) return -1;
    for (;;) {
        int s = parse_seq(ps, nested);
        if (s < 0 || node_push(ps, alt, s)) return -1;
        if (ps->p < ps->end && *ps->p == '|') {
            ps->p++;
            skip_space(ps, 1);
            continue;
        }
        break;
    }
    return alt;
}

static int parse_grammar(parser *ps) {
    for (;;) {
        skip_space(ps, 1);
        if (ps->p >= ps->end) break;
        const char *st = ps->p;
        while (ps->p < ps->end && is_name_char((unsigned char)*ps->p)) ps->p++;
        if (ps->p == st) return perr(ps, "expected a rule name");
        int line, col;
        pos_of(ps, st, &line, &col);
        int r = rule_find(ps, st, (size_t)(ps->p - st), line);
        if (r < 0) return -1;
        skip_space(ps, 0);
        if (ps->end - ps->p < 3 || memcmp(ps->p, "::=", 3)) return perr(ps, "expected '::='");
        ps->p += 3;
        skip_space(ps, 1);
        if (ps->rules[r].body >= 0) return perr(ps, "rule defined twice");
        ps->rules[r].line = line;
        int body = parse_alts(ps, 0);
        if (body < 0) return -1;
        ps->rules[r].body = body;
        if (ps->p < ps->end && *ps->p != '\n') return perr(ps, "unexpected character");
    }
    return 0;
}

/* ---- NFA --------------------------------------------------------------- */

enum { E_EPS, E_BYTE, E_CALL };

typedef struct nedge {
    int kind, lo, hi, to, next; /* E_CALL: lo = rule */
} nedge;

typedef struct nfa {
    int *first;   /* [n] first edge of each state, -1 = none */
    int n, cap;
    nedge *e;
    int ne, cape;
    int oom;
} nfa;

static int nfa_state(nfa *f) {
    if (f->n >= MAX_NFA_STATES || grow((void **)&f->first, &f->cap, f->n + 1, sizeof(int))) {
        f->oom = 1;
        return 0;
    }
    f->first[f->n] = -1;
    return f->n++;
}

static void nfa_edge(nfa *f, int from, int kind, int lo, int hi, int to) {
    if (f->oom) return;
    if (f->ne >= 4 * MAX_NFA_STATES || grow((void **)&f->e, &f->cape, f->ne + 1, sizeof(nedge))) {
        f->oom = 1;
        return;
    }
    f->e[f->ne] = (nedge){kind, lo, hi, to, f->first[from]};
    f->first[from] = f->ne++;
}

/* Byte-range sequences for the code points [lo, hi] of one UTF-8 length,
 * split until every byte position is a plain range (RE2's utf8 ranges). */
static void utf8_enc(long cp, int n, int *b) {
    if (n == 1) {
        b[0] = (int)cp;
    } else if (n == 2) {
        b[0] = (int)(0xc0 | (cp >> 6)), b[1] = (int)(0x80 | (cp & 0x3f));
    } else if (n == 3) {
        b[0] = (int)(0xe0 | (cp >> 12)), b[1] = (int)(0x80 | ((cp >> 6) & 0x3f)), b[2] = (int)(0x80 | (cp & 0x3f));
    } else {
        b[0] = (int)(0xf0 | (cp >> 18)), b[1] = (int)(0x80 | ((cp >> 12) & 0x3f));
        b[2] = (int)(0x80 | ((cp >> 6) & 0x3f)), b[3] = (int)(0x80 | (cp & 0x3f));
    }
}

static void utf8_split(nfa *f, long lo, long hi, int n, int from, int to) {
    if (lo > hi) return;
    for (int i = 1; i < n; i++) {
        long m = (1L << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) {
                utf8_split(f, lo, lo | m, n, from, to);
                utf8_split(f, (lo | m) + 1, hi, n, from, to);
                return;
            }
            if ((hi & m) != m) {
                utf8_split(f, lo, (hi & ~m) - 1, n, from, to);
                utf8_split(f, hi & ~m, hi, n, from, to);
                return;
            }
        }
    }
    int a[4], b[4];
    utf8_enc(lo, n, a);
    utf8_enc(hi, n, b);
    int cur = from;
    for (int i = 0; i < n; i++) {
        int nx = i == n - 1 ? to : nfa_state(f);
        nfa_edge(f, cur, E_BYTE, a[i], b[i], nx);
        cur = nx;
    }
}

static void class_edges(nfa *f, long lo, long hi, int from, int to) {
    static const long lim[4] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
    long start = 0;
    for (int n = 1; n <= 4; n++) {
        long a = lo > start ? lo : start, b = hi < lim[n - 1] ? hi : lim[n - 1];
        if (a <= b) utf8_split(f, a, b, n, from, to);
        start = lim[n - 1] + 1;
    }
}

static int build(nfa *f, const parser *ps, int ni, int from) {
    const node *n = &ps->nodes[ni];
    if (f->oom) return from;
    switch (n->kind) {
    case N_BYTES: {
        int cur = from;
        for (int i = 0; i < n->n; i++) {
            int nx = nfa_state(f);
            nfa_edge(f, cur, E_BYTE, n->kids[i], n->kids[i], nx);
            cur = nx;
        }
        return cur;
    }
    case N_CLASS: {
        int to = nfa_state(f);
        for (int i = 0; i < n->n; i += 2) class_edges(f, n->kids[i], n->kids[i + 1], from, to);
        return to;
    }
    case N_REF: {
        int to = nfa_state(f);
        nfa_edge(f, from, E_CALL, n->a, 0, to);
        return to;
    }
    case N_SEQ: {
        int cur = from;
        for (int i = 0; i < n->n; i++) cur = build(f, ps, n->kids[i], cur);
        return cur;
    }
    case N_ALT: {
        if (n->n == 1) return build(f, ps, n->kids[0], from);
        int end = nfa_state(f);
        for (int i = 0; i < n->n; i++) {
            int e = build(f, ps, n->kids[i], from);
            nfa_edge(f, e, E_EPS, 0, 0, end);
        }
        return end;
    }
    default: { /* N_REP */
        int cur = from;
        for (int i = 0; i < n->a && !f->oom; i++) cur = build(f, ps, n->kids[0], cur);
        if (n->b < 0) {
            int s = nfa_state(f);
            nfa_edge(f, cur, E_EPS, 0, 0, s);
            int e = build(f, ps, n->kids[0], s);
            nfa_edge(f, e, E_EPS, 0, 0, s);
            return s;
        }
        if (n->b == n->a) return cur;
        int end = nfa_state(f);
        nfa_edge(f, cur, E_EPS, 0, 0, end);
        for (int i = n->a; i < n->b && !f->oom; i++) {
            cur = build(f, ps, n->kids[0], cur);
            nfa_edge(f, cur, E_EPS, 0, 0, end);
        }
        return end;
    }
    }
}

/* ---- subset construction ----------------------------------------------- */

typedef struct dfa_b {
    /* global output tables, grown as rules are added */
    int32_t *next;
    uint8_t *accept;
    int32_t *call0;   /* per state: first call index (call1 computed at the end) */
    int32_t *ncall;
    gcall *calls;
    int n, cap, nc, capc;
    /* per rule: the NFA state sets of its DFA states */
    int *sets;        /* concatenated sorted sets */
    int nsets, capsets;
    int *set_off, *set_len;
    int capoff;
    int *htab;        /* open addressing: DFA state (local) + 1 */
    int hcap;
    int base;         /* first global state of the current rule */
    int oom;
} dfa_b;

static uint64_t set_hash(const int *s, int n) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; i++) h = (h ^ (uint64_t)s[i]) * 1099511628211ull;
    return h;
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}

/* eps-closure of set[n] in place (set has room for nfa->n); returns the new size, sorted. */
static int closure(const nfa *f, int *set, int n, uint8_t *mark, int *stack) {
    int sp = 0;
    for (int i = 0; i < n; i++) {
        mark[set[i]] = 1;
        stack[sp++] = set[i];
    }
    while (sp) {
        int s = stack[--sp];
        for (int e = f->first[s]; e >= 0; e = f->e[e].next) {
            if (f->e[e].kind != E_EPS || mark[f->e[e].to]) continue;
            mark[f->e[e].to] = 1;
            set[n++] = f->e[e].to;
            stack[sp++] = f->e[e].to;
        }
    }
    for (int i = 0; i < n; i++) mark[set[i]] = 0;
    qsort(set, (size_t)n, sizeof(int), cmp_int);
    return n;
}

/* The global id of the DFA state for set[n], adding it if new. */
static int intern(dfa_b *d, const int *set, int n, int final_state) {
    int local_n = d->n - d->base;
    if ((local_n + 1) * 2 > d->hcap) {
        int nc = d->hcap ? d->hcap * 2 : 64;
        int *h = calloc((size_t)nc, sizeof(int));
        if (!h) {
            d->oom = 1;
            return -1;
        }
        for (int i = 0; i < d->hcap; i++) {
            if (!d->htab[i]) continue;
            int l = d->htab[i] - 1;
            uint64_t k = set_hash(d->sets + d->set_off[l], d->set_len[l]) & (uint64_t)(nc - 1);
            while (h[k]) k = (k + 1) & (uint64_t)(nc - 1);
            h[k] = d->htab[i];
        }
        free(d->htab);
        d->htab = h;
        d->hcap = nc;
    }
    uint64_t k = set_hash(set, n) & (uint64_t)(d->hcap - 1);
    while (d->htab[k]) {
        int l = d->htab[k] - 1;
        if (d->set_len[l] == n && !memcmp(d->sets + d->set_off[l], set, (size_t)n * sizeof(int)))
            return d->base + l;
        k = (k + 1) & (uint64_t)(d->hcap - 1);
    }
    if (d->n >= MAX_DFA_STATES) {
        d->oom = 2;
        return -1;
    }
    if (grow((void **)&d->next, &d->cap, d->n + 1, 256 * sizeof(int32_t)) ||
        grow((void **)&d->set_off, &d->capoff, local_n + 1, sizeof(int)) ||
        grow((void **)&d->sets, &d->capsets, d->nsets + n, sizeof(int))) {
        d->oom = 1;
        return -1;
    }
    /* accept / call0 / ncall / set_len grow with the same capacity as next */
    int capn = d->cap;
    uint8_t *acc = realloc(d->accept, (size_t)capn);
    int32_t *c0 = acc ? realloc(d->call0, (size_t)capn * sizeof(int32_t)) : NULL;
    if (acc) d->accept = acc;
    if (c0) d->call0 = c0;
    int32_t *nc = c0 ? realloc(d->ncall, (size_t)capn * sizeof(int32_t)) : NULL;
    if (nc) d->ncall = nc;
    int *sl = nc ? realloc(d->set_len, (size_t)(d->capoff) * sizeof(int)) : NULL;
    if (!sl) {
        d->oom = 1;
        return -1;
    }
    d->set_len = sl;
    memcpy(d->sets + d->nsets, set, (size_t)n * sizeof(int));
    d->set_off[local_n] = d->nsets;
    d->set_len[local_n] = n;
    d->nsets += n;
    int g = d->n++;
    for (int b = 0; b < 256; b++) d->next[(size_t)g * 256 + b] = -1;
    d->accept[g] = 0;
    for (int i = 0; i < n; i++)
        if (set[i] == final_state) d->accept[g] = 1;
    d->call0[g] = 0;
    d->ncall[g] = 0;
    d->htab[k] = local_n + 1;
    return g;
}

/* Subset construction of one rule's NFA into global states; returns the start state. */
static int determinize(dfa_b *d, const nfa *f, int start, int final_state) {
    d->base = d->n;
    d->nsets = 0;
    if (d->hcap) memset(d->htab, 0, (size_t)d->hcap * sizeof(int));
    int *set = malloc((size_t)f->n * sizeof(int) * 2 + 16);
    int *stack = set ? set + f->n + 4 : NULL;
    uint8_t *mark = calloc((size_t)f->n + 1, 1);
    uint8_t *seen_rule = NULL;
    if (!set || !mark) {
        free(set);
        free(mark);
        d->oom = 1;
        return -1;
    }
    set[0] = start;
    int n = closure(f, set, 1, mark, stack);
    int s0 = intern(d, set, n, final_state);
    for (int g = s0; g >= 0 && g < d->n && !d->oom; g++) {
        int l = g - d->base;
        /* byte moves */
        for (int b = 0; b < 256; b++) {
            int m = 0;
            int off = d->set_off[l], len = d->set_len[l];
            for (int i = 0; i < len; i++) {
                int s = d->sets[off + i];
                for (int e = f->first[s]; e >= 0; e = f->e[e].next)
                    if (f->e[e].kind == E_BYTE && b >= f->e[e].lo && b <= f->e[e].hi && !mark[f->e[e].to]) {
                        mark[f->e[e].to] = 1;
                        set[m++] = f->e[e].to;
                    }
            }
            for (int i = 0; i < m; i++) mark[set[i]] = 0;
            if (!m) continue;
            m = closure(f, set, m, mark, stack);
            int t = intern(d, set, m, final_state);
            if (t < 0) break;
            d->next[(size_t)g * 256 + b] = t;
        }
        /* calls: one target state per called rule */
        int off = d->set_off[l], len = d->set_len[l];
        d->call0[g] = d->nc;
        for (int i = 0; i < len && !d->oom; i++) {
            int s = d->sets[off + i];
            for (int e = f->first[s]; e >= 0; e = f->e[e].next) {
                if (f->e[e].kind != E_CALL) continue;
                int r = f->e[e].lo, dup = 0;
                for (int c = d->call0[g]; c < d->nc; c++) dup |= d->calls[c].rule == r;
                if (dup) continue;
                int m = 0;
                for (int i2 = 0; i2 < len; i2++) {
                    int s2 = d->sets[off + i2];
                    for (int e2 = f->first[s2]; e2 >= 0; e2 = f->e[e2].next)
                        if (f->e[e2].kind == E_CALL && f->e[e2].lo == r && !mark[f->e[e2].to]) {
                            mark[f->e[e2].to] = 1;
                            set[m++] = f->e[e2].to;
                        }
                }
                for (int i2 = 0; i2 < m; i2++) mark[set[i2]] = 0;
                m = closure(f, set, m, mark, stack);
                int t = intern(d, set, m, final_state);
                if (t < 0) break;
                /* intern may have moved nothing we hold: calls is separate */
                if (grow((void **)&d->calls, &d->capc, d->nc + 1, sizeof(gcall))) {
                    d->oom = 1;
                    break;
                }
                d->calls[d->nc++] = (gcall){r, t};
            }
        }
        d->ncall[g] = d->nc - d->call0[g];
    }
    free(set);
    free(mark);
    free(seen_rule);
    return d->oom ? -1 : s0;
}

/* ---- checks: nullable rules, left recursion ------------------------------ */

/* States of rule r reachable from its start without consuming a byte
 * (through calls of nullable rules); calls out of them are "left calls". */
static int left_reach(const qw_grammar *g, const uint8_t *nullable, int r, int *stack, uint8_t *seen,
                      int *list) {
    int sp = 0, nl = 0;
    int s0 = g->rule_start[r];
    stack[sp++] = s0;
    seen[s0] = 1;
    list[nl++] = s0;
    while (sp) {
        int s = stack[--sp];
        for (int c = g->call0[s]; c < g->call0[s + 1]; c++) {
            if (!nullable[g->calls[c].rule]) continue;
            int t = g->calls[c].ret;
            if (seen[t]) continue;
            seen[t] = 1;
            stack[sp++] = t;
            list[nl++] = t;
        }
    }
    for (int i = 0; i < nl; i++) seen[list[i]] = 0;
    return nl;
}

static int check_rules(qw_grammar *g, const parser *ps, qw_err *err) {
    int rc = -1;
    uint8_t *nullable = calloc((size_t)g->n_rules, 1);
    uint8_t *seen = calloc((size_t)g->n_states, 1);
    int *stack = malloc((size_t)g->n_states * sizeof(int));
    int *list = malloc((size_t)g->n_states * sizeof(int));
    uint8_t *color = calloc((size_t)g->n_rules, 1);
    int *rstack = malloc((size_t)g->n_rules * 2 * sizeof(int));
    if (!nullable || !seen || !stack || !list || !color || !rstack) {
        qw_errf(err, "grammar: out of memory");
        goto out;
    }
    for (int changed = 1; changed;) {
        changed = 0;
        for (int r = 0; r < g->n_rules; r++) {
            if (nullable[r]) continue;
            int nl = left_reach(g, nullable, r, stack, seen, list);
            for (int i = 0; i < nl; i++)
                if (g->accept[list[i]]) {
                    nullable[r] = 1;
                    changed = 1;
                    break;
                }
        }
    }
    /* left-call graph cycle search, iterative DFS over rules */
    for (int r0 = 0; r0 < g->n_rules; r0++) {
        if (color[r0]) continue;
        int sp = 0;
        rstack[sp++] = r0;
        rstack[sp++] = 0;
        color[r0] = 1;
        while (sp) {
            int r = rstack[sp - 2], k = rstack[sp - 1];
            int nl = left_reach(g, nullable, r, stack, seen, list);
            int pushed = 0, idx = 0;
            for (int i = 0; i < nl && !pushed; i++) {
                int s = list[i];
                for (int c = g->call0[s]; c < g->call0[s + 1]; c++, idx++) {
                    if (idx < k) continue;
                    int r2 = g->calls[c].rule;
                    rstack[sp - 1] = idx + 1;
                    if (color[r2] == 1) {
                        qw_errf(err, "grammar: left recursion through rule '%s'", ps->rules[r2].name);
                        goto out;
                    }
                    if (color[r2] == 0) {
                        color[r2] = 1;
                        rstack[sp++] = r2;
                        rstack[sp++] = 0;
                        pushed = 1;
                        break;
                    }
                }
            }
            if (!pushed) {
                color[r] = 2;
                sp -= 2;
            }
        }
    }
    rc = 0;
out:
    free(nullable);
    free(seen);
    free(stack);
    free(list);
    free(color);
    free(rstack);
    return rc;
}

/* ---- inlining -------------------------------------------------------------- */

/* NFA size of a subtree (repetitions counted out), references counted as 1,
 * capped to keep the count itself cheap. */
static long tree_size(const parser *ps, int ni, int *has_ref) {
    const node *n = &ps->nodes[ni];
    switch (n->kind) {
    case N_BYTES: return n->n;
    case N_CLASS: return 1 + n->n;
    case N_REF: *has_ref = 1; return 1;
    case N_REP: {
        long k = tree_size(ps, n->kids[0], has_ref);
        long times = n->b > n->a ? n->b : n->a;
        if (times < 1) times = 1;
        long t = k * times;
        return t > (1L << 30) ? (1L << 30) : t;
    }
    default: {
        long t = 1;
        for (int i = 0; i < n->n && t < (1L << 30); i++) t += tree_size(ps, n->kids[i], has_ref);
        return t;
    }
    }
}

static int inline_into(parser *ps, int ni, const uint8_t *can) {
    node *n = &ps->nodes[ni];
    int changed = 0;
    if (n->kind == N_REF) {
        if (!can[n->a]) return 0;
        /* the reference becomes a group around the rule's body (shared, the
         * NFA builder instantiates it afresh at every use) */
        int *k = malloc(sizeof(int));
        if (!k) return 0;
        k[0] = ps->rules[n->a].body;
        n->kind = N_SEQ;
        n->kids = k;
        n->n = n->cap = 1;
        return 1;
    }
    if (n->kind == N_BYTES || n->kind == N_CLASS) return 0;
    for (int i = 0; i < ps->nodes[ni].n; i++) changed |= inline_into(ps, ps->nodes[ni].kids[i], can);
    return changed;
}

/* Replace references to rules that reference nothing (character classes,
 * a JSON string, blanks, a number) by their bodies, repeatedly, while the
 * result stays small: inside such a rule a byte is one DFA lookup instead
 * of a call, a return and a push per character (the mask walk spends
 * nearly all its time inside strings). Recursive rules are never inlined. */
static void inline_leaves(parser *ps) {
    enum { INLINE_LIMIT = 3000 };
    uint8_t *can = calloc((size_t)ps->n_rules + 1, 1);
    if (!can) return; /* inlining is an optimisation: without it the grammar is the same */
    for (int round = 0; round < 64; round++) {
        int any = 0;
        for (int r = 0; r < ps->n_rules; r++) {
            int has_ref = 0;
            long size = tree_size(ps, ps->rules[r].body, &has_ref);
            can[r] = !has_ref && size <= INLINE_LIMIT;
            any |= can[r];
        }
        if (!any) break;
        int changed = 0;
        for (int r = 0; r < ps->n_rules; r++) changed |= inline_into(ps, ps->rules[r].body, can);
        if (!changed) break;
    }
    free(can);
}

/* ---- entry points -------------------------------------------------------- */

static void parser_free(parser *ps) {
    for (int i = 0; i < ps->n_nodes; i++) free(ps->nodes[i].kids);
    free(ps->nodes);
    for (int i = 0; i < ps->n_rules; i++) free(ps->rules[i].name);
    free(ps->rules);
}

int grammar_compile_gbnf(qw_grammar **out, const char *text, size_t len, const char *root,
                         qw_err *err) {
    *out = NULL;
    if (!root) root = "root";
    parser ps = {.s = text, .end = text + len, .p = text, .err = err};
    dfa_b d = {0};
    nfa f = {0};
    qw_grammar *g = NULL;
    if (parse_grammar(&ps)) goto fail;
    int root_i = -1;
    for (int i = 0; i < ps.n_rules; i++) {
        if (ps.rules[i].body < 0) {
            qw_errf(err, "grammar: line %d: rule '%s' is used but not defined", ps.rules[i].line,
                    ps.rules[i].name);
            goto fail;
        }
        if (!strcmp(ps.rules[i].name, root)) root_i = i;
    }
    if (root_i < 0) {
        qw_errf(err, "grammar: no rule named '%s' (the start rule)", root);
        goto fail;
    }
    inline_leaves(&ps);
    g = calloc(1, sizeof *g);
    if (!g) goto oom;
    atomic_init(&g->refs, 1);
    g->n_rules = ps.n_rules;
    g->rule_start = malloc((size_t)ps.n_rules * sizeof(int32_t));
    if (!g->rule_start) goto oom;
    for (int r = 0; r < ps.n_rules; r++) {
        f.n = f.ne = 0;
        int st = nfa_state(&f);
        int fin = build(&f, &ps, ps.rules[r].body, st);
        if (f.oom) {
            qw_errf(err, "grammar: rule '%s' is too large", ps.rules[r].name);
            goto fail;
        }
        int s0 = determinize(&d, &f, st, fin);
        if (s0 < 0) {
            if (d.oom == 2) {
                qw_errf(err, "grammar: too large (more than %d states)", MAX_DFA_STATES);
                goto fail;
            }
            goto oom;
        }
        g->rule_start[r] = s0;
    }
    g->n_states = d.n;
    g->next = d.next;
    d.next = NULL;
    g->accept = d.accept;
    d.accept = NULL;
    g->calls = d.calls;
    d.calls = NULL;
    g->call0 = malloc(((size_t)d.n + 1) * sizeof(int32_t));
    g->has_bytes = malloc((size_t)d.n + 1);
    if (!g->call0 || !g->has_bytes) goto oom;
    /* determinize() appends calls state by state in order, so call0 is monotonic */
    for (int s = 0; s < d.n; s++) {
        g->call0[s] = d.call0[s];
        g->has_bytes[s] = 0;
        for (int b = 0; b < 256; b++)
            if (g->next[(size_t)s * 256 + b] >= 0) {
                g->has_bytes[s] = 1;
                break;
            }
    }
    g->call0[d.n] = d.nc;
    g->simple = malloc((size_t)d.n + 1);
    if (!g->simple) goto oom;
    for (int s = 0; s < d.n; s++)
        g->simple[s] = g->has_bytes[s] && !g->accept[s] && g->call0[s] == g->call0[s + 1];
    for (int s = 0; s < d.n; s++)
        if (g->call0[s] + d.ncall[s] != g->call0[s + 1] && d.ncall[s] != 0) {
            /* not contiguous: cannot happen (calls are written right after their state's scan) */
            qw_errf(err, "grammar: internal error (call table)");
            goto fail;
        }
    g->root = root_i;
    if (check_rules(g, &ps, err)) goto fail;
    free(f.first);
    free(f.e);
    free(d.call0);
    free(d.ncall);
    free(d.sets);
    free(d.set_off);
    free(d.set_len);
    free(d.htab);
    parser_free(&ps);
    *out = g;
    return 0;
oom:
    qw_errf(err, "grammar: out of memory");
fail:
    free(f.first);
    free(f.e);
    free(d.next);
    free(d.accept);
    free(d.calls);
    free(d.call0);
    free(d.ncall);
    free(d.sets);
    free(d.set_off);
    free(d.set_len);
    free(d.htab);
    parser_free(&ps);
    grammar_release(g);
    return -1;
}

qw_grammar *grammar_retain(qw_grammar *g) {
    if (g) atomic_fetch_add(&g->refs, 1);
    return g;
}

void grammar_release(qw_grammar *g) {
    if (!g || atomic_fetch_sub(&g->refs, 1) != 1) return;
    free(g->next);
    free(g->accept);
    free(g->has_bytes);
    free(g->simple);
    free(g->call0);
    free(g->calls);
    free(g->rule_start);
    free(g);
}
