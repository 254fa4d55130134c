"""logprobs, echo and n > 1 over HTTP.

logprobs are the log-softmax of the raw logits (before temperature and
penalties): checked against a float64 log-softmax of the logits the CLI
writes with --logits-out for the same tokens (forward() is batch invariant,
so the server's logits are the CLI's). echo returns the prompt and, with
logprobs, the prompt tokens' records (the first null). n > 1 returns n
choices, choice i sampled with seed + i; stream chunks carry the index."""

import json

import numpy as np
import pytest

from conftest import QWENC, THREADS, run, start_http, stop_checked
from helpers import SSE, api_error, ok_json, post

PROMPT = [151644, 8948, 198, 2610, 525, 264, 10950, 17847, 13, 151645, 198, 151644, 872, 198,
          9707, 151645, 198, 151644, 77091, 198]
TOL = 2e-4


@pytest.fixture(scope="module")
def srv(model_dir):
    s = start_http(model_dir, "--parallel", "4")
    yield s
    stop_checked(s)


def cli_greedy(model_dir, ids, n):
    r = run([QWENC, model_dir, "--tokens", " ".join(map(str, ids)), "-n", str(n), "--threads", THREADS])
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return [int(x) for x in r.stdout.split()]


def ref_logsoftmax(model_dir, ids, tmp_path):
    """float64 log-softmax of the logits of every position of ids (from the CLI)."""
    f = tmp_path / "logits.f32"
    r = run([QWENC, model_dir, "--tokens", " ".join(map(str, ids)), "--logits-out", str(f), "--threads", THREADS])
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    x = np.fromfile(f, dtype="<f4").astype(np.float64).reshape(len(ids), -1)
    m = x.max(axis=1, keepdims=True)
    return x - (m + np.log(np.exp(x - m).sum(axis=1, keepdims=True)))


def top_values(row, k):
    return np.sort(row)[::-1][:k]


def test_completion_echo_logprobs_match_float64_reference(srv, model_dir, tmp_path):
    gen = cli_greedy(model_dir, PROMPT, 4)
    assert gen, "the CLI generated nothing"
    j = ok_json(post(srv, "/v1/completions", {"prompt": PROMPT, "max_tokens": len(gen), "temperature": 0,
                                               "echo": True, "logprobs": 5}))
    c = j["choices"][0]
    lp = c["logprobs"]
    n = len(PROMPT) + len(gen)
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == len(lp["text_offset"]) == n, lp
    assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None, "the first prompt token has no logprob"
    ref = ref_logsoftmax(model_dir, PROMPT + gen, tmp_path)
    seq = PROMPT + gen
    for i in range(1, n):
        want = ref[i - 1, seq[i]]
        got = lp["token_logprobs"][i]
        assert abs(got - want) < TOL, f"position {i}: server {got}, float64 reference {want}"
        tops = sorted(lp["top_logprobs"][i].values(), reverse=True)
        wt = top_values(ref[i - 1], 5)
        # token strings may coincide (then the object holds fewer keys)
        assert 1 <= len(tops) <= 5 and all(any(abs(t - w) < TOL for w in wt) for t in tops), (i, tops, wt)
    assert lp["text_offset"] == sorted(lp["text_offset"]) and lp["text_offset"][0] == 0
    # echo: the text starts with the prompt as the model saw it
    assert c["text"].startswith("<|im_start|>system"), c["text"][:80]


def test_echo_with_max_tokens_0_scores_the_prompt(srv, model_dir, tmp_path):
    j = ok_json(post(srv, "/v1/completions", {"prompt": PROMPT, "max_tokens": 0, "echo": True, "logprobs": 0}))
    lp = j["choices"][0]["logprobs"]
    assert len(lp["token_logprobs"]) == len(PROMPT) and j["usage"]["completion_tokens"] == 0, j
    ref = ref_logsoftmax(model_dir, PROMPT, tmp_path)
    for i in range(1, len(PROMPT)):
        assert abs(lp["token_logprobs"][i] - ref[i - 1, PROMPT[i]]) < TOL, i
    assert all(t == {} for t in lp["top_logprobs"][1:]), "logprobs 0: no alternatives"


@pytest.mark.parametrize("sampling", [{"temperature": 0}, {"temperature": 1.7, "seed": 11},
                                      # x100 on the prompt tokens' (positive) logits: after the
                                      # penalty one of them would top the list
                                      {"temperature": 0, "repetition_penalty": 0.01}],
                         ids=["greedy", "hot", "penalty"])
def test_logprobs_are_before_temperature_and_penalties(srv, model_dir, tmp_path, sampling):
    """The first token's alternatives do not depend on the sampled token, so
    every sampler must report the float64 reference's top_logprobs, and the
    chosen token's logprob is one of the reference's values."""
    ref = ref_logsoftmax(model_dir, PROMPT, tmp_path)
    want = top_values(ref[-1], 5)
    j = ok_json(post(srv, "/v1/completions", dict({"prompt": PROMPT, "max_tokens": 1, "logprobs": 5,
                                                    "ignore_eos": True}, **sampling)))
    lp = j["choices"][0]["logprobs"]
    got = sorted(lp["top_logprobs"][0].values(), reverse=True)
    assert all(any(abs(g - w) < TOL for w in want) for g in got), (got, want)
    assert abs(got[0] - want[0]) < TOL, (got[0], want[0])
    assert np.min(np.abs(ref[-1] - lp["token_logprobs"][0])) < TOL


def chat_body(**kw):
    body = {"messages": [{"role": "user", "content": "Say something."}], "max_tokens": 6, "temperature": 0,
            "ignore_eos": True}
    body.update(kw)
    return body


def test_chat_logprobs_shape_stream_and_not(srv):
    j = ok_json(post(srv, "/v1/chat/completions", chat_body(logprobs=True, top_logprobs=3)))
    content = j["choices"][0]["logprobs"]["content"]
    assert len(content) == j["usage"]["completion_tokens"] == 6
    text = ""
    for e in content:
        assert isinstance(e["token"], str) and e["logprob"] <= 0 and isinstance(e["bytes"], list), e
        tops = [t["logprob"] for t in e["top_logprobs"]]
        assert len(tops) == 3 and tops == sorted(tops, reverse=True), e
        assert e["logprob"] <= tops[0] + 1e-6  # greedy: the chosen token is the most likely
        assert abs(e["logprob"] - tops[0]) < 1e-6
        text += bytes(e["bytes"]).decode("utf-8", errors="replace")
    sse = SSE(srv, "/v1/chat/completions", chat_body(logprobs=True, top_logprobs=3, stream=True))
    streamed = []
    try:
        for ch in sse.events():
            for c in ch.get("choices", []):
                if c.get("logprobs"):
                    streamed += c["logprobs"]["content"]
    finally:
        sse.close()
    assert streamed == content
    # no logprobs asked: null, as before
    assert ok_json(post(srv, "/v1/chat/completions", chat_body()))["choices"][0]["logprobs"] is None


@pytest.mark.parametrize("body,param", [
    ({"top_logprobs": 2}, "top_logprobs"),
    ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ({"n": 2, "best_of": 3}, "best_of"),
    ({"n": 17}, "n"),
])
def test_bad_values_are_400(srv, body, param):
    r = post(srv, "/v1/chat/completions", chat_body(**body))
    api_error(r, 400)
    assert r.json()["error"]["param"] == param, r.text


def test_n_choices_use_seed_plus_i(srv):
    base = dict(max_tokens=8, temperature=1.0, top_p=1.0, top_k=0)
    j = ok_json(post(srv, "/v1/chat/completions", chat_body(n=3, best_of=3, seed=40, **base)))
    ch = j["choices"]
    assert [c["index"] for c in ch] == [0, 1, 2], ch
    singles = [ok_json(post(srv, "/v1/chat/completions", chat_body(seed=40 + i, **base)))["choices"][0]
               for i in range(3)]
    assert [c["message"]["content"] for c in ch] == [s["message"]["content"] for s in singles]
    assert j["usage"]["completion_tokens"] == 3 * 8 and j["usage"]["prompt_tokens"] > 0
    assert "cached_tokens" in j["usage"]["prompt_tokens_details"]

    sse = SSE(srv, "/v1/chat/completions", chat_body(n=3, seed=40, stream=True, **base))
    texts, finishes = {}, {}
    try:
        for c in sse.events():
            for x in c.get("choices", []):
                texts[x["index"]] = texts.get(x["index"], "") + (x["delta"].get("content") or "")
                if x["finish_reason"]:
                    finishes[x["index"]] = x["finish_reason"]
    finally:
        sse.close()
    assert [texts[i] for i in range(3)] == [c["message"]["content"] for c in ch]
    assert finishes == {0: "length", 1: "length", 2: "length"}


def test_completion_n_and_echo_without_logprobs(srv):
    j = ok_json(post(srv, "/v1/completions", {"prompt": "Hello there", "raw": True, "max_tokens": 3, "n": 2,
                                               "echo": True, "temperature": 0}))
    assert len(j["choices"]) == 2
    for c in j["choices"]:
        assert c["text"].startswith("Hello there") and c["logprobs"] is None, c
    assert j["choices"][0]["text"] == j["choices"][1]["text"], "greedy: the same text for every choice"
    sse = SSE(srv, "/v1/completions", {"prompt": "Hello there", "raw": True, "max_tokens": 3, "echo": True,
                                        "temperature": 0, "stream": True, "logprobs": 1})
    try:
        events = list(sse.events())
    finally:
        sse.close()
    first = events[0]["choices"][0]
    assert first["text"] == "Hello there" and first["logprobs"]["token_logprobs"][0] is None, first
    streamed = "".join(e["choices"][0]["text"] for e in events if e.get("choices"))
    assert streamed == j["choices"][0]["text"]
    offs = [o for e in events if e.get("choices") and e["choices"][0]["logprobs"]
            for o in e["choices"][0]["logprobs"]["text_offset"]]
    assert offs == sorted(offs) and len(set(offs)) == len(offs), offs
