/* fuzz_gguf.c - the GGUF parser on arbitrary bytes; a file it accepts is also
 * loaded as a model and as a tokenizer (gguf_config, tensor checks, the GGUF
 * vocabulary and merges), from a file under /dev/shm (or $TMPDIR). */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "format/gguf.h"
#include "fuzz_common.h"
#include "model/model.h"

static char dir[128], path[160];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    qw_log_set_level(QW_LOG_QUIET);
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    snprintf(dir, sizeof dir, "%s/qwenc_fuzz_gguf_XXXXXX", base);
    if (!mkdtemp(dir)) return perror("mkdtemp"), 1;
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    gguf_file f;
    qw_err err;
    if (gguf_parse(&f, d, n, "fuzz.gguf", &err) != 0) return 0;
    for (uint64_t i = 0; i < f.n_tensors; i++) {
        (void)gguf_tensor_check(&f, &f.tensors[i], &err);
        FUZZ_ASSERT(f.tensors[i].data >= d && f.tensors[i].data + f.tensors[i].nbytes <= d + n,
                    "tensor %s outside the buffer", f.tensors[i].name);
    }
    gguf_free(&f);
    /* Accepted: the loaders that read metadata go next. */
    FILE *o = fopen(path, "wb");
    if (!o) return 0;
    fwrite(d, 1, n, o);
    fclose(o);
    qw_model *m = NULL;
    if (model_load(&m, path, &err) == 0) model_free(m);
    qw_tok *t = NULL;
    if (tok_load(&t, dir, &err) == 0) {
        int32_t *ids = NULL;
        size_t k = 0;
        if (tok_encode(t, "Hello, world! 123", 17, &ids, &k, &err) == 0) free(ids);
        tok_free(t);
    }
    unlink(path);
    return 0;
}
