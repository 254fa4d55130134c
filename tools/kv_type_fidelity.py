#!/usr/bin/env python3
"""kv_type_fidelity.py - fidelity of a 16-bit KV cache against float32 KV.

    tools/kv_type_fidelity.py MODEL.gguf [--tokens N] [--threads T] [TEXT_FILE ...]

Tokenizes committed public text (default: tests/fixtures/text/gettysburg.txt,
tests/fixtures/real/texts/heapq_about.txt and textwrap_py.txt, then
src/kernels/attn/attn_avx2.c as code), runs the first N tokens (default
1000) through `qwenc --logits-out` with --kv-type f32, f16 and bf16 (the
fast precision), and prints for each the perplexity of the text
(next-token log-likelihood) and, against f32 KV, the relative perplexity
difference, the top-1 agreement over the positions and the largest logit
difference; also over the positions at or past 512, where a position reads
more rounded K/V rows. The logits files are read in row blocks (N x the
vocabulary x 4 bytes each: 600 MB at N = 1000).
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TYPES = ("f32", "f16", "bf16")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("texts", nargs="*")
    ap.add_argument("--tokens", type=int, default=1000)
    ap.add_argument("--threads", default="2")
    ap.add_argument("--qwenc", default=os.path.join(ROOT, "qwenc"))
    a = ap.parse_args()
    texts = a.texts or [os.path.join(ROOT, p) for p in (
        "tests/fixtures/text/gettysburg.txt", "tests/fixtures/real/texts/heapq_about.txt",
        "tests/fixtures/real/texts/textwrap_py.txt", "src/kernels/attn/attn_avx2.c")]
    text = "\n\n".join(open(p, encoding="utf-8").read() for p in texts)
    r = subprocess.run([a.qwenc, a.model, "--tokenize", "-"], input=text.encode(), capture_output=True, check=True)
    ids = np.array([int(x) for x in r.stdout.split()][: a.tokens])
    n = len(ids)
    with tempfile.TemporaryDirectory() as tmp:
        lg = {}
        for t in TYPES:
            f = os.path.join(tmp, t + ".f32")
            subprocess.run([a.qwenc, a.model, "--tokens", " ".join(map(str, ids)), "--logits-out", f,
                            "--threads", a.threads, "--kv-type", t], check=True, capture_output=True)
            lg[t] = np.memmap(f, dtype="<f4", mode="r").reshape(n, -1)
        nll = {t: np.zeros(n - 1) for t in TYPES}
        top = {t: np.zeros(n, dtype=np.int64) for t in TYPES}
        maxd = {t: np.zeros(n) for t in TYPES}
        for r0 in range(0, n, 64):
            r1 = min(n, r0 + 64)
            base = np.asarray(lg["f32"][r0:r1])
            for t in TYPES:
                x = np.asarray(lg[t][r0:r1]).astype(np.float64)
                top[t][r0:r1] = x.argmax(1)
                maxd[t][r0:r1] = np.abs(x - base).max(1)
                m = x.max(1, keepdims=True)
                lse = m[:, 0] + np.log(np.exp(x - m).sum(1))
                rows = np.arange(r0, min(r1, n - 1))
                nll[t][rows] = lse[: len(rows)] - x[np.arange(len(rows)), ids[rows + 1]]
        del lg
    print(f"{n} tokens of {', '.join(os.path.relpath(p, ROOT) for p in texts)}")
    for t in TYPES:
        ppl = float(np.exp(nll[t].mean()))
        line = f"kv {t:4s}: perplexity {ppl:.4f}"
        if t != "f32":
            p32 = float(np.exp(nll["f32"].mean()))
            agree = float((top[t] == top["f32"]).mean())
            late = slice(512, n)
            line += (f" ({100 * (ppl - p32) / p32:+.3f}% vs f32), top-1 agreement {100 * agree:.2f}%, "
                     f"max |logit diff| {maxd[t].max():.4f}")
            if n > 512:
                pl, pl32 = float(np.exp(nll[t][512:].mean())), float(np.exp(nll["f32"][512:].mean()))
                line += (f"; positions >= 512: ppl {100 * (pl - pl32) / pl32:+.3f}%, top-1 "
                         f"{100 * float((top[t][late] == top['f32'][late]).mean()):.2f}%, "
                         f"max |diff| {maxd[t][late].max():.4f}")
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
