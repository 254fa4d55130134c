#!/usr/bin/env python3
"""make_fixtures.py - reference Qwen2 models and logits from Hugging Face transformers.

Builds small random Qwen2ForCausalLM models (eager attention, fixed seeds), saves
each with F32 weights and with BF16 weights (separate folders) under
tests/fixtures/models/<name>-{f32,bf16}/, and writes, for every folder, the
reference computed by transformers from THAT folder:

  ref/cases.json   [{"name", "tokens", "logits": "caseN.f32", "greedy": [32 ids],
                     "min_margin": relative top-1/top-2 margin over the greedy steps}]
  ref/caseN.f32    raw little-endian float32, n_tokens x vocab, row-major: the
                   logits of every prompt position (one forward over the prompt).

The BF16 folders are loaded with dtype=torch.float32: the BF16 weights are upcast
exactly and everything is computed in float32, which is what qwenc does (16-bit
weights, float32 activations and accumulation).

Random models are scaled so that greedy decoding has a healthy margin: for every
greedy step, (top1 - top2) / max|logit| must be >= --min-margin (default 5e-3,
five times the BF16 tolerance); a model whose references fail this, or whose greedy
continuation contains an EOS id, is rebuilt with the next seed. The minimum margin
is printed and stored.

Usage:  python tools/make_fixtures.py [--out tests/fixtures/models] [--min-margin 5e-3]
Needs torch, transformers, safetensors, numpy (tools/venv.sh --torch).
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import torch
import transformers
import transformers.utils.logging as hf_logging
from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

N_GREEDY = 32

# name -> shape. Sizes deliberately avoid multiples of 8/16 where the architecture
# allows it (the head_dim must be even for rotate-half RoPE).
SHAPES = [
    dict(name="tiny-gqa7",  # like Qwen2.5-0.5B: tied, 7 query heads per KV head
         hidden_size=84, num_attention_heads=7, num_key_value_heads=1,
         intermediate_size=203, num_hidden_layers=3, vocab_size=397,
         tie_word_embeddings=True, seed=1000, emb_std=0.3,
         gen=dict(eos_token_id=[396, 395], bos_token_id=395, do_sample=True,
                  temperature=0.7, top_p=0.8, top_k=20, repetition_penalty=1.05)),
    dict(name="tiny-gqa2-hd",  # untied, explicit head_dim (q width 40 != hidden 70)
         hidden_size=70, num_attention_heads=4, num_key_value_heads=2, head_dim=10,
         intermediate_size=189, num_hidden_layers=3, vocab_size=331,
         tie_word_embeddings=False, seed=2000,
         gen=dict(eos_token_id=330)),
    dict(name="tiny-mha3-v4cfg",  # MHA (ratio 1), untied, 4 layers, 4.x-style config.json
         hidden_size=66, num_attention_heads=3, num_key_value_heads=3,
         intermediate_size=157, num_hidden_layers=4, vocab_size=301,
         tie_word_embeddings=False, seed=3000, v4_config=True,
         gen=dict(eos_token_id=[300, 299], bos_token_id=299)),
]

CASE_LENGTHS = [("one", 1), ("seven", 7), ("forty", 40), ("long", 333)]


def build_config(shape):
    kw = dict(
        vocab_size=shape["vocab_size"],
        hidden_size=shape["hidden_size"],
        intermediate_size=shape["intermediate_size"],
        num_hidden_layers=shape["num_hidden_layers"],
        num_attention_heads=shape["num_attention_heads"],
        num_key_value_heads=shape["num_key_value_heads"],
        max_position_embeddings=512,
        rms_norm_eps=1e-6,
        tie_word_embeddings=shape["tie_word_embeddings"],
        hidden_act="silu",
        use_sliding_window=False,
        attn_implementation="eager",
    )
    if "head_dim" in shape:
        kw["head_dim"] = shape["head_dim"]
    # transformers 5.x spells it rope_parameters; 4.x takes rope_theta.
    if "rope_parameters" in Qwen2Config().to_dict():
        kw["rope_parameters"] = {"rope_type": "default", "rope_theta": 1000000.0}
    else:
        kw["rope_theta"] = 1000000.0
    return Qwen2Config(**kw)


def init_weights(model, seed, emb_std=1.0):
    """Re-initialise every parameter (HF init zeroes the biases and sets norms to 1,
    which would hide bias and norm bugs). Linear weights ~ N(0, 1/fan_in) keep
    activations O(1); biases and norm weights are random; embeddings N(0, emb_std^2)
    (tied models use a smaller emb_std: with a large one the residual stream is
    dominated by the input token's own embedding and greedy repeats the last token).
    """
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(0.6 + 0.8 * torch.rand(p.shape, generator=g))
            elif name.endswith(".bias"):
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            elif "embed_tokens" in name or "lm_head" in name:
                p.copy_(emb_std * torch.randn(p.shape, generator=g))
            else:
                fan_in = p.shape[1]
                p.copy_(torch.randn(p.shape, generator=g) * (1.0 / fan_in ** 0.5))


def rel_margin(row):
    top2 = torch.topk(row, 2).values
    return float((top2[0] - top2[1]) / row.abs().max())


@torch.no_grad()
def reference(folder, cases, eos_ids):
    """Load folder in float32, return per-case (logits[n, vocab], greedy ids, min margin)."""
    model = Qwen2ForCausalLM.from_pretrained(folder, dtype=torch.float32,
                                             attn_implementation="eager")
    model.eval()
    out = []
    for name, toks in cases:
        ids = torch.tensor([toks], dtype=torch.long)
        full = model(ids, use_cache=True)
        logits = full.logits[0].float().clone()          # (n_tokens, vocab)
        past = full.past_key_values
        row = logits[-1]
        greedy, margins = [], []
        for _ in range(N_GREEDY):
            nxt = int(torch.argmax(row))
            margins.append(rel_margin(row))
            greedy.append(nxt)
            step = model(torch.tensor([[nxt]]), past_key_values=past, use_cache=True)
            past = step.past_key_values
            row = step.logits[0, -1].float()
        # Cross-check the KV-cache path against one full forward over prompt+greedy.
        allids = torch.tensor([toks + greedy], dtype=torch.long)
        full2 = model(allids).logits[0]
        want = full2[len(toks) - 1:len(toks) - 1 + N_GREEDY].argmax(-1).tolist()
        if want != greedy:
            raise RuntimeError(f"{folder}/{name}: KV-cache greedy != full-forward argmax")
        bad_eos = any(t in eos_ids for t in greedy)
        out.append((name, toks, logits.numpy().astype("<f4"), greedy, min(margins), bad_eos))
    return out


def to_v4_config(path):
    """Rewrite config.json in the transformers 4.x form (rope_theta at top level,
    torch_dtype, no layer_types), as the real Qwen2.5 configs are written."""
    with open(path) as f:
        c = json.load(f)
    rp = c.pop("rope_parameters", None) or {}
    c["rope_theta"] = float(rp.get("rope_theta", c.get("rope_theta", 1000000.0)))
    if "dtype" in c:
        c["torch_dtype"] = c.pop("dtype")
    c.pop("layer_types", None)
    c["sliding_window"] = c["max_position_embeddings"]
    c["max_window_layers"] = c["num_hidden_layers"]
    c["transformers_version"] = "4.43.1"
    with open(path, "w") as f:
        json.dump(c, f, indent=2, sort_keys=True)
        f.write("\n")


def write_ref(folder, results, min_margin_all):
    refdir = os.path.join(folder, "ref")
    os.makedirs(refdir, exist_ok=True)
    cases = []
    for i, (name, toks, logits, greedy, mm, _) in enumerate(results):
        fn = f"case{i}.f32"
        logits.tofile(os.path.join(refdir, fn))
        cases.append({"name": name, "tokens": toks, "n_tokens": len(toks),
                      "vocab_size": int(logits.shape[1]), "logits": fn,
                      "greedy": greedy, "min_margin": round(mm, 6)})
    with open(os.path.join(refdir, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1)
        f.write("\n")


def save_model(model, shape, folder, dtype):
    if os.path.isdir(folder):
        shutil.rmtree(folder)
    m = model.to(dtype)
    m.save_pretrained(folder, safe_serialization=True)
    GenerationConfig(**shape["gen"]).save_pretrained(folder)
    if shape.get("v4_config"):
        to_v4_config(os.path.join(folder, "config.json"))
    model.to(torch.float32)


def eos_list(gen):
    e = gen["eos_token_id"]
    return set(e if isinstance(e, list) else [e])


def build_one(shape, out, min_margin, max_tries, min_distinct):
    torch.manual_seed(shape["seed"])
    rng = np.random.default_rng(shape["seed"])
    vocab = shape["vocab_size"]
    eos = eos_list(shape["gen"])
    # Prompts avoid the EOS/BOS ids, like real text tokens.
    hi = vocab - 2
    cases = [(n, [int(x) for x in rng.integers(0, hi, size=k)]) for n, k in CASE_LENGTHS]
    cfg = build_config(shape)
    for attempt in range(max_tries):
        seed = shape["seed"] + attempt
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(cfg)
        init_weights(model, seed, shape.get("emb_std", 1.0))
        model.eval()
        with tempfile.TemporaryDirectory() as tmp:
            res = {}
            ok = True
            for tag, dtype in (("f32", torch.float32), ("bf16", torch.bfloat16)):
                folder = os.path.join(tmp, tag)
                save_model(model, shape, folder, dtype)
                res[tag] = reference(folder, cases, eos)
                mm = min(r[4] for r in res[tag])
                distinct = len(set(t for r in res[tag] for t in r[3]))
                if mm < min_margin or any(r[5] for r in res[tag]) or distinct < min_distinct:
                    print(f"  {shape['name']}-{tag}: seed {seed} rejected "
                          f"(min margin {mm:.2e}, eos in greedy {any(r[5] for r in res[tag])}, "
                          f"{distinct} distinct greedy ids)")
                    ok = False
                    break
            if not ok:
                continue
            for tag in ("f32", "bf16"):
                dst = os.path.join(out, f"{shape['name']}-{tag}")
                if os.path.isdir(dst):
                    shutil.rmtree(dst)
                shutil.copytree(os.path.join(tmp, tag), dst)
                mm = min(r[4] for r in res[tag])
                write_ref(dst, res[tag], mm)
                print(f"{shape['name']}-{tag}: seed {seed}, min greedy margin {mm:.3e} "
                      f"(relative to max|logit|)")
            return seed, {t: min(r[4] for r in res[t]) for t in res}
    raise SystemExit(f"{shape['name']}: no seed within {max_tries} tries reached margin {min_margin}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "fixtures", "models"))
    ap.add_argument("--min-margin", type=float, default=5e-3)
    ap.add_argument("--max-tries", type=int, default=200)
    ap.add_argument("--min-distinct", type=int, default=8,
                    help="reject models whose greedy continuations (all cases together) "
                         "use fewer distinct ids: random models tend to repeat one token")
    ap.add_argument("--only", help="build only this shape name")
    args = ap.parse_args()
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    os.makedirs(args.out, exist_ok=True)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"python {sys.version.split()[0]}")
    vpath = os.path.join(args.out, "versions.json")
    summary = {}
    if args.only and os.path.exists(vpath):
        with open(vpath) as f:
            summary = json.load(f).get("models", {})
    for shape in SHAPES:
        if args.only and shape["name"] != args.only:
            continue
        seed, mm = build_one(shape, args.out, args.min_margin, args.max_tries,
                             args.min_distinct)
        summary[shape["name"]] = {"seed": seed, "min_margin": mm}
    overall = min(v for s in summary.values() for v in s["min_margin"].values())
    print(f"minimum greedy margin over all fixtures: {overall:.3e}")
    with open(vpath, "w") as f:
        json.dump({"torch": torch.__version__, "transformers": transformers.__version__,
                   "numpy": np.__version__, "python": sys.version.split()[0],
                   "command": "python tools/make_fixtures.py --min-margin %g --min-distinct %d"
                              % (args.min_margin, args.min_distinct),
                   "min_margin_overall": overall,
                   "models": summary}, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
