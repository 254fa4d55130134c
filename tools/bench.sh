#!/bin/sh
# bench.sh - `make bench`: qwenc against llama.cpp on a synthetic Qwen2.5-0.5B.
#
# 1. A model folder with exactly Qwen2.5-0.5B-Instruct's shapes and random BF16
#    weights: `./qwenc synth` (fallback: tools/bench_synth.py), config from
#    $BENCH_CONFIG, else ../shared/models/qwen2.5-0.5b-instruct/config.json, else
#    the copy in tools/bench_config_qwen2.5-0.5b.json; the real Qwen2.5 tokenizer
#    from tests/fixtures/tokenizer. Reused while it exists (delete $BENCH_DIR to redo).
# 2. The same weights as GGUF, BF16, F16 and Q8_0 (tools/to_gguf.py, `gguf` package);
#    qwenc runs the folder as stored and with --quant q8_0 (same bytes as the Q8_0 GGUF).
# 3. tools/membw.c, built here for this machine.
# 4. tools/bench_run.py: interleaved repetitions of qwenc and llama.cpp
#    (llama-cpp-python), table on stdout, JSON in build/bench.json.
#
# Environment:
#   BENCH_QUICK=1     1 repetition, prompts 32/128, 32 decode tokens (smoke test)
#   BENCH_REPS=N      repetitions (default 3)
#   BENCH_THREADS=N   threads for both engines (default 2)
#   BENCH_DIR=DIR     where the models go (default build/bench/llm)
#   BENCH_NO_LLAMA=1  measure qwenc only
#   BENCH_LLAMA_OMP=  OMP_WAIT_POLICY for llama.cpp (default passive; see bench_run.py)
#   PYTHON=...        interpreter with numpy, gguf, llama_cpp (default: the venv made
#                     by tools/venv.sh --bench, which builds llama-cpp-python once)
#   QWENC=./qwenc
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
BENCH_DIR=${BENCH_DIR:-build/bench/llm}
QWENC=${QWENC:-./qwenc}
THREADS=${BENCH_THREADS:-2}
QUICK=${BENCH_QUICK:-0}
if [ "$QUICK" = 1 ]; then REPS=${BENCH_REPS:-1}; else REPS=${BENCH_REPS:-3}; fi
mkdir -p "$BENCH_DIR"

say() { echo "bench.sh: $*" >&2; }

# --- python -------------------------------------------------------------------
if [ -z "${PYTHON:-}" ]; then
  if [ "${BENCH_NO_LLAMA:-0}" = 1 ]; then
    PYTHON=python3
  else
    PYTHON=$(tools/venv.sh --bench | tail -n 1)
  fi
fi
"$PYTHON" -c "import numpy" 2>/dev/null || { say "$PYTHON has no numpy (tools/venv.sh --bench)"; exit 1; }

# --- config -------------------------------------------------------------------
if [ -n "${BENCH_CONFIG:-}" ]; then
  config=$BENCH_CONFIG
elif [ -f ../shared/models/qwen2.5-0.5b-instruct/config.json ]; then
  config=../shared/models/qwen2.5-0.5b-instruct/config.json
else
  config=tools/bench_config_qwen2.5-0.5b.json
fi

# --- model --------------------------------------------------------------------
model=$BENCH_DIR/synth-0.5b
tok=$BENCH_DIR/tok
tokdir=
if tests/fixtures/tokenizer/prepare.sh "$tok" >/dev/null 2>&1 && [ -f "$tok/qwen2.5/tokenizer.json" ]; then
  tokdir=$tok/qwen2.5
fi
if [ ! -f "$model/model.safetensors" ] || [ "$config" -nt "$model/model.safetensors" ]; then
  say "synthesizing $model from $config"
  if [ -n "$tokdir" ]; then tokarg="--tokenizer $tokdir"; else tokarg="--no-tokenizer"; fi
  # shellcheck disable=SC2086
  if ! "$QWENC" synth "$model" --config "$config" $tokarg; then
    say "'$QWENC synth' failed; using tools/bench_synth.py"
    # shellcheck disable=SC2086
    "$PYTHON" tools/bench_synth.py "$model" --config "$config" ${tokdir:+--tokenizer "$tokdir"}
  fi
fi

# --- GGUF ---------------------------------------------------------------------
ggufs=
if [ "${BENCH_NO_LLAMA:-0}" != 1 ]; then
  if ! "$PYTHON" -c "import llama_cpp, gguf" 2>/dev/null; then
    say "$PYTHON lacks llama_cpp or gguf (tools/venv.sh --bench, or BENCH_NO_LLAMA=1)"
    exit 1
  fi
  for t in bf16 f16 q8_0; do
    g=$BENCH_DIR/synth-0.5b-$t.gguf
    if [ ! -f "$g" ] || [ "$model/model.safetensors" -nt "$g" ]; then
      say "converting to $g"
      "$PYTHON" tools/to_gguf.py "$model" "$g" --type "$t"
    fi
    ggufs="$ggufs --gguf $t=$g"
  done
fi

# --- bandwidth probe ----------------------------------------------------------
membw=$BENCH_DIR/membw
if [ ! -x "$membw" ] || [ tools/membw.c -nt "$membw" ]; then
  ${CC:-cc} -std=c11 -O3 -march=native -pthread tools/membw.c -o "$membw" 2>/dev/null ||
    ${CC:-cc} -std=c11 -O3 -pthread tools/membw.c -o "$membw"
fi

# --- run ----------------------------------------------------------------------
quick=
[ "$QUICK" = 1 ] && quick=--quick
# shellcheck disable=SC2086
exec "$PYTHON" tools/bench_run.py --qwenc "$QWENC" --model "$model" $ggufs --qwenc-quant q8_0 --membw "$membw" \
  --python "$PYTHON" --reps "$REPS" --threads "$THREADS" $quick --out build/bench.json
