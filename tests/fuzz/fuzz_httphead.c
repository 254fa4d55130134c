/* fuzz_httphead.c - the HTTP admission gate's request-head checks on
 * arbitrary bytes (the part of the HTTP path the gate runs before
 * libmicrohttpd; libmicrohttpd itself is a distro library). */
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "server/httphead.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    const char *b = (const char *)d;
    size_t end = httphead_end(b, n);
    FUZZ_ASSERT(end <= n, "end %zu past %zu", end, n);
    char why[160];
    int st = httphead_check(b, end ? end : n, why, sizeof why);
    FUZZ_ASSERT(st == 0 || st == 400 || st == 501, "status %d", st);
    FUZZ_ASSERT(st == 0 || why[0], "a refusal without a reason");
    return 0;
}
