"""HTTP server, bad input and access control: every bad request gets an
OpenAI-style JSON error with the right status, and the server still answers
/health afterwards (no crash, no hang)."""

import http.client
import json
import socket
import sys
import time

import openai
import pytest
import requests

from conftest import start_http, stop_checked
from helpers import api_error, chat, names_field, ok_json, post, raw_http

BAD_400 = [
    # (path, raw body, field the message should name or None)
    ("/v1/completions", b'{"prompt": "hi", ', None),                     # truncated JSON
    ("/v1/completions", b"not json at all", None),
    ("/v1/completions", b"", None),                                      # empty body
    ("/v1/completions", b'["prompt", "hi"]', None),                      # not an object
    ("/v1/completions", b'{"prompt": 5}', "prompt"),
    ("/v1/completions", b'{"prompt": null}', "prompt"),
    ("/v1/completions", b'{"prompt": "hi", "max_tokens": "x"}', "max_tokens"),
    ("/v1/completions", b'{"prompt": "hi", "max_tokens": -1}', "max_tokens"),
    ("/v1/completions", b'{"prompt": "hi", "max_tokens": 1e30}', "max_tokens"),
    ("/v1/completions", b'{"prompt": "hi", "max_tokens": 513}', "max_tokens"),
    ("/v1/completions", b'{"prompt": "hi", "system": 3}', "system"),
    ("/v1/completions", b'{"max_tokens": 5}', "prompt"),                 # missing prompt
    ("/v1/completions", b'{"prompt": "hi", "temperature": "hot"}', "temperature"),
    ("/v1/completions", b'{"prompt": "hi", "temperature": -1}', "temperature"),
    ("/v1/chat/completions", b'{"messages": "hello"}', "messages"),    # not a list
    ("/v1/chat/completions", b'{"model": "m"}', "messages"),           # missing
    ("/v1/chat/completions", b'{"messages": []}', "messages"),
    ("/v1/chat/completions", b'{"messages": ["hi"]}', "messages"),
    ("/v1/chat/completions", b'{"messages": [{"role": "user"}]}', "content"),
    ("/v1/chat/completions", b'{"messages": [{"role": 7, "content": "x"}]}', "role"),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": 5}]}', "content"),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": "x"}', "max_tokens"),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "top_p": 2}', "top_p"),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "stream": "yes"}', "stream"),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "stop": 5}', "stop"),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "seed": "s"}', "seed"),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": true}', "max_tokens"),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "stop": ["a", 5]}', "stop"),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "presence_penalty": 5}',
     "presence_penalty"),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "stream_options": 5}',
     "stream_options"),
    ("/tokenize", b'{"content": 5}', None),
    ("/detokenize", b'{"tokens": "1 2"}', "tokens"),
    ("/detokenize", b'{"tokens": [999999]}', None),                     # id out of range
    ("/detokenize", b'{"tokens": [-1]}', None),
    ("/detokenize", b'{"tokens": [1.5]}', None),
]


@pytest.mark.parametrize("path,body,field", BAD_400,
                         ids=[f"{i:02d}{p.replace('/', '_')}-{f or ''}" for i, (p, b, f) in enumerate(BAD_400)])
def test_bad_request_400(server, path, body, field):
    msg = api_error(post(server, path, body), 400)
    if field:
        assert names_field(msg, field), f"message does not name {field!r}: {msg!r}"
    server.check_alive(f"after POST {path} {body[:60]!r}")


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions", "/tokenize"])
def test_invalid_utf8_body_400(server, path):
    key = "content" if path == "/tokenize" else "prompt"
    if path == "/v1/chat/completions":
        body = b'{"messages": [{"role": "user", "content": "ab\xff\xfe\xc3("}]}'
    else:
        body = b'{"' + key.encode() + b'": "ab\xff\xfe\xc3("}'
    api_error(post(server, path, body), 400)
    server.check_alive("after an invalid UTF-8 body")


def test_odd_but_valid_json_does_not_crash(server):
    for body in [b'{"prompt": "a\\u0000b", "max_tokens": 2}',        # NUL inside the string
                 b'{"prompt": "\\ud800", "max_tokens": 2}',           # lone surrogate escape
                 b'{"prompt": "hi", "max_tokens": 2, "prompt": "again"}',  # duplicate key
                 b"[" * 20000 + b"]" * 20000,                          # deep nesting
                 b'{"prompt": "' + "\u00e9".encode() * 5000 + b'", "max_tokens": 1}']:
        r = post(server, "/v1/completions", body)
        assert r.status_code in (200, 400), f"{body[:40]!r}: {r.status_code} {r.text[:200]}"
        if r.status_code == 400:
            api_error(r, 400)
        else:
            json.loads(r.content.decode("utf-8"))
        server.check_alive(f"after {body[:40]!r}")


# RFC 8259, strictly (issue 16): cJSON alone accepted all of these, answered
# 200, and cut strings at a \u0000. Every endpoint that takes a body.
_CHAT = b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}'
_STRICT_BODIES = {
    "/v1/completions": b'{"prompt": "hi", "max_tokens": 1}',
    "/v1/chat/completions": _CHAT,
    "/tokenize": b'{"content": "hi"}',
    "/detokenize": b'{"tokens": [1, 2]}',
}
STRICT_400 = []
for _path, _ok in _STRICT_BODIES.items():
    _inner = _ok[1:-1]
    STRICT_400 += [
        (_path, "trailing", _ok + b" x"),
        (_path, "two-objects", _ok + _ok),
        (_path, "trailing-nul", _ok + b"\x00"),
        (_path, "leading-control", b"\x01" + _ok),            # cJSON skips any byte <= 0x20
        (_path, "control-between", b"{\x02" + _inner + b"}"),
        (_path, "duplicate-key", b"{" + _inner + b", " + _inner + b"}"),
    ]
for _path, _key in [("/v1/completions", b"prompt"), ("/tokenize", b"content")]:
    STRICT_400 += [
        (_path, "raw-nul-in-string", b'{"' + _key + b'": "a\x00b", "max_tokens": 1}'),
        (_path, "raw-newline-in-string", b'{"' + _key + b'": "a\nb", "max_tokens": 1}'),
        (_path, "raw-control-in-string", b'{"' + _key + b'": "a\x1fb", "max_tokens": 1}'),
        (_path, "escaped-nul", b'{"' + _key + b'": "abc\\u0000def", "max_tokens": 1}'),
    ]
STRICT_400 += [
    ("/v1/chat/completions", "escaped-nul-in-content",
     b'{"messages": [{"role": "user", "content": "a\\u0000b"}], "max_tokens": 1}'),
    ("/v1/completions", "stop-starting-with-nul", b'{"prompt": "hi", "max_tokens": 1, "stop": ["\\u0000x"]}'),
]


@pytest.mark.parametrize("path,what,body", STRICT_400,
                         ids=[f"{p.replace('/', '_')}-{w}" for p, w, _ in STRICT_400])
def test_strict_json_400(server, path, what, body):
    assert json.loads(_STRICT_BODIES.get(path, b"{}")) is not None
    msg = api_error(post(server, path, body), 400)
    assert "JSON" in msg, msg
    server.check_alive(f"after {what} on {path}")


@pytest.mark.parametrize("path", list(_STRICT_BODIES))
def test_strict_json_valid_still_200(server, path):
    # whitespace RFC 8259 allows (space, tab, CR, LF) around and inside is fine
    body = b" \t\r\n" + _STRICT_BODIES[path] + b"\n "
    r = post(server, path, body)
    assert r.status_code == 200, r.text


def test_tokenize_keeps_the_whole_string(server):
    # the escaped NUL is refused, never cut: "abc" alone must not come back
    r = post(server, "/tokenize", b'{"content": "abc\\u0000def"}')
    assert r.status_code == 400
    a = post(server, "/tokenize", b'{"content": "abc"}').json()["tokens"]
    b = post(server, "/tokenize", b'{"content": "abc\\u0001def"}').json()["tokens"]
    assert len(b) > len(a)


def test_unknown_path_404(server):
    for method, path in [("GET", "/nope"), ("POST", "/v1/nope"), ("GET", "/v1/completions/x")]:
        r = requests.request(method, server.url + path, data=b"{}", timeout=10)
        api_error(r, 404)
    server.check_alive()


def test_wrong_method_405(server):
    for method, path in [("GET", "/v1/completions"), ("GET", "/v1/chat/completions"),
                         ("POST", "/health"), ("DELETE", "/v1/chat/completions"),
                         ("PUT", "/v1/models"), ("GET", "/tokenize")]:
        r = requests.request(method, server.url + path, timeout=10)
        api_error(r, 405)
    server.check_alive()


def test_garbage_on_the_socket(server):
    for data in [b"GARBAGE\r\n\r\n", b"\x00\xff\x10\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n",
                 b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -5\r\n\r\n",
                 b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 99999999999999999999\r\n\r\n{",
                 b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 200000 + b"\r\n\r\n"]:
        status, _ = raw_http(server.port, data, timeout=2)
        assert status is None or 400 <= status < 600, (data, status)
        server.check_alive(f"after {data!r}")


def test_stalled_client_does_not_block_others(server):
    """A client that sends half a request and stalls must not hang the server."""
    s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    try:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"pro")
        t0 = time.monotonic()
        ok_json(post(server, "/v1/completions", {"prompt": "hi", "max_tokens": 2}, timeout=20))
        assert time.monotonic() - t0 < 15
    finally:
        s.close()
    server.check_alive()


def test_every_error_is_json_with_content_type(server):
    r = post(server, "/v1/completions", b"{bad")
    api_error(r, 400)
    assert "application/json" in r.headers.get("Content-Type", "")


# ---------------------------------------------------------------------------
# Host header (DNS-rebinding defence on a loopback-bound server), CORS off


def _get(port, path, headers):
    return _get_at("127.0.0.1", port, path, headers)


def _get_at(addr, port, path, headers):
    c = http.client.HTTPConnection(addr, port, timeout=10)
    try:
        c.putrequest("GET", path, skip_host=True)
        for k, v in headers.items():
            c.putheader(k, v)
        c.endheaders()
        r = c.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        c.close()


def test_host_header_checked(server):
    st, _, body = _get(server.port, "/v1/models", {"Host": "evil.example"})
    assert st == 403, f"Host: evil.example: expected 403, got {st} {body[:200]!r}"
    assert "error" in json.loads(body)
    st, _, _ = _get(server.port, "/v1/models", {"Host": f"evil.example:{server.port}"})
    assert st == 403
    for host in (f"127.0.0.1:{server.port}", f"localhost:{server.port}"):
        st, _, body = _get(server.port, "/v1/models", {"Host": host})
        assert st == 200, f"Host: {host}: expected 200, got {st} {body[:200]!r}"
    server.check_alive()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="127.0.0.2 is routed to lo on Linux only")
def test_host_option(model_dir):
    s = start_http(model_dir, "--host", "127.0.0.2", "--parallel", "1")
    try:
        assert s.host == "127.0.0.2", f"listening line names {s.host}"
        r = requests.get(f"http://127.0.0.2:{s.port}/v1/models", timeout=10)
        assert r.status_code == 200, r.text[:200]
        with pytest.raises(requests.ConnectionError):
            requests.get(f"http://127.0.0.1:{s.port}/health", timeout=5)
        st, _, _ = _get_at("127.0.0.2", s.port, "/v1/models", {"Host": "evil.example"})
        assert st == 403
    finally:
        stop_checked(s)


def test_no_cors_header_by_default(server):
    r = requests.get(server.url + "/v1/models", headers={"Origin": "https://example.org"}, timeout=10)
    assert r.status_code == 200
    assert "Access-Control-Allow-Origin" not in r.headers, r.headers


# ---------------------------------------------------------------------------
# Limits: --ctx 64 --max-body 4096


@pytest.fixture(scope="module")
def limited(model_dir):
    s = start_http(model_dir, "--parallel", "2", "--ctx", "64", "--max-body", "4096")
    yield s
    stop_checked(s)


def test_prompt_longer_than_context_400(limited):
    long_prompt = "hello world " * 60          # ~120 tokens > 64
    msg = api_error(post(limited, "/v1/completions", {"prompt": long_prompt, "max_tokens": 1}), 400)
    api_error(chat(limited, long_prompt, max_tokens=1), 400)
    api_error(post(limited, "/v1/completions", {"prompt": long_prompt, "raw": True, "max_tokens": 1}), 400)
    limited.check_alive()
    # a short one still works on this server
    r = post(limited, "/v1/completions", {"prompt": "hi", "raw": True, "max_tokens": 4})
    j = ok_json(r)
    assert j["gen_tokens"] <= 4


def test_body_over_limit_413(limited):
    body = json.dumps({"prompt": "x" * 5000, "max_tokens": 1})
    api_error(post(limited, "/v1/completions", body), 413)
    limited.check_alive()
    # chunked upload (no Content-Length) over the limit
    def gen():
        yield b'{"prompt": "'
        for _ in range(10):
            yield b"y" * 1000
        yield b'", "max_tokens": 1}'
    r = requests.post(limited.url + "/v1/completions", data=gen(),
                      headers={"Content-Type": "application/json"}, timeout=20)
    api_error(r, 413)
    limited.check_alive()
    # a body just under the limit is accepted (then refused for its length, not its size)
    r = post(limited, "/v1/completions", json.dumps({"prompt": "hi", "raw": True, "max_tokens": 1,
                                                       "user": "u" * 3000}))
    assert r.status_code == 200, f"{r.status_code} {r.text[:200]}"


def test_prompt_longer_than_default_context_400(server):
    msg = api_error(post(server, "/v1/completions", {"prompt": "hello " * 6000, "raw": True, "max_tokens": 1}), 400)
    api_error(chat(server, "hello " * 6000, max_tokens=1), 400)
    server.check_alive()


def test_default_body_limit_1mib(server):
    body = json.dumps({"prompt": "z" * (1 << 20), "max_tokens": 1})
    api_error(post(server, "/v1/completions", body), 413)
    server.check_alive()


# ---------------------------------------------------------------------------
# --api-key and --cors


KEY = "sekrit-key-123"
ORIGIN = "https://app.example.org"


@pytest.fixture(scope="module")
def guarded(model_dir):
    s = start_http(model_dir, "--parallel", "2", "--api-key", KEY, "--cors", ORIGIN)
    yield s
    stop_checked(s)


def test_api_key(guarded):
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    api_error(post(guarded, "/v1/chat/completions", body), 401)
    api_error(post(guarded, "/v1/chat/completions", body, headers={"Authorization": "Bearer wrong"}), 401)
    api_error(post(guarded, "/v1/chat/completions", body, headers={"Authorization": KEY}), 401)
    api_error(post(guarded, "/v1/completions", {"prompt": "hi"}), 401)
    r = requests.get(guarded.url + "/v1/models", timeout=10)
    api_error(r, 401)
    ok_json(post(guarded, "/v1/chat/completions", body, headers={"Authorization": f"Bearer {KEY}"}))
    r = requests.get(guarded.url + "/health", timeout=10)
    assert r.status_code == 200, "/health must be exempt from the API key"
    guarded.check_alive()


def test_api_key_openai_client(guarded):
    good = openai.OpenAI(base_url=guarded.url + "/v1", api_key=KEY, max_retries=0, timeout=30)
    r = good.chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}], max_tokens=2)
    assert r.choices[0].message.content is not None
    bad = openai.OpenAI(base_url=guarded.url + "/v1", api_key="nope", max_retries=0, timeout=30)
    with pytest.raises(openai.AuthenticationError):
        bad.chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}], max_tokens=2)


def test_cors_when_set(guarded):
    r = requests.get(guarded.url + "/health", headers={"Origin": ORIGIN}, timeout=10)
    assert r.headers.get("Access-Control-Allow-Origin") == ORIGIN, r.headers
    r = post(guarded, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1},
             headers={"Origin": ORIGIN, "Authorization": f"Bearer {KEY}"})
    assert r.status_code == 200
    assert r.headers.get("Access-Control-Allow-Origin") == ORIGIN, r.headers
    # preflight: no credentials are sent with it
    r = requests.options(guarded.url + "/v1/chat/completions", timeout=10,
                         headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST",
                                  "Access-Control-Request-Headers": "authorization, content-type"})
    assert r.status_code in (200, 204), f"preflight: {r.status_code} {r.text[:200]}"
    assert r.headers.get("Access-Control-Allow-Origin") == ORIGIN, r.headers
    allow_h = r.headers.get("Access-Control-Allow-Headers", "").lower()
    assert "authorization" in allow_h or allow_h == "*", r.headers


def test_error_style_per_request_on_one_keep_alive_connection(server):
    """Ollama's endpoints answer errors as Ollama does ({"error": "..."}),
    the OpenAI ones as OpenAI does ({"error": {...}}), decided per request:
    alternating on one keep-alive connection, each gets its own shape."""
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    sock = None
    # generation endpoints (errors rendered by the request layer) and others
    # the HTTP server answers itself (/api/show, /tokenize)
    cases = [("/api/chat", "ollama"), ("/v1/chat/completions", "openai"), ("/api/show", "ollama"),
             ("/tokenize", "openai"), ("/api/generate", "ollama"), ("/v1/completions", "openai"),
             ("/api/show", "ollama"), ("/infill", "openai")]
    for path, style in cases:
        c.request("POST", path, body=b"{not json", headers={"Content-Type": "application/json"})
        r = c.getresponse()
        j = json.loads(r.read())
        assert r.status == 400, (path, r.status, j)
        if style == "ollama":
            assert isinstance(j.get("error"), str) and j["error"], (path, j)
        else:
            assert isinstance(j.get("error"), dict) and j["error"]["message"] and "type" in j["error"], (path, j)
        if sock is None:
            sock = c.sock
        assert c.sock is sock and sock is not None, f"{path}: the connection was not kept alive"
    c.close()


def test_no_thread_local_state_in_the_server():
    """The error style (and anything else a request decides) lives in the
    connection's or the request's state, never in a thread-local."""
    import glob
    import os
    root = os.path.join(os.path.dirname(__file__), "..", "..", "src", "server")
    hits = [f for f in glob.glob(os.path.join(root, "*.[ch]")) if "_Thread_local" in open(f).read()
            or "__thread" in open(f).read()]
    assert not hits, hits
