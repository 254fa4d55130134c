/* load.c - reading Hugging Face tokenizer files into a qw_tok.
 *
 * Accepts the "fast" tokenizer.json (model.type "BPE", byte-level: the
 * format `tokenizers` writes) or the "slow" pair vocab.json + merges.txt with
 * the added tokens of tokenizer_config.json ("added_tokens_decoder"), as
 * transformers' Qwen2Tokenizer reads them. Everything in the files is
 * untrusted: every field is type-checked and every id range-checked, and
 * anything we do not implement exactly (dropout, subword prefixes, other
 * normalizers or pre-tokenizers) is refused with a message naming the file
 * and field rather than tokenized differently from Hugging Face.
 *
 * A GGUF file's tokenizer metadata builds the same qw_tok (load_gguf):
 * tokenizer.ggml.model "gpt2" with tokenizer.ggml.pre "qwen2" is exactly
 * the tokenizer.json of Qwen2 (NFC, the Qwen2 Split regex, ByteLevel), so
 * the JSON path's builder is fed the token list and merges.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/regfile.h"
#include "format/gguf.h"
#include "tokenizer/tok_internal.h"

#define MAX_FILE_BYTES ((size_t)1 << 30)
#define MAX_IDS (1 << 24) /* far above any real vocabulary; keeps tables small */

/* The pre-tokenizer regex of GPT-2's ByteLevel(use_regex=true). */
static const char *GPT2_REGEX =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
/* transformers' Qwen2Tokenizer PRETOKENIZE_REGEX (used for vocab.json + merges.txt). */
static const char *QWEN2_REGEX =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* ---------------------------------------------------------------- strmap */

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h ^ (h >> 29);
}

typedef struct strpool {
    char *p;
    size_t len, cap;
} strpool;

static int map_grow_to(tok_strmap *m, size_t ncap) {
    uint32_t *ns = calloc(ncap, sizeof *ns);
    if (!ns) return -1;
    for (size_t i = 0; i < m->n; i++) {
        uint64_t h = hash_bytes(m->key[i], m->klen[i]);
        size_t j = h & (ncap - 1);
        while (ns[j]) j = (j + 1) & (ncap - 1);
        ns[j] = (uint32_t)(i + 1);
    }
    free(m->slot);
    m->slot = ns;
    m->cap = ncap;
    return 0;
}

static int map_grow(tok_strmap *m) { return map_grow_to(m, m->cap ? m->cap * 2 : 1024); }

/* Room for n keys without rehashing. */
static int map_reserve(tok_strmap *m, size_t n) {
    size_t cap = 1024;
    while (cap / 2 < n + 1) cap *= 2;
    if (cap > m->cap && map_grow_to(m, cap)) return -1;
    if (n > m->cap_keys) {
        const char **nk = realloc((void *)m->key, n * sizeof *nk);
        if (!nk) return -1;
        m->key = nk;
        uint32_t *nl = realloc(m->klen, n * sizeof *nl);
        if (!nl) return -1;
        m->klen = nl;
        int32_t *nv = realloc(m->val, n * sizeof *nv);
        if (!nv) return -1;
        m->val = nv;
        m->cap_keys = n;
    }
    return 0;
}

int32_t tok_strmap_get(const tok_strmap *m, const char *key, size_t klen) {
    if (!m->cap) return -1;
    uint64_t h = hash_bytes(key, klen);
    size_t j = h & (m->cap - 1);
    while (m->slot[j]) {
        uint32_t i = m->slot[j] - 1;
        if (m->klen[i] == klen && !memcmp(m->key[i], key, klen)) return m->val[i];
        j = (j + 1) & (m->cap - 1);
    }
    return -1;
}

/* key must stay valid as long as the map (it points into the owner's pool).
 * An existing key gets the new value. */
int tok_strmap_put(tok_strmap *m, const char *key, uint32_t klen, int32_t val) {
    if (m->cap) {
        uint64_t h = hash_bytes(key, klen);
        size_t j = h & (m->cap - 1);
        while (m->slot[j]) {
            uint32_t i = m->slot[j] - 1;
            if (m->klen[i] == klen && !memcmp(m->key[i], key, klen)) {
                m->val[i] = val;
                return 0;
            }
            j = (j + 1) & (m->cap - 1);
        }
    }
    if (m->n + 1 > m->cap / 2 && map_grow(m)) return -1;
    if (m->n == m->cap_keys) {
        size_t nc = m->cap_keys ? m->cap_keys * 2 : 1024;
        const char **nk = realloc((void *)m->key, nc * sizeof *nk);
        if (!nk) return -1;
        m->key = nk;
        uint32_t *nl = realloc(m->klen, nc * sizeof *nl);
        if (!nl) return -1;
        m->klen = nl;
        int32_t *nv = realloc(m->val, nc * sizeof *nv);
        if (!nv) return -1;
        m->val = nv;
        m->cap_keys = nc;
    }
    size_t i = m->n++;
    m->key[i] = key;
    m->klen[i] = klen;
    m->val[i] = val;
    uint64_t h = hash_bytes(key, klen);
    size_t j = h & (m->cap - 1);
    while (m->slot[j]) j = (j + 1) & (m->cap - 1);
    m->slot[j] = (uint32_t)(i + 1);
    return 0;
}

static void strmap_free(tok_strmap *m) {
    free(m->slot);
    free((void *)m->key);
    free(m->klen);
    free(m->val);
    memset(m, 0, sizeof *m);
}

/* ------------------------------------------------------- byte-level map */

/* GPT-2 bytes_to_unicode(): byte -> code point, and the inverse. */
static uint32_t b2u[256];
static int16_t u2b[512];
static pthread_once_t bytemap_once = PTHREAD_ONCE_INIT;

static void bytemap_init(void) {
    int n = 0;
    for (int i = 0; i < 512; i++) u2b[i] = -1;
    for (int b = 0; b < 256; b++) {
        int keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        b2u[b] = keep ? (uint32_t)b : (uint32_t)(256 + n++);
        u2b[b2u[b]] = (int16_t)b;
    }
}

/* Decode a byte-level spelling into raw bytes (out has room for n bytes).
 * If a character is outside the map, the token's own UTF-8 is its bytes
 * (what the ByteLevel decoder does). Returns the byte count. */
static size_t bytelevel_decode(const char *s, size_t n, char *out) {
    size_t i = 0, j = 0;
    uint32_t cp;
    while (i < n) {
        int L = utf8_decode1((const unsigned char *)s + i, n - i, &cp);
        if (!L || cp >= 512 || u2b[cp] < 0) {
            memcpy(out, s, n);
            return n;
        }
        out[j++] = (char)u2b[cp];
        i += (size_t)L;
    }
    return j;
}

/* ------------------------------------------------------------ file utils */

static int read_file(const char *path, char **buf, size_t *len, qw_err *err) {
    const char *why = NULL;
    FILE *f = regfile_fopen(path, &why);
    if (!f) return qw_errf(err, "tok_load: %s: %s", path, why);
    char *b = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            if (cap >= MAX_FILE_BYTES) {
                free(b);
                fclose(f);
                return qw_errf(err, "tok_load: %s: larger than %zu bytes", path, MAX_FILE_BYTES);
            }
            cap = cap ? cap * 2 : 1 << 16;
            char *nb = realloc(b, cap + 1);
            if (!nb) {
                free(b);
                fclose(f);
                return qw_errf(err, "tok_load: %s: out of memory", path);
            }
            b = nb;
        }
        size_t r = fread(b + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(b);
        return qw_errf(err, "tok_load: %s: read error", path);
    }
    b[n] = 0;
    *buf = b;
    *len = n;
    return 0;
}

/* Exists as anything at all: a FIFO or directory then fails in read_file
 * with a message naming it, instead of being silently skipped. */
static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static cJSON *parse_json(const char *path, qw_err *err) {
    char *buf;
    size_t len;
    if (read_file(path, &buf, &len, err)) return NULL;
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(buf, len, &end, 0);
    if (!j) {
        size_t at = end && end >= buf && end <= buf + len ? (size_t)(end - buf) : 0;
        qw_errf(err, "tok_load: %s: invalid JSON near byte %zu", path, at);
    }
    free(buf);
    return j;
}

/* ------------------------------------------------------- chat template */

static int set_template(qw_tok *t, const char *s, size_t n, const char *file, qw_err *err) {
    free(t->chat_template);
    t->chat_template = malloc(n + 1);
    if (!t->chat_template) return qw_errf(err, "tok_load: %s: out of memory", file);
    memcpy(t->chat_template, s, n);
    t->chat_template[n] = 0;
    t->chat_template_len = n;
    t->chat_family = chat_template_family(s, n);
    return 0;
}

/* A folder's template: chat_template.jinja (what transformers >= 4.43
 * saves, and prefers), else tokenizer_config.json "chat_template": a string,
 * or a list of {"name", "template"} whose "default" entry is the chat one.
 * Any other shape counts as a template qwenc does not know. */
static int load_template_dir(qw_tok *t, const char *dir, qw_err *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    if (file_exists(path)) {
        char *buf;
        size_t len;
        if (read_file(path, &buf, &len, err)) return -1;
        int rc = set_template(t, buf, len, path, err);
        free(buf);
        return rc;
    }
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    if (!file_exists(path)) return 0;
    cJSON *cfg = parse_json(path, err);
    if (!cfg) return -1;
    int rc = 0;
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
    if (cJSON_IsArray(ct)) {
        const cJSON *it, *found = NULL;
        cJSON_ArrayForEach(it, ct) {
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(it, "name");
            if (cJSON_IsString(nm) && !strcmp(nm->valuestring, "default"))
                found = cJSON_GetObjectItemCaseSensitive(it, "template");
        }
        ct = found;
        if (!cJSON_IsString(ct)) t->chat_family = CHAT_UNKNOWN;
    }
    if (cJSON_IsString(ct)) rc = set_template(t, ct->valuestring, strlen(ct->valuestring), path, err);
    else if (ct && !cJSON_IsNull(ct)) t->chat_family = CHAT_UNKNOWN;
    cJSON_Delete(cfg);
    return rc;
}

/* ----------------------------------------------------------- the builder */

typedef struct builder {
    qw_tok *t;
    const char *file; /* for messages */
    /* vocab entries: spelling (byte-level, in pool) -> id */
    strpool pool;
    size_t *name_off; /* [n_names] offset of each spelling in pool */
    uint32_t *name_len;
    int32_t *name_id;
    size_t n_names, cap_names;
    /* merges as id pairs, in rank order */
    int32_t *ml, *mr, *mid;
    size_t n_merges, cap_merges;
    tok_added *added;
    size_t n_added, cap_added;
} builder;

static int pool_add(strpool *p, const char *s, size_t n, size_t *off) {
    if (n > SIZE_MAX - p->len - 1) return -1;
    if (p->len + n + 1 > p->cap) {
        size_t nc = p->cap ? p->cap : 1 << 20;
        while (nc < p->len + n + 1) nc *= 2;
        char *np = realloc(p->p, nc);
        if (!np) return -1;
        p->p = np;
        p->cap = nc;
    }
    memcpy(p->p + p->len, s, n);
    p->p[p->len + n] = 0;
    *off = p->len;
    p->len += n + 1;
    return 0;
}

static int b_add_name(builder *b, const char *s, size_t n, int32_t id, qw_err *err) {
    if (n > UINT32_MAX) return qw_errf(err, "tok_load: %s: token too long", b->file);
    if (b->n_names == b->cap_names) {
        size_t nc = b->cap_names ? b->cap_names * 2 : 1 << 16;
        size_t *no = realloc(b->name_off, nc * sizeof *no);
        if (!no) goto oom;
        b->name_off = no;
        uint32_t *nl = realloc(b->name_len, nc * sizeof *nl);
        if (!nl) goto oom;
        b->name_len = nl;
        int32_t *ni = realloc(b->name_id, nc * sizeof *ni);
        if (!ni) goto oom;
        b->name_id = ni;
        b->cap_names = nc;
    }
    if (pool_add(&b->pool, s, n, &b->name_off[b->n_names])) goto oom;
    b->name_len[b->n_names] = (uint32_t)n;
    b->name_id[b->n_names] = id;
    b->n_names++;
    return 0;
oom:
    return qw_errf(err, "tok_load: %s: out of memory", b->file);
}

/* Temporary name -> id map over the builder's names (for merges). */
static int b_index(builder *b, tok_strmap *m, qw_err *err) {
    if (map_reserve(m, b->n_names)) return qw_errf(err, "tok_load: %s: out of memory", b->file);
    for (size_t i = 0; i < b->n_names; i++)
        if (tok_strmap_put(m, b->pool.p + b->name_off[i], b->name_len[i], b->name_id[i]))
            return qw_errf(err, "tok_load: %s: out of memory", b->file);
    return 0;
}

static int b_add_merge(builder *b, tok_strmap *m, const char *l, size_t ln, const char *r,
                       size_t rn, size_t rank, qw_err *err) {
    int32_t a = tok_strmap_get(m, l, ln), c = tok_strmap_get(m, r, rn);
    if (a < 0 || c < 0)
        return qw_errf(err, "tok_load: %s: merges[%zu]: token '%.*s' not in the vocabulary",
                       b->file, rank, (int)(a < 0 ? (ln > 64 ? 64 : ln) : (rn > 64 ? 64 : rn)),
                       a < 0 ? l : r);
    char stack[512];
    char *cat = ln + rn <= sizeof stack ? stack : malloc(ln + rn);
    if (!cat) return qw_errf(err, "tok_load: %s: out of memory", b->file);
    memcpy(cat, l, ln);
    memcpy(cat + ln, r, rn);
    int32_t id = tok_strmap_get(m, cat, ln + rn);
    if (cat != stack) free(cat);
    if (id < 0)
        return qw_errf(err, "tok_load: %s: merges[%zu]: merged token '%.*s%.*s' not in the vocabulary",
                       b->file, rank, (int)(ln > 64 ? 64 : ln), l, (int)(rn > 64 ? 64 : rn), r);
    if (b->n_merges == b->cap_merges) {
        size_t nc = b->cap_merges ? b->cap_merges * 2 : 1 << 16;
        int32_t *x = realloc(b->ml, nc * sizeof *x);
        if (!x) goto oom;
        b->ml = x;
        x = realloc(b->mr, nc * sizeof *x);
        if (!x) goto oom;
        b->mr = x;
        x = realloc(b->mid, nc * sizeof *x);
        if (!x) goto oom;
        b->mid = x;
        b->cap_merges = nc;
    }
    b->ml[b->n_merges] = a;
    b->mr[b->n_merges] = c;
    b->mid[b->n_merges] = id;
    b->n_merges++;
    return 0;
oom:
    return qw_errf(err, "tok_load: %s: out of memory", b->file);
}

static int b_add_added(builder *b, const char *content, int32_t id, int special, int lstrip,
                       int rstrip, int single_word, int normalized, qw_err *err) {
    size_t n = strlen(content);
    if (n == 0) return qw_errf(err, "tok_load: %s: added token %d has empty content", b->file, id);
    if (!utf8_valid(content, n))
        return qw_errf(err, "tok_load: %s: added token %d is not valid UTF-8", b->file, id);
    if (b->n_added == b->cap_added) {
        size_t nc = b->cap_added ? b->cap_added * 2 : 64;
        tok_added *na = realloc(b->added, nc * sizeof *na);
        if (!na) return qw_errf(err, "tok_load: %s: out of memory", b->file);
        b->added = na;
        b->cap_added = nc;
    }
    tok_added *a = &b->added[b->n_added];
    memset(a, 0, sizeof *a);
    a->text = malloc(n + 1);
    if (!a->text) return qw_errf(err, "tok_load: %s: out of memory", b->file);
    memcpy(a->text, content, n + 1);
    a->len = n;
    a->id = id;
    a->special = (uint8_t)!!special;
    a->lstrip = (uint8_t)!!lstrip;
    a->rstrip = (uint8_t)!!rstrip;
    a->single_word = (uint8_t)!!single_word;
    a->normalized = (uint8_t)!!normalized;
    b->n_added++;
    return 0;
}

static int get_bool(const cJSON *o, const char *k, int def, int *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return 0;
    }
    if (!cJSON_IsBool(v)) return -1;
    *out = cJSON_IsTrue(v);
    return 0;
}

static int get_id(const cJSON *v, int32_t *out) {
    if (!cJSON_IsNumber(v)) return -1;
    double d = v->valuedouble;
    if (!(d >= 0 && d < MAX_IDS) || d != (double)(int32_t)d) return -1;
    *out = (int32_t)d;
    return 0;
}

/* One added token object: {id?, content, single_word, lstrip, rstrip, normalized, special}. */
static int parse_added(builder *b, const cJSON *o, int32_t id, const char *where, qw_err *err) {
    if (!cJSON_IsObject(o)) return qw_errf(err, "tok_load: %s: %s: not an object", b->file, where);
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "content");
    if (!cJSON_IsString(c)) return qw_errf(err, "tok_load: %s: %s.content: not a string", b->file, where);
    int special, lstrip, rstrip, sw, norm;
    if (get_bool(o, "special", 0, &special) || get_bool(o, "lstrip", 0, &lstrip) ||
        get_bool(o, "rstrip", 0, &rstrip) || get_bool(o, "single_word", 0, &sw))
        return qw_errf(err, "tok_load: %s: %s: a flag is not a boolean", b->file, where);
    /* `tokenizers` defaults normalized to !special. */
    if (get_bool(o, "normalized", !special, &norm))
        return qw_errf(err, "tok_load: %s: %s.normalized: not a boolean", b->file, where);
    return b_add_added(b, c->valuestring, id, special, lstrip, rstrip, sw, norm, err);
}

/* ------------------------------------------------------------- tok_build */

static int compile_regex(qw_tok *t, const char *pat, size_t len, int literal, const char *file,
                         qw_err *err) {
    int ec;
    PCRE2_SIZE eo;
    uint32_t opt = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0);
    t->re = pcre2_compile((PCRE2_SPTR)pat, len, opt, &ec, &eo, NULL);
    if (!t->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return qw_errf(err, "tok_load: %s: pre_tokenizer regex: %s at offset %zu", file,
                       (const char *)msg, (size_t)eo);
    }
    t->re_jit = pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE) == 0;
    return 0;
}

/* Turn the builder's lists into the final tables. */
static int tok_build(qw_tok *t, builder *b, qw_err *err) {
    pthread_once(&bytemap_once, bytemap_init);
    int32_t max_id = -1;
    for (size_t i = 0; i < b->n_names; i++)
        if (b->name_id[i] > max_id) max_id = b->name_id[i];
    for (size_t i = 0; i < b->n_added; i++)
        if (b->added[i].id > max_id) max_id = b->added[i].id;
    if (max_id < 0) return qw_errf(err, "tok_load: %s: empty vocabulary", b->file);
    t->n_ids = max_id + 1;
    t->flags = calloc((size_t)t->n_ids, 1);
    t->off = calloc((size_t)t->n_ids + 1, sizeof *t->off);
    if (!t->flags || !t->off) goto oom;

    /* `tokenizers` matches a normalized added token by its normalized
     * content, and decodes it to that too. */
    for (size_t i = 0; i < b->n_added; i++) {
        tok_added *a = &b->added[i];
        a->mtext = a->text;
        a->mlen = a->len;
        if (a->normalized && t->nfc) {
            char *m;
            size_t ml;
            if (tok_nfc(a->text, a->len, &m, &ml)) goto oom;
            a->mtext = m;
            a->mlen = ml;
            if (ml == 0) return qw_errf(err, "tok_load: %s: added token %d normalizes to nothing", b->file, a->id);
        }
    }

    /* Decoded bytes of every id: the added token's content wins over the
     * vocabulary (as `tokenizers` looks up added tokens first), and goes
     * through the ByteLevel decoder like any token (so an added "café"
     * decodes to the bytes 63 61 66 E9, as `tokenizers` does). */
    const char **src = calloc((size_t)t->n_ids, sizeof *src);
    uint32_t *srclen = calloc((size_t)t->n_ids, sizeof *srclen);
    if (!src || !srclen) {
        free(src);
        free(srclen);
        goto oom;
    }
    for (size_t i = 0; i < b->n_names; i++) {
        int32_t id = b->name_id[i];
        src[id] = b->pool.p + b->name_off[i];
        srclen[id] = b->name_len[i];
        t->flags[id] |= TOKF_EXISTS;
    }
    for (size_t i = 0; i < b->n_added; i++) {
        int32_t id = b->added[i].id;
        src[id] = b->added[i].mtext;
        srclen[id] = (uint32_t)b->added[i].mlen;
        t->flags[id] |= TOKF_EXISTS | TOKF_ADDED | (b->added[i].special ? TOKF_SPECIAL : 0);
    }
    size_t total = 0;
    for (int32_t id = 0; id < t->n_ids; id++) {
        total += srclen[id];
        if (total > UINT32_MAX) {
            free(src);
            free(srclen);
            return qw_errf(err, "tok_load: %s: vocabulary too large", b->file);
        }
    }
    t->bytes = malloc(total + 1);
    if (!t->bytes) {
        free(src);
        free(srclen);
        goto oom;
    }
    size_t at = 0;
    for (int32_t id = 0; id < t->n_ids; id++) {
        t->off[id] = (uint32_t)at;
        if (!src[id]) continue;
        size_t n = bytelevel_decode(src[id], srclen[id], t->bytes + at);
        if (n > t->max_token_len) t->max_token_len = n;
        at += n;
    }
    t->off[t->n_ids] = (uint32_t)at;
    free(src);
    free(srclen);

    /* Spellings -> ids (vocabulary, then added tokens over them). */
    t->name_pool = b->pool.p;
    t->name_pool_len = b->pool.len;
    b->pool.p = NULL;
    if (map_reserve(&t->names, b->n_names + b->n_added)) goto oom;
    for (size_t i = 0; i < b->n_names; i++)
        if (tok_strmap_put(&t->names, t->name_pool + b->name_off[i], b->name_len[i], b->name_id[i]))
            goto oom;

    /* One-byte tokens. */
    for (int c = 0; c < 256; c++) {
        char sp[4];
        int L = utf8_put(sp, b2u[c]);
        t->byte_id[c] = tok_strmap_get(&t->names, sp, (size_t)L);
    }

    /* Added tokens. */
    t->added = b->added;
    t->n_added = b->n_added;
    b->added = NULL;
    b->n_added = 0;
    for (size_t i = 0; i < t->n_added; i++) {
        tok_added *a = &t->added[i];
        if (tok_strmap_put(&t->names, a->text, (uint32_t)a->len, a->id)) goto oom;
        if (a->normalized) {
            t->added_first_norm[(unsigned char)a->mtext[0]] = 1;
            t->has_norm_added = 1;
        } else {
            t->added_first[(unsigned char)a->text[0]] = 1;
        }
    }

    /* Merge table, load factor <= 1/2. */
    size_t cap = 1024;
    int shift = 64 - 10;
    while (cap < b->n_merges * 2 + 2) {
        cap *= 2;
        shift--;
    }
    t->merges = malloc(cap * sizeof *t->merges);
    if (!t->merges) goto oom;
    for (size_t i = 0; i < cap; i++) t->merges[i].key = UINT64_MAX;
    t->merge_cap = cap;
    t->merge_shift = shift;
    for (size_t r = 0; r < b->n_merges; r++) {
        uint64_t key = (uint64_t)(uint32_t)b->ml[r] << 32 | (uint32_t)b->mr[r];
        size_t j = (size_t)((key * 0x9E3779B97F4A7C15ull) >> shift);
        while (t->merges[j].key != UINT64_MAX && t->merges[j].key != key) j = (j + 1) & (cap - 1);
        if (t->merges[j].key == key) continue; /* a repeated pair keeps its first (best) rank */
        t->merges[j].key = key;
        t->merges[j].rank = (int32_t)r;
        t->merges[j].id = b->mid[r];
    }

    t->cache = calloc((size_t)1 << TOK_CACHE_BITS, sizeof *t->cache);
    if (!t->cache) goto oom;
    for (int i = 0; i < TOK_CACHE_LOCKS; i++) pthread_mutex_init(&t->cache_mu[i], NULL);
    t->cache_mu_init = 1;
    return 0;
oom:
    return qw_errf(err, "tok_load: %s: out of memory", b->file);
}

static void builder_free(builder *b) {
    free(b->pool.p);
    free(b->name_off);
    free(b->name_len);
    free(b->name_id);
    free(b->ml);
    free(b->mr);
    free(b->mid);
    for (size_t i = 0; i < b->n_added; i++) {
        if (b->added[i].mtext && b->added[i].mtext != b->added[i].text) free(b->added[i].mtext);
        free(b->added[i].text);
    }
    free(b->added);
}

/* ------------------------------------------------------- tokenizer.json */

static int type_is(const cJSON *o, const char *type) {
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(o, "type");
    return cJSON_IsString(ty) && !strcmp(ty->valuestring, type);
}

static const char *type_of(const cJSON *o) {
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(o, "type");
    return cJSON_IsString(ty) ? ty->valuestring : "(none)";
}

/* A ByteLevel pre-tokenizer: sets *use_regex. */
static int check_bytelevel(const cJSON *o, const char *file, const char *where, int *use_regex,
                           qw_err *err) {
    int aps, ur;
    if (get_bool(o, "add_prefix_space", 0, &aps) || get_bool(o, "use_regex", 1, &ur))
        return qw_errf(err, "tok_load: %s: %s: a flag is not a boolean", file, where);
    if (aps) return qw_errf(err, "tok_load: %s: %s.add_prefix_space: true is not supported", file, where);
    *use_regex = ur;
    return 0;
}

static int load_pretok(qw_tok *t, const cJSON *pt, const char *file, qw_err *err) {
    if (!pt || cJSON_IsNull(pt))
        return qw_errf(err, "tok_load: %s: pre_tokenizer: missing (a byte-level BPE needs ByteLevel)", file);
    int ur;
    if (type_is(pt, "ByteLevel")) {
        if (check_bytelevel(pt, file, "pre_tokenizer", &ur, err)) return -1;
        return ur ? compile_regex(t, GPT2_REGEX, strlen(GPT2_REGEX), 0, file, err) : 0;
    }
    if (!type_is(pt, "Sequence"))
        return qw_errf(err, "tok_load: %s: pre_tokenizer.type: '%s' is not supported", file, type_of(pt));
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(pt, "pretokenizers");
    if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) != 2)
        return qw_errf(err, "tok_load: %s: pre_tokenizer.pretokenizers: expected [Split, ByteLevel]", file);
    const cJSON *sp = cJSON_GetArrayItem(list, 0), *bl = cJSON_GetArrayItem(list, 1);
    if (!type_is(sp, "Split"))
        return qw_errf(err, "tok_load: %s: pre_tokenizer.pretokenizers[0].type: '%s' is not supported", file,
                       type_of(sp));
    if (!type_is(bl, "ByteLevel"))
        return qw_errf(err, "tok_load: %s: pre_tokenizer.pretokenizers[1].type: '%s' is not supported", file,
                       type_of(bl));
    if (check_bytelevel(bl, file, "pre_tokenizer.pretokenizers[1]", &ur, err)) return -1;
    if (ur)
        return qw_errf(err, "tok_load: %s: pre_tokenizer.pretokenizers[1].use_regex: true after Split is not supported",
                       file);
    const cJSON *beh = cJSON_GetObjectItemCaseSensitive(sp, "behavior");
    if (!cJSON_IsString(beh) || strcmp(beh->valuestring, "Isolated"))
        return qw_errf(err, "tok_load: %s: pre_tokenizer.pretokenizers[0].behavior: only Isolated is supported", file);
    int inv;
    if (get_bool(sp, "invert", 0, &inv) || inv)
        return qw_errf(err, "tok_load: %s: pre_tokenizer.pretokenizers[0].invert: only false is supported", file);
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(sp, "pattern");
    const cJSON *rx = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
    const cJSON *str = cJSON_GetObjectItemCaseSensitive(pat, "String");
    if (cJSON_IsString(rx)) return compile_regex(t, rx->valuestring, strlen(rx->valuestring), 0, file, err);
    if (cJSON_IsString(str) && str->valuestring[0])
        return compile_regex(t, str->valuestring, strlen(str->valuestring), 1, file, err);
    return qw_errf(err, "tok_load: %s: pre_tokenizer.pretokenizers[0].pattern: expected {\"Regex\": string}", file);
}

static int load_normalizer(qw_tok *t, const cJSON *n, const char *file, qw_err *err) {
    if (!n || cJSON_IsNull(n)) return 0;
    if (type_is(n, "NFC")) {
        t->nfc = 1;
        return 0;
    }
    if (type_is(n, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, "normalizers");
        if (cJSON_IsArray(list) && cJSON_GetArraySize(list) == 0) return 0;
        if (cJSON_IsArray(list) && cJSON_GetArraySize(list) == 1 && type_is(cJSON_GetArrayItem(list, 0), "NFC")) {
            t->nfc = 1;
            return 0;
        }
    }
    return qw_errf(err, "tok_load: %s: normalizer.type: '%s' is not supported (only NFC or none)", file,
                   type_of(n));
}

static int load_tokenizer_json(qw_tok *t, const char *path, qw_err *err) {
    cJSON *root = parse_json(path, err);
    if (!root) return -1;
    builder b = {.t = t, .file = path};
    tok_strmap tmp = {0};
    int rc = -1;
    if (!cJSON_IsObject(root)) {
        qw_errf(err, "tok_load: %s: not a JSON object", path);
        goto out;
    }
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!cJSON_IsObject(model)) {
        qw_errf(err, "tok_load: %s: model: missing or not an object", path);
        goto out;
    }
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(model, "type");
    if (mt && !(cJSON_IsString(mt) && !strcmp(mt->valuestring, "BPE"))) {
        qw_errf(err, "tok_load: %s: model.type: '%s' is not supported (only BPE)", path, type_of(model));
        goto out;
    }
    const cJSON *v;
    v = cJSON_GetObjectItemCaseSensitive(model, "dropout");
    if (v && !cJSON_IsNull(v) && !(cJSON_IsNumber(v) && v->valuedouble == 0)) {
        qw_errf(err, "tok_load: %s: model.dropout: not supported", path);
        goto out;
    }
    const char *strs[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        v = cJSON_GetObjectItemCaseSensitive(model, strs[i]);
        if (v && !cJSON_IsNull(v) && !(cJSON_IsString(v) && !v->valuestring[0])) {
            qw_errf(err, "tok_load: %s: model.%s: not supported", path, strs[i]);
            goto out;
        }
    }
    int im;
    if (get_bool(model, "ignore_merges", 0, &im) || im) {
        qw_errf(err, "tok_load: %s: model.ignore_merges: only false is supported", path);
        goto out;
    }
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    if (!cJSON_IsObject(vocab)) {
        qw_errf(err, "tok_load: %s: model.vocab: missing or not an object", path);
        goto out;
    }
    for (const cJSON *e = vocab->child; e; e = e->next) {
        int32_t id;
        if (get_id(e, &id)) {
            qw_errf(err, "tok_load: %s: model.vocab[\"%.64s\"]: id is not an integer in [0, %d)", path,
                    e->string ? e->string : "", MAX_IDS);
            goto out;
        }
        if (!e->string) continue;
        if (b_add_name(&b, e->string, strlen(e->string), id, err)) goto out;
    }
    if (b_index(&b, &tmp, err)) goto out;
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (!cJSON_IsArray(merges)) {
        qw_errf(err, "tok_load: %s: model.merges: missing or not an array", path);
        goto out;
    }
    size_t rank = 0;
    for (const cJSON *e = merges->child; e; e = e->next, rank++) {
        if (cJSON_IsString(e)) {
            const char *s = e->valuestring, *sp = strchr(s, ' ');
            if (!sp || strchr(sp + 1, ' ')) {
                qw_errf(err, "tok_load: %s: model.merges[%zu]: expected \"left right\"", path, rank);
                goto out;
            }
            if (b_add_merge(&b, &tmp, s, (size_t)(sp - s), sp + 1, strlen(sp + 1), rank, err)) goto out;
        } else if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 &&
                   cJSON_IsString(cJSON_GetArrayItem(e, 0)) && cJSON_IsString(cJSON_GetArrayItem(e, 1))) {
            const char *l = cJSON_GetArrayItem(e, 0)->valuestring, *r = cJSON_GetArrayItem(e, 1)->valuestring;
            if (b_add_merge(&b, &tmp, l, strlen(l), r, strlen(r), rank, err)) goto out;
        } else {
            qw_errf(err, "tok_load: %s: model.merges[%zu]: expected \"left right\" or [left, right]", path,
                    rank);
            goto out;
        }
    }
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (added && !cJSON_IsNull(added)) {
        if (!cJSON_IsArray(added)) {
            qw_errf(err, "tok_load: %s: added_tokens: not an array", path);
            goto out;
        }
        size_t i = 0;
        for (const cJSON *e = added->child; e; e = e->next, i++) {
            char where[64];
            snprintf(where, sizeof where, "added_tokens[%zu]", i);
            int32_t id;
            if (get_id(cJSON_GetObjectItemCaseSensitive(e, "id"), &id)) {
                qw_errf(err, "tok_load: %s: %s.id: not an integer in [0, %d)", path, where, MAX_IDS);
                goto out;
            }
            if (parse_added(&b, e, id, where, err)) goto out;
        }
    }
    if (load_normalizer(t, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), path, err)) goto out;
    if (load_pretok(t, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), path, err)) goto out;
    const cJSON *dec = cJSON_GetObjectItemCaseSensitive(root, "decoder");
    if (!dec || !type_is(dec, "ByteLevel")) {
        qw_errf(err, "tok_load: %s: decoder.type: '%s' is not supported (only ByteLevel)", path,
                dec ? type_of(dec) : "(missing)");
        goto out;
    }
    rc = tok_build(t, &b, err);
out:
    strmap_free(&tmp);
    builder_free(&b);
    cJSON_Delete(root);
    return rc;
}

/* -------------------------------------------- vocab.json + merges.txt */

static int load_slow(qw_tok *t, const char *dir, qw_err *err) {
    char vpath[4096], mpath[4096], cpath[4096];
    snprintf(vpath, sizeof vpath, "%s/vocab.json", dir);
    snprintf(mpath, sizeof mpath, "%s/merges.txt", dir);
    snprintf(cpath, sizeof cpath, "%s/tokenizer_config.json", dir);
    cJSON *vj = parse_json(vpath, err), *cj = NULL;
    if (!vj) return -1;
    builder b = {.t = t, .file = vpath};
    tok_strmap tmp = {0};
    char *mbuf = NULL;
    size_t mlen;
    int rc = -1;
    if (!cJSON_IsObject(vj)) {
        qw_errf(err, "tok_load: %s: not a JSON object", vpath);
        goto out;
    }
    for (const cJSON *e = vj->child; e; e = e->next) {
        int32_t id;
        if (get_id(e, &id)) {
            qw_errf(err, "tok_load: %s: [\"%.64s\"]: id is not an integer in [0, %d)", vpath,
                    e->string ? e->string : "", MAX_IDS);
            goto out;
        }
        if (e->string && b_add_name(&b, e->string, strlen(e->string), id, err)) goto out;
    }
    if (b_index(&b, &tmp, err)) goto out;
    b.file = mpath;
    if (read_file(mpath, &mbuf, &mlen, err)) goto out;
    size_t rank = 0, lineno = 0;
    for (char *p = mbuf; p < mbuf + mlen;) {
        char *nl = memchr(p, '\n', (size_t)(mbuf + mlen - p));
        char *end = nl ? nl : mbuf + mlen;
        lineno++;
        size_t n = (size_t)(end - p);
        if (n && p[n - 1] == '\r') n--;
        if (n == 0 || (lineno == 1 && n >= 8 && !memcmp(p, "#version", 8))) {
            p = end + (nl ? 1 : 0);
            continue;
        }
        char *sp = memchr(p, ' ', n);
        if (!sp || memchr(sp + 1, ' ', n - (size_t)(sp + 1 - p))) {
            qw_errf(err, "tok_load: %s: line %zu: expected \"left right\"", mpath, lineno);
            goto out;
        }
        if (b_add_merge(&b, &tmp, p, (size_t)(sp - p), sp + 1, n - (size_t)(sp + 1 - p), rank, err)) goto out;
        rank++;
        p = end + (nl ? 1 : 0);
    }
    b.file = cpath;
    if (file_exists(cpath)) {
        cj = parse_json(cpath, err);
        if (!cj) goto out;
        const cJSON *atd = cJSON_GetObjectItemCaseSensitive(cj, "added_tokens_decoder");
        if (atd && !cJSON_IsNull(atd)) {
            if (!cJSON_IsObject(atd)) {
                qw_errf(err, "tok_load: %s: added_tokens_decoder: not an object", cpath);
                goto out;
            }
            for (const cJSON *e = atd->child; e; e = e->next) {
                char where[96], *endp;
                snprintf(where, sizeof where, "added_tokens_decoder[\"%.32s\"]", e->string ? e->string : "");
                errno = 0;
                long id = e->string ? strtol(e->string, &endp, 10) : -1;
                if (!e->string || errno || *endp || endp == e->string || id < 0 || id >= MAX_IDS) {
                    qw_errf(err, "tok_load: %s: %s: key is not a token id", cpath, where);
                    goto out;
                }
                if (parse_added(&b, e, (int32_t)id, where, err)) goto out;
            }
        }
    }
    t->nfc = 1;
    if (compile_regex(t, QWEN2_REGEX, strlen(QWEN2_REGEX), 0, vpath, err)) goto out;
    b.file = vpath;
    rc = tok_build(t, &b, err);
out:
    free(mbuf);
    strmap_free(&tmp);
    builder_free(&b);
    cJSON_Delete(vj);
    cJSON_Delete(cj);
    return rc;
}

/* ------------------------------------------------------------- GGUF */

/* llama.cpp's token types (llama_token_type / gguf.TokenType). */
enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER_DEFINED = 4, TT_UNUSED = 5, TT_BYTE = 6 };

/* tokenizer.ggml.* of a GGUF file, as llama.cpp's convert_hf_to_gguf.py
 * writes them from a Hugging Face tokenizer: tokens[i] is id i's spelling
 * (byte-level alphabet, like tokenizer.json's vocab) for NORMAL tokens and
 * the added token's content for CONTROL (special) and USER_DEFINED (not
 * special) ones; UNUSED entries ("[PADn]" filling the embedding's rows) are
 * no tokens. merges are "left right" in rank order. GGUF keeps no
 * lstrip / rstrip / single_word / normalized flags: llama.cpp matches added
 * tokens literally, i.e. all false, which is what Qwen's files have. */
static int load_gguf(qw_tok *t, const char *path, qw_err *err) {
    gguf_map g;
    if (gguf_open_meta(&g, path, err)) return qw_err_prefix(err, "tok_load");
    const gguf_file *f = &g.f;
    builder b = {.t = t, .file = path};
    tok_strmap tmp = {0};
    int rc = -1;
    const char *s;
    uint64_t sl;
    const gguf_kv *toks, *types = NULL, *merges;
    if (gguf_get_str(f, "tokenizer.ggml.model", 1, &s, &sl, err) < 0) goto out;
    if (sl != 4 || memcmp(s, "gpt2", 4)) {
        qw_errf(err, "tok_load: %s: tokenizer.ggml.model '%.*s' is not supported (only 'gpt2', byte-level BPE)", path,
                (int)(sl > 40 ? 40 : sl), s);
        goto out;
    }
    if (gguf_get_str(f, "tokenizer.ggml.pre", 1, &s, &sl, err) < 0) goto out;
    if (sl != 5 || memcmp(s, "qwen2", 5)) {
        qw_errf(err, "tok_load: %s: tokenizer.ggml.pre '%.*s' is not supported (only 'qwen2')", path,
                (int)(sl > 40 ? 40 : sl), s);
        goto out;
    }
    if (gguf_get_arr(f, "tokenizer.ggml.tokens", 1, GGUF_T_STRING, &toks, err) < 0 ||
        gguf_get_arr(f, "tokenizer.ggml.token_type", 0, GGUF_T_I32, &types, err) < 0 ||
        gguf_get_arr(f, "tokenizer.ggml.merges", 1, GGUF_T_STRING, &merges, err) < 0)
        goto out;
    if (toks->arr_n > MAX_IDS) {
        qw_errf(err, "tok_load: %s: tokenizer.ggml.tokens: %llu tokens (at most %d)", path,
                (unsigned long long)toks->arr_n, MAX_IDS);
        goto out;
    }
    if (types && types->arr_n != toks->arr_n) {
        qw_errf(err, "tok_load: %s: tokenizer.ggml.token_type has %llu entries for %llu tokens", path,
                (unsigned long long)types->arr_n, (unsigned long long)toks->arr_n);
        goto out;
    }
    const uint8_t *it = toks->arr;
    for (uint64_t i = 0; i < toks->arr_n; i++) {
        uint64_t len;
        const char *tok = gguf_arr_next_str(&it, &len);
        int64_t ty = types ? gguf_arr_int(types, i) : TT_NORMAL;
        if (ty == TT_UNUSED) continue;
        if (len == 0 || len > 65536 || memchr(tok, 0, (size_t)len)) {
            qw_errf(err, "tok_load: %s: tokenizer.ggml.tokens[%llu]: empty, longer than 64 KiB or containing NUL", path,
                    (unsigned long long)i);
            goto out;
        }
        if (ty == TT_NORMAL) {
            if (b_add_name(&b, tok, (size_t)len, (int32_t)i, err)) goto out;
        } else if (ty == TT_CONTROL || ty == TT_USER_DEFINED) {
            char *c = malloc((size_t)len + 1);
            if (!c) {
                qw_errf(err, "tok_load: %s: out of memory", path);
                goto out;
            }
            memcpy(c, tok, (size_t)len);
            c[len] = 0;
            int r = b_add_added(&b, c, (int32_t)i, ty == TT_CONTROL, 0, 0, 0, 0, err);
            free(c);
            if (r) goto out;
        } else {
            qw_errf(err, "tok_load: %s: tokenizer.ggml.token_type[%llu] = %lld is not supported (normal, control, "
                    "user-defined or unused)", path, (unsigned long long)i, (long long)ty);
            goto out;
        }
    }
    if (b_index(&b, &tmp, err)) goto out;
    it = merges->arr;
    for (uint64_t r = 0; r < merges->arr_n; r++) {
        uint64_t len;
        const char *m = gguf_arr_next_str(&it, &len);
        const char *sp = memchr(m, ' ', (size_t)len);
        if (!sp || memchr(sp + 1, ' ', (size_t)(m + len - sp - 1))) {
            qw_errf(err, "tok_load: %s: tokenizer.ggml.merges[%llu]: expected \"left right\"", path,
                    (unsigned long long)r);
            goto out;
        }
        if (b_add_merge(&b, &tmp, m, (size_t)(sp - m), sp + 1, (size_t)(m + len - sp - 1), (size_t)r, err)) goto out;
    }
    t->nfc = 1;
    if (compile_regex(t, QWEN2_REGEX, strlen(QWEN2_REGEX), 0, path, err)) goto out;
    s = NULL;
    if (gguf_get_str(f, "tokenizer.chat_template", 0, &s, &sl, err) < 0) goto out;
    if (s && set_template(t, s, (size_t)sl, path, err)) goto out;
    rc = tok_build(t, &b, err);
out:
    strmap_free(&tmp);
    builder_free(&b);
    gguf_close(&g);
    return rc;
}

/* ------------------------------------------------------------ public */

static int cmp_added(const void *a, const void *b) {
    const tok_added *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

int tok_load(qw_tok **out, const char *dir, qw_err *err) {
    *out = NULL;
    if (!dir) return qw_errf(err, "tok_load: no folder given");
    qw_tok *t = calloc(1, sizeof *t);
    if (!t) return qw_errf(err, "tok_load: out of memory");
    struct stat st;
    if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode)) {
        if (load_gguf(t, dir, err)) {
            tok_free(t);
            return -1;
        }
        if (t->n_added) qsort(t->added, t->n_added, sizeof *t->added, cmp_added);
        *out = t;
        return 0;
    }
    char path[4096];
    int n = snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    if (n < 0 || (size_t)n >= sizeof path - 32) {
        free(t);
        return qw_errf(err, "tok_load: %s: path too long", dir);
    }
    int rc;
    if (file_exists(path)) {
        rc = load_tokenizer_json(t, path, err);
    } else {
        char vpath[4096];
        snprintf(vpath, sizeof vpath, "%s/vocab.json", dir);
        char *gpath = NULL;
        if (file_exists(vpath)) {
            rc = load_slow(t, dir, err);
        } else if ((rc = gguf_dir_single(dir, &gpath, err)) > 0) {
            rc = load_gguf(t, gpath, err);
            free(gpath);
        } else {
            free(t);
            if (rc < 0) return qw_err_prefix(err, "tok_load");
            return qw_errf(err, "tok_load: %s: no tokenizer.json, vocab.json + merges.txt, nor .gguf file", dir);
        }
    }
    if (rc || (!t->chat_template && load_template_dir(t, dir, err))) {
        tok_free(t);
        return -1;
    }
    if (t->n_added) qsort(t->added, t->n_added, sizeof *t->added, cmp_added);
    *out = t;
    return 0;
}

void tok_free(qw_tok *t) {
    if (!t) return;
    free(t->flags);
    free(t->off);
    free(t->bytes);
    strmap_free(&t->names);
    free(t->name_pool);
    free(t->merges);
    for (size_t i = 0; i < t->n_added; i++) {
        if (t->added[i].mtext && t->added[i].mtext != t->added[i].text) free(t->added[i].mtext);
        free(t->added[i].text);
    }
    free(t->added);
    free(t->chat_template);
    if (t->re) pcre2_code_free(t->re);
    free(t->cache);
    if (t->cache_mu_init)
        for (int i = 0; i < TOK_CACHE_LOCKS; i++) pthread_mutex_destroy(&t->cache_mu[i]);
    free(t);
}

int tok_vocab_size(const qw_tok *t) { return t->n_ids; }

int32_t tok_token_id(const qw_tok *t, const char *s) {
    if (!s) return -1;
    return tok_strmap_get(&t->names, s, strlen(s));
}

const char *tok_token_bytes(const qw_tok *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n_ids || !(t->flags[id] & TOKF_EXISTS)) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = t->off[id + 1] - t->off[id];
    return t->bytes + t->off[id];
}

int tok_is_special(const qw_tok *t, int32_t id) {
    return id >= 0 && id < t->n_ids && (t->flags[id] & TOKF_SPECIAL) != 0;
}
