#!/usr/bin/env python3
"""bench_kv_type.py - speed and memory of the KV cache types (--kv-type).

    tools/bench_kv_type.py MODEL.gguf [--reps 3] [--ctx 2000] [--tg 64] [--threads 2]

Per round, each type (f32, f16, bf16; the order rotates every round, so
drift on a shared machine falls on every type alike) runs two qwenc
processes, with --spec off (plain decode steps) and greedy sampling:
  - long: the first CTX tokens of committed text (kv_type_fidelity.py's:
    prose, then C source, where greedy decoding goes on writing code) then
    TG tokens: the prefill figure (CTX tokens on an empty context) and the
    decode figure (TG steps reading CTX..CTX+TG cached positions);
  - short: one id then TG tokens: decode at a short context (a start token
    whose greedy run does not stop early, as bench_run.py picks).
Peak RSS (ru_maxrss of each process) of the long run. Prints the medians,
and each type's ratio to f32 per round (the median of those ratios).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TYPES = ("f32", "f16", "bf16")
RE = re.compile(r"prefill (\d+) tokens ([\d.]+) tok/s \| decode (\d+) tokens ([\d.]+) tok/s.*?finish (\w+)")


def qwenc(a, t, ids, n):
    cmd = [a.qwenc, a.model, "--tokens", " ".join(map(str, ids)), "-n", str(n), "--spec", "off", "--greedy",
           "--threads", a.threads, "--kv-type", t]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    m = RE.search(err)
    if p.returncode != 0 or not m:
        sys.exit(f"bench_kv_type: {' '.join(cmd[:3])} ... failed: {err[-500:]}")
    return {"prefill": float(m.group(2)), "n_gen": int(m.group(3)), "decode": float(m.group(4)),
            "rss_mb": ru.ru_maxrss / 1024}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--ctx", type=int, default=2000)
    ap.add_argument("--tg", type=int, default=64)
    ap.add_argument("--threads", default="2")
    ap.add_argument("--qwenc", default=os.path.join(ROOT, "qwenc"))
    a = ap.parse_args()
    texts = [os.path.join(ROOT, p) for p in (
        "tests/fixtures/text/gettysburg.txt", "tests/fixtures/real/texts/heapq_about.txt",
        "tests/fixtures/real/texts/textwrap_py.txt", "src/kernels/attn/attn_avx2.c")]
    text = "\n\n".join(open(p, encoding="utf-8").read() for p in texts)
    r = subprocess.run([a.qwenc, a.model, "--tokenize", "-"], input=text.encode(), capture_output=True, check=True)
    long_ids = [int(x) for x in r.stdout.split()][: a.ctx]
    start = 9707
    res = {t: [] for t in TYPES}
    for r in range(a.reps):
        order = TYPES[r % 3:] + TYPES[:r % 3]
        for t in order:
            lo = qwenc(a, t, long_ids, a.tg + 1)
            sh = qwenc(a, t, [start], a.tg + 1)
            res[t].append({"prefill": lo["prefill"], "decode_long": lo["decode"], "decode_short": sh["decode"],
                           "rss_mb": lo["rss_mb"]})
            print(f"round {r} {t}: prefill {lo['prefill']:.1f} tok/s, decode at {a.ctx} {lo['decode']:.2f} tok/s "
                  f"({lo['n_gen']} tokens), "
                  f"decode short {sh['decode']:.2f} tok/s ({sh['n_gen']} tokens), peak RSS {lo['rss_mb']:.0f} MB",
                  flush=True)
    print(f"\nmedians of {a.reps} rounds (ratio to f32: median of the per-round ratios), load {os.getloadavg()[0]:.1f}")
    for t in TYPES:
        line = [f"kv {t:4s}:"]
        for k, unit in (("prefill", "tok/s"), ("decode_long", "tok/s"), ("decode_short", "tok/s"), ("rss_mb", "MB")):
            med = statistics.median(x[k] for x in res[t])
            ratio = statistics.median(x[k] / y[k] for x, y in zip(res[t], res["f32"]))
            line.append(f"{k} {med:.2f} {unit} ({ratio:.3f}x)")
        print("  ".join(line))


if __name__ == "__main__":
    main()
