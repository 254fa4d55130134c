/* err.c - see err.h. */
#include "base/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int qw_errf(qw_err *e, const char *fmt, ...) {
    if (!e) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return -1;
}

int qw_err_prefix(qw_err *e, const char *fmt, ...) {
    if (!e) return -1;
    char pre[512], old[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    snprintf(e->msg, sizeof e->msg, "%.400s: %.600s", pre, old);
    return -1;
}
