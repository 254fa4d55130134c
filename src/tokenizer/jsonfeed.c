/* jsonfeed.c - a JSON value re-serialised as it streams in (jsonfeed.h). A
 * byte-at-a-time lexer: between tokens, inside a string, inside an escape,
 * a number or a literal, or passing bytes through once the text stopped
 * being JSON. Whole tokens that need rewriting (escapes, numbers) go
 * through tojson_dumps, so the rules live in one place. */
#include "tokenizer/jsonfeed.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer/tojson.h"

enum { JF_VALUE, JF_STR, JF_ESC, JF_NUM, JF_LIT, JF_RAW };

void jsonfeed_init(jsonfeed *f) { memset(f, 0, sizeof *f); }

int jsonfeed_done(const jsonfeed *f) { return f->done; }

static int is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
static int is_num(char c) { return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'; }

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* The 4 hex digits at s, or -1. */
static long hex4(const char *s) {
    long v = 0;
    for (int k = 0; k < 4; k++) {
        int h = hexval(s[k]);
        if (h < 0) return -1;
        v = v << 4 | h;
    }
    return v;
}

/* From here on the bytes pass through unchanged (held ones first). */
static void go_raw(jsonfeed *f, strbuf *out) {
    sb_add(out, f->held, f->n_held);
    f->n_held = 0;
    f->state = JF_RAW;
}

/* tojson_dumps of the held token (wrapped in quotes for an escape, which
 * are then left out); -1 if tojson refuses it. */
static int put_held(jsonfeed *f, strbuf *out, int escape) {
    char buf[sizeof f->held + 2];
    size_t n = 0;
    if (escape) buf[n++] = '"';
    memcpy(buf + n, f->held, f->n_held);
    n += f->n_held;
    if (escape) buf[n++] = '"';
    char *s;
    size_t sl;
    if (tojson_dumps(buf, n, &s, &sl, NULL)) return -1;
    if (escape) sb_add(out, s + 1, sl - 2);
    else sb_add(out, s, sl);
    free(s);
    f->n_held = 0;
    return 0;
}

/* An escape in the string: 1 complete, 0 more to come, -1 not JSON. */
static int escape_state(const jsonfeed *f) {
    const char *h = f->held;
    size_t n = f->n_held;
    if (n < 2) return 0;
    if (h[1] != 'u') return strchr("\"\\/bfnrt", h[1]) && h[1] ? 1 : -1;
    if (n < 6) return 0;
    long hi = hex4(h + 2);
    if (hi < 0 || (hi >= 0xDC00 && hi <= 0xDFFF)) return -1;
    if (hi < 0xD800 || hi > 0xDBFF) return 1;
    /* a high surrogate: its low half must follow */
    if (n >= 7 && h[6] != '\\') return -1;
    if (n >= 8 && h[7] != 'u') return -1;
    if (n < 12) return 0;
    long lo = hex4(h + 8);
    return lo >= 0xDC00 && lo <= 0xDFFF ? 1 : -1;
}

/* The held number or literal ends (the next byte is not part of it). */
static void end_token(jsonfeed *f, strbuf *out) {
    int lit = f->state == JF_LIT;
    int ok = !lit || (f->n_held == 4 && !memcmp(f->held, "true", 4)) ||
             (f->n_held == 5 && !memcmp(f->held, "false", 5)) || (f->n_held == 4 && !memcmp(f->held, "null", 4));
    if (!ok || put_held(f, out, 0)) {
        go_raw(f, out);
        return;
    }
    f->state = JF_VALUE;
    if (f->depth == 0) f->done = 1;
}

static void hold(jsonfeed *f, char c, strbuf *out) {
    if (f->n_held + 1 >= sizeof f->held) { /* longer than any token we rewrite */
        go_raw(f, out);
        sb_add(out, &c, 1);
        return;
    }
    f->held[f->n_held++] = c;
}

size_t jsonfeed_feed(jsonfeed *f, const char *s, size_t n, strbuf *out) {
    size_t i = 0;
    while (i < n && !f->done) {
        char c = s[i];
        unsigned char u = (unsigned char)c;
        switch (f->state) {
        case JF_RAW: sb_add(out, s + i, n - i); return n;
        case JF_NUM:
        case JF_LIT:
            if (f->state == JF_NUM ? is_num(c) : (c >= 'a' && c <= 'z')) {
                hold(f, c, out);
                i++;
            } else {
                end_token(f, out); /* c is read again in the new state */
            }
            continue;
        case JF_ESC: {
            hold(f, c, out);
            i++;
            if (f->state != JF_ESC) continue;
            int st = escape_state(f);
            if (st < 0) go_raw(f, out);
            else if (st > 0) {
                if (put_held(f, out, 1)) go_raw(f, out);
                else f->state = JF_STR;
            }
            continue;
        }
        case JF_STR:
            i++;
            if (f->n_utf8) { /* inside a multi-byte character */
                if ((u & 0xC0) != 0x80) {
                    go_raw(f, out);
                    sb_add(out, &c, 1);
                    continue;
                }
                f->n_utf8--;
                sb_add(out, &c, 1);
            } else if (c == '"') {
                sb_add(out, &c, 1);
                f->state = JF_VALUE;
                if (f->depth == 0) f->done = 1;
            } else if (c == '\\') {
                f->state = JF_ESC;
                f->held[0] = c;
                f->n_held = 1;
            } else if (u < 0x20 || (u >= 0x80 && u < 0xC2) || u > 0xF4) {
                go_raw(f, out);
                sb_add(out, &c, 1);
            } else {
                f->n_utf8 = u < 0x80 ? 0 : u < 0xE0 ? 1 : u < 0xF0 ? 2 : 3;
                sb_add(out, &c, 1);
            }
            continue;
        case JF_VALUE:
            i++;
            if (is_ws(c)) continue;
            f->started = 1;
            if (c == '{' || c == '[') {
                f->depth++;
                sb_add(out, &c, 1);
            } else if (c == '}' || c == ']') {
                sb_add(out, &c, 1);
                if (--f->depth <= 0) f->done = 1;
            } else if (c == ',') {
                sb_str(out, ", ");
            } else if (c == ':') {
                sb_str(out, ": ");
            } else if (c == '"') {
                sb_add(out, &c, 1);
                f->state = JF_STR;
            } else if (c == '-' || (c >= '0' && c <= '9')) {
                f->state = JF_NUM;
                f->held[0] = c;
                f->n_held = 1;
            } else if (c >= 'a' && c <= 'z') {
                f->state = JF_LIT;
                f->held[0] = c;
                f->n_held = 1;
            } else {
                go_raw(f, out);
                sb_add(out, &c, 1);
            }
            continue;
        }
    }
    return i;
}

void jsonfeed_finish(jsonfeed *f, strbuf *out) {
    if (f->done) return;
    if (f->state == JF_NUM || f->state == JF_LIT) end_token(f, out);
    if (f->n_held) go_raw(f, out);
    f->done = 1;
}
