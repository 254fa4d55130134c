/* stdinserv.h - the stdin server (the seed's `--server` with no path).
 *
 * Protocol: one request per input line, space-separated token ids, then
 * '|' and max_tokens:
 *     151644 8948 198 2610 525|20
 * and one output line per request: the generated ids, space-separated (EOS
 * not included; an empty line if the model stopped at once). A malformed
 * line gets one line starting with "error: " and the server reads on; blank
 * lines are skipped. At end of input the server finishes the request in
 * hand and returns 0. Requests are served one at a time, in order. Sampling
 * is greedy unless the command line gave sampling flags. The request itself
 * is request.h's; this module moves lines.
 */
#ifndef QW_STDINSERV_H
#define QW_STDINSERV_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "server/api.h"
#include "server/engine.h"

/* The line parser, stdin_parse_line(), is in api.h with the other protocols. */

/* Serve lines from in_fd to out until end of input (returns 0) or until
 * stop_fd becomes readable (the running request is cancelled and answered
 * "error: the server is shutting down; the answer was cut after N tokens:
 * IDS"; returns 0).
 * Returns 1 on a read error. */
int stdinserv_run(qw_engine *e, int in_fd, FILE *out, int stop_fd);

#endif
