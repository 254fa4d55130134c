/* fuzz_httphead.c - the HTTP admission gate's request-head checks, its
 * reading of the body's framing and its chunked-body scanner on arbitrary
 * bytes (the part of the HTTP path the gate runs before libmicrohttpd;
 * libmicrohttpd itself is a distro library). */
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
    if (!end || st) return 0;
    httphead_framing f;
    httphead_frame(b, end, &f);
    /* the body, scanned whole and in two pieces: the same answer */
    httpchunk c1 = {0}, c2 = {0};
    size_t u1 = 0, ua = 0, ub = 0, rest = n - end, half = rest / 2;
    int r1 = httpchunk_scan(&c1, b + end, rest, 4096, &u1);
    int r2 = httpchunk_scan(&c2, b + end, half, 4096, &ua);
    if (r2 == HTTPCHUNK_MORE) r2 = httpchunk_scan(&c2, b + end + half, rest - half, 4096, &ub);
    FUZZ_ASSERT(u1 <= rest && ua + ub <= rest, "used past the input");
    FUZZ_ASSERT(r1 == r2 && (r1 == HTTPCHUNK_MORE || u1 == ua + ub), "pieces change the scan: %d vs %d", r1, r2);
    FUZZ_ASSERT(c1.total <= 4096, "data past the limit: %llu", c1.total);
    return 0;
}
