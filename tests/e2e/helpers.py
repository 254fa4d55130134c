"""Small HTTP helpers for the e2e tests: JSON requests, strict SSE reading,
error-shape checks, Prometheus parsing."""

import http.client
import json
import os
import re
import socket
import time

import requests

TIMEOUT = float(os.environ.get("QWENC_E2E_HTTP_TIMEOUT", "60"))


def post(server, path, body, headers=None, timeout=TIMEOUT):
    """POST body (a dict is sent as JSON; bytes/str as is)."""
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    data = json.dumps(body) if isinstance(body, (dict, list)) else body
    return requests.post(server.url + path, data=data, headers=h, timeout=timeout)


def chat(server, content=None, messages=None, **fields):
    body = {"model": "qwenc-test", "messages": messages or [{"role": "user", "content": content}]}
    body.update(fields)
    return post(server, "/v1/chat/completions", body)


def ok_json(r):
    assert r.status_code == 200, f"expected 200, got {r.status_code}: {r.text[:500]}"
    ctype = r.headers.get("Content-Type", "")
    assert "application/json" in ctype, f"Content-Type {ctype!r}"
    return r.json()


def chat_text(server, content, **fields):
    """Non-streaming chat; returns (text, finish_reason, full json)."""
    j = ok_json(chat(server, content, **fields))
    c = j["choices"][0]
    return c["message"]["content"], c["finish_reason"], j


def api_error(r, status):
    """Check an OpenAI-style error: the status, and JSON {"error": {"message": str}}.
    Returns the message."""
    assert r.status_code == status, f"expected {status}, got {r.status_code}: {r.text[:500]}"
    try:
        j = json.loads(r.content.decode("utf-8"))
    except ValueError:
        raise AssertionError(f"error body is not JSON ({r.status_code}): {r.content[:300]!r}")
    assert isinstance(j, dict) and isinstance(j.get("error"), dict), f"no error object: {j}"
    msg = j["error"].get("message")
    assert isinstance(msg, str) and msg.strip(), f"error without a message: {j}"
    return msg


def names_field(msg, field):
    """The error message names the field (as a word, e.g. 'n' not inside 'not')."""
    return re.search(r"(?<![A-Za-z0-9_])" + re.escape(field) + r"(?![A-Za-z0-9_])", msg) is not None


# ---------------------------------------------------------------------------
# Server-sent events, read strictly off the wire.


class SSE:
    """POST a streaming request with http.client and read SSE events one at a
    time. Checks framing: every non-empty line is `data: ...` (or a `:`
    comment), each event is terminated by a blank line, bytes are valid
    UTF-8, `data: [DONE]` is last."""

    def __init__(self, server, path, body, headers=None, timeout=TIMEOUT, send=True):
        self.conn = http.client.HTTPConnection(server.addr, server.port, timeout=timeout)
        self.conn.connect()
        self.path, self.body = path, body
        self.hdrs = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        self.hdrs.update(headers or {})
        self.done = False
        self.needs_done = True  # llama-server's own streams (/infill) end without it
        self.chunks = []
        if send:
            self.send()

    def send(self):
        """Send the request and wait for the response headers."""
        self.conn.request("POST", self.path, body=json.dumps(self.body).encode(), headers=self.hdrs)
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.headers = self.resp.headers

    def hangup(self):
        """Close the connection from another thread (even while send() waits)."""
        try:
            self.conn.sock.shutdown(socket.SHUT_RDWR)
        except (OSError, AttributeError):
            pass

    def error_body(self):
        return self.resp.read()

    def events(self):
        """Yield each event's parsed JSON (a dict); sets self.done at [DONE]."""
        assert self.status == 200, f"stream: expected 200, got {self.status}: {self.resp.read()[:300]!r}"
        ctype = self.headers.get("Content-Type", "")
        assert ctype.startswith("text/event-stream"), f"stream Content-Type {ctype!r}"
        data = []
        while True:
            raw = self.resp.readline()
            if not raw:
                assert not data, f"stream ended inside an event: {data}"
                assert self.done or not self.needs_done, "stream ended without data: [DONE]"
                return
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise AssertionError(f"invalid UTF-8 on the SSE stream: {raw!r}")
            line = line.rstrip("\r\n")
            if line == "":
                if not data:
                    continue
                payload = "\n".join(data)
                data = []
                assert not self.done, f"event after data: [DONE]: {payload[:200]}"
                if payload == "[DONE]":
                    self.done = True
                    continue
                try:
                    ev = json.loads(payload)
                except ValueError:
                    raise AssertionError(f"SSE data is not JSON: {payload[:300]!r}")
                self.chunks.append(ev)
                yield ev
            elif line.startswith(":"):
                continue
            else:
                assert line.startswith("data:"), f"SSE line is not a data: field: {line[:200]!r}"
                v = line[5:]
                data.append(v[1:] if v.startswith(" ") else v)

    def read_all(self):
        for _ in self.events():
            pass
        return self.chunks

    def close(self):
        try:
            self.resp.close()
        finally:
            self.conn.close()


def stream_chat(server, content=None, messages=None, headers=None, **fields):
    """Streaming chat; returns (text, finish_reason, chunks). Checks the chunk
    protocol: same id everywhere, object chat.completion.chunk, a role chunk
    first, exactly one finish_reason, and nothing but usage after it."""
    body = {"model": "qwenc-test", "messages": messages or [{"role": "user", "content": content}],
            "stream": True}
    body.update(fields)
    s = SSE(server, "/v1/chat/completions", body, headers=headers)
    try:
        chunks = s.read_all()
    finally:
        s.close()
    return chat_stream_text(chunks) + (chunks,)


def chat_stream_text(chunks):
    assert chunks, "no chunks before [DONE]"
    ids = {c.get("id") for c in chunks}
    assert len(ids) == 1 and None not in ids, f"chunk ids differ or missing: {ids}"
    text, finish, saw_role = [], None, False
    for i, c in enumerate(chunks):
        assert c.get("object") == "chat.completion.chunk", f"chunk {i} object {c.get('object')!r}"
        assert isinstance(c.get("created"), int) and isinstance(c.get("model"), str), f"chunk {i}: {c}"
        choices = c.get("choices")
        assert isinstance(choices, list), f"chunk {i} has no choices list: {c}"
        if not choices:
            assert c.get("usage"), f"chunk {i} with empty choices and no usage: {c}"
            continue
        assert finish is None, f"chunk {i} after the finish_reason chunk: {c}"
        ch = choices[0]
        delta = ch.get("delta", {})
        if delta.get("role") is not None:
            assert delta["role"] == "assistant", f"role {delta['role']!r}"
            saw_role = True
        elif not saw_role:
            raise AssertionError(f"first chunk carries no role: {c}")
        if delta.get("content"):
            text.append(delta["content"])
        if ch.get("finish_reason") is not None:
            finish = ch["finish_reason"]
    assert finish in ("stop", "length"), f"finish_reason {finish!r}"
    return "".join(text), finish


# ---------------------------------------------------------------------------
# Prometheus text.

SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)(\s+-?\d+)?$')


def metrics(server):
    """GET /metrics; check the exposition format; returns {name: value}
    (the value of the unlabelled sample, or the sum over label sets)."""
    r = requests.get(server.url + "/metrics", timeout=TIMEOUT)
    assert r.status_code == 200, f"/metrics: {r.status_code} {r.text[:300]}"
    assert r.headers.get("Content-Type", "").startswith("text/plain"), r.headers.get("Content-Type")
    out = {}
    for line in r.text.splitlines():
        if not line.strip():
            continue
        if line.startswith("#"):
            assert re.match(r"^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .*|^#", line), line
            if line.startswith("# TYPE"):
                assert line.split()[3] in ("counter", "gauge", "histogram", "summary", "untyped"), line
            continue
        m = SAMPLE_RE.match(line)
        assert m, f"not a Prometheus sample line: {line!r}"
        v = float(m.group(3))
        out[m.group(1)] = out.get(m.group(1), 0.0) + v if m.group(2) else v
    return out


def find_metric(ms, *groups, exclude=()):
    """The one metric whose name contains, for each group, one of its words
    (e.g. find_metric(ms, ["request"], ["total"])). Fails listing the names."""
    names = set()
    for n in ms:  # a histogram or summary is known by its base name
        m = re.match(r"^(.*)_(bucket|sum|count|created)$", n)
        names.add(m.group(1) if m else n)
    cands = [n for n in names
             if all(any(w in n for w in g) for g in groups) and not any(x in n for x in exclude)]
    assert cands, f"no metric matching {groups} among {sorted(ms)}"
    cands.sort(key=len)
    return cands[0]


def active_slots_metric(ms):
    return find_metric(ms, ["slot", "processing", "running", "active"],
                       ["active", "busy", "processing", "running", "used"], exclude=("total",))


# ---------------------------------------------------------------------------
# Raw HTTP on a socket (for what http.client will not send).


def raw_http(port, data, timeout=20):
    """Send bytes, read until the server closes or the timeout; returns
    (status or None, raw response bytes)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        buf = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                b = s.recv(65536)
            except socket.timeout:
                break
            if not b:
                break
            buf += b
            # stop once one complete response with Content-Length has arrived
            head, sep, body = buf.partition(b"\r\n\r\n")
            if sep:
                m = re.search(rb"(?i)content-length:\s*(\d+)", head)
                if m and len(body) >= int(m.group(1)):
                    break
    finally:
        s.close()
    m = re.match(rb"HTTP/1\.[01] (\d{3})", buf)
    return (int(m.group(1)) if m else None), buf
