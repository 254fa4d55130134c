#!/usr/bin/env python3
"""to_gguf.py - a Hugging Face Qwen2 folder (safetensors) -> GGUF for llama.cpp.

  python tools/to_gguf.py MODEL_DIR OUT.gguf [--type bf16|f16|f32|q8_0]

For the benchmark (it lets llama.cpp run exactly the weights qwenc runs) and
the GGUF tests (tests/e2e/test_gguf.py: qwenc loads these files directly).
Uses the `gguf` package (the one llama.cpp's own converter uses) and numpy; reads
model.safetensors (or the shards listed in model.safetensors.index.json) through
np.memmap, so nothing is loaded into memory whole, and writes tensors one by one.

  - arch "qwen2" with every hparam from config.json (context, embedding, FFN,
    blocks, heads, KV heads, rope freq base, RMS eps);
  - 2-D weights in the chosen type (BF16 copied bit for bit when the source is
    BF16; F16 by float32 conversion; Q8_0 by gguf.quants, bit-exact with GGML's
    quantize_row_q8_0), 1-D norms and biases in F32, as llama.cpp's
    convert_hf_to_gguf.py does; no output.weight when embeddings are tied;
  - qwenc.random_weights = true when config.json has qwenc_random_weights (synth);
  - tokenizer: "gpt2" model with "qwen2" pre-tokenizer from MODEL_DIR/tokenizer.json
    (token list padded to vocab_size with [PADn], token types, merges, bos/eos/pad
    ids). Without a tokenizer.json, a placeholder byte-level vocabulary is written
    (enough for llama.cpp to load; the benchmark feeds token ids).
Checked against the transformers fixtures (tests/fixtures/models, converted with
--type f32): llama.cpp's logits match to 3-5e-4 relative (its KV cache is F16).
llama.cpp's qwen2 graph requires heads x head_dim == hidden_size, so a model with
an explicit head_dim that breaks this (tiny-gqa2-hd) converts but does not load.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np
import gguf

ST_NP = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}


class SafeTensors:
    """name -> (dtype string, shape, np.memmap of the raw data)."""

    def __init__(self, model_dir):
        self.t = {}
        idx = os.path.join(model_dir, "model.safetensors.index.json")
        if os.path.exists(idx):
            with open(idx) as f:
                files = sorted(set(json.load(f)["weight_map"].values()))
        else:
            files = ["model.safetensors"]
        for fn in files:
            path = os.path.join(model_dir, fn)
            with open(path, "rb") as f:
                n = struct.unpack("<Q", f.read(8))[0]
                hdr = json.loads(f.read(n))
            mm = np.memmap(path, dtype=np.uint8, mode="r")
            for name, info in hdr.items():
                if name == "__metadata__":
                    continue
                b, e = info["data_offsets"]
                self.t[name] = (info["dtype"], info["shape"], mm[8 + n + b: 8 + n + e])

    def raw(self, name):
        dt, shape, buf = self.t[name]
        if dt not in ST_NP:
            raise SystemExit(f"to_gguf: {name}: unsupported dtype {dt}")
        return dt, buf.view(ST_NP[dt]).reshape(shape)

    def f32(self, name):
        dt, a = self.raw(name)
        if dt == "BF16":
            return (a.astype(np.uint32) << np.uint32(16)).view(np.float32)
        return a.astype(np.float32)


def f32_to_bf16_bits(x):
    """Round-to-nearest-even float32 -> bfloat16 bit patterns (uint16)."""
    u = x.view(np.uint32)
    return ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)


def bytes_to_unicode():
    """GPT-2's byte -> printable character table (what byte-level BPE vocabularies use)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def tokenizer_meta(model_dir, cfg):
    vocab_size = cfg["vocab_size"]
    tt = gguf.TokenType
    path = os.path.join(model_dir, "tokenizer.json")
    bos = cfg.get("bos_token_id") or 151643
    eos = cfg.get("eos_token_id") or 151645
    if isinstance(eos, list):
        eos = eos[0]
    if not os.path.exists(path):
        byte_chars = list(bytes_to_unicode().values())
        tokens = byte_chars + ["ĠĠ"]
        types = [tt.NORMAL] * len(tokens)
        merges = ["Ġ Ġ"]
        for i in range(len(tokens), vocab_size):
            tokens.append(f"[PAD{i}]")
            types.append(tt.CONTROL if i in (bos, eos) else tt.USER_DEFINED)
        return tokens, types, merges, min(bos, vocab_size - 1), min(eos, vocab_size - 1), None
    with open(path, encoding="utf-8") as f:
        tj = json.load(f)
    vocab = tj["model"]["vocab"]
    rev = {i: t for t, i in vocab.items()}
    special = {}
    for a in tj.get("added_tokens", []):
        rev[a["id"]] = a["content"]
        special[a["id"]] = a.get("special", False)
    tokens, types = [], []
    for i in range(vocab_size):
        if i not in rev:
            tokens.append(f"[PAD{i}]")
            types.append(tt.UNUSED)
        elif i in special:
            tokens.append(rev[i])
            types.append(tt.CONTROL if special[i] else tt.USER_DEFINED)
        else:
            tokens.append(rev[i])
            types.append(tt.NORMAL)
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"].get("merges", [])]
    tc_path = os.path.join(model_dir, "tokenizer_config.json")
    pad = None
    if os.path.exists(tc_path):
        with open(tc_path, encoding="utf-8") as f:
            tc = json.load(f)
        ids = {a["content"]: a["id"] for a in tj.get("added_tokens", [])}
        eos = ids.get(tc.get("eos_token"), eos)
        pad = ids.get(tc.get("pad_token"))
    return tokens, types, merges, bos, eos, pad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("out")
    ap.add_argument("--type", default="bf16", choices=["bf16", "f16", "f32", "q8_0"])
    args = ap.parse_args()

    with open(os.path.join(args.model_dir, "config.json")) as f:
        cfg = json.load(f)
    st = SafeTensors(args.model_dir)
    h = cfg["hidden_size"]
    nh = cfg["num_attention_heads"]
    nl = cfg["num_hidden_layers"]
    rope = cfg.get("rope_theta") or cfg.get("rope_parameters", {}).get("rope_theta", 1e6)
    tied = cfg.get("tie_word_embeddings", False)

    qt = {"bf16": gguf.GGMLQuantizationType.BF16, "f16": gguf.GGMLQuantizationType.F16,
          "f32": gguf.GGMLQuantizationType.F32, "q8_0": gguf.GGMLQuantizationType.Q8_0}[args.type]
    ftype = {"bf16": gguf.LlamaFileType.MOSTLY_BF16, "f16": gguf.LlamaFileType.MOSTLY_F16,
             "f32": gguf.LlamaFileType.ALL_F32, "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}[args.type]

    w = gguf.GGUFWriter(args.out + ".tmp", "qwen2")
    w.add_name(os.path.basename(os.path.normpath(args.model_dir)))
    w.add_context_length(cfg.get("max_position_embeddings", 32768))
    w.add_embedding_length(h)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_block_count(nl)
    w.add_head_count(nh)
    w.add_head_count_kv(cfg.get("num_key_value_heads", nh))
    if cfg.get("head_dim"):
        w.add_key_length(cfg["head_dim"])
        w.add_value_length(cfg["head_dim"])
    w.add_rope_freq_base(float(rope))
    w.add_layer_norm_rms_eps(float(cfg.get("rms_norm_eps", 1e-6)))
    w.add_file_type(ftype)
    if cfg.get("qwenc_random_weights"):
        # qwenc synth models: keep the "RANDOM WEIGHTS" warning (qwenc reads this key)
        w.add_bool("qwenc.random_weights", True)

    tokens, types, merges, bos, eos, pad = tokenizer_meta(args.model_dir, cfg)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(bos)
    w.add_eos_token_id(eos)
    if pad is not None:
        w.add_pad_token_id(pad)
    w.add_add_bos_token(False)

    names = [("model.embed_tokens.weight", "token_embd.weight"),
             ("model.norm.weight", "output_norm.weight")]
    if not tied:
        names.append(("lm_head.weight", "output.weight"))
    per_layer = [("input_layernorm.weight", "attn_norm.weight"),
                 ("self_attn.q_proj.weight", "attn_q.weight"), ("self_attn.q_proj.bias", "attn_q.bias"),
                 ("self_attn.k_proj.weight", "attn_k.weight"), ("self_attn.k_proj.bias", "attn_k.bias"),
                 ("self_attn.v_proj.weight", "attn_v.weight"), ("self_attn.v_proj.bias", "attn_v.bias"),
                 ("self_attn.o_proj.weight", "attn_output.weight"),
                 ("post_attention_layernorm.weight", "ffn_norm.weight"),
                 ("mlp.gate_proj.weight", "ffn_gate.weight"), ("mlp.up_proj.weight", "ffn_up.weight"),
                 ("mlp.down_proj.weight", "ffn_down.weight")]
    for i in range(nl):
        names += [(f"model.layers.{i}.{a}", f"blk.{i}.{b}") for a, b in per_layer]
    for src, _ in names:
        if src not in st.t:
            raise SystemExit(f"to_gguf: {args.model_dir}: missing tensor {src}")

    def plan(src):
        dt, shape, buf = st.t[src]
        if len(shape) == 1 or qt == gguf.GGMLQuantizationType.F32:
            return "f32", shape, int(np.prod(shape)) * 4
        if args.type == "q8_0":  # every 2-D weight, as llama-quantize's Q8_0 (embedding too)
            return "q8_0", shape, int(np.prod(shape)) // 32 * 34
        return args.type, shape, int(np.prod(shape)) * 2

    plans = [(dst, src) + plan(src) for src, dst in names]
    for dst, src, kind, shape, nbytes in plans:
        if kind == "q8_0":
            w.add_tensor_info(dst, [shape[0], shape[1] // 32 * 34], np.dtype(np.uint8), nbytes, raw_dtype=qt)
        elif kind == "bf16":
            w.add_tensor_info(dst, shape, np.dtype(np.uint16), nbytes, raw_dtype=qt)
        elif kind == "f16":
            w.add_tensor_info(dst, shape, np.dtype(np.float16), nbytes)
        else:
            w.add_tensor_info(dst, shape, np.dtype(np.float32), nbytes)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for dst, src, kind, shape, nbytes in plans:
        if kind == "q8_0":  # gguf's quantizer: bit-exact with GGML's quantize_row_q8_0
            data = gguf.quants.quantize(st.f32(src).astype(np.float32), gguf.GGMLQuantizationType.Q8_0)
        elif kind == "bf16":
            dt, a = st.raw(src)
            data = a if dt == "BF16" else f32_to_bf16_bits(a.astype(np.float32))
        elif kind == "f16":
            data = st.f32(src).astype(np.float16)
        else:
            data = st.f32(src)
        w.write_tensor_data(np.ascontiguousarray(data))
    w.close()
    os.replace(args.out + ".tmp", args.out)
    print(f"to_gguf: wrote {args.out} ({os.path.getsize(args.out) / 1e6:.0f} MB, {args.type}, "
          f"{len(plans)} tensors, {len(tokens)} tokens, {len(merges)} merges)", file=sys.stderr)


if __name__ == "__main__":
    main()
