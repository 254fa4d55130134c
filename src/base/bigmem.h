/* bigmem.h - large, long-lived buffers (the repacked weights) in memory the
 * kernel may back with 2 MiB pages.
 *
 * Why: a decode step streams every weight once, hundreds of MB per token.
 * In 4 KiB pages that is a TLB miss every 4 KiB and, on x86, a hardware
 * prefetcher that stops at each page boundary; in 2 MiB pages neither.
 * Measured on the 1-row bf16 decode stream (docs/PERFORMANCE.md). Linux's
 * transparent huge pages are often in "madvise" mode (enabled and defrag),
 * so the buffer is asked for explicitly: an anonymous mapping aligned to
 * 2 MiB with MADV_HUGEPAGE. Where that does not exist (macOS, a kernel
 * without THP) it is plain anonymous memory: the same contract, no huge
 * pages. QWENC_HUGEPAGES=0 turns the advice off.
 */
#ifndef QW_BIGMEM_H
#define QW_BIGMEM_H

#include <stddef.h>

/* A zero-filled buffer of at least n bytes, 2 MiB aligned where huge pages
 * are asked for (at least 64-byte aligned always), or NULL. *huge (may be
 * NULL) says whether MADV_HUGEPAGE was accepted. Free with bigmem_free(p, n). */
void *bigmem_alloc(size_t n, int *huge);
void bigmem_free(void *p, size_t n);

#endif
