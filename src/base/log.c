/* log.c - see log.h. */
#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int g_level = -1;

static int level_from_env(void) {
    const char *s = getenv("QWENC_LOG");
    if (!s) return QW_LOG_INFO;
    if (!strcmp(s, "debug")) return QW_LOG_DEBUG;
    if (!strcmp(s, "warn")) return QW_LOG_WARN;
    if (!strcmp(s, "error")) return QW_LOG_ERROR;
    if (!strcmp(s, "quiet")) return QW_LOG_QUIET;
    return QW_LOG_INFO;
}

void qw_log_set_level(int level) { g_level = level; }

int qw_log_level(void) {
    if (g_level < 0) g_level = level_from_env();
    return g_level;
}

void qw_log(int level, const char *fmt, ...) {
    if (level < qw_log_level()) return;
    static const char *names[] = {"debug", "info", "warn", "error"};
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "qwenc: %s: %s\n", names[level < 4 ? level : 3], line);
}

double qw_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
