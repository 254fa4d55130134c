#!/usr/bin/env python3
"""mca_loops.py - the innermost loops of a kernel function, as llvm-mca sees them.

  python3 tools/mca_loops.py OBJ FUNCTION [--base OBJ2] [--cpu znver3] [--min N] [--all]

Why: the shared hosts this project is measured on move their clock by 30%
and more from minute to minute (2.3-3.2 GHz on the same Zen 3 in one
session), so a kernel change worth 3-10% drowns in the noise of any timing.
llvm-mca's model of a CPU is deterministic: it does not say how fast a loop
runs on the real core, but it gives the same answer twice, so it can rank two
builds of the same loop, and its bottleneck report names the pipes a loop
saturates. Use it beside a timing, not instead of one (docs/PERFORMANCE.md,
session 21: a loop that mca ranked 1.2x faster by its FP pipes ran 0.85x, load
bound, on the core).

OBJ: an object file (e.g. build/src/kernels/qdot/qrepack_avx2.o); FUNCTION: a
symbol in it (static ones too; GCC's clones such as NAME.part.0 are matched by
prefix). Every innermost loop (a backward jump with no other jump inside)
whose body has at least --min instructions (default 16) is run through
`llvm-mca -mcpu=CPU` for 1000 iterations and printed with its address, its
instruction count, the cycles per iteration mca predicts and its block
reciprocal throughput. --base OBJ2: the same function from a second build
(e.g. the one before a change): both lists, and the instruction mnemonics
whose counts differ between the two builds' loops, loop by loop in order.
--all: also each loop's pipe pressure (llvm-mca -bottleneck-analysis).
Needs objdump (binutils) and llvm-mca (Debian: llvm).
"""
import argparse
import collections
import re
import shutil
import subprocess
import sys
import tempfile

RE_INS = re.compile(r"\s*([0-9a-f]+):\s*(.*)")
RE_JUMP = re.compile(r"j\w+\s+([0-9a-f]+)\s*<")


def disassemble(obj, func):
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", obj], capture_output=True, text=True, check=True).stdout
    funcs, cur = {}, None
    for line in out.splitlines():
        m = re.match(r"[0-9a-f]+ <(.+)>:$", line)
        if m:
            cur = m.group(1)
            funcs[cur] = []
            continue
        m = RE_INS.match(line)
        if cur and m and m.group(2):
            funcs[cur].append((int(m.group(1), 16), m.group(2).strip()))
    names = [n for n in funcs if n == func or n.startswith(func + ".")]
    if not names:
        sys.exit(f"mca_loops: no function {func} in {obj} (have: {', '.join(sorted(funcs)[:20])} ...)")
    return [(n, funcs[n]) for n in names]


def loops(ins, min_len):
    at = {a: i for i, (a, _) in enumerate(ins)}
    for i, (a, text) in enumerate(ins):
        m = RE_JUMP.match(text)
        if not m:
            continue
        tgt = int(m.group(1), 16)
        if tgt >= a or tgt not in at:
            continue
        body = [t for _, t in ins[at[tgt]:i]]
        if len(body) >= min_len and not any(re.match(r"j\w+\s", t) for t in body):
            yield tgt, [re.sub(r"\s+<.*>", "", t) for t in body]


def mca(body, cpu, extra):
    with tempfile.NamedTemporaryFile("w", suffix=".s") as f:
        f.write("\n".join(body) + "\n")
        f.flush()
        out = subprocess.run(["llvm-mca", f"-mcpu={cpu}", "-iterations=1000", *extra, f.name], capture_output=True,
                             text=True).stdout
    m_cyc, m_rthr = re.search(r"Total Cycles:\s+(\d+)", out), re.search(r"Block RThroughput:\s+([\d.]+)", out)
    if not m_cyc or not m_rthr:
        sys.exit(f"mca_loops: llvm-mca -mcpu={cpu} gave no timing for a loop (unknown CPU or instruction?)")
    return int(m_cyc.group(1)) / 1000, float(m_rthr.group(1)), out


def report(obj, func, args):
    rows = []
    for name, ins in disassemble(obj, func):
        for addr, body in loops(ins, args.min):
            cyc, rthr, out = mca(body, args.cpu, ["-bottleneck-analysis"] if args.all else [])
            rows.append((name, addr, body, cyc, rthr, out))
    return rows


def show(title, rows, args):
    print(f"{title}: {len(rows)} loop(s)")
    for name, addr, body, cyc, rthr, out in rows:
        print(f"  {name}+{addr:x}: {len(body)} instructions, mca {cyc:.2f} cycles/iteration "
              f"(block reciprocal throughput {rthr})")
        if args.all:
            m = re.search(r"Throughput Bottlenecks:.*?(?=\n\n)", out, re.S)
            if m:
                print("    " + m.group(0).replace("\n", "\n    "))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("obj")
    ap.add_argument("func")
    ap.add_argument("--base", help="the same function from another build, to compare")
    ap.add_argument("--cpu", default="znver3")
    ap.add_argument("--min", type=int, default=16, help="shortest loop body reported (instructions)")
    ap.add_argument("--all", action="store_true", help="each loop's bottleneck analysis too")
    args = ap.parse_args()
    for tool in ("objdump", "llvm-mca"):
        if not shutil.which(tool):
            sys.exit(f"mca_loops: {tool} not found (Debian: binutils, llvm)")
    new = report(args.obj, args.func, args)
    if not args.base:
        show(f"{args.obj} {args.func}", new, args)
        return 0
    old = report(args.base, args.func, args)
    show(f"base {args.base} {args.func}", old, args)
    show(f"new  {args.obj} {args.func}", new, args)
    for (_, ao, bo, co, _, _), (_, an, bn, cn, _, _) in zip(old, new):
        a, b = collections.Counter(t.split()[0] for t in bo), collections.Counter(t.split()[0] for t in bn)
        diff = ", ".join(f"{k} {a[k]}->{b[k]}" for k in sorted(set(a) | set(b)) if a[k] != b[k])
        print(f"  loop {ao:x} -> {an:x}: {co:.2f} -> {cn:.2f} cycles ({co / cn:.3f}x)" + (f"; {diff}" if diff else ""))
    if len(old) != len(new):
        print(f"  (the builds have {len(old)} and {len(new)} loops: the pairs above are by order)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
