"""Stdin server: `qwenc MODEL --server`. One request per line, `IDS|N`; one
line of generated ids back; a malformed line gets an error line and the
server goes on; EOF exits 0."""

import queue
import signal
import subprocess
import threading

import pytest

from conftest import QWENC, THREADS, Proc, _started, assert_clean_log

PROMPT = "151644 8948 198 2610 525 264 10950 17847 13 151645 198 151644 872 198 9707 151645 198 151644 77091 198"


class StdinServer(Proc):
    def __init__(self, model, *extra):
        super().__init__([QWENC, model, "--server", "--threads", THREADS, *extra],
                         stdin=subprocess.PIPE, capture_stdout=False)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in iter(self.proc.stdout.readline, b""):
            self.lines.put(raw)
        self.lines.put(None)

    def send(self, line):
        try:
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pytest.fail(f"stdin server gone (exit {self.proc.poll()}); stderr:\n{self.log_tail()}")

    def recv(self, timeout=60):
        try:
            raw = self.lines.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"no answer line within {timeout} s; stderr:\n{self.log_tail()}")
        assert raw is not None, f"stdout closed (exit {self.proc.poll()}); stderr:\n{self.log_tail()}"
        return raw.decode("utf-8").rstrip("\n")

    def ask(self, line, timeout=60):
        self.send(line)
        return self.recv(timeout)


def ids(line, n):
    parts = line.split()
    assert parts and all(p.isdigit() for p in parts), f"expected a line of ids, got {line!r}"
    v = [int(p) for p in parts]
    assert 0 < len(v) <= n and all(0 <= t < 151936 for t in v), line
    return v


def is_error(line):
    return "error" in line.lower() and not all(p.isdigit() for p in line.split())


@pytest.fixture(scope="module")
def stdin_server(model_dir):
    s = StdinServer(model_dir)
    _started.append(s)
    yield s
    alive = s.alive()
    s.proc.stdin.close()
    try:
        s.proc.wait(15)
    except subprocess.TimeoutExpired:
        pass
    s.kill()
    assert alive, f"stdin server died during the tests; stderr:\n{s.log_tail()}"
    assert_clean_log(s)


def test_ids_line_in_ids_line_out(stdin_server):
    a = ids(stdin_server.ask(f"{PROMPT}|5"), 5)
    b = ids(stdin_server.ask(f"{PROMPT}|5"), 5)
    assert a == b, "the e2e model's default sampling is greedy: same line, same ids"
    ids(stdin_server.ask("151644 8948 198|1"), 1)


@pytest.mark.parametrize("bad", ["abc|5", "|5", "999999|3", "151644 198|x", "151644 198|-2",
                                 "1 2 3 |  | 4", "-7|2", "\x01\x02|3"])
def test_malformed_line_gets_error_line_and_server_goes_on(stdin_server, bad):
    line = stdin_server.ask(bad)
    assert is_error(line), f"{bad!r}: expected an error line, got {line!r}"
    assert stdin_server.alive()
    ids(stdin_server.ask(f"{PROMPT}|2"), 2)


def test_eof_exits_0_after_answering(model_dir):
    s = StdinServer(model_dir)
    _started.append(s)
    s.proc.stdin.write(f"{PROMPT}|3\n151644 872 198|2\n".encode())
    s.proc.stdin.close()                      # EOF right after two requests
    a = ids(s.recv(), 3)
    b = ids(s.recv(), 2)
    try:
        rc = s.proc.wait(15)
    except subprocess.TimeoutExpired:
        s.kill()
        pytest.fail("stdin server did not exit within 15 s of EOF")
    assert rc == 0, f"exit {rc} at EOF; stderr:\n{s.log_tail()}"
    assert_clean_log(s)


def test_stdin_matches_cli(model_dir, stdin_server):
    got = ids(stdin_server.ask(f"{PROMPT}|6"), 6)
    r = subprocess.run([QWENC, model_dir, "--tokens", PROMPT, "-n", "6", "--greedy", "--threads", THREADS],
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    assert [int(x) for x in r.stdout.split()] == got


def test_sigterm_exits_0(model_dir):
    s = StdinServer(model_dir)
    _started.append(s)
    ids(s.ask(f"{PROMPT}|2"), 2)
    s.send(f"{PROMPT}|3000")          # a long request in flight
    rc, dt = s.stop(signal.SIGTERM, timeout=15)
    assert rc == 0, f"exit {rc} after SIGTERM; stderr:\n{s.log_tail()}"
    assert dt < 10, f"took {dt:.1f} s to exit"
    assert_clean_log(s)
