#!/usr/bin/env python3
"""soak.py - memory stays flat under a long mixed load (issue 16).

Starts `qwenc MODEL --http 0` on loopback, drives CLIENTS concurrent clients
(default 16) through REQUESTS requests (default 10,000): valid chats and
completions, streams read to [DONE], invalid bodies (400), streams abandoned
after the first event, uploads abandoned halfway, in a fixed mix. After
WARMUP requests it samples the server's RSS (/proc/PID/status) and fails
(exit 1) if RSS at the end exceeds the warm-up RSS by more than MAX_GROWTH
percent (default 5), or if any request got an answer it should not have.

  tools/soak.py [--model DIR] [--requests N] [--clients N] [--warmup N]
                [--env NAME=VALUE ...] [-- qwenc options]

--env sets the server's environment (e.g. MALLOC_ARENA_MAX=2) to compare
allocator settings. Bounded (it stops at REQUESTS) and loopback only.
Without --model it uses the e2e test model (build/e2e-model; `make test`
or tests/e2e/conftest.py makes it).
"""
import argparse
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))

CHAT = json.dumps({"messages": [{"role": "user", "content": "hello there"}], "max_tokens": 4}).encode()
COMPL = json.dumps({"prompt": "once upon a time", "max_tokens": 4}).encode()
STREAM = json.dumps({"messages": [{"role": "user", "content": "stream please"}], "max_tokens": 6,
                     "stream": True}).encode()
BAD = [b'{"messages": "x"}', b'{"prompt": "hi"} trailing', b"not json", b'{"prompt": 5}',
       b'{"messages": [{"role": "user", "content": "a\\u0000b"}]}']
# one cycle of 20 requests: the mix
MIX = (["chat"] * 7 + ["compl"] * 2 + ["stream"] * 4 + ["bad"] * 3 + ["abandon_stream"] * 2
       + ["abandon_upload"] * 1 + ["health"] * 1)


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def threads_of(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"Threads:\s+(\d+)", f.read()).group(1))


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.n = 0
        self.kinds = {}
        self.bad = []

    def add(self, kind, ok, what=""):
        with self.lock:
            self.n += 1
            self.kinds[kind] = self.kinds.get(kind, 0) + 1
            if not ok and len(self.bad) < 20:
                self.bad.append(f"{kind}: {what}")


def one(port, kind, seq):
    """Run one request of this kind; returns (ok, detail)."""
    if kind in ("abandon_stream", "abandon_upload"):
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        try:
            if kind == "abandon_stream":
                s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                          b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (port, len(STREAM))
                          + STREAM)
                got = s.recv(4096)
                return got.startswith(b"HTTP/1.1 200"), got[:80]
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                      b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"prompt\": " % port)
            return True, ""
        finally:
            s.close()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        h = {"Content-Type": "application/json"}
        if kind == "health":
            c.request("GET", "/health")
            r = c.getresponse()
            r.read()
            return r.status == 200, r.status
        path, body, want = {"chat": ("/v1/chat/completions", CHAT, 200),
                            "compl": ("/v1/completions", COMPL, 200),
                            "stream": ("/v1/chat/completions", STREAM, 200),
                            "bad": ("/v1/chat/completions", BAD[seq % len(BAD)], 400)}[kind]
        c.request("POST", path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        if r.status != want:
            return False, f"{r.status} {data[:120]!r}"
        if kind == "stream" and b"data: [DONE]" not in data:
            return False, "stream without [DONE]"
        if kind in ("chat", "compl"):
            json.loads(data)
        return True, ""
    except (OSError, http.client.HTTPException, ValueError) as e:
        return False, repr(e)
    finally:
        c.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=os.path.join(ROOT, "build", "e2e-model"))
    ap.add_argument("--qwenc", default=os.path.join(ROOT, "qwenc"))
    ap.add_argument("--requests", type=int, default=10000)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--warmup", type=int, default=2000)
    ap.add_argument("--max-growth", type=float, default=5.0)
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("extra", nargs="*")
    a = ap.parse_args()
    if not os.path.isdir(a.model) and not os.path.isfile(a.model):
        sys.exit(f"soak: no model at {a.model} (run make test once, or pass --model)")
    env = dict(os.environ)
    for kv in a.env:
        k, _, v = kv.partition("=")
        env[k] = v
    p = subprocess.Popen([a.qwenc, a.model, "--http", "0", "--threads", "1", *a.extra], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    port = None
    for line in p.stderr:
        m = re.search(r"listening on http://[^\s:]+:(\d+)", line)
        if m:
            port = int(m.group(1))
            break
    if not port:
        sys.exit("soak: the server did not start")
    threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()

    st = Stats()
    nxt = [0]
    lock = threading.Lock()
    samples = []
    base = [None]

    def client(i):
        while True:
            with lock:
                k = nxt[0]
                if k >= a.requests:
                    return
                nxt[0] += 1
            kind = MIX[(k * 7 + i) % len(MIX)]
            ok, what = one(port, kind, k)
            st.add(kind, ok, what)

    def sampler():
        while p.poll() is None and st.n < a.requests:
            if st.n >= a.warmup and base[0] is None:
                time.sleep(1)  # let the warm-up's last requests settle
                base[0] = rss_kb(p.pid)
            samples.append((st.n, rss_kb(p.pid), threads_of(p.pid)))
            time.sleep(1)

    t0 = time.monotonic()
    ts = [threading.Thread(target=client, args=(i,)) for i in range(a.clients)]
    sm = threading.Thread(target=sampler, daemon=True)
    for t in ts:
        t.start()
    sm.start()
    for t in ts:
        t.join()
    dt = time.monotonic() - t0
    time.sleep(2)  # abandoned connections time out or close
    end = rss_kb(p.pid)
    peak_threads = max((s[2] for s in samples), default=0)
    p.terminate()
    p.wait(20)
    growth = 100.0 * (end - base[0]) / base[0] if base[0] else float("nan")
    print(f"soak: {st.n} requests from {a.clients} clients in {dt:.1f} s ({st.n / dt:.0f}/s); "
          f"env {' '.join(a.env) or '(default)'}")
    print(f"soak: mix {json.dumps(st.kinds, sort_keys=True)}")
    print(f"soak: RSS after warm-up ({a.warmup}) {base[0]} kB, at the end {end} kB: {growth:+.2f}% "
          f"(limit {a.max_growth}%); peak threads {peak_threads}")
    curve = " ".join(f"{n}:{r // 1024}M" for n, r, _ in samples[:: max(1, len(samples) // 10)])
    print(f"soak: RSS curve (requests:MiB) {curve}")
    if st.bad:
        print("soak: FAIL: unexpected answers:\n  " + "\n  ".join(map(str, st.bad)))
    ok = not st.bad and base[0] and growth < a.max_growth
    print("soak: " + ("ok" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
