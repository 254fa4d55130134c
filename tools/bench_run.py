#!/usr/bin/env python3
"""bench_run.py - qwenc vs llama.cpp on the same weights; the driver of tools/bench.sh.

  python tools/bench_run.py --qwenc ./qwenc --model DIR [--gguf bf16=F.gguf --gguf f16=G.gguf]
                            [--gguf q8_0=Q.gguf --qwenc-quant q8_0]
                            [--membw BIN] [--reps 3] [--quick] [--threads 2] [--out build/bench.json]

Measures, in interleaved repetitions (qwenc as stored, qwenc --quant q8_0, llama.cpp
BF16 / F16 / Q8_0, with the order rotated every repetition so no one always runs on
a warmer machine); each llama.cpp type is compared with the qwenc run of the same
weight type (Q8_0 with `qwenc --quant q8_0`, which makes the same bytes as the GGUF):
  - prefill tok/s for 32/128/512-token prompts (qwenc: `--tokens IDS -n 1 --warmup`,
    the "prefill N tokens X tok/s" figure it prints on stderr, timed after one untimed
    pass over the prompt; llama.cpp: Llama.eval of the prompt on an empty KV cache
    after its first-token eval, see tools/bench_llama.py: both warm);
  - decode tok/s over 128 tokens after a 32-token prompt, and after a 1000-token
    prompt (qwenc: `-n 129`, whose "decode" figure counts the 128 forward passes
    after the first token; llama.cpp: 128 single-token evals);
  - time from process start to first token: wall time from spawning the process
    to the first generated id appearing on its stdout (32-token prompt, file in
    the page cache, a run of its own for qwenc), for both engines; peak RSS
    (getrusage of the child, wait4);
  - memory read bandwidth (tools/membw.c, 1 and 2 threads) before and after.
Reports the median and the best of each figure, our ratio to llama.cpp, and the
fraction of the bandwidth roofline (weight bytes read per decoded token divided
by the best 2-thread bandwidth). Writes everything to --out as JSON.
Only the standard library is needed here; the llama.cpp worker needs
llama-cpp-python and numpy (--python selects its interpreter).
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
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def log(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def rss_mb(ru):
    # ru_maxrss is KiB on Linux, bytes on macOS.
    return ru.ru_maxrss / (1024 * 1024 if sys.platform == "darwin" else 1024)


def spawn_timed(cmd, first_marker=None, timeout=900, env=None):
    """Run cmd; return (seconds to the first stdout byte [or line starting with
    first_marker], stdout text, stderr text, exit status, peak RSS MB)."""
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, bufsize=0, env=env)
        t_first = None
        out = b""
        fd = p.stdout.fileno()
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            out += chunk
            if t_first is None:
                if first_marker is None:
                    if out.strip():
                        t_first = time.perf_counter() - t0
                elif first_marker.encode() in out:
                    t_first = time.perf_counter() - t0
            if time.perf_counter() - t0 > timeout:
                p.kill()
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        p.stdout.close()
        err.seek(0)
        return t_first, out.decode(errors="replace"), err.read().decode(errors="replace"), \
            p.returncode, rss_mb(ru)


RE_QW = re.compile(r"prefill (\d+) tokens ([\d.]+) tok/s \| decode (\d+) tokens ([\d.]+) tok/s"
                   r"(?: \| load ([\d.]+) s \| first token ([\d.]+) s)?")


def run_qwenc(args, ids, n, extra=()):
    cmd = [args.qwenc, args.model, "--tokens", " ".join(map(str, ids)), "-n", str(n),
           "--threads", str(args.threads), "--ctx", str(args.ctx)] + list(extra)
    t_first, out, err, rc, rss = spawn_timed(cmd)
    m = RE_QW.search(err)
    if rc != 0 or not m:
        tail = err.strip().splitlines()[-1:] or ["(no stderr)"]
        log(f"qwenc failed (exit {rc}): {tail[0]}")
        return None
    return {"t_first": t_first, "rss_mb": rss, "n_prompt": int(m.group(1)),
            "prefill": float(m.group(2)), "n_gen": int(m.group(3)), "decode": float(m.group(4)),
            "first_token_internal": float(m.group(6)) if m.group(6) else None,
            "kernels": (re.search(r"kernels: (\w+)", err) or [None, None])[1]}


def run_llama(args, gguf, spec):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
        spec_path = f.name
    try:
        cmd = [args.python, os.path.join(HERE, "bench_llama.py"), gguf, spec_path]
        env = dict(os.environ)
        if args.llama_omp:
            env["OMP_WAIT_POLICY"] = args.llama_omp
        t_first, out, err, rc, rss = spawn_timed(cmd, first_marker="FIRST ", env=env)
    finally:
        os.unlink(spec_path)
    lines = [l for l in out.splitlines() if l.startswith("{")]
    if rc != 0 or not lines:
        tail = err.strip().splitlines()[-1:] or ["(no stderr)"]
        log(f"llama.cpp failed on {gguf} (exit {rc}): {tail[0]}")
        return None
    res = json.loads(lines[-1])
    res["t_first"] = t_first
    res["rss_mb"] = rss
    return res


def run_membw(args, threads):
    if not args.membw:
        return None
    r = subprocess.run([args.membw, str(threads), "1024", "5"], capture_output=True, text=True)
    if r.returncode != 0:
        log(f"membw failed: {r.stderr.strip()}")
        return None
    return json.loads(r.stdout)


def weight_bytes_per_token(cfg, elem=2):
    """Bytes of weights one decode step reads: every layer matrix and the output
    matrix (lm_head, or the tied embedding), at `elem` bytes per weight (2 for 16-bit
    types, 34/32 for Q8_0); norms and biases are noise."""
    h = cfg["hidden_size"]
    nh = cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads", nh)
    hd = cfg.get("head_dim") or h // nh
    inter = cfg["intermediate_size"]
    per_layer = h * nh * hd + 2 * h * nkv * hd + nh * hd * h + 3 * h * inter
    return (cfg["num_hidden_layers"] * per_layer + cfg["vocab_size"] * h) * elem


def summarize(vals, higher_better=True):
    vals = [v for v in vals if v is not None]
    if not vals:
        return None
    best = max(vals) if higher_better else min(vals)
    return {"median": statistics.median(vals), "best": best, "n": len(vals), "all": vals}


def machine():
    info = {"platform": platform.platform(), "machine": platform.machine(),
            "cpus": os.cpu_count()}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for key in ("Model name", "Core(s) per socket", "Thread(s) per core", "L3 cache"):
            m = re.search(rf"^{re.escape(key)}:\s*(.+)$", out, re.M)
            if m:
                info[key] = m.group(1).strip()
        flags = re.search(r"^Flags:\s*(.+)$", out, re.M)
        if flags:
            fl = flags.group(1).split()
            info["simd"] = [f for f in ("avx2", "fma", "f16c", "avx512f", "avx512_bf16",
                                        "avx512_vnni", "avx512_fp16") if f in fl]
    except OSError:
        pass
    return info


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--qwenc", default="./qwenc")
    ap.add_argument("--model", required=True)
    ap.add_argument("--gguf", action="append", default=[], help="TYPE=PATH (bf16=..., f16=..., q8_0=...)")
    ap.add_argument("--qwenc-quant", action="append", default=[], help="also run qwenc --quant TYPE (q8_0)")
    ap.add_argument("--membw")
    ap.add_argument("--python", default=sys.executable, help="interpreter with llama_cpp")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--out", default="build/bench.json")
    ap.add_argument("--llama-omp", default=os.environ.get("BENCH_LLAMA_OMP", "passive"),
                    help="OMP_WAIT_POLICY for llama.cpp (its CPU backend uses OpenMP; on a "
                         "shared, oversubscribed machine spin-waiting threads collapse its "
                         "speed several-fold, passive is its best setting there); '' = unset")
    args = ap.parse_args()

    with open(os.path.join(args.model, "config.json")) as f:
        cfg = json.load(f)
    rng = random.Random(1234)
    hi = min(cfg["vocab_size"], 151643)  # ordinary tokens only
    prompt = {n: [rng.randrange(hi) for _ in range(n)] for n in (32, 128, 512, 1000)}
    if args.quick:
        prefill_sizes, n_dec, dec_cases = [32, 128], 32, [("after32", 32)]
    else:
        prefill_sizes, n_dec, dec_cases = [32, 128, 512], 128, [("after32", 32), ("ctx1000", 1000)]
    engines = ["qwenc"] + [f"qwenc-{q}" for q in args.qwenc_quant] + [g.split("=", 1)[0] for g in args.gguf]
    ggufs = dict(g.split("=", 1) for g in args.gguf)
    spec = {"threads": args.threads, "n_ctx": args.ctx, "first": prompt[32],
            "prefill": {str(n): prompt[n] for n in prefill_sizes},
            "decode": [{"name": name, "prompt": prompt[n], "n": n_dec} for name, n in dec_cases]}

    bw = {"before": {t: run_membw(args, t) for t in (1, 2)}}
    log(f"memory bandwidth: " + ", ".join(f"{t} thread(s) {v['best_gbs']:.1f} GB/s"
                                          for t, v in bw["before"].items() if v))
    raw = {e: [] for e in engines}
    for rep in range(args.reps):
        order = engines[rep % len(engines):] + engines[:rep % len(engines)]
        for e in order:
            t0 = time.perf_counter()
            if e.startswith("qwenc"):
                extra = ["--quant", e.split("-", 1)[1]] if "-" in e else []
                r = {"prefill": {}, "decode": {}, "t_first": None, "rss_mb": 0.0}
                # start to first token: a cold process, nothing before the prompt
                q = run_qwenc(args, prompt[32], 1, extra)
                if q:
                    r["t_first"] = q["t_first"]
                    r["first_token_internal"] = q["first_token_internal"]
                    r["rss_mb"] = q["rss_mb"]
                    r["kernels"] = q["kernels"]
                # prefill: after one untimed pass (--warmup), as llama.cpp is measured
                # after its first-token eval: weights paged in on both sides
                for n in prefill_sizes:
                    q = run_qwenc(args, prompt[n], 1, extra + ["--warmup"])
                    if q:
                        r["prefill"][str(n)] = q["prefill"]
                        r["rss_mb"] = max(r["rss_mb"], q["rss_mb"])
                for name, n in dec_cases:
                    q = run_qwenc(args, prompt[n], n_dec + 1, extra)
                    if q:
                        r["decode"][name] = q["decode"]
                        r["rss_mb"] = max(r["rss_mb"], q["rss_mb"])
                        if q["n_gen"] < n_dec + 1:
                            log(f"qwenc stopped at EOS after {q['n_gen']} tokens ({name})")
            else:
                r = run_llama(args, ggufs[e], spec) or {"prefill": {}, "decode": {}}
            raw[e].append(r)
            log(f"rep {rep + 1}/{args.reps} {e}: prefill " +
                " ".join(f"{k}:{v:.1f}" for k, v in r.get("prefill", {}).items()) + " | decode " +
                " ".join(f"{k}:{v:.2f}" for k, v in r.get("decode", {}).items()) +
                (f" | first token {r['t_first']:.2f} s" if r.get("t_first") else "") +
                f" ({time.perf_counter() - t0:.0f} s)")
    bw["after"] = {t: run_membw(args, t) for t in (1, 2)}

    # Summaries.
    metrics = [(f"prefill{n}", "prefill", str(n), True) for n in prefill_sizes] + \
              [(f"decode_{name}", "decode", name, True) for name, _ in dec_cases] + \
              [("first_token_s", "t_first", None, False), ("peak_rss_mb", "rss_mb", None, False)]
    summary = {}
    for e in engines:
        summary[e] = {}
        for key, field, sub, hb in metrics:
            vals = [(r.get(field) or {}).get(sub) if sub else r.get(field) for r in raw[e]]
            summary[e][key] = summarize(vals, hb)
    bw_best = max([v["best_gbs"] for ph in bw.values() for k, v in ph.items() if v and k == 2] or [0])
    wbytes = weight_bytes_per_token(cfg)
    roof = bw_best * 1e9 / wbytes if bw_best else None

    def elem_of(e):  # bytes per weight an engine reads in decode
        return 34 / 32 if e.endswith("q8_0") else 2

    def peer(e):  # the qwenc run a llama.cpp engine is compared with
        return f"qwenc-{e}" if f"qwenc-{e}" in engines else "qwenc"

    # Table.
    def cell(s, fmt="{:.1f}"):
        return "-" if not s else (fmt.format(s["median"]) + " (" + fmt.format(s["best"]) + ")")

    def ratio(a, b, hb=True):
        if not a or not b or not b["median"] or not a["median"]:
            return "-"
        return f"{(a['median'] / b['median'] if hb else b['median'] / a['median']):.2f}x"

    ours = [e for e in engines if e.startswith("qwenc")]
    others = [e for e in engines if not e.startswith("qwenc")]
    name = {e: "qwenc" if e == "qwenc" else "qwenc " + e.split("-", 1)[1].upper() for e in ours}
    head = f"{'median (best) of ' + str(args.reps):<28}" + "".join(f"{name[e]:>18}" for e in ours) + \
        "".join(f"{'llama.cpp ' + e.upper():>18}" for e in others) + \
        "".join(f"{'ratio vs ' + e.upper():>14}" for e in others)
    lines = [head, "-" * len(head)]
    labels = {"prefill32": "prefill 32 tok/s", "prefill128": "prefill 128 tok/s",
              "prefill512": "prefill 512 tok/s", "decode_after32": f"decode {n_dec} after 32 tok/s",
              "decode_ctx1000": f"decode {n_dec} at ~1000 tok/s",
              "first_token_s": "start to first token s", "peak_rss_mb": "peak RSS MB"}
    for key, _, _, hb in metrics:
        fmt = "{:.2f}" if key.startswith(("decode", "first")) else "{:.1f}" if key != "peak_rss_mb" else "{:.0f}"
        row = f"{labels[key]:<28}" + "".join(f"{cell(summary[e][key], fmt):>18}" for e in ours)
        row += "".join(f"{cell(summary[e][key], fmt):>18}" for e in others)
        row += "".join(f"{ratio(summary[peer(e)][key], summary[e][key], hb):>14}" for e in others)
        lines.append(row)
    if roof:
        lines.append(f"{'roofline decode tok/s':<28}{roof:>18.2f}   "
                     f"({wbytes / 1e6:.0f} MB of 16-bit weights per token / {bw_best:.1f} GB/s; "
                     f"Q8_0: x{2 / (34 / 32):.2f})")
        for dname, _ in dec_cases:
            key = f"decode_{dname}"
            row = f"{'share of roofline ' + dname:<28}"
            for e in ours + others:
                s = summary[e][key]
                r_e = roof * 2 / elem_of(e)
                txt = "%.0f%% (%.0f%%)" % (100 * s["median"] / r_e, 100 * s["best"] / r_e) if s else "-"
                row += f"{txt:>18}"
            lines.append(row)
    lines.append("ratio > 1: qwenc better (tok/s: ours / theirs; seconds and MB: theirs / ours); "
                 "each llama.cpp type against qwenc with the same weight type")
    bwline = "memory bandwidth GB/s (best): " + ", ".join(
        f"{ph} {t}T {v['best_gbs']:.1f}" for ph, d in bw.items() for t, v in d.items() if v)
    lines.append(bwline)
    table = "\n".join(lines)
    print(table)

    res = {"time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "quick": args.quick,
           "llama_omp_wait_policy": args.llama_omp,
           "reps": args.reps, "threads": args.threads, "ctx": args.ctx, "machine": machine(),
           "model": os.path.abspath(args.model), "ggufs": ggufs,
           "weight_bytes_per_token": wbytes, "bandwidth": bw, "bandwidth_best_2t_gbs": bw_best,
           "roofline_decode_tok_s": roof, "summary": summary, "raw": raw, "table": table}
    try:
        res["git"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                    text=True, cwd=HERE).stdout.strip()
    except OSError:
        pass
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
