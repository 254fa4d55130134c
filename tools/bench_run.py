#!/usr/bin/env python3
"""bench_run.py - qwenc and llama.cpp's llama-bench on the same GGUF files; the driver of tools/bench.sh.

  python tools/bench_run.py --qwenc ./qwenc --model LABEL=FILE.gguf [--model ...]
                            [--llama-bench BIN] [--membw BIN] [--reps 3] [--threads 2]
                            [--pp 512] [--tg 128] [--qwenc-arg ARG ...] [--out-dir build/bench]

What is measured, per file, in BENCH_REPS interleaved rounds (every round runs
each file with qwenc and with llama-bench, alternating which goes first, and
the bandwidth probe once), reported as medians:
  - prefill: PP tokens (default 512) on an empty context, tok/s. llama-bench
    `-p PP` (one batch, random ids, after its warm-up run); qwenc
    `--tokens IDS -n 1 --warmup` (PP random ids, one untimed pass first), the
    "prefill N tokens X tok/s" figure it prints;
  - decode: TG tokens (default 128) one at a time from an empty context, tok/s.
    llama-bench `-n TG`; qwenc `--tokens ID -n TG+1 --warmup`, whose "decode"
    figure counts the TG forward passes after the first token (greedy
    sampling over the whole vocabulary included, as a user's run has). The
    start token is one for which greedy decoding does not reach EOS within
    TG+1 tokens (probed once per file), so both sides decode TG tokens;
  - memory read bandwidth with the benchmark's thread count (tools/membw.c),
    just before each file's runs in each round (the round's first probe
    serves its first file); the decode roofline of a file is the median of
    its own probes divided by the weight bytes one decode step reads: the sum
    of the file's tensor bytes, with the token embedding counted as one row
    (unless it is also the output matrix, tied, then in full). Per file, not
    per run: on a shared host the bandwidth changes by phases minutes long
    (measured 31-36 then 54-64 GB/s), and a probe minutes away from a file's
    decode made its share meaningless;
  - each round's ratios (that round's qwenc run over its llama-bench run),
    listed under the table: their spread says how far the medians' ratio
    can be trusted on a noisy host.
Writes OUT_DIR/bench-<UTC date>.md (a markdown table, also printed) and
OUT_DIR/bench-<UTC date>.json (settings, machine, every raw figure).
The llama.cpp side is skipped with a message when --llama-bench is not given
or fails; a file qwenc cannot run is reported, not fatal. Needs the `gguf`
package for the roofline (else that column is "-").
"""
import argparse
import json
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def log(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def run(cmd, env=None, timeout=3600):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
        return p.returncode, p.stdout, p.stderr
    except (OSError, subprocess.TimeoutExpired) as e:
        return -1, "", str(e)


# --- the file ---------------------------------------------------------------

_GGUF_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # value type -> bytes


def gguf_tensors(path):
    """[(name, shape, ggml type, bytes)] of a GGUF file's tensors, read from its
    header alone (the gguf package's reader decodes every metadata string,
    seconds on a 150k-token vocabulary; only its block sizes are used here)."""
    import mmap
    import struct

    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    with open(path, "rb") as fh:
        buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, buf, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0] if len(v) == 1 else v

    def string():
        nonlocal pos
        n = take("Q")
        pos += n
        return bytes(buf[pos - n:pos]).decode("utf-8", "replace")

    def skip(vtype):
        nonlocal pos
        if vtype == 8:
            n = take("Q")  # (not `pos += take(...)`: that adds to the pos read before take moved it)
            pos += n
        elif vtype == 9:
            etype, count = take("I"), take("Q")
            if etype in _GGUF_SCALAR:
                pos += count * _GGUF_SCALAR[etype]
            else:
                for _ in range(count):
                    skip(etype)
        else:
            pos += _GGUF_SCALAR[vtype]

    if bytes(buf[:4]) != b"GGUF":
        raise ValueError(f"{path}: not a GGUF file")
    pos = 4
    take("I")  # version
    n_tensors, n_kv = take("Q"), take("Q")
    for _ in range(n_kv):
        string()
        skip(take("I"))
    out = []
    for _ in range(n_tensors):
        name = string()
        shape = [take("Q") for _ in range(take("I"))]
        typ = take("I")
        take("Q")  # offset
        block, size = GGML_QUANT_SIZES[GGMLQuantizationType(typ)]
        n = 1
        for d in shape:
            n *= d
        out.append((name, shape, typ, n // block * size))
    buf.close()
    return out


def gguf_facts(path):
    """(rows of the token embedding = vocab, weight bytes one decode step
    reads) of a GGUF file, or (None, None) without the gguf package."""
    try:
        tensors = gguf_tensors(path)
    except ImportError:
        log("the gguf package is missing: no roofline")
        return None, None
    total = sum(t[3] for t in tensors)
    emb = next((t for t in tensors if t[0] == "token_embd.weight"), None)
    if emb is None:
        return None, total
    n_rows = emb[1][-1]  # GGUF shapes list the row length first
    if not any(t[0] == "output.weight" for t in tensors):  # tied: the embedding is the lm_head, read in full
        return n_rows, total
    return n_rows, total - emb[3] + emb[3] // n_rows


# --- qwenc ------------------------------------------------------------------

RE_QW = re.compile(r"prefill (\d+) tokens ([\d.]+) tok/s \| decode (\d+) tokens ([\d.]+) tok/s.*?finish (\w+)")


def qwenc(args, path, ids, n):
    # Plain decoding, as llama-bench's tg measures it: n-gram drafts would be
    # accepted on the synthetic files (their greedy output repeats) and
    # measure speculation instead (tools/bench_spec.py does that).
    cmd = [args.qwenc, path, "--tokens", " ".join(map(str, ids)), "-n", str(n), "--warmup",
           "--threads", str(args.threads), "--ctx", str(max(len(ids) + n + 1, 256)), "--spec", "off"] + args.qwenc_arg
    rc, _, err = run(cmd)
    m = RE_QW.search(err)
    if rc != 0 or not m:
        tail = (err.strip().splitlines() or ["(no output)"])[-1]
        return {"error": f"exit {rc}: {tail}"}
    k = re.search(r"kernels: (\w+)", err)
    return {"n_prompt": int(m.group(1)), "prefill": float(m.group(2)), "n_gen": int(m.group(3)),
            "decode": float(m.group(4)), "finish": m.group(5), "kernels": k.group(1) if k else None}


def decode_start(args, path, vocab):
    """A start token whose greedy continuation does not hit EOS within tg+1
    tokens (random-weight files: the first one tried)."""
    rng = random.Random(7)
    last = None
    for _ in range(8):
        tok = rng.randrange(100, min(vocab or 151643, 151643))
        r = qwenc(args, path, [tok], args.tg + 1)
        if "error" in r:
            return None, r["error"]
        last = r
        if r["n_gen"] == args.tg + 1:
            return tok, None
    log(f"{path}: every start token tried reached EOS early ({last['n_gen']} tokens); decode counts those")
    return tok, None


# --- llama.cpp --------------------------------------------------------------

def llama_bench(args, path):
    cmd = [args.llama_bench, "-m", path, "-p", str(args.pp), "-n", str(args.tg), "-t", str(args.threads),
           "-r", "1", "-o", "json"]
    env = dict(os.environ)
    if args.llama_omp:
        env["OMP_WAIT_POLICY"] = args.llama_omp
    rc, out, err = run(cmd, env=env)
    try:
        recs = json.loads(out)
    except ValueError:
        recs = None
    if rc != 0 or not isinstance(recs, list):
        tail = (err.strip().splitlines() or ["(no output)"])[-1]
        return {"error": f"exit {rc}: {tail}"}
    res = {"build": recs[0].get("build_commit") if recs else None}
    for r in recs:
        if r.get("n_prompt") == args.pp and not r.get("n_gen"):
            res["prefill"] = r["avg_ts"]
        elif r.get("n_gen") == args.tg and not r.get("n_prompt"):
            res["decode"] = r["avg_ts"]
    return res


def membw(args):
    if not args.membw:
        return None
    rc, out, err = run([args.membw, str(args.threads), str(args.membw_mib), "3"])
    if rc != 0:
        log(f"membw failed: {err.strip()}")
        return None
    return json.loads(out)["best_gbs"]


# --- report -----------------------------------------------------------------

def median(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def machine():
    info = {"platform": platform.platform(), "cpus": os.cpu_count()}
    rc, out, _ = run(["lscpu"])
    if rc == 0:
        m = re.search(r"^Model name:\s*(.+)$", out, re.M)
        if m:
            info["cpu"] = m.group(1).strip()
        f = re.search(r"^Flags:\s*(.+)$", out, re.M)
        if f:
            fl = f.group(1).split()
            info["simd"] = [x for x in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "avx_vnni", "asimddp")
                            if x in fl]
    return info


def fmt(v, nd=1):
    return "-" if v is None else f"{v:.{nd}f}"


def ratio(a, b):
    return "-" if not a or not b else f"{a / b:.2f}x"


def share(v, roof):
    return "-" if not v or not roof else f"{100 * v / roof:.0f}%"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--qwenc", default="./qwenc")
    ap.add_argument("--model", action="append", required=True, help="LABEL=FILE.gguf (repeatable)")
    ap.add_argument("--llama-bench", help="llama.cpp's llama-bench binary (none: qwenc only)")
    ap.add_argument("--llama-omp", default=os.environ.get("BENCH_LLAMA_OMP", ""),
                    help="OMP_WAIT_POLICY for llama-bench; default '' = unset, as users run it (spin-waiting: "
                         "fastest on a quiet machine, collapses on a busy one; 'passive' for a busy machine)")
    ap.add_argument("--membw", help="tools/membw.c built for this machine")
    ap.add_argument("--membw-mib", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--qwenc-arg", action="append", default=[], help="extra qwenc argument (repeatable)")
    ap.add_argument("--out-dir", default="build/bench")
    args = ap.parse_args()

    files = []
    for spec in args.model:
        label, _, path = spec.partition("=")
        if not os.path.isfile(path):
            log(f"skipping {label}: {path} not found")
            continue
        vocab, wbytes = gguf_facts(path)
        files.append({"label": label, "path": os.path.abspath(path), "vocab": vocab, "weight_bytes": wbytes,
                      "size": os.path.getsize(path)})
    if not files:
        log("no model file to measure")
        return 1
    if not args.llama_bench:
        log("no llama-bench: measuring qwenc only")

    rng = random.Random(1234)
    for f in files:
        hi = min(f["vocab"] or 151643, 151643)  # ordinary tokens only
        f["pp_ids"] = [rng.randrange(hi) for _ in range(args.pp)]
        f["tg_start"], f["qwenc_error"] = decode_start(args, f["path"], f["vocab"])
        if f["qwenc_error"]:
            log(f"qwenc cannot run {f['label']} ({f['path']}): {f['qwenc_error']}")
        f["raw"] = {"qwenc": [], "llama": []}
        f["bandwidth_gbs"] = []

    bw = []
    for rep in range(args.reps):
        b = membw(args)
        bw.append(b)
        log(f"round {rep + 1}/{args.reps}: memory bandwidth {fmt(b)} GB/s ({args.threads} threads)")
        for i, f in enumerate(files):
            fb = b if i == 0 else membw(args)
            f["bandwidth_gbs"].append(fb)
            if i > 0:
                log(f"round {rep + 1} {f['label']}: memory bandwidth {fmt(fb)} GB/s")
            sides = ["qwenc", "llama"] if rep % 2 == 0 else ["llama", "qwenc"]
            for side in sides:
                if side == "qwenc":
                    if f["tg_start"] is None:
                        continue
                    p = qwenc(args, f["path"], f["pp_ids"], 1)
                    d = qwenc(args, f["path"], [f["tg_start"]], args.tg + 1)
                    r = {"prefill": p.get("prefill"), "decode": d.get("decode"), "n_gen": d.get("n_gen"),
                         "kernels": p.get("kernels") or d.get("kernels"), "error": p.get("error") or d.get("error")}
                elif args.llama_bench:
                    r = llama_bench(args, f["path"])
                else:
                    continue
                f["raw"][side].append(r)
                log(f"round {rep + 1} {f['label']} {side}: prefill {fmt(r.get('prefill'))} decode "
                    f"{fmt(r.get('decode'), 2)} tok/s" + (f" ({r['error']})" if r.get("error") else ""))

    # Medians, not the best: one probe can read far above the machine's
    # bandwidth (measured: 54.6 GB/s among 29.8-32.4), and the best would
    # then make every share look low.
    bw_best = statistics.median([b for b in bw if b]) if any(bw) else None
    rows = []
    for f in files:
        s = {}
        for side in ("qwenc", "llama"):
            for k in ("prefill", "decode"):
                s[f"{side}_{k}"] = median([r.get(k) for r in f["raw"][side]])
        fbw = median(f["bandwidth_gbs"])
        roof = fbw * 1e9 / f["weight_bytes"] if fbw and f["weight_bytes"] else None
        s["roofline"] = roof
        # qwenc's run r over llama.cpp's run r (see the module's docstring)
        s["round_ratios"] = [{k: (q[k] / l[k] if q.get(k) and l.get(k) else None) for k in ("prefill", "decode")}
                             for q, l in zip(f["raw"]["qwenc"], f["raw"]["llama"])]
        f["summary"] = s
        rows.append(f"| {f['label']} | {fmt(f['weight_bytes'] / 1e6 if f['weight_bytes'] else None, 0)} "
                    f"| {fmt(s['qwenc_prefill'])} | {fmt(s['llama_prefill'])} "
                    f"| {ratio(s['qwenc_prefill'], s['llama_prefill'])} "
                    f"| {fmt(s['qwenc_decode'], 2)} | {fmt(s['llama_decode'], 2)} "
                    f"| {ratio(s['qwenc_decode'], s['llama_decode'])} | {fmt(roof)} "
                    f"| {share(s['qwenc_decode'], roof)} | {share(s['llama_decode'], roof)} |")

    mach = machine()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    kernels = sorted({r.get("kernels") for f in files for r in f["raw"]["qwenc"] if r.get("kernels")})
    llama_build = next((r.get("build") for f in files for r in f["raw"]["llama"] if r.get("build")), None)
    try:
        git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             cwd=HERE).stdout.strip()
    except OSError:
        git = ""
    notes = []
    for f in files:
        errs = {r["error"] for side in ("qwenc", "llama") for r in f["raw"][side] if r.get("error")}
        if f["qwenc_error"]:
            errs.add(f"qwenc cannot run it: {f['qwenc_error']}")
        notes += [f"- {f['label']}: {e}" for e in sorted(errs)]
        short = [r["n_gen"] for r in f["raw"]["qwenc"] if r.get("n_gen") and r["n_gen"] < args.tg + 1]
        if short:
            notes.append(f"- {f['label']}: qwenc reached EOS after {min(short)} tokens; its decode figure counts those")
    pp, tg = f"pp{args.pp}", f"tg{args.tg}"
    md = [f"# make bench, {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC", "",
          f"{mach.get('cpu', platform.machine())}, {mach['cpus']} CPUs ({', '.join(mach.get('simd', []))}); "
          f"{args.threads} threads; medians of {args.reps} interleaved round(s); qwenc {git} "
          f"(kernels {', '.join(kernels) or '?'}{', args ' + ' '.join(args.qwenc_arg) if args.qwenc_arg else ''}); "
          + (f"llama.cpp llama-bench build {llama_build} (OMP_WAIT_POLICY={args.llama_omp or 'unset'})"
             if args.llama_bench else "llama.cpp not measured") + ".",
          f"Memory read bandwidth, {args.threads} threads (tools/membw.c), probed before each file's runs: "
          + "; ".join(f"{f['label']} " + ", ".join(fmt(b) for b in f["bandwidth_gbs"]) for f in files)
          + " GB/s per round; each file's roofline uses the median of its own probes.", "",
          f"| file | weights read per token MB | qwenc {pp} tok/s | llama.cpp {pp} | ratio "
          f"| qwenc {tg} tok/s | llama.cpp {tg} | ratio | decode roofline tok/s | qwenc share | llama.cpp share |",
          "|---|---|---|---|---|---|---|---|---|---|---|", *rows, ""]
    by_round = [f"- {f['label']}: {pp} " + ", ".join(fmt(r["prefill"], 2) for r in f["summary"]["round_ratios"])
                + f"; {tg} " + ", ".join(fmt(r["decode"], 2) for r in f["summary"]["round_ratios"])
                for f in files if f["summary"]["round_ratios"]]
    if by_round:
        md += ["Ratios by round (qwenc / llama.cpp, each round's own runs):"] + by_round + [""]
    md += ["Files:"] + [f"- {f['label']}: {f['path']} ({f['size'] / 1e6:.0f} MB)" for f in files]
    if notes:
        md += ["", "Notes:"] + notes
    text = "\n".join(md) + "\n"
    print(text)

    os.makedirs(args.out_dir, exist_ok=True)
    base = os.path.join(args.out_dir, f"bench-{stamp}")
    with open(base + ".md", "w") as fh:
        fh.write(text)
    res = {"time_utc": stamp, "settings": {k: v for k, v in vars(args).items()}, "machine": mach, "git": git,
           "bandwidth_gbs": bw, "bandwidth_best_gbs": bw_best, "llama_build": llama_build,
           "files": [{k: v for k, v in f.items() if k != "pp_ids"} for f in files], "table_md": text}
    with open(base + ".json", "w") as fh:
        json.dump(res, fh, indent=1)
        fh.write("\n")
    log(f"wrote {base}.md and {base}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
