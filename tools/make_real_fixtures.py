#!/usr/bin/env python3
"""make_real_fixtures.py - reference values for the real-weights test tier
(tests/e2e/test_real.py), made ONCE with transformers from the same GGUF file
qwenc reads, and committed.

    VENV=/work/venv-torch tools/venv.sh --torch     # torch, transformers, accelerate
    /work/venv-torch/bin/python tools/make_real_fixtures.py [0.5b|1.5b] [GGUF]

GGUF defaults to the file tools/real-model.sh assembles (its cache path).
transformers dequantizes every tensor of the GGUF to float32 and runs its own
Qwen2 forward (eager attention): that is the reference qwenc's exact path must
match. Writes tests/fixtures/real/qwen2.5-coder-<size>.json (prompts, token
ids, perplexities, greedy answers) and .npz (per position: the top-K logits
and their ids, the log-sum-exp, and the logit of the next token of the text).

Why top-K and not the full row: 151936 floats per position would make the
fixture hundreds of MB; the top-K carry what a wrong forward changes first
(the ranking and the scale), the log-sum-exp covers the whole row, and the
next-token logit gives the perplexity.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
FIX = os.path.join(ROOT, "tests", "fixtures", "real")
TEXTS = os.path.join(FIX, "texts")
TOP_K = 64
WINDOW = 512  # tokens per logits prompt / perplexity window

DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."


def chatml(user, system=None):
    """Qwen2.5's chat template (the one qwenc applies), one user turn."""
    return (f"<|im_start|>system\n{system or DEFAULT_SYSTEM}<|im_end|>\n"
            f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n")


def text(name):
    with open(os.path.join(TEXTS, name), encoding="utf-8") as f:
        return f.read()


ZH_RAW = ("计算机程序由一系列指令组成，处理器按顺序执行这些指令。"
          "编译器把人类可读的源代码翻译成机器码，而解释器则逐行执行源代码。"
          "在软件开发中，测试可以帮助我们尽早发现错误，并确保修改代码之后原有的功能仍然正确。"
          "好的代码不仅能正确运行，还应当易于阅读和维护。")

# Logits prompts: (name, kind, text, token cap). kind "chat" = text already
# chat-templated; "raw" = plain text.
LOGIT_PROMPTS_05 = [
    ("py_source", "raw", lambda: text("textwrap_py.txt"), WINDOW),
    ("zh_raw", "raw", lambda: ZH_RAW, WINDOW),
    ("chat_prime", "chat", lambda: chatml("Write a Python function that checks whether a number is prime"), WINDOW),
    ("chat_system_code", "chat",
     lambda: chatml("What does this function return for n = 5?\n\n```python\ndef f(n):\n"
                    "    return sum(i * i for i in range(n))\n```",
                    system="You are a careful Python reviewer. Answer briefly."), WINDOW),
]
LOGIT_PROMPTS_15 = [
    ("py_source_64", "raw", lambda: text("textwrap_py.txt"), 64),
]
# Greedy prompts: (name, user, system, max new tokens).
GREEDY_05 = [
    ("prime", "Write a Python function that checks whether a number is prime", None, 64),
    ("two_plus_two", "What is 2+2?", None, 24),
    ("chinese", "用一句话介绍一下北京。", None, 40),
    ("system_pirate", "What is the capital of France?",
     "You are a pirate. Always answer in one short sentence.", 32),
]
PPL_TEXT_05 = "heapq_about.txt"

EOS = (151645, 151643)  # <|im_end|>, <|endoftext|>


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while b := f.read(1 << 22):
            h.update(b)
    return h.hexdigest()


def forward_logits(model, ids):
    with torch.no_grad():
        out = model(torch.tensor([ids], dtype=torch.long))
    return out.logits[0].to(torch.float64)  # [n, vocab]; reductions in float64


def logits_record(lg, ids):
    """Per position: top-K ids/logits, log-sum-exp, next token's logit."""
    top = torch.topk(lg, TOP_K, dim=-1)
    lse = torch.logsumexp(lg, dim=-1)
    nxt = torch.tensor(ids[1:] + [ids[-1]])
    target = lg.gather(1, nxt[:, None])[:, 0]
    return {
        "top_ids": top.indices.to(torch.int32).numpy(),
        "top_logits": top.values.to(torch.float32).numpy(),
        "lse": lse.to(torch.float32).numpy(),
        "target_logit": target.to(torch.float32).numpy()[:-1],
    }


def nll_mean(lg, ids):
    lse = torch.logsumexp(lg[:-1], dim=-1)
    tgt = lg[:-1].gather(1, torch.tensor(ids[1:])[:, None])[:, 0]
    return float((lse - tgt).mean()), len(ids) - 1


def main():
    size = sys.argv[1] if len(sys.argv) > 1 else "0.5b"
    if size not in ("0.5b", "1.5b"):
        sys.exit("usage: make_real_fixtures.py [0.5b|1.5b] [GGUF]")
    gguf = sys.argv[2] if len(sys.argv) > 2 else subprocess.run(
        [os.path.join(ROOT, "tools", "real-model.sh"), "--path", size],
        check=True, capture_output=True, text=True).stdout.strip()
    if not os.path.isfile(gguf):
        sys.exit(f"{gguf}: no such file (run tools/real-model.sh {size})")
    torch.manual_seed(0)
    torch.set_num_threads(os.cpu_count() or 2)

    # transformers wants a folder and a file name inside it.
    tmp = tempfile.mkdtemp(prefix="qwenc-real-fix-")
    name = os.path.basename(gguf)
    os.symlink(os.path.abspath(gguf), os.path.join(tmp, name))
    t0 = time.time()
    tok = AutoTokenizer.from_pretrained(tmp, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(tmp, gguf_file=name, dtype=torch.float32,
                                                 attn_implementation="eager")
    model.eval()
    print(f"loaded {name} in {time.time() - t0:.0f} s", file=sys.stderr)

    meta = {
        "model_file": name, "model_sha256": sha256(gguf),
        "made_by": "tools/make_real_fixtures.py",
        "reference": f"transformers {transformers.__version__}, torch {torch.__version__}, "
                     "float32 weights dequantized from the GGUF, eager attention",
        "top_k": TOP_K, "prompts": [], "perplexity": None, "greedy": [],
    }
    arrays = {}
    prompts = LOGIT_PROMPTS_05 if size == "0.5b" else LOGIT_PROMPTS_15
    for pname, kind, get, cap in prompts:
        s = get()
        ids = tok.encode(s, add_special_tokens=False)[:cap]
        lg = forward_logits(model, ids)
        for k, v in logits_record(lg, ids).items():
            arrays[f"{pname}.{k}"] = v
        nll, n = nll_mean(lg, ids)
        meta["prompts"].append({"name": pname, "kind": kind, "ids": ids,
                                "text": tok.decode(ids), "nll_mean": nll})
        print(f"{pname}: {len(ids)} tokens, ppl {np.exp(nll):.4f}", file=sys.stderr)

    if size == "0.5b":
        ids = tok.encode(text(PPL_TEXT_05), add_special_tokens=False)
        windows, total, count = [], 0.0, 0
        for i in range(0, len(ids), WINDOW):
            w = ids[i:i + WINDOW]
            if len(w) < 2:
                continue
            nll, n = nll_mean(forward_logits(model, w), w)
            windows.append({"start": i, "ids": w, "nll_sum": nll * n})
            total += nll * n
            count += n
        meta["perplexity"] = {"text": PPL_TEXT_05, "window": WINDOW, "windows": windows,
                              "tokens_scored": count, "ppl": float(np.exp(total / count))}
        print(f"perplexity of {PPL_TEXT_05}: {meta['perplexity']['ppl']:.5f} "
              f"({count} tokens, {len(windows)} windows)", file=sys.stderr)

        for gname, user, system, n_new in GREEDY_05:
            ids = tok.encode(chatml(user, system), add_special_tokens=False)
            with torch.no_grad():
                out = model.generate(torch.tensor([ids]), max_new_tokens=n_new, do_sample=False,
                                     eos_token_id=list(EOS), pad_token_id=EOS[1],
                                     attention_mask=torch.ones(1, len(ids), dtype=torch.long))
            new = out[0, len(ids):].tolist()
            meta["greedy"].append({"name": gname, "user": user, "system": system,
                                   "max_new_tokens": n_new, "prompt_ids": ids,
                                   "expected_ids": new,
                                   "text": tok.decode([t for t in new if t not in EOS])})
            print(f"greedy {gname}: {tok.decode(new)!r}", file=sys.stderr)

    base = os.path.join(FIX, f"qwen2.5-coder-{size}")
    np.savez_compressed(base + ".npz", **arrays)
    with open(base + ".json", "w", encoding="utf-8") as f:
        json.dump(meta, f, ensure_ascii=False, indent=1)
        f.write("\n")
    shutil.rmtree(tmp)
    print(f"wrote {base}.json, {base}.npz ({os.path.getsize(base + '.npz')} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
