"""Speculative decoding (--spec ngram, the default): the output is exactly the
output of plain decoding (--spec off), through the CLI and the HTTP server, on
every kernel level this CPU runs, greedy and with seeded sampling; drafts are
really verified and accepted (the counts on stderr, in usage and /metrics);
"speculative": false and --spec off turn drafting off; token limits inside an
accepted run are kept.

Two tiny models: the e2e model (std 0.3: output depends on the whole context,
so n-gram drafts are tried and mostly rejected: the rejection path) and one
written here with std 0.02, whose greedy output repeats its last token (so
drafts are accepted: the acceptance path). On the real 0.5B file (skipped
when absent): a code-rewrite prompt, identical with and without drafts, with
drafts accepted; and seeded temperature sampling identical too.
"""

import json
import os
import re
import shutil
import threading

import pytest

from conftest import BUILD, QWENC, THREADS, TINY_CONFIG, _tokenizer_dir, isa_env, run, start_http, stop_checked
from helpers import metrics, ok_json, post

DRAFTS_RE = re.compile(r"drafts accepted (\d+) of (\d+)")
PROMPT = " ".join(["11 12 13 14 15"] * 4)


@pytest.fixture(scope="module")
def rep_model():
    """A tiny model whose greedy output repeats (synth std 0.02)."""
    out = os.path.join(BUILD, "e2e-spec-model")
    shutil.rmtree(out, ignore_errors=True)
    r = run([QWENC, "synth", out, "--config", TINY_CONFIG, "--tokenizer", _tokenizer_dir(), "--scale", "0.02"],
            timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 151643, "eos_token_id": [151645, 151643], "do_sample": False}, f)
    return out


def cli_ids(model, args, isa):
    """(ids, accepted, drafted) of a --tokens run."""
    r = run([QWENC, model, "--tokens", PROMPT, "--threads", THREADS, *args], env=isa_env(isa))
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 0, err[-1000:]
    m = DRAFTS_RE.search(err)
    assert m, f"no draft counts on stderr: {err[-500:]}"
    return r.stdout.decode().split(), int(m.group(1)), int(m.group(2))


SAMPLING = [["--greedy"], ["--temp", "0.8", "--top-k", "40", "--seed", "7"],
            ["--temp", "0.3", "--repeat-penalty", "1.1", "--seed", "3"]]


def test_cli_same_tokens(model_dir, rep_model, isa):
    for model in (model_dir, rep_model):
        for samp in SAMPLING:
            plain, acc0, dr0 = cli_ids(model, ["-n", "48", "--spec", "off", *samp], isa)
            spec, acc, dr = cli_ids(model, ["-n", "48", *samp], isa)
            small, _, _ = cli_ids(model, ["-n", "48", "--spec-k", "2", *samp], isa)
            assert dr0 == 0 and acc0 == 0, "--spec off drafted"
            assert spec == plain and small == plain, f"{model} {samp}: speculative != plain"
            assert len(plain) == 48
            assert 0 <= acc <= dr
            if model == rep_model and samp == ["--greedy"]:
                assert acc > 0, f"no draft accepted on the repeating model ({acc} of {dr})"
    # a token limit that ends inside an accepted run
    plain, _, _ = cli_ids(rep_model, ["-n", "7", "--spec", "off"], isa)
    spec, acc, _ = cli_ids(rep_model, ["-n", "7"], isa)
    assert spec == plain and len(spec) == 7 and acc > 0


def test_cli_text_mode(rep_model, isa):
    outs = []
    for spec in ("off", "ngram"):
        r = run([QWENC, rep_model, "--prompt", "repeat after me: a b c a b c", "-n", "30", "--threads", THREADS,
                 "--spec", spec], env=isa_env(isa))
        assert r.returncode == 0, r.stderr.decode(errors="replace")[-500:]
        outs.append(r.stdout)
        m = DRAFTS_RE.search(r.stderr.decode(errors="replace"))
        assert m and (int(m.group(1)) > 0) == (spec == "ngram")
    assert outs[0] == outs[1]


def test_bad_flags(model_dir):
    for args in (["--spec", "maybe"], ["--spec-k", "-1"], ["--spec-k", "x"], ["--spec"]):
        r = run([QWENC, model_dir, "--tokens", "1 2", *args])
        assert r.returncode == 2, args
        assert b"--spec" in r.stderr, r.stderr


def completion(server, prompt, **fields):
    body = {"prompt": prompt, "max_tokens": 40, "raw": True}
    body.update(fields)
    return ok_json(post(server, "/v1/completions", body))


def details(j):
    d = j["usage"]["completion_tokens_details"]
    return d["accepted_draft_tokens"], d["draft_tokens"]


def test_http(rep_model, model_dir, isa, monkeypatch):
    if isa:
        monkeypatch.setenv("QWENC_ISA", isa)
    s = start_http(rep_model, "--parallel", "4")
    try:
        ids = [int(x) for x in PROMPT.split()]
        reqs = [dict(prompt=ids), dict(prompt=ids[3:], max_tokens=9),
                dict(prompt=ids, temperature=0.8, top_k=40, seed=5), dict(prompt="a b c a b c a b c")]
        plain = [completion(s, speculative=False, **r) for r in reqs]
        for j in plain:
            assert details(j) == (0, 0), "speculative: false drafted"
        # the same requests at once (several drafting slots in one step)
        together = [None] * len(reqs)

        def go(i):
            together[i] = completion(s, **reqs[i])
        ts = [threading.Thread(target=go, args=(i,)) for i in range(len(reqs))]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        for i, (a, b) in enumerate(zip(plain, together)):
            assert b is not None, f"request {i} did not finish"
            assert a["choices"][0]["text"] == b["choices"][0]["text"], f"request {i}: speculative text differs"
            assert a["usage"]["completion_tokens"] == b["usage"]["completion_tokens"]
            acc, dr = details(b)
            assert 0 <= acc <= dr
        assert details(together[0])[0] > 0, "greedy request on the repeating model accepted no draft"
        assert together[1]["usage"]["completion_tokens"] == 9
        ms = metrics(s)
        assert ms["qwenc_accepted_draft_tokens_total"] > 0
        assert ms["qwenc_draft_tokens_total"] >= ms["qwenc_accepted_draft_tokens_total"]
        # chat with a stop string: same text, same count
        body = {"messages": [{"role": "user", "content": "say a b c"}], "max_tokens": 30}
        a = ok_json(post(s, "/v1/chat/completions", dict(body, speculative=False)))
        b = ok_json(post(s, "/v1/chat/completions", body))
        assert a["choices"][0]["message"]["content"] == b["choices"][0]["message"]["content"]
        text = a["choices"][0]["message"]["content"]
        if len(text) >= 6:
            stop = text[3:6]
            a = ok_json(post(s, "/v1/chat/completions", dict(body, stop=[stop], speculative=False)))
            b = ok_json(post(s, "/v1/chat/completions", dict(body, stop=[stop])))
            assert a["choices"][0]["message"]["content"] == b["choices"][0]["message"]["content"]
            assert a["usage"]["completion_tokens"] == b["usage"]["completion_tokens"]
        r = post(s, "/v1/completions", {"prompt": ids, "speculative": "no"})
        assert r.status_code == 400 and "speculative" in r.text
    finally:
        stop_checked(s)
    # --spec off: nothing drafted, same text
    s = start_http(rep_model, "--parallel", "2", "--spec", "off")
    try:
        j = completion(s, [int(x) for x in PROMPT.split()])
        assert details(j) == (0, 0)
        assert j["choices"][0]["text"] == plain[0]["choices"][0]["text"]
        assert metrics(s)["qwenc_draft_tokens_total"] == 0
    finally:
        stop_checked(s)


# --- the real 0.5B file --------------------------------------------------------------

CODE = '''class Stack:
    """A last-in first-out stack."""

    def __init__(self):
        self._items = []

    def push(self, item):
        self._items.append(item)

    def pop(self):
        if not self._items:
            raise IndexError("pop from an empty stack")
        return self._items.pop()

    def peek(self):
        return self._items[-1] if self._items else None

    def __len__(self):
        return len(self._items)
'''


def test_real_code_rewrite():
    """On the CPU's default kernel level (the tiny-model tests above cover
    every level)."""
    from test_real import need_real_model
    model = need_real_model("0.5b", "QWENC_REAL_MODEL")
    prompt = "Rewrite this Python class exactly, renaming it to LifoStack:\n\n" + CODE
    runs = {}
    for samp in (["--greedy"], ["--temp", "0.7", "--seed", "11"]):
        for spec in ("off", "ngram"):
            r = run([QWENC, model, "--prompt", prompt, "-n", "120", "--threads", THREADS, "--spec", spec, *samp],
                    timeout=300)
            err = r.stderr.decode(errors="replace")
            assert r.returncode == 0, err[-800:]
            m = DRAFTS_RE.search(err)
            runs[(samp[0], spec)] = (r.stdout, int(m.group(1)), int(m.group(2)))
        off, on = runs[(samp[0], "off")], runs[(samp[0], "ngram")]
        assert on[0] == off[0], f"{samp}: speculative output differs from plain"
        assert off[2] == 0
    assert b"LifoStack" in runs[("--greedy", "ngram")][0]
    assert runs[("--greedy", "ngram")][1] > 0, "no draft accepted on the code rewrite"


def test_bench_spec_smoke(model_dir, tmp_path):
    """tools/bench_spec.py runs end to end (tiny model, 4 tokens): a table
    row per prompt, every run in the JSON, the same text with and without
    drafts (its exit status says so)."""
    import subprocess
    import sys
    from conftest import ROOT
    out = tmp_path / "runs.json"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "bench_spec.py"), "--model", model_dir,
                        "--qwenc", QWENC, "--tokens", "4", "--json", str(out)], capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-1000:]
    table = r.stdout.decode()
    for name in ("code", "summary", "story"):
        assert re.search(rf"^\| {name} \(\d+ tok\) \| qwenc \|.*\| yes \|$", table, re.M), table
    runs = json.load(open(out))
    assert len(runs) == 6 and {(x["prompt"], x["spec"]) for x in runs} == \
        {(p, s) for p in ("code", "summary", "story") for s in (False, True)}
