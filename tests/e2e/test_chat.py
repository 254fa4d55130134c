"""`qwenc chat` driven through a pseudo-terminal (the pty module), on the
e2e tiny random-weight model (conftest's model_dir, greedy by default).

Checks: an answer streams and is followed by a stats line with tok/s; the
second turn reuses the KV cache (only the new text is prefilled); /system
and /reset; Ctrl-C stops an answer without leaving and clears the line at
the prompt; /quit and Ctrl-D (EOF) exit 0; piped stdin works too.
"""

import os
import re
import select
import signal
import subprocess
import time

import pytest

from conftest import QWENC, ROOT, THREADS, run

STATS_RE = re.compile(rb"\[(\d+) tokens, ([\d.]+) tok/s \| prompt (\d+) new tokens \((\d+) cached\), ([\d.]+) tok/s\]")
PROMPT = b">>> "


class PtyChat:
    def __init__(self, *args, history=""):
        import pty
        self.buf = b""
        self.pos = 0  # everything before pos has been matched already
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # child
            try:
                os.chdir(ROOT)
                os.environ["QWENC_HISTORY"] = history
                os.execv(QWENC, [QWENC, "chat", *args])
            finally:
                os._exit(127)
        self.status = None

    def _read(self, timeout):
        r, _, _ = select.select([self.fd], [], [], timeout)
        if not r:
            return False
        try:
            b = os.read(self.fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            return None
        if not b:
            return None
        self.buf += b
        return True

    def expect(self, pattern, timeout=60):
        """Wait for a regex (bytes) after the last match; returns the match."""
        rx = re.compile(pattern) if isinstance(pattern, bytes) else pattern
        deadline = time.monotonic() + timeout
        while True:
            m = rx.search(self.buf, self.pos)
            if m:
                self.pos = m.end()
                return m
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if self._read(min(left, 0.2)) is None:
                m = rx.search(self.buf, self.pos)
                if m:
                    self.pos = m.end()
                    return m
                break
        raise AssertionError(f"did not see {rx.pattern!r} within {timeout} s; output after the last "
                             f"match:\n{self.buf[self.pos:].decode(errors='replace')[-3000:]}")

    def send(self, data):
        os.write(self.fd, data)

    def wait_edit_mode(self, timeout=20):
        """Wait until readline has the terminal (canonical mode off), so that
        typed bytes are read and echoed by it alone and not first echoed by
        the kernel (and flushed by a later Ctrl-C)."""
        import termios
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not termios.tcgetattr(self.fd)[3] & termios.ICANON:
                return
            self._read(0.02)
        raise AssertionError("the terminal never left canonical mode (readline not reading?)")

    def line(self, text):
        self.wait_edit_mode()
        self.send(text.encode() + b"\r")

    def wait(self, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid, st = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(st)
                return self.status
            self._read(0.1)
        raise AssertionError(f"chat did not exit within {timeout} s:\n{self.buf.decode(errors='replace')[-2000:]}")

    def close(self):
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except OSError:
                pass
        os.close(self.fd)


@pytest.fixture
def chat_of(model_dir):
    started = []

    def start(*extra, history=""):
        c = PtyChat(model_dir, "--threads", THREADS, *extra, history=history)
        started.append(c)
        return c

    yield start
    for c in started:
        c.close()


def test_turns_stats_cache_commands(chat_of, tmp_path):
    hist = tmp_path / "history"
    c = chat_of("-n", "12", history=str(hist))
    c.expect(rb"RANDOM WEIGHTS")
    c.expect(PROMPT)
    c.line("Hello there, who are you?")
    m = c.expect(STATS_RE)
    n_gen, tps, n_new1, cached1 = int(m.group(1)), float(m.group(2)), int(m.group(3)), int(m.group(4))
    assert 1 <= n_gen <= 12 and tps > 0, m.group(0)
    assert cached1 == 0 and n_new1 > 10, m.group(0)  # the system prompt + the message
    c.expect(PROMPT)

    # Second turn: the conversation so far is in the KV cache.
    c.line("And what is 2+2?")
    m = c.expect(STATS_RE)
    n_new2, cached2 = int(m.group(3)), int(m.group(4))
    assert cached2 >= n_new1, f"turn 2 re-prefilled the conversation: {m.group(0)}"
    assert n_new2 < cached2, m.group(0)
    c.expect(PROMPT)

    c.line("/system You answer in one word.")
    c.expect(rb"\[system prompt set; conversation reset\]")
    c.expect(PROMPT)
    c.line("Hi")
    m = c.expect(STATS_RE)
    assert int(m.group(1)) >= 1
    c.expect(PROMPT)

    c.line("/reset")
    c.expect(rb"\[conversation reset\]")
    c.expect(PROMPT)
    c.line("/nonsense")
    c.expect(rb"unknown command /nonsense")
    c.expect(PROMPT)
    c.line("/quit")
    assert c.wait() == 0
    # The lines typed are kept for the next session.
    saved = hist.read_text(errors="replace").replace("\\040", " ")  # libedit's vis(3) encoding
    assert "Hello there, who are you?" in saved and "/reset" in saved, saved

    # Next session: the up arrow brings back the last line.
    c2 = chat_of("-n", "2", history=str(hist))
    c2.expect(PROMPT)
    c2.wait_edit_mode()
    c2.send(b"\x1b[A")
    c2.expect(rb"/quit")
    c2.send(b"\x15")  # Ctrl-U: clear the line
    c2.line("/quit")
    assert c2.wait() == 0


def test_ctrl_c_stops_answer_and_eof_exits(chat_of):
    c = chat_of("-n", "4000", "--ctx", "4096")
    c.expect(PROMPT)
    c.line("Tell me a very long story.")
    c.expect(rb"story\.\r?\n")    # the echo of the line
    c.expect(rb"\S{3}", timeout=30)  # the answer has started streaming
    c.send(b"\x03")
    m = c.expect(STATS_RE, timeout=30)
    assert int(m.group(1)) < 4000, m.group(0)
    assert b"[stopped]" in c.buf, c.buf[-500:]
    c.expect(PROMPT)

    # Ctrl-C at the prompt drops the line and stays.
    c.wait_edit_mode()
    c.send(b"half a line")
    time.sleep(0.3)
    c.send(b"\x03")
    c.expect(PROMPT, timeout=10)
    # Still answering after the interruption (and stoppable again).
    c.line("Again")
    c.expect(rb"Again\r?\n")
    c.expect(rb"\S{3}", timeout=30)
    c.send(b"\x03")
    m = c.expect(STATS_RE, timeout=30)
    assert int(m.group(1)) < 4000 and int(m.group(4)) > 0, m.group(0)
    c.expect(PROMPT)
    c.wait_edit_mode()
    c.send(b"\x04")  # Ctrl-D on an empty line: EOF
    assert c.wait() == 0


def test_piped_stdin(model_dir):
    r = run([QWENC, "chat", model_dir, "-n", "5", "--threads", THREADS],
            input=b"first message\n/system Be brief.\nsecond\n/reset\nthird\n")
    err = r.stderr
    assert r.returncode == 0, err.decode(errors="replace")
    stats = STATS_RE.findall(err)
    assert len(stats) == 3, err.decode(errors="replace")
    assert all(1 <= int(s[0]) <= 5 for s in stats)
    assert b"[system prompt set" in err and b"[conversation reset]" in err
    assert r.stdout.strip(), "no answer text on stdout"


def test_bad_model_and_usage(tmp_path):
    r = run([QWENC, "chat", str(tmp_path / "nope")])
    assert r.returncode == 1 and b"nope" in r.stderr, r.stderr
    r = run([QWENC, "chat"])
    assert r.returncode == 2 and b"usage" in r.stderr, r.stderr
    r = run([QWENC, "chat", str(tmp_path), "--bogus"])
    assert r.returncode == 2 and b"--bogus" in r.stderr, r.stderr
