/* dtype.c - sizes and names of the weight types, read from the one traits
 * table (kernels.h: qw_type), checked against invalid values here so that
 * callers with a type from a file get -1 / "?" rather than a wild read. */
#include "kernels/kernels.h"

static int valid(qw_dtype t) { return (int)t >= 0 && t < QW_DTYPE_COUNT; }

int qw_dtype_quantized(qw_dtype t) { return valid(t) && qw_type(t)->block > 1; }

int qw_dtype_size(qw_dtype t) { return valid(t) && qw_type(t)->block == 1 ? qw_type(t)->bytes : 0; }

int qw_dtype_block(qw_dtype t) { return valid(t) ? qw_type(t)->block : 1; }

int64_t qw_dtype_row_bytes(qw_dtype t, int64_t cols) {
    if (cols < 0 || !valid(t)) return -1;
    int b = qw_type(t)->block;
    return cols % b ? -1 : cols / b * qw_type(t)->bytes;
}

const char *qw_dtype_name(qw_dtype t) { return valid(t) ? qw_type(t)->name : "?"; }
