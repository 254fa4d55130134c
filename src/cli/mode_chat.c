/* mode_chat.c - placeholder until this mode lands: says so and exits 1. */
#include <stdio.h>

#include "cli/cli.h"

int mode_chat(int argc, char **argv) {
    (void)argc; (void)argv;
    fprintf(stderr, "qwenc: this mode is not built yet\n");
    return 1;
}
