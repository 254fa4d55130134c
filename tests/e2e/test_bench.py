"""The benchmark scripts (tools/bench_run.py, tools/bench.sh) measure what they
say and skip what cannot be had.

No real benchmark runs here: qwenc runs the tiny e2e model as GGUF with a
16-token prompt and 4 decode tokens, and llama.cpp's llama-bench and the
bandwidth probe are stand-ins (small scripts printing fixed figures), so every
number in the report is checked against what went in: the medians, the
ratios, the roofline (bandwidth / weight bytes read per token, the embedding
counted as one row unless it is also the output matrix), the interleaved
order of the rounds, and the skip messages.
"""

import json
import os
import stat
import statistics
import subprocess
import sys

import pytest

from conftest import QWENC, ROOT
from test_gguf import OUT, to_gguf

BENCH_RUN = os.path.join(ROOT, "tools", "bench_run.py")
BENCH_SH = os.path.join(ROOT, "tools", "bench.sh")

sys.path.insert(0, os.path.join(ROOT, "tools"))
import bench_run  # noqa: E402

FAKE_LLAMA = r'''#!PYTHON
import json, sys
a = sys.argv[1:]
open(sys.argv[0] + ".calls", "a").write(" ".join(a) + "\n")
if "FAIL" in open(sys.argv[0] + ".mode").read():
    sys.stderr.write("llama-bench: error: failed to load model\n"); sys.exit(1)
pp, tg = int(a[a.index("-p") + 1]), int(a[a.index("-n") + 1])
print(json.dumps([{"build_commit": "fake", "n_prompt": pp, "n_gen": 0, "avg_ts": 1000.0},
                  {"build_commit": "fake", "n_prompt": 0, "n_gen": tg, "avg_ts": 50.0}]))
'''
FAKE_MEMBW = '#!/bin/sh\necho \'{"threads": 2, "mib": 1, "best_gbs": 10.00, "median_gbs": 9.00}\'\n'


def script(path, text):
    path.write_text(text.replace("#!PYTHON", "#!" + sys.executable))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.fixture()
def fakes(tmp_path):
    llama = script(tmp_path / "llama-bench", FAKE_LLAMA)
    (tmp_path / "llama-bench.mode").write_text("ok")
    return llama, script(tmp_path / "membw", FAKE_MEMBW)


@pytest.fixture(scope="module")
def gguf_model(model_dir):
    return to_gguf(model_dir, os.path.join(OUT, "e2e-model.gguf"), "bf16")


def bench(tmp_path, *args):
    r = subprocess.run([sys.executable, BENCH_RUN, "--qwenc", QWENC, "--pp", "16", "--tg", "4",
                        "--threads", "2", "--out-dir", str(tmp_path / "out"), *args],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    return r


def report(tmp_path):
    out = tmp_path / "out"
    mds = sorted(out.glob("bench-*.md"))
    js = sorted(out.glob("bench-*.json"))
    assert len(mds) == 1 and len(js) == 1, os.listdir(out)
    return mds[0].read_text(), json.loads(js[0].read_text())


def test_weight_bytes_count_the_embedding_as_one_row(tmp_path):
    import gguf
    import numpy as np

    def write(path, tied):
        w = gguf.GGUFWriter(str(path), "qwen2")
        w.add_tensor("token_embd.weight", np.zeros((100, 8), dtype=np.float32))  # 100 rows of 32 bytes
        w.add_tensor("blk.0.attn_q.weight", np.zeros((8, 8), dtype=np.float32))  # 256 bytes
        q8 = gguf.quants.quantize(np.ones((4, 64), dtype=np.float32), gguf.GGMLQuantizationType.Q8_0)
        w.add_tensor("blk.0.ffn_up.weight", q8, raw_dtype=gguf.GGMLQuantizationType.Q8_0)  # 4 rows x 2 blocks x 34
        if not tied:
            w.add_tensor("output.weight", np.zeros((100, 8), dtype=np.float32))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()

    write(tmp_path / "untied.gguf", False)
    write(tmp_path / "tied.gguf", True)
    q8 = 4 * 2 * 34
    assert bench_run.gguf_facts(str(tmp_path / "untied.gguf")) == (100, 32 + 256 + q8 + 3200)
    assert bench_run.gguf_facts(str(tmp_path / "tied.gguf")) == (100, 3200 + 256 + q8)
    # the header parser agrees with the gguf package's reader, tensor by tensor
    ours = {t[0]: (t[1], t[3]) for t in bench_run.gguf_tensors(str(tmp_path / "untied.gguf"))}
    theirs = {t.name: ([int(d) for d in t.shape], int(t.n_bytes))
              for t in gguf.GGUFReader(str(tmp_path / "untied.gguf")).tensors}
    assert ours == theirs and len(ours) == 4


def test_bench_run_report(gguf_model, fakes, tmp_path):
    llama, membw = fakes
    r = bench(tmp_path, "--model", f"tiny={gguf_model}", "--model", "gone=/nonexistent/x.gguf",
              "--llama-bench", llama, "--membw", membw, "--reps", "2")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "skipping gone: /nonexistent/x.gguf not found" in r.stderr
    md, js = report(tmp_path)
    # llama-bench was asked for pp16 + tg4, 2 threads, one repetition per round, once per round
    calls = open(llama + ".calls").read().splitlines()
    assert calls == [f"-m {gguf_model} -p 16 -n 4 -t 2 -r 1 -o json"] * 2, calls
    # rounds alternate which engine goes first
    order = [l.split()[4].rstrip(":") for l in r.stderr.splitlines() if l.startswith("bench: round ") and " tiny " in l]
    assert order == ["qwenc", "llama", "llama", "qwenc"], order

    (f,) = js["files"]
    _, wbytes = bench_run.gguf_facts(gguf_model)
    assert f["weight_bytes"] == wbytes and 0 < wbytes < os.path.getsize(gguf_model)
    q = f["raw"]["qwenc"]
    assert len(q) == 2 and all(x["prefill"] > 0 and x["decode"] > 0 and not x["error"] for x in q), q
    assert all(x["n_gen"] == 5 for x in q), "qwenc did not decode tg + 1 tokens"
    s = f["summary"]
    assert s["llama_prefill"] == 1000.0 and s["llama_decode"] == 50.0
    assert s["qwenc_decode"] == pytest.approx(statistics.median(x["decode"] for x in q))
    assert s["qwenc_prefill"] == pytest.approx(statistics.median(x["prefill"] for x in q))
    assert s["roofline"] == pytest.approx(10e9 / wbytes)
    assert js["bandwidth_gbs"] == [10.0, 10.0]
    row = next(l for l in md.splitlines() if l.startswith("| tiny |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3] == "1000.0" and cells[6] == "50.00", cells
    assert cells[4] == f"{s['qwenc_prefill'] / 1000:.2f}x" and cells[7] == f"{s['qwenc_decode'] / 50:.2f}x", cells
    assert cells[10] == f"{100 * 50 / s['roofline']:.0f}%", cells
    assert "| qwenc pp16 tok/s | llama.cpp pp16 |" in md and "build fake" in md
    # each round's ratio pairs that round's two runs
    rr = s["round_ratios"]
    assert rr == [pytest.approx({"prefill": x["prefill"] / 1000.0, "decode": x["decode"] / 50.0}) for x in q], rr
    line = next(l for l in md.splitlines() if l.startswith("- tiny: pp16 "))
    assert line == ("- tiny: pp16 " + ", ".join(f"{x['prefill'] / 1000.0:.2f}" for x in q) + "; tg4 "
                    + ", ".join(f"{x['decode'] / 50.0:.2f}" for x in q)), line


# A probe that reads 10, 20, 30, ... GB/s, one more each call: which file's
# roofline used which probe shows in the figures.
FAKE_MEMBW_RISING = """#!PYTHON
import os, sys
c = os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), "membw.count")
n = int(open(c).read()) + 1 if os.path.exists(c) else 1
open(c, "w").write(str(n))
print('{"threads": 2, "mib": 1, "best_gbs": %.2f, "median_gbs": 1.0}' % (10.0 * n))
"""


def test_bench_run_probes_bandwidth_per_file(gguf_model, fakes, tmp_path):
    """Each file's roofline comes from the probes taken just before its own
    runs (the round's probe serves the first file), not from one per round."""
    llama, _ = fakes
    membw = script(tmp_path / "membw-rising", FAKE_MEMBW_RISING)
    r = bench(tmp_path, "--model", f"a={gguf_model}", "--model", f"b={gguf_model}", "--llama-bench", llama,
              "--membw", membw, "--reps", "2")
    assert r.returncode == 0, r.stderr[-3000:]
    md, js = report(tmp_path)
    fa, fb = js["files"]
    # round 1: probe 10 (a), 20 (b); round 2: 30 (a), 40 (b)
    assert fa["bandwidth_gbs"] == [10.0, 30.0] and fb["bandwidth_gbs"] == [20.0, 40.0], (fa, fb)
    assert js["bandwidth_gbs"] == [10.0, 30.0]
    _, wbytes = bench_run.gguf_facts(gguf_model)
    assert fa["summary"]["roofline"] == pytest.approx(20e9 / wbytes)
    assert fb["summary"]["roofline"] == pytest.approx(30e9 / wbytes)
    assert "a 10.0, 30.0; b 20.0, 40.0 GB/s per round" in md, md


def test_bench_run_llama_failure_is_reported_not_fatal(gguf_model, fakes, tmp_path):
    llama, membw = fakes
    open(llama + ".mode", "w").write("FAIL")
    r = bench(tmp_path, "--model", f"tiny={gguf_model}", "--llama-bench", llama, "--membw", membw, "--reps", "1")
    assert r.returncode == 0, r.stderr[-3000:]
    md, js = report(tmp_path)
    row = next(l for l in md.splitlines() if l.startswith("| tiny |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] != "-" and cells[3] == "-" and cells[4] == "-", cells
    assert "failed to load model" in md


def test_bench_sh_skips_what_cannot_be_had(tmp_path):
    env = dict(os.environ, REAL_MODEL="/nonexistent/q4_k_m.gguf", LLAMA_BIN=str(tmp_path), BENCH_FILES="real-0.5b-q4_k_m",
               QWENC=QWENC, PYTHON=sys.executable, BENCH_OUT=str(tmp_path / "out"), BENCH_DIR=str(tmp_path / "llm"))
    r = subprocess.run(["sh", BENCH_SH], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert r.returncode == 1
    assert "skipping the real 0.5b Q4_K_M file: /nonexistent/q4_k_m.gguf not found" in r.stderr, r.stderr
    assert "no file to measure" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
