/* fuzz_stopstr.c - the stop-string matcher of streamed output. Input: up to
 * 4 stop strings and the text, separated by 0xff bytes (the last piece is the
 * text); each text byte's low bits also pick the chunk sizes it is fed in.
 * Properties: without a hit the output is the whole text; with one, it is the
 * text before the stop string, which the output never contains. */
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "server/stopstr.h"

static const char *find(const char *h, size_t hl, const char *n, size_t nl) {
    if (nl == 0 || nl > hl) return NULL;
    for (size_t i = 0; i + nl <= hl; i++)
        if (!memcmp(h + i, n, nl)) return h + i;
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    char *buf = malloc(n + 1);
    memcpy(buf, d, n);
    buf[n] = 0;
    char *stops[4];
    int ns = 0;
    char *p = buf, *end = buf + n;
    while (ns < 4) {
        char *sep = memchr(p, 0xff, (size_t)(end - p));
        if (!sep) break;
        *sep = 0;
        stops[ns++] = p;
        p = sep + 1;
    }
    const char *text = p;
    size_t tl = (size_t)(end - p);
    qw_stopstr s;
    stopstr_init(&s, (const char *const *)stops, ns);
    char *outall = malloc(tl + 1);
    size_t ol = 0;
    size_t i = 0;
    while (i < tl && !s.hit) {
        size_t chunk = 1 + ((unsigned char)text[i] % 7);
        if (chunk > tl - i) chunk = tl - i;
        const char *o;
        size_t l;
        FUZZ_ASSERT(stopstr_feed(&s, text + i, chunk, &o, &l) == 0, "feed failed");
        FUZZ_ASSERT(ol + l <= tl, "released more than was fed");
        memcpy(outall + ol, o, l);
        ol += l;
        i += chunk;
    }
    if (!s.hit) {
        const char *o;
        size_t l;
        stopstr_flush(&s, &o, &l);
        FUZZ_ASSERT(ol + l <= tl, "flush released more than was fed");
        memcpy(outall + ol, o, l);
        ol += l;
    }
    FUZZ_ASSERT(!memcmp(outall, text, ol), "the output is not a prefix of the text");
    if (!s.hit) {
        FUZZ_ASSERT(ol == tl, "no stop string hit, but %zu of %zu bytes came out", ol, tl);
        for (int k = 0; k < ns; k++)
            FUZZ_ASSERT(!find(text, tl, stops[k], strlen(stops[k])), "stop %d is in the text but missed", k);
    } else {
        const char *st = stops[s.hit_index];
        FUZZ_ASSERT(!strncmp(text + ol, st, strlen(st)), "the text after the output is not stop %d", s.hit_index);
        for (int k = 0; k < ns; k++)
            FUZZ_ASSERT(!find(outall, ol, stops[k], strlen(stops[k])), "stop %d leaked into the output", k);
    }
    stopstr_free(&s);
    free(outall);
    free(buf);
    return 0;
}
