#include "kernels/kernels_impl.h"
int kernels_fill_qdot_kquant_avx2(qw_kernels *k) { (void)k; return 1; }
