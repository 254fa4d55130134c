"""Shared fixtures for the end-to-end suite: the tiny test model and servers.

The model is built into $BUILD/e2e-model (BUILD defaults to "build"; rebuilt
when ./qwenc, the config or the tokenizer changed): the tokenizer fixture is
unpacked with tests/fixtures/tokenizer/prepare.sh, then `./qwenc synth`
writes random BF16 weights (std --scale 0.3, see SCALE) for
tests/e2e/tiny_config.json and copies the tokenizer. Its
generation_config.json is then rewritten with do_sample=false so that every
mode's *default* sampling is greedy and the modes can be compared token for
token (requests that want sampling ask for it).

If `qwenc synth` is not built yet, the model is made with torch instead, but
only when torch imports; otherwise every test that needs the model is skipped
with the reason. CI has no torch: there synth is the only path.

Every server is started on a free loopback port (--http 0; the port is read
from the "qwenc: listening on http://HOST:PORT" line on stderr) and stopped at
teardown. Every wait is bounded, and each test also has an alarm
(QWENC_E2E_TEST_TIMEOUT, default 120 s), so a hang fails instead of blocking.
"""

import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
import requests

sys.path.insert(0, os.path.dirname(__file__))

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
QWENC = os.environ.get("QWENC", os.path.join(ROOT, "qwenc"))
TINY_CONFIG = os.path.join(os.path.dirname(__file__), "tiny_config.json")
THREADS = os.environ.get("QWENC_E2E_THREADS", "2")
# Weights' std: at synth's default 0.02 the tied embeddings dominate and greedy
# output just repeats the last token; at 0.3 it depends on the whole context,
# so greedy comparisons (alone vs batched, CLI vs servers) mean something.
SCALE = "0.3"
TEST_TIMEOUT = int(os.environ.get("QWENC_E2E_TEST_TIMEOUT", "120"))

LISTEN_RE = re.compile(r"listening on http://(\[[^\]]+\]|[^\s:/]+):(\d+)")


def run(args, timeout=60, input=None, env=None):
    """Run a command with a bounded time; returns CompletedProcess (bytes)."""
    try:
        return subprocess.run(args, input=input, capture_output=True, timeout=timeout,
                              cwd=ROOT, env=env)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{' '.join(map(str, args))[:300]} did not finish within {timeout} s "
                    f"(stderr: {(e.stderr or b'')[-2000:]!r})")


# ---------------------------------------------------------------------------
# Kernel levels. A test that takes an `isa` argument runs once per kernel
# level this CPU runs (`./qwenc --isa-levels`: ref, avx2, avx512 on an AVX-512
# machine), with QWENC_ISA set (isa_env), so every level's tables are checked
# end to end, not only the one the CPU picks by default. The levels whose
# cases passed are written to $BUILD/test-logs/e2e-isa-levels for
# tests/run.sh's summary line.


def isa_levels():
    """The levels ./qwenc runs here; [] when it is not built or fails."""
    try:
        r = subprocess.run([QWENC, "--isa-levels"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return r.stdout.decode().split() if r.returncode == 0 else []


def isa_env(isa):
    """os.environ with QWENC_ISA=isa (None: the CPU's default level)."""
    env = dict(os.environ)
    env.pop("QWENC_ISA", None)
    if isa:
        env["QWENC_ISA"] = isa
    return env


_ISA_COVERED = set()


def pytest_generate_tests(metafunc):
    if "isa" in metafunc.fixturenames:
        # not built: one case without a level, which then fails on the missing binary
        metafunc.parametrize("isa", isa_levels() or [None])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    callspec = getattr(item, "callspec", None)
    if rep.when == "call" and rep.passed and callspec and callspec.params.get("isa"):
        _ISA_COVERED.add(callspec.params["isa"])


def pytest_sessionfinish(session, exitstatus):
    if not _ISA_COVERED:
        return
    order = isa_levels()
    covered = sorted(_ISA_COVERED, key=lambda x: order.index(x) if x in order else len(order))
    os.makedirs(os.path.join(BUILD, "test-logs"), exist_ok=True)
    with open(os.path.join(BUILD, "test-logs", "e2e-isa-levels"), "w") as f:
        f.write(" ".join(covered) + "\n")


# ---------------------------------------------------------------------------
# Per-test alarm: a hang becomes a failure.


class TestTimeout(Exception):
    pass


@pytest.fixture(autouse=True)
def _alarm():
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def fire(signum, frame):
        raise TestTimeout(f"test took longer than {TEST_TIMEOUT} s (QWENC_E2E_TEST_TIMEOUT)")

    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(TEST_TIMEOUT)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# ---------------------------------------------------------------------------
# The tiny model.


def _sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def _tokenizer_dir():
    prep = os.path.join(ROOT, "tests", "fixtures", "tokenizer", "prepare.sh")
    out = os.path.join(BUILD, "fixtures", "tokenizer")
    if not os.path.exists(prep):
        pytest.fail(f"{prep} is missing: the tokenizer fixture is needed for the e2e model")
    r = run(["sh", prep, out], timeout=120)
    if r.returncode != 0:
        pytest.fail(f"{prep} {out} failed (exit {r.returncode}): {r.stderr.decode(errors='replace')}")
    tok = os.path.join(out, "qwen2.5")
    if not os.path.isfile(os.path.join(tok, "tokenizer.json")):
        pytest.fail(f"{prep} did not write {tok}/tokenizer.json")
    return tok


def _greedy_generation_config(model_dir):
    with open(os.path.join(model_dir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 151643, "eos_token_id": [151645, 151643],
                   "do_sample": False}, f, indent=2)


def _torch_model(out, tok):
    """Fallback while `qwenc synth` is not built: the same tiny model via torch."""
    import torch
    from safetensors.torch import save_file

    cfg = json.load(open(TINY_CONFIG))
    g = torch.Generator().manual_seed(0)
    H, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = H // nh

    def rnd(*shape):
        return (torch.randn(*shape, generator=g) * float(SCALE)).to(torch.bfloat16)

    t = {"model.embed_tokens.weight": rnd(V, H), "model.norm.weight": torch.ones(H, dtype=torch.bfloat16)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = torch.ones(H, dtype=torch.bfloat16)
        t[p + "post_attention_layernorm.weight"] = torch.ones(H, dtype=torch.bfloat16)
        t[p + "self_attn.q_proj.weight"] = rnd(nh * hd, H)
        t[p + "self_attn.q_proj.bias"] = rnd(nh * hd)
        t[p + "self_attn.k_proj.weight"] = rnd(nkv * hd, H)
        t[p + "self_attn.k_proj.bias"] = rnd(nkv * hd)
        t[p + "self_attn.v_proj.weight"] = rnd(nkv * hd, H)
        t[p + "self_attn.v_proj.bias"] = rnd(nkv * hd)
        t[p + "self_attn.o_proj.weight"] = rnd(H, nh * hd)
        t[p + "mlp.gate_proj.weight"] = rnd(I, H)
        t[p + "mlp.up_proj.weight"] = rnd(I, H)
        t[p + "mlp.down_proj.weight"] = rnd(H, I)
    os.makedirs(out, exist_ok=True)
    save_file(t, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    shutil.copy(TINY_CONFIG, os.path.join(out, "config.json"))
    for name in os.listdir(tok):
        shutil.copy(os.path.join(tok, name), os.path.join(out, name))


@pytest.fixture(scope="session")
def model_dir():
    if not os.access(QWENC, os.X_OK):
        pytest.fail(f"{QWENC} is not built (run make)")
    tok = _tokenizer_dir()
    final = os.path.join(BUILD, "e2e-model")
    st = os.stat(QWENC)
    key = (f"{_sha(TINY_CONFIG)} {_sha(os.path.join(tok, 'tokenizer.json'))} {SCALE} "
           f"{st.st_size} {st.st_mtime_ns}")
    stamp = os.path.join(final, ".e2e-stamp")
    if os.path.exists(stamp) and open(stamp).read() == key + " synth":
        return final

    tmp = f"{final}.tmp{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    r = run([QWENC, "synth", tmp, "--config", TINY_CONFIG, "--tokenizer", tok, "--scale", SCALE], timeout=120)
    how = "synth"
    if r.returncode != 0:
        synth_msg = r.stderr.decode(errors="replace").strip()
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            import torch  # noqa: F401
        except ImportError:
            pytest.skip(f"`qwenc synth` failed ({synth_msg[-300:]}) and torch is not installed "
                        "for the fallback: no test model")
        _torch_model(tmp, tok)
        how = "torch"
    for need in ("config.json", "model.safetensors", "tokenizer.json"):
        if not os.path.isfile(os.path.join(tmp, need)):
            pytest.fail(f"the e2e model ({how}) has no {need}: {os.listdir(tmp)}")
    _greedy_generation_config(tmp)
    with open(os.path.join(tmp, ".e2e-stamp"), "w") as f:
        f.write(f"{key} {how}")
    old = f"{final}.old{os.getpid()}"
    if os.path.exists(final):
        os.rename(final, old)
    os.rename(tmp, final)
    shutil.rmtree(old, ignore_errors=True)
    return final


# ---------------------------------------------------------------------------
# Servers.


class Proc:
    """A qwenc process whose stderr (and stdout, unless capture_stdout=False:
    then the test reads proc.stdout itself) is drained by threads into
    buffers, so it can never block on a full pipe."""

    def __init__(self, args, stdin=subprocess.DEVNULL, capture_stdout=True):
        self.args = [str(a) for a in args]
        self.err = bytearray()
        self.out = bytearray()
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.proc = subprocess.Popen(self.args, cwd=ROOT, stdin=stdin,
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.threads = [threading.Thread(target=self._drain, args=(self.proc.stderr, self.err), daemon=True)]
        if capture_stdout:
            self.threads.append(threading.Thread(target=self._drain, args=(self.proc.stdout, self.out),
                                                 daemon=True))
        for t in self.threads:
            t.start()

    def _drain(self, f, buf):
        while True:
            b = f.read1(65536) if hasattr(f, "read1") else f.read(1)
            if not b:
                break
            with self.cond:
                buf.extend(b)
                self.cond.notify_all()

    def stderr_text(self):
        with self.lock:
            return self.err.decode(errors="replace")

    def log_tail(self, n=3000):
        return self.stderr_text()[-n:]

    def alive(self):
        return self.proc.poll() is None

    def wait_stderr(self, pattern, timeout):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                m = re.search(pattern, self.err.decode(errors="replace"))
                if m:
                    return m
                if self.proc.poll() is not None:
                    self.cond.wait(0.2)  # let the drain thread finish
                    m = re.search(pattern, self.err.decode(errors="replace"))
                    return m
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(min(left, 0.2))

    def send_signal(self, sig):
        if self.alive():
            self.proc.send_signal(sig)

    def stop(self, sig=signal.SIGTERM, timeout=10):
        """Signal and wait; returns (returncode, seconds). Kills after timeout."""
        t0 = time.monotonic()
        self.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            rc = None
        dt = time.monotonic() - t0
        for t in self.threads:
            t.join(2)
        return rc, dt

    def kill(self):
        if self.alive():
            self.proc.kill()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass


class HttpServer(Proc):
    # any_model: the suite's clients name models freely ("gpt-4o-mini", "m");
    # test_http_names.py starts servers without it to check model_not_found.
    def __init__(self, model, *extra, startup_timeout=60, any_model=True):
        args = [QWENC, model, "--http", "0", "--threads", THREADS, *(["--any-model"] if any_model else []), *extra]
        super().__init__(args)
        m = self.wait_stderr(LISTEN_RE, startup_timeout)
        if not m:
            rc = self.proc.poll()
            self.kill()
            pytest.fail(f"`{' '.join(self.args)}` did not print 'qwenc: listening on http://HOST:PORT' "
                        f"within {startup_timeout} s (exit {rc}); stderr:\n{self.log_tail()}")
        self.host = m.group(1).strip("[]")
        self.port = int(m.group(2))
        self.addr = "127.0.0.1" if self.host in ("0.0.0.0", "::", "localhost") else self.host
        self.url = f"http://{self.addr}:{self.port}"
        deadline = time.monotonic() + startup_timeout
        last = None
        while time.monotonic() < deadline:
            if not self.alive():
                break
            try:
                r = requests.get(self.url + "/health", timeout=5)
                last = f"{r.status_code} {r.text[:200]}"
                if r.status_code == 200:
                    return
            except requests.RequestException as e:
                last = repr(e)
            time.sleep(0.1)
        rc = self.proc.poll()
        self.kill()
        pytest.fail(f"server `{' '.join(self.args)}` never answered GET /health 200 "
                    f"(last: {last}; exit {rc}); stderr:\n{self.log_tail()}")

    def check_alive(self, what=""):
        """The server still answers /health 200 (after a bad request, say)."""
        assert self.alive(), f"server died {what}: exit {self.proc.poll()}; stderr:\n{self.log_tail()}"
        try:
            r = requests.get(self.url + "/health", timeout=10)
        except requests.RequestException as e:
            pytest.fail(f"server does not answer /health {what}: {e!r}; stderr:\n{self.log_tail()}")
        assert r.status_code == 200, f"/health {what}: expected 200, got {r.status_code} {r.text[:200]}"


_started = []


def start_http(model, *extra, **kw):
    s = HttpServer(model, *extra, **kw)
    _started.append(s)
    return s


SANITIZER_RE = re.compile(r"ERROR: (Address|Leak|Thread)Sanitizer|runtime error: |WARNING: ThreadSanitizer")


def assert_clean_log(p):
    """No sanitizer report in the process's stderr (for ASan/UBSan builds,
    QWENC=build-asan/qwenc)."""
    text = p.stderr_text()
    m = SANITIZER_RE.search(text)
    assert not m, f"sanitizer report from `{' '.join(p.args)}`:\n{text[max(0, m.start() - 200):m.start() + 3000]}"


def stop_checked(s):
    """Stop at teardown; the server must still have been alive (no crash)
    and must not have printed a sanitizer report."""
    was_alive = s.alive()
    rc, dt = s.stop()
    assert was_alive, f"server `{' '.join(s.args)}` crashed during the tests: exit {s.proc.returncode}; " \
                      f"stderr:\n{s.log_tail()}"
    assert_clean_log(s)


@pytest.fixture(scope="session", autouse=True)
def _kill_leftovers():
    yield
    for s in _started:
        s.kill()


@pytest.fixture(scope="module")
def server(model_dir):
    """The module's default HTTP server: --parallel 4."""
    s = start_http(model_dir, "--parallel", "4")
    yield s
    stop_checked(s)
