/* fuzz_api.c - every API endpoint's body parser on arbitrary bytes. First
 * byte: which endpoint (completions, chat completions, tokenize, detokenize).
 * What a parser accepts must be strict JSON (jansson agrees) and in range. */
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "server/api.h"
#include "server/jsonstrict.h"

static api_limits lim;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    qw_log_set_level(QW_LOG_QUIET);
    lim.tok = fuzz_tokenizer();
    lim.vocab = tok_vocab_size(lim.tok);
    lim.n_ctx = 256;
    lim.sampling = sampling_default();
    lim.completion_max_tokens = 512;
    lim.completion_default = 50;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    if (n < 1) return 0;
    int which = d[0] % 4;
    const char *body = (const char *)d + 1;
    size_t len = n - 1;
    api_error e;
    memset(&e, 0, sizeof e);
    int rc;
    if (which < 2) {
        api_req r;
        rc = api_parse(which ? API_CHAT : API_COMPLETION, body, len, &lim, &r, &e);
        if (rc == 0) {
            FUZZ_ASSERT(r.n_prompt > 0 && r.n_prompt < lim.n_ctx, "n_prompt %d", r.n_prompt);
            for (int i = 0; i < r.n_prompt; i++) FUZZ_ASSERT(r.prompt[i] >= 0 && r.prompt[i] < lim.vocab, "id");
            FUZZ_ASSERT(r.max_tokens >= 0, "max_tokens %d", r.max_tokens);
            api_req_free(&r);
        }
    } else if (which == 2) {
        char *text = NULL;
        size_t tl = 0;
        rc = api_parse_tokenize(body, len, &text, &tl, &e);
        if (rc == 0) {
            FUZZ_ASSERT(strlen(text) == tl, "a string was cut at a NUL");
            free(text);
        }
    } else {
        int32_t *ids = NULL;
        int k = 0;
        rc = api_parse_detokenize(body, len, lim.vocab, &ids, &k, &e);
        if (rc == 0)
            for (int i = 0; i < k; i++) FUZZ_ASSERT(ids[i] >= 0 && ids[i] < lim.vocab, "id %d", ids[i]);
        free(ids);
    }
    if (rc == 0) {
        api_error e2;
        FUZZ_ASSERT(json_strict_check(body, len, &e2) == 0, "accepted a body jansson refuses");
    } else {
        FUZZ_ASSERT(e.status >= 400 && e.status < 600 && e.message[0], "error without status or message");
        char *j = api_error_json(&e);
        FUZZ_ASSERT(j != NULL, "api_error_json");
        free(j);
    }
    return 0;
}
