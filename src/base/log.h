/* log.h - leveled logging to stderr.
 *
 * QWENC_LOG=debug|info|warn|error|quiet sets the level (default info).
 * Thread safe: each call writes one line with a single fprintf.
 */
#ifndef QW_LOG_H
#define QW_LOG_H

enum { QW_LOG_DEBUG = 0, QW_LOG_INFO = 1, QW_LOG_WARN = 2, QW_LOG_ERROR = 3, QW_LOG_QUIET = 4 };

void qw_log_set_level(int level);
int qw_log_level(void);
void qw_log(int level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#define LOG_DEBUG(...) qw_log(QW_LOG_DEBUG, __VA_ARGS__)
#define LOG_INFO(...) qw_log(QW_LOG_INFO, __VA_ARGS__)
#define LOG_WARN(...) qw_log(QW_LOG_WARN, __VA_ARGS__)
#define LOG_ERROR(...) qw_log(QW_LOG_ERROR, __VA_ARGS__)

/* Monotonic clock in seconds. */
double qw_now(void);

#endif
