/* mode_http.c - `qwenc MODEL --http PORT`: the HTTP server (src/server/http.h).
 *
 * Starts listening first (so /health answers 503 while the model loads),
 * loads the engine, prints "qwenc: listening on http://HOST:PORT" on stderr
 * (--http 0 picks a free port; scripts read the port from this line), then
 * waits for SIGINT or SIGTERM. Shutdown: stop accepting, give running
 * requests up to 3 s to finish, cancel the rest, exit 0.
 */
#include <signal.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/log.h"
#include "cli/cli.h"
#include "server/engine.h"
#include "server/http.h"


/* The model id clients see: --alias, else the repo id when MODEL named a
 * model in the Hugging Face cache (its folder is a commit hash), else NULL
 * (the engine takes the GGUF's general.name or the folder name). */
static const char *served_name(const qw_opts *o) {
    struct stat st;
    if (o->alias) return o->alias;
    if (o->model && stat(o->model, &st) != 0) return o->model;
    return NULL;
}

int mode_http(const qw_opts *o) {
    /* Signals are taken by sigwait() below; block them before any thread
     * starts so that every thread inherits the mask. */
    sigset_t set;
    cli_block_stop_signals(&set);
    cli_server_malloc_limits();

    char *dir = cli_model_dir(o->model);
    if (!dir) return 1;
    qw_err err;
    qw_http_cfg hc = {
        .host = o->host,
        .port = o->http_port < 0 ? 0 : o->http_port,
        .api_key = o->api_key,
        .cors = o->cors,
        .max_body = o->max_body,
        .no_webui = o->no_webui,
        .max_conns = o->max_conns,
        .header_timeout = o->header_timeout,
    };
    qw_http *h = http_start(&hc, &err);
    if (!h) {
        fprintf(stderr, "qwenc: %s\n", err.msg);
        free(dir);
        return 1;
    }
    qw_engine e;
    qw_engine_opts eo;
    cli_engine_opts(o, dir, &eo);
    eo.need_tokenizer = 1;
    eo.model_id = served_name(o);
    eo.any_model = o->any_model;
    if (cli_engine_open(&e, o, &eo) != 0) {
        http_stop(h);
        free(dir);
        return 1;
    }
    http_set_engine(h, &e);
    /* (engine_open has already warned loudly when the weights are random) */
    cli_info("qwenc: listening on %s\n", http_url(h));
    fflush(stderr);

    cli_wait_stop_signal(&set);
    http_quiesce(h);
    sched_stop(e.sched, o->drain_s); /* --drain: running requests finish within this */
    http_stop(h);
    engine_close(&e, 0);
    free(dir);
    return 0;
}
