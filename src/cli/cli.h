/* cli.h - the command line: options parsed once, one function per mode.
 *
 * main.c parses argv into qw_opts and calls the mode; each mode lives in its
 * own file (mode_*.c) and returns the process exit status. Only src/cli/
 * decides exit codes: 0 success, 1 runtime failure, 2 usage error.
 */
#ifndef QW_CLI_H
#define QW_CLI_H

#include <stdint.h>
#include <signal.h>
#include <stdio.h>

#include "sample/sampler.h"

struct qw_model;

/* The modes of a model command, as bits (an option's scope is a set of them). */
enum {
    M_TOKENS = 1 << 0,     /* token ids in, ids out (the seed's form) */
    M_PROMPT = 1 << 1,     /* --prompt, qwenc run MODEL PROMPT */
    M_TOKENIZE = 1 << 2,   /* --tokenize */
    M_DETOKENIZE = 1 << 3, /* --detokenize */
    M_HTTP = 1 << 4,       /* --http PORT, qwenc serve */
    M_SOCKET = 1 << 5,     /* --server PATH */
    M_STDIN = 1 << 6,      /* --server */
    M_CHAT = 1 << 7,       /* qwenc chat, qwenc run MODEL */
};

/* The commands that take MODEL; 0 = the seed's form (qwenc MODEL ...). */
enum { QW_CMD_NONE = 0, QW_CMD_SERVE, QW_CMD_RUN, QW_CMD_CHAT };

#define QW_SERVE_DEFAULT_PORT 8080 /* llama-server's */
#define QW_OPTS_MAX_POS 64
#define QW_OPTS_MAX_MODES 8
#define QW_OPTS_MAX_GIVEN 64

typedef struct qw_opts {
    const char *model;        /* folder, .gguf file, or a Hugging Face repo id found in the cache */
    int mode;                 /* one M_* bit, set by opts_finish */
    int help;                 /* -h / --help given (anywhere) */
    /* as parsed, for opts_finish */
    const char *pos[QW_OPTS_MAX_POS];          /* positional arguments, in order */
    int n_pos;
    int modes[QW_OPTS_MAX_MODES];              /* the mode-selecting options given, in order */
    const char *mode_opts[QW_OPTS_MAX_MODES];  /* ... as typed */
    int n_modes;
    const char *given[QW_OPTS_MAX_GIVEN];      /* the scoped options given (see options.c) */
    int n_given;
    char *owned;              /* run's prompt joined from words (freed by the caller of opts_finish) */
    /* single-shot */
    const char *tokens;       /* "151644 8948 ..." (positional or --tokens) */
    int n_predict;            /* -n / positional N; -1 = default */
    const char *logits_out;   /* --logits-out FILE */
    /* text */
    const char *prompt;       /* --prompt TEXT */
    const char *system;       /* --system TEXT */
    int raw;                  /* --raw: no chat template */
    const char *tokenize;     /* --tokenize TEXT|- */
    const char *detokenize;   /* --detokenize IDS */
    /* constrained output (--prompt): at most one of these */
    const char *json_schema;  /* --json-schema FILE: the output validates against it */
    const char *grammar;      /* --grammar FILE: GBNF, start rule "root" */
    int json_object;          /* --json-object: any JSON object */
    /* sampling */
    qw_sampling sampling;
    int sampling_set;         /* any sampling flag given (else model defaults / greedy) */
    /* runtime */
    int threads;              /* --threads; 0 = physical cores */
    int n_ctx;                /* --ctx; 0 = default 4096 (capped by the model) */
    int quant;                /* --quant q8_0: a qw_dtype to quantize to at load; -1 = none */
    int warmup;               /* --warmup: one untimed pass over the prompt first (benchmarks) */
    int precision;            /* --precision fast|exact (a qw_precision; env QWENC_PRECISION; default fast) */
    int spec;                 /* --spec off|ngram: 1 = n-gram speculative decoding (default) */
    int spec_k;               /* --spec-k N: most drafted tokens per step (default QW_SPEC_K_DEFAULT) */
    /* servers */
    int http_port;            /* --http PORT; 0 = off */
    const char *host;         /* --host ADDR (default 127.0.0.1) */
    int parallel;             /* --parallel N slots (default 4) */
    int queue;                /* --queue N waiting requests (default 64) */
    long cache_mb;            /* --cache-ram MB: prefix cache budget; -1 = default (engine.h), 0 = off */
    const char *api_key;      /* --api-key KEY */
    const char *cors;         /* --cors ORIGIN */
    int no_webui;             /* --no-webui: no web chat page at / */
    long max_body;            /* --max-body BYTES (default 1 MiB) */
    int max_conns;            /* --max-conns N open connections (HTTP and socket; default 1024) */
    double header_timeout;    /* --header-timeout S: request head (socket: line) deadline (default 10) */
    double drain_s;           /* --drain S: on SIGTERM finish running requests for up to S (default 3) */
    const char *alias;        /* --alias NAME: the model id served (/v1/models, "model") */
    int any_model;            /* --any-model: accept requests naming any model */
    int server;               /* --server given */
    const char *socket_path;  /* --server PATH: Unix socket; NULL = stdin server */
} qw_opts;

/* Default of --spec-k: long enough to copy a line of code per step, short
 * enough that a rejected draft wastes little (tools/bench_spec.py). */
#define QW_SPEC_K_DEFAULT 16

void opts_defaults(qw_opts *o);

/* The spec_k to run with: --spec-k, or 0 with --spec off. */
int opts_spec_k(const qw_opts *o);

/* Resolve MODEL: a folder or file (GGUF) path as is, else a repo id ("Qwen/Qwen2.5-0.5B-Instruct")
 * looked up in the Hugging Face cache ($HF_HOME/hub). Returns a malloc'd path
 * or NULL with a message. (src/cli/mode_pull.c) */
char *cli_resolve_model(const char *arg, char *errbuf, int errlen);

/* cli_resolve_model() for the model modes: on failure prints
 * "qwenc: <reason>" on stderr and returns NULL. (src/cli/common.c) */
char *cli_model_dir(const char *arg);

/* Modes. argc/argv are what follows the subcommand word. */
int mode_tokens(const qw_opts *o);     /* single-shot ids in, ids out; --logits-out */
int mode_text(const qw_opts *o);       /* --prompt, --tokenize, --detokenize */
int mode_http(const qw_opts *o);       /* --http PORT */
int mode_socket(const qw_opts *o);     /* --server PATH */
int mode_stdin(const qw_opts *o);      /* --server */
int mode_pull(int argc, char **argv);  /* qwenc pull REPO [--revision R] */
int mode_synth(int argc, char **argv); /* qwenc synth OUT_DIR [--config F] */
int mode_chat(const qw_opts *o);       /* qwenc chat MODEL, qwenc run MODEL */
int mode_list(int argc, char **argv);  /* qwenc list: the models in the Hugging Face cache */
int mode_rm(int argc, char **argv);    /* qwenc rm REPO: remove one from the cache */

/* Parse the options and positional arguments of a model command (argv from
 * `first`; -m/--model and every option anywhere) into o. Returns 0, or -1
 * after printing a message naming the bad option. */
int opts_parse(qw_opts *o, int argc, char **argv, int first);

/* After opts_parse: MODEL (-m, else the first positional), the mode (the
 * command's, else the one the options select: two different ones are an
 * error naming both), the seed's positional "IDS" N, run's PROMPT; then one
 * warning line for each option that has no effect in that mode. cmd is a
 * QW_CMD_*, cmd_name its word for messages. Returns 0 or -1 (message
 * printed: a usage error). */
int opts_finish(qw_opts *o, int cmd, const char *cmd_name);

void usage(FILE *f);
/* The help of one command (serve, run, chat, pull, list, rm); 0 if unknown. */
int usage_command(const char *cmd, FILE *f);

/* Informational lines of the CLI modes go through these, so that
 * QWENC_LOG=warn|error|quiet silences them like the log: cli_info prints at
 * info level, cli_warn at warn level (as "qwenc: warning: ..."). */
void cli_info(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
void cli_warn(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* The context a mode asked for with --ctx, against what it got (capped at
 * the model's positions): one warning line when they differ. */
void cli_warn_ctx_capped(const qw_opts *o, int n_ctx_used, int model_max);

/* After --quant: one warning line when matrices were kept as stored
 * (a GGUF's quantized tensors). */
void cli_warn_quant_kept(const qw_opts *o, const struct qw_model *m);

/* The engine options every server mode takes from the command line: the
 * model folder dir, --threads, --quant, --precision, speculation,
 * --cache-ram, --ctx, --parallel, --queue, the sampling flags (NULL without
 * any). A mode sets what is its own on top. (src/cli/common.c) */
struct qw_engine;
struct qw_engine_opts;
void cli_engine_opts(const qw_opts *o, const char *dir, struct qw_engine_opts *eo);
/* engine_open(e, eo), then the warnings about what the command line asked
 * for and did not get; on failure prints "qwenc: <reason>", returns -1. */
int cli_engine_open(struct qw_engine *e, const qw_opts *o, const struct qw_engine_opts *eo);

/* Parse token ids separated by spaces, tabs, newlines or commas into a
 * malloc'd array. On bad input prints "qwenc: WHAT: ..." and returns -1.
 * (src/cli/common.c) */
int cli_parse_ids(const char *what, const char *s, int allow_empty, int32_t **out, int *n_out);

/* After model_load: quantize per --quant (nothing if o->quant < 0). On
 * failure prints "qwenc: <reason>" and returns -1. (src/cli/common.c) */
int cli_quantize(const qw_opts *o, struct qw_model *m);

/* Block SIGINT and SIGTERM in this thread and every thread it starts, so the
 * server modes can sigwait() for them; ignore SIGPIPE. Call before any
 * thread starts. */
void cli_block_stop_signals(sigset_t *set);

/* Server modes: cap glibc's malloc arenas (see common.c for the numbers). */
void cli_server_malloc_limits(void);

/* Wait for one of the signals blocked by cli_block_stop_signals(), say on
 * stderr that the server is shutting down, and return the signal. */
int cli_wait_stop_signal(const sigset_t *set);

#endif
