/* embed.c - turn a file into a C source file that holds its bytes, so the
 * binary can serve assets without reading anything at run time (the web
 * chat page, src/server/webui/index.html). Build-time tool: the Makefile
 * compiles it with the host compiler and runs it; it needs nothing beyond
 * a C compiler (no xxd, which Debian ships only with vim).
 *
 *   embed NAME IN OUT
 *
 * writes OUT defining
 *   const unsigned char NAME[];   the bytes of IN plus a terminating NUL
 *   const unsigned long NAME_len; the length of IN (without that NUL)
 * Exit status 0, or 1 with a message naming the file.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: embed NAME IN OUT\n");
        return 2;
    }
    const char *name = argv[1], *in_path = argv[2], *out_path = argv[3];
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_' || (p > name && *p >= '0' && *p <= '9'))) {
            fprintf(stderr, "embed: '%s' is not a C identifier\n", name);
            return 2;
        }
    FILE *in = fopen(in_path, "rb");
    if (!in) {
        fprintf(stderr, "embed: %s: %s\n", in_path, strerror(errno));
        return 1;
    }
    FILE *out = fopen(out_path, "w");
    if (!out) {
        fprintf(stderr, "embed: %s: %s\n", out_path, strerror(errno));
        fclose(in);
        return 1;
    }
    fprintf(out, "/* Generated from %s by tools/embed.c: do not edit. */\n", in_path);
    fprintf(out, "extern const unsigned char %s[];\nextern const unsigned long %s_len;\n", name, name);
    fprintf(out, "const unsigned char %s[] = {\n", name);
    unsigned long n = 0;
    int c;
    while ((c = getc(in)) != EOF) {
        fprintf(out, "%s0x%02x,", n % 16 == 0 ? (n ? "\n" : "") : "", (unsigned)c);
        n++;
    }
    int read_err = ferror(in);
    fclose(in);
    fprintf(out, "%s0x00\n};\nconst unsigned long %s_len = %luUL;\n", n % 16 == 0 && n ? "\n" : "", name, n);
    if (read_err || fclose(out) != 0) {
        fprintf(stderr, "embed: %s: %s\n", read_err ? in_path : out_path, read_err ? "read error" : strerror(errno));
        remove(out_path);
        return 1;
    }
    return 0;
}
