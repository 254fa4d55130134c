/* main.c - qwenc's entry point: subcommand dispatch.
 *
 *   qwenc MODEL "IDS" N               seed single-shot form
 *   qwenc MODEL [options]             see usage()
 *   qwenc pull REPO | synth DIR | chat MODEL
 *   qwenc --isa-levels                the kernel levels this CPU runs
 */
#include <stdio.h>
#include <string.h>

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

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
        !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--isa-levels")) return print_isa_levels();
    if (!strcmp(argv[1], "pull")) return mode_pull(argc - 2, argv + 2);
    if (!strcmp(argv[1], "synth")) return mode_synth(argc - 2, argv + 2);
    if (!strcmp(argv[1], "chat")) return mode_chat(argc - 2, argv + 2);
    if (argv[1][0] == '-') {
        fprintf(stderr, "qwenc: expected MODEL before options, got '%s' (see qwenc --help)\n", argv[1]);
        return 2;
    }

    qw_opts o;
    opts_defaults(&o);
    o.model = argv[1];
    if (opts_parse(&o, argc, argv, 2) != 0) return 2;

    if (o.http_port) return mode_http(&o);
    if (o.server) return o.socket_path ? mode_socket(&o) : mode_stdin(&o);
    if (o.prompt || o.tokenize || o.detokenize) return mode_text(&o);
    if (o.tokens) return mode_tokens(&o);
    fprintf(stderr, "qwenc: nothing to do: give token ids, --prompt, --http PORT or --server (see qwenc --help)\n");
    return 2;
}
