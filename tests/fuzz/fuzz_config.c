/* fuzz_config.c - config.json and generation_config.json text on arbitrary
 * bytes (first byte: which one). Accepted values must be in range. */
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    if (n < 1) return 0;
    qw_config c;
    qw_err err;
    memset(&c, 0, sizeof c);
    if (d[0] & 1) {
        (void)config_parse(&c, (const char *)d + 1, n - 1, 1, "generation_config.json", &err);
        return 0;
    }
    if (config_parse(&c, (const char *)d + 1, n - 1, 0, "config.json", &err) != 0) return 0;
    FUZZ_ASSERT(c.vocab > 0 && c.n_layers > 0 && c.hidden > 0 && c.n_heads > 0 && c.n_kv_heads > 0, "sizes");
    FUZZ_ASSERT(c.n_heads % c.n_kv_heads == 0, "heads %d kv %d", c.n_heads, c.n_kv_heads);
    return 0;
}
