"""The prefix cache through the HTTP server (sched.h, infer/kvcache.h).

A request whose prompt begins like an earlier one (the same ids, or a chat
turn that repeats the conversation so far) maps the cached KV pages of that
beginning and prefills only the rest: /metrics counts the tokens, page by
page (64 positions), and the text is the text of a server without the cache
(--cache-ram 0), whose counters stay at zero;
usage.prompt_tokens_details.cached_tokens says the same per request. The n
choices of one request share the prompt's pages; echo with logprobs, which
needs every prompt position's logits, computes them all.
"""

import pytest

from conftest import QWENC, run, start_http, stop_checked
from helpers import metrics, ok_json, post

PAGE = 64


def completion(server, prompt, **fields):
    body = {"prompt": prompt, "max_tokens": 12, "raw": True}
    body.update(fields)
    return ok_json(post(server, "/v1/completions", body))


def chat(server, messages):
    return ok_json(post(server, "/v1/chat/completions", {"messages": messages, "max_tokens": 16}))


def cached_tokens(j):
    return j["usage"]["prompt_tokens_details"]["cached_tokens"]


IDS = [(i * 37 + 11) % 5000 + 100 for i in range(150)]
SYSTEM = "You are a careful assistant. " * 12


def conversation(server):
    """Three chat turns, each repeating the conversation so far."""
    msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "first question"}]
    out = []
    for q in ("second question", "third question"):
        j = chat(server, msgs)
        out.append(j)
        msgs = msgs + [{"role": "assistant", "content": j["choices"][0]["message"]["content"]},
                       {"role": "user", "content": q}]
    out.append(chat(server, msgs))
    return out


@pytest.fixture(scope="module")
def plain_results(model_dir):
    """The same requests on a server without the prefix cache."""
    s = start_http(model_dir, "--parallel", "2", "--cache-ram", "0")
    try:
        a = completion(s, IDS)
        b = completion(s, IDS + [7, 8, 9, 10, 11, 12, 13, 14, 15, 16])
        conv = conversation(s)
        ms = metrics(s)
        assert ms["qwenc_prefix_cache_hit_tokens_total"] == 0
        assert ms["qwenc_prefix_cache_lookups_total"] == 0
        assert ms["qwenc_prefill_tokens_total"] == ms["qwenc_prompt_tokens_total"]
        for j in (a, b, *conv):
            assert cached_tokens(j) == 0
    finally:
        stop_checked(s)
    return a, b, conv


def test_cached_prefix_same_text(model_dir, plain_results):
    a0, b0, conv0 = plain_results
    s = start_http(model_dir, "--parallel", "2")
    try:
        a = completion(s, IDS)
        m1 = metrics(s)
        assert m1["qwenc_prefix_cache_hit_tokens_total"] == 0, "a cold cache hit"
        assert m1["qwenc_kv_pages_cached"] > 0, "nothing kept after the request"
        b = completion(s, IDS + [7, 8, 9, 10, 11, 12, 13, 14, 15, 16])
        m2 = metrics(s)
        hit = m2["qwenc_prefix_cache_hit_tokens_total"] - m1["qwenc_prefix_cache_hit_tokens_total"]
        # 160 prompt tokens, 150 shared: pages 0 and 1 (128 positions)
        assert hit == 2 * PAGE, f"{hit} tokens from the cache, want {2 * PAGE}"
        assert m2["qwenc_prefill_tokens_total"] == 150 + 160 - 2 * PAGE
        assert cached_tokens(a) == 0 and cached_tokens(b) == 2 * PAGE
        assert a["choices"][0]["text"] == a0["choices"][0]["text"]
        assert b["choices"][0]["text"] == b0["choices"][0]["text"]
        # a conversation: turn N maps the pages of turns < N
        before = metrics(s)["qwenc_prefix_cache_hit_tokens_total"]
        conv = conversation(s)
        ms = metrics(s)
        assert ms["qwenc_prefix_cache_hit_tokens_total"] - before >= 2 * PAGE, "later turns hit nothing"
        for j, j0 in zip(conv, conv0):
            assert j["choices"][0]["message"]["content"] == j0["choices"][0]["message"]["content"]
        assert [cached_tokens(j) > 0 for j in conv] == [False, True, True], [cached_tokens(j) for j in conv]
        assert 0 < ms["qwenc_prefix_cache_hit_ratio"] < 1
        assert ms["qwenc_kv_page_bytes"] > 0 and ms["qwenc_kv_cache_bytes"] > 0
        assert ms["qwenc_kv_pages_used"] == 0, "pages held with no request running"
    finally:
        stop_checked(s)


def test_n_choices_and_echo(model_dir):
    """n = 4 choices of one new prompt: its two full pages are computed once.
    echo + logprobs after a hit: every prompt position computed, the same
    logprobs as the first time."""
    ids = [(i * 53 + 5) % 5000 + 100 for i in range(150)]
    s = start_http(model_dir, "--parallel", "2")
    try:
        before = metrics(s)["qwenc_prefill_tokens_total"]
        j = completion(s, ids, n=4, temperature=0.8, seed=3)
        assert len(j["choices"]) == 4
        computed = metrics(s)["qwenc_prefill_tokens_total"] - before
        assert computed == 150 + 3 * (150 - 2 * PAGE), f"{computed} prompt tokens computed for n = 4"
        body = {"prompt": ids, "max_tokens": 0, "raw": True, "echo": True, "logprobs": 1}
        e1 = ok_json(post(s, "/v1/completions", body))
        e2 = ok_json(post(s, "/v1/completions", body))
        assert cached_tokens(e1) == 0 and cached_tokens(e2) == 0, "echo + logprobs took KV from the cache"
        lp1 = e1["choices"][0]["logprobs"]["token_logprobs"]
        assert len(lp1) == 150 and lp1[0] is None and all(isinstance(x, float) for x in lp1[1:])
        assert e2["choices"][0]["logprobs"] == e1["choices"][0]["logprobs"]
    finally:
        stop_checked(s)


def test_tiny_budget_same_text(model_dir, plain_results):
    """A budget of 1 MB holds no page of this model: everything is evicted
    at once, and the text does not change."""
    a0, b0, _ = plain_results
    s = start_http(model_dir, "--parallel", "2", "--cache-ram", "1")
    try:
        page = None
        for _ in range(2):
            assert completion(s, IDS)["choices"][0]["text"] == a0["choices"][0]["text"]
            assert completion(s, IDS + [7, 8, 9, 10, 11, 12, 13, 14, 15, 16])["choices"][0]["text"] == \
                b0["choices"][0]["text"]
        ms = metrics(s)
        page = ms["qwenc_kv_page_bytes"]
        assert ms["qwenc_kv_pages_cached"] * page <= 1 << 20
        if page > 1 << 20:
            assert ms["qwenc_prefix_cache_evictions_total"] > 0
    finally:
        stop_checked(s)


def test_bad_cache_ram(model_dir):
    for v in ("-1", "x", "99999999999"):
        r = run([QWENC, model_dir, "--http", "0", "--cache-ram", v])
        assert r.returncode == 2, (v, r.returncode)
        assert b"--cache-ram" in r.stderr, r.stderr
