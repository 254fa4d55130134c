#!/usr/bin/env python3
"""bench_ab.py - one qwenc binary in two environments (A, B), interleaved ABBA, on GGUF files.

  python tools/bench_ab.py --qwenc ./qwenc --a QWENC_REPACK=0 [--b ...] [--env QWENC_ISA=avx2]
                           [--reps 4] [--threads 2] [--pp 512] [--tg 128] FILE.gguf ...

For a switch that only an environment variable flips (QWENC_REPACK, QWENC_ISA,
...): tools/bench_run.py compares qwenc with llama.cpp, this compares qwenc
with itself. Per file and repetition r, A then B (r even) or B then A (r odd),
each a prefill run (PP random ids, `-n 1 --warmup`: its "prefill" figure) and
a decode run (one start token, `-n TG+1 --warmup`: its "decode" figure), as
bench_run.py measures them; prints every run with the 1-minute load average
and, per file, the medians and the B/A ratios. --env applies to both sides.
"""
import argparse
import os
import random
import re
import statistics
import subprocess
import sys

RE_QW = re.compile(r"prefill (\d+) tokens ([\d.]+) tok/s \| decode (\d+) tokens ([\d.]+) tok/s")


def env_of(pairs):
    out = {}
    for p in pairs:
        k, sep, v = p.partition("=")
        if not sep:
            sys.exit(f"bench_ab: '{p}' is not NAME=VALUE")
        out[k] = v
    return out


def run(args, env, path, ids, n):
    cmd = [args.qwenc, path, "--tokens", " ".join(map(str, ids)), "-n", str(n), "--warmup", "--threads",
           str(args.threads), "--ctx", str(max(len(ids) + n + 1, 256)), "--spec", "off"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    m = RE_QW.search(p.stderr)
    if p.returncode != 0 or not m:
        tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        sys.exit(f"bench_ab: {path}: exit {p.returncode}: {tail}")
    k = re.search(r"kernels: (\w+)", p.stderr)
    return float(m.group(2)), float(m.group(4)), int(m.group(3)), k.group(1) if k else "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--qwenc", default="./qwenc")
    ap.add_argument("--a", action="append", default=[], help="NAME=VALUE for side A (repeatable)")
    ap.add_argument("--b", action="append", default=[], help="NAME=VALUE for side B (repeatable)")
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE for both sides (repeatable)")
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    common = env_of(args.env)
    sides = {}
    for name, pairs in (("A", args.a), ("B", args.b)):
        e = dict(os.environ, **common)
        for k in list(env_of(args.a)) + list(env_of(args.b)):  # a name one side sets is unset on the other
            e.pop(k, None)
        e.update(env_of(pairs))
        sides[name] = e
    print(f"A: {' '.join(args.a) or '(default)'}  B: {' '.join(args.b) or '(default)'}  both: {' '.join(args.env)}")
    rng = random.Random(1)
    summary = []
    for path in args.files:
        ids = [rng.randrange(100, 150000) for _ in range(args.pp)]
        res = {"A": [], "B": []}
        for r in range(args.reps):
            for side in ("A", "B") if r % 2 == 0 else ("B", "A"):
                pp, _, _, kern = run(args, sides[side], path, ids, 1)
                _, tg, ngen, _ = run(args, sides[side], path, [1000], args.tg + 1)
                res[side].append((pp, tg))
                print(f"{os.path.basename(path)} {side} ({kern}) pp{args.pp} {pp:.1f} tg{args.tg} {tg:.2f} "
                      f"(decoded {ngen}) load {os.getloadavg()[0]:.2f}", flush=True)
        med = {s: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for s, v in res.items()}
        summary.append(f"{os.path.basename(path)}: pp{args.pp} A {med['A'][0]:.1f} B {med['B'][0]:.1f} "
                       f"(B/A {med['B'][0] / med['A'][0]:.2f}), tg{args.tg} A {med['A'][1]:.2f} B {med['B'][1]:.2f} "
                       f"(B/A {med['B'][1] / med['A'][1]:.2f})")
    print("medians:")
    for line in summary:
        print("  " + line)


if __name__ == "__main__":
    main()
