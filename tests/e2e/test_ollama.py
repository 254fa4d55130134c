"""Ollama's API on the HTTP port (src/server/ollama.c), checked with the
`ollama` Python client from PyPI (tools/venv.sh) pointed at the server, and
with raw requests where the exact bytes matter (NDJSON lines, error shapes).

The tiny model answers greedily by default (conftest's generation_config), so
the Ollama endpoints must give exactly the text the OpenAI endpoint gives for
the same conversation and limits.
"""

import datetime
import json

import pytest
import requests

from conftest import start_http, stop_checked
from helpers import chat_text, post

ollama = pytest.importorskip("ollama", reason="the ollama client is installed by tools/venv.sh")


@pytest.fixture(scope="module")
def server(model_dir):
    s = start_http(model_dir, "--parallel", "2")
    yield s
    stop_checked(s)


@pytest.fixture(scope="module")
def client(server):
    return ollama.Client(host=server.url, timeout=60)


def check_created_at(s):
    # RFC 3339 with nanoseconds, UTC: 2024-07-22T20:47:51.147561123Z
    assert s.endswith("Z") and "T" in s, s
    datetime.datetime.strptime(s[:26], "%Y-%m-%dT%H:%M:%S.%f")


def check_final(r, prompt_tokens, eval_count, reason):
    assert r.done is True and r.done_reason == reason, r
    assert r.prompt_eval_count == prompt_tokens and r.eval_count == eval_count, r
    for f in ("total_duration", "prompt_eval_duration", "eval_duration", "load_duration"):
        v = getattr(r, f)
        assert isinstance(v, int) and v >= 0, (f, v)
    assert r.total_duration > 0 and r.total_duration >= r.prompt_eval_duration
    check_created_at(r.created_at)


def test_version_tags_ps_show(server, client):
    v = requests.get(server.url + "/api/version", timeout=30).json()
    assert isinstance(v["version"], str) and v["version"].count(".") == 2
    models = client.list().models
    assert len(models) == 1
    m = models[0]
    assert m.model and m.size > 0 and len(m.digest) == 64
    assert m.details.family == "qwen2" and m.details.format == "safetensors"
    assert m.details.quantization_level == "BF16" and m.details.parameter_size.endswith(("M", "K", "B"))
    ps = client.ps().models
    assert len(ps) == 1 and ps[0].model == m.model and ps[0].context_length > 0
    sh = client.show(m.model)
    assert sh.modelinfo["general.architecture"] == "qwen2"
    assert sh.modelinfo["qwen2.block_count"] == 2 and sh.modelinfo["qwen2.embedding_length"] == 64
    assert sh.modelinfo.get("qwenc.random_weights") is True
    assert sh.details.family == "qwen2" and "completion" in sh.capabilities
    # any name is this server's one model (as for /v1/models)
    assert client.show("llama3.2:latest").modelinfo["qwen2.block_count"] == 2


def test_chat_matches_openai(server, client):
    want, finish, j = chat_text(server, "Why is the sky blue?", max_tokens=20)
    assert finish == "length"
    r = client.chat(model="qwen2.5-coder:0.5b", messages=[{"role": "user", "content": "Why is the sky blue?"}],
                    options={"num_predict": 20}, stream=False)
    assert r.model == "qwen2.5-coder:0.5b"  # the name the client gave, echoed
    assert r.message.role == "assistant" and r.message.content == want
    check_final(r, j["usage"]["prompt_tokens"], 20, "length")


def test_chat_stream_matches_openai(server, client):
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Tell me more"}]
    want, _, j = chat_text(server, None, messages=msgs, max_tokens=25)
    parts = list(client.chat(model="m", messages=msgs, options={"num_predict": 25}, stream=True))
    assert len(parts) >= 3, "a stream of several objects"
    assert all(p.done is False for p in parts[:-1]) and parts[-1].done is True
    assert "".join(p.message.content for p in parts) == want
    assert parts[-1].message.content == ""
    check_final(parts[-1], j["usage"]["prompt_tokens"], 25, "length")


def test_stream_is_ndjson(server):
    r = requests.post(server.url + "/api/generate", json={"model": "m", "prompt": "Hi", "options": {"num_predict": 5}},
                      stream=True, timeout=60)
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("application/x-ndjson")
    body = r.content.decode()
    lines = body.split("\n")
    assert lines[-1] == "" and all(lines[:-1])
    objs = [json.loads(x) for x in lines[:-1]]
    assert objs[-1]["done"] is True and objs[-1]["eval_count"] == 5
    assert all(set(o) >= {"model", "created_at", "response", "done"} for o in objs)


def test_generate_matches_openai(server, client):
    want, _, j = chat_text(server, "Write a haiku", max_tokens=15)
    r = client.generate(model="m", prompt="Write a haiku", options={"num_predict": 15}, stream=False)
    assert r.response == want
    check_final(r, j["usage"]["prompt_tokens"], 15, "length")
    parts = list(client.generate(model="m", prompt="Write a haiku", options={"num_predict": 15}, stream=True))
    assert "".join(p.response for p in parts) == want and parts[-1].done_reason == "length"
    # system goes through the template as in chat
    want_s, _, _ = chat_text(server, None, messages=[{"role": "system", "content": "S"},
                                                     {"role": "user", "content": "Q"}], max_tokens=10)
    r = client.generate(model="m", prompt="Q", system="S", options={"num_predict": 10})
    assert r.response == want_s
    # raw: no template (the seed API's raw completion gives the same)
    raw = post(server, "/v1/completions", {"prompt": "Once upon", "raw": True, "max_tokens": 10}).json()
    r = client.generate(model="m", prompt="Once upon", raw=True, options={"num_predict": 10})
    assert r.response == raw["choices"][0]["text"]


def test_options_map_to_sampling(server, client):
    opts = {"temperature": 0.9, "top_p": 0.8, "top_k": 40, "min_p": 0.02, "seed": 1234, "repeat_penalty": 1.1,
            "presence_penalty": 0.3, "frequency_penalty": 0.2}
    want, _, _ = chat_text(server, "Sample me", max_tokens=20, temperature=0.9, top_p=0.8, top_k=40, min_p=0.02,
                           seed=1234, repetition_penalty=1.1, presence_penalty=0.3, frequency_penalty=0.2)
    r = client.chat(model="m", messages=[{"role": "user", "content": "Sample me"}], options=dict(opts, num_predict=20))
    assert r.message.content == want
    # the options were used: greedy decoding gives another text
    greedy, _, _ = chat_text(server, "Sample me", max_tokens=20)
    assert want != greedy


def test_stop_and_keep_alive(server, client):
    full, _, _ = chat_text(server, "Count", max_tokens=30)
    stop = full[len(full) // 2: len(full) // 2 + 3]
    assert stop.strip(), full
    r = client.chat(model="m", messages=[{"role": "user", "content": "Count"}],
                    options={"num_predict": 30, "stop": [stop]}, keep_alive="10m")
    assert r.done_reason == "stop" and r.message.content == full[:full.index(stop)]


def test_load_and_unload_calls(server, client):
    r = client.chat(model="m", messages=[])
    assert r.done is True and r.done_reason == "load" and r.message.content == ""
    r = client.generate(model="m", prompt="", keep_alive=0)
    assert r.done is True and r.done_reason == "unload" and r.response == ""
    # still serving (qwenc keeps its one model)
    assert client.generate(model="m", prompt="Hi", options={"num_predict": 3}).eval_count == 3


def test_format_constrains_the_answer(server, client):
    # "json": the answer is a JSON object; a schema: it validates (the grammar engine, as response_format)
    r = client.chat(model="m", messages=[{"role": "user", "content": "x"}], format="json",
                    options={"temperature": 0, "num_predict": 30})
    assert isinstance(json.loads(r.message.content), dict), r.message.content
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer"}},
              "required": ["ok", "n"], "additionalProperties": False}
    for seed in range(3):
        r = client.generate(model="m", prompt="x", format=schema,
                            options={"temperature": 1.0, "seed": seed, "num_predict": 200})
        v = json.loads(r.response)
        assert set(v) == {"ok", "n"} and isinstance(v["ok"], bool) and isinstance(v["n"], int), r.response
    # what the grammar engine refuses is a 400 naming the field and the keyword
    with pytest.raises(ollama.ResponseError) as ei:
        client.chat(model="m", messages=[{"role": "user", "content": "x"}], format={"type": "number", "minimum": 1})
    assert ei.value.status_code == 400 and "minimum" in ei.value.error, ei.value.error
    server.check_alive()


@pytest.mark.parametrize("field,value", [("tools", [{"type": "function", "function": {"name": "f"}}])])
def test_refused_fields_named(server, client, field, value):
    with pytest.raises(ollama.ResponseError) as ei:
        client.chat(model="m", messages=[{"role": "user", "content": "x"}], **{field: value})
    assert ei.value.status_code == 400 and field in ei.value.error, ei.value.error
    server.check_alive()


def test_errors_in_ollama_shape(server):
    # {"error": "message"}: a string, as Ollama's clients read it
    for path, body, status, word in [
        ("/api/chat", {"model": "m", "messages": [{"role": "user", "content": "x"}], "options": {"temperature": 9}},
         400, "temperature"),
        ("/api/chat", {"messages": [{"role": "user", "content": "x"}]}, 400, "model"),
        ("/api/generate", {"model": "m", "prompt": "x", "options": {"mirostat": 1}}, 400, "mirostat"),
        ("/api/embed", {"model": "m", "input": "x"}, 501, "embedding"),
        ("/api/embeddings", {"model": "m", "prompt": "x"}, 501, "embedding"),
        ("/api/pull", {"model": "m"}, 404, "/api/pull"),
    ]:
        r = requests.post(server.url + path, json=body, timeout=30)
        assert r.status_code == status, (path, r.status_code, r.text)
        j = r.json()
        assert isinstance(j.get("error"), str) and word in j["error"], (path, j)
    r = requests.post(server.url + "/api/chat", data=b"{nope", timeout=30)
    assert r.status_code == 400 and isinstance(r.json()["error"], str)
    r = requests.get(server.url + "/api/chat", timeout=30)
    assert r.status_code == 405 and isinstance(r.json()["error"], str)


def test_embed_is_501_through_the_client(client):
    with pytest.raises(ollama.ResponseError) as ei:
        client.embed(model="m", input="hello")
    assert ei.value.status_code == 501 and "embedding" in ei.value.error


def test_api_key(model_dir):
    s = start_http(model_dir, "--api-key", "k3y")
    try:
        c = ollama.Client(host=s.url, timeout=60)
        with pytest.raises(ollama.ResponseError) as ei:
            c.list()
        assert ei.value.status_code == 401 and isinstance(ei.value.error, str) and "API key" in ei.value.error
        c = ollama.Client(host=s.url, timeout=60, headers={"Authorization": "Bearer k3y"})
        assert len(c.list().models) == 1
        assert c.generate(model="m", prompt="Hi", options={"num_predict": 2}).eval_count == 2
    finally:
        stop_checked(s)


def test_model_names(model_dir):
    # without --any-model: the served id, or id:latest (Ollama's clients add
    # the default tag); another name is Ollama's 404 {"error": ...}
    s = start_http(model_dir, any_model=False)
    try:
        c = ollama.Client(host=s.url, timeout=60)
        name = c.list().models[0].model
        for n in (name, name + ":latest"):
            assert c.generate(model=n, prompt="Hi", options={"num_predict": 2}).model == n
            assert c.show(n).details.family == "qwen2"
        for call in (lambda: c.chat(model="llama3.2", messages=[{"role": "user", "content": "x"}]),
                     lambda: c.generate(model=name + ":7b", prompt="x"),
                     lambda: c.generate(model="other", prompt=""),  # a load call names a model too
                     lambda: c.show("llama3.2")):
            with pytest.raises(ollama.ResponseError) as ei:
                call()
            assert ei.value.status_code == 404 and "does not exist" in ei.value.error, ei.value.error
    finally:
        stop_checked(s)
