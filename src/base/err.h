/* err.h - error reporting for library code.
 *
 * Library functions never exit or abort on bad input. They return a negative
 * status and fill a qw_err with a one-line message that names the function,
 * the file and the field at fault. Only src/cli/ turns that into an exit code.
 */
#ifndef QW_ERR_H
#define QW_ERR_H

#include <stddef.h>

typedef struct qw_err {
    char msg[1024];
} qw_err;

/* Formats msg into e (if e is non-NULL) and returns -1, so callers can write
 * `return qw_errf(e, "safetensors: %s: header too large", path);`. */
int qw_errf(qw_err *e, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Prepends "prefix: " to an existing message; returns -1. */
int qw_err_prefix(qw_err *e, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif
