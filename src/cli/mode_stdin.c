/* mode_stdin.c - `qwenc MODEL --server`: the stdin server (protocol in
 * src/server/stdinserv.h). Exits 0 at end of input, or on SIGINT/SIGTERM
 * (the request in hand is cancelled). */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/cli.h"
#include "server/engine.h"
#include "server/stdinserv.h"

static sigset_t g_set;
static int g_stop_pipe[2] = {-1, -1};

/* Turns SIGINT/SIGTERM into a readable byte on the stop pipe. */
static void *signal_main(void *arg) {
    (void)arg;
    int sig;
    if (sigwait(&g_set, &sig) == 0) {
        ssize_t w = write(g_stop_pipe[1], "x", 1);
        (void)w;
    }
    return NULL;
}

int mode_stdin(const qw_opts *o) {
    cli_block_stop_signals(&g_set);

    char *dir = cli_model_dir(o->model);
    if (!dir) return 1;
    if (pipe(g_stop_pipe) != 0) {
        perror("qwenc: pipe");
        free(dir);
        return 1;
    }
    pthread_t th;
    if (pthread_create(&th, NULL, signal_main, NULL) != 0) {
        fprintf(stderr, "qwenc: cannot start the signal thread\n");
        free(dir);
        return 1;
    }
    pthread_detach(th);
    qw_engine e;
    qw_sampling greedy = sampling_default();
    qw_engine_opts eo;
    cli_engine_opts(o, dir, &eo);
    eo.parallel = 1;
    eo.queue = 1;
    if (!eo.sampling) eo.sampling = &greedy; /* without sampling flags: greedy, as the seed */
    if (cli_engine_open(&e, o, &eo) != 0) {
        free(dir);
        return 1;
    }
    cli_info("qwenc: ready: one request per line, 'IDS|MAX_TOKENS'\n");
    int rc = stdinserv_run(&e, 0, stdout, g_stop_pipe[0]);
    engine_close(&e, 0);
    free(dir);
    return rc;
}
