/* scratch.c - the per-thread scratch of the prefill GEMMs (kernels_impl.h:
 * kernels_scratch). Thread-local static storage: each thread has its own
 * from its creation on, so a kernel call neither allocates nor puts a
 * 100-200 KiB frame on the caller's stack. */
#include "kernels/kernels_impl.h"

static _Thread_local _Alignas(64) unsigned char g_scratch[QW_SCRATCH_BYTES];

void *kernels_scratch(void) { return g_scratch; }
