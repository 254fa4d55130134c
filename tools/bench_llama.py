#!/usr/bin/env python3
"""bench_llama.py - one llama.cpp measurement run (a worker of tools/bench_run.py).

  python tools/bench_llama.py MODEL.gguf SPEC.json

SPEC.json: {"threads": 2, "n_ctx": 2048, "first": [ids],
            "prefill": {"32": [ids], ...},
            "decode": [{"name": "after32", "prompt": [ids], "n": 128}, ...]}

Runs in a fresh process so that "first token" includes loading: right after the
first token of SPEC.first is sampled it prints "FIRST <id>" on stdout (the parent
timestamps that line). Then it measures, with llama-cpp-python's Llama.eval:
prefill tok/s for every prompt in "prefill" (KV cache cleared before each), and
decode tok/s for each "decode" entry (prompt evaluated, then n greedy steps, each
one Llama.eval of one token; the rate counts the n steps). Last stdout line: JSON.
"""
import json
import sys
import time

import numpy as np


def main():
    path, spec_path = sys.argv[1], sys.argv[2]
    with open(spec_path) as f:
        spec = json.load(f)
    import llama_cpp  # noqa: E402  (import counted in the first-token time, like a load)

    llm = llama_cpp.Llama(model_path=path, n_ctx=spec["n_ctx"], n_batch=512, n_ubatch=512,
                          n_threads=spec["threads"], n_threads_batch=spec["threads"],
                          logits_all=False, use_mmap=True, verbose=False)

    n_vocab = llm.n_vocab()

    def last_logits():
        # With logits_all=False, Llama.eval keeps no copy of the logits; the context's
        # output buffer holds the last token's row (the only output of the batch).
        return np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(n_vocab,))

    llm.eval(spec["first"])
    first = int(np.argmax(last_logits()))
    print(f"FIRST {first}", flush=True)

    out = {"prefill": {}, "decode": {}, "first_token": first}
    for name, toks in spec["prefill"].items():
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(toks)
        dt = time.perf_counter() - t0
        out["prefill"][name] = len(toks) / dt
    for d in spec["decode"]:
        llm.reset()
        llm.eval(d["prompt"])
        tok = int(np.argmax(last_logits()))
        gen = []
        t0 = time.perf_counter()
        for _ in range(d["n"]):
            llm.eval([tok])
            tok = int(np.argmax(last_logits()))
            gen.append(tok)
        dt = time.perf_counter() - t0
        out["decode"][d["name"]] = d["n"] / dt
    out["llama_cpp_version"] = getattr(llama_cpp, "__version__", "?")
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
