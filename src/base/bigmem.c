/* bigmem.c - see bigmem.h. */
#include "base/bigmem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#ifndef MAP_ANONYMOUS
#define MAP_ANONYMOUS MAP_ANON
#endif

enum { HUGE_PAGE = 2 << 20 };

static int huge_wanted(void) {
    const char *e = getenv("QWENC_HUGEPAGES");
    return !(e && !strcmp(e, "0"));
}

/* The mapping is n rounded up to 2 MiB, placed on a 2 MiB boundary: map one
 * huge page more, then unmap the unaligned head and the tail, so that
 * bigmem_free can unmap exactly [p, p + round(n)). */
static size_t rounded(size_t n) { return (n + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE; }

void *bigmem_alloc(size_t n, int *huge) {
    if (huge) *huge = 0;
    if (n == 0) return NULL;
    size_t len = rounded(n), span = len + HUGE_PAGE;
    uint8_t *raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    uint8_t *p = (uint8_t *)(((uintptr_t)raw + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE);
    if (p > raw) munmap(raw, (size_t)(p - raw));
    if (raw + span > p + len) munmap(p + len, (size_t)(raw + span - (p + len)));
#ifdef MADV_HUGEPAGE
    if (huge_wanted() && madvise(p, len, MADV_HUGEPAGE) == 0 && huge) *huge = 1;
#endif
    return p;
}

void bigmem_free(void *p, size_t n) {
    if (p && n) munmap(p, rounded(n));
}
