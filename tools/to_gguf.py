#!/usr/bin/env python3
"""to_gguf.py - a Hugging Face Qwen2 folder (safetensors) -> GGUF for llama.cpp.

  python tools/to_gguf.py MODEL_DIR OUT.gguf [--type TYPE] [--dequant]

  TYPE: bf16 f16 f32 q8_0 q4_0 q4_1 q5_0 q5_1 q4_k q5_k q6_k mixed

For the benchmark (it lets llama.cpp run exactly the weights qwenc runs) and
the GGUF tests (tests/e2e/test_gguf.py: qwenc loads these files directly).
Uses the `gguf` package (the one llama.cpp's own converter uses) and numpy; reads
model.safetensors (or the shards listed in model.safetensors.index.json) through
np.memmap, so nothing is loaded into memory whole, and writes tensors one by one.

  - arch "qwen2" with every hparam from config.json (context, embedding, FFN,
    blocks, heads, KV heads, rope freq base, RMS eps);
  - 2-D weights in the chosen type (BF16 copied bit for bit when the source is
    BF16; F16 by float32 conversion; Q8_0 by gguf.quants, bit-exact with GGML's
    quantize_row_q8_0; Q4_0 Q4_1 Q5_0 Q5_1 by gguf.quants; Q4_K Q5_K Q6_K by
    tools/kquants.py, a simple min/max quantizer in GGML's layout), 1-D norms
    and biases in F32, as llama.cpp's convert_hf_to_gguf.py does; no
    output.weight when embeddings are tied;
  - the quantized types apply to every matrix, the embedding included (as
    llama-quantize with a pure type); a K-quant whose row length is not a
    multiple of 256 falls back per tensor as llama.cpp does (Q4_K -> Q5_0,
    Q5_K -> Q5_1, Q6_K -> Q8_0). `mixed` is a Q4_K_M-like mixture (llama.cpp's
    rule for Q4_K_M): Q6_K for output.weight (token_embd when tied), attn_v
    and ffn_down in the layers where llama.cpp's use_more_bits holds, Q4_K
    elsewhere, with the same fallbacks -- for Qwen2.5-0.5B (896 columns) that
    gives a Q5_0 / Q8_0 / Q4_K / Q6_K file like the ones on Hugging Face;
  - --dequant writes the same values as F32: each quantized matrix
    dequantized (gguf's dequantize). The reference for tests: qwenc must give
    bitwise the same logits for the quantized file and this one;
  - qwenc.random_weights = true when config.json has qwenc_random_weights (synth);
  - tokenizer: "gpt2" model with "qwen2" pre-tokenizer from MODEL_DIR/tokenizer.json
    (token list padded to vocab_size with [PADn], token types, merges, bos/eos/pad
    ids). Without a tokenizer.json, a placeholder byte-level vocabulary is written
    (enough for llama.cpp to load; the benchmark feeds token ids);
  - tokenizer.chat_template from MODEL_DIR/tokenizer_config.json when it has one.
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kquants  # noqa: E402

Q_ = gguf.GGMLQuantizationType
QUANT = {"q8_0": Q_.Q8_0, "q4_0": Q_.Q4_0, "q4_1": Q_.Q4_1, "q5_0": Q_.Q5_0, "q5_1": Q_.Q5_1,
         "q4_k": Q_.Q4_K, "q5_k": Q_.Q5_K, "q6_k": Q_.Q6_K}
K_FALLBACK = {Q_.Q4_K: Q_.Q5_0, Q_.Q5_K: Q_.Q5_1, Q_.Q6_K: Q_.Q8_0}  # llama.cpp's, for rows not of 256


def use_more_bits(i, n):
    """llama.cpp's choice of the layers that get more bits in Q4_K_M."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def mixed_type(dst, nl, tied):
    """Q4_K_M-like: Q6_K for the output (token_embd when tied), attn_v and
    ffn_down of use_more_bits layers; Q4_K for everything else."""
    if dst == "output.weight" or (tied and dst == "token_embd.weight"):
        return Q_.Q6_K
    if dst.endswith(".attn_v.weight") or dst.endswith(".ffn_down.weight"):
        if use_more_bits(int(dst.split(".")[1]), nl):
            return Q_.Q6_K
    return Q_.Q4_K


def quantize(x, t, chunk=16384):
    """float32 (rows, cols) -> uint8 blocks of type t, in chunks of rows (the
    embedding is 150k rows: keep the temporaries small)."""
    out = []
    for r in range(0, x.shape[0], chunk):
        part = np.ascontiguousarray(x[r:r + chunk])
        if t in (Q_.Q4_K, Q_.Q5_K, Q_.Q6_K):
            out.append(kquants.quantize(part, t.name))
        else:  # gguf's quantizers (Q8_0 bit-exact with GGML's reference)
            out.append(gguf.quants.quantize(part, t))
    return np.concatenate(out)

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
    ap.add_argument("--type", default="bf16", choices=["bf16", "f16", "f32"] + list(QUANT) + ["mixed"])
    ap.add_argument("--dequant", action="store_true",
                    help="store the quantized weights dequantized, as F32 (a test reference)")
    ap.add_argument("--split-max-tensors", type=int, default=0, metavar="N",
                    help="write a split model, at most N tensors per part, named as llama-gguf-split does "
                         "(OUT without .gguf + -00001-of-0000K.gguf); gguf-py's writer does the splitting")
    args = ap.parse_args()

    with open(os.path.join(args.model_dir, "config.json")) as f:
        cfg = json.load(f)
    st = SafeTensors(args.model_dir)
    h = cfg["hidden_size"]
    nh = cfg["num_attention_heads"]
    nl = cfg["num_hidden_layers"]
    rope = cfg.get("rope_theta") or cfg.get("rope_parameters", {}).get("rope_theta", 1e6)
    tied = cfg.get("tie_word_embeddings", False)

    Q = gguf.GGMLQuantizationType
    qt = {"bf16": Q.BF16, "f16": Q.F16, "f32": Q.F32, "mixed": Q.Q4_K, **QUANT}[args.type]
    ftype = {"bf16": "MOSTLY_BF16", "f16": "MOSTLY_F16", "f32": "ALL_F32", "q8_0": "MOSTLY_Q8_0",
             "q4_0": "MOSTLY_Q4_0", "q4_1": "MOSTLY_Q4_1", "q5_0": "MOSTLY_Q5_0", "q5_1": "MOSTLY_Q5_1",
             "q4_k": "MOSTLY_Q4_K_S", "q5_k": "MOSTLY_Q5_K_S", "q6_k": "MOSTLY_Q6_K",
             "mixed": "MOSTLY_Q4_K_M"}[args.type]
    ftype = gguf.LlamaFileType.ALL_F32 if args.dequant else getattr(gguf.LlamaFileType, ftype)

    split = args.split_max_tensors > 0
    # Split parts are named from OUT by the writer; a whole file is written
    # under a temporary name and renamed, so a reader never sees half a file.
    w = gguf.GGUFWriter(args.out if split else args.out + ".tmp", "qwen2", split_max_tensors=args.split_max_tensors)
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
    # The chat template, as llama.cpp's converter copies it (qwenc renders
    # chat only for templates it recognises, so a GGUF without one refuses chat).
    tcfg = os.path.join(args.model_dir, "tokenizer_config.json")
    if os.path.exists(tcfg):
        with open(tcfg, encoding="utf-8") as f:
            tmpl = json.load(f).get("chat_template")
        if isinstance(tmpl, str):
            w.add_chat_template(tmpl)

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

    def plan(src, dst):
        dt, shape, buf = st.t[src]
        if len(shape) == 1 or qt == Q.F32:
            return "f32", shape, int(np.prod(shape)) * 4
        if args.type in ("bf16", "f16"):
            return args.type, shape, int(np.prod(shape)) * 2
        t = qt
        if args.type == "mixed":
            t = mixed_type(dst, nl, tied)
        if shape[1] % 256:
            t = K_FALLBACK.get(t, t)
        blk, bs = gguf.GGML_QUANT_SIZES[t]
        if shape[1] % blk:
            raise SystemExit(f"to_gguf: {src}: {shape[1]} columns is not a multiple of the {t.name} block {blk}")
        if args.dequant:
            return ("deq", t), shape, int(np.prod(shape)) * 4
        return ("q", t), shape, int(np.prod(shape)) // blk * bs

    plans = [(dst, src) + plan(src, dst) for src, dst in names]
    for dst, src, kind, shape, nbytes in plans:
        if kind[0] == "q":
            w.add_tensor_info(dst, [shape[0], nbytes // shape[0]], np.dtype(np.uint8), nbytes, raw_dtype=kind[1])
        elif kind == "bf16":
            w.add_tensor_info(dst, shape, np.dtype(np.uint16), nbytes, raw_dtype=qt)
        elif kind == "f16":
            w.add_tensor_info(dst, shape, np.dtype(np.float16), nbytes)
        else:
            w.add_tensor_info(dst, shape, np.dtype(np.float32), nbytes)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    counts = {}
    for dst, src, kind, shape, nbytes in plans:
        if kind[0] in ("q", "deq"):
            data = quantize(st.f32(src).astype(np.float32), kind[1])
            counts[kind[1].name] = counts.get(kind[1].name, 0) + 1
            if kind[0] == "deq":
                data = gguf.quants.dequantize(data, kind[1]).astype(np.float32)
        elif kind == "bf16":
            dt, a = st.raw(src)
            data = a if dt == "BF16" else f32_to_bf16_bits(a.astype(np.float32))
        elif kind == "f16":
            data = st.f32(src).astype(np.float16)
        else:
            data = st.f32(src)
        w.write_tensor_data(np.ascontiguousarray(data))
    if counts:
        print("to_gguf: matrices: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())), file=sys.stderr)
    w.close()
    if split:
        print(f"to_gguf: wrote {args.out[:-5] if args.out.endswith('.gguf') else args.out}-*-of-*.gguf "
              f"({args.type}, {len(plans)} tensors, at most {args.split_max_tensors} per part)", file=sys.stderr)
        return
    os.replace(args.out + ".tmp", args.out)
    print(f"to_gguf: wrote {args.out} ({os.path.getsize(args.out) / 1e6:.0f} MB, {args.type}, "
          f"{len(plans)} tensors, {len(tokens)} tokens, {len(merges)} merges)", file=sys.stderr)


if __name__ == "__main__":
    main()
