/* options.c - command-line options shared by every model mode. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "infer/forward.h"
#include "kernels/kernels.h"

void opts_defaults(qw_opts *o) {
    memset(o, 0, sizeof *o);
    o->n_predict = -1;
    o->quant = -1;
    o->sampling = sampling_default();
    o->host = "127.0.0.1";
    o->parallel = 4;
    o->queue = 64;
    o->cache_mb = -1;
    o->max_body = 1L << 20;
    o->max_conns = 1024;
    o->header_timeout = 10;
    o->drain_s = 3;
    o->spec = 1;
    o->spec_k = QW_SPEC_K_DEFAULT;
}

int opts_spec_k(const qw_opts *o) { return o->spec ? o->spec_k : 0; }

void usage(FILE *f) {
    fputs(
        "qwenc - Qwen2-family LLM inference on the CPU, from a Hugging Face model folder or GGUF file\n"
        "\n"
        "Usage:\n"
        "  qwenc MODEL \"IDS\" N                 generate N tokens after the token ids IDS;\n"
        "                                      prints the generated ids on one line\n"
        "  qwenc MODEL --tokens \"IDS\" [-n N] [sampling] [runtime]\n"
        "  qwenc MODEL --tokens \"IDS\" --logits-out FILE\n"
        "                                      write the logits of every prompt position\n"
        "                                      (float32 LE, n_tokens x vocab)\n"
        "  qwenc MODEL --prompt \"TEXT\" [-n N] [--system TEXT] [--raw] [sampling]\n"
        "                                      chat-templated generation, text streamed\n"
        "              [--json-schema FILE | --grammar FILE | --json-object]\n"
        "                                      constrain the output to a JSON Schema, a\n"
        "                                      GBNF grammar or any JSON object (docs/grammar.md)\n"
        "  qwenc MODEL --tokenize \"TEXT\"|-    print token ids (no template)\n"
        "  qwenc MODEL --detokenize \"IDS\"      print text\n"
        "  qwenc MODEL --http PORT [--host ADDR] [--parallel N] [--queue N]\n"
        "              [--cache-ram MB] [--api-key KEY] [--cors ORIGIN] [--max-body BYTES]\n"
        "              [--alias NAME] [--any-model] [--max-conns N]\n"
        "              [--header-timeout S] [--drain S]\n"
        "                                      HTTP server (seed API + OpenAI API); the model\n"
        "                                      is served as NAME (default: the repo id, the\n"
        "                                      GGUF's general.name or the folder name) and\n"
        "                                      requests naming another model get 404 unless\n"
        "                                      --any-model\n"
        "                                      --max-conns: open connections at most (1024);\n"
        "                                      --header-timeout: seconds for a request head\n"
        "                                      (10; a body gets 6x that); --drain: on SIGTERM stop accepting,\n"
        "                                      /health 503, finish running requests for up\n"
        "                                      to S seconds (3)\n"
        "  qwenc MODEL --server PATH           Unix socket server (JSON lines; --max-conns,\n"
        "                                      --header-timeout: seconds for a line)\n"
        "  qwenc MODEL --server                stdin server (\"ids|max_tokens\" lines)\n"
        "  qwenc chat MODEL [options]          interactive terminal chat\n"
        "  qwenc pull REPO [--revision REV] [--retries N] [--progress bar|lines|none]\n"
        "                                      download a model from Hugging Face into its cache\n"
        "  qwenc synth OUT_DIR [--config F] [--tokenizer DIR | --no-tokenizer]\n"
        "              [--dtype bf16|f16|f32] [--seed S] [--scale X]\n"
        "                                      write a random-weight model (offline testing)\n"
        "  qwenc --isa-levels                  print the kernel levels this CPU runs\n"
        "\n"
        "MODEL is a folder (config.json, *.safetensors, tokenizer.json), a GGUF file\n"
        "(F32/F16/BF16 tensors; weights, config and tokenizer from the one file), or a\n"
        "repo id such as Qwen/Qwen2.5-0.5B-Instruct found in the Hugging Face cache.\n"
        "\n"
        "Sampling (single-shot ids: greedy unless a flag is given; text modes and servers:\n"
        "the model's generation_config.json, else greedy):\n"
        "  --greedy  --temp T  --top-k K  --top-p P  --min-p M\n"
        "  --repeat-penalty R  --presence-penalty P  --frequency-penalty F  --seed S\n"
        "Runtime:\n"
        "  -n N              tokens to generate (default 50; single-shot default 20)\n"
        "  --threads N       compute threads (default: physical cores)\n"
        "  --ctx N           context length (default 4096, at most the model's)\n"
        "  --warmup          single-shot ids: one untimed pass over the prompt before the\n"
        "                    timed run (weights paged in and cached, as benchmarks of\n"
        "                    other engines measure)\n"
        "  --precision fast|exact\n"
        "                    fast (default): quantized weights multiply 8-bit quantized\n"
        "                    activations with integer dot products, BF16 weights\n"
        "                    bf16-rounded ones (CPUs with AVX512-BF16); exact: float32\n"
        "                    activations (the bit-for-bit reference path; slower)\n"
        "  --spec off|ngram  speculative decoding (default ngram): draft tokens by\n"
        "                    looking up the last tokens earlier in the prompt and output,\n"
        "                    verify them in one batched pass; the output is exactly the\n"
        "                    output without it (greedy and seeded sampling)\n"
        "  --spec-k N        most drafted tokens per step (default 16; 0 = off)\n"
        "  --cache-ram MB    servers: memory for the prefix cache, the KV pages of\n"
        "                    finished requests kept so that a later prompt with the same\n"
        "                    beginning (chat history, system prompt) skips recomputing\n"
        "                    it (default: room for max(parallel, 8) x ctx tokens, at most\n"
        "                    1/8 of the machine's memory; 0 = off)\n"
        "  --quant q8_0      quantize the weights to Q8_0 at load (8.5 bits per weight:\n"
        "                    about half the memory traffic of BF16; none = keep as stored)\n"
        "Environment:\n"
        "  QWENC_ISA=ref|avx2|avx512|neon   force a kernel level\n"
        "  QWENC_PRECISION=fast|exact       default of --precision\n"
        "  QWENC_LOG=debug|info|warn|error|quiet\n"
        "  HF_HOME, HF_ENDPOINT, HF_TOKEN   Hugging Face cache, mirror, token\n"
        "  HF_HUB_OFFLINE=1                 never contact the hub; use the cache\n"
        "  QWENC_HISTORY=FILE               chat line history (default ~/.qwenc_history)\n",
        f);
}

static int parse_long(const char *opt, const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "qwenc: %s: expected an integer in [%ld, %ld], got '%s'\n", opt, lo, hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_float(const char *opt, const char *s, double lo, double hi, float *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "qwenc: %s: expected a number in [%g, %g], got '%s'\n", opt, lo, hi, s);
        return -1;
    }
    *out = (float)v;
    return 0;
}

int opts_parse(qw_opts *o, int argc, char **argv, int first) {
    int positional = 0;
    const char *env = getenv("QWENC_PRECISION");
    if (env && *env) {
        qw_precision p;
        if (qw_precision_parse(env, &p)) {
            fprintf(stderr, "qwenc: QWENC_PRECISION: expected fast or exact, got '%s'\n", env);
            return -1;
        }
        o->precision = (int)p;
    }
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long l;
#define NEED_ARG                                                        \
    do {                                                                \
        if (!v) {                                                       \
            fprintf(stderr, "qwenc: %s needs a value\n", a);             \
            return -1;                                                  \
        }                                                               \
        i++;                                                            \
    } while (0)
        if (a[0] != '-' || (a[1] == '\0')) {
            /* Seed form: MODEL "IDS" N */
            if (positional == 0 && !o->tokens) o->tokens = a;
            else if (positional <= 1 && o->n_predict < 0) {
                if (parse_long("N", a, 0, INT_MAX, &l)) return -1;
                o->n_predict = (int)l;
            } else {
                fprintf(stderr, "qwenc: unexpected argument '%s'\n", a);
                return -1;
            }
            positional++;
        } else if (!strcmp(a, "--tokens")) { NEED_ARG; o->tokens = v; }
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict") || !strcmp(a, "--max-tokens")) {
            NEED_ARG; if (parse_long(a, v, 0, INT_MAX, &l)) return -1; o->n_predict = (int)l;
        }
        else if (!strcmp(a, "--logits-out")) { NEED_ARG; o->logits_out = v; }
        else if (!strcmp(a, "--prompt")) { NEED_ARG; o->prompt = v; }
        else if (!strcmp(a, "--system")) { NEED_ARG; o->system = v; }
        else if (!strcmp(a, "--raw")) o->raw = 1;
        else if (!strcmp(a, "--json-schema")) { NEED_ARG; o->json_schema = v; }
        else if (!strcmp(a, "--grammar")) { NEED_ARG; o->grammar = v; }
        else if (!strcmp(a, "--json-object")) o->json_object = 1;
        else if (!strcmp(a, "--tokenize")) { NEED_ARG; o->tokenize = v; }
        else if (!strcmp(a, "--detokenize")) { NEED_ARG; o->detokenize = v; }
        else if (!strcmp(a, "--greedy")) { o->sampling.temperature = 0; o->sampling_set = 1; }
        else if (!strcmp(a, "--temp") || !strcmp(a, "--temperature")) {
            NEED_ARG; if (parse_float(a, v, 0, 100, &o->sampling.temperature)) return -1; o->sampling_set = 1;
        }
        else if (!strcmp(a, "--top-k")) {
            NEED_ARG; if (parse_long(a, v, 0, INT_MAX, &l)) return -1; o->sampling.top_k = (int)l; o->sampling_set = 1;
        }
        else if (!strcmp(a, "--top-p")) {
            NEED_ARG; if (parse_float(a, v, 0, 1, &o->sampling.top_p)) return -1; o->sampling_set = 1;
        }
        else if (!strcmp(a, "--min-p")) {
            NEED_ARG; if (parse_float(a, v, 0, 1, &o->sampling.min_p)) return -1; o->sampling_set = 1;
        }
        else if (!strcmp(a, "--repeat-penalty")) {
            NEED_ARG; if (parse_float(a, v, 0.01, 100, &o->sampling.repeat_penalty)) return -1; o->sampling_set = 1;
        }
        else if (!strcmp(a, "--presence-penalty")) {
            NEED_ARG; if (parse_float(a, v, -2, 2, &o->sampling.presence_penalty)) return -1; o->sampling_set = 1;
        }
        else if (!strcmp(a, "--frequency-penalty")) {
            NEED_ARG; if (parse_float(a, v, -2, 2, &o->sampling.frequency_penalty)) return -1; o->sampling_set = 1;
        }
        else if (!strcmp(a, "--seed")) {
            NEED_ARG;
            char *end; errno = 0;
            unsigned long long s = strtoull(v, &end, 10);
            if (errno || end == v || *end) { fprintf(stderr, "qwenc: --seed: expected an integer, got '%s'\n", v); return -1; }
            o->sampling.seed = s; o->sampling_set = 1;
        }
        else if (!strcmp(a, "--threads") || !strcmp(a, "-t")) {
            NEED_ARG; if (parse_long(a, v, 1, 1024, &l)) return -1; o->threads = (int)l;
        }
        else if (!strcmp(a, "--warmup")) o->warmup = 1;
        else if (!strcmp(a, "--precision")) {
            NEED_ARG;
            qw_precision p;
            if (qw_precision_parse(v, &p)) {
                fprintf(stderr, "qwenc: --precision: expected fast or exact, got '%s'\n", v);
                return -1;
            }
            o->precision = (int)p;
        }
        else if (!strcmp(a, "--spec")) {
            NEED_ARG;
            if (!strcmp(v, "ngram")) o->spec = 1;
            else if (!strcmp(v, "off")) o->spec = 0;
            else { fprintf(stderr, "qwenc: --spec: expected off or ngram, got '%s'\n", v); return -1; }
        }
        else if (!strcmp(a, "--spec-k")) {
            NEED_ARG; if (parse_long(a, v, 0, 64, &l)) return -1; o->spec_k = (int)l;
        }
        else if (!strcmp(a, "--quant")) {
            NEED_ARG;
            if (!strcmp(v, "q8_0") || !strcmp(v, "Q8_0")) o->quant = QW_Q8_0;
            else if (!strcmp(v, "none")) o->quant = -1;
            else { fprintf(stderr, "qwenc: --quant: expected q8_0 or none, got '%s'\n", v); return -1; }
        }
        else if (!strcmp(a, "--ctx") || !strcmp(a, "-c")) {
            NEED_ARG; if (parse_long(a, v, 16, 1 << 24, &l)) return -1; o->n_ctx = (int)l;
        }
        else if (!strcmp(a, "--http")) {
            NEED_ARG; if (parse_long(a, v, 0, 65535, &l)) return -1; o->http_port = (int)l;
            if (!o->http_port) o->http_port = -1; /* port 0: any free port */
        }
        else if (!strcmp(a, "--host")) { NEED_ARG; o->host = v; }
        else if (!strcmp(a, "--parallel") || !strcmp(a, "-np")) {
            NEED_ARG; if (parse_long(a, v, 1, 256, &l)) return -1; o->parallel = (int)l;
        }
        else if (!strcmp(a, "--cache-ram")) {
            NEED_ARG; if (parse_long(a, v, 0, 1L << 30, &l)) return -1; o->cache_mb = l;
        }
        else if (!strcmp(a, "--queue")) {
            NEED_ARG; if (parse_long(a, v, 0, 1 << 20, &l)) return -1; o->queue = (int)l;
        }
        else if (!strcmp(a, "--api-key")) { NEED_ARG; o->api_key = v; }
        else if (!strcmp(a, "--cors")) { NEED_ARG; o->cors = v; }
        else if (!strcmp(a, "--alias")) { NEED_ARG; if (!v[0]) { fprintf(stderr, "qwenc: --alias: empty name\n"); return -1; } o->alias = v; }
        else if (!strcmp(a, "--any-model")) { o->any_model = 1; }
        else if (!strcmp(a, "--max-body")) {
            NEED_ARG; if (parse_long(a, v, 1024, 1L << 30, &l)) return -1; o->max_body = l;
        }
        else if (!strcmp(a, "--max-conns")) {
            NEED_ARG; if (parse_long(a, v, 1, 1 << 20, &l)) return -1; o->max_conns = (int)l;
        }
        else if (!strcmp(a, "--header-timeout") || !strcmp(a, "--drain")) {
            NEED_ARG;
            char *end;
            double d = strtod(v, &end);
            if (end == v || *end || !(d > 0 && d <= 86400)) {
                fprintf(stderr, "qwenc: %s: '%s' is not a number of seconds in (0, 86400]\n", a, v);
                return -1;
            }
            if (a[2] == 'h') o->header_timeout = d;
            else o->drain_s = d;
        }
        else if (!strcmp(a, "--server")) {
            o->server = 1;
            if (v && v[0] != '-') { o->socket_path = v; i++; }
        }
        else {
            fprintf(stderr, "qwenc: unknown option '%s' (see qwenc --help)\n", a);
            return -1;
        }
#undef NEED_ARG
    }
    int n_constraints = !!o->json_schema + !!o->grammar + !!o->json_object;
    if (n_constraints > 1) {
        fprintf(stderr, "qwenc: --json-schema, --grammar and --json-object: give at most one\n");
        return -1;
    }
    if (n_constraints && !o->prompt) {
        fprintf(stderr, "qwenc: --json-schema, --grammar and --json-object go with --prompt\n");
        return -1;
    }
    return 0;
}
