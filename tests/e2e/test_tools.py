"""Function calling and code infill over HTTP.

Tiny random model: tool_choice "required" / a named function force a call
with the grammar engine, so the official openai client's tool-calling flow
runs end to end (call -> tool result -> answer) and every call's arguments
validate against the function's parameters (jsonschema). The prompt of a
conversation with tools is checked token for token against the C renderer's
corpus elsewhere (tests/tokenizer/test_chat_tools.c); here prompt_tokens
proves the same template is used by the server. Infill: /infill and
/v1/completions' suffix build exactly Qwen2.5-Coder's FIM prompt (its token
count equals /tokenize of the FIM text). The real Coder files (when present):
an unforced call to get_weather, and a function body filled in.
"""
import json
import os

import jsonschema
import openai
import pytest

from helpers import SSE, ok_json, post  # noqa: F401

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a given city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]}}}
CALC = {"type": "function", "function": {
    "name": "calc", "description": "Evaluate an expression",
    "parameters": {"type": "object", "properties": {"expr": {"type": "string"}, "digits": {"type": "integer"}},
                   "required": ["expr", "digits"]}}}
# For the random tiny model: every value bounded (enums, integers,
# booleans), so a forced call ends within max_tokens whatever it samples.
WEATHER_T = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a given city",
    "parameters": {"type": "object", "properties": {
        "city": {"enum": ["Paris", "Tokyo", "São Paulo"]}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]}}}
CALC_T = {"type": "function", "function": {
    "name": "calc", "description": "Add two integers",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
                                                    "exact": {"type": "boolean"}},
                   "required": ["a", "b"]}}}
TOOLS = [WEATHER_T, CALC_T]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
SCHEMAS_REAL = {t["function"]["name"]: t["function"]["parameters"] for t in (WEATHER, CALC)}


def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="dummy", max_retries=0, timeout=120)


def check_calls(calls, names=None, schemas=SCHEMAS):
    assert calls, "no tool_calls"
    ids = set()
    for c in calls:
        assert c.type == "function" and c.id.startswith("call_") and c.id not in ids, c
        ids.add(c.id)
        assert c.function.name in (names or schemas), c
        jsonschema.validate(json.loads(c.function.arguments), schemas[c.function.name])


def tokenize(server, text):
    return ok_json(post(server, "/tokenize", {"content": text}))["tokens"]


# ---------------------------------------------------------------------------
# tiny model, forced calls


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_openai_tool_flow_required(server, seed):
    cl = client(server)
    msgs = [{"role": "user", "content": "What's the weather in Paris?"}]
    r = cl.chat.completions.create(model="m", messages=msgs, tools=TOOLS, tool_choice="required",
                                   max_tokens=200, seed=seed, temperature=1.0)
    ch = r.choices[0]
    assert ch.finish_reason == "tool_calls", ch
    check_calls(ch.message.tool_calls)
    # The flow: the call and its result go back; the model answers in text.
    msgs.append(ch.message.model_dump(exclude_none=True))
    for c in ch.message.tool_calls:
        msgs.append({"role": "tool", "tool_call_id": c.id, "content": json.dumps({"ok": True, "t": 21.5})})
    r2 = cl.chat.completions.create(model="m", messages=msgs, tools=TOOLS, max_tokens=8)
    assert r2.choices[0].finish_reason in ("stop", "length", "tool_calls"), r2
    assert r2.usage.prompt_tokens > r.usage.prompt_tokens


def test_named_function_and_parallel_false(server):
    cl = client(server)
    for seed in range(4):
        r = cl.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "2+2?"}], tools=TOOLS, seed=seed, temperature=1.0,
            tool_choice={"type": "function", "function": {"name": "calc"}}, max_tokens=200)
        calls = r.choices[0].message.tool_calls
        check_calls(calls, names=["calc"])
        assert len(calls) == 1, calls
        r = cl.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}], tools=TOOLS, seed=seed, temperature=1.0,
            tool_choice="required", parallel_tool_calls=False, max_tokens=300)
        assert len(r.choices[0].message.tool_calls) == 1, r


@pytest.mark.parametrize("seed", [7, 8, 9])
def test_stream_tool_calls_equal_non_stream(server, seed):
    """Streamed calls come as OpenAI streams them (the first delta of a call
    with index, id, type and name and arguments "", then the arguments in
    pieces as they are generated, finish_reason "tool_calls"), and the
    openai client's own stream accumulation gives the non-streamed call."""
    from openai.lib.streaming.chat import ChatCompletionStreamState
    cl = client(server)
    kw = dict(model="m", messages=[{"role": "user", "content": "weather?"}], tools=TOOLS,
              tool_choice="required", max_tokens=200, seed=seed, temperature=1.0)
    whole = cl.chat.completions.create(**kw).choices[0]
    state = ChatCompletionStreamState()
    firsts, pieces, finish = {}, {}, None
    for chunk in cl.chat.completions.create(stream=True, **kw):
        state.handle_chunk(chunk)
        if not chunk.choices:
            continue
        for tc in chunk.choices[0].delta.tool_calls or []:
            if tc.index not in firsts:
                firsts[tc.index] = tc
                assert tc.id and tc.type == "function" and tc.function.name, tc
                assert tc.function.arguments == "", tc
            else:
                assert tc.id is None and tc.function.name is None, tc
                pieces[tc.index] = pieces.get(tc.index, 0) + 1
        finish = chunk.choices[0].finish_reason or finish
    assert finish == "tool_calls"
    got = state.get_final_completion().choices[0]
    assert got.finish_reason == "tool_calls"
    assert [(c.function.name, c.function.arguments) for c in got.message.tool_calls] == \
        [(c.function.name, c.function.arguments) for c in whole.message.tool_calls]
    check_calls(got.message.tool_calls)
    # incremental: every call's arguments came in several pieces
    assert all(pieces.get(i, 0) >= 3 for i in firsts), pieces


ANSWER = {"type": "object", "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer"}},
          "required": ["ok", "n"], "additionalProperties": False}
ANSWER_RF = {"type": "json_schema", "json_schema": {"name": "answer", "strict": True, "schema": ANSWER}}


def test_tools_with_response_format(server):
    """docs/grammar.md "Which constraint applies": a forced call wins over
    response_format (it shapes text answers; OpenAI answers with the call);
    with tool_choice auto the answer is a call or text in the format; a GBNF
    grammar with tools is a 400 (as llama-server), streamed or not."""
    cl = client(server)
    base = dict(model="m", messages=[{"role": "user", "content": "x"}], tools=TOOLS, max_tokens=200,
                temperature=1.0, response_format=ANSWER_RF)
    for seed in range(3):
        ch = cl.chat.completions.create(tool_choice="required", seed=seed, **base).choices[0]
        assert ch.finish_reason == "tool_calls", ch
        check_calls(ch.message.tool_calls)
    for seed in range(6):
        ch = cl.chat.completions.create(seed=seed, **base).choices[0]
        if ch.message.tool_calls:
            assert ch.finish_reason == "tool_calls", ch
            check_calls(ch.message.tool_calls)
        else:
            assert ch.finish_reason == "stop", ch
            jsonschema.validate(json.loads(ch.message.content), ANSWER)
    for choice in ("auto", "required"):
        body = {"messages": [{"role": "user", "content": "x"}], "tools": TOOLS, "tool_choice": choice,
                "grammar": "root ::= \"a\"", "max_tokens": 2}
        r = post(server, "/v1/chat/completions", body)
        assert r.status_code == 400 and r.json()["error"]["param"] == "grammar", r.text
    body = {"messages": [{"role": "user", "content": "x"}], "tools": TOOLS, "tool_choice": "none",
            "grammar": "root ::= \"yes\"", "max_tokens": 4}
    assert ok_json(post(server, "/v1/chat/completions", body))["choices"][0]["message"]["content"] == "yes"


def test_tool_choice_none_and_auto_answer(server):
    cl = client(server)
    for choice in ("none", "auto"):
        r = cl.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], tools=TOOLS,
                                       tool_choice=choice, max_tokens=6)
        ch = r.choices[0]
        if choice == "none":
            assert ch.message.tool_calls is None and ch.finish_reason in ("stop", "length")
        assert isinstance(ch.message.content, (str, type(None)))
    # "none" leaves the tools out of the prompt: the same prompt as without tools.
    a = cl.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=1)
    b = cl.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], tools=TOOLS,
                                   tool_choice="none", max_tokens=1)
    c = cl.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], tools=TOOLS,
                                   max_tokens=1)
    assert a.usage.prompt_tokens == b.usage.prompt_tokens < c.usage.prompt_tokens


def test_tool_errors_name_the_field(server):
    cases = [
        ({"tools": [{"type": "function", "function": {"name": "bad name"}}]}, "tools[0].function.name"),
        ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
         "tool_choice.function.name"),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"functions": [{"name": "f"}]}, "functions"),
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "patternProperties": {"a": {}}}}}], "tool_choice": "required"},
         "tools[0].function.parameters"),
    ]
    for extra, param in cases:
        body = {"messages": [{"role": "user", "content": "x"}], "max_tokens": 2, **extra}
        r = post(server, "/v1/chat/completions", body)
        assert r.status_code == 400, (extra, r.text)
        assert r.json()["error"]["param"] == param, r.json()
    body = {"messages": [{"role": "user", "content": "x"},
                         {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {
                             "name": "calc", "arguments": "{not json"}}]}], "max_tokens": 2}
    r = post(server, "/v1/chat/completions", body)
    assert r.status_code == 400 and r.json()["error"]["param"] == "messages[1].tool_calls[0]", r.text


# ---------------------------------------------------------------------------
# infill

FIM_PREFIX = "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    "
FIM_SUFFIX = "\n    return a\n"


def test_infill_prompt_is_qwen_fim(server):
    fim = f"<|fim_prefix|>{FIM_PREFIX}<|fim_suffix|>{FIM_SUFFIX}<|fim_middle|>"
    want = len(tokenize(server, fim))
    r = ok_json(post(server, "/infill", {"input_prefix": FIM_PREFIX, "input_suffix": FIM_SUFFIX, "n_predict": 4}))
    assert r["tokens_evaluated"] == want, r
    assert isinstance(r["content"], str)
    r = ok_json(post(server, "/v1/completions", {"prompt": FIM_PREFIX, "suffix": FIM_SUFFIX, "max_tokens": 4}))
    assert r["usage"]["prompt_tokens"] == want, r
    # Repository context and the typed prompt, llama-server's defaults.
    extra = [{"filename": "util.py", "text": "def add(a, b):\n    return a + b\n"}]
    repo = ("<|repo_name|>myproject\n<|file_sep|>util.py\ndef add(a, b):\n    return a + b\n"
            f"<|file_sep|>filename\n<|fim_prefix|>{FIM_PREFIX}x = <|fim_suffix|>{FIM_SUFFIX}<|fim_middle|>")
    r = ok_json(post(server, "/infill", {"input_prefix": FIM_PREFIX, "input_suffix": FIM_SUFFIX,
                                         "input_extra": extra, "prompt": "x = ", "n_predict": 2}))
    assert r["tokens_evaluated"] == len(tokenize(server, repo)), r


def test_infill_errors(server):
    for body, param in [({"input_prefix": 3}, "input_prefix"), ({"input_extra": {}}, "input_extra"),
                        ({"input_extra": [{"filename": 1}]}, "input_extra[0].filename")]:
        r = post(server, "/infill", body)
        assert r.status_code == 400 and r.json()["error"]["param"] == param, r.text
    r = post(server, "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "suffix": "y"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "suffix", r.text


def infill_stream(server, body):
    """The events of a streamed /infill (llama-server's shape: no [DONE])."""
    sse = SSE(server, "/infill", dict(body, stream=True))
    sse.needs_done = False
    try:
        return sse.read_all()
    finally:
        sse.close()


def check_infill_events(evs):
    *pieces, last = evs
    assert pieces and all(e["stop"] is False and isinstance(e["content"], str) for e in pieces), evs
    assert last["stop"] is True and last["content"] == "" and "timings" in last, last
    return "".join(e["content"] for e in pieces), last


@pytest.mark.parametrize("seed", [1, 2])
def test_infill_stream_equals_whole(server, seed):
    body = {"input_prefix": FIM_PREFIX, "input_suffix": FIM_SUFFIX, "n_predict": 24, "seed": seed,
            "temperature": 1.0}
    whole = ok_json(post(server, "/infill", body))
    evs = infill_stream(server, body)
    text, last = check_infill_events(evs)
    assert text == whole["content"], (text, whole)
    for k in ("tokens_predicted", "tokens_evaluated", "finish_reason"):
        assert last[k] == whole[k], (k, last, whole)
    assert whole["tokens_predicted"] > 4 and len(evs) > 4, (whole, evs)  # streamed in pieces


def test_infill_stream_stop_string_across_chunks(server):
    """A stop string made of the end of one streamed piece and the start of
    the next ends the answer before it, streamed or not; none of it is sent."""
    body = {"input_prefix": FIM_PREFIX, "input_suffix": FIM_SUFFIX, "n_predict": 32, "seed": 1,
            "temperature": 1.0}
    full, _ = check_infill_events(infill_stream(server, body))
    pieces = [e["content"] for e in infill_stream(server, body)[:-1]]
    stop = None
    for i in range(len(pieces) - 1):
        a, b = pieces[i], pieces[i + 1]
        if not a or not b:
            continue
        cand = a[-2:] + b[:2]
        at = len("".join(pieces[:i + 1])) - len(a[-2:])
        if full.find(cand) == at:  # its first occurrence straddles this boundary
            stop = cand
            break
    assert stop, f"no piece boundary to put a stop string on: {pieces}"
    want = full[:full.find(stop)]
    whole = ok_json(post(server, "/infill", dict(body, stop=[stop])))
    assert whole["content"] == want and whole["finish_reason"] == "stop", (whole, want, stop)
    text, last = check_infill_events(infill_stream(server, dict(body, stop=[stop])))
    assert text == want and last["finish_reason"] == "stop", (text, want, stop)


def test_infill_stream_disconnect_cancels(model_dir):
    """--parallel 1: a streamed /infill whose client goes away mid-stream
    stops generating at once (the slot is free, the token counter stops far
    short of n_predict), as the chat streams do (test_http_concurrency)."""
    from conftest import start_http, stop_checked
    from helpers import active_slots_metric, find_metric, metrics
    import time
    s = start_http(model_dir, "--parallel", "1")
    try:
        ms = metrics(s)
        slots = active_slots_metric(ms)
        gen = find_metric(ms, ["gen", "completion", "predicted", "output"], ["token"],
                          exclude=("per_second", "tps", "tok_s", "rate", "second"))
        g0 = ms[gen]
        sse = SSE(s, "/infill", {"input_prefix": FIM_PREFIX, "input_suffix": FIM_SUFFIX, "n_predict": 3500,
                                 "temperature": 0, "ignore_eos": True, "stream": True})
        sse.needs_done = False
        for n, _ in enumerate(sse.events()):
            if n >= 4:
                break
        assert metrics(s)[slots] == 1
        sse.close()  # the client goes away mid-stream
        deadline = time.monotonic() + 3.0
        while metrics(s)[slots] != 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert metrics(s)[slots] == 0, "the slot is still busy 3 s after the client left"
        g1 = metrics(s)[gen]
        time.sleep(0.5)
        assert metrics(s)[gen] == g1, "still generating after the disconnect"
        assert g1 - g0 < 3000, f"the abandoned infill generated {g1 - g0} of its 3500 tokens"
    finally:
        stop_checked(s)


# ---------------------------------------------------------------------------
# real Coder files

REAL = os.environ.get("QWENC_REAL_MODEL") or "/root/.cache/qwenc/real/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"


@pytest.fixture(scope="module")
def real_server():
    if not os.path.isfile(REAL):
        pytest.skip(f"real model not present: {REAL}")
    from conftest import start_http, stop_checked
    s = start_http(REAL, "--parallel", "2")
    yield s
    stop_checked(s)


def test_real_unforced_tool_call(real_server):
    cl = client(real_server)
    r = cl.chat.completions.create(model="m", messages=[{"role": "user", "content": "What's the weather like in Paris today?"}],
                                   tools=[WEATHER], max_tokens=60, temperature=0)
    ch = r.choices[0]
    assert ch.finish_reason == "tool_calls", ch
    check_calls(ch.message.tool_calls, names=["get_weather"], schemas=SCHEMAS_REAL)
    assert json.loads(ch.message.tool_calls[0].function.arguments)["city"] == "Paris"


def test_real_infill_function_body(real_server):
    r = ok_json(post(real_server, "/infill", {"input_prefix": FIM_PREFIX, "input_suffix": FIM_SUFFIX,
                                              "n_predict": 40, "temperature": 0}))
    body = r["content"]
    assert "a, b = b, a + b" in body or "a, b = a + b, a" in body, body


def test_real_flow_forced_then_answer(real_server):
    """The whole openai tool-calling flow on the real file: a forced call in
    Qwen's <tool_call> form, its result, then the answer in text."""
    cl = client(real_server)
    msgs = [{"role": "user", "content": "What's the weather like in Tokyo?"}]
    r = cl.chat.completions.create(model="m", messages=msgs, tools=[WEATHER, CALC], tool_choice="required",
                                   max_tokens=80, temperature=0)
    ch = r.choices[0]
    assert ch.finish_reason == "tool_calls", ch
    check_calls(ch.message.tool_calls, schemas=SCHEMAS_REAL)
    call = ch.message.tool_calls[0]
    assert call.function.name == "get_weather" and "Tokyo" in call.function.arguments, call
    msgs.append(ch.message.model_dump(exclude_none=True))
    msgs.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature_c": 17, "sky": "rain"})})
    r2 = cl.chat.completions.create(model="m", messages=msgs, tools=[WEATHER, CALC], max_tokens=60, temperature=0)
    ch2 = r2.choices[0]
    assert ch2.finish_reason == "stop" and ch2.message.content and not ch2.message.tool_calls, ch2
    assert "17" in ch2.message.content, ch2.message.content


# ---------------------------------------------------------------------------
# stop_token_ids (the mechanism that ends an infill at <|file_sep|> & co.)


def test_stop_token_ids(server, model_dir):
    from conftest import QWENC, run
    prompt = [9707, 11, 1879, 0, 220]
    r = run([QWENC, model_dir, " ".join(map(str, prompt)), "8"])
    assert r.returncode == 0, r.stderr
    ids = [int(x) for x in r.stdout.split()]
    base = ok_json(post(server, "/v1/completions", {"prompt": prompt, "max_tokens": 8}))
    assert base["usage"]["completion_tokens"] == 8
    k = next(i for i in range(1, 8) if ids[i] not in ids[:i])  # a token that first comes at k
    j = ok_json(post(server, "/v1/completions", {"prompt": prompt, "max_tokens": 8, "stop_token_ids": [ids[k]]}))
    assert j["usage"]["completion_tokens"] == k and j["choices"][0]["finish_reason"] == "stop", (j, ids, k)
    want = ok_json(post(server, "/detokenize", {"tokens": ids[:k]}))["content"]
    assert j["choices"][0]["text"] == want, (j, want)
    for bad in ("x", [-1], [10 ** 9], list(range(17))):
        r = post(server, "/v1/completions", {"prompt": prompt, "max_tokens": 2, "stop_token_ids": bad})
        assert r.status_code == 400 and r.json()["error"]["param"] == "stop_token_ids", r.text


def test_forced_calls_for_every_choice(server):
    cl = client(server)
    r = cl.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], tools=TOOLS, n=3,
                                   tool_choice="required", parallel_tool_calls=False, max_tokens=200, seed=5,
                                   temperature=1.0)
    assert len(r.choices) == 3
    ids = set()
    for ch in r.choices:
        assert ch.finish_reason == "tool_calls", ch
        check_calls(ch.message.tool_calls)
        ids.update(c.id for c in ch.message.tool_calls)
    assert len(ids) == 3, ids
