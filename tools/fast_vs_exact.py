#!/usr/bin/env python3
"""fast_vs_exact.py - fidelity of the fast precision against the exact one.

    tools/fast_vs_exact.py MODEL.gguf [--tokens N] [--threads T] [TEXT_FILE ...]

Tokenizes committed public text (default: tests/fixtures/text/gettysburg.txt,
then src/kernels/qdot/qdot_ref.c as code: the Qwen2.5-Coder files read both), runs
the first N tokens (default 400) through `qwenc --logits-out` with
--precision exact and --precision fast, and prints for each the perplexity
of the text (next-token log-likelihood), their relative difference, the
top-1 agreement of the two precisions over the positions, the largest and
the rms logit difference, and the mean KL divergence of the fast
next-token distribution from the exact one. Targets (issue 10): perplexity within 0.5% of exact,
top-1 agreement >= 98%.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("texts", nargs="*")
    ap.add_argument("--tokens", type=int, default=400)
    ap.add_argument("--threads", default="2")
    ap.add_argument("--qwenc", default=os.path.join(ROOT, "qwenc"))
    a = ap.parse_args()
    texts = a.texts or [os.path.join(ROOT, "tests/fixtures/text/gettysburg.txt"),
                        os.path.join(ROOT, "src/kernels/qdot/qdot_ref.c")]
    text = "\n\n".join(open(p, encoding="utf-8").read() for p in texts)
    r = subprocess.run([a.qwenc, a.model, "--tokenize", "-"], input=text.encode(), capture_output=True, check=True)
    ids = [int(x) for x in r.stdout.split()][: a.tokens]
    n = len(ids)
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for prec in ("exact", "fast"):
            f = os.path.join(tmp, prec + ".f32")
            subprocess.run([a.qwenc, a.model, "--tokens", " ".join(map(str, ids)), "--logits-out", f,
                            "--threads", a.threads, "--precision", prec], check=True, capture_output=True)
            lg = np.fromfile(f, dtype="<f4").reshape(n, -1)
            out[prec] = lg
    nll, top = {}, {}
    for prec, lg in out.items():
        x = lg[:-1].astype(np.float64)
        m = x.max(1, keepdims=True)
        lse = (m[:, 0] + np.log(np.exp(x - m).sum(1)))
        nll[prec] = float((lse - x[np.arange(n - 1), ids[1:]]).mean())
        top[prec] = lg.argmax(1)
    ppl = {p: float(np.exp(v)) for p, v in nll.items()}
    agree = float((top["fast"] == top["exact"]).mean())
    rel = (ppl["fast"] - ppl["exact"]) / ppl["exact"]
    maxdiff = float(np.abs(out["fast"] - out["exact"]).max())
    rms = float(np.sqrt(((out["fast"].astype(np.float64) - out["exact"]) ** 2).mean()))
    # mean KL(exact || fast) of the next-token distributions, in nats
    lp = {}
    for prec, lg in out.items():
        x = lg.astype(np.float64)
        x = x - x.max(1, keepdims=True)
        lp[prec] = x - np.log(np.exp(x).sum(1, keepdims=True))
    kl = float((np.exp(lp["exact"]) * (lp["exact"] - lp["fast"])).sum(1).mean())
    print(f"{n} tokens of {', '.join(os.path.relpath(p, ROOT) for p in texts)}")
    print(f"perplexity exact {ppl['exact']:.4f}  fast {ppl['fast']:.4f}  ({100 * rel:+.3f}%)")
    print(f"top-1 agreement fast vs exact: {100 * agree:.2f}% of {n} positions; max |logit diff| {maxdiff:.4f}")
    print(f"logit diff rms {rms:.4f}; mean KL(exact || fast) {kl:.6f} nats")
    ok = abs(rel) <= 0.005 and agree >= 0.98
    print("targets (|ppl diff| <= 0.5%, top-1 >= 98%):", "met" if ok else "MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
