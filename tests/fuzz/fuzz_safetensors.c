/* fuzz_safetensors.c - the safetensors header parser on arbitrary bytes:
 * whatever it accepts must lie inside the buffer and add up. */
#include <stdint.h>
#include <string.h>

#include "format/safetensors.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    st_file f;
    qw_err err;
    if (st_parse(&f, d, n, "fuzz.safetensors", &err) != 0) return 0;
    for (int i = 0; i < f.n; i++) {
        const st_tensor *t = &f.tensors[i];
        FUZZ_ASSERT(t->data >= d && t->data + t->nbytes <= d + n, "tensor %s outside the buffer", t->name);
        FUZZ_ASSERT((uint64_t)t->numel * (uint64_t)t->elem_size == t->nbytes, "tensor %s: %lld x %d != %llu",
                    t->name, (long long)t->numel, t->elem_size, (unsigned long long)t->nbytes);
        FUZZ_ASSERT(st_find(&f, t->name) != NULL, "tensor %s not found by name", t->name);
    }
    st_file_free(&f);
    return 0;
}
