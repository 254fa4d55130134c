"""The real-weights tier's second size, on demand: Qwen2.5-Coder-1.5B-Instruct
Q4_K_M (tools/real-models.txt). Run with `make test-real` (which fetches it)
or QWENC_REAL_LARGE=1; the 1.5B file is found at $QWENC_REAL_MODEL_1P5B, else
where `tools/real-model.sh --path 1.5b` says.

The same exact-path logits check as test_real.py's (a) on a shorter text (64
tokens of Python source: transformers' float32 reference of 1.5B is slow on
2 cores), against tests/fixtures/real/qwen2.5-coder-1.5b.{json,npz} made by
tools/make_real_fixtures.py 1.5b.
"""

import os

import pytest

from test_real import compare_exact, load_fixture, need_real_model, pins, precision, qwenc_logits


@pytest.fixture(scope="module")
def real15():
    if not os.environ.get("QWENC_REAL_LARGE"):
        pytest.skip("the 1.5B real-weights check runs on demand: make test-real (or QWENC_REAL_LARGE=1)")
    return need_real_model("1.5b", "QWENC_REAL_MODEL_1P5B")


def test_logits_exact_1p5b(real15, tmp_path):
    meta, arrays = load_fixture("1.5b")
    assert meta["model_sha256"] == pins("1.5b")["sha256"]
    for p in meta["prompts"]:
        lg = qwenc_logits(real15, p["ids"], tmp_path, precision("exact"))
        rel, lse_rel = compare_exact(p["name"], lg, arrays)
        print(f"1.5B {p['name']}: {len(p['ids'])} tokens, worst top-64 error {rel:.2g}, lse {lse_rel:.2g}")
