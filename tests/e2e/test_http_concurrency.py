"""HTTP server under load: 8 simultaneous streams give what each gives
alone, multi-byte text streams intact, a client that disconnects frees its
slot, a full queue answers 503 with Retry-After, and SIGTERM/SIGINT exit 0
quickly even with a stream running."""

import json
import signal
import socket
import threading
import time

import pytest
import requests

from conftest import assert_clean_log, start_http, stop_checked
from helpers import (SSE, active_slots_metric, api_error, chat, chat_stream_text, chat_text,
                     find_metric, metrics, ok_json, post, stream_chat)

PROMPTS = [
    "Write a haiku about autumn.",
    "What is the capital of Peru?",
    "List five prime numbers.",
    "请用中文介绍一下长城。",
    "Explain recursion to a child 🧒🏽.",
    "日本の首都はどこですか？",
    "def fibonacci(n):",
    "Translate 'good morning' into French, German and Spanish.",
]
MAX_TOKENS = [24, 40, 16, 48, 32, 20, 44, 28]


@pytest.fixture(scope="module")
def server8(model_dir):
    s = start_http(model_dir, "--parallel", "8")
    yield s
    stop_checked(s)


def _run_threads(fns, timeout=150):
    results = [None] * len(fns)

    def wrap(i):
        try:
            results[i] = ("ok", fns[i]())
        except BaseException as e:  # noqa: BLE001 - reported below
            results[i] = ("exc", e)

    ts = [threading.Thread(target=wrap, args=(i,), daemon=True) for i in range(len(fns))]
    for t in ts:
        t.start()
    deadline = time.monotonic() + timeout
    for t in ts:
        t.join(max(0.1, deadline - time.monotonic()))
    hung = [i for i, t in enumerate(ts) if t.is_alive()]
    assert not hung, f"clients {hung} still running after {timeout} s"
    for i, (kind, v) in enumerate(results):
        if kind == "exc":
            raise AssertionError(f"client {i} failed: {v!r}") from v
    return [v for _, v in results]


def test_8_simultaneous_streams_match_alone(server8):
    _check_8_match_alone(server8)


def test_8_simultaneous_streams_match_alone_fast_q8_0(model_dir):
    """The same through the default fast precision's integer path (weights
    quantized to Q8_0 at load, activations to 8 bits): still batch invariant."""
    s = start_http(model_dir, "--parallel", "8", "--quant", "q8_0")
    try:
        assert "precision: fast" in s.stderr_text(), s.log_tail()
        _check_8_match_alone(s)
    finally:
        stop_checked(s)


def _check_8_match_alone(server8):
    alone = [stream_chat(server8, p, max_tokens=n, temperature=0)[:2] for p, n in zip(PROMPTS, MAX_TOKENS)]
    assert len({a[0] for a in alone}) > 1, "every prompt gave the same text: the prompt is ignored?"

    barrier = threading.Barrier(len(PROMPTS))

    def client(i, delay):
        def go():
            barrier.wait(30)
            time.sleep(delay)
            return stream_chat(server8, PROMPTS[i], max_tokens=MAX_TOKENS[i], temperature=0)[:2]
        return go

    # all at once, then staggered so that prompts are prefilled while others decode
    for delays in ([0.0] * 8, [0.03 * i for i in range(8)]):
        got = _run_threads([client(i, d) for i, d in enumerate(delays)])
        for i in range(len(PROMPTS)):
            assert got[i] == alone[i], (f"client {i} ({PROMPTS[i]!r}, delays {delays[i]}): alone gave "
                                        f"{alone[i]!r}, among 7 others got {got[i]!r}")
    server8.check_alive()


def test_8_simultaneous_nonstreaming_sampled_match_alone(server8):
    """Seeded sampling too: a request's own sampler, whatever runs beside it."""
    fields = dict(temperature=0.9, top_k=50, seed=99)
    alone = [chat_text(server8, p, max_tokens=16, **fields)[0] for p in PROMPTS]
    barrier = threading.Barrier(len(PROMPTS))

    def client(i):
        def go():
            barrier.wait(30)
            return chat_text(server8, PROMPTS[i], max_tokens=16, **fields)[0]
        return go

    got = _run_threads([client(i) for i in range(len(PROMPTS))])
    assert got == alone


def test_long_prompt_prefilled_beside_running_streams(server8):
    """A prompt longer than one engine step's batch is prefilled in chunks
    between the decode steps of running streams; neither side changes."""
    words = ["river", "mountain", "算法", "código", "🙂", "Zürich", "tensor", "λόγος", "quietly", "42"]
    long_prompt = " ".join(f"{i}:{words[i % len(words)]}{words[(i * 7) % len(words)]}" for i in range(400))
    body = {"prompt": long_prompt, "raw": True, "max_tokens": 16, "temperature": 0}
    alone = ok_json(post(server8, "/v1/completions", body))
    assert alone["prompt_tokens"] > 1000, alone["prompt_tokens"]
    short_alone = [stream_chat(server8, p, max_tokens=40, temperature=0)[:2] for p in PROMPTS[:3]]

    def short(i):
        def go():
            return stream_chat(server8, PROMPTS[i], max_tokens=40, temperature=0)[:2]
        return go

    def long():
        time.sleep(0.05)  # let the short ones start decoding first
        return ok_json(post(server8, "/v1/completions", body))

    got = _run_threads([short(0), short(1), short(2), long])
    assert got[3]["text"] == alone["text"], f"long prompt alone {alone['text']!r}, beside streams {got[3]['text']!r}"
    assert got[:3] == short_alone


def test_burst_of_40_requests_all_served(server8):
    """More requests than slots: the rest wait in the queue (default 64) and
    every one is answered."""
    def client(i):
        def go():
            r = chat(server8, f"Request number {i}", max_tokens=4, temperature=0)
            return r.status_code, r.text[:200]
        return go

    got = _run_threads([client(i) for i in range(40)], timeout=120)
    bad = [(i, g) for i, g in enumerate(got) if g[0] != 200]
    assert not bad, f"requests not served: {bad[:5]}"
    server8.check_alive()


MB_PROMPTS = [
    "请用中文写一首关于大海的诗。",
    "😀🎉👍🏽 Tell an emoji story 🚀🌍",
    "日本語と한국어で答えてください。",
    "Привет! Ελληνικά? العربية? हिन्दी? ไทย?",
]


def test_multibyte_streaming_intact(server8):
    """The concatenated stream equals the non-streamed text, every chunk is
    valid UTF-8 (no lone surrogates) and no U+FFFD appears that the whole
    text does not have (a character split across tokens is held back, not
    broken)."""
    saw_multibyte = False
    for p in MB_PROMPTS:
        for fields in (dict(temperature=0), dict(temperature=1.0, seed=5)):
            r = chat(server8, p, max_tokens=48, **fields)
            assert r.status_code == 200, r.text[:300]
            full = json.loads(r.content.decode("utf-8"))["choices"][0]["message"]["content"]
            full.encode("utf-8")  # no lone surrogates
            s = SSE(server8, "/v1/chat/completions",
                    {"messages": [{"role": "user", "content": p}], "max_tokens": 48, "stream": True, **fields})
            try:
                chunks = s.read_all()
            finally:
                s.close()
            text, _ = chat_stream_text(chunks)
            for c in chunks:
                for ch in c.get("choices", []):
                    piece = ch.get("delta", {}).get("content") or ""
                    try:
                        piece.encode("utf-8")
                    except UnicodeEncodeError:
                        raise AssertionError(f"chunk with a lone surrogate: {piece!r}")
                    if "\ufffd" not in full:
                        assert "\ufffd" not in piece, f"{p!r} {fields}: U+FFFD in chunk {piece!r}, not in {full!r}"
            assert text == full, f"{p!r} {fields}: stream {text!r} != non-stream {full!r}"
            if any(ord(ch) >= 0x800 for ch in full):
                saw_multibyte = True
    assert saw_multibyte, "no output had a 3- or 4-byte character: the test did not exercise multi-byte text"


# ---------------------------------------------------------------------------
# One slot: disconnect and queue


def _wait_metric(server, name, want, timeout):
    deadline = time.monotonic() + timeout
    v = None
    while time.monotonic() < deadline:
        v = metrics(server)[name]
        if v == want:
            return v
        time.sleep(0.1)
    return v


def test_disconnect_frees_slot(model_dir):
    """--parallel 1: a long request whose client goes away (mid-stream, or
    while waiting for a non-streamed answer) stops generating at once: the
    slot is free again, the generated-token counter stops far short of
    max_tokens, and a new request is served promptly."""
    s = start_http(model_dir, "--parallel", "1")
    try:
        ms = metrics(s)
        slots = active_slots_metric(ms)
        gen = find_metric(ms, ["gen", "completion", "predicted", "output"], ["token"],
                          exclude=("per_second", "tps", "tok_s", "rate", "second"))
        body = {"messages": [{"role": "user", "content": "Write a very long essay."}],
                "max_tokens": 3500, "temperature": 0}

        # 1. mid-stream
        g0 = metrics(s)[gen]
        sse = SSE(s, "/v1/chat/completions", dict(body, stream=True))
        n = 0
        for _ in sse.events():
            n += 1
            if n >= 5:
                break
        assert metrics(s)[slots] == 1
        sse.close()                                   # the client goes away mid-stream
        t0 = time.monotonic()
        v = _wait_metric(s, slots, 0, 3.0)
        assert v == 0, f"{slots} still {v} 3 s after the client disconnected"
        g1 = metrics(s)[gen]
        time.sleep(0.5)
        g2 = metrics(s)[gen]
        assert g2 == g1, f"{gen} still growing after the disconnect ({g1} -> {g2}): the slot is still generating"
        assert g2 - g0 < 3000, f"the disconnected stream generated {g2 - g0} of its 3500 tokens"
        text, _, _ = chat_text(s, "hi", max_tokens=4, temperature=0)
        dt = time.monotonic() - t0
        assert dt < 6, f"a new request took {dt:.1f} s after the disconnect"

        # 2. a non-streamed request whose client hangs up while it runs
        g0 = metrics(s)[gen]
        raw = json.dumps(dict(body, max_tokens=3500)).encode()
        c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        c.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                  b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (s.port, len(raw)) + raw)
        deadline = time.monotonic() + 10
        while metrics(s)[slots] != 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        c.close()
        v = _wait_metric(s, slots, 0, 3.0)
        assert v == 0, f"{slots} still {v} 3 s after a non-streaming client hung up"
        g1 = metrics(s)[gen]
        assert g1 - g0 < 3000, f"the abandoned request generated {g1 - g0} of its 3500 tokens"
        ok_json(chat(s, "hi", max_tokens=2))
    finally:
        stop_checked(s)


class _Streamer(threading.Thread):
    """A long streaming request in a thread; .first is set at its first
    chunk (or when it ends); .quit makes it stop reading and close."""

    def __init__(self, server, prompt):
        super().__init__(daemon=True)
        self.first = threading.Event()
        self.quit = threading.Event()
        self.status = None
        self.error = None
        self.sse = SSE(server, "/v1/chat/completions",
                       {"messages": [{"role": "user", "content": prompt}], "max_tokens": 4000,
                        "temperature": 0, "stream": True}, timeout=60, send=False)

    def run(self):
        try:
            self.sse.send()
            self.status = self.sse.status
            if self.status != 200:
                return
            for _ in self.sse.events():
                self.first.set()
                if self.quit.is_set():
                    break
        except BaseException as e:  # noqa: BLE001
            if not self.quit.is_set():  # a hang-up we asked for is no error
                self.error = e
        finally:
            self.first.set()
            self.sse.close()

    def stop(self):
        self.quit.set()
        self.sse.hangup()
        self.join(30)


def test_queue_full_503_with_retry_after(model_dir):
    s = start_http(model_dir, "--parallel", "1", "--queue", "1")
    streams = []
    try:
        a = _Streamer(s, "Tell a long story.")
        streams.append(a)
        a.start()
        assert a.first.wait(30) and a.status == 200, f"first stream: {a.status} {a.error!r}"
        b = _Streamer(s, "Tell another long story.")
        streams.append(b)
        b.start()
        qname = find_metric(metrics(s), ["queue", "deferred", "waiting"], exclude=("total",))
        v = _wait_metric(s, qname, 1, 5.0)
        assert v == 1, f"{qname} = {v}, expected 1 request waiting"

        def req(i):
            def go():
                body = {"messages": [{"role": "user", "content": f"req {i}"}], "max_tokens": 4}
                if i == 2:
                    body["stream"] = True
                return requests.post(s.url + "/v1/chat/completions", json=body, timeout=30)
            return go

        t0 = time.monotonic()
        rs = _run_threads([req(i) for i in range(4)], timeout=60)
        assert time.monotonic() - t0 < 10, "503s must come at once, not after waiting"
        for r in rs:
            api_error(r, 503)
            ra = r.headers.get("Retry-After")
            assert ra is not None and ra.strip().isdigit(), f"Retry-After {ra!r}"

        # the queued client goes away: it leaves the queue, making room for another
        b.stop()
        v = _wait_metric(s, qname, 0, 3.0)
        assert v == 0, f"{qname} still {v} 3 s after the queued client hung up"
        c = _Streamer(s, "A third long story.")
        streams.append(c)
        c.start()
        assert _wait_metric(s, qname, 1, 5.0) == 1, f"the new request is not queued (status {c.status})"
        a.stop()
        assert c.first.wait(30), "the queued stream never started after the first one ended"
        c.stop()
        assert c.status == 200 and c.error is None, f"queued stream: {c.status} {c.error!r}"
        assert _wait_metric(s, qname, 0, 5.0) == 0
        assert _wait_metric(s, active_slots_metric(metrics(s)), 0, 5.0) == 0
        ok_json(chat(s, "after", max_tokens=2))
        s.check_alive()
    finally:
        for t in streams:
            t.quit.set()
            t.sse.hangup()
        stop_checked(s)


# ---------------------------------------------------------------------------
# Shutdown


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_exits_0_with_stream_running(model_dir, sig):
    s = start_http(model_dir, "--parallel", "2")
    sse = SSE(s, "/v1/chat/completions",
              {"messages": [{"role": "user", "content": "Go on forever."}], "max_tokens": 3500,
               "temperature": 0, "stream": True}, timeout=20)
    try:
        it = sse.events()
        next(it)
        rc, dt = s.stop(sig, timeout=15)
        assert rc == 0, f"exit status {rc} after {sig.name}; stderr:\n{s.log_tail()}"
        assert dt < 10, f"{sig.name}: took {dt:.1f} s to exit"
        assert_clean_log(s)
        # the stream ends (cleanly or not) instead of hanging
        try:
            for _ in it:
                pass
        except Exception:  # noqa: BLE001 - a cut stream is fine here
            pass
    finally:
        sse.close()
        s.kill()


def test_sigterm_idle_exits_0(model_dir):
    """Idle, apart from a client holding half a request and a keep-alive
    connection: SIGTERM still exits 0 at once."""
    s = start_http(model_dir)
    ms = metrics(s)
    n_slots = find_metric(ms, ["slot"], exclude=("active", "busy", "processing", "used", "total"))
    assert ms[n_slots] == 4, f"--parallel defaults to 4 slots; {n_slots} = {ms[n_slots]}"
    stalled = socket.create_connection(("127.0.0.1", s.port), timeout=10)
    stalled.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{")
    idle = requests.Session()
    assert idle.get(s.url + "/health", timeout=10).status_code == 200
    try:
        rc, dt = s.stop(signal.SIGTERM, timeout=15)
    finally:
        stalled.close()
        idle.close()
    assert rc == 0 and dt < 5, f"idle SIGTERM: exit {rc} after {dt:.1f} s"
    assert_clean_log(s)
