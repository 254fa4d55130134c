#!/usr/bin/env python3
"""Aggregate decode throughput of qwenc's HTTP server with 1, 2, 4 and 8
concurrent streams (issue 4's benchmark; not a test).

    tools/bench_concurrency.py MODEL_DIR [--streams 1,2,4,8] [--tokens 64] [--reps 2]

Starts `./qwenc MODEL --http 0 --parallel 8`, sends N simultaneous
/v1/completions requests (raw prompt, ignore_eos-free random model: greedy,
max_tokens fixed) and reports, per N: aggregate generated tok/s over the wall
time of the whole wave, mean time to first token of streamed requests, and the
ratio to one stream. Standard library only.
"""
import argparse
import http.client
import json
import re
import statistics
import subprocess
import sys
import threading
import time


def stream_one(port, prompt, max_tokens, out, i):
    t0 = time.time()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "raw": True, "stream": True,
                       "temperature": 0})
    c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    ttft = None
    n = 0
    for line in r:
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        ch = json.loads(line[6:])
        txt = ch["choices"][0].get("text", "")
        if txt:
            n += 1
            if ttft is None:
                ttft = time.time() - t0
    out[i] = (ttft or 0.0, n, time.time() - t0)
    c.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--qwenc", default="./qwenc")
    ap.add_argument("--streams", default="1,2,4,8")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--threads", default="2")
    a = ap.parse_args()
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
        prompts = [f"Request number {i}: tell me a story about the number {i * 7}." for i in range(8)]
        res = {}
        for n in [int(x) for x in a.streams.split(",")]:
            rates, ttfts = [], []
            for _ in range(a.reps):
                out = [None] * n
                th = [threading.Thread(target=stream_one, args=(port, prompts[i], a.tokens, out, i)) for i in range(n)]
                t0 = time.time()
                for t in th:
                    t.start()
                for t in th:
                    t.join()
                wall = time.time() - t0
                rates.append(sum(o[1] for o in out) / wall)
                ttfts.append(statistics.mean(o[0] for o in out))
            res[n] = (max(rates), statistics.median(rates), statistics.median(ttfts))
        base = res[min(res)][1]
        print(f"{'streams':>8} {'agg tok/s best':>15} {'median':>8} {'x one':>6} {'TTFT s':>7}")
        for n, (best, med, ttft) in res.items():
            print(f"{n:>8} {best:>15.1f} {med:>8.1f} {med / base:>6.2f} {ttft:>7.2f}")
    finally:
        srv.terminate()
        srv.wait(timeout=20)


if __name__ == "__main__":
    main()
