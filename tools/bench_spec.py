#!/usr/bin/env python3
"""Speculative decoding benchmark: qwenc with and without n-gram drafts
(--spec ngram / --spec off), optionally llama-server with and without
--spec-type ngram-simple, on three prompts:

  code     rewrite a ~3,500-character Python class exactly, renaming it
           (tools/bench_spec/inventory.py): the answer copies the prompt
  summary  summarise a given text (tests/fixtures/real/texts/heapq_about.txt)
  story    a free-text story: little to copy (speculation must cost ~nothing)

Greedy, the same token budget for every run; the runs of one prompt are
interleaved round by round (off, on, off, on, ...) so that a busy machine
slows all of them alike. qwenc runs through its CLI (--prompt: chat
template, decode tok/s and the draft counts from stderr); llama-server
through /v1/chat/completions (its "timings"). Prints a Markdown table and,
with --json, writes every run.

  tools/bench_spec.py --model MODEL.gguf [--tokens 400] [--rounds 2]
                      [--prompts code,summary,story] [--llama-server PATH]
"""

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
CLASS_FILE = os.path.join(ROOT, "tools", "bench_spec", "inventory.py")
TEXT_FILE = os.path.join(ROOT, "tests", "fixtures", "real", "texts", "heapq_about.txt")
GEN_RE = re.compile(r"generated (\d+) in ([\d.]+) s \(([\d.]+) tok/s\), drafts accepted (\d+) of (\d+)")


def prompts():
    code = open(CLASS_FILE, encoding="utf-8").read()
    text = open(TEXT_FILE, encoding="utf-8").read()[:2500]
    return {
        "code": "Rewrite this Python class exactly as it is, changing only its name from InventoryLedger "
                "to StockLedger. Output only the code.\n\n```python\n" + code + "```",
        "summary": "Summarise the following text in a few paragraphs, keeping its key terms.\n\n" + text,
        "story": "Write a long story about a lighthouse keeper who finds a message in a bottle.",
    }


def run_qwenc(qwenc, model, prompt, tokens, threads, spec, timeout):
    args = [qwenc, model, "--prompt", prompt, "-n", str(tokens), "--greedy", "--threads", str(threads),
            "--spec", "ngram" if spec else "off"]
    r = subprocess.run(args, capture_output=True, timeout=timeout)
    err = r.stderr.decode(errors="replace")
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:3])} ... failed ({r.returncode}): {err[-500:]}")
    m = GEN_RE.search(err)
    if not m:
        raise RuntimeError(f"no decode line on stderr: {err[-500:]}")
    return {"tokens": int(m.group(1)), "decode_s": float(m.group(2)), "tps": float(m.group(3)),
            "accepted": int(m.group(4)), "drafted": int(m.group(5)), "text": r.stdout.decode(errors="replace")}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    def __init__(self, path, model, threads, spec):
        self.port = free_port()
        args = [path, "-m", model, "-t", str(threads), "--port", str(self.port), "-c", "4096", "-np", "1"]
        if spec:
            args += ["--spec-type", "ngram-simple"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.3)
        self.close()
        raise RuntimeError(f"llama-server {' '.join(args[1:])} did not come up")

    def ask(self, prompt, tokens, timeout):
        body = json.dumps({"messages": [{"role": "user", "content": prompt}], "max_tokens": tokens,
                           "temperature": 0, "cache_prompt": False}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            j = json.loads(r.read())
        t = j.get("timings", {})
        return {"tokens": t.get("predicted_n", 0), "tps": t.get("predicted_per_second", 0.0),
                "accepted": t.get("draft_n_accepted", 0), "drafted": t.get("draft_n", 0),
                "text": j["choices"][0]["message"]["content"]}

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="GGUF file (for llama-server too)")
    ap.add_argument("--qwenc", default=os.path.join(ROOT, "qwenc"))
    ap.add_argument("--tokens", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompts", default="code,summary,story")
    ap.add_argument("--llama-server", default=None, help="llama-server binary (optional)")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--json", default=None, help="write every run here")
    a = ap.parse_args()

    all_prompts = prompts()
    names = [p for p in a.prompts.split(",") if p]
    for n in names:
        if n not in all_prompts:
            sys.exit(f"bench_spec: unknown prompt {n!r} (code, summary, story)")
    runs = []
    for name in names:
        for rnd in range(a.rounds):
            for spec in (False, True):
                r = run_qwenc(a.qwenc, a.model, all_prompts[name], a.tokens, a.threads, spec, a.timeout)
                r.update(engine="qwenc", prompt=name, spec=spec, round=rnd)
                runs.append(r)
                print(f"# qwenc {name} spec={'on' if spec else 'off'} round {rnd}: {r['tokens']} tokens "
                      f"{r['tps']:.1f} tok/s, drafts {r['accepted']}/{r['drafted']}", file=sys.stderr)
    if a.llama_server:
        for spec in (False, True):
            srv = LlamaServer(a.llama_server, a.model, a.threads, spec)
            try:
                for name in names:
                    for rnd in range(a.rounds):
                        r = srv.ask(all_prompts[name], a.tokens, a.timeout)
                        r.update(engine="llama-server", prompt=name, spec=spec, round=rnd)
                        runs.append(r)
                        print(f"# llama-server {name} spec={'on' if spec else 'off'} round {rnd}: "
                              f"{r['tokens']} tokens {r['tps']:.1f} tok/s, drafts {r['accepted']}/{r['drafted']}",
                              file=sys.stderr)
            finally:
                srv.close()

    # The same text with and without drafts (qwenc promises it).
    same = {}
    for name in names:
        offs = [r["text"] for r in runs if r["engine"] == "qwenc" and r["prompt"] == name and not r["spec"]]
        ons = [r["text"] for r in runs if r["engine"] == "qwenc" and r["prompt"] == name and r["spec"]]
        same[name] = all(t == offs[0] for t in offs + ons)

    print(f"| prompt | engine | plain tok/s | spec tok/s | speed-up | accepted / drafted | same text |")
    print(f"|---|---|---|---|---|---|---|")
    for name in names:
        for eng in ("qwenc", "llama-server"):
            off = [r for r in runs if r["engine"] == eng and r["prompt"] == name and not r["spec"]]
            on = [r for r in runs if r["engine"] == eng and r["prompt"] == name and r["spec"]]
            if not off or not on:
                continue
            t_off = statistics.median(r["tps"] for r in off)
            t_on = statistics.median(r["tps"] for r in on)
            acc = sum(r["accepted"] for r in on)
            dr = sum(r["drafted"] for r in on)
            tok = on[0]["tokens"]
            print(f"| {name} ({tok} tok) | {eng} | {t_off:.1f} | {t_on:.1f} | {t_on / t_off if t_off else 0:.2f}x "
                  f"| {acc} / {dr} | {('yes' if same[name] else 'NO') if eng == 'qwenc' else '-'} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(runs, f, indent=1)
    return 0 if all(same.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
