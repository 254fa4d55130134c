/* utf8.c - UTF-8 validation and repair for the tokenizer.
 *
 * Ill-formed input is replaced by U+FFFD one "maximal subpart" at a time
 * (Unicode 15, section 3.9, "U+FFFD Substitution of Maximal Subparts"), which
 * is what Python's bytes.decode("utf-8", "replace") and Rust's
 * String::from_utf8_lossy do, so our encode sees the same text a Python or
 * JSON caller would, and decode gives the same text as `tokenizers`.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

/* Valid range of the second byte for a lead byte (Table 3-7). */
static int second_ok(unsigned char lead, unsigned char b) {
    switch (lead) {
    case 0xE0: return b >= 0xA0 && b <= 0xBF;
    case 0xED: return b >= 0x80 && b <= 0x9F;
    case 0xF0: return b >= 0x90 && b <= 0xBF;
    case 0xF4: return b >= 0x80 && b <= 0x8F;
    default: return b >= 0x80 && b <= 0xBF;
    }
}

/* Sequence length a lead byte announces; 0 if it cannot start one. */
static int seq_len(unsigned char c) {
    if (c < 0x80) return 1;
    if (c < 0xC2) return 0;
    if (c < 0xE0) return 2;
    if (c < 0xF0) return 3;
    if (c < 0xF5) return 4;
    return 0;
}

int utf8_decode1(const unsigned char *s, size_t n, uint32_t *cp) {
    if (n == 0) return 0;
    unsigned char c = s[0];
    int L = seq_len(c);
    if (L == 0 || (size_t)L > n) return 0;
    if (L == 1) {
        *cp = c;
        return 1;
    }
    if (!second_ok(c, s[1])) return 0;
    for (int i = 2; i < L; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    uint32_t v;
    if (L == 2) v = ((uint32_t)(c & 0x1F) << 6) | (s[1] & 0x3F);
    else if (L == 3) v = ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    else
        v = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
            ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
    *cp = v;
    return L;
}

size_t utf8_invalid_len(const unsigned char *s, size_t n) {
    if (n == 0) return 0;
    int L = seq_len(s[0]);
    if (L <= 1) return 1;
    size_t k = 1;
    if (k < n && second_ok(s[0], s[1])) {
        k = 2;
        while (k < (size_t)L && k < n && (s[k] & 0xC0) == 0x80) k++;
    }
    return k;
}

int utf8_valid(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    uint32_t cp;
    while (i < n) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        int L = utf8_decode1(p + i, n - i, &cp);
        if (!L) return 0;
        i += (size_t)L;
    }
    return 1;
}

int utf8_put(char *buf, uint32_t cp) {
    unsigned char *b = (unsigned char *)buf;
    if (cp < 0x80) {
        b[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        b[0] = (unsigned char)(0xC0 | (cp >> 6));
        b[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        b[0] = (unsigned char)(0xE0 | (cp >> 12));
        b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    b[0] = (unsigned char)(0xF0 | (cp >> 18));
    b[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    b[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    b[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

int utf8_sanitize(const char *s, size_t n, char **out, size_t *out_len) {
    /* Each bad byte becomes at most 3 bytes. */
    if (n > (SIZE_MAX - 1) / 3) return -1;
    char *o = malloc(n * 3 + 1);
    if (!o) return -1;
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, j = 0;
    uint32_t cp;
    while (i < n) {
        if (p[i] < 0x80) {
            o[j++] = (char)p[i++];
            continue;
        }
        int L = utf8_decode1(p + i, n - i, &cp);
        if (L) {
            memcpy(o + j, p + i, (size_t)L);
            i += (size_t)L;
            j += (size_t)L;
        } else {
            i += utf8_invalid_len(p + i, n - i);
            o[j++] = (char)0xEF;
            o[j++] = (char)0xBF;
            o[j++] = (char)0xBD;
        }
    }
    o[j] = 0;
    *out = o;
    *out_len = j;
    return 0;
}
