/* dtype.c - sizes and names of the weight types (see kernels.h): element
 * types F32 / F16 / BF16 and GGML's block types (Q8_0, Q4_0, Q4_1, Q5_0,
 * Q5_1, Q4_K, Q5_K, Q6_K). */
#include "kernels/kernels.h"

static const struct {
    const char *name;
    int size;  /* bytes per element (element types) or per block */
    int block; /* weights per block: 1 for element types */
} k_types[QW_DTYPE_COUNT] = {
    [QW_F32] = {"F32", 4, 1},      [QW_F16] = {"F16", 2, 1},      [QW_BF16] = {"BF16", 2, 1},
    [QW_Q8_0] = {"Q8_0", 34, 32},  [QW_Q4_0] = {"Q4_0", 18, 32},  [QW_Q4_1] = {"Q4_1", 20, 32},
    [QW_Q5_0] = {"Q5_0", 22, 32},  [QW_Q5_1] = {"Q5_1", 24, 32},  [QW_Q4_K] = {"Q4_K", 144, 256},
    [QW_Q5_K] = {"Q5_K", 176, 256}, [QW_Q6_K] = {"Q6_K", 210, 256},
};

static int valid(qw_dtype t) { return (int)t >= 0 && t < QW_DTYPE_COUNT; }

int qw_dtype_quantized(qw_dtype t) { return valid(t) && k_types[t].block > 1; }

int qw_dtype_size(qw_dtype t) { return valid(t) && k_types[t].block == 1 ? k_types[t].size : 0; }

int qw_dtype_block(qw_dtype t) { return valid(t) ? k_types[t].block : 1; }

int64_t qw_dtype_row_bytes(qw_dtype t, int64_t cols) {
    if (cols < 0 || !valid(t)) return -1;
    int b = k_types[t].block;
    return cols % b ? -1 : cols / b * k_types[t].size;
}

const char *qw_dtype_name(qw_dtype t) { return valid(t) ? k_types[t].name : "?"; }
