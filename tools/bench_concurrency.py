#!/usr/bin/env python3
"""Concurrency benchmarks of qwenc's HTTP server, with llama.cpp's
llama-server side by side (not a test).

    tools/bench_concurrency.py MODEL [--scenarios decode,chat,system]
                               [--streams 1,2,4,8] [--tokens 64] [--reps 2]
                               [--turns 8] [--users 8] [--system-tokens 1000]
                               [--llama-gguf FILE [--llama-server BIN]]

Scenarios (all by default):
  decode  N simultaneous streamed /v1/completions requests (greedy, max_tokens
          fixed; a random-weight model rarely stops early), N in --streams:
          aggregate generated tok/s over the wall time of the wave (tokens =
          streamed chunks carrying text), mean time to first token, and the
          ratio to one stream.
  chat    one user's multi-turn chat (/v1/chat/completions, streamed): the
          first message carries ~half of a conversation that grows to about
          2,000 tokens over --turns turns, each turn resending the whole
          history plus the answer and a new question. Prints the time to
          first token of every turn, then of the last turn's request sent
          cold (the same conversation behind a changed first character, so
          no prefix matches), and the ratio warm / cold (issue 12's target:
          turn N <= 10% of the cold turn).
  system  --users simultaneous chats with the same ~--system-tokens system
          prompt and their own question; then the same with a different
          system prompt per user (cold). Prints the mean time to first token
          and the wall time of each wave, and the prompt tokens the server
          computed (qwenc: qwenc_prefill_tokens_total; llama-server:
          llamacpp:prompt_tokens_total, from --metrics): with a prefix cache
          the shared prompt is prefilled once.
Each scenario prints the server's peak resident memory (VmHWM, Linux).

qwenc runs with `--parallel 8 --ctx 4096` (--parallel, --ctx; its default
prefix cache); with --llama-gguf the same scenarios run against llama-server
(the same slots and positions per slot, same threads, "cache_prompt": true in every request; from
--llama-server, else tools/llama-tools.sh, which builds it once from the
llama-cpp-python sdist's llama.cpp) on the same weights. On a busy machine
the numbers are indicative only. Standard library only.
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


def stream_chat(port, messages, max_tokens, extra):
    """One streamed chat request: (time to first content token, tokens, text)."""
    t0 = time.time()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    body = json.dumps(dict({"messages": messages, "max_tokens": max_tokens, "stream": True, "temperature": 0},
                           **extra))
    c.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        sys.exit(f"chat request failed: {r.status} {r.read()[:300]!r}")
    ttft, n, text = None, 0, []
    for line in r:
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        ch = json.loads(line[6:])
        if not ch.get("choices"):
            continue
        d = ch["choices"][0].get("delta", {}).get("content")
        if d:
            n += 1
            text.append(d)
            if ttft is None:
                ttft = time.time() - t0
    c.close()
    return ttft or (time.time() - t0), n, "".join(text)


def source_text(chars, skip=0):
    """Deterministic prose/code for prompts: this repository's own sources."""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    buf = []
    for name in ("src/engine/sched.c", "src/infer/forward.c", "src/server/http.c", "README.md"):
        try:
            with open(os.path.join(root, name), encoding="utf-8", errors="replace") as f:
                buf.append(f.read())
        except OSError:
            pass
    text = "\n".join(buf) or ("lorem ipsum dolor sit amet " * 2000)
    while len(text) < skip + chars:
        text += text
    return text[skip:skip + chars]


def chat_scenario(port, turns, extra):
    """Turn 1 sends ~1,000 tokens; each later turn adds ~130 tokens and the
    answer, so the last turn sends ~2,000. Returns ([ttft per turn], cold
    ttft of the last turn's messages, prompt chars of the last turn)."""
    system = "You are a code reviewer. Answer in one short sentence."
    msgs = [{"role": "system", "content": system},
            {"role": "user", "content": "Review this code:\n" + source_text(3600)}]
    ttfts = []
    for t in range(turns):
        ttft, _, text = stream_chat(port, msgs, 24, extra)
        ttfts.append(ttft)
        msgs = msgs + [{"role": "assistant", "content": text},
                       {"role": "user", "content": f"Question {t + 2}: and this part?\n" +
                        source_text(400, 4000 + 400 * t)}]
    # the last warm turn's messages (without the answer and question added
    # after it) behind a changed first character: no prefix in common
    last = msgs[:-2]
    cold = [dict(m) for m in last]
    cold[0]["content"] = "Y" + cold[0]["content"]
    ttft_cold, _, _ = stream_chat(port, cold, 24, extra)
    return ttfts, ttft_cold, sum(len(m["content"]) for m in last)


def system_scenario(port, users, sys_tokens, extra, metric):
    """users simultaneous chats; shared system prompt, then one per user.
    Returns {wave: (mean ttft, wall s, prompt tokens computed or None)}."""
    base = source_text(int(sys_tokens * 3.6), 20000)
    res = {}
    for wave in ("shared", "distinct"):
        before = metric()
        out = [None] * users

        def go(i, wave=wave):
            system = base if wave == "shared" else f"User {i} session. " + base
            msgs = [{"role": "system", "content": "Follow these notes:\n" + system},
                    {"role": "user", "content": f"User {i}: summarise line {i + 3} in five words."}]
            out[i] = stream_chat(port, msgs, 16, extra)
        th = [threading.Thread(target=go, args=(i,)) for i in range(users)]
        t0 = time.time()
        for t in th:
            t.start()
        for t in th:
            t.join()
        wall = time.time() - t0
        after = metric()
        computed = after - before if after is not None and before is not None else None
        res[wave] = (statistics.mean(o[0] for o in out), wall, computed)
    return res


def read_metric(port, names):
    """The first of names found in GET /metrics, or None."""
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/metrics")
        r = c.getresponse()
        body = r.read().decode(errors="replace")
        c.close()
    except OSError:
        return None
    if r.status != 200:
        return None
    for name in names:
        m = re.search(r"^" + re.escape(name) + r"(?:\{[^}]*\})? ([0-9.eE+-]+)$", body, re.M)
        if m:
            return float(m.group(1))
    return None


def peak_rss_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def run_scenarios(name, port, pid, a, extra, metric_names):
    """Every scenario against one server; returns {scenario: result}."""
    out = {}
    scen = a.scenarios.split(",")
    if "decode" in scen:
        out["decode"] = measure(port, [int(x) for x in a.streams.split(",")], a.tokens, a.reps,
                                dict(extra, raw=True) if name == "qwenc" else extra)
        report(name, out["decode"])
    if "chat" in scen:
        ttfts, cold, chars = chat_scenario(port, a.turns, extra)
        out["chat"] = (ttfts, cold)
        print(f"{name}: multi-turn chat, time to first token per turn (s): " +
              " ".join(f"{t:.2f}" for t in ttfts))
        print(f"{name}: last turn's history ({chars} chars) sent cold: {cold:.2f} s; "
              f"warm turn {len(ttfts)} / cold = {ttfts[-1] / cold:.1%}")
    if "system" in scen:
        res = system_scenario(port, a.users, a.system_tokens, extra, lambda: read_metric(port, metric_names))
        out["system"] = res
        for wave, (ttft, wall, computed) in res.items():
            c = "?" if computed is None else f"{computed:.0f}"
            print(f"{name}: {a.users} users, {wave} system prompt: mean TTFT {ttft:.2f} s, wave {wall:.2f} s, "
                  f"prompt tokens computed {c}")
    rss = peak_rss_mb(pid)
    if rss is not None:
        print(f"{name}: peak RSS {rss:.0f} MB")
    return out


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
    ap.add_argument("--scenarios", default="decode,chat,system")
    ap.add_argument("--streams", default="1,2,4,8")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--turns", type=int, default=8)
    ap.add_argument("--users", type=int, default=8)
    ap.add_argument("--system-tokens", type=int, default=1000)
    ap.add_argument("--threads", default="2")
    ap.add_argument("--parallel", default="8", help="slots of both servers")
    ap.add_argument("--ctx", type=int, default=4096, help="positions per slot, both servers")
    ap.add_argument("--llama-gguf")
    ap.add_argument("--llama-server", help="llama.cpp's llama-server (default: tools/llama-tools.sh)")
    ap.add_argument("--llama-omp", default=os.environ.get("BENCH_LLAMA_OMP", "passive"),
                    help="OMP_WAIT_POLICY for llama-server, as in make bench; '' = unset")
    a = ap.parse_args()
    srv = subprocess.Popen([a.qwenc, a.model, "--http", "0", "--parallel", a.parallel, "--ctx", str(a.ctx),
                            "--threads", a.threads],
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
        ours = run_scenarios("qwenc", port, srv.pid, a, {}, ["qwenc_prefill_tokens_total"])
    finally:
        srv.terminate()
        srv.wait(timeout=20)
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
    # --parallel slots of --ctx positions each (llama-server splits -c among the slots)
    srv = subprocess.Popen([server, "-m", a.llama_gguf, "-t", a.threads, "--parallel", a.parallel,
                            "-c", str(int(a.parallel) * a.ctx),
                            "--metrics", "--port", str(port), "--host", "127.0.0.1"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        wait_http(port, srv)
        theirs = run_scenarios(f"llama.cpp llama-server --parallel {a.parallel}", port, srv.pid, a, {"cache_prompt": True},
                               ["llamacpp:prompt_tokens_total"])
    finally:
        srv.terminate()
        srv.wait(timeout=20)
    if "decode" in ours:
        print("ratio qwenc / llama.cpp (median aggregate tok/s): " +
              ", ".join(f"{n}: {ours['decode'][n][1] / theirs['decode'][n][1]:.2f}x" for n in ours["decode"]))
    if "chat" in ours:
        print(f"last chat turn TTFT: qwenc {ours['chat'][0][-1]:.2f} s, llama-server {theirs['chat'][0][-1]:.2f} s")
    if "system" in ours:
        print(f"shared system prompt, mean TTFT: qwenc {ours['system']['shared'][0]:.2f} s, "
              f"llama-server {theirs['system']['shared'][0]:.2f} s")


if __name__ == "__main__":
    main()
