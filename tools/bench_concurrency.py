#!/usr/bin/env python3
"""Aggregate decode throughput of qwenc's HTTP server with 1, 2, 4 and 8
concurrent streams (issue 4's benchmark; not a test).

    tools/bench_concurrency.py MODEL_DIR [--streams 1,2,4,8] [--tokens 64] [--reps 2]
                               [--llama-gguf FILE [--llama-server BIN]]

Starts `./qwenc MODEL --http 0 --parallel 8`, sends N simultaneous streamed
/v1/completions requests (greedy, max_tokens fixed; a random-weight model
rarely stops early) and reports, per N: aggregate generated tok/s over the
wall time of the whole wave (tokens = streamed chunks carrying text), mean
time to first token, and the ratio to one stream. With --llama-gguf it then
does the same against llama.cpp's own llama-server (`--parallel 8`, same
threads; from --llama-server, else tools/llama-tools.sh, which builds it once
from the llama-cpp-python sdist's llama.cpp) on the same weights and prints
the ratio at each N. Standard library only.
"""
import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time


def stream_one(port, prompt, max_tokens, out, i, extra):
    t0 = time.time()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    body = json.dumps(dict({"prompt": prompt, "max_tokens": max_tokens, "stream": True, "temperature": 0}, **extra))
    c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    ttft = None
    n = 0
    for line in r:
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        ch = json.loads(line[6:])
        txt = ch["choices"][0].get("text")
        if txt is not None and ch["choices"][0].get("finish_reason") is None:
            n += 1
            if ttft is None:
                ttft = time.time() - t0
    out[i] = (ttft or 0.0, n, time.time() - t0)
    c.close()


def free_port():
    import socket
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return so.getsockname()[1]


def measure(port, streams, tokens, reps, extra):
    prompts = [f"Request number {i}: tell me a story about the number {i * 7}." for i in range(8)]
    res = {}
    for n in streams:
        rates, ttfts = [], []
        for _ in range(reps):
            out = [None] * n
            th = [threading.Thread(target=stream_one, args=(port, prompts[i], tokens, out, i, extra))
                  for i in range(n)]
            t0 = time.time()
            for t in th:
                t.start()
            for t in th:
                t.join()
            wall = time.time() - t0
            rates.append(sum(o[1] for o in out) / wall)
            ttfts.append(statistics.mean(o[0] for o in out))
        res[n] = (max(rates), statistics.median(rates), statistics.median(ttfts))
    return res


def report(name, res):
    base = res[min(res)][1]
    print(f"{name}\n{'streams':>8} {'agg tok/s best':>15} {'median':>8} {'x one':>6} {'TTFT s':>7}")
    for n, (best, med, ttft) in res.items():
        print(f"{n:>8} {best:>15.1f} {med:>8.1f} {med / base:>6.2f} {ttft:>7.2f}")


def wait_http(port, proc, timeout=120):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            sys.exit("server exited")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/v1/models")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    sys.exit("server did not answer")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--qwenc", default="./qwenc")
    ap.add_argument("--streams", default="1,2,4,8")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--threads", default="2")
    ap.add_argument("--llama-gguf")
    ap.add_argument("--llama-server", help="llama.cpp's llama-server (default: tools/llama-tools.sh)")
    ap.add_argument("--llama-omp", default=os.environ.get("BENCH_LLAMA_OMP", "passive"),
                    help="OMP_WAIT_POLICY for llama-server, as in make bench; '' = unset")
    a = ap.parse_args()
    streams = [int(x) for x in a.streams.split(",")]
    srv = subprocess.Popen([a.qwenc, a.model, "--http", "0", "--parallel", "8", "--threads", a.threads],
                           stderr=subprocess.PIPE, text=True)
    port = None
    for line in srv.stderr:
        m = re.search(r"listening on http://[^:]+:(\d+)", line)
        if m:
            port = int(m.group(1))
            break
    if not port:
        sys.exit("server did not start")
    threading.Thread(target=lambda: [None for _ in srv.stderr], daemon=True).start()
    try:
        ours = measure(port, streams, a.tokens, a.reps, {"raw": True})
    finally:
        srv.terminate()
        srv.wait(timeout=20)
    report("qwenc", ours)
    if not a.llama_gguf:
        return
    server = a.llama_server
    if not server:
        tools = os.path.join(os.path.dirname(os.path.abspath(__file__)), "llama-tools.sh")
        r = subprocess.run([tools, "--need", "llama-server"], stdout=subprocess.PIPE, text=True)
        if r.returncode != 0:
            sys.exit("llama.cpp's llama-server is not available (see above): no comparison")
        server = os.path.join(r.stdout.strip().splitlines()[-1], "llama-server")
    port = free_port()
    env = dict(os.environ)
    if a.llama_omp:
        env["OMP_WAIT_POLICY"] = a.llama_omp
    # 8 slots of 1024 positions each (the context is split among the slots)
    srv = subprocess.Popen([server, "-m", a.llama_gguf, "-t", a.threads, "--parallel", "8", "-c", "8192",
                            "--port", str(port), "--host", "127.0.0.1"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        wait_http(port, srv)
        theirs = measure(port, streams, a.tokens, a.reps, {})
    finally:
        srv.terminate()
        srv.wait(timeout=20)
    report("llama.cpp llama-server --parallel 8", theirs)
    print("ratio qwenc / llama.cpp (median aggregate tok/s): " +
          ", ".join(f"{n}: {ours[n][1] / theirs[n][1]:.2f}x" for n in streams))


if __name__ == "__main__":
    main()
