/* main.c - qwenc's entry point: command dispatch.
 *
 *   qwenc MODEL "IDS" N               the seed's single-shot form
 *   qwenc MODEL [options]             the seed's modes (--prompt, --http, ...)
 *   qwenc serve|run|chat MODEL ...    what llama.cpp / Ollama users type
 *   qwenc pull|list|rm|synth ...      the Hugging Face cache, test models
 *   qwenc --version | --isa-levels | --help
 * MODEL may also be given anywhere as -m/--model; -h/--help anywhere prints
 * the help of the command (or the general one) and exits 0. A word that is
 * a command is taken as one: a model folder so named is ./NAME.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/version.h"
#include "cli/cli.h"
#include "kernels/kernels.h"

/* The kernel levels this binary can run on this CPU and OS, ascending, on
 * one line: each is a valid QWENC_ISA (the test suite runs its end-to-end
 * equality cases under each). The CPU's features go to stderr. */
static int print_isa_levels(void) {
    const char *const *names = kernels_level_names();
    for (int i = 0, n = 0; names[i]; i++)
        if (kernels_level(names[i])) printf("%s%s", n++ ? " " : "", names[i]);
    printf("\n");
    fprintf(stderr, "cpu: %s\n", kernels_cpu_features());
    return 0;
}

static int is_help(const char *a) { return !strcmp(a, "--help") || !strcmp(a, "-h"); }

/* QWENC_LOG with a value the log does not know would silently mean "info". */
static void check_log_env(void) {
    const char *s = getenv("QWENC_LOG");
    static const char *const ok[] = {"debug", "info", "warn", "error", "quiet"};
    if (!s) return;
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
        if (!strcmp(s, ok[i])) return;
    fprintf(stderr, "qwenc: warning: QWENC_LOG='%s' is not one of debug, info, warn, error, quiet: using info\n", s);
}

/* serve / run / chat / the seed's form: options, then the mode. */
static int model_command(int cmd, const char *name, int argc, char **argv, int first) {
    qw_opts o;
    opts_defaults(&o);
    if (opts_parse(&o, argc, argv, first) != 0) return 2;
    if (o.help) {
        if (!name || !usage_command(name, stdout)) usage(stdout);
        return 0;
    }
    int rc;
    if (opts_finish(&o, cmd, name ? name : NULL) != 0) rc = 2;
    else if (o.mode == M_HTTP) rc = mode_http(&o);
    else if (o.mode == M_SOCKET) rc = mode_socket(&o);
    else if (o.mode == M_STDIN) rc = mode_stdin(&o);
    else if (o.mode & (M_PROMPT | M_TOKENIZE | M_DETOKENIZE)) rc = mode_text(&o);
    else if (o.mode == M_CHAT) rc = mode_chat(&o);
    else rc = mode_tokens(&o);
    free(o.owned);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    check_log_env();
    const char *a = argv[1];
    if (a[0] == '-' && argc > 2 && is_help(argv[argc - 1]) && (!strcmp(a, "--version") || !strcmp(a, "--isa-levels")))
        a = argv[argc - 1]; /* qwenc --version --help: the help */
    if (is_help(a) || !strcmp(a, "help")) {
        if (argc > 2 && usage_command(argv[2], stdout)) return 0;
        usage(stdout);
        return 0;
    }
    if (!strcmp(a, "--version") || !strcmp(a, "version")) {
        printf("qwenc %s\n", QWENC_VERSION);
        return 0;
    }
    if (!strcmp(a, "--isa-levels")) return print_isa_levels();
    if (!strcmp(a, "pull")) return mode_pull(argc - 2, argv + 2);
    if (!strcmp(a, "list") || !strcmp(a, "ls")) return mode_list(argc - 2, argv + 2);
    if (!strcmp(a, "rm")) return mode_rm(argc - 2, argv + 2);
    if (!strcmp(a, "synth")) return mode_synth(argc - 2, argv + 2);
    if (!strcmp(a, "serve")) return model_command(QW_CMD_SERVE, "serve", argc, argv, 2);
    if (!strcmp(a, "run")) return model_command(QW_CMD_RUN, "run", argc, argv, 2);
    if (!strcmp(a, "chat")) return model_command(QW_CMD_CHAT, "chat", argc, argv, 2);
    return model_command(QW_CMD_NONE, NULL, argc, argv, 1);
}
