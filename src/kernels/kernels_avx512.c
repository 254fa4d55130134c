#include "kernels/kernels_impl.h"
int kernels_fill_avx512(qw_kernels *k) { (void)k; return 0; }
