#include "kernels/kernels_impl.h"
int kernels_fill_neon(qw_kernels *k) { (void)k; return 0; }
