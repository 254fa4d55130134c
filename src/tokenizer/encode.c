/* encode.c - text -> ids, in the order the `tokenizers` library applies its
 * stages (tokenizer/mod.rs encode_single_sequence, added_vocabulary.rs):
 *
 *   1. ill-formed UTF-8 -> U+FFFD (what a Python str or JSON string holds);
 *   2. added tokens with normalized=false are found in the raw text
 *      (leftmost-longest, as its Aho-Corasick matcher with MatchKind::
 *      LeftmostLongest), with single_word / lstrip / rstrip applied;
 *   3. each remaining segment is normalized (NFC, utf8proc), then searched for
 *      the added tokens with normalized=true;
 *   4. each remaining piece is split by the pre-tokenizer regex (PCRE2, JIT),
 *      matches and the gaps between them each becoming a pre-token
 *      (Split behavior "Isolated");
 *   5. each pre-token's bytes are BPE-encoded (bpe.c); the ByteLevel mapping
 *      is implicit because our merge table is keyed by ids of byte tokens.
 *
 * Everything per call lives in an enc_ctx on the stack of tok_encode(): the
 * qw_tok is only read (besides the word cache, which has its own locks).
 */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokenizer/tok_internal.h"

typedef struct enc_ctx {
    const qw_tok *t;
    tok_ids out;
    bpe_scratch sc;
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jstack;
    qw_err *err;
} enc_ctx;

static int oom(enc_ctx *c) { return qw_errf(c->err, "tok_encode: out of memory"); }

/* Step 4 + 5 on one normalized piece. */
static int pretokenize(enc_ctx *c, const char *s, size_t n) {
    const qw_tok *t = c->t;
    if (n == 0) return 0;
    if (!t->re) return bpe_word(t, (const unsigned char *)s, n, &c->sc, &c->out) ? oom(c) : 0;
    size_t last = 0, from = 0;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
    while (from <= n) {
        int rc = t->re_jit ? pcre2_jit_match(t->re, (PCRE2_SPTR)s, n, from, PCRE2_NO_UTF_CHECK, c->md, c->mctx)
                           : pcre2_match(t->re, (PCRE2_SPTR)s, n, from, PCRE2_NO_UTF_CHECK, c->md, c->mctx);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !c->jstack) {
            /* A long run exhausted the default 32 KiB JIT stack: retry with a big one. */
            c->jstack = pcre2_jit_stack_create(1 << 16, 256u << 20, NULL);
            if (!c->mctx) c->mctx = pcre2_match_context_create(NULL);
            if (!c->jstack || !c->mctx) return oom(c);
            pcre2_jit_stack_assign(c->mctx, NULL, c->jstack);
            continue;
        }
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return qw_errf(c->err, "tok_encode: pre-tokenizer regex: %s", (const char *)msg);
        }
        size_t m0 = ov[0], m1 = ov[1];
        if (m1 == m0) {
            /* Empty match: nothing to emit; step over one character. */
            if (m0 >= n) break;
            from = m0 + 1;
            while (from < n && ((unsigned char)s[from] & 0xC0) == 0x80) from++;
            continue;
        }
        if (m0 > last && bpe_word(t, (const unsigned char *)s + last, m0 - last, &c->sc, &c->out)) return oom(c);
        if (bpe_word(t, (const unsigned char *)s + m0, m1 - m0, &c->sc, &c->out)) return oom(c);
        last = from = m1;
    }
    if (last < n && bpe_word(t, (const unsigned char *)s + last, n - last, &c->sc, &c->out)) return oom(c);
    return 0;
}

/* Unicode White_Space (Rust's char::is_whitespace). */
static int is_ws(uint32_t c) {
    return (c >= 9 && c <= 13) || c == 32 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
           c == 0x3000;
}

/* A word character for single_word: `tokenizers` tests the neighbours with
 * the regex crate's Unicode \w, i.e. Alphabetic, marks, decimal digits,
 * connector punctuation and the join controls. Alphabetic is approximated
 * by the letters, letter numbers and the Other_Alphabetic symbols (circled,
 * parenthesised and squared Latin letters). */
static int is_word(uint32_t c) {
    if (c < 0x80) return c == '_' || (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z');
    if (c == 0x200C || c == 0x200D || (c >= 0x24B6 && c <= 0x24E9) || (c >= 0x1F130 && c <= 0x1F149) ||
        (c >= 0x1F150 && c <= 0x1F169) || (c >= 0x1F170 && c <= 0x1F189))
        return 1;
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) ||
           (k >= UTF8PROC_CATEGORY_MN && k <= UTF8PROC_CATEGORY_ME) || k == UTF8PROC_CATEGORY_ND ||
           k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_PC;
}

/* The code point that ends at s[end) (s valid UTF-8); 0 if end == 0. */
static uint32_t cp_before(const char *s, size_t end, size_t *start) {
    if (end == 0) return 0;
    size_t i = end - 1;
    while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80) i--;
    uint32_t cp = 0;
    utf8_decode1((const unsigned char *)s + i, end - i, &cp);
    if (start) *start = i;
    return cp;
}

static uint32_t cp_at(const char *s, size_t n, size_t i, int *len) {
    uint32_t cp = 0;
    int L = utf8_decode1((const unsigned char *)s + i, n - i, &cp);
    if (len) *len = L ? L : 1;
    return cp;
}

typedef int (*seg_fn)(enc_ctx *c, const char *s, size_t n);

/* Split s[0..n) on the added tokens with the given `normalized` flag: gaps go
 * to gap(), matches emit their id. */
static int split_added(enc_ctx *c, const char *s, size_t n, int normalized, seg_fn gap) {
    const qw_tok *t = c->t;
    const uint8_t *first = normalized ? t->added_first_norm : t->added_first;
    size_t seg = 0, i = 0;
    while (i < n) {
        if (!first[(unsigned char)s[i]]) {
            i++;
            continue;
        }
        const tok_added *best = NULL;
        for (size_t k = 0; k < t->n_added; k++) {
            const tok_added *a = &t->added[k];
            if (a->normalized != normalized || a->mlen > n - i || (best && a->mlen <= best->mlen)) continue;
            if (!memcmp(s + i, a->mtext, a->mlen)) best = a;
        }
        if (!best) {
            i++;
            continue;
        }
        size_t start = i, stop = i + best->mlen;
        if (best->single_word) {
            int ok_l = start == 0 || !is_word(cp_before(s, start, NULL));
            int ok_r = stop == n || !is_word(cp_at(s, n, stop, NULL));
            if (!ok_l || !ok_r) {
                i = stop; /* the matcher moves past a discarded match */
                continue;
            }
        }
        if (best->lstrip) {
            size_t b = start, st;
            while (b > seg && is_ws(cp_before(s, b, &st))) b = st;
            start = b;
        }
        if (best->rstrip) {
            int L;
            while (stop < n && is_ws(cp_at(s, n, stop, &L))) stop += (size_t)L;
        }
        if (start > seg && gap(c, s + seg, start - seg)) return -1;
        if (tok_ids_push(&c->out, best->id)) return oom(c);
        seg = i = stop;
    }
    if (n > seg && gap(c, s + seg, n - seg)) return -1;
    return 0;
}

static int after_norm(enc_ctx *c, const char *s, size_t n) {
    if (c->t->has_norm_added) return split_added(c, s, n, 1, pretokenize);
    return pretokenize(c, s, n);
}

#include "tokenizer/ccc_table.h"

/* Canonical combining class as `tokenizers` applies it (ccc_table.h). Its
 * NFC (the unicode-normalization-alignments crate) knows an older Unicode
 * than utf8proc, so it leaves newer marks where they are; we order marks by
 * its classes, not utf8proc's, to reorder exactly where it does. */
static int ccc_of(uint32_t cp) {
    if (cp < 0x300) return 0;
    size_t lo = 0, hi = sizeof CCC_RUNS / sizeof CCC_RUNS[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < CCC_RUNS[mid].lo) hi = mid;
        else if (cp > CCC_RUNS[mid].hi) lo = mid + 1;
        else return CCC_RUNS[mid].ccc;
    }
    return 0;
}

/* NFC of valid UTF-8 s[0..n) into *out (malloc'd): canonical decomposition
 * of each character (utf8proc, without its reordering), canonical ordering
 * by ccc_of() (a stable sort of each run of non-starters), then utf8proc's
 * canonical composition. */
int tok_nfc(const char *s, size_t n, char **out, size_t *out_len) {
    if (n > (size_t)PTRDIFF_MAX / 16) return -1;
    size_t cap = n + 16, m = 0;
    utf8proc_int32_t *buf = malloc(cap * sizeof *buf);
    if (!buf) return -1;
    size_t i = 0;
    while (i < n) {
        uint32_t cp = 0;
        int L = utf8_decode1((const unsigned char *)s + i, n - i, &cp);
        if (!L) L = 1; /* not reached: input is valid */
        i += (size_t)L;
        for (;;) {
            int boundclass = 0;
            utf8proc_ssize_t k = utf8proc_decompose_char((utf8proc_int32_t)cp, buf + m,
                                                         (utf8proc_ssize_t)(cap - m),
                                                         UTF8PROC_STABLE | UTF8PROC_DECOMPOSE, &boundclass);
            if (k < 0) {
                free(buf);
                return -1;
            }
            if ((size_t)k <= cap - m) {
                m += (size_t)k;
                break;
            }
            size_t nc = cap * 2 + (size_t)k;
            utf8proc_int32_t *nb = realloc(buf, nc * sizeof *buf);
            if (!nb) {
                free(buf);
                return -1;
            }
            buf = nb;
            cap = nc;
        }
    }
    for (size_t a = 1; a < m; a++) {
        int c = ccc_of((uint32_t)buf[a]);
        if (c == 0) continue;
        utf8proc_int32_t v = buf[a];
        size_t j = a;
        while (j > 0) {
            int pc = ccc_of((uint32_t)buf[j - 1]);
            if (pc == 0 || pc <= c) break;
            buf[j] = buf[j - 1];
            j--;
        }
        buf[j] = v;
    }
    utf8proc_ssize_t b = utf8proc_reencode(buf, (utf8proc_ssize_t)m, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    if (b < 0) {
        free(buf);
        return -1;
    }
    *out = (char *)buf;
    *out_len = (size_t)b;
    return 0;
}

/* Characters that NFC leaves alone in any company drawn from this set: each
 * is a starter (class 0), is not excluded from composition, and is not the
 * second element of any composition, so no two of them interact. Everything
 * below U+0300, and the bulk of CJK, Hangul, kana, Cyrillic, Arabic, Thai,
 * Devanagari, general punctuation and emoji. */
static int nfc_inert(uint32_t cp) {
    if (cp < 0x300) return 1;
    if (cp < 0x3000) {
        return (cp >= 0x400 && cp <= 0x482) || (cp >= 0x48A && cp <= 0x4FF) || (cp >= 0x620 && cp <= 0x64A) ||
               (cp >= 0x660 && cp <= 0x66F) || (cp >= 0x671 && cp <= 0x6D5) || (cp >= 0x900 && cp <= 0x93B) ||
               (cp >= 0x93D && cp <= 0x94C) || (cp >= 0x94E && cp <= 0x950) || (cp >= 0x955 && cp <= 0x957) ||
               (cp >= 0x960 && cp <= 0x97F) || (cp >= 0xE01 && cp <= 0xE37) || (cp >= 0xE3F && cp <= 0xE47) ||
               (cp >= 0xE4C && cp <= 0xE5B) || (cp >= 0x2002 && cp <= 0x20CF);
    }
    return (cp <= 0x3029) || (cp >= 0x3030 && cp <= 0x3098) || (cp >= 0x309B && cp <= 0x30FF) ||
           (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0xAC00 && cp <= 0xD7A3) ||
           (cp >= 0xFF00 && cp <= 0xFFEF) || (cp >= 0x1F000 && cp <= 0x1FAFF);
}

/* Step 3: NFC, skipped when every character is inert (see nfc_inert). */
static int normalize_segment(enc_ctx *c, const char *s, size_t n) {
    if (!c->t->nfc) return after_norm(c, s, n);
    size_t i = 0;
    while (i < n) {
        unsigned char b = (unsigned char)s[i];
        if (b < 0xCC) {
            i++; /* ASCII, or a lead byte below U+0300, or a continuation byte */
            continue;
        }
        uint32_t cp;
        int L = utf8_decode1((const unsigned char *)s + i, n - i, &cp);
        if (!L || !nfc_inert(cp)) break;
        i += (size_t)L;
    }
    if (i == n) return after_norm(c, s, n);
    char *dst;
    size_t m;
    if (tok_nfc(s, n, &dst, &m)) return qw_errf(c->err, "tok_encode: NFC: out of memory");
    int rc = after_norm(c, dst, m);
    free(dst);
    return rc;
}

int tok_encode(const qw_tok *t, const char *text, size_t len, int32_t **ids, size_t *n, qw_err *err) {
    *ids = NULL;
    *n = 0;
    if (len == 0) return 0;
    if (!text) return qw_errf(err, "tok_encode: NULL text");
    char *clean = NULL;
    if (!utf8_valid(text, len)) {
        if (utf8_sanitize(text, len, &clean, &len)) return qw_errf(err, "tok_encode: out of memory");
        text = clean;
    }
    enc_ctx c = {.t = t, .err = err};
    int rc = -1;
    if (t->re) {
        c.md = pcre2_match_data_create_from_pattern(t->re, NULL);
        if (!c.md) {
            oom(&c);
            goto out;
        }
    }
    /* Roughly one id per 3-4 bytes of text: reserve once. */
    c.out.cap = (len < ((size_t)3 << 20) ? len : ((size_t)3 << 20)) / 3 + 16;
    c.out.v = malloc(c.out.cap * sizeof *c.out.v);
    if (!c.out.v) {
        oom(&c);
        goto out;
    }
    rc = split_added(&c, text, len, 0, normalize_segment);
out:
    if (rc == 0) {
        *ids = c.out.v;
        *n = c.out.n;
    } else {
        free(c.out.v);
    }
    bpe_scratch_free(&c.sc);
    if (c.md) pcre2_match_data_free(c.md);
    if (c.mctx) pcre2_match_context_free(c.mctx);
    if (c.jstack) pcre2_jit_stack_free(c.jstack);
    free(clean);
    return rc;
}
