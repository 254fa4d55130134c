#!/usr/bin/env bash
# benchmark.sh - the seed's throughput benchmark, through qwenc's HTTP server.
#
#   ./benchmark.sh [--url URL | --model DIR|REPO] [--threads N] [--runs N]
#                  [--natural-eos|--ignore-eos] [--no-cold-start] [--out FILE]
#                  [--compare-llamacpp [--gguf FILE]]
#
# Five prompts of the seed's sizes (inputs ~23, 29, 33, 36 and 122 tokens
# after the chat template; at most 10, 8, 84, 200 and 11 tokens out, set with
# max_tokens) go through POST /v1/completions, greedy; on a real model each
# answer ends where the model stops (EOS) or at max_tokens, and the answers'
# text is saved with the numbers. For each: prefill and
# decode tok/s (the server's own timings) and the latency seen by the client;
# then the averages, the cold start of single-shot mode (process start to
# exit, `qwenc MODEL IDS 1`, file cache warm), and the decode-speed
# consistency (mean and standard deviation over --runs repeats of one
# prompt). Prints the seed's table and writes benchmark_results.json.
#
#   --url URL           use a running server (else one is started on a free
#                       port with MODEL and stopped at the end); give --model
#                       too for the cold-start measurement
#   --model M           default: a real model where one is here: what
#                       ./setup.sh chose (models/MODEL) unless that is the
#                       synthetic one, else Qwen/Qwen2.5-0.5B-Instruct from the
#                       Hugging Face cache, else the real Qwen2.5-Coder-0.5B
#                       GGUF (tools/real-model.sh --path); the synthetic
#                       models/qwen2.5-0.5b-synth only when none is
#   --runs N            consistency repeats (default 3)
#   --natural-eos       let the model stop at EOS (the default on real weights)
#   --ignore-eos        always generate max_tokens (the seed's exact output
#                       lengths; the default on random weights, which never
#                       stop sensibly)
#   --compare-llamacpp  measure the same token counts on the same weights with
#                       llama.cpp's own llama-bench (-p IN -n OUT per prompt:
#                       prefill of IN tokens, OUT tokens decoded from an empty
#                       context) and print both side by side. llama-bench:
#                       $LLAMA_BIN, else tools/llama-tools.sh (built once from
#                       the llama-cpp-python sdist's llama.cpp; skipped with a
#                       message when it cannot be had). GGUF: --gguf FILE, else
#                       MODEL itself when it is a .gguf file, else made with
#                       tools/to_gguf.py into build/bench/ (Python with gguf:
#                       $PYTHON, else .venv/bin/python, else python3).
#
# Needs python3 (standard library only, except gguf for a conversion). Exit
# status 0 when every request succeeded.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(pwd)

URL=
MODEL=
THREADS=
RUNS=3
IGNORE_EOS=auto
COLD=1
OUT=benchmark_results.json
LLAMA=0
GGUF=
while [ $# -gt 0 ]; do
  case $1 in
    --url) URL=${2:?--url needs a value}; shift ;;
    --model) MODEL=${2:?--model needs a value}; shift ;;
    --threads) THREADS=${2:?--threads needs a value}; shift ;;
    --runs) RUNS=${2:?--runs needs a value}; shift ;;
    --natural-eos) IGNORE_EOS=0 ;;
    --ignore-eos) IGNORE_EOS=1 ;;
    --no-cold-start) COLD=0 ;;
    --out) OUT=${2:?--out needs a value}; shift ;;
    --compare-llamacpp) LLAMA=1 ;;
    --gguf) GGUF=${2:?--gguf needs a value}; shift ;;
    -h|--help) sed -n '2,41p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "benchmark.sh: unknown option '$1' (see ./benchmark.sh --help)" >&2; exit 2 ;;
  esac
  shift
done
case $RUNS in ''|*[!0-9]*) echo "benchmark.sh: --runs: expected a number" >&2; exit 2 ;; esac

PY3=$(command -v python3 || true)
[ -n "$PY3" ] || { echo "benchmark.sh: python3 is needed" >&2; exit 1; }
[ -x ./qwenc ] || { echo "benchmark.sh: ./qwenc is not built (run ./setup.sh or make)" >&2; exit 1; }

# With --url and no --model the server's model is unknown here: no cold start.
is_synth() { [ -f "$1/config.json" ] && grep -q '"qwenc_random_weights"' "$1/config.json"; }
if [ -z "$MODEL" ] && [ -z "$URL" ]; then
  real_gguf=$(tools/real-model.sh --path 0.5b 2>/dev/null || true)
  chosen=
  [ -f models/MODEL ] && chosen=$(cat models/MODEL)
  if [ -n "$chosen" ] && [ -e "$chosen" ] && ! is_synth "$chosen"; then MODEL=$chosen
  elif [ -f "${HF_HUB_CACHE:-${HF_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/huggingface}/hub}/models--Qwen--Qwen2.5-0.5B-Instruct/refs/main" ]; then
    MODEL=Qwen/Qwen2.5-0.5B-Instruct
  elif [ -n "$real_gguf" ] && [ -f "$real_gguf" ]; then MODEL=$real_gguf
  elif [ -n "$chosen" ] && [ -e "$chosen" ]; then MODEL=$chosen
  elif [ -d models/qwen2.5-0.5b-synth ]; then MODEL=models/qwen2.5-0.5b-synth
  else
    echo "benchmark.sh: no model: run ./setup.sh first, or give --model DIR|REPO or --url URL" >&2
    exit 1
  fi
fi

SERVER_PID=
SERVER_LOG=
cleanup() {
  if [ -n "$SERVER_PID" ]; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  [ -n "$SERVER_LOG" ] && rm -f "$SERVER_LOG"
}
trap cleanup EXIT INT TERM

thr=()
[ -n "$THREADS" ] && thr=(--threads "$THREADS")
if [ -z "$URL" ]; then
  SERVER_LOG=$(mktemp "${TMPDIR:-/tmp}/qwenc-bench.XXXXXX")
  ./qwenc "$MODEL" --http 0 --parallel 1 ${thr[@]+"${thr[@]}"} 2>"$SERVER_LOG" &
  SERVER_PID=$!
  for _ in $(seq 1 600); do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      echo "benchmark.sh: the server exited:" >&2; cat "$SERVER_LOG" >&2; exit 1
    fi
    line=$(grep -o 'listening on http://[^ ]*' "$SERVER_LOG" 2>/dev/null | head -n 1 || true)
    if [ -n "$line" ]; then URL=${line#listening on }; break; fi
    sleep 0.1
  done
  [ -n "$URL" ] || { echo "benchmark.sh: the server did not start in 60 s:" >&2; cat "$SERVER_LOG" >&2; exit 1; }
  URL=${URL/0.0.0.0/127.0.0.1}
  echo "server: ./qwenc $MODEL --http 0 --parallel 1 (pid $SERVER_PID) at $URL"
fi

PYBENCH=
LLAMA_BENCH=
if [ $LLAMA = 1 ]; then
  if [ -n "${PYTHON:-}" ]; then PYBENCH=$PYTHON
  elif [ -x .venv/bin/python ]; then PYBENCH=.venv/bin/python
  else PYBENCH=$PY3; fi
  if bin=$(tools/llama-tools.sh --need llama-bench); then
    LLAMA_BENCH=$bin/llama-bench
  else
    echo "benchmark.sh: llama.cpp's llama-bench is not available (see above): no comparison" >&2
    LLAMA=0
  fi
fi
if [ $LLAMA = 1 ]; then
  if [ -z "$GGUF" ] && [ -f "$MODEL" ] && [ "${MODEL%.gguf}" != "$MODEL" ]; then GGUF=$MODEL; fi
  if [ -z "$GGUF" ]; then
    [ -n "$MODEL" ] || { echo "benchmark.sh: --compare-llamacpp with --url needs --gguf FILE" >&2; exit 1; }
    mdir=$MODEL
    [ -d "$mdir" ] || mdir=$(./qwenc pull "$MODEL" --progress none 2>/dev/null | tail -n 1)
    [ -f tools/to_gguf.py ] || { echo "benchmark.sh: tools/to_gguf.py not found: give --gguf FILE" >&2; exit 1; }
    mkdir -p build/bench
    GGUF=build/bench/$(basename "$(cd "$mdir" && pwd)").gguf
    if [ ! -f "$GGUF" ] || [ "$mdir/model.safetensors" -nt "$GGUF" ]; then
      echo "converting $mdir to $GGUF (tools/to_gguf.py)"
      "$PYBENCH" tools/to_gguf.py "$mdir" "$GGUF" >&2 || { echo "benchmark.sh: tools/to_gguf.py failed" >&2; exit 1; }
    fi
  fi
fi

export BENCH_URL=$URL BENCH_MODEL=$MODEL BENCH_RUNS=$RUNS BENCH_IGNORE_EOS=$IGNORE_EOS BENCH_COLD=$COLD
export BENCH_OUT=$OUT BENCH_THREADS=$THREADS BENCH_LLAMA=$LLAMA BENCH_GGUF=$GGUF BENCH_LLAMA_BENCH=$LLAMA_BENCH
export BENCH_ROOT=$ROOT

"$PY3" - <<'PYEOF'
import json, math, os, platform, re, statistics, subprocess, sys, time, urllib.request, urllib.error

URL = os.environ["BENCH_URL"].rstrip("/")
MODEL = os.environ["BENCH_MODEL"]
RUNS = int(os.environ["BENCH_RUNS"])
IGNORE_EOS = os.environ["BENCH_IGNORE_EOS"]  # "1", "0" or "auto" (decided below)
THREADS = os.environ["BENCH_THREADS"]
ROOT = os.environ["BENCH_ROOT"]
SYSTEM = "You are a helpful assistant."

# The seed's five prompts: (name, prompt, max_tokens). Their lengths after
# the Qwen2.5 chat template with SYSTEM are 23, 29, 33, 36 and 122 tokens.
PROMPTS = [
    ("tiny", "Please say hi.", 10),
    ("short", "What is 2+2? Answer briefly.", 8),
    ("medium", "Explain how a neural network learns from data, step by step.", 84),
    ("long", "Write a short story about a lonely robot who learns to paint in an old town.", 200),
    ("stress", "The history of computing spans centuries, from the abacus and mechanical calculators of Pascal "
               "and Leibniz to Babbage's Analytical Engine and Ada Lovelace's first published algorithm. During "
               "the Second World War, machines such as Colossus and ENIAC showed that electronic circuits could "
               "perform thousands of operations per second. The transistor, invented in 1947, and the integrated "
               "circuit a decade later made computers smaller, cheaper and more reliable. Summarize this "
               "paragraph in one sentence.", 11),
]


def chatml(prompt):
    return (f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{prompt}<|im_end|>\n"
            f"<|im_start|>assistant\n")


def get(path, timeout=30):
    with urllib.request.urlopen(URL + path, timeout=timeout) as r:
        return json.loads(r.read().decode())


def complete(prompt, max_tokens, ignore_eos=None):
    body = {"prompt": prompt, "max_tokens": max_tokens, "system": SYSTEM, "temperature": 0}
    if IGNORE_EOS if ignore_eos is None else ignore_eos:
        body["ignore_eos"] = True
    req = urllib.request.Request(URL + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            j = json.loads(r.read().decode())
    except urllib.error.HTTPError as e:
        sys.exit(f"benchmark.sh: POST /v1/completions: HTTP {e.code}: {e.read()[:500]!r}")
    except urllib.error.URLError as e:
        sys.exit(f"benchmark.sh: POST {URL}/v1/completions: {e}")
    lat = (time.perf_counter() - t0) * 1000
    for k in ("prompt_tokens", "gen_tokens", "prefill_tps", "decode_tps"):
        if k not in j:
            sys.exit(f"benchmark.sh: the response has no '{k}' (is {URL} a qwenc server?): {json.dumps(j)[:300]}")
    fin = (j.get("choices") or [{}])[0].get("finish_reason")
    return {"input": j["prompt_tokens"], "output": j["gen_tokens"], "prefill_tps": j["prefill_tps"],
            "decode_tps": j["decode_tps"], "latency_ms": lat, "server_elapsed_s": j.get("elapsed_s"),
            "max_tokens": max_tokens, "finish_reason": fin, "text": j.get("text")}


def mean(xs):
    return sum(xs) / len(xs) if xs else 0.0


random_weights = False
try:
    h = get("/health")
    random_weights = bool(h.get("random_weights"))
except Exception as e:
    sys.exit(f"benchmark.sh: GET {URL}/health failed: {e}")
if random_weights:
    print("\n*** The server's model has RANDOM weights (qwenc synth): speeds are real, text is not. ***")
# Real weights: answers as the model ends them; random ones: the seed's lengths.
IGNORE_EOS = IGNORE_EOS == "1" or (IGNORE_EOS == "auto" and random_weights)
print(f"output lengths: {'max_tokens (EOS ignored)' if IGNORE_EOS else 'until EOS or max_tokens'}")

print(f"\nwarming up ({URL}) ...", flush=True)
complete("Hi", 2)

rows = []
line = "─" * 66
print(f"\n{'Prompt':<14}{'Input':>5}{'Output':>7}{'Prefill(t/s)':>13}{'Decode(t/s)':>13}{'Latency(ms)':>13}")
print(line)
for name, prompt, mt in PROMPTS:
    r = complete(prompt, mt)
    r["name"] = name
    rows.append(r)
    print(f"{name:<14}{r['input']:>5}{r['output']:>7}{r['prefill_tps']:>13.1f}{r['decode_tps']:>13.1f}"
          f"{r['latency_ms']:>13.0f}", flush=True)
print(line)
avg_prefill = mean([r["prefill_tps"] for r in rows])
avg_decode = mean([r["decode_tps"] for r in rows if r["output"] > 1])
print(f"{'Average':<26}{avg_prefill:>13.1f}{avg_decode:>13.1f}")
if not random_weights:
    print("\nAnswers:")
    for r in rows:
        t = (r["text"] or "").replace("\n", " ")
        print(f"  {r['name']:<8} [{r['finish_reason']}] {t[:110]}{'…' if len(t) > 110 else ''}")

cold = None
if os.environ["BENCH_COLD"] == "1" and MODEL:
    q = os.path.join(ROOT, "qwenc")
    t = subprocess.run([q, MODEL, "--tokenize", chatml(PROMPTS[0][1])], capture_output=True, timeout=120)
    if t.returncode == 0 and t.stdout.split():
        ids = " ".join(t.stdout.decode().split())
    else:  # tokenizer not available: the seed's own example ids
        ids = "151644 8948 198 2610 525 264 10950 17847 13 151645 198 151644 872 198 13048 151645 198 151644 77091 198"
    args = [q, MODEL, ids, "1"] + (["--threads", THREADS] if THREADS else [])
    t0 = time.perf_counter()
    p = subprocess.run(args, capture_output=True, timeout=600)
    dt = time.perf_counter() - t0
    if p.returncode == 0:
        m = re.search(rb"first token ([\d.]+) s", p.stderr)
        cold = {"seconds": dt, "first_token_s": float(m.group(1)) if m else None, "n_prompt": len(ids.split())}
        print(f"\nCold start (single-shot): ~{dt:.{1 if dt >= 1 else 2}f}s (process start to exit: load, {len(ids.split())}-token "
              f"prefill, 1 token; file cache warm)")
    else:
        print(f"\nCold start: `{' '.join(args[:2])} IDS 1` failed: {p.stderr.decode(errors='replace')[-300:]}")

consistency = None
if RUNS > 0:
    name, prompt, _ = PROMPTS[2]
    n_tok = 32
    speeds = []
    for _ in range(RUNS):
        speeds.append(complete(prompt, n_tok, ignore_eos=True)["decode_tps"])  # always n_tok tokens
    sd = statistics.stdev(speeds) if len(speeds) > 1 else 0.0
    m = mean(speeds)
    consistency = {"prompt": name, "max_tokens": n_tok, "runs": RUNS, "decode_tps": speeds, "mean": m,
                   "stdev": sd, "cv_percent": 100 * sd / m if m else 0}
    print(f"Decode consistency ({RUNS} runs of '{name}', {n_tok} tokens): {m:.1f} ± {sd:.1f} tok/s "
          f"(stdev {100 * sd / m if m else 0:.1f}%)")

llama = None
if os.environ["BENCH_LLAMA"] == "1":
    gguf = os.environ["BENCH_GGUF"]
    th = THREADS or str(os.cpu_count() or 2)
    ins = sorted({r["input"] for r in rows})
    outs = sorted({r["output"] for r in rows if r["output"] > 0})
    cmd = [os.environ["BENCH_LLAMA_BENCH"], "-m", gguf, "-t", th, "-r", "1", "-o", "json",
           "-p", ",".join(map(str, ins)), "-n", ",".join(map(str, outs))]
    print(f"\nllama.cpp (llama-bench, {th} threads) on {gguf}: the same token counts ...", flush=True)
    env = dict(os.environ)
    omp = os.environ.get("BENCH_LLAMA_OMP", "passive")  # as make bench: see tools/bench_run.py
    if omp:
        env["OMP_WAIT_POLICY"] = omp
    p = subprocess.run(cmd, capture_output=True, timeout=3600, env=env)
    try:
        recs = json.loads(p.stdout.decode())
    except ValueError:
        recs = None
    if p.returncode != 0 or not isinstance(recs, list):
        print(f"llama-bench failed (exit {p.returncode}): {p.stderr.decode(errors='replace')[-1500:]}")
    else:
        pp = {r["n_prompt"]: r["avg_ts"] for r in recs if r.get("n_prompt") and not r.get("n_gen")}
        tg = {r["n_gen"]: r["avg_ts"] for r in recs if r.get("n_gen") and not r.get("n_prompt")}
        llama = [{"name": a["name"], "input": a["input"], "output": a["output"],
                  "prefill_tps": pp.get(a["input"]), "decode_tps": tg.get(a["output"])} for a in rows]
        print(f"\n{'Prompt':<10}{'In':>5}{'Out':>5} | {'Prefill qwenc':>14}{'llama.cpp':>11} | "
              f"{'Decode qwenc':>13}{'llama.cpp':>11}")
        print("─" * 76)
        def f1(v):
            return "-" if v is None else f"{v:.1f}"
        for a, b in zip(rows, llama):
            print(f"{a['name']:<10}{a['input']:>5}{a['output']:>5} | {a['prefill_tps']:>14.1f}"
                  f"{f1(b['prefill_tps']):>11} | {a['decode_tps']:>13.1f}{f1(b['decode_tps']):>11}")
        print("─" * 76)
        lp = mean([b["prefill_tps"] for b in llama if b["prefill_tps"]])
        ld = mean([b["decode_tps"] for b in llama if b["decode_tps"] and b["output"] > 1])
        print(f"{'Average':<20} | {avg_prefill:>14.1f}{lp:>11.1f} | {avg_decode:>13.1f}{ld:>11.1f}")
        print("llama-bench decodes OUT tokens from an empty context; qwenc's decode follows its prompt")

cpu = platform.processor() or platform.machine()
try:
    with open("/proc/cpuinfo") as f:
        m = re.search(r"model name\s*:\s*(.*)", f.read())
        if m:
            cpu = m.group(1).strip()
except OSError:
    pass
res = {
    "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "machine": {"cpu": cpu, "cores": os.cpu_count(), "system": platform.system(), "arch": platform.machine()},
    "url": URL, "model": MODEL, "random_weights": random_weights, "ignore_eos": IGNORE_EOS,
    "threads": int(THREADS) if THREADS else None,
    "prompts": rows,
    "average": {"prefill_tps": avg_prefill, "decode_tps": avg_decode},
    "cold_start": cold,
    "consistency": consistency,
    "llamacpp": {"gguf": os.environ["BENCH_GGUF"], "prompts": llama} if llama else None,
}
with open(os.environ["BENCH_OUT"], "w") as f:
    json.dump(res, f, indent=2)
print(f"\nResults saved to {os.environ['BENCH_OUT']}")
PYEOF
