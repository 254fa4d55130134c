/* test_tokenizer.c - the tokenizer against Hugging Face.
 *
 * Expected results come from tools/make_tok_corpus.py (the `tokenizers` and
 * `transformers` libraries), committed as tests/fixtures/tokenizer/ (xz) and
 * decompressed by tests/fixtures/tokenizer/prepare.sh into
 * $QWENC_TOK_FIXTURES, else $BUILD/fixtures/tokenizer, else
 * build/fixtures/tokenizer. Checks:
 *   - every corpus string encodes to exactly the reference ids, for the
 *     Qwen2.5 and the Qwen3 tokenizer files, and decodes (with and without
 *     special tokens) to exactly the reference text;
 *   - the streaming decoder gives the same text as tok_decode, holds split
 *     characters, and replaces invalid bytes;
 *   - the chat template renders and encodes conversations exactly as
 *     transformers' apply_chat_template;
 *   - vocab.json + merges.txt (+ tokenizer_config.json), and tokenizer.json
 *     with "a b" string merges, load to the same tokenizer;
 *   - added-token flags (lstrip, rstrip, single_word, normalized, special)
 *     split as in `tokenizers` (a tiny tokenizer built by the same script);
 *   - many threads encoding at once get the same ids;
 *   - hostile inputs (100 000-char words, random bytes) finish and round-trip;
 *   - malformed tokenizer files are rejected with a message.
 */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gguf_writer.h"
#include "test.h"
#include "test_file.h"
#include "tokenizer/tokenizer.h"

static char g_fix[1024];

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------- corpus */

typedef struct ccase {
    char *text;      /* input bytes */
    size_t len;
    int32_t *ids25, *ids3;
    size_t n25, n3;
    char *dec25, *dec3, *dec_skip; /* expected decodes */
    size_t dec25_len, dec3_len, dec_skip_len;
} ccase;

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

static int32_t *json_ids(const cJSON *a, size_t *n) {
    *n = (size_t)cJSON_GetArraySize(a);
    int32_t *v = malloc((*n + 1) * sizeof *v);
    size_t i = 0;
    for (const cJSON *e = a ? a->child : NULL; e; e = e->next) v[i++] = (int32_t)e->valuedouble;
    return v;
}

/* A corpus string: plain, or hex when the record says "hex": true (NULs). */
static char *field(const cJSON *j, const char *k, int hex, size_t *len) {
    const cJSON *v = cJSON_GetObjectItem(j, k);
    if (!cJSON_IsString(v)) return NULL;
    const char *s = v->valuestring;
    size_t n = strlen(s);
    char *o;
    if (hex) {
        o = malloc(n / 2 + 1);
        for (size_t i = 0; i + 1 < n; i += 2) o[i / 2] = (char)(hexval(s[i]) * 16 + hexval(s[i + 1]));
        n /= 2;
    } else {
        o = malloc(n + 1);
        memcpy(o, s, n);
    }
    o[n] = 0;
    if (len) *len = n;
    return o;
}

static char *dup_bytes(const char *s, size_t n) {
    char *o = malloc(n + 1);
    memcpy(o, s, n);
    o[n] = 0;
    return o;
}

static ccase *load_corpus(const char *path, size_t *n_cases) {
    size_t len;
    char *buf = read_all(path, &len);
    if (!buf) return NULL;
    size_t cap = 8192, n = 0;
    ccase *cs = calloc(cap, sizeof *cs);
    for (char *line = buf; *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        cJSON *j = cJSON_Parse(line);
        if (j) {
            if (n == cap) cs = realloc(cs, (cap *= 2) * sizeof *cs);
            ccase *c = &cs[n++];
            memset(c, 0, sizeof *c);
            int hex = cJSON_IsTrue(cJSON_GetObjectItem(j, "hex"));
            size_t plen;
            char *plain = field(j, "text", hex, &plen); /* what Python saw */
            if (cJSON_GetObjectItem(j, "bytes_hex")) c->text = field(j, "bytes_hex", 1, &c->len);
            else c->text = dup_bytes(plain, c->len = plen);
            c->ids25 = json_ids(cJSON_GetObjectItem(j, "ids"), &c->n25);
            const cJSON *i3 = cJSON_GetObjectItem(j, "ids3");
            c->ids3 = json_ids(i3 ? i3 : cJSON_GetObjectItem(j, "ids"), &c->n3);
            size_t l;
            char *d = field(j, "dec", hex, &l);
            c->dec25 = d ? d : dup_bytes(plain, l = plen);
            c->dec25_len = l;
            d = field(j, "dec3", hex, &l);
            c->dec3 = d ? d : dup_bytes(c->dec25, l = c->dec25_len);
            c->dec3_len = l;
            d = field(j, "dec_skip", hex, &l);
            c->dec_skip = d ? d : dup_bytes(c->dec25, l = c->dec25_len);
            c->dec_skip_len = l;
            free(plain);
            cJSON_Delete(j);
        }
        if (!nl) break;
        line = nl + 1;
    }
    free(buf);
    *n_cases = n;
    return cs;
}

static void free_corpus(ccase *cs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(cs[i].text);
        free(cs[i].ids25);
        free(cs[i].ids3);
        free(cs[i].dec25);
        free(cs[i].dec3);
        free(cs[i].dec_skip);
    }
    free(cs);
}

static void print_ids(const char *what, const int32_t *v, size_t n) {
    fprintf(stderr, "  %s (%zu):", what, n);
    for (size_t i = 0; i < n && i < 40; i++) fprintf(stderr, " %d", v[i]);
    fprintf(stderr, n > 40 ? " ...\n" : "\n");
}

static int same_ids(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    return na == nb && (na == 0 || !memcmp(a, b, na * sizeof *a));
}

/* Encode + decode every case with one tokenizer; returns mismatches. */
static void check_corpus(const qw_tok *t, const char *name, ccase *cs, size_t n, int is3, size_t min_cases) {
    size_t bad_enc = 0, bad_dec = 0, bad_skip = 0, bad_stream = 0, shown = 0;
    double t0 = now_s();
    size_t bytes = 0;
    qw_tok_stream *st = tok_stream_new(t, 0);
    for (size_t i = 0; i < n; i++) {
        ccase *c = &cs[i];
        const int32_t *want = is3 ? c->ids3 : c->ids25;
        size_t nwant = is3 ? c->n3 : c->n25;
        int32_t *ids;
        size_t nid;
        qw_err err = {{0}};
        bytes += c->len;
        if (tok_encode(t, c->text, c->len, &ids, &nid, &err)) {
            bad_enc++;
            fprintf(stderr, "FAIL %s case %zu: encode error: %s\n", name, i, err.msg);
            continue;
        }
        if (!same_ids(ids, nid, want, nwant)) {
            bad_enc++;
            if (shown++ < 8) {
                fprintf(stderr, "FAIL %s case %zu: ids differ for \"%.80s\"\n", name, i, c->text);
                print_ids("got ", ids, nid);
                print_ids("want", want, nwant);
            }
        }
        free(ids);
        /* Decode the reference ids. */
        char *txt;
        size_t tl;
        const char *wd = is3 ? c->dec3 : c->dec25;
        size_t wdl = is3 ? c->dec3_len : c->dec25_len;
        if (tok_decode(t, want, nwant, 0, &txt, &tl, &err) || tl != wdl || memcmp(txt, wd, tl)) {
            if (bad_dec++ < 5) fprintf(stderr, "FAIL %s case %zu: decode differs\n", name, i);
        }
        /* The same through the streaming decoder, one id at a time. */
        size_t cap = tl + 64, sl = 0;
        char *acc = malloc(cap);
        for (size_t k = 0; k < nwant; k++) {
            size_t l;
            const char *p = tok_stream_feed(st, want[k], &l);
            if (sl + l + 1 > cap) acc = realloc(acc, (cap = (sl + l) * 2 + 1));
            memcpy(acc + sl, p, l);
            sl += l;
        }
        size_t l;
        const char *p = tok_stream_flush(st, &l);
        if (sl + l + 1 > cap) acc = realloc(acc, (cap = sl + l + 1));
        memcpy(acc + sl, p, l);
        sl += l;
        if (sl != tl || memcmp(acc, txt, tl)) {
            if (bad_stream++ < 5) fprintf(stderr, "FAIL %s case %zu: streamed text differs\n", name, i);
        }
        free(acc);
        free(txt);
        if (!is3) {
            if (tok_decode(t, want, nwant, 1, &txt, &tl, &err) || tl != c->dec_skip_len ||
                memcmp(txt, c->dec_skip, tl)) {
                if (bad_skip++ < 5) fprintf(stderr, "FAIL %s case %zu: decode(skip_special) differs\n", name, i);
            }
            free(txt);
        }
    }
    tok_stream_free(st);
    double dt = now_s() - t0;
    printf("%s: %zu cases, %zu bytes: %zu encode, %zu decode, %zu skip-special, %zu stream mismatches (%.2f s)\n",
           name, n, bytes, bad_enc, bad_dec, bad_skip, bad_stream, dt);
    CHECK(n >= min_cases, "%s: corpus has only %zu cases", name, n);
    CHECK(bad_enc == 0, "%s: %zu of %zu cases encode differently from tokenizers", name, bad_enc, n);
    CHECK(bad_dec == 0, "%s: %zu cases decode differently", name, bad_dec);
    CHECK(bad_skip == 0, "%s: %zu cases decode(skip_special) differently", name, bad_skip);
    CHECK(bad_stream == 0, "%s: %zu cases stream differently", name, bad_stream);
}

/* ------------------------------------------------------------ threads */

typedef struct thr_arg {
    const qw_tok *t;
    ccase *cs;
    size_t n, start;
    size_t bad;
} thr_arg;

static void *thr_main(void *p) {
    thr_arg *a = p;
    for (size_t r = 0; r < a->n; r++) {
        ccase *c = &a->cs[(a->start + r * 7) % a->n];
        int32_t *ids;
        size_t nid;
        if (tok_encode(a->t, c->text, c->len, &ids, &nid, NULL) || !same_ids(ids, nid, c->ids25, c->n25)) a->bad++;
        free(ids);
    }
    return NULL;
}

static void check_threads(const qw_tok *t, ccase *cs, size_t n) {
    enum { NT = 4 };
    pthread_t th[NT];
    thr_arg a[NT];
    size_t m = n < 2000 ? n : 2000;
    for (int i = 0; i < NT; i++) {
        a[i] = (thr_arg){t, cs, m, (size_t)i * 13, 0};
        pthread_create(&th[i], NULL, thr_main, &a[i]);
    }
    size_t bad = 0;
    for (int i = 0; i < NT; i++) {
        pthread_join(th[i], NULL);
        bad += a[i].bad;
    }
    CHECK(bad == 0, "threads: %zu encodes differed under concurrency", bad);
}

/* --------------------------------------------------------------- chat */

static void check_chat(const qw_tok *t, const char *path) {
    size_t len;
    char *buf = read_all(path, &len);
    CHECK(buf != NULL, "cannot read %s", path);
    if (!buf) return;
    size_t n = 0, bad_text = 0, bad_ids = 0;
    for (char *line = buf; *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        cJSON *j = cJSON_Parse(line);
        if (j) {
            const cJSON *ms = cJSON_GetObjectItem(j, "messages");
            size_t nm = (size_t)cJSON_GetArraySize(ms), k = 0;
            qw_chat_msg *msgs = calloc(nm + 1, sizeof *msgs);
            for (const cJSON *m = ms->child; m; m = m->next, k++) {
                msgs[k].role = cJSON_GetObjectItem(m, "role")->valuestring;
                msgs[k].content = cJSON_GetObjectItem(m, "content")->valuestring;
            }
            int gen = cJSON_IsTrue(cJSON_GetObjectItem(j, "add_generation_prompt"));
            const char *want = cJSON_GetObjectItem(j, "text")->valuestring;
            char *out;
            size_t ol;
            qw_err err = {{0}};
            if (chat_render(msgs, nm, gen, &out, &ol, &err) || ol != strlen(want) || memcmp(out, want, ol)) {
                if (bad_text++ < 3) fprintf(stderr, "FAIL chat %zu: rendered\n%s\nwant\n%s\n", n, out, want);
            }
            free(out);
            size_t nw;
            int32_t *wids = json_ids(cJSON_GetObjectItem(j, "ids"), &nw), *ids;
            size_t nid;
            if (chat_encode(t, msgs, nm, gen, &ids, &nid, &err) || !same_ids(ids, nid, wids, nw)) bad_ids++;
            free(ids);
            free(wids);
            free(msgs);
            cJSON_Delete(j);
            n++;
        }
        if (!nl) break;
        line = nl + 1;
    }
    free(buf);
    printf("chat: %zu conversations, %zu render and %zu ids mismatches\n", n, bad_text, bad_ids);
    CHECK(n >= 100, "chat corpus has only %zu conversations", n);
    CHECK(bad_text == 0, "chat: %zu renders differ from apply_chat_template", bad_text);
    CHECK(bad_ids == 0, "chat: %zu conversations encode differently", bad_ids);

    /* The default system prompt and the generation prompt, spelled out. */
    qw_chat_msg m[1] = {{.role = "user", .content = "hi"}};
    char *out;
    size_t ol;
    chat_render(m, 1, 1, &out, &ol, NULL);
    CHECK(!strcmp(out, "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
                       "assistant.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"),
          "default template: %s", out);
    free(out);
}

/* ----------------------------------------------------------- streaming */

static void check_stream(const qw_tok *t) {
    int32_t byte_tok[256];
    for (int b = 0; b < 256; b++) byte_tok[b] = -1;
    for (int32_t id = 0; id < tok_vocab_size(t); id++) {
        size_t l;
        const char *p = tok_token_bytes(t, id, &l);
        if (p && l == 1 && byte_tok[(unsigned char)p[0]] < 0) byte_tok[(unsigned char)p[0]] = id;
    }
    int all = 1;
    for (int b = 0; b < 256; b++) all &= byte_tok[b] >= 0;
    CHECK(all, "every byte has a one-byte token");
    if (!all) return;
    qw_tok_stream *s = tok_stream_new(t, 0);
    size_t l;
    const char *p;
    /* U+1F600 as four one-byte tokens: nothing until the last. */
    const unsigned char emoji[4] = {0xF0, 0x9F, 0x98, 0x80};
    for (int i = 0; i < 3; i++) {
        p = tok_stream_feed(s, byte_tok[emoji[i]], &l);
        CHECK(l == 0, "stream: byte %d of a 4-byte char gave %zu bytes", i, l);
    }
    p = tok_stream_feed(s, byte_tok[emoji[3]], &l);
    CHECK(l == 4 && !memcmp(p, emoji, 4), "stream: completed char");
    /* 0xFF can never start a character: U+FFFD at once. */
    p = tok_stream_feed(s, byte_tok[0xFF], &l);
    CHECK(l == 3 && !memcmp(p, "\xEF\xBF\xBD", 3), "stream: 0xFF -> U+FFFD");
    /* E4 B8 then 'A': the prefix becomes one U+FFFD, then A. */
    p = tok_stream_feed(s, byte_tok[0xE4], &l);
    CHECK(l == 0, "stream: held lead byte");
    p = tok_stream_feed(s, byte_tok[0xB8], &l);
    CHECK(l == 0, "stream: held 2 bytes");
    p = tok_stream_feed(s, byte_tok['A'], &l);
    CHECK(l == 4 && !memcmp(p, "\xEF\xBF\xBD" "A", 4), "stream: broken prefix -> U+FFFD A (got %zu)", l);
    /* A dangling prefix at the end comes out of flush. */
    tok_stream_feed(s, byte_tok[0xE4], &l);
    p = tok_stream_flush(s, &l);
    CHECK(l == 3 && !memcmp(p, "\xEF\xBF\xBD", 3), "stream: flush dangling prefix");
    p = tok_stream_flush(s, &l);
    CHECK(l == 0, "stream: second flush empty");
    /* Special tokens are skipped when asked. */
    qw_tok_stream *s2 = tok_stream_new(t, 1);
    p = tok_stream_feed(s2, tok_token_id(t, "<|im_end|>"), &l);
    CHECK(l == 0, "stream: skip special");
    tok_stream_free(s2);
    /* Random bytes fed one token each: stream == whole decode. */
    unsigned seed = 12345;
    size_t bad = 0;
    for (int r = 0; r < 300; r++) {
        int32_t ids[64];
        int n = 1 + r % 64;
        for (int i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            unsigned v = (seed >> 16) & 0xFF;
            /* bias toward UTF-8 lead/continuation bytes */
            if (v & 1) v = 0x80 | (v & 0x3F);
            else if (v & 2) v = 0xC0 | (v >> 2);
            ids[i] = byte_tok[v];
        }
        char *whole;
        size_t wl;
        tok_decode(t, ids, (size_t)n, 0, &whole, &wl, NULL);
        char acc[64 * 12];
        size_t al = 0;
        for (int i = 0; i < n; i++) {
            p = tok_stream_feed(s, ids[i], &l);
            memcpy(acc + al, p, l);
            al += l;
        }
        p = tok_stream_flush(s, &l);
        memcpy(acc + al, p, l);
        al += l;
        if (al != wl || memcmp(acc, whole, wl)) bad++;
        free(whole);
    }
    CHECK(bad == 0, "stream: %zu random byte sequences stream differently from decode", bad);
    tok_stream_free(s);
}

/* ------------------------------------------------------------- hostile */

static void roundtrip_big(const qw_tok *t, const char *what, const char *s, size_t n) {
    int32_t *ids;
    size_t nid;
    double t0 = now_s();
    int rc = tok_encode(t, s, n, &ids, &nid, NULL);
    double dt = now_s() - t0;
    printf("hostile: %s: %zu bytes -> %zu ids in %.3f s\n", what, n, nid, dt);
    CHECK(rc == 0, "hostile: %s: encode failed", what);
    CHECK(dt < 10.0, "hostile: %s took %.1f s", what, dt);
    char *txt;
    size_t tl;
    tok_decode(t, ids, nid, 0, &txt, &tl, NULL);
    CHECK(tl == n && !memcmp(txt, s, n), "hostile: %s does not round-trip", what);
    free(txt);
    free(ids);
}

static void check_hostile(const qw_tok *t) {
    size_t n = 100000;
    char *s = malloc(n * 4 + 1);
    memset(s, 'a', n);
    roundtrip_big(t, "100000 x 'a'", s, n);
    for (size_t i = 0; i < n; i++) memcpy(s + 3 * i, "\xe4\xb8\xad", 3); /* 中 */
    roundtrip_big(t, "100000 x CJK", s, 3 * n);
    memset(s, ' ', n);
    roundtrip_big(t, "100000 spaces", s, n);
    for (size_t i = 0; i < n; i++) s[i] = "\n \t\r"[i % 4];
    roundtrip_big(t, "100000 mixed whitespace", s, n);
    for (size_t i = 0; i < n; i++) s[i] = "0123456789"[i % 10];
    roundtrip_big(t, "100000 digits", s, n);
    for (size_t i = 0; i < n; i++) s[i] = "!?.,;:"[i % 6];
    roundtrip_big(t, "100000 punctuation", s, n);
    /* Random bytes: must not crash, and decode must give the U+FFFD-repaired text. */
    unsigned seed = 99;
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        s[i] = (char)(seed >> 16);
    }
    int32_t *ids;
    size_t nid;
    int rc = tok_encode(t, s, n, &ids, &nid, NULL);
    CHECK(rc == 0 && nid > 0, "hostile: random bytes encode");
    char *txt;
    size_t tl;
    tok_decode(t, ids, nid, 0, &txt, &tl, NULL);
    int32_t *ids2;
    size_t nid2;
    tok_encode(t, txt, tl, &ids2, &nid2, NULL);
    CHECK(same_ids(ids, nid, ids2, nid2), "hostile: repaired random bytes re-encode to the same ids");
    free(ids);
    free(ids2);
    free(txt);
    /* Empty input and NULL-safe paths. */
    rc = tok_encode(t, "", 0, &ids, &nid, NULL);
    CHECK(rc == 0 && nid == 0, "empty text");
    free(ids);
    int32_t weird[3] = {-5, 1 << 30, tok_token_id(t, "a")};
    rc = tok_decode(t, weird, 3, 0, &txt, &tl, NULL);
    CHECK(rc == 0 && tl == 1 && txt[0] == 'a', "decode skips unknown ids");
    free(txt);
    free(s);
}

/* ------------------------------------------------------------------ GGUF */

/* Convert dir/tokenizer.json to GGUF tokenizer metadata the way llama.cpp's
 * convert_hf_to_gguf.py does for Qwen2 (token i = vocab spelling, or the
 * added token's content typed CONTROL if special else USER_DEFINED, ids
 * without a token "[PADi]" typed UNUSED up to the embedding size; merges as
 * "left right"), load it with tok_load(file.gguf) and check the full corpus
 * against the Hugging Face reference ids, plus every token's bytes and
 * special flag against the tokenizer.json tokenizer. */
static void check_gguf(const char *sub, const qw_tok *tj, ccase *cs, size_t n, int is3) {
    char path[1200], gpath[1200];
    snprintf(path, sizeof path, "%s/%s/tokenizer.json", g_fix, sub);
    snprintf(gpath, sizeof gpath, "%s/%s-tokenizer.gguf", g_fix, sub);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL, "open %s", path);
    if (!f) return;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *txt = malloc((size_t)len + 1);
    size_t got = fread(txt, 1, (size_t)len, f);
    fclose(f);
    txt[got] = 0;
    cJSON *root = cJSON_Parse(txt);
    free(txt);
    const cJSON *model = cJSON_GetObjectItem(root, "model");
    const cJSON *vocab = cJSON_GetObjectItem(model, "vocab"), *merges = cJSON_GetObjectItem(model, "merges");
    const cJSON *added = cJSON_GetObjectItem(root, "added_tokens");
    int nv = tok_vocab_size(tj) + 271; /* padded like Qwen2.5's 151936-row embedding */
    const char **toks = calloc((size_t)nv, sizeof *toks);
    int32_t *types = malloc((size_t)nv * sizeof *types);
    char **pads = calloc((size_t)nv, sizeof *pads);
    for (const cJSON *e = vocab->child; e; e = e->next) toks[e->valueint] = e->string, types[e->valueint] = 1;
    for (const cJSON *e = added->child; e; e = e->next) {
        int id = cJSON_GetObjectItem(e, "id")->valueint;
        toks[id] = cJSON_GetObjectItem(e, "content")->valuestring;
        types[id] = cJSON_IsTrue(cJSON_GetObjectItem(e, "special")) ? 3 : 4;
    }
    for (int i = 0; i < nv; i++)
        if (!toks[i]) {
            pads[i] = malloc(24);
            snprintf(pads[i], 24, "[PAD%d]", i);
            toks[i] = pads[i];
            types[i] = 5;
        }
    int nm = cJSON_GetArraySize(merges);
    const char **ms = calloc((size_t)nm + 1, sizeof *ms);
    char **owned = calloc((size_t)nm + 1, sizeof *owned);
    int i = 0;
    for (const cJSON *e = merges->child; e; e = e->next, i++) {
        if (cJSON_IsString(e)) {
            ms[i] = e->valuestring;
        } else { /* ["left", "right"] */
            const char *l = cJSON_GetArrayItem(e, 0)->valuestring, *r = cJSON_GetArrayItem(e, 1)->valuestring;
            owned[i] = malloc(strlen(l) + strlen(r) + 2);
            sprintf(owned[i], "%s %s", l, r);
            ms[i] = owned[i];
        }
    }
    gw w;
    gw_init(&w);
    gw_kv_str(&w, "general.architecture", "qwen2");
    gw_kv_str(&w, "tokenizer.ggml.model", "gpt2");
    gw_kv_str(&w, "tokenizer.ggml.pre", "qwen2");
    gw_kv_strs(&w, "tokenizer.ggml.tokens", toks, (size_t)nv);
    gw_kv_i32s(&w, "tokenizer.ggml.token_type", types, (size_t)nv);
    gw_kv_strs(&w, "tokenizer.ggml.merges", ms, (size_t)nm);
    /* The folder's chat template, as llama.cpp's converter copies it. */
    const char *tmpl = tok_chat_template(tj, NULL);
    if (tmpl) gw_kv_str(&w, "tokenizer.chat_template", tmpl);
    gw_build(&w);
    CHECK(gw_write(&w, gpath, w.n) == 0, "write %s", gpath);
    gw_free(&w);
    for (i = 0; i < nv; i++) free(pads[i]);
    for (i = 0; i < nm; i++) free(owned[i]);
    free(pads), free(owned), free(ms), free(toks), free(types);
    cJSON_Delete(root);

    qw_tok *tg = NULL;
    qw_err err = {{0}};
    double t0 = now_s();
    int rc = tok_load(&tg, gpath, &err);
    printf("load %s from GGUF: %.2f s\n", sub, now_s() - t0);
    CHECK(rc == 0 && tg, "tok_load %s: %s", gpath, err.msg);
    if (tg) {
        CHECK(tok_vocab_size(tg) == tok_vocab_size(tj), "%s gguf vocab %d != %d", sub, tok_vocab_size(tg),
              tok_vocab_size(tj));
        int bad = 0;
        for (int32_t id = 0; id < tok_vocab_size(tj); id++) {
            size_t la, lb;
            const char *a = tok_token_bytes(tj, id, &la), *b = tok_token_bytes(tg, id, &lb);
            if (!a != !b || la != lb || (a && memcmp(a, b, la)) || tok_is_special(tj, id) != tok_is_special(tg, id))
                bad++;
        }
        CHECK(bad == 0, "%s gguf: %d ids decode or flag differently from tokenizer.json", sub, bad);
        CHECK(tok_chat_family(tg) == tok_chat_family(tj) && tok_chat_family(tg) != CHAT_NONE,
              "%s gguf: chat template family %s, the folder's %s", sub, chat_family_name(tok_chat_family(tg)),
              chat_family_name(tok_chat_family(tj)));
        char name[64];
        snprintf(name, sizeof name, "%s-gguf", sub);
        check_corpus(tg, name, cs, n, is3, 5000);
        tok_free(tg);
    }
    unlink(gpath);
}

/* ----------------------------------------------------------- malformed */

static void expect_reject2(const char *dir, const char *file, const char *body, const char *what,
                           const char *named) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    write_file(path, body);
    qw_tok *t = NULL;
    qw_err err = {{0}};
    int rc = tok_load(&t, dir, &err);
    CHECK(rc == -1 && t == NULL, "malformed %s accepted", what);
    CHECK(strstr(err.msg, named) != NULL, "malformed %s: message does not name %s: '%s'", what, named, err.msg);
    if (rc == 0) tok_free(t);
    unlink(path);
}

static void expect_reject(const char *dir, const char *file, const char *body, const char *what) {
    expect_reject2(dir, file, body, what, file);
}

static void check_malformed(void) {
    char dir[] = "/tmp/qwenc_tok_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return;
    }
    const char *tail = "\"normalizer\":{\"type\":\"NFC\"},\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false},"
                       "\"decoder\":{\"type\":\"ByteLevel\"}}";
    char b[2048];
    expect_reject(dir, "tokenizer.json", "", "empty file");
    expect_reject(dir, "tokenizer.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}", "truncated JSON");
    expect_reject(dir, "tokenizer.json", "[1,2,3]", "array root");
    expect_reject(dir, "tokenizer.json", "{}", "no model");
    snprintf(b, sizeof b, "{\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"a\":0},\"merges\":[]},%s", tail);
    expect_reject(dir, "tokenizer.json", b, "WordPiece model");
    snprintf(b, sizeof b, "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a b\"]},%s", tail);
    expect_reject(dir, "tokenizer.json", b, "merge to a missing token");
    snprintf(b, sizeof b, "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"a x\"]},%s", tail);
    expect_reject(dir, "tokenizer.json", b, "merge of a missing token");
    snprintf(b, sizeof b, "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-1},\"merges\":[]},%s", tail);
    expect_reject(dir, "tokenizer.json", b, "negative id");
    snprintf(b, sizeof b, "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":1e12},\"merges\":[]},%s", tail);
    expect_reject(dir, "tokenizer.json", b, "huge id");
    snprintf(b, sizeof b, "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":\"0\"},\"merges\":[]},%s", tail);
    expect_reject(dir, "tokenizer.json", b, "string id");
    snprintf(b, sizeof b, "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[42]},%s", tail);
    expect_reject(dir, "tokenizer.json", b, "merge not a string");
    snprintf(b, sizeof b, "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"a\"]},%s", tail);
    expect_reject(dir, "tokenizer.json", b, "merge without a space");
    snprintf(b, sizeof b, "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},\"added_tokens\":{},%s", tail);
    expect_reject(dir, "tokenizer.json", b, "added_tokens not an array");
    snprintf(b, sizeof b, "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},\"added_tokens\":[{\"id\":5}],%s", tail);
    expect_reject(dir, "tokenizer.json", b, "added token without content");
    snprintf(b, sizeof b,
             "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},\"normalizer\":{\"type\":\"Lowercase\"},"
             "\"pre_tokenizer\":{\"type\":\"ByteLevel\"},\"decoder\":{\"type\":\"ByteLevel\"}}");
    expect_reject(dir, "tokenizer.json", b, "Lowercase normalizer");
    snprintf(b, sizeof b,
             "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},\"pre_tokenizer\":{\"type\":\"Sequence\","
             "\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},\"behavior\":\"Isolated\"},"
             "{\"type\":\"ByteLevel\",\"use_regex\":false}]},\"decoder\":{\"type\":\"ByteLevel\"}}");
    expect_reject(dir, "tokenizer.json", b, "bad regex");
    snprintf(b, sizeof b,
             "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},\"pre_tokenizer\":{\"type\":\"Whitespace\"},"
             "\"decoder\":{\"type\":\"ByteLevel\"}}");
    expect_reject(dir, "tokenizer.json", b, "Whitespace pre-tokenizer");
    snprintf(b, sizeof b,
             "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},\"pre_tokenizer\":{\"type\":\"ByteLevel\"},"
             "\"decoder\":{\"type\":\"WordPiece\"}}");
    expect_reject(dir, "tokenizer.json", b, "WordPiece decoder");
    snprintf(b, sizeof b, "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[],\"dropout\":0.1},%s", tail);
    expect_reject(dir, "tokenizer.json", b, "dropout");
    /* The slow format. */
    write_file((snprintf(b, sizeof b, "%s/merges.txt", dir), b), "#version: 0.2\na b\n");
    expect_reject2(dir, "vocab.json", "{\"a\": 0, \"b\": 1}", "slow format, merge to a missing token", "merges.txt");
    expect_reject(dir, "vocab.json", "{\"a\": 0, \"b\": 1, \"ab\": true}", "slow format, bool id");
    snprintf(b, sizeof b, "%s/merges.txt", dir);
    unlink(b);
    /* A directory with nothing. */
    qw_tok *t = NULL;
    qw_err err = {{0}};
    CHECK(tok_load(&t, dir, &err) == -1 && strstr(err.msg, dir), "empty dir rejected: %s", err.msg);
    CHECK(tok_load(&t, "/nonexistent/dir", &err) == -1, "missing dir rejected");
    rmdir(dir);
}

/* The same tokenizer as vocab.json + merges.txt + tokenizer_config.json. */
static void check_slow_format(const char *fixdir, ccase *cs, size_t n) {
    char path[1200], dir[] = "/tmp/qwenc_slow_XXXXXX";
    if (!mkdtemp(dir)) return;
    snprintf(path, sizeof path, "%s/qwen2.5/tokenizer.json", fixdir);
    char *js = read_all(path, NULL);
    cJSON *root = js ? cJSON_Parse(js) : NULL;
    free(js);
    CHECK(root != NULL, "parse %s", path);
    if (!root) return;
    cJSON *model = cJSON_GetObjectItem(root, "model");
    char *vocab = cJSON_PrintUnformatted(cJSON_GetObjectItem(model, "vocab"));
    snprintf(path, sizeof path, "%s/vocab.json", dir);
    write_file(path, vocab);
    free(vocab);
    snprintf(path, sizeof path, "%s/merges.txt", dir);
    FILE *f = fopen(path, "wb");
    fputs("#version: 0.2\n", f);
    for (cJSON *m = cJSON_GetObjectItem(model, "merges")->child; m; m = m->next) {
        if (cJSON_IsArray(m))
            fprintf(f, "%s %s\n", cJSON_GetArrayItem(m, 0)->valuestring, cJSON_GetArrayItem(m, 1)->valuestring);
        else
            fprintf(f, "%s\n", m->valuestring);
    }
    fclose(f);
    cJSON_Delete(root);
    char src[1200];
    snprintf(src, sizeof src, "%s/qwen2.5/tokenizer_config.json", fixdir);
    char *cfg = read_all(src, NULL);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    write_file(path, cfg ? cfg : "{}");
    free(cfg);
    qw_tok *t = NULL;
    qw_err err = {{0}};
    int rc = tok_load(&t, dir, &err);
    CHECK(rc == 0, "slow format load: %s", err.msg);
    if (rc == 0) {
        size_t bad = 0;
        CHECK(tok_vocab_size(t) == 151665, "slow format vocab size %d", tok_vocab_size(t));
        for (size_t i = 0; i < n; i++) {
            int32_t *ids;
            size_t nid;
            if (tok_encode(t, cs[i].text, cs[i].len, &ids, &nid, NULL) || !same_ids(ids, nid, cs[i].ids25, cs[i].n25))
                bad++;
            free(ids);
        }
        printf("slow format (vocab.json + merges.txt): %zu of %zu cases differ\n", bad, n);
        CHECK(bad == 0, "slow format: %zu cases differ", bad);
        tok_free(t);
    }
    const char *names[] = {"vocab.json", "merges.txt", "tokenizer_config.json"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

/* tokenizer.json with merges in the older "left right" string form (the form
 * Qwen2.5's own tokenizer.json uses) loads to the same tokenizer. */
static void check_string_merges(const char *fixdir, ccase *cs, size_t n) {
    char path[1200], dir[] = "/tmp/qwenc_smerge_XXXXXX";
    if (!mkdtemp(dir)) return;
    snprintf(path, sizeof path, "%s/qwen2.5/tokenizer.json", fixdir);
    char *js = read_all(path, NULL);
    cJSON *root = js ? cJSON_Parse(js) : NULL;
    free(js);
    CHECK(root != NULL, "parse %s", path);
    if (!root) return;
    cJSON *merges = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "model"), "merges");
    cJSON *strs = cJSON_CreateArray();
    for (cJSON *m = merges->child; m; m = m->next) {
        char buf[1024];
        if (cJSON_IsArray(m))
            snprintf(buf, sizeof buf, "%s %s", cJSON_GetArrayItem(m, 0)->valuestring,
                     cJSON_GetArrayItem(m, 1)->valuestring);
        else
            snprintf(buf, sizeof buf, "%s", m->valuestring);
        cJSON_AddItemToArray(strs, cJSON_CreateString(buf));
    }
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(root, "model"), "merges", strs);
    char *out = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    write_file(path, out);
    free(out);
    qw_tok *t = NULL;
    qw_err err = {{0}};
    int rc = tok_load(&t, dir, &err);
    CHECK(rc == 0, "string-merges tokenizer.json: %s", err.msg);
    if (rc == 0) {
        size_t bad = 0;
        for (size_t i = 0; i < n; i++) {
            int32_t *ids;
            size_t nid;
            if (tok_encode(t, cs[i].text, cs[i].len, &ids, &nid, NULL) || !same_ids(ids, nid, cs[i].ids25, cs[i].n25))
                bad++;
            free(ids);
        }
        printf("tokenizer.json with \"a b\" merges: %zu of %zu cases differ\n", bad, n);
        CHECK(bad == 0, "string merges: %zu cases differ", bad);
        tok_free(t);
    }
    unlink(path);
    rmdir(dir);
}

int main(void) {
    const char *env = getenv("QWENC_TOK_FIXTURES");
    const char *build = getenv("BUILD");
    if (env && *env) snprintf(g_fix, sizeof g_fix, "%s", env);
    else snprintf(g_fix, sizeof g_fix, "%s/fixtures/tokenizer", build && *build ? build : "build");
    printf("fixtures: %s\n", g_fix);

    char d25[1200], d3[1200], path[1200];
    snprintf(d25, sizeof d25, "%s/qwen2.5", g_fix);
    snprintf(d3, sizeof d3, "%s/qwen3", g_fix);
    qw_tok *t25 = NULL, *t3 = NULL;
    qw_err err = {{0}};
    double t0 = now_s();
    int rc = tok_load(&t25, d25, &err);
    printf("load qwen2.5: %.2f s\n", now_s() - t0);
    CHECK(rc == 0, "load %s: %s (run tests/fixtures/tokenizer/prepare.sh %s)", d25, err.msg, g_fix);
    rc = tok_load(&t3, d3, &err);
    CHECK(rc == 0, "load %s: %s", d3, err.msg);
    if (!t25 || !t3) return test_summary();

    CHECK(tok_vocab_size(t25) == 151665, "qwen2.5 vocab size %d", tok_vocab_size(t25));
    CHECK(tok_vocab_size(t3) == 151669, "qwen3 vocab size %d", tok_vocab_size(t3));
    CHECK(tok_token_id(t25, "<|im_start|>") == 151644, "<|im_start|>");
    CHECK(tok_token_id(t25, "<|im_end|>") == 151645, "<|im_end|>");
    CHECK(tok_token_id(t25, "<|endoftext|>") == 151643, "<|endoftext|>");
    CHECK(tok_token_id(t25, "<think>") == -1, "qwen2.5 has no <think>");
    CHECK(tok_token_id(t3, "<think>") == 151667, "qwen3 <think>");
    CHECK(tok_token_id(t25, "Ġthe") == 279, "Ġthe -> %d", tok_token_id(t25, "Ġthe"));
    CHECK(tok_is_special(t25, 151645) && !tok_is_special(t25, 151657) && !tok_is_special(t25, 279), "special flags");

    size_t n = 0;
    snprintf(path, sizeof path, "%s/corpus.jsonl", g_fix);
    ccase *cs = load_corpus(path, &n);
    CHECK(cs != NULL, "cannot read %s", path);
    if (cs) {
        check_corpus(t25, "qwen2.5", cs, n, 0, 5000);
        check_corpus(t3, "qwen3", cs, n, 1, 5000);
        check_threads(t25, cs, n);
        check_slow_format(g_fix, cs, n < 1500 ? n : 1500);
        check_string_merges(g_fix, cs, n < 1500 ? n : 1500);
        check_gguf("qwen2.5", t25, cs, n, 0);
        check_gguf("qwen3", t3, cs, n, 1);
    }
    /* A tiny tokenizer whose added tokens use every flag (lstrip, rstrip,
     * single_word, normalized, special). */
    {
        char dflags[1200];
        qw_tok *tf = NULL;
        snprintf(dflags, sizeof dflags, "%s/flags", g_fix);
        snprintf(path, sizeof path, "%s/corpus_flags.jsonl", g_fix);
        size_t nf = 0;
        ccase *cf = load_corpus(path, &nf);
        rc = tok_load(&tf, dflags, &err);
        CHECK(rc == 0 && cf, "flags tokenizer/corpus: %s", err.msg);
        if (rc == 0 && cf) check_corpus(tf, "flags", cf, nf, 0, 500);
        free_corpus(cf, nf);
        tok_free(tf);
    }
    snprintf(path, sizeof path, "%s/corpus_chat.jsonl", g_fix);
    check_chat(t25, path);
    check_stream(t25);
    check_hostile(t25);
    check_malformed();
    free_corpus(cs, n);
    tok_free(t25);
    tok_free(t3);
    return test_summary();
}
