/* decode.c - ids -> text, whole or streamed.
 *
 * Matches `tokenizers`' TokenizerImpl::decode with a ByteLevel decoder:
 * unknown ids are dropped, special added tokens dropped when asked, every
 * token turned into its bytes, and the joined bytes made text with
 * String::from_utf8_lossy (one U+FFFD per maximal ill-formed subpart).
 *
 * The streaming decoder gives the same text in pieces: it holds back the
 * bytes of a character that a later token may still complete (at most 3),
 * and nothing else.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

/* Lossy conversion of b[0..n) into o (room for 3n bytes); returns bytes
 * written. If hold is non-NULL, a trailing incomplete-but-valid prefix is not
 * converted and its length is returned in *hold. */
static size_t lossy(const unsigned char *b, size_t n, char *o, size_t *hold) {
    size_t i = 0, j = 0;
    uint32_t cp;
    if (hold) *hold = 0;
    while (i < n) {
        if (b[i] < 0x80) {
            o[j++] = (char)b[i++];
            continue;
        }
        int L = utf8_decode1(b + i, n - i, &cp);
        if (L) {
            memcpy(o + j, b + i, (size_t)L);
            i += (size_t)L;
            j += (size_t)L;
            continue;
        }
        size_t k = utf8_invalid_len(b + i, n - i);
        size_t want = b[i] >= 0xF0 ? 4 : b[i] >= 0xE0 ? 3 : 2;
        if (hold && i + k == n && b[i] >= 0xC2 && b[i] <= 0xF4 && k < want) {
            *hold = k;
            break;
        }
        i += k;
        o[j++] = (char)0xEF;
        o[j++] = (char)0xBF;
        o[j++] = (char)0xBD;
    }
    return j;
}

int tok_decode(const qw_tok *t, const int32_t *ids, size_t n, int skip_special, char **text, size_t *len,
               qw_err *err) {
    *text = NULL;
    *len = 0;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= t->n_ids || !(t->flags[id] & TOKF_EXISTS)) continue;
        if (skip_special && (t->flags[id] & TOKF_SPECIAL)) continue;
        total += t->off[id + 1] - t->off[id];
        if (total > (SIZE_MAX - 1) / 3) return qw_errf(err, "tok_decode: output too large");
    }
    unsigned char *raw = malloc(total + 1);
    char *out = malloc(total * 3 + 1);
    if (!raw || !out) {
        free(raw);
        free(out);
        return qw_errf(err, "tok_decode: out of memory");
    }
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= t->n_ids || !(t->flags[id] & TOKF_EXISTS)) continue;
        if (skip_special && (t->flags[id] & TOKF_SPECIAL)) continue;
        size_t l = t->off[id + 1] - t->off[id];
        memcpy(raw + at, t->bytes + t->off[id], l);
        at += l;
    }
    size_t m = lossy(raw, at, out, NULL);
    free(raw);
    out[m] = 0;
    char *shrunk = realloc(out, m + 1);
    *text = shrunk ? shrunk : out;
    *len = m;
    return 0;
}

struct qw_tok_stream {
    const qw_tok *t;
    int skip_special;
    size_t nheld;          /* bytes in buf[0..nheld) carried over */
    unsigned char *buf;    /* [4 + max_token_len] held bytes + the new token */
    char *out;             /* [3 * (4 + max_token_len) + 1] */
};

qw_tok_stream *tok_stream_new(const qw_tok *t, int skip_special) {
    qw_tok_stream *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->t = t;
    s->skip_special = skip_special;
    size_t cap = 4 + t->max_token_len;
    s->buf = malloc(cap);
    s->out = malloc(3 * cap + 1);
    if (!s->buf || !s->out) {
        tok_stream_free(s);
        return NULL;
    }
    return s;
}

void tok_stream_free(qw_tok_stream *s) {
    if (!s) return;
    free(s->buf);
    free(s->out);
    free(s);
}

const char *tok_stream_feed(qw_tok_stream *s, int32_t id, size_t *len) {
    const qw_tok *t = s->t;
    *len = 0;
    s->out[0] = 0;
    if (id < 0 || id >= t->n_ids || !(t->flags[id] & TOKF_EXISTS)) return s->out;
    if (s->skip_special && (t->flags[id] & TOKF_SPECIAL)) return s->out;
    size_t l = t->off[id + 1] - t->off[id];
    memcpy(s->buf + s->nheld, t->bytes + t->off[id], l);
    size_t n = s->nheld + l, hold;
    size_t m = lossy(s->buf, n, s->out, &hold);
    memmove(s->buf, s->buf + n - hold, hold);
    s->nheld = hold;
    s->out[m] = 0;
    *len = m;
    return s->out;
}

const char *tok_stream_flush(qw_tok_stream *s, size_t *len) {
    size_t m = lossy(s->buf, s->nheld, s->out, NULL);
    s->nheld = 0;
    s->out[m] = 0;
    *len = m;
    return s->out;
}

void tok_stream_reset(qw_tok_stream *s) { s->nheld = 0; }
