"""Unix socket server: `qwenc MODEL --server PATH`. Each connection sends one
JSON line {"tokens": [ids], "max_tokens": n, ...sampling} and gets one JSON
line back with the generated "tokens" and timings."""

import json
import os
import shutil
import signal
import socket
import tempfile
import threading
import time

import pytest

from conftest import QWENC, THREADS, Proc, _started, assert_clean_log

PROMPT = [151644, 8948, 198, 2610, 525, 264, 10950, 17847, 13, 151645, 198, 151644, 872, 198,
          9707, 151645, 198, 151644, 77091, 198]  # ChatML "system ... user Hello assistant"


class SocketServer(Proc):
    def __init__(self, model, path, *extra, timeout=60):
        super().__init__([QWENC, model, "--server", path, "--threads", THREADS, *extra])
        self.path = path
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                pytest.fail(f"socket server exited {self.proc.returncode} at start; stderr:\n{self.log_tail()}")
            try:
                c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                c.settimeout(2)
                c.connect(path)
                c.close()
                return
            except OSError:
                time.sleep(0.1)
        self.kill()
        pytest.fail(f"socket server never accepted on {path}; stderr:\n{self.log_tail()}")


def ask_raw(path, data, timeout=60):
    """Send bytes on a new connection; return the first line back (bytes)."""
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.settimeout(timeout)
    try:
        c.connect(path)
        try:
            c.sendall(data)
        except BrokenPipeError:
            pass  # answered (an error line) and closed before all was sent: read it
        buf = b""
        while b"\n" not in buf:
            b = c.recv(65536)
            if not b:
                break
            buf += b
    finally:
        c.close()
    assert buf.endswith(b"\n") or b"\n" in buf, f"no complete line back for {data[:80]!r}: {buf[:300]!r}"
    return buf.split(b"\n", 1)[0]


def ask(path, req, timeout=60):
    line = ask_raw(path, json.dumps(req).encode() + b"\n", timeout)
    try:
        return json.loads(line.decode("utf-8"))
    except ValueError:
        raise AssertionError(f"answer is not one JSON line: {line[:300]!r}")


def tokens_of(ans, n):
    assert "error" not in ans, f"error: {ans}"
    toks = ans.get("tokens")
    assert isinstance(toks, list) and 0 < len(toks) <= n, ans
    assert all(isinstance(t, int) and 0 <= t < 151936 for t in toks), ans
    return toks


@pytest.fixture(scope="module")
def sockdir():
    d = tempfile.mkdtemp(prefix="qwe2e", dir="/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def sock_server(model_dir, sockdir):
    s = SocketServer(model_dir, os.path.join(sockdir, "q.sock"), "--parallel", "4")
    _started.append(s)
    yield s
    alive = s.alive()
    s.stop()
    assert alive, f"socket server crashed during the tests; stderr:\n{s.log_tail()}"
    assert_clean_log(s)


def test_one_line_in_one_line_out(sock_server):
    ans = ask(sock_server.path, {"tokens": PROMPT, "max_tokens": 6, "temperature": 0})
    tokens_of(ans, 6)
    nums = [k for k, v in ans.items() if k != "tokens" and isinstance(v, (int, float))]
    assert nums, f"no timings in the answer: {ans}"


def test_default_sampling_and_greedy_deterministic(sock_server):
    a = tokens_of(ask(sock_server.path, {"tokens": PROMPT, "max_tokens": 8, "temperature": 0}), 8)
    b = tokens_of(ask(sock_server.path, {"tokens": PROMPT, "max_tokens": 8, "temperature": 0}), 8)
    assert a == b
    # the e2e model's generation_config.json says do_sample=false: the default is greedy too
    c = tokens_of(ask(sock_server.path, {"tokens": PROMPT, "max_tokens": 8}), 8)
    assert c == a
    # seeded sampling is reproducible
    s1 = tokens_of(ask(sock_server.path, {"tokens": PROMPT, "max_tokens": 8, "temperature": 1.0, "seed": 3}), 8)
    s2 = tokens_of(ask(sock_server.path, {"tokens": PROMPT, "max_tokens": 8, "temperature": 1.0, "seed": 3}), 8)
    assert s1 == s2


@pytest.mark.parametrize("data", [
    b"{bad json\n",
    b"\n",
    b"[1, 2, 3]\n",
    b'{"max_tokens": 3}\n',
    b'{"tokens": "151644 198", "max_tokens": 3}\n',
    b'{"tokens": [], "max_tokens": 3}\n',
    b'{"tokens": [999999], "max_tokens": 3}\n',
    b'{"tokens": [-5], "max_tokens": 3}\n',
    b'{"tokens": [1.5], "max_tokens": 3}\n',
    b'{"tokens": [151644], "max_tokens": -1}\n',
    b'{"tokens": [151644], "max_tokens": "x"}\n',
    b'{"tokens": [151644], "max_tokens": 3, "temperature": "hot"}\n',
    b'\xff\xfe{"tokens": [1]}\n',
], ids=lambda d: repr(d[:30]))
def test_bad_request_gets_error_line(sock_server, data):
    line = ask_raw(sock_server.path, data, timeout=30)
    try:
        ans = json.loads(line.decode("utf-8"))
    except ValueError:
        raise AssertionError(f"error answer is not JSON: {line[:200]!r}")
    assert isinstance(ans, dict) and ans.get("error"), f"{data!r}: expected an error line, got {ans}"
    # and the server goes on
    tokens_of(ask(sock_server.path, {"tokens": [151644, 872, 198], "max_tokens": 2}), 2)


def test_prompt_longer_than_context(model_dir, sockdir):
    s = SocketServer(model_dir, os.path.join(sockdir, "ctx.sock"), "--ctx", "64", "--parallel", "1")
    _started.append(s)
    try:
        ans = ask(s.path, {"tokens": [9707] * 100, "max_tokens": 2})
        assert ans.get("error"), f"100 tokens into a 64-token context: {ans}"
        tokens_of(ask(s.path, {"tokens": [9707] * 10, "max_tokens": 2}), 2)
    finally:
        assert s.alive(), s.log_tail()
        s.stop()


def test_client_that_sends_nothing(sock_server):
    for _ in range(3):
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(sock_server.path)
        c.close()
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(sock_server.path)
    c.sendall(b'{"tokens": [1, 2')  # half a line, then gone
    c.close()
    tokens_of(ask(sock_server.path, {"tokens": PROMPT, "max_tokens": 2}), 2)


def test_concurrent_connections(sock_server):
    prompts = [PROMPT[:k] for k in (3, 8, 14, 20)] + [[151644, 872, 198, 100 + i] for i in range(4)]
    alone = [tokens_of(ask(sock_server.path, {"tokens": p, "max_tokens": 12, "temperature": 0}), 12)
             for p in prompts]
    got = [None] * len(prompts)
    barrier = threading.Barrier(len(prompts))

    def go(i):
        try:
            barrier.wait(30)
            got[i] = ask(sock_server.path, {"tokens": prompts[i], "max_tokens": 12, "temperature": 0})
        except BaseException as e:  # noqa: BLE001
            got[i] = e

    ts = [threading.Thread(target=go, args=(i,), daemon=True) for i in range(len(prompts))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(90)
    assert not any(t.is_alive() for t in ts), "a socket client hung"
    for i in range(len(prompts)):
        assert not isinstance(got[i], BaseException), f"client {i}: {got[i]!r}"
        assert tokens_of(got[i], 12) == alone[i], f"client {i}: alone {alone[i]}, concurrently {got[i]}"


def test_stale_socket_replaced_and_removed_on_sigterm(model_dir, sockdir):
    path = os.path.join(sockdir, "stale.sock")
    st = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    st.bind(path)
    st.close()  # the file stays behind: a stale socket
    assert os.path.exists(path)
    s = SocketServer(model_dir, path, "--parallel", "1")
    _started.append(s)
    tokens_of(ask(path, {"tokens": PROMPT, "max_tokens": 3}), 3)
    rc, dt = s.stop(signal.SIGTERM, timeout=15)
    assert rc == 0, f"exit {rc} after SIGTERM; stderr:\n{s.log_tail()}"
    assert dt < 5
    assert not os.path.exists(path), "socket file left behind after SIGTERM"


def test_sigint_with_request_in_flight(model_dir, sockdir):
    path = os.path.join(sockdir, "int.sock")
    s = SocketServer(model_dir, path, "--parallel", "1")
    _started.append(s)
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.settimeout(20)
    c.connect(path)
    c.sendall(json.dumps({"tokens": PROMPT, "max_tokens": 3500, "temperature": 0}).encode() + b"\n")
    time.sleep(0.3)
    rc, dt = s.stop(signal.SIGINT, timeout=15)
    c.close()
    assert rc == 0 and dt < 10, f"SIGINT: exit {rc} after {dt:.1f} s; stderr:\n{s.log_tail()}"
    assert not os.path.exists(path)
    assert_clean_log(s)


def test_socket_path_that_is_a_regular_file_is_refused(model_dir, sockdir):
    """A path holding a regular file (not a stale socket) must not be deleted."""
    path = os.path.join(sockdir, "precious.txt")
    with open(path, "w") as f:
        f.write("keep me")
    p = Proc([QWENC, model_dir, "--server", path])
    _started.append(p)
    try:
        p.proc.wait(30)
    except Exception:  # noqa: BLE001
        pass
    alive = p.alive()
    p.kill()
    assert not alive, "server started on top of a regular file"
    assert p.proc.returncode not in (0, None) and p.proc.returncode > 0
    assert open(path).read() == "keep me"


def test_client_hanging_up_cancels_its_request(model_dir, sockdir):
    """--parallel 1: a long request whose client leaves must not hold the
    only slot: the next request is served at once."""
    path = os.path.join(sockdir, "hup.sock")
    s = SocketServer(model_dir, path, "--parallel", "1")
    _started.append(s)
    try:
        t_ref = time.monotonic()
        tokens_of(ask(path, {"tokens": PROMPT, "max_tokens": 200, "temperature": 0}), 200)
        per_token = (time.monotonic() - t_ref) / 200
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(path)
        c.sendall(json.dumps({"tokens": PROMPT, "max_tokens": 3500, "temperature": 0}).encode() + b"\n")
        time.sleep(0.3)
        c.close()
        t0 = time.monotonic()
        tokens_of(ask(path, {"tokens": PROMPT, "max_tokens": 2}), 2)
        dt = time.monotonic() - t0
        # the abandoned request alone would need about 3500 * per_token seconds
        assert dt < max(3.0, 3500 * per_token / 3), \
            f"next request waited {dt:.1f} s (abandoned one would take ~{3500 * per_token:.1f} s)"
        assert s.alive()
    finally:
        s.stop()


# ---- transport limits (issue 16) -------------------------------------------

MAX_LINE = 1 << 20


def _padded(n):
    """A valid request line of exactly n bytes before the newline."""
    core = json.dumps({"tokens": PROMPT[:3], "max_tokens": 1}).encode()
    return core[:-1] + b" " * (n - len(core)) + b"}"


def test_line_limit_is_exact(sock_server):
    ok = json.loads(ask_raw(sock_server.path, _padded(MAX_LINE) + b"\n"))
    assert "error" not in ok, ok
    for n in (MAX_LINE + 1, MAX_LINE + 39):      # 1,048,615: answered before the fix
        ans = json.loads(ask_raw(sock_server.path, _padded(n) + b"\n"))
        assert "longer than" in ans.get("error", ""), (n, ans)


def test_over_long_line_error_reaches_a_client_still_sending(sock_server):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.settimeout(20)
    c.connect(sock_server.path)
    sent, got = 0, b""
    chunk = b"x" * 65536
    try:
        while sent < 3 * MAX_LINE:               # keeps sending past the limit, no newline
            c.sendall(chunk)
            sent += len(chunk)
    except (BrokenPipeError, ConnectionResetError):
        pass
    try:
        while b"\n" not in got:
            b = c.recv(4096)
            if not b:
                break
            got += b
    except ConnectionResetError:
        pytest.fail(f"the connection was reset before the error line arrived (got {got[:200]!r})")
    finally:
        c.close()
    assert b"longer than" in got, got[:300]


@pytest.fixture(scope="module")
def limited_sock(model_dir, sockdir):
    s = SocketServer(model_dir, os.path.join(sockdir, "lim.sock"), "--max-conns", "4",
                     "--header-timeout", "1")
    _started.append(s)
    yield s
    alive = s.alive()
    s.stop()
    assert alive, f"socket server crashed; stderr:\n{s.log_tail()}"
    assert_clean_log(s)


def test_trickling_client_closed_at_its_deadline(limited_sock):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(limited_sock.path)
    c.settimeout(0.05)
    t0 = time.monotonic()
    got = b""
    while time.monotonic() - t0 < 8:             # one byte every 0.1 s, never a newline
        try:
            c.sendall(b" ")
        except OSError:
            break
        try:
            b = c.recv(4096)
            if not b:
                break
            got += b
        except socket.timeout:
            pass
        time.sleep(0.05)
    dt = time.monotonic() - t0
    c.close()
    assert dt < 4, f"a client trickling bytes was held {dt:.1f} s past a 1 s line deadline"
    assert b"no complete request line" in got, got


def test_connection_cap_refuses_the_excess_at_once(model_dir, sockdir):
    s = SocketServer(model_dir, os.path.join(sockdir, "cap.sock"), "--max-conns", "4", "--header-timeout", "30")
    _started.append(s)
    held = []
    try:
        for _ in range(4):
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.connect(s.path)
            held.append(c)
        # Once the server has taken the 4 (its accept thread: no fixed
        # sleep), a fifth is refused with a line, at once.
        extra, dt, deadline = b"", 0.0, time.monotonic() + 5
        while time.monotonic() < deadline:
            t0 = time.monotonic()
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.settimeout(5)
            c.connect(s.path)
            try:
                extra = c.recv(4096)             # nothing sent: only a refusal answers
            except socket.timeout:
                extra = b""
            dt = time.monotonic() - t0
            c.close()
            if extra:
                break
        assert b"too many connections" in extra, extra
        assert dt < 4.0, f"the refusal took {dt:.2f} s (a hang would be the 5 s timeout)"
        for c in held:
            c.close()
        deadline = time.monotonic() + 5
        while True:                               # the slots free up: served again
            ans = json.loads(ask_raw(s.path, json.dumps({"tokens": PROMPT, "max_tokens": 2}).encode() + b"\n"))
            if "error" not in ans or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        tokens_of(ans, 2)
    finally:
        for c in held:
            c.close()
        alive = s.alive()
        s.stop()
        assert alive, s.log_tail()


def test_strict_json_lines(sock_server):
    for bad in (b'{"tokens": [1], "max_tokens": 1} x', b'{"tokens": [1]}{"tokens": [2]}',
                b'{"tokens": [1], "max_tokens": 1, "max_tokens": 2}', b'{"tokens": [1], "x": "a\x01b"}'):
        ans = json.loads(ask_raw(sock_server.path, bad + b"\n"))
        assert "error" in ans and "JSON" in ans["error"], (bad, ans)
