"""GGUF models: MODEL may be a .gguf file (or a folder holding only one).

The GGUF files are written at test time by tools/to_gguf.py (the `gguf`
package, as llama.cpp's own converter), from
  - the transformers fixtures (tests/fixtures/models; F32 folders as F32,
    BF16 folders as BF16): logits of every prompt position must be bitwise
    identical to the same model loaded from safetensors, and greedy
    continuations identical (and equal to transformers'). This is what proves
    the tensor-name mapping, the innermost-first dimension order, the explicit
    head_dim (tiny-gqa2-hd) and that qwen2's Q/K are stored unpermuted;
  - the e2e model (real Qwen2.5 tokenizer): the CLI and the HTTP server take
    the .gguf path wherever they take MODEL, with the same output as the
    folder, and the tokenizer read from GGUF metadata gives the same ids as
    tokenizer.json on the whole tokenizer corpus joined into one text.
The equality cases (the `isa` argument) run under every kernel level this
CPU runs (conftest.py: isa_levels), since each level's tables must keep the
promises on their own.
"""

import json
import re
import os
import shutil
import subprocess
import sys

import pytest
import requests

from conftest import BUILD, QWENC, ROOT, THREADS, isa_env, run, start_http, stop_checked
from helpers import ok_json, post

FIXTURES = os.path.join(ROOT, "tests", "fixtures", "models")
TO_GGUF = os.path.join(ROOT, "tools", "to_gguf.py")
OUT = os.path.join(BUILD, "e2e-gguf")
MODELS = sorted(d for d in os.listdir(FIXTURES) if os.path.isdir(os.path.join(FIXTURES, d)))


def to_gguf(src, dst, typ):
    try:
        import gguf  # noqa: F401
    except ImportError:
        pytest.fail(f"{sys.executable} has no `gguf` package: run tools/venv.sh")
    if not os.path.exists(dst) or os.path.getmtime(dst) < os.path.getmtime(TO_GGUF):
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        r = subprocess.run([sys.executable, TO_GGUF, src, dst, "--type", typ], capture_output=True, timeout=300)
        assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
    return dst


def ok(r):
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr.decode(errors='replace')[-1500:]}"
    return r


@pytest.mark.parametrize("name", MODELS)
def test_fixture_logits_and_greedy_identical(name, isa, tmp_path):
    env = isa_env(isa)
    src = os.path.join(FIXTURES, name)
    typ = "bf16" if name.endswith("-bf16") else "f32"
    g = to_gguf(src, os.path.join(OUT, name + ".gguf"), typ)
    with open(os.path.join(src, "ref", "cases.json")) as f:
        cases = json.load(f)
    for case in cases:
        if case["name"] == "long":
            continue  # keeps the suite fast; "forty" covers multi-chunk prefill
        ids = " ".join(map(str, case["tokens"]))
        a, b = tmp_path / "st.f32", tmp_path / "gguf.f32"
        ok(run([QWENC, src, "--tokens", ids, "--logits-out", str(a), "--threads", THREADS], env=env))
        ok(run([QWENC, g, "--tokens", ids, "--logits-out", str(b), "--threads", THREADS], env=env))
        sa, sb = a.read_bytes(), b.read_bytes()
        assert len(sa) == 4 * case["n_tokens"] * case["vocab_size"]
        assert sa == sb, f"{name} {case['name']} isa={isa}: GGUF logits differ from the safetensors model's"
        outs = []
        for m in (src, g):
            r = ok(run([QWENC, m, "--tokens", ids, "-n", "32", "--greedy", "--threads", THREADS], env=env))
            outs.append([int(x) for x in r.stdout.split()])
        assert outs[0] == outs[1] == case["greedy"], f"{name} {case['name']} isa={isa}: greedy {outs}"


@pytest.fixture(scope="module")
def e2e_gguf(model_dir):
    return to_gguf(model_dir, os.path.join(OUT, "e2e-model.gguf"), "bf16")


IDS = "151644 8948 198 2610 525 264 10950 17847 13 151645 198 151644 872 198 9707 151645 198 151644 77091 198"


def test_cli_single_shot_prompt_tokenize(model_dir, e2e_gguf):
    a = ok(run([QWENC, model_dir, IDS, "8", "--threads", THREADS])).stdout
    b = ok(run([QWENC, e2e_gguf, IDS, "8", "--threads", THREADS])).stdout
    assert a == b and len(a.split()) == 8, (a, b)
    args = ["--prompt", "Explain mmap in one line", "-n", "12", "--threads", THREADS]
    a = ok(run([QWENC, model_dir] + args)).stdout
    b = ok(run([QWENC, e2e_gguf] + args)).stdout
    assert a == b and a.strip(), (a, b)
    text = "Hello, world! 你好 <|im_start|>user\n<tool_call>  x\t\n\n12345"
    a = ok(run([QWENC, model_dir, "--tokenize", text])).stdout
    b = ok(run([QWENC, e2e_gguf, "--tokenize", text])).stdout
    assert a == b and b.split()[:2] == [b"9707", b"11"], (a, b)
    a = ok(run([QWENC, e2e_gguf, "--detokenize", b.decode()])).stdout.decode()
    assert a.rstrip("\n") == text


def test_folder_with_one_gguf(e2e_gguf, tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    os.symlink(e2e_gguf, d / "model.gguf")
    a = ok(run([QWENC, e2e_gguf, IDS, "4", "--threads", THREADS])).stdout
    b = ok(run([QWENC, str(d), IDS, "4", "--threads", THREADS])).stdout
    assert a == b
    shutil.copy(e2e_gguf, d / "second.gguf")
    r = run([QWENC, str(d), IDS, "4"])
    assert r.returncode == 1 and b"several .gguf" in r.stderr, r.stderr


@pytest.fixture(scope="module")
def split_gguf(model_dir, e2e_gguf):
    """The e2e model split into 3 parts by gguf-py's writer (the split format
    llama-gguf-split writes: split.no / split.count / split.tensors.count,
    parts named -0000N-of-00003.gguf)."""
    d = os.path.join(OUT, "split")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    r = subprocess.run([sys.executable, TO_GGUF, model_dir, os.path.join(d, "m.gguf"), "--type", "bf16",
                        "--split-max-tensors", "12"], capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
    parts = sorted(os.listdir(d))
    assert parts == [f"m-0000{i}-of-00003.gguf" for i in (1, 2, 3)], parts
    return d


def test_split_gguf_equals_whole_file(e2e_gguf, split_gguf, tmp_path):
    """A split model loads from its first part, any other part or its
    folder, with logits bitwise those of the same model in one file."""
    ref = tmp_path / "whole.f32"
    ok(run([QWENC, e2e_gguf, "--tokens", IDS, "--logits-out", str(ref), "--threads", THREADS]))
    for m in ("m-00001-of-00003.gguf", "m-00003-of-00003.gguf", ""):
        out = tmp_path / "split.f32"
        r = ok(run([QWENC, os.path.join(split_gguf, m), "--tokens", IDS, "--logits-out", str(out),
                    "--threads", THREADS]))
        assert out.read_bytes() == ref.read_bytes(), f"{m or 'the folder'}: logits differ from the whole file's"
    a = ok(run([QWENC, e2e_gguf, "--prompt", "hi there", "-n", "8", "--threads", THREADS])).stdout
    b = ok(run([QWENC, os.path.join(split_gguf, "m-00002-of-00003.gguf"), "--prompt", "hi there", "-n", "8",
                "--threads", THREADS])).stdout
    assert a == b and a.strip(), (a, b)   # the tokenizer comes from the first part's metadata


def test_split_gguf_errors(split_gguf, tmp_path):
    """Missing, renamed, mismatched or doubled parts: exit 1 with a message
    naming the file and what is wrong (never a crash or a partial model)."""
    def variant(name):
        d = tmp_path / name
        shutil.copytree(split_gguf, d)
        return d

    d = variant("missing")
    os.remove(d / "m-00002-of-00003.gguf")
    r = run([QWENC, str(d / "m-00001-of-00003.gguf"), "--tokens", "1", "-n", "1"])
    assert r.returncode == 1 and b"m-00002-of-00003.gguf" in r.stderr and b"part 2 of 3" in r.stderr, r.stderr

    d = variant("doubled")                        # part 3 copied over part 2
    shutil.copy(d / "m-00003-of-00003.gguf", d / "m-00002-of-00003.gguf")
    r = run([QWENC, str(d / "m-00001-of-00003.gguf"), "--tokens", "1", "-n", "1"])
    assert r.returncode == 1 and b"expected part 2 of 3" in r.stderr and b"part 3 of 3" in r.stderr, r.stderr

    renamed = tmp_path / "model.gguf"             # a part taken out of its set
    shutil.copy(os.path.join(split_gguf, "m-00001-of-00003.gguf"), renamed)
    r = run([QWENC, str(renamed), "--tokens", "1", "-n", "1"])
    assert r.returncode == 1 and b"model.gguf" in r.stderr and b"-00001-of-00003.gguf" in r.stderr, r.stderr

    d = variant("plus-whole")                     # a folder with a split model and another file
    shutil.copy(renamed, d / "other.gguf")
    r = run([QWENC, str(d), "--tokens", "1", "-n", "1"])
    assert r.returncode == 1 and b"several .gguf" in r.stderr, r.stderr

    d = variant("extra-part")                     # a part that claims a different count
    shutil.copy(d / "m-00003-of-00003.gguf", d / "m-00003-of-00004.gguf")
    r = run([QWENC, str(d / "m-00003-of-00004.gguf"), "--tokens", "1", "-n", "1"])
    assert r.returncode == 1 and b"m-00003-of-00004.gguf" in r.stderr, r.stderr


def test_tokenizer_corpus_gguf_equals_json(model_dir, e2e_gguf):
    corpus = os.path.join(BUILD, "fixtures", "tokenizer", "corpus.jsonl")
    with open(corpus, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    assert len(texts) > 5000
    joined = "\n\n".join(texts).encode("utf-8", "surrogatepass")
    a = ok(run([QWENC, model_dir, "--tokenize", "-"], input=joined, timeout=120)).stdout
    b = ok(run([QWENC, e2e_gguf, "--tokenize", "-"], input=joined, timeout=120)).stdout
    assert len(a.split()) > 50000
    assert a == b


def test_http_server_on_gguf(model_dir, e2e_gguf):
    s = start_http(e2e_gguf, "--parallel", "2")
    try:
        health = requests.get(s.url + "/health", timeout=10).json()
        assert health.get("random_weights") is True, health  # carried over by to_gguf.py
        models = requests.get(s.url + "/v1/models", timeout=10).json()
        assert models["data"][0]["id"] == "e2e-model", models
        r = ok_json(post(s, "/v1/completions", {"prompt": "Hello", "max_tokens": 6}))
        assert r["usage"]["completion_tokens"] >= 1, r
        toks = ok_json(post(s, "/tokenize", {"content": "Hello, world! <|im_end|>"}))["tokens"]
    finally:
        stop_checked(s)
    cli = ok(run([QWENC, model_dir, "--tokenize", "Hello, world! <|im_end|>"])).stdout
    assert toks == [int(x) for x in cli.split()], (toks, cli)


def test_bad_gguf_files_exit_1(tmp_path):
    g = to_gguf(os.path.join(FIXTURES, "tiny-gqa7-f32"), os.path.join(OUT, "tiny-gqa7-f32.gguf"), "f32")
    data = open(g, "rb").read()
    cases = {
        "not-gguf.gguf": (b"PK\x03\x04" + data[4:], b"bad magic"),
        "truncated.gguf": (data[: len(data) // 2], b"truncated"),
        "header-only.gguf": (data[:20], b"too short"),
    }
    for fn, (blob, msg) in cases.items():
        p = tmp_path / fn
        p.write_bytes(blob)
        for extra in (["--tokens", "1 2 3"], ["--tokenize", "hi"]):
            r = run([QWENC, str(p)] + extra)
            assert r.returncode == 1, (fn, extra, r.returncode, r.stderr)
            assert msg in r.stderr and str(p).encode() in r.stderr, (fn, r.stderr)


def test_q8_0_gguf_equals_quant_flag(model_dir, isa, tmp_path):
    """A Q8_0 GGUF (gguf's quantizer) and --quant q8_0 (ours) hold the same bytes,
    so their logits agree bit for bit; the GGUF's Q8_0 tensors are used in place."""
    env = isa_env(isa)
    g = to_gguf(model_dir, os.path.join(OUT, "e2e-model-q8_0.gguf"), "q8_0")
    a, b, c = tmp_path / "quant.f32", tmp_path / "gguf.f32", tmp_path / "bf16.f32"
    ok(run([QWENC, model_dir, "--tokens", IDS, "--logits-out", str(a), "--quant", "q8_0", "--threads", THREADS],
           env=env))
    r = ok(run([QWENC, g, "--tokens", IDS, "--logits-out", str(b), "--threads", THREADS], env=env))
    assert b"Q8_0" in r.stderr, r.stderr[-500:]
    ok(run([QWENC, model_dir, "--tokens", IDS, "--logits-out", str(c), "--threads", THREADS], env=env))
    assert a.read_bytes() == b.read_bytes(), f"isa={isa}: Q8_0 GGUF logits differ from --quant q8_0"
    assert a.read_bytes() != c.read_bytes(), "--quant q8_0 changed nothing"
    outs = [ok(run([QWENC, m, IDS, "16", "--threads", THREADS] + extra, env=env)).stdout
            for m, extra in ((model_dir, ["--quant", "q8_0"]), (g, []), (g, ["--quant", "q8_0"]))]
    assert outs[0] == outs[1] == outs[2] and len(outs[0].split()) == 16, outs


def test_quant_flag_errors():
    r = run([QWENC, os.path.join(FIXTURES, "tiny-gqa7-bf16"), "--tokens", "1 2 3", "--quant", "q8_0"])
    assert r.returncode == 1 and b"not a multiple of 32" in r.stderr and b"model.embed_tokens.weight" in r.stderr, r.stderr
    r = run([QWENC, os.path.join(FIXTURES, "tiny-gqa7-bf16"), "--tokens", "1 2 3", "--quant", "q4"])
    assert r.returncode == 2 and b"--quant" in r.stderr, r.stderr


# ---- 4/5/6-bit GGUF types: Q4_0 Q4_1 Q5_0 Q5_1 Q4_K Q5_K Q6_K and a Q4_K_M-like mixture
KQ_TYPES = ["q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k", "mixed"]
KQ_IDS = "1 7 300 42 5 77 500 3 250 11 99 12"
# name -> (hidden, intermediate, tied): rows of 256 (every matrix can be a
# K-quant) and a tied model whose ffn_down rows (320) are not, so K-quants
# fall back to Q5_0 / Q8_0 there as llama.cpp does
KQ_MODELS = {"kq256": (256, 512, False), "kq320": (256, 320, True)}


@pytest.fixture(scope="module")
def kq_models():
    if not os.access(QWENC, os.X_OK):
        pytest.fail(f"{QWENC} is not built (run make)")
    out = {}
    base = json.load(open(os.path.join(os.path.dirname(__file__), "tiny_config.json")))
    for name, (h, i, tied) in KQ_MODELS.items():
        d = os.path.join(OUT, name)
        cfg = dict(base, hidden_size=h, intermediate_size=i, vocab_size=512, num_hidden_layers=3,
                   tie_word_embeddings=tied, bos_token_id=500, eos_token_id=501)
        cfg_path = d + ".json"
        if not os.path.exists(os.path.join(d, "model.safetensors")) or \
                os.path.getmtime(os.path.join(d, "model.safetensors")) < os.path.getmtime(QWENC):
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(OUT, exist_ok=True)
            with open(cfg_path, "w") as f:
                json.dump(cfg, f)
            ok(run([QWENC, "synth", d, "--config", cfg_path, "--no-tokenizer", "--scale", "0.3", "--seed", "5"]))
            gc = os.path.join(d, "generation_config.json")
            if os.path.exists(gc):
                os.unlink(gc)
        out[name] = d
    return out


def to_gguf_deq(src, dst, typ):
    """A GGUF of type typ and its --dequant twin (the same values as F32)."""
    q = to_gguf(src, dst + ".gguf", typ)
    f = dst + "-f32.gguf"
    if not os.path.exists(f) or os.path.getmtime(f) < os.path.getmtime(q):
        r = subprocess.run([sys.executable, TO_GGUF, src, f, "--type", typ, "--dequant"], capture_output=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
    return q, f


EXACT = ["--precision", "exact"]


@pytest.mark.parametrize("typ", KQ_TYPES)
def test_kquant_gguf_equals_dequantized(typ, isa, kq_models, tmp_path):
    """A GGUF whose matrices are of a 4/5/6-bit type gives logits bitwise equal
    to the same model with those matrices dequantized to F32 (gguf's
    dequantize): the types are read in place, exactly, on every kernel level
    (isa), embedding lookup and lm_head included; greedy tokens equal;
    --quant q8_0 keeps the matrices that are already quantized."""
    env = isa_env(isa)
    names = ["kq256", "kq320"] if typ in ("mixed", "q4_k", "q6_k") else ["kq256"]
    for name in names:
        q, f = to_gguf_deq(kq_models[name], os.path.join(OUT, f"{name}-{typ}"), typ)
        a, b, c = tmp_path / "q.f32", tmp_path / "f.f32", tmp_path / "k.f32"
        r = ok(run([QWENC, q, "--tokens", KQ_IDS, "--logits-out", str(a), "--threads", THREADS] + EXACT, env=env))
        if typ != "mixed":  # the log names the embedding's type
            assert typ.upper().encode() in r.stderr, r.stderr[-500:]
        ok(run([QWENC, f, "--tokens", KQ_IDS, "--logits-out", str(b), "--threads", THREADS] + EXACT, env=env))
        assert a.stat().st_size == 12 * 512 * 4
        assert a.read_bytes() == b.read_bytes(), f"{name} {typ} isa={isa}: logits differ from the F32 twin"
        # every matrix is already quantized: --quant q8_0 keeps them all
        ok(run([QWENC, q, "--tokens", KQ_IDS, "--logits-out", str(c), "--threads", THREADS, "--quant", "q8_0"] + EXACT,
               env=env))
        assert a.read_bytes() == c.read_bytes(), f"{name} {typ} isa={isa}: --quant q8_0 re-quantized a matrix"
        outs = [ok(run([QWENC, m, KQ_IDS, "12", "--threads", THREADS] + EXACT + extra, env=env)).stdout
                for m, extra in ((q, []), (f, []), (q, ["--quant", "q8_0"]))]
        assert outs[0] == outs[1] == outs[2] and len(outs[0].split()) == 12, (name, typ, isa, outs)


def test_kquant_mixture_types():
    """The mixture uses what Qwen2.5-0.5B Q4_K_M files hold: K-quants where
    rows are whole super-blocks, llama.cpp's fallbacks elsewhere."""
    from gguf import GGUFReader
    kinds = {}
    for name in KQ_MODELS:
        p = os.path.join(OUT, f"{name}-mixed.gguf")
        assert os.path.exists(p), "run after test_kquant_gguf_equals_dequantized"
        for t in GGUFReader(p).tensors:
            kinds.setdefault(t.tensor_type.name, set()).add(t.name)
    assert {"Q4_K", "Q6_K", "Q5_0", "Q8_0"} <= set(kinds), kinds
    # 3 layers: llama.cpp's use_more_bits picks layer 2 only (Q6_K, 320 columns -> Q8_0)
    assert "blk.2.ffn_down.weight" in kinds["Q8_0"] and "blk.0.ffn_down.weight" in kinds["Q5_0"], kinds


@pytest.mark.parametrize("typ", ["q8_0", "q4_0", "q4_1", "q5_0", "q5_1"])
def test_fast_precision(typ, kq_models, tmp_path):
    """The default precision (fast: 8-bit activations, integer dot products)
    on a GGUF of each block type, at every level this CPU runs: it is used
    (logits differ from --precision exact), stays close to exact (top-1 of
    the 12 positions mostly the same, small error relative to the logit
    range), the same bits with 1 or 2 threads (batch invariance itself is
    tests/unit/test_quant_model.c's, per level), and QWENC_PRECISION=exact
    is --precision exact."""
    import numpy as np
    src = to_gguf(kq_models["kq256"], os.path.join(OUT, f"kq256-{typ}.gguf"), typ)
    for isa in ("ref", "avx2", "avx512", "neon"):
        env = dict(os.environ, QWENC_ISA=isa)
        env.pop("QWENC_PRECISION", None)
        fa, fb, ex, ex2 = (tmp_path / n for n in ("fa.f32", "fb.f32", "ex.f32", "ex2.f32"))
        r = run([QWENC, src, "--tokens", KQ_IDS, "--logits-out", str(fa), "--threads", "1"], env=env)
        if r.returncode != 0 and (b"not supported" in r.stderr or b"unknown ISA" in r.stderr):
            continue
        ok(r)
        assert b"precision: fast" in r.stderr, r.stderr[-500:]
        ok(run([QWENC, src, "--tokens", KQ_IDS, "--logits-out", str(fb), "--threads", "2"], env=env))
        ok(run([QWENC, src, "--tokens", KQ_IDS, "--logits-out", str(ex), "--threads", "2"] + EXACT, env=env))
        r = ok(run([QWENC, src, "--tokens", KQ_IDS, "--logits-out", str(ex2), "--threads", "2"],
                   env=dict(env, QWENC_PRECISION="exact")))
        assert b"precision: exact" in r.stderr, r.stderr[-500:]
        assert fa.read_bytes() == fb.read_bytes(), f"{typ} {isa}: fast logits depend on the thread count"
        assert ex.read_bytes() == ex2.read_bytes(), f"{typ} {isa}: QWENC_PRECISION=exact is not --precision exact"
        assert fa.read_bytes() != ex.read_bytes(), f"{typ} {isa}: the fast path changed nothing"
        a = np.frombuffer(fa.read_bytes(), dtype="<f4").reshape(12, 512)
        b = np.frombuffer(ex.read_bytes(), dtype="<f4").reshape(12, 512)
        agree = int((a.argmax(1) == b.argmax(1)).sum())
        rel = float(np.abs(a - b).max() / np.abs(b).max())
        # random weights amplify the 8-bit activation error (measured: top-1
        # 11-12 of 12, max error 0.1-0.23 of the largest logit); a wrong block
        # or scale moves logits by their whole range. Real-model figures:
        # tools/fast_vs_exact.py.
        assert agree >= 9 and rel < 0.4, f"{typ} {isa}: fast vs exact: top-1 {agree}/12, max rel err {rel:.4f}"


def test_fast_precision_bf16(tmp_path):
    """BF16 weights in the default (fast) precision: on a level with a bf16
    dot product (avx512 on a CPU with AVX512-BF16) the inputs are rounded to
    bf16 (logits differ from exact, top-1 agrees, small error); elsewhere
    fast is the exact path bit for bit; the same bits with 1 or 2 threads
    and prompt-at-once vs one token at a time is test_quant_model's."""
    import numpy as np
    src = os.path.join(FIXTURES, "tiny-gqa7-bf16")
    ids = " ".join(str(i) for i in (7, 300, 41, 5, 199, 23, 88, 150, 3, 61, 390, 12))
    vocab = json.load(open(os.path.join(src, "config.json")))["vocab_size"]
    used = 0
    for isa in ("ref", "avx2", "avx512", "neon"):
        env = dict(os.environ, QWENC_ISA=isa)
        env.pop("QWENC_PRECISION", None)
        fa, fb, ex = (tmp_path / n for n in ("fa.f32", "fb.f32", "ex.f32"))
        r = run([QWENC, src, "--tokens", ids, "--logits-out", str(fa), "--threads", "1"], env=env)
        if r.returncode != 0 and (b"not supported" in r.stderr or b"unknown ISA" in r.stderr):
            continue
        ok(r)
        has_bf16 = isa == "avx512" and b"avx512bf16" in r.stderr
        ok(run([QWENC, src, "--tokens", ids, "--logits-out", str(fb), "--threads", "2"], env=env))
        ok(run([QWENC, src, "--tokens", ids, "--logits-out", str(ex), "--threads", "2"] + EXACT, env=env))
        assert fa.read_bytes() == fb.read_bytes(), f"bf16 {isa}: fast logits depend on the thread count"
        if not has_bf16:
            assert fa.read_bytes() == ex.read_bytes(), f"bf16 {isa}: fast differs from exact without a bf16 kernel"
            continue
        used += 1
        assert fa.read_bytes() != ex.read_bytes(), f"bf16 {isa}: the bf16 path changed nothing"
        a = np.frombuffer(fa.read_bytes(), dtype="<f4").reshape(12, vocab)
        b = np.frombuffer(ex.read_bytes(), dtype="<f4").reshape(12, vocab)
        agree = int((a.argmax(1) == b.argmax(1)).sum())
        rel = float(np.abs(a - b).max() / np.abs(b).max())
        # measured: 12/12, 0.004; a wrong lane order or tail moves logits by their range
        assert agree >= 11 and rel < 0.03, f"bf16 {isa}: fast vs exact: top-1 {agree}/12, max rel err {rel:.4f}"
    print(f"levels with bf16 activations: {used}")


def test_precision_flag_errors():
    m = os.path.join(FIXTURES, "tiny-gqa7-bf16")
    r = run([QWENC, m, "--tokens", "1 2 3", "--precision", "half"])
    assert r.returncode == 2 and b"--precision" in r.stderr, r.stderr
    r = run([QWENC, m, "--tokens", "1 2 3"], env=dict(os.environ, QWENC_PRECISION="fastest"))
    assert r.returncode == 2 and b"QWENC_PRECISION" in r.stderr, r.stderr
    r = run([QWENC, "--help"])
    assert b"--precision fast|exact" in r.stdout + r.stderr


def test_load_log_names_file_type_and_tensor_mix(kq_models, tmp_path):
    """The load log says what the file says it is (general.file_type by
    llama.cpp's name: a Q4_K_M file is "Q4_K_M", not the type of one of its
    tensors) and how many tensors of each type it holds, as gguf-py reads
    them (issue 14)."""
    from collections import Counter
    from gguf import GGUFReader
    q = to_gguf(kq_models["kq320"], os.path.join(OUT, "kq320-mixed.gguf"), "mixed")
    want = Counter(t.tensor_type.name for t in GGUFReader(q).tensors)
    assert len(want) >= 3, want  # a mixture, or the test proves nothing
    r = ok(run([QWENC, q, KQ_IDS, "1", "--threads", THREADS]))
    err = r.stderr.decode(errors="replace")
    m = re.search(r"model: kq320\S*: GGUF (\S+); tensors (.*)", err)  # the name: general.name or the file's
    assert m, err[-2000:]
    assert m.group(1) == "Q4_K_M", m.group(0)
    got = {k: int(v) for k, v in re.findall(r"(\w+) x (\d+)", m.group(2))}
    assert got == dict(want), (got, want)
    counts = [int(v) for v in re.findall(r"x (\d+)", m.group(2))]
    assert counts == sorted(counts, reverse=True), m.group(2)  # most frequent first
    assert re.search(r"loaded kq320\S* .*Q4_K_M\)", err), err[-2000:]
    # a safetensors folder: the format and its dtype
    r = ok(run([QWENC, kq_models["kq320"], KQ_IDS, "1", "--threads", THREADS]))
    assert re.search(r"model: kq320: safetensors; tensors BF16 x \d+", r.stderr.decode(errors="replace")), r.stderr
