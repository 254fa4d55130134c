/* mode_socket.c - `qwenc MODEL --server PATH`: the Unix socket server
 * (protocol in src/server/sockserv.h). Runs until SIGINT or SIGTERM, then
 * stops accepting, gives running requests up to 3 s, removes the socket
 * file and exits 0. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "server/engine.h"
#include "server/sockserv.h"

#define GRACE_S 3.0

int mode_socket(const qw_opts *o) {
    sigset_t set;
    cli_block_stop_signals(&set);
    cli_server_malloc_limits();

    char *dir = cli_model_dir(o->model);
    if (!dir) return 1;
    qw_err err;
    qw_engine e;
    qw_sampling greedy = sampling_default();
    qw_engine_opts eo;
    cli_engine_opts(o, dir, &eo);
    if (!eo.sampling) eo.sampling = &greedy; /* without sampling flags: greedy, as the seed */
    if (cli_engine_open(&e, o, &eo) != 0) {
        free(dir);
        return 1;
    }
    qw_sockserv *s = sockserv_start(o->socket_path, &e, &err);
    if (!s) {
        fprintf(stderr, "qwenc: %s\n", err.msg);
        engine_close(&e, 0);
        free(dir);
        return 1;
    }
    sockserv_set_limits(s, o->max_conns, o->header_timeout);
    cli_info("qwenc: listening on unix:%s\n", o->socket_path);
    fflush(stderr);
    cli_wait_stop_signal(&set);
    sockserv_quiesce(s);
    sched_stop(e.sched, GRACE_S);
    sockserv_stop(s);
    engine_close(&e, 0);
    free(dir);
    return 0;
}
