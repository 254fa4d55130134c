#!/usr/bin/env python3
"""bench_synth.py - random-weight Qwen2 model folder (fallback for `qwenc synth`).

  python tools/bench_synth.py OUT_DIR --config config.json [--tokenizer DIR]
                              [--dtype bf16|f16|f32] [--seed S] [--scale 0.02]

Writes OUT_DIR/config.json (with "qwenc_random_weights": true),
generation_config.json and model.safetensors holding every tensor of a
Qwen2ForCausalLM with the config's shapes: matrices, embeddings and biases
~ N(0, scale^2), norm weights ~ 1 + N(0, scale^2). The safetensors file is written
by hand (header + raw little-endian data) and streamed in chunks, so numpy is the
only dependency and the 0.5B model (~1 GB in BF16) never sits in memory.
tokenizer.json / tokenizer_config.json are copied from --tokenizer DIR if given.
tools/bench.sh uses this only when `./qwenc synth` is not available.
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np

CHUNK = 1 << 22  # elements generated at a time


def tensor_list(cfg):
    h = cfg["hidden_size"]
    nh = cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads", nh)
    hd = cfg.get("head_dim") or h // nh
    inter = cfg["intermediate_size"]
    v = cfg["vocab_size"]
    out = [("model.embed_tokens.weight", [v, h], "mat"), ("model.norm.weight", [h], "norm")]
    if not cfg.get("tie_word_embeddings", False):
        out.append(("lm_head.weight", [v, h], "mat"))
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out += [
            (p + "input_layernorm.weight", [h], "norm"),
            (p + "post_attention_layernorm.weight", [h], "norm"),
            (p + "self_attn.q_proj.weight", [nh * hd, h], "mat"),
            (p + "self_attn.q_proj.bias", [nh * hd], "mat"),
            (p + "self_attn.k_proj.weight", [nkv * hd, h], "mat"),
            (p + "self_attn.k_proj.bias", [nkv * hd], "mat"),
            (p + "self_attn.v_proj.weight", [nkv * hd, h], "mat"),
            (p + "self_attn.v_proj.bias", [nkv * hd], "mat"),
            (p + "self_attn.o_proj.weight", [h, nh * hd], "mat"),
            (p + "mlp.gate_proj.weight", [inter, h], "mat"),
            (p + "mlp.up_proj.weight", [inter, h], "mat"),
            (p + "mlp.down_proj.weight", [h, inter], "mat"),
        ]
    return sorted(out)


def f32_to_bf16_bits(x):
    """Round-to-nearest-even float32 -> bfloat16 bit patterns (uint16)."""
    u = x.view(np.uint32)
    r = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    return r.astype(np.uint16)


def encode(x, dtype):
    if dtype == "bf16":
        return f32_to_bf16_bits(x).tobytes()
    if dtype == "f16":
        return x.astype("<f2").tobytes()
    return x.astype("<f4").tobytes()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--config", required=True)
    ap.add_argument("--tokenizer", help="folder with tokenizer.json to copy")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "f32"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--scale", type=float, default=0.02)
    args = ap.parse_args()

    with open(args.config) as f:
        cfg = json.load(f)
    os.makedirs(args.out, exist_ok=True)
    esize = {"bf16": 2, "f16": 2, "f32": 4}[args.dtype]
    st_dtype = {"bf16": "BF16", "f16": "F16", "f32": "F32"}[args.dtype]
    tensors = tensor_list(cfg)
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for name, shape, _ in tensors:
        n = int(np.prod(shape)) * esize
        header[name] = {"dtype": st_dtype, "shape": shape, "data_offsets": [off, off + n]}
        off += n
    hbytes = json.dumps(header, separators=(",", ":")).encode()
    hbytes += b" " * ((8 - len(hbytes) % 8) % 8)

    rng = np.random.default_rng(args.seed)
    path = os.path.join(args.out, "model.safetensors")
    with open(path + ".tmp", "wb") as f:
        f.write(len(hbytes).to_bytes(8, "little"))
        f.write(hbytes)
        for name, shape, kind in tensors:
            left = int(np.prod(shape))
            while left:
                k = min(left, CHUNK)
                x = rng.standard_normal(k, dtype=np.float32) * np.float32(args.scale)
                if kind == "norm":
                    x += np.float32(1.0)
                f.write(encode(x, args.dtype))
                left -= k
    os.replace(path + ".tmp", path)

    cfg = dict(cfg)
    cfg["qwenc_random_weights"] = True
    cfg["torch_dtype"] = {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}[args.dtype]
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    gen = {"bos_token_id": cfg.get("bos_token_id", 151643),
           "eos_token_id": [151645, 151643] if cfg.get("vocab_size") == 151936
           else cfg.get("eos_token_id")}
    with open(os.path.join(args.out, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2)
        f.write("\n")
    copied = 0
    if args.tokenizer:
        for fn in ("tokenizer.json", "tokenizer_config.json"):
            src = os.path.join(args.tokenizer, fn)
            if os.path.isfile(src):
                shutil.copyfile(src, os.path.join(args.out, fn))
                copied += 1
    print(f"bench_synth: wrote {args.out} ({off / 1e6:.0f} MB of {st_dtype} weights, "
          f"{len(tensors)} tensors, {copied} tokenizer files)", file=sys.stderr)


if __name__ == "__main__":
    main()
