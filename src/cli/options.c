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
    o->kv_type = -1;
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
        "Commands (as llama.cpp and Ollama users type them):\n"
        "  qwenc serve MODEL [--port N] [--host ADDR] [server options]\n"
        "                                      HTTP server (OpenAI API + seed API), port 8080\n"
        "  qwenc run MODEL [PROMPT]            answer PROMPT once (streamed), or chat without it\n"
        "  qwenc chat MODEL [options]          interactive terminal chat\n"
        "  qwenc pull REPO[:QUANT] [--revision REV] [--retries N] [--progress bar|lines|none]\n"
        "                                      download a model (a safetensors repo, or one .gguf of a\n"
        "                                      GGUF repo) from Hugging Face into its cache\n"
        "  qwenc list                          the models in the Hugging Face cache, with sizes\n"
        "  qwenc rm REPO[:QUANT]               remove one from the cache\n"
        "  qwenc synth OUT_DIR [--config F] [--tokenizer DIR | --no-tokenizer]\n"
        "              [--dtype bf16|f16|f32] [--seed S] [--scale X]\n"
        "                                      write a random-weight model (offline testing)\n"
        "  qwenc --version | --isa-levels (the kernel levels this CPU runs) | --help\n"
        "\n"
        "The seed's forms (MODEL first; all keep working):\n"
        "  qwenc MODEL \"IDS\" N                 generate N tokens after the token ids IDS;\n"
        "                                      prints the generated ids on one line\n"
        "  qwenc MODEL --tokens \"IDS\" [-n N] [sampling] [runtime]\n"
        "  qwenc MODEL --tokens \"IDS\" --logits-out FILE\n"
        "                                      write the logits of every prompt position\n"
        "                                      (float32 LE, n_tokens x vocab)\n"
        "  qwenc MODEL --prompt \"TEXT\" [-n N] [--system TEXT] [--raw] [sampling]\n"
        "                                      chat-templated generation, text streamed (-p too)\n"
        "              [--json-schema FILE | --grammar FILE | --json-object]\n"
        "                                      constrain the output to a JSON Schema, a\n"
        "                                      GBNF grammar or any JSON object (docs/grammar.md)\n"
        "  qwenc MODEL --tokenize \"TEXT\"|-    print token ids (no template)\n"
        "  qwenc MODEL --detokenize \"IDS\"      print text\n"
        "  qwenc MODEL --http PORT [--host ADDR] [--parallel N] [--queue N]\n"
        "              [--cache-ram MB] [--api-key KEY] [--cors ORIGIN] [--max-body BYTES]\n"
        "              [--alias NAME] [--any-model] [--no-webui]\n"
        "              [--max-conns N] [--header-timeout S] [--drain S]\n"
        "                                      HTTP server (seed API + OpenAI API + Ollama API)\n"
        "                                      and a web chat at / (--no-webui: none); --port PORT\n"
        "                                      too; the model is served as NAME (default: the repo\n"
        "                                      id, the GGUF's general.name or the folder name) and\n"
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
        "Options go anywhere; -m/--model MODEL may replace the leading MODEL. One mode at a time:\n"
        "two (say --prompt and --http) are an error; an option the mode does not use is warned\n"
        "about. -h/--help after any command prints its help.\n"
        "\n"
        "MODEL is a folder (config.json, *.safetensors in BF16/F16/F32, tokenizer.json), a GGUF\n"
        "file (weights, config and tokenizer from the one file; tensor types F32, F16, BF16,\n"
        "Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K, so the files llama.cpp calls\n"
        "Q4_K_M, Q5_K_M, Q6_K, Q8_0, ... load; IQ* and Q2_K/Q3_K types do not), or a repo id\n"
        "in the Hugging Face cache: Qwen/Qwen2.5-0.5B-Instruct, or\n"
        "Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M for one file of a GGUF repo (see qwenc pull).\n"
        "\n"
        "Sampling (single-shot ids: greedy unless a flag is given; text modes and servers:\n"
        "the model's generation_config.json, else greedy):\n"
        "  --greedy  --temp T  --top-k K  --top-p P  --min-p M\n"
        "  --repeat-penalty R  --presence-penalty P  --frequency-penalty F  --seed S\n"
        "Runtime:\n"
        "  -n N              tokens to generate (default 50; single-shot default 20)\n"
        "  --threads N       compute threads (default: physical cores)\n"
        "  --ctx N           context length (default 4096; more than the model's positions\n"
        "                    is capped there, with a warning)\n"
        "  --warmup          single-shot ids: one untimed pass over the prompt before the\n"
        "                    timed run (weights paged in and cached, as benchmarks of\n"
        "                    other engines measure)\n"
        "  --precision fast|exact\n"
        "                    fast (default): quantized weights multiply 8-bit quantized\n"
        "                    activations with integer dot products, BF16 weights\n"
        "                    bf16-rounded ones (CPUs with AVX512-BF16); exact: float32\n"
        "                    activations (the bit-for-bit reference path; slower)\n"
        "  --kv-type f32|f16|bf16\n"
        "                    how the KV cache stores K and V: 16-bit halves its memory\n"
        "                    (f16 rounds to 11 significant bits, bf16 to 8); default f16,\n"
        "                    f32 with --precision exact (the only type it allows)\n"
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
        "                    about half the memory traffic of BF16; none = keep as stored;\n"
        "                    a GGUF's quantized tensors are kept as they are)\n"
        "Environment:\n"
        "  QWENC_ISA=ref|avx2|avx512|neon   force a kernel level\n"
        "  QWENC_PRECISION=fast|exact       default of --precision\n"
        "  QWENC_LOG=debug|info|warn|error|quiet\n"
        "                                   what goes to stderr besides errors (quiet: errors only)\n"
        "  HF_HOME, HF_ENDPOINT, HF_TOKEN   Hugging Face cache, mirror, token\n"
        "  HF_HUB_OFFLINE=1                 never contact the hub; use the cache\n"
        "  QWENC_HISTORY=FILE               chat line history (default ~/.qwenc_history)\n",
        f);
}

int usage_command(const char *cmd, FILE *f) {
    if (!strcmp(cmd, "serve"))
        fputs("usage: qwenc serve MODEL [--port N] [--host ADDR] [--parallel N] [--queue N] [--api-key KEY]\n"
              "                   [--cors ORIGIN] [--max-body BYTES] [--alias NAME] [--any-model]\n"
              "                   [--ctx N] [sampling] [runtime]\n"
              "The HTTP server (the same as qwenc MODEL --http PORT): OpenAI API (/v1/chat/completions,\n"
              "/v1/completions, /v1/models), the seed's API, /health, /metrics. Port 8080 unless\n"
              "--port is given (0: any free port, printed as \"listening on http://HOST:PORT\").\n"
              "MODEL first or as -m MODEL. See qwenc --help for the options.\n", f);
    else if (!strcmp(cmd, "run"))
        fputs("usage: qwenc run MODEL [PROMPT...] [-n N] [--system TEXT] [--raw] [sampling] [runtime]\n"
              "With PROMPT (the words after MODEL, joined by spaces): the chat-templated answer,\n"
              "streamed to stdout (as qwenc MODEL --prompt PROMPT). Without: an interactive chat\n"
              "(as qwenc chat MODEL). MODEL first or as -m MODEL.\n", f);
    else if (!strcmp(cmd, "chat"))
        fputs("usage: qwenc chat MODEL [--system TEXT] [-n N] [--ctx N] [sampling] [runtime]\n"
              "An interactive chat in the terminal: /reset, /system TEXT, /quit; Ctrl-C stops an\n"
              "answer. Without a terminal it reads one message per line from stdin.\n", f);
    else if (!strcmp(cmd, "pull"))
        return mode_pull(1, (char *[]){"--help", NULL}) == 0;
    else if (!strcmp(cmd, "list") || !strcmp(cmd, "ls"))
        return mode_list(1, (char *[]){"--help", NULL}) == 0;
    else if (!strcmp(cmd, "rm"))
        return mode_rm(1, (char *[]){"--help", NULL}) == 0;
    else
        return 0;
    return 1;
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

/* ---- which options apply where ---------------------------------------------
 * Every option names the modes it applies to; one given in another mode
 * would be ignored, so it is warned about (opts_finish). The options that
 * select a mode are checked apart: two of them are an error. */

#define M_RUNS (M_TOKENS | M_PROMPT | M_CHAT | M_HTTP | M_SOCKET | M_STDIN) /* modes that run the model */
#define M_GEN (M_TOKENS | M_PROMPT | M_CHAT)                                  /* one local generation */

typedef struct opt_scope {
    const char *name; /* as typed; aliases listed apart */
    int modes;
} opt_scope;

static const opt_scope scopes[] = {
    {"-n", M_GEN}, {"--n-predict", M_GEN}, {"--max-tokens", M_GEN},
    {"--logits-out", M_TOKENS}, {"--warmup", M_TOKENS},
    {"--system", M_PROMPT | M_CHAT}, {"--raw", M_PROMPT},
    {"--greedy", M_RUNS}, {"--temp", M_RUNS}, {"--temperature", M_RUNS}, {"--top-k", M_RUNS},
    {"--top-p", M_RUNS}, {"--min-p", M_RUNS}, {"--repeat-penalty", M_RUNS}, {"--presence-penalty", M_RUNS},
    {"--frequency-penalty", M_RUNS}, {"--seed", M_RUNS},
    {"--threads", M_RUNS}, {"-t", M_RUNS}, {"--precision", M_RUNS}, {"--kv-type", M_RUNS}, {"--spec", M_RUNS}, {"--spec-k", M_RUNS},
    {"--quant", M_RUNS}, {"--ctx", M_RUNS}, {"-c", M_RUNS},
    {"--host", M_HTTP}, {"--api-key", M_HTTP}, {"--cors", M_HTTP}, {"--max-body", M_HTTP},
    {"--alias", M_HTTP}, {"--any-model", M_HTTP}, {"--cache-ram", M_HTTP | M_SOCKET | M_STDIN},
    {"--parallel", M_HTTP | M_SOCKET}, {"-np", M_HTTP | M_SOCKET}, {"--queue", M_HTTP | M_SOCKET},
};

static const char *mode_word(int mode) {
    switch (mode) {
    case M_TOKENS: return "token ids";
    case M_PROMPT: return "--prompt";
    case M_TOKENIZE: return "--tokenize";
    case M_DETOKENIZE: return "--detokenize";
    case M_HTTP: return "the HTTP server";
    case M_SOCKET: return "the socket server";
    case M_STDIN: return "the stdin server";
    case M_CHAT: return "chat";
    default: return "this mode";
    }
}

static void note_given(qw_opts *o, const char *a) {
    for (size_t i = 0; i < sizeof scopes / sizeof *scopes; i++)
        if (!strcmp(scopes[i].name, a)) {
            if (o->n_given < QW_OPTS_MAX_GIVEN) o->given[o->n_given++] = scopes[i].name;
            return;
        }
}

/* A mode-selecting option: remembered as typed, in order. */
static void note_mode(qw_opts *o, int mode, const char *as_typed) {
    if (o->n_modes < QW_OPTS_MAX_MODES) {
        o->modes[o->n_modes] = mode;
        o->mode_opts[o->n_modes++] = as_typed;
    }
}

int opts_parse(qw_opts *o, int argc, char **argv, int first) {
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
        note_given(o, a);
        if (a[0] != '-' || (a[1] == '\0')) {
            /* MODEL, token ids and N, or run's prompt: opts_finish sorts them out */
            if (o->n_pos == QW_OPTS_MAX_POS) {
                fprintf(stderr, "qwenc: unexpected argument '%s'\n", a);
                return -1;
            }
            o->pos[o->n_pos++] = a;
        }
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) o->help = 1;
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            NEED_ARG;
            if (o->model) {
                fprintf(stderr, "qwenc: two models given: '%s' and '%s'\n", o->model, v);
                return -1;
            }
            o->model = v;
        }
        else if (!strcmp(a, "--tokens")) { NEED_ARG; o->tokens = v; note_mode(o, M_TOKENS, a); }
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict") || !strcmp(a, "--max-tokens")) {
            NEED_ARG; if (parse_long(a, v, 0, INT_MAX, &l)) return -1; o->n_predict = (int)l;
        }
        else if (!strcmp(a, "--logits-out")) { NEED_ARG; o->logits_out = v; }
        else if (!strcmp(a, "--prompt") || !strcmp(a, "-p")) { NEED_ARG; o->prompt = v; note_mode(o, M_PROMPT, a); }
        else if (!strcmp(a, "--system")) { NEED_ARG; o->system = v; }
        else if (!strcmp(a, "--raw")) o->raw = 1;
        else if (!strcmp(a, "--json-schema")) { NEED_ARG; o->json_schema = v; }
        else if (!strcmp(a, "--grammar")) { NEED_ARG; o->grammar = v; }
        else if (!strcmp(a, "--json-object")) o->json_object = 1;
        else if (!strcmp(a, "--tokenize")) { NEED_ARG; o->tokenize = v; note_mode(o, M_TOKENIZE, a); }
        else if (!strcmp(a, "--detokenize")) { NEED_ARG; o->detokenize = v; note_mode(o, M_DETOKENIZE, a); }
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
        else if (!strcmp(a, "--kv-type")) {
            NEED_ARG;
            qw_kv_type t;
            if (qw_kv_type_parse(v, &t)) {
                fprintf(stderr, "qwenc: --kv-type: expected f32, f16 or bf16, got '%s'\n", v);
                return -1;
            }
            o->kv_type = (int)t;
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
        else if (!strcmp(a, "--http") || !strcmp(a, "--port")) {
            NEED_ARG; if (parse_long(a, v, 0, 65535, &l)) return -1; o->http_port = (int)l;
            if (!o->http_port) o->http_port = -1; /* port 0: any free port */
            note_mode(o, M_HTTP, a);
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
        else if (!strcmp(a, "--no-webui")) o->no_webui = 1;
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
            note_mode(o, o->socket_path ? M_SOCKET : M_STDIN, a);
        }
        else {
            fprintf(stderr, "qwenc: unknown option '%s' (see qwenc --help)\n", a);
            return -1;
        }
#undef NEED_ARG
    }
    if (o->kv_type < 0) o->kv_type = o->precision == QW_PRECISION_EXACT ? QW_KV_F32 : QW_KV_TYPE_FAST_DEFAULT;
    else if (o->precision == QW_PRECISION_EXACT && o->kv_type != QW_KV_F32) {
        fprintf(stderr, "qwenc: --kv-type %s: --precision exact stores K and V as f32 (the bit-for-bit path); "
                        "use --precision fast or --kv-type f32\n", qw_kv_type_name((qw_kv_type)o->kv_type));
        return -1;
    }
    int n_constraints = !!o->json_schema + !!o->grammar + !!o->json_object;
    if (n_constraints > 1) {
        fprintf(stderr, "qwenc: --json-schema, --grammar and --json-object: give at most one\n");
        return -1;
    }
    return 0;
}

/* "a b c" from words (run's unquoted prompt), malloc'd. */
static char *join_words(const char *const *w, int n) {
    size_t len = 1;
    for (int i = 0; i < n; i++) len += strlen(w[i]) + 1;
    char *s = malloc(len);
    if (!s) return NULL;
    s[0] = 0;
    for (int i = 0; i < n; i++) {
        if (i) strcat(s, " ");
        strcat(s, w[i]);
    }
    return s;
}

int opts_finish(qw_opts *o, int cmd, const char *cmd_name) {
    char who[32];
    snprintf(who, sizeof who, "qwenc%s%s", cmd_name ? " " : "", cmd_name ? cmd_name : "");
    int np = 0;
    /* MODEL: -m, else the first positional. */
    if (!o->model) {
        if (o->n_pos == 0) {
            fprintf(stderr, "%s: no MODEL given (a folder, a .gguf file or a repo id; first, or with -m)\n", who);
            if (cmd_name) usage_command(cmd_name, stderr);
            return -1;
        }
        o->model = o->pos[np++];
    }
    const char *const *rest = o->pos + np;
    int n_rest = o->n_pos - np;

    /* The mode: the command's, else the one the options select. */
    int mode = 0;
    const char *mode_as = NULL;
    if (cmd == QW_CMD_SERVE) {
        mode = M_HTTP, mode_as = "serve";
        if (!o->http_port) o->http_port = QW_SERVE_DEFAULT_PORT;
    } else if (cmd == QW_CMD_CHAT) {
        mode = M_CHAT, mode_as = "chat";
    } else if (cmd == QW_CMD_RUN) {
        /* run MODEL PROMPT: one answer; run MODEL: a chat */
        if (n_rest > 0) {
            if (o->prompt) {
                fprintf(stderr, "%s: the prompt is given twice: '%s' and --prompt\n", who, rest[0]);
                return -1;
            }
            o->prompt = o->owned = join_words(rest, n_rest);
            if (!o->prompt) return -1;
            n_rest = 0;
        }
        mode = o->prompt ? M_PROMPT : M_CHAT, mode_as = "run";
    }
    for (int i = 0; i < o->n_modes; i++) {
        int allowed = o->modes[i] == mode || (cmd == QW_CMD_SERVE && o->modes[i] == M_HTTP) ||
                      (cmd == QW_CMD_RUN && o->modes[i] == M_PROMPT);
        if (mode && !allowed) {
            fprintf(stderr, "qwenc: %s and %s cannot be used together: they select different modes (%s, %s)\n",
                    mode_as, o->mode_opts[i], mode_word(mode), mode_word(o->modes[i]));
            return -1;
        }
        if (!mode) mode = o->modes[i], mode_as = o->mode_opts[i];
    }
    /* The seed's form: MODEL "IDS" N (N also after --tokens). */
    if (n_rest > 0 && (!mode || mode == M_TOKENS) && !cmd) {
        if (!o->tokens) {
            o->tokens = rest[0];
            rest++, n_rest--;
            if (!mode) mode = M_TOKENS, mode_as = "token ids";
        }
        if (n_rest > 0 && o->n_predict < 0) {
            long l;
            if (parse_long("N", rest[0], 0, INT_MAX, &l)) return -1;
            o->n_predict = (int)l;
            rest++, n_rest--;
        }
    } else if (n_rest > 0 && mode && mode != M_TOKENS && !cmd) {
        fprintf(stderr, "qwenc: token ids '%s' and %s cannot be used together: they select different modes\n",
                rest[0], mode_as);
        return -1;
    }
    if (n_rest > 0) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", who, rest[0]);
        return -1;
    }
    if (!mode) {
        fprintf(stderr, "qwenc: nothing to do: give token ids, --prompt, --http PORT or --server "
                        "(or a command: qwenc run MODEL, qwenc serve MODEL; see qwenc --help)\n");
        return -1;
    }
    o->mode = mode;
    if ((o->json_schema || o->grammar || o->json_object) && mode != M_PROMPT) {
        fprintf(stderr, "%s: --json-schema, --grammar and --json-object go with --prompt (or run MODEL PROMPT), "
                        "not with %s\n", who, mode_word(mode));
        return -1;
    }
    /* Options that would be ignored in this mode: one line each. */
    for (int i = 0; i < o->n_given; i++)
        for (size_t k = 0; k < sizeof scopes / sizeof *scopes; k++)
            if (!strcmp(scopes[k].name, o->given[i]) && !(scopes[k].modes & mode)) {
                cli_warn("%s has no effect with %s: ignored", o->given[i], mode_word(mode));
                break;
            }
    /* ... and the ones another option makes moot. */
    if ((mode & M_GEN) && o->sampling_set && o->sampling.temperature == 0)
        for (int i = 0; i < o->n_given; i++)
            if (!strcmp(o->given[i], "--top-k") || !strcmp(o->given[i], "--top-p") || !strcmp(o->given[i], "--min-p") ||
                !strcmp(o->given[i], "--seed"))
                cli_warn("%s has no effect: sampling is greedy (temperature 0; give --temp T to sample)", o->given[i]);
    if (mode == M_PROMPT && o->raw && o->system) cli_warn("--system has no effect with --raw (no chat template): ignored");
    if (mode == M_TOKENS && o->logits_out && o->n_predict >= 0)
        cli_warn("-n has no effect with --logits-out (it scores the prompt, generates nothing): ignored");
    for (int i = 0; i < o->n_given && !o->spec; i++)
        if (!strcmp(o->given[i], "--spec-k")) cli_warn("--spec-k has no effect with --spec off: ignored");
    return 0;
}
