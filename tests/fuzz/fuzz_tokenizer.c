/* fuzz_tokenizer.c - the Qwen2.5 tokenizer on arbitrary bytes: encode any
 * text (valid UTF-8 or not), decode any ids, and the streaming decoder, whose
 * concatenated output must equal tok_decode() of the same ids (tokenizer.h
 * promises it). First byte: mode and skip_special. */
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"

static qw_tok *tok;
static qw_tok_stream *stream[2];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    qw_log_set_level(QW_LOG_QUIET);
    tok = fuzz_tokenizer();
    stream[0] = tok_stream_new(tok, 0);
    stream[1] = tok_stream_new(tok, 1);
    return 0;
}

static void decode_both(const int32_t *ids, size_t n, int skip) {
    char *whole = NULL;
    size_t wl = 0;
    qw_err err;
    if (tok_decode(tok, ids, n, skip, &whole, &wl, &err) != 0) return;
    qw_tok_stream *s = stream[skip];
    tok_stream_reset(s);
    size_t cl = 0;
    int same = 1;
    for (size_t i = 0; i <= n; i++) {
        size_t l = 0;
        const char *p = i < n ? tok_stream_feed(s, ids[i], &l) : tok_stream_flush(s, &l);
        if (cl + l > wl || memcmp(whole + cl, p, l) != 0) same = 0;
        else cl += l;
        if (!same) break;
    }
    FUZZ_ASSERT(same && cl == wl, "stream output differs from tok_decode (%zu of %zu bytes match)", cl, wl);
    free(whole);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    if (n < 1) return 0;
    int mode = d[0] & 1, skip = (d[0] >> 1) & 1;
    d++;
    n--;
    qw_err err;
    if (mode == 0) {
        /* text -> ids -> text: valid UTF-8 must come back byte for byte */
        int32_t *ids = NULL;
        size_t k = 0;
        if (tok_encode(tok, (const char *)d, n, &ids, &k, &err) != 0) return 0;
        int vocab = tok_vocab_size(tok);
        for (size_t i = 0; i < k; i++) FUZZ_ASSERT(ids[i] >= 0 && ids[i] < vocab, "id %d", ids[i]);
        decode_both(ids, k, skip);
        free(ids);
    } else {
        /* arbitrary ids (out-of-range ones included: skipped, never read) */
        size_t k = n / 4;
        int32_t *ids = malloc((k ? k : 1) * sizeof *ids);
        memcpy(ids, d, k * 4);
        int vocab = tok_vocab_size(tok);
        for (size_t i = 0; i < k; i++)
            if (ids[i] < -2 || ids[i] > vocab + 2) ids[i] = (int32_t)((uint32_t)ids[i] % (uint32_t)(vocab + 3)) - 1;
        decode_both(ids, k, skip);
        free(ids);
    }
    return 0;
}
