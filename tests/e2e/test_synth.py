"""`qwenc synth`: a random-weight model folder, checked byte by byte.

The safetensors file is parsed here with the standard library only (the
format: 8-byte LE header length, JSON header padded with spaces to 8 bytes,
tensors back to back) so CI needs no torch; when torch + safetensors +
transformers import, the folder is also loaded by transformers.
"""

import json
import math
import os
import random
import struct

import pytest

from conftest import QWENC, ROOT, TINY_CONFIG, run

SHARED_CONFIG = os.path.join(ROOT, "..", "shared", "models", "qwen2.5-0.5b-instruct", "config.json")

# Qwen/Qwen2.5-0.5B-Instruct's config.json, for machines without ../shared.
QWEN05_CONFIG = {
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
    "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 21,
    "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24,
    "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
    "sliding_window": 32768, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
    "transformers_version": "4.43.1", "use_cache": True, "use_sliding_window": False,
    "vocab_size": 151936,
}

DTYPES = {"bf16": ("BF16", 2), "f16": ("F16", 2), "f32": ("F32", 4)}


def read_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        raw = f.read(n)
    assert (8 + n) % 8 == 0, f"header length {n}: data does not start 8-aligned"
    text = raw.decode("utf-8")
    assert text == text.rstrip(" ") + " " * (len(text) - len(text.rstrip(" "))), "padding is not spaces"
    return n, json.loads(text)


def expected_tensors(cfg):
    H, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    nh, nkv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    hd = cfg.get("head_dim", H // nh)
    t = {"model.embed_tokens.weight": [V, H], "model.norm.weight": [H]}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        t.update({
            p + "input_layernorm.weight": [H], p + "post_attention_layernorm.weight": [H],
            p + "self_attn.q_proj.weight": [nh * hd, H], p + "self_attn.q_proj.bias": [nh * hd],
            p + "self_attn.k_proj.weight": [nkv * hd, H], p + "self_attn.k_proj.bias": [nkv * hd],
            p + "self_attn.v_proj.weight": [nkv * hd, H], p + "self_attn.v_proj.bias": [nkv * hd],
            p + "self_attn.o_proj.weight": [H, nh * hd],
            p + "mlp.gate_proj.weight": [I, H], p + "mlp.up_proj.weight": [I, H],
            p + "mlp.down_proj.weight": [H, I],
        })
    if not cfg.get("tie_word_embeddings", False):
        t["lm_head.weight"] = [V, H]
    return t


def check_file(path, cfg, dtype):
    """Header names/shapes/dtypes/offsets; returns (header_len, header)."""
    n, hdr = read_header(path)
    meta = hdr.pop("__metadata__", {})
    assert "random" in json.dumps(meta), meta
    want = expected_tensors(cfg)
    assert set(hdr) == set(want), f"missing {set(want) - set(hdr)}, extra {set(hdr) - set(want)}"
    st, es = DTYPES[dtype]
    spans = []
    for name, info in hdr.items():
        assert info["dtype"] == st, (name, info)
        assert info["shape"] == want[name], (name, info["shape"], want[name])
        a, b = info["data_offsets"]
        assert b - a == math.prod(info["shape"]) * es, (name, a, b)
        spans.append((a, b))
    spans.sort()
    assert spans[0][0] == 0
    for (a0, b0), (a1, b1) in zip(spans, spans[1:]):
        assert b0 == a1, "hole or overlap between tensors"
    assert os.path.getsize(path) == 8 + n + spans[-1][1], "file size != header + data"
    return n, hdr


def values(path, n_hdr, info, dtype, count):
    a, b = info["data_offsets"]
    _, es = DTYPES[dtype]
    count = min(count, (b - a) // es)
    with open(path, "rb") as f:
        f.seek(8 + n_hdr + a)
        raw = f.read(count * es)
    if dtype == "f32":
        return list(struct.unpack(f"<{count}f", raw))
    if dtype == "f16":
        return list(struct.unpack(f"<{count}e", raw))
    return [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in struct.unpack(f"<{count}H", raw)]


def stats(v):
    m = sum(v) / len(v)
    return m, math.sqrt(sum((x - m) ** 2 for x in v) / len(v))


@pytest.fixture(scope="module")
def tok_dir(model_dir):
    return model_dir  # conftest's tiny model carries the tokenizer fixture


@pytest.mark.parametrize("dtype", ["bf16", "f16", "f32"])
def test_tiny_all_dtypes(tmp_path, tok_dir, dtype):
    out = tmp_path / "m"
    r = run([QWENC, "synth", str(out), "--config", TINY_CONFIG, "--dtype", dtype, "--seed", "3",
             "--tokenizer", tok_dir])
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 0, err
    assert "RANDOM WEIGHTS" in err, err
    cfg = json.load(open(TINY_CONFIG))
    got = json.load(open(out / "config.json"))
    assert got.pop("qwenc_random_weights") is True
    assert got == cfg, "the given config must be kept as it is"
    gen = json.load(open(out / "generation_config.json"))
    assert gen["eos_token_id"] == [151645, 151643] and gen["bos_token_id"] == 151643, gen
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert open(out / name, "rb").read() == open(os.path.join(tok_dir, name), "rb").read(), name

    path = str(out / "model.safetensors")
    n, hdr = check_file(path, cfg, dtype)
    m, s = stats(values(path, n, hdr["model.embed_tokens.weight"], dtype, 20000))
    assert abs(m) < 0.002 and 0.017 < s < 0.023, (m, s)
    m, s = stats(values(path, n, hdr["model.layers.1.mlp.down_proj.weight"], dtype, 8192))
    assert abs(m) < 0.003 and 0.016 < s < 0.024, (m, s)
    m, s = stats(values(path, n, hdr["model.norm.weight"], dtype, 64))
    assert abs(m - 1.0) < 0.01 and s < 0.05, (m, s)

    # qwenc loads it and generates.
    g = run([QWENC, str(out), "151644 8948 198", "3", "--threads", "1"])
    assert g.returncode == 0, g.stderr.decode(errors="replace")
    ids = g.stdout.split()
    assert len(ids) <= 3 and all(0 <= int(x) < cfg["vocab_size"] for x in ids), g.stdout


def test_deterministic_and_seeded(tmp_path):
    outs = []
    for name, seed in (("a", "5"), ("b", "5"), ("c", "6")):
        r = run([QWENC, "synth", str(tmp_path / name), "--config", TINY_CONFIG, "--seed", seed,
                 "--no-tokenizer"])
        assert r.returncode == 0, r.stderr
        outs.append(open(tmp_path / name / "model.safetensors", "rb").read())
    assert outs[0] == outs[1], "same seed, different bytes"
    assert outs[0] != outs[2] and len(outs[0]) == len(outs[2])
    assert not (tmp_path / "a" / "tokenizer.json").exists()


def test_untied_and_scale(tmp_path):
    cfg = json.load(open(TINY_CONFIG))
    cfg.update(tie_word_embeddings=False, head_dim=32, num_hidden_layers=1)
    p = tmp_path / "cfg.json"
    p.write_text(json.dumps(cfg))
    out = tmp_path / "m"
    r = run([QWENC, "synth", str(out), "--config", str(p), "--no-tokenizer", "--scale", "0.1"])
    assert r.returncode == 0, r.stderr
    path = str(out / "model.safetensors")
    n, hdr = check_file(path, cfg, "bf16")
    assert hdr["model.layers.0.self_attn.q_proj.weight"]["shape"] == [4 * 32, 64]
    m, s = stats(values(path, n, hdr["lm_head.weight"], "bf16", 20000))
    assert 0.09 < s < 0.11, s


def test_default_is_qwen25_05b(tmp_path):
    out = tmp_path / "full"
    r = run([QWENC, "synth", str(out), "--no-tokenizer"], timeout=300)
    err = r.stderr.decode(errors="replace")
    try:
        assert r.returncode == 0, err
        want = json.load(open(SHARED_CONFIG)) if os.path.exists(SHARED_CONFIG) else QWEN05_CONFIG
        got = json.load(open(out / "config.json"))
        assert got.pop("qwenc_random_weights") is True
        assert got == want
        path = str(out / "model.safetensors")
        n, hdr = check_file(path, want, "bf16")
        total = sum(math.prod(i["shape"]) for i in hdr.values() if isinstance(i, dict) and "shape" in i)
        assert total == 494032768, total  # Qwen2.5-0.5B: 494M parameters (tied)
    finally:
        p = out / "model.safetensors"
        if p.exists():
            p.unlink()


@pytest.mark.parametrize("cfg_text,words", [
    ('{"hidden_size": 64}', ["intermediate_size"]),
    ('{"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 3,'
     ' "vocab_size": 100}', ["hidden_size", "num_attention_heads"]),
    ('{"hidden_size": "x", "intermediate_size": 1}', ["hidden_size"]),
    ('{"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,'
     ' "num_key_value_heads": 3, "vocab_size": 100}', ["num_key_value_heads"]),
    ('[1, 2]', ["not a JSON object"]),
    ('{"hidden_size": ', ["not valid JSON"]),
])
def test_bad_configs_named(tmp_path, cfg_text, words):
    p = tmp_path / "bad_config.json"
    p.write_text(cfg_text)
    r = run([QWENC, "synth", str(tmp_path / "m"), "--config", str(p), "--no-tokenizer"])
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 1, err
    assert "bad_config.json" in err and all(w in err for w in words), err
    assert not (tmp_path / "m" / "model.safetensors").exists()


def test_usage_errors(tmp_path):
    r = run([QWENC, "synth", str(tmp_path / "m"), "--dtype", "int8"])
    assert r.returncode == 2 and b"--dtype" in r.stderr
    r = run([QWENC, "synth"])
    assert r.returncode == 2 and b"usage" in r.stderr
    r = run([QWENC, "synth", str(tmp_path / "m"), "--config", str(tmp_path / "nope.json")])
    assert r.returncode == 1 and b"nope.json" in r.stderr
    r = run([QWENC, "synth", str(tmp_path / "m2"), "--config", TINY_CONFIG, "--tokenizer",
             str(tmp_path)])
    assert r.returncode == 1 and b"tokenizer.json" in r.stderr, r.stderr


def test_loads_in_transformers(tmp_path, tok_dir):
    torch = pytest.importorskip("torch", reason="torch not installed (CI): transformers check skipped")
    transformers = pytest.importorskip("transformers")
    out = tmp_path / "m"
    r = run([QWENC, "synth", str(out), "--config", TINY_CONFIG, "--tokenizer", tok_dir])
    assert r.returncode == 0, r.stderr
    model = transformers.AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32)
    n_params = sum(p.numel() for p in model.parameters())
    cfg = json.load(open(TINY_CONFIG))
    assert n_params == sum(math.prod(s) for s in expected_tensors(cfg).values())
    with torch.no_grad():
        logits = model(torch.tensor([[151644, 8948, 198]])).logits
    assert torch.isfinite(logits).all()
