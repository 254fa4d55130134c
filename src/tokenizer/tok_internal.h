/* tok_internal.h - the tokenizer's private structures, shared by the files of
 * src/tokenizer/ only (load.c, encode.c, bpe.c, decode.c, utf8.c). */
#ifndef QW_TOK_INTERNAL_H
#define QW_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"

/* Token flags (qw_tok.flags[id]). */
enum {
    TOKF_EXISTS = 1,  /* the id has a token */
    TOKF_SPECIAL = 2, /* added token with "special": true */
    TOKF_ADDED = 4,   /* added token */
};

/* An added token, matched on the text before the BPE model sees it. */
typedef struct tok_added {
    char *text;      /* content, UTF-8 */
    size_t len;
    char *mtext;     /* what is matched: text, or NFC(text) if normalized (== text or owned) */
    size_t mlen;
    int32_t id;
    uint8_t special, lstrip, rstrip, single_word, normalized;
} tok_added;

/* String -> id, open addressing; keys point into the owner's storage. */
typedef struct tok_strmap {
    uint32_t *slot;   /* [cap] index+1 into keys, 0 = empty */
    const char **key; /* [n] */
    uint32_t *klen;   /* [n] */
    int32_t *val;     /* [n] */
    size_t n, cap_keys, cap;
} tok_strmap;

/* (left id, right id) -> (rank, merged id). */
typedef struct tok_merge {
    uint64_t key; /* (uint64)left << 32 | right; UINT64_MAX = empty */
    int32_t rank;
    int32_t id;
} tok_merge;

/* Word cache: direct-mapped slots, striped locks. Words up to CACHE_WMAX
 * bytes that encode to up to CACHE_IMAX ids are kept. */
#define TOK_CACHE_BITS 16
#define TOK_CACHE_LOCKS 64
#define TOK_CACHE_WMAX 54
#define TOK_CACHE_IMAX 16
typedef struct tok_cache_slot {
    uint64_t hash;
    uint8_t wlen, nid;
    char w[TOK_CACHE_WMAX];
    int32_t ids[TOK_CACHE_IMAX];
} tok_cache_slot;

struct qw_tok {
    int32_t n_ids;      /* largest id + 1 */
    uint8_t *flags;     /* [n_ids] TOKF_* */
    uint32_t *off;      /* [n_ids + 1] byte offsets into bytes: token id's decoded bytes */
    char *bytes;        /* decoded bytes of every token */
    size_t max_token_len;

    tok_strmap names;   /* token spelling (byte-level form / added content) -> id */
    char *name_pool;    /* storage for the spellings */
    size_t name_pool_len;

    int32_t byte_id[256]; /* id of the one-byte token for each byte; -1 none */

    tok_merge *merges;  /* [merge_cap] hash table */
    size_t merge_cap;   /* power of 2 */
    int merge_shift;

    tok_added *added;   /* [n_added] sorted by id */
    size_t n_added;
    uint8_t added_first[256]; /* 1 if some non-normalized added token starts with the byte */
    uint8_t added_first_norm[256];
    int has_norm_added;

    int nfc;            /* normalizer is NFC (else none) */
    pcre2_code *re;     /* pre-tokenizer Split regex (NULL: whole text is one piece) */
    int re_jit;         /* JIT compiled */

    char *chat_template;        /* the model's chat template text (NULL: none) */
    size_t chat_template_len;
    qw_chat_family chat_family; /* chat_template_family(chat_template) */

    tok_cache_slot *cache; /* [1 << TOK_CACHE_BITS] */
    pthread_mutex_t cache_mu[TOK_CACHE_LOCKS];
    int cache_mu_init;
};

/* ---- utf8.c ---- */
/* Length of the well-formed UTF-8 sequence at s[0..n) (1..4), or 0 if the
 * bytes there are not one; *cp receives the code point. */
int utf8_decode1(const unsigned char *s, size_t n, uint32_t *cp);
/* Length of the maximal subpart of an ill-formed sequence at s (>= 1): the
 * bytes that are replaced by one U+FFFD (Unicode 3.9, as Python and Rust). */
size_t utf8_invalid_len(const unsigned char *s, size_t n);
/* 1 if s[0..n) is well-formed UTF-8. */
int utf8_valid(const char *s, size_t n);
/* Copy s[0..n) into *out with ill-formed parts replaced by U+FFFD.
 * *out is malloc'd (NUL-terminated); returns -1 on allocation failure. */
int utf8_sanitize(const char *s, size_t n, char **out, size_t *out_len);
/* Appends the UTF-8 of cp to buf (4 bytes room needed); returns bytes written. */
int utf8_put(char *buf, uint32_t cp);

/* ---- encode.c ---- */
/* NFC of valid UTF-8 s[0..n) as `tokenizers` applies it; *out malloc'd. */
int tok_nfc(const char *s, size_t n, char **out, size_t *out_len);

/* ---- bpe.c ---- */
/* Per-call scratch for the BPE of one word; grown as needed, freed by the caller. */
typedef struct bpe_scratch {
    void *sym;        /* symbols */
    void *heap;       /* merge candidates */
    size_t cap;       /* capacity of both, in entries */
} bpe_scratch;

/* Ids growing buffer. */
typedef struct tok_ids {
    int32_t *v;
    size_t n, cap;
} tok_ids;
int tok_ids_push(tok_ids *a, int32_t id);

/* BPE of one pre-token (raw bytes), ids appended to out. Uses the word cache. */
int bpe_word(const qw_tok *t, const unsigned char *w, size_t n, bpe_scratch *sc, tok_ids *out);
void bpe_scratch_free(bpe_scratch *sc);
/* Merge lookup: rank or -1; *id the merged token. */
int32_t tok_merge_find(const qw_tok *t, int32_t a, int32_t b, int32_t *id);

/* ---- load.c ---- */
int tok_strmap_put(tok_strmap *m, const char *key, uint32_t klen, int32_t val);
int32_t tok_strmap_get(const tok_strmap *m, const char *key, size_t klen);

#endif
