/* dtype.c - sizes and names of the weight types (see kernels.h): element
 * types F32 / F16 / BF16 and the block type Q8_0 (GGML's block_q8_0). */
#include "kernels/kernels.h"

int qw_dtype_size(qw_dtype t) {
    switch (t) {
    case QW_F32: return 4;
    case QW_F16: return 2;
    case QW_BF16: return 2;
    default: return 0;
    }
}

int qw_dtype_block(qw_dtype t) { return t == QW_Q8_0 ? QW_Q8_0_BLOCK : 1; }

int64_t qw_dtype_row_bytes(qw_dtype t, int64_t cols) {
    if (cols < 0) return -1;
    if (t == QW_Q8_0) return cols % QW_Q8_0_BLOCK ? -1 : cols / QW_Q8_0_BLOCK * QW_Q8_0_BYTES;
    int es = qw_dtype_size(t);
    return es ? cols * es : -1;
}

const char *qw_dtype_name(qw_dtype t) {
    switch (t) {
    case QW_F32: return "F32";
    case QW_F16: return "F16";
    case QW_BF16: return "BF16";
    case QW_Q8_0: return "Q8_0";
    default: return "?";
    }
}
