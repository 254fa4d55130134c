#!/usr/bin/env python3
"""check_fixtures.py - verify that tests/fixtures/models is self-consistent.

Needs only numpy (CI has no torch). For every model folder (one with ref/cases.json):
  - config.json / generation_config.json parse; vocab, tied embeddings, head_dim;
  - model.safetensors header: every tensor's dtype matches the folder suffix
    (-f32 -> F32, -bf16 -> BF16), byte ranges lie inside the file, shapes agree
    with config.json (embed, q/k/v with bias, o, MLP, norms, lm_head iff untied);
  - each case: logits file has exactly n_tokens x vocab float32, all finite;
    tokens are in range; 32 greedy ids in range, none an EOS id;
    greedy[0] is the argmax of the last prompt row, and the stored min_margin
    is >= --min-margin (default 2e-3) and <= the margin of that first step.
With --recompute (needs torch + transformers) the logits are recomputed from the
folder and compared with the stored ones (max abs diff / max abs logit <= 1e-5).

Exit status 0 when everything holds, 1 otherwise. Prints one line per folder.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

DTYPE_SIZE = {"F32": 4, "BF16": 2, "F16": 2}


def fail(errs, folder, msg):
    errs.append(f"{folder}: {msg}")


def read_st_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
    hdr.pop("__metadata__", None)
    return n, hdr, os.path.getsize(path)


def expected_shapes(cfg):
    h = cfg["hidden_size"]
    nh = cfg["num_attention_heads"]
    nkv = cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or h // nh
    inter = cfg["intermediate_size"]
    v = cfg["vocab_size"]
    shapes = {"model.embed_tokens.weight": [v, h], "model.norm.weight": [h]}
    if not cfg.get("tie_word_embeddings", False):
        shapes["lm_head.weight"] = [v, h]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes.update({
            p + "input_layernorm.weight": [h],
            p + "post_attention_layernorm.weight": [h],
            p + "self_attn.q_proj.weight": [nh * hd, h],
            p + "self_attn.q_proj.bias": [nh * hd],
            p + "self_attn.k_proj.weight": [nkv * hd, h],
            p + "self_attn.k_proj.bias": [nkv * hd],
            p + "self_attn.v_proj.weight": [nkv * hd, h],
            p + "self_attn.v_proj.bias": [nkv * hd],
            p + "self_attn.o_proj.weight": [h, nh * hd],
            p + "mlp.gate_proj.weight": [inter, h],
            p + "mlp.up_proj.weight": [inter, h],
            p + "mlp.down_proj.weight": [h, inter],
        })
    return shapes


def check_folder(folder, min_margin, recompute, errs):
    name = os.path.basename(os.path.normpath(folder))
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(folder, "generation_config.json")) as f:
        gen = json.load(f)
    eos = gen.get("eos_token_id")
    eos = set(eos if isinstance(eos, list) else [eos])
    vocab = cfg["vocab_size"]
    if not ("rope_theta" in cfg or "rope_theta" in cfg.get("rope_parameters", {})):
        fail(errs, name, "config.json has neither rope_theta nor rope_parameters.rope_theta")

    want_dtype = "BF16" if name.endswith("-bf16") else "F32" if name.endswith("-f32") else None
    hlen, hdr, fsize = read_st_header(os.path.join(folder, "model.safetensors"))
    shapes = expected_shapes(cfg)
    if set(hdr) != set(shapes):
        fail(errs, name, f"tensor names differ: extra {sorted(set(hdr) - set(shapes))[:3]} "
                         f"missing {sorted(set(shapes) - set(hdr))[:3]}")
    for tname, t in hdr.items():
        if want_dtype and t["dtype"] != want_dtype:
            fail(errs, name, f"{tname}: dtype {t['dtype']}, folder says {want_dtype}")
        if tname in shapes and t["shape"] != shapes[tname]:
            fail(errs, name, f"{tname}: shape {t['shape']} != {shapes[tname]}")
        b, e = t["data_offsets"]
        nel = int(np.prod(t["shape"]))
        if e - b != nel * DTYPE_SIZE.get(t["dtype"], 0) or 8 + hlen + e > fsize:
            fail(errs, name, f"{tname}: bad data_offsets {b}..{e}")

    with open(os.path.join(folder, "ref", "cases.json")) as f:
        cases = json.load(f)
    worst = 1.0
    loaded = []
    for c in cases:
        cname = c["name"]
        toks = c["tokens"]
        path = os.path.join(folder, "ref", c["logits"])
        logits = np.fromfile(path, dtype="<f4")
        if logits.size != len(toks) * vocab:
            fail(errs, name, f"{cname}: {c['logits']} has {logits.size} floats, "
                             f"want {len(toks)} x {vocab}")
            continue
        logits = logits.reshape(len(toks), vocab)
        loaded.append((c, logits))
        if not np.all(np.isfinite(logits)):
            fail(errs, name, f"{cname}: non-finite logits")
        if any(not 0 <= t < vocab for t in toks + c["greedy"]):
            fail(errs, name, f"{cname}: token id out of range")
        if len(c["greedy"]) != 32:
            fail(errs, name, f"{cname}: {len(c['greedy'])} greedy ids, want 32")
        if eos & set(c["greedy"]):
            fail(errs, name, f"{cname}: greedy continuation contains an EOS id")
        last = logits[-1]
        if int(np.argmax(last)) != c["greedy"][0]:
            fail(errs, name, f"{cname}: greedy[0]={c['greedy'][0]} but argmax of the last "
                             f"prompt row is {int(np.argmax(last))}")
        top2 = np.sort(last)[-2:]
        m0 = float((top2[1] - top2[0]) / np.abs(last).max())
        if c["min_margin"] > m0 + 1e-6:
            fail(errs, name, f"{cname}: stored min_margin {c['min_margin']} > first-step margin {m0}")
        if c["min_margin"] < min_margin:
            fail(errs, name, f"{cname}: min_margin {c['min_margin']} < {min_margin}")
        worst = min(worst, c["min_margin"])
    if len(cases) < 4 or max(len(c["tokens"]) for c in cases) <= 300:
        fail(errs, name, "need >= 4 cases, one longer than 300 tokens")

    rec = ""
    if recompute:
        import torch
        from transformers import Qwen2ForCausalLM
        model = Qwen2ForCausalLM.from_pretrained(folder, dtype=torch.float32,
                                                 attn_implementation="eager")
        model.eval()
        rmax = 0.0
        with torch.no_grad():
            for c, logits in loaded:
                got = model(torch.tensor([c["tokens"]])).logits[0].float().numpy()
                r = float(np.abs(got - logits).max() / np.abs(logits).max())
                rmax = max(rmax, r)
        if rmax > 1e-5:
            fail(errs, name, f"recomputed logits differ: rel {rmax:.2e}")
        rec = f", recomputed rel diff {rmax:.1e}"
    print(f"{name}: {len(cases)} cases, min margin {worst:.2e}{rec}")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root", nargs="?", default=os.path.join(here, "..", "tests", "fixtures", "models"))
    ap.add_argument("--min-margin", type=float, default=2e-3)
    ap.add_argument("--recompute", action="store_true")
    args = ap.parse_args()
    errs = []
    folders = sorted(d for d in os.listdir(args.root)
                     if os.path.isfile(os.path.join(args.root, d, "ref", "cases.json")))
    if not folders:
        print(f"check_fixtures: no model folders under {args.root}", file=sys.stderr)
        return 1
    for d in folders:
        try:
            check_folder(os.path.join(args.root, d), args.min_margin, args.recompute, errs)
        except (OSError, ValueError, KeyError) as e:
            errs.append(f"{d}: {e}")
    for e in errs:
        print("FAIL " + e)
    print(f"{len(folders)} folders, {len(errs)} problems")
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
