"""HTTP server, the happy paths: the seed's /v1/completions, /health, the
OpenAI chat API (plain HTTP and the official openai client), streaming,
stop strings, seeds, unsupported fields, /v1/models, /tokenize,
/detokenize, /metrics."""

import http.client
import json

import openai
import pytest
import requests

from helpers import (SSE, api_error, chat, chat_stream_text, chat_text, find_metric, metrics,
                     names_field, ok_json, post, stream_chat)

SYSTEM_DEFAULT = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."


def chatml(user, system=SYSTEM_DEFAULT):
    return (f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n"
            f"<|im_start|>assistant\n")


def tokenize(server, text):
    j = ok_json(post(server, "/tokenize", {"content": text}))
    toks = j.get("tokens")
    assert isinstance(toks, list) and all(isinstance(t, int) for t in toks), j
    return toks


def detokenize(server, ids):
    j = ok_json(post(server, "/detokenize", {"tokens": ids}))
    text = j.get("content", j.get("text"))
    assert isinstance(text, str), f"/detokenize answer has no content: {j}"
    return text


# ---------------------------------------------------------------------------
# /health and the seed's /v1/completions


def test_health(server):
    r = requests.get(server.url + "/health", timeout=10)
    assert r.status_code == 200
    assert r.json()["status"] == "ok"
    assert server.host == "127.0.0.1", f"bound to {server.host} without --host"


def test_keep_alive(server):
    """HTTP/1.1 keep-alive: several requests on one connection."""
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        c.connect()
        sock = c.sock
        for i in range(3):
            c.request("GET", "/health")
            r = c.getresponse()
            r.read()
            assert r.status == 200
            c.request("POST", "/v1/completions", body=json.dumps({"prompt": "hi", "max_tokens": 2}),
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            json.loads(r.read())
            assert r.status == 200
            assert (r.getheader("Connection") or "").lower() != "close"
            assert c.sock is sock, "the server closed the connection between requests"
    finally:
        c.close()


def test_completions_seed_and_openai_fields(server):
    j = ok_json(post(server, "/v1/completions", {"prompt": "What is 2+2?", "max_tokens": 12}))
    # the seed's fields
    assert isinstance(j["text"], str)
    for k in ("prompt_tokens", "gen_tokens"):
        assert isinstance(j[k], int) and not isinstance(j[k], bool), (k, j)
    for k in ("prefill_tps", "decode_tps", "elapsed_s"):
        assert isinstance(j[k], (int, float)) and j[k] >= 0, (k, j)
    assert j["prompt_tokens"] > 0
    assert 0 < j["gen_tokens"] <= 12
    # OpenAI's fields
    assert isinstance(j["id"], str) and j["id"]
    assert j["object"] == "text_completion"
    assert isinstance(j["created"], int) and j["created"] > 1_600_000_000
    assert isinstance(j["model"], str) and j["model"]
    c = j["choices"][0]
    assert c["text"] == j["text"]
    assert c["finish_reason"] in ("stop", "length")
    assert (c["finish_reason"] == "length") == (j["gen_tokens"] == 12), j
    u = j["usage"]
    assert u["prompt_tokens"] == j["prompt_tokens"]
    assert u["completion_tokens"] == j["gen_tokens"]
    assert u["total_tokens"] == j["prompt_tokens"] + j["gen_tokens"]


def test_completions_prompt_goes_through_chat_template(server):
    """prompt_tokens is the length of the ChatML rendering (default system
    message, or `system` when given)."""
    j = ok_json(post(server, "/v1/completions", {"prompt": "Hi there", "max_tokens": 1}))
    assert j["prompt_tokens"] == len(tokenize(server, chatml("Hi there"))), j
    j = ok_json(post(server, "/v1/completions",
                     {"prompt": "Hi there", "max_tokens": 1, "system": "You are a pirate."}))
    assert j["prompt_tokens"] == len(tokenize(server, chatml("Hi there", "You are a pirate."))), j


def test_completions_raw(server):
    prompt = "The capital of France is"
    j = ok_json(post(server, "/v1/completions",
                     {"prompt": prompt, "raw": True, "max_tokens": 6, "temperature": 0}))
    assert j["prompt_tokens"] == len(tokenize(server, prompt)), j
    assert j["gen_tokens"] <= 6


def test_completions_max_tokens_default_50_and_limit(server):
    j = ok_json(post(server, "/v1/completions", {"prompt": "Count to a hundred."}))
    assert j["gen_tokens"] <= 50
    assert (j["gen_tokens"] == 50) == (j["choices"][0]["finish_reason"] == "length"), j
    j = ok_json(post(server, "/v1/completions", {"prompt": "x", "max_tokens": 512, "temperature": 0}))
    assert j["gen_tokens"] <= 512
    msg = api_error(post(server, "/v1/completions", {"prompt": "x", "max_tokens": 513}), 400)
    assert names_field(msg, "max_tokens"), msg
    server.check_alive()


def test_completions_greedy_is_deterministic(server):
    body = {"prompt": "Tell me a story.", "max_tokens": 16, "temperature": 0}
    a = ok_json(post(server, "/v1/completions", body))
    b = ok_json(post(server, "/v1/completions", body))
    assert a["text"] == b["text"]


def test_openai_client_completions(server):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="dummy", max_retries=0, timeout=60)
    c = client.completions.create(model="whatever", prompt="Hello", max_tokens=5, temperature=0)
    assert isinstance(c.choices[0].text, str)
    assert c.choices[0].finish_reason in ("stop", "length")
    assert c.usage.completion_tokens <= 5


# ---------------------------------------------------------------------------
# /v1/chat/completions


def test_chat_nonstreaming_shape(server):
    text, finish, j = chat_text(server, "Hello!", max_tokens=10, temperature=0)
    assert j["object"] == "chat.completion"
    assert isinstance(j["id"], str) and j["id"]
    assert isinstance(j["created"], int)
    assert isinstance(j["model"], str)
    assert len(j["choices"]) == 1 and j["choices"][0]["index"] == 0
    assert j["choices"][0]["message"]["role"] == "assistant"
    assert isinstance(text, str)
    u = j["usage"]
    assert u["prompt_tokens"] == len(tokenize(server, chatml("Hello!"))), u
    assert 0 < u["completion_tokens"] <= 10
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
    assert (finish == "length") == (u["completion_tokens"] == 10)


def test_chat_system_and_multiturn(server):
    msgs = [{"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello."},
            {"role": "user", "content": "Again"}]
    j = ok_json(chat(server, messages=msgs, max_tokens=3, temperature=0))
    rendered = ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nAgain<|im_end|>\n"
                "<|im_start|>assistant\n")
    assert j["usage"]["prompt_tokens"] == len(tokenize(server, rendered)), j["usage"]


def test_chat_content_parts(server):
    """OpenAI's content as a list of text parts is the same as the string."""
    ref, _, _ = chat_text(server, "Hello world", max_tokens=8, temperature=0)
    parts = [{"type": "text", "text": "Hello "}, {"type": "text", "text": "world"}]
    text, _, _ = chat_text(server, parts, max_tokens=8, temperature=0)
    assert text == ref
    img = [{"type": "text", "text": "What is this?"},
           {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]
    api_error(chat(server, img, max_tokens=2), 400)
    server.check_alive()


def test_chat_max_completion_tokens(server):
    text, finish, j = chat_text(server, "Write a poem.", max_completion_tokens=4, temperature=0)
    assert j["usage"]["completion_tokens"] <= 4
    assert (finish == "length") == (j["usage"]["completion_tokens"] == 4)


def test_chat_stream_raw_sse(server):
    ref, ref_finish, _ = chat_text(server, "Say something.", max_tokens=12, temperature=0)
    s = SSE(server, "/v1/chat/completions",
            {"model": "m", "messages": [{"role": "user", "content": "Say something."}],
             "max_tokens": 12, "temperature": 0, "stream": True})
    try:
        chunks = s.read_all()
    finally:
        s.close()
    assert s.done
    text, finish = chat_stream_text(chunks)
    assert text == ref
    assert finish == ref_finish
    for c in chunks:
        assert not c.get("usage"), f"usage sent without stream_options.include_usage: {c}"


def test_chat_stream_include_usage(server):
    text, finish, chunks = stream_chat(server, "Say something.", max_tokens=12, temperature=0,
                                       stream_options={"include_usage": True})
    usage = [c["usage"] for c in chunks if c.get("usage")]
    assert len(usage) == 1, f"expected exactly one usage chunk, got {usage}"
    last = chunks[-1]
    assert last.get("usage") and last["choices"] == [], f"usage must come in a last chunk with no choices: {last}"
    u = usage[0]
    assert u["completion_tokens"] <= 12 and u["prompt_tokens"] > 0
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
    assert (finish == "length") == (u["completion_tokens"] == 12)


def test_openai_client_chat(server):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="dummy", max_retries=0, timeout=60)
    msgs = [{"role": "user", "content": "Name three colours."}]
    r = client.chat.completions.create(model="gpt-4o-mini", messages=msgs, max_tokens=12, temperature=0)
    content = r.choices[0].message.content
    assert isinstance(content, str)
    assert r.choices[0].finish_reason in ("stop", "length")
    assert r.usage.completion_tokens <= 12
    parts, finish, usage = [], None, None
    stream = client.chat.completions.create(model="gpt-4o-mini", messages=msgs, max_tokens=12,
                                            temperature=0, stream=True,
                                            stream_options={"include_usage": True})
    for ch in stream:
        if ch.usage:
            usage = ch.usage
        for c in ch.choices:
            if c.delta.content:
                parts.append(c.delta.content)
            if c.finish_reason:
                finish = c.finish_reason
    assert "".join(parts) == content
    assert finish == r.choices[0].finish_reason
    assert usage is not None and usage.completion_tokens == r.usage.completion_tokens


def _boundary_stops(chunks_text):
    """Stop strings spanning the boundary between two streamed pieces in the
    middle of the output (so a server that streams without holding back
    would leak the first half): one of any text, and one made of non-ASCII
    characters when the output has such a boundary."""
    pieces = [p for p in chunks_text if p]
    out = []
    for want_non_ascii in (False, True):
        for i in range(len(pieces) // 3, len(pieces) - 1):
            a, b = pieces[i], pieces[i + 1]
            s = a[-2:] + b[:2]
            if "\ufffd" in s or not s.strip() or s in out:
                continue
            if want_non_ascii and not (ord(a[-1]) > 127 and ord(b[0]) > 127):
                continue
            out.append(s)
            break
    return out


def _stop_cases(server, prompt, stops, full):
    for stop in stops:
        cut = full.find(stop)
        assert cut >= 0
        expected = full[:cut]
        for stop_field in (stop, ["\u2603never-in-output\u2603", stop]):
            text, finish, _ = chat_text(server, prompt, max_tokens=40, temperature=0, stop=stop_field)
            assert text == expected, f"stop={stop_field!r}: expected {expected!r}, got {text!r}"
            assert finish == "stop"
            text, finish, _ = stream_chat(server, prompt, max_tokens=40, temperature=0, stop=stop_field)
            assert stop not in text
            assert text == expected, f"streamed with stop={stop_field!r}: expected {expected!r}, got {text!r}"
            assert finish == "stop"


def test_stop_strings_never_leak(server):
    prompt = "Tell me about the sea."
    full, finish, _ = chat_text(server, prompt, max_tokens=40, temperature=0)
    s = SSE(server, "/v1/chat/completions",
            {"model": "m", "messages": [{"role": "user", "content": prompt}], "max_tokens": 40,
             "temperature": 0, "stream": True})
    try:
        chunks = s.read_all()
    finally:
        s.close()
    pieces = [c["choices"][0]["delta"].get("content") for c in chunks if c.get("choices")]
    assert "".join(p for p in pieces if p) == full
    stops = _boundary_stops(pieces)
    assert stops, f"could not pick a stop string from {pieces}"
    # and one that matches at the very start: nothing at all is sent
    _stop_cases(server, prompt, stops + [full[:3]], full)

    # the seed API sends the prompt as the user message: same text, same stops
    j = ok_json(post(server, "/v1/completions", {"prompt": prompt, "max_tokens": 40, "temperature": 0}))
    assert j["text"] == full, f"/v1/completions {j['text']!r} != chat {full!r}"
    j = ok_json(post(server, "/v1/completions", {"prompt": prompt, "max_tokens": 40, "temperature": 0,
                                                 "stop": stops[0]}))
    assert j["text"] == full[:full.find(stops[0])] and j["choices"][0]["finish_reason"] == "stop", j

    # a stop string that never occurs changes nothing
    text, finish2, _ = chat_text(server, prompt, max_tokens=40, temperature=0, stop="\u2603never\u2603")
    assert text == full
    text, finish2, _ = stream_chat(server, prompt, max_tokens=40, temperature=0, stop=["\u2603never\u2603", "zzzzq"])
    assert text == full


def test_seed_and_temperature_reproducible(server):
    fields = dict(max_tokens=24, temperature=1.0, top_k=100, seed=1234)
    a, _, _ = chat_text(server, "Invent a word.", **fields)
    b, _, _ = chat_text(server, "Invent a word.", **fields)
    assert a == b, "same seed, different text"
    c, _, _ = stream_chat(server, "Invent a word.", **fields)
    assert c == a, "streamed and non-streamed differ for the same seed"
    others = {chat_text(server, "Invent a word.", **dict(fields, seed=s))[0] for s in (1, 2, 3)}
    assert others != {a}, "the seed is ignored: four seeds gave the same sampled text"


def test_all_sampling_fields_accepted(server):
    text, finish, j = chat_text(server, "Hi", max_tokens=8, temperature=0.8, top_p=0.9, top_k=40,
                                min_p=0.05, seed=7, presence_penalty=0.5, frequency_penalty=0.5,
                                stop=["\n\n\n"])
    assert j["usage"]["completion_tokens"] <= 8


@pytest.mark.parametrize("field,value", [
    ("n", 17),
    ("n", 0),
    ("top_logprobs", 2),  # without logprobs: true
    ("functions", [{"name": "f", "parameters": {"type": "object"}}]),  # legacy; tools are served
    ("suffix", "x"),  # infill is a completion, not chat
    ("response_format", {"type": "json_object"}),
])
def test_unsupported_fields_are_400_naming_the_field(server, field, value):
    msg = api_error(chat(server, "Hi", max_tokens=2, **{field: value}), 400)
    assert names_field(msg, field), f"error does not name {field!r}: {msg!r}"
    server.check_alive()


def test_n_equal_1_is_fine(server):
    ok_json(chat(server, "Hi", max_tokens=2, n=1))


def test_harmless_extras_ignored_and_any_model_name(server):
    ref, _, _ = chat_text(server, "Hi", max_tokens=8, temperature=0)
    text, _, j = chat_text(server, "Hi", max_tokens=8, temperature=0, user="u-123",
                           metadata={"k": "v"}, model="definitely-not-a-real-model")
    assert text == ref


def test_models(server):
    r = requests.get(server.url + "/v1/models", timeout=10)
    j = ok_json(r)
    assert j["object"] == "list"
    assert len(j["data"]) == 1, j
    m = j["data"][0]
    assert isinstance(m["id"], str) and m["id"]
    assert m["object"] == "model"
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="dummy", max_retries=0, timeout=30)
    assert [x.id for x in client.models.list()] == [m["id"]]
    assert client.models.retrieve(m["id"]).id == m["id"]


# ---------------------------------------------------------------------------
# /tokenize, /detokenize, /metrics


@pytest.mark.parametrize("text", [
    "Hello, world!",
    "  leading and trailing spaces \t\n",
    "中文测试，还有日本語と한국어",
    "emoji 👍🏽 and 👨‍👩‍👧 family",
    "<|im_start|>user\nhi<|im_end|>",
    "",
])
def test_tokenize_detokenize_round_trip(server, text):
    ids = tokenize(server, text)
    assert all(0 <= i < 151665 for i in ids)
    assert detokenize(server, ids) == text
    if text == "":
        assert ids == []


def test_tokenize_known_ids(server):
    # the chat special tokens are single ids (Qwen2.5's added tokens)
    assert tokenize(server, "<|im_start|>") == [151644]
    assert tokenize(server, "<|im_end|>") == [151645]
    assert tokenize(server, "<|endoftext|>") == [151643]


def test_metrics_counters_increase(server):
    before = metrics(server)
    req = find_metric(before, ["request"], ["total", "count"], exclude=("reject", "fail", "error", "ttft",
                                                                        "first", "second", "duration"))
    prompt_tok = find_metric(before, ["prompt"], ["token"])
    gen_tok = find_metric(before, ["gen", "completion", "predicted", "output"], ["token"],
                          exclude=("per_second", "tps", "tok_s", "rate", "second"))
    ttft = find_metric(before, ["ttft", "first_token"])
    ttft_count = before.get(ttft + "_count", before.get(ttft))
    ok_json(post(server, "/v1/completions", {"prompt": "Count.", "max_tokens": 5, "temperature": 0}))
    after = metrics(server)
    assert after.get(ttft + "_count", after.get(ttft)) >= ttft_count + 1, f"{ttft} did not count the request"
    assert after[req] >= before[req] + 1, f"{req}: {before[req]} -> {after[req]}"
    assert after[prompt_tok] >= before[prompt_tok] + 1, f"{prompt_tok}: {before[prompt_tok]} -> {after[prompt_tok]}"
    assert after[gen_tok] >= before[gen_tok] + 1, f"{gen_tok}: {before[gen_tok]} -> {after[gen_tok]}"
    # the list: time to first token, decode tok/s, queue depth, active slots
    find_metric(after, ["ttft", "first_token"])
    find_metric(after, ["queue", "deferred", "waiting"])
    find_metric(after, ["slot", "processing"], ["active", "busy", "processing", "used"])
    find_metric(after, ["decode", "predicted", "gen"], ["per_second", "tps", "tok_s", "rate"])
