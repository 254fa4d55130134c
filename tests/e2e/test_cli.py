"""The command line: the seed's single-shot form, --tokens, --tokenize and
--detokenize, --help, exit codes; and the same ids from the CLI, the socket
server and the HTTP server."""

import os
import re
import shutil
import tempfile

import pytest

from conftest import QWENC, ROOT, THREADS, _started, isa_env, run, start_http, stop_checked
from helpers import ok_json, post
from test_socket import SocketServer, ask, tokens_of

IDS = "151644 8948 198 2610 525 264 10950 17847 13 151645 198 151644 872 198 9707 151645 198 151644 77091 198"


def out_ids(r, n):
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr.decode(errors='replace')[-1000:]}"
    lines = r.stdout.decode().split("\n")
    assert len(lines) == 2 and lines[1] == "", f"expected one line of ids on stdout, got {r.stdout[:300]!r}"
    v = lines[0].split()
    assert all(x.isdigit() for x in v), f"not ids: {lines[0]!r}"
    v = [int(x) for x in v]
    assert 0 < len(v) <= n and all(0 <= t < 151936 for t in v), v
    return v


def tokenize(model, text):
    r = run([QWENC, model, "--tokenize", text])
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    s = r.stdout.decode().strip()
    return [int(x) for x in s.split()] if s else []


def detokenize(model, ids):
    """stdout of --detokenize (the text, perhaps with a newline added)."""
    r = run([QWENC, model, "--detokenize", " ".join(map(str, ids))])
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr.decode(errors='replace')[-1000:]}"
    return r.stdout.decode("utf-8")


def same_text(printed, text):
    return printed in (text, text + "\n")


def test_seed_single_shot_form(model_dir):
    r = run([QWENC, model_dir, IDS, "5"])
    ids = out_ids(r, 5)
    assert re.search(r"tok/s", r.stderr.decode(errors="replace")), \
        f"no prefill/decode tok/s on stderr: {r.stderr[-500:]!r}"
    # the e2e model's default sampling is greedy (generation_config do_sample=false)
    g = out_ids(run([QWENC, model_dir, "--tokens", IDS, "-n", "5", "--greedy", "--threads", THREADS]), 5)
    assert ids == g


def test_warmup_changes_nothing_but_timing(model_dir):
    """--warmup runs the prompt once untimed; the timed run rewrites the cache
    from position 0, so the tokens are those of a plain run."""
    args = ["--tokens", IDS, "-n", "8", "--greedy", "--threads", THREADS]
    a = out_ids(run([QWENC, model_dir] + args), 8)
    b = out_ids(run([QWENC, model_dir] + args + ["--warmup"]), 8)
    assert a == b


def test_profile_env_prints_steps_and_changes_nothing(model_dir):
    """QWENC_PROFILE=1 times the forward pass's steps (decode and prefill
    apart) and prints them at exit; the tokens are those of a plain run."""
    args = [QWENC, model_dir, "--tokens", IDS, "-n", "6", "--greedy", "--threads", THREADS]
    env = dict(os.environ)
    env.pop("QWENC_PROFILE", None)
    plain = run(args, env=env)
    assert "profile:" not in plain.stderr.decode(errors="replace")
    env["QWENC_PROFILE"] = "1"
    r = run(args, env=env)
    assert out_ids(r, 6) == out_ids(plain, 6)
    err = r.stderr.decode(errors="replace")
    # the 20-id prompt is one prefill pass; each new token one decode pass
    assert re.search(r"profile: prefill: 1 passes, 20 tokens", err), err[-2000:]
    assert re.search(r"profile: decode \(batches <= 8\): 5 passes, 5 tokens", err), err[-2000:]
    for step in ("matmul qkv", "attention", "matmul gate/up\\+silu", "matmul down", "matmul lm_head"):
        assert len(re.findall(r"profile: " + step + r" .*%", err)) >= 2, (step, err[-2000:])


def test_cli_matches_socket_server(model_dir):
    d = tempfile.mkdtemp(prefix="qwe2e", dir="/tmp")
    try:
        s = SocketServer(model_dir, os.path.join(d, "cli.sock"), "--parallel", "2")
    except BaseException:
        shutil.rmtree(d, ignore_errors=True)
        raise
    _started.append(s)
    try:
        for ids_s, n in ((IDS, 12), ("9707 11 1879 0", 7), ("151644 872 198 105043 100165 30 151645 198", 9)):
            cli = out_ids(run([QWENC, model_dir, "--tokens", ids_s, "-n", str(n), "--greedy",
                               "--threads", THREADS]), n)
            sock = tokens_of(ask(s.path, {"tokens": [int(x) for x in ids_s.split()], "max_tokens": n,
                                          "temperature": 0}), n)
            assert cli == sock, f"prompt {ids_s!r}: CLI {cli} vs socket {sock}"
    finally:
        alive = s.alive()
        s.stop()
        shutil.rmtree(d, ignore_errors=True)
        assert alive, s.log_tail()


@pytest.fixture(scope="module")
def http(model_dir):
    s = start_http(model_dir, "--parallel", "2")
    yield s
    stop_checked(s)


def test_cli_matches_http_raw_completion(model_dir, http):
    prompt = "The quick brown fox"
    ids = tokenize(model_dir, prompt)
    gen = out_ids(run([QWENC, model_dir, "--tokens", " ".join(map(str, ids)), "-n", "10", "--greedy",
                       "--threads", THREADS]), 10)
    j = ok_json(post(http, "/v1/completions", {"prompt": prompt, "raw": True, "max_tokens": 10,
                                               "temperature": 0}))
    assert j["prompt_tokens"] == len(ids)
    assert j["gen_tokens"] == len(gen)
    printed = detokenize(model_dir, [t for t in gen if t not in (151643, 151645)])
    assert same_text(printed, j["text"]), f"CLI {printed!r} vs HTTP {j['text']!r}"


def test_cli_matches_http_chat(model_dir, http):
    """The chat template: HTTP chat == the CLI on the ChatML ids."""
    rendered = ("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
                "<|im_end|>\n<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n")
    ids = tokenize(model_dir, rendered)
    gen = out_ids(run([QWENC, model_dir, "--tokens", " ".join(map(str, ids)), "-n", "10", "--greedy",
                       "--threads", THREADS]), 10)
    j = ok_json(post(http, "/v1/chat/completions",
                     {"messages": [{"role": "user", "content": "Hello there"}], "max_tokens": 10,
                      "temperature": 0}))
    assert j["usage"]["prompt_tokens"] == len(ids)
    printed = detokenize(model_dir, [t for t in gen if t not in (151643, 151645)])
    text = j["choices"][0]["message"]["content"]
    assert same_text(printed, text), f"CLI {printed!r} vs HTTP {text!r}"


@pytest.mark.parametrize("text", ["Hello, world!", "中文和日本語", "👍🏽 emoji 👨‍👩‍👧", "tabs\tand  spaces",
                                  "<|im_start|>user\nhi<|im_end|>"])
def test_tokenize_detokenize_round_trip(model_dir, text):
    ids = tokenize(model_dir, text)
    assert ids and all(0 <= i < 151665 for i in ids)
    printed = detokenize(model_dir, ids)
    assert same_text(printed, text), f"{text!r} -> {ids} -> {printed!r}"


def test_tokenize_stdin_and_known_ids(model_dir):
    r = run([QWENC, model_dir, "--tokenize", "-"], input="Hello world".encode())
    assert r.returncode == 0
    assert [int(x) for x in r.stdout.split()] == tokenize(model_dir, "Hello world")
    assert tokenize(model_dir, "<|im_start|>") == [151644]
    assert tokenize(model_dir, "<|im_end|>") == [151645]


def test_help_lists_every_option():
    r = run([QWENC, "--help"])
    assert r.returncode == 0
    h = r.stdout.decode()
    for opt in ["--tokens", "-n", "--logits-out", "--prompt", "--system", "--raw", "--tokenize",
                "--detokenize", "--greedy", "--temp", "--top-k", "--top-p", "--min-p", "--repeat-penalty",
                "--presence-penalty", "--frequency-penalty", "--seed", "--threads", "--ctx", "--http",
                "--host", "--parallel", "--queue", "--api-key", "--cors", "--max-body", "--server", "--quant",
                "--warmup", "--isa-levels", "--kv-type"]:
        assert re.search(r"(?<![\w-])" + re.escape(opt) + r"(?![\w-])", h), f"--help does not mention {opt}"


def test_isa_levels_are_the_ones_qwenc_isa_accepts(model_dir):
    """--isa-levels lists exactly the levels QWENC_ISA accepts here (the suite
    runs its per-level cases over that list, so it must not over- or
    under-state): ref first, every listed level runs, every other known name
    is refused with a message naming it."""
    r = run([QWENC, "--isa-levels"])
    assert r.returncode == 0 and b"cpu:" in r.stderr, r
    levels = r.stdout.decode().split()
    assert r.stdout.decode().count("\n") == 1 and levels[0] == "ref", r.stdout
    for lv in ("ref", "avx2", "avx512", "neon"):
        r = run([QWENC, model_dir, "--tokens", "1 2 3", "-n", "1", "--threads", "1"], env=isa_env(lv))
        if lv in levels:
            assert r.returncode == 0 and f"kernels: {lv} ".encode() in r.stderr, (lv, r.stderr[-500:])
        else:
            assert r.returncode != 0 and lv.encode() in r.stderr and b"QWENC_ISA" in r.stderr, (lv, r.stderr[-500:])


def test_bad_model_path(tmp_path):
    bad = str(tmp_path / "no-such-model-dir")
    r = run([QWENC, bad, IDS, "3"])
    assert r.returncode > 0
    assert "no-such-model-dir" in r.stderr.decode(errors="replace"), r.stderr[-500:]
    r = run([QWENC, bad, "--http", "0"], timeout=30)
    assert r.returncode > 0 and "no-such-model-dir" in r.stderr.decode(errors="replace")


def test_model_dir_without_weights(tmp_path, model_dir):
    d = tmp_path / "broken"
    d.mkdir()
    shutil.copy(os.path.join(model_dir, "config.json"), d / "config.json")
    r = run([QWENC, str(d), IDS, "3"])
    assert r.returncode > 0
    assert "safetensors" in r.stderr.decode(errors="replace"), r.stderr[-500:]


@pytest.mark.parametrize("ids", ["151644 abc 198", "12x", "-4 5", "1 2 3.5"])
def test_bad_ids_exit_2(model_dir, ids):
    r = run([QWENC, model_dir, ids, "3"])
    assert r.returncode == 2, f"ids {ids!r}: exit {r.returncode}, stderr {r.stderr[-300:]!r}"
    assert r.stderr.strip(), "no message"


def test_out_of_range_ids_rejected(model_dir):
    r = run([QWENC, model_dir, "151644 999999", "3"])
    assert r.returncode > 0, f"exit {r.returncode}"
    assert "999999" in r.stderr.decode(errors="replace"), r.stderr[-300:]


def test_bad_usage_exit_2(model_dir):
    for args in (["--no-such-option"], [IDS, "notanumber"], ["--tokens", IDS, "-n"], ["--http", "99999"]):
        r = run([QWENC, model_dir, *args])
        assert r.returncode == 2, f"{args}: exit {r.returncode}"


# ---------------------------------------------------------------------------
# Text mode (issue 3): --prompt streams the chat-templated answer


def test_prompt_matches_http_chat(model_dir, http):
    r = run([QWENC, model_dir, "--prompt", "Hello there", "-n", "10", "--greedy", "--threads", THREADS])
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-500:]
    cli = r.stdout.decode("utf-8")
    j = ok_json(post(http, "/v1/chat/completions", {"messages": [{"role": "user", "content": "Hello there"}],
                                                   "max_tokens": 10, "temperature": 0}))
    text = j["choices"][0]["message"]["content"]
    assert same_text(cli, text), f"--prompt printed {cli!r}, HTTP chat gave {text!r}"


def test_prompt_system_matches_http_chat(model_dir, http):
    r = run([QWENC, model_dir, "--prompt", "Hi", "--system", "Answer in French.", "-n", "8", "--greedy",
             "--threads", THREADS])
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-500:]
    j = ok_json(post(http, "/v1/chat/completions",
                     {"messages": [{"role": "system", "content": "Answer in French."},
                                   {"role": "user", "content": "Hi"}], "max_tokens": 8, "temperature": 0}))
    assert same_text(r.stdout.decode("utf-8"), j["choices"][0]["message"]["content"])


def test_prompt_raw_matches_http_raw_completion(model_dir, http):
    r = run([QWENC, model_dir, "--prompt", "Once upon a time", "--raw", "-n", "8", "--greedy",
             "--threads", THREADS])
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-500:]
    j = ok_json(post(http, "/v1/completions", {"prompt": "Once upon a time", "raw": True, "max_tokens": 8,
                                               "temperature": 0}))
    assert same_text(r.stdout.decode("utf-8"), j["text"]), (r.stdout, j["text"])


# ---------------------------------------------------------------------------
# Token mode options (issue 2)


def test_logits_out(model_dir, tmp_path):
    ids = IDS.split()
    f = tmp_path / "logits.bin"
    r = run([QWENC, model_dir, "--tokens", IDS, "--logits-out", str(f), "--threads", THREADS])
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-500:]
    data = f.read_bytes()
    vocab = 151936
    assert len(data) == len(ids) * vocab * 4, f"{len(data)} bytes for {len(ids)} x {vocab} float32"
    import array
    last = array.array("f")
    last.frombytes(data[-vocab * 4:])
    if array.array("f", [1.0]).tobytes() != b"\x00\x00\x80\x3f":
        last.byteswap()
    assert all(x == x and abs(x) < 1e30 for x in last), "NaN or inf in the logits"
    argmax = max(range(vocab), key=last.__getitem__)
    first = out_ids(run([QWENC, model_dir, "--tokens", IDS, "-n", "1", "--greedy", "--threads", THREADS]), 1)
    assert first == [argmax], f"greedy first token {first} != argmax of the last logits row {argmax}"


def test_sampling_flags_seeded(model_dir):
    base = [QWENC, model_dir, "--tokens", IDS, "-n", "12", "--temp", "0.9", "--top-k", "40", "--top-p", "0.95",
            "--min-p", "0.01", "--repeat-penalty", "1.1", "--threads", THREADS]
    a = out_ids(run(base + ["--seed", "7"]), 12)
    b = out_ids(run(base + ["--seed", "7"]), 12)
    assert a == b, "same --seed, different ids"
    others = {tuple(out_ids(run(base + ["--seed", s]), 12)) for s in ("8", "9")}
    assert others != {tuple(a)}, "--seed has no effect"


def test_ctx_limit_is_a_clear_error(model_dir):
    r = run([QWENC, model_dir, "--tokens", IDS, "-n", "20", "--ctx", "32"])
    assert r.returncode > 0, f"20 prompt ids + 20 tokens in a 32-token context: exit {r.returncode}"
    err = r.stderr.decode(errors="replace").lower()
    assert "ctx" in err or "context" in err, err[-300:]


# ---------------------------------------------------------------------------
# Commands and flags llama.cpp / Ollama users type (issue 14)


def test_version():
    r = run([QWENC, "--version"])
    assert r.returncode == 0 and re.fullmatch(rb"qwenc \d+\.\d+\.\d+\n", r.stdout), (r.stdout, r.stderr)


@pytest.mark.parametrize("args", [["MODEL", "--help"], ["MODEL", IDS, "3", "-h"], ["-m", "MODEL", "--prompt", "x", "--help"],
                                  ["serve", "--help"], ["serve", "MODEL", "--port", "1", "--help"],
                                  ["run", "MODEL", "--help"], ["run", "--help"], ["chat", "--help"],
                                  ["pull", "--help"], ["list", "--help"], ["rm", "--help"], ["help", "serve"]])
def test_help_after_any_form(model_dir, args):
    """--help anywhere prints help on stdout and exits 0, without loading or
    running anything."""
    r = run([QWENC] + [model_dir if a == "MODEL" else a for a in args])
    assert r.returncode == 0, (args, r.returncode, r.stderr[-500:])
    assert r.stdout.startswith(b"qwenc - ") or r.stdout.startswith(b"usage: qwenc"), (args, r.stdout[:300])
    assert b"loaded" not in r.stderr and b"listening" not in r.stderr, r.stderr[-500:]


def test_help_describes_gguf_truthfully():
    h = run([QWENC, "--help"]).stdout.decode()
    flat = " ".join(h.split())
    assert "F32/F16/BF16 tensors" not in flat
    for t in ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"):
        assert re.search(r"(?<![\w])" + t + r"(?![\w])", flat), f"--help does not name the GGUF type {t}"
    for cmd in ("serve", "run", "pull", "list", "rm", "--version", "-m", "--port"):
        assert re.search(r"(?<![\w-])" + re.escape(cmd) + r"(?![\w-])", flat), f"--help does not mention {cmd}"


def test_model_flag_anywhere(model_dir):
    """-m/--model MODEL may stand anywhere instead of the leading MODEL."""
    want = out_ids(run([QWENC, model_dir, IDS, "5", "--threads", THREADS]), 5)
    for args in (["-m", model_dir, IDS, "5"], [IDS, "5", "--model", model_dir],
                 ["--tokens", IDS, "-m", model_dir, "-n", "5"]):
        assert out_ids(run([QWENC] + args + ["--threads", THREADS]), 5) == want, args
    r = run([QWENC, "-m", model_dir, "--model", model_dir, IDS, "5"])
    assert r.returncode == 2 and b"two models" in r.stderr, r.stderr


def test_run_one_shot_equals_prompt(model_dir):
    """qwenc run MODEL PROMPT answers once, as --prompt does; the words of an
    unquoted prompt are joined as Ollama does."""
    want = run([QWENC, model_dir, "--prompt", "hello there", "-n", "8", "--threads", THREADS])
    assert want.returncode == 0 and want.stdout.strip(), want.stderr[-500:]
    for args in (["run", model_dir, "hello there"], ["run", model_dir, "hello", "there"],
                 ["run", "-m", model_dir, "hello there"], ["run", "hello there", "--model", model_dir]):
        r = run([QWENC] + args + ["-n", "8", "--threads", THREADS])
        assert r.returncode == 0, (args, r.stderr[-500:])
        assert r.stdout == want.stdout, (args, r.stdout, want.stdout)


def test_run_without_prompt_chats(model_dir):
    """qwenc run MODEL is qwenc chat MODEL: the same answers to the same lines."""
    lines = "Hello\nHow are you?\n/quit\n".encode()
    chat = run([QWENC, "chat", model_dir, "-n", "6", "--threads", THREADS], input=lines)
    r = run([QWENC, "run", model_dir, "-n", "6", "--threads", THREADS], input=lines)
    assert chat.returncode == 0 and r.returncode == 0, (chat.stderr[-500:], r.stderr[-500:])
    assert r.stdout == chat.stdout and r.stdout.count(b"\n") >= 2, (r.stdout, chat.stdout)


@pytest.mark.parametrize("form", [["serve", "MODEL", "--port", "0"], ["serve", "-m", "MODEL", "--port", "0"],
                                  ["-m", "MODEL", "--port", "0"]])
def test_serve_and_port(model_dir, form):
    from conftest import Proc, LISTEN_RE
    import requests
    p = Proc([QWENC] + [model_dir if a == "MODEL" else a for a in form] + ["--threads", THREADS])
    _started.append(p)
    try:
        m = p.wait_stderr(LISTEN_RE, 60)
        assert m, p.log_tail()
        url = f"http://127.0.0.1:{m.group(2)}"
        ok = False
        for _ in range(100):
            try:
                if requests.get(url + "/health", timeout=5).status_code == 200:
                    ok = True
                    break
            except requests.RequestException:
                pass
            import time
            time.sleep(0.1)
        assert ok, p.log_tail()
        j = requests.post(url + "/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}],
                                                              "max_tokens": 3}, timeout=60).json()
        assert j["choices"][0]["message"]["content"] is not None, j
    finally:
        rc, _ = p.stop()
    assert rc == 0, p.log_tail()


def test_serve_default_port_is_8080(model_dir):
    """Without --port, serve listens where llama-server does: with 8080
    taken (by this test, or anything else here), it fails naming 8080."""
    import socket
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", 8080))
        s.listen()
    except OSError:
        pass  # taken already: as good
    try:
        r = run([QWENC, "serve", model_dir, "--threads", THREADS], timeout=30)
    finally:
        s.close()
    assert r.returncode == 1 and b"port 8080" in r.stderr, r.stderr[-500:]


@pytest.mark.parametrize("args,names", [
    (["MODEL", "--prompt", "hi", "--http", "8015"], ["--prompt", "--http"]),
    (["MODEL", "--tokenize", "x", "--server"], ["--tokenize", "--server"]),
    (["MODEL", "--detokenize", "1", "--prompt", "x"], ["--detokenize", "--prompt"]),
    (["MODEL", IDS, "3", "--http", "0"], [IDS, "--http"]),
    (["MODEL", "--tokens", IDS, "--port", "0"], ["--tokens", "--port"]),
    (["serve", "MODEL", "--prompt", "x"], ["serve", "--prompt"]),
    (["run", "MODEL", "--http", "0"], ["run", "--http"]),
    (["chat", "MODEL", "--server", "/tmp/x.sock"], ["chat", "--server"]),
])
def test_two_modes_are_an_error_naming_both(model_dir, args, names):
    r = run([QWENC] + [model_dir if a == "MODEL" else a for a in args])
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 2, (args, r.returncode, err)
    for n in names:
        assert n in err, (args, n, err)
    assert "listening" not in err and not r.stdout, err


@pytest.mark.parametrize("args,opt", [
    (["--tokenize", "hi", "--temp", "0.5"], "--temp"),
    (["--tokenize", "hi", "--ctx", "64"], "--ctx"),
    (["--detokenize", "9707", "--threads", "1"], "--threads"),
    ([IDS, "2", "--system", "be brief"], "--system"),
    ([IDS, "2", "--host", "0.0.0.0"], "--host"),
    (["--prompt", "hi", "-n", "2", "--logits-out", "/tmp/never-written"], "--logits-out"),
    (["--prompt", "hi", "-n", "2", "--parallel", "3"], "--parallel"),
    (["--prompt", "hi", "-n", "2", "--warmup"], "--warmup"),
])
def test_ignored_options_are_warned_about(model_dir, args, opt):
    r = run([QWENC, model_dir] + args)
    assert r.returncode == 0, (args, r.stderr[-500:])
    warn = [l for l in r.stderr.decode(errors="replace").splitlines() if "warning" in l and opt in l]
    assert len(warn) == 1 and "ignored" in warn[0], (args, r.stderr[-1000:])


@pytest.mark.parametrize("mode", [["--prompt", "hi", "-n", "3"], ["--tokens", IDS, "-n", "3"]])
def test_ctx_capped_is_warned_about(model_dir, mode):
    """--ctx above the model's positions (4096 for the e2e model) is capped
    with a warning naming both numbers, not silently."""
    r = run([QWENC, model_dir, *mode, "--ctx", "100000", "--threads", THREADS])
    assert r.returncode == 0, r.stderr[-500:]
    warn = [l for l in r.stderr.decode(errors="replace").splitlines() if "--ctx" in l]
    assert len(warn) == 1 and "100000" in warn[0] and "4096" in warn[0] and "warning" in warn[0], r.stderr[-1000:]
    r = run([QWENC, model_dir, *mode, "--ctx", "2048", "--threads", THREADS])
    assert b"--ctx" not in r.stderr, r.stderr[-1000:]


def test_log_quiet_prints_only_errors(model_dir):
    env = dict(os.environ, QWENC_LOG="quiet")
    for args in (["--prompt", "hi", "-n", "3"], [IDS, "3"], ["--tokenize", "hi", "--temp", "1"]):
        r = run([QWENC, model_dir, *args, "--threads", THREADS], env=env)
        assert r.returncode == 0 and r.stdout.strip(), (args, r.stderr)
        assert r.stderr == b"", (args, r.stderr[-1000:])
    # errors still get through
    r = run([QWENC, model_dir, "--bogus"], env=env)
    assert r.returncode == 2 and b"--bogus" in r.stderr
    env["QWENC_LOG"] = "loud"
    r = run([QWENC, model_dir, "--tokenize", "hi"], env=env)
    assert r.returncode == 0 and b"QWENC_LOG" in r.stderr and b"loud" in r.stderr, r.stderr


@pytest.mark.parametrize("args,opt,fine", [
    ([IDS, "2", "--seed", "4"], "--seed", [IDS, "2", "--seed", "4", "--temp", "0.7"]),
    (["--prompt", "hi", "-n", "2", "--greedy", "--top-p", "0.9"], "--top-p",
     ["--prompt", "hi", "-n", "2", "--temp", "0.5", "--top-p", "0.9"]),
    (["--tokens", IDS, "-n", "2", "--temp", "0", "--top-k", "5"], "--top-k",
     ["--tokens", IDS, "-n", "2", "--temp", "1", "--top-k", "5"]),
    (["--prompt", "hi", "-n", "2", "--raw", "--system", "be brief"], "--system",
     ["--prompt", "hi", "-n", "2", "--system", "be brief"]),
    (["--tokens", IDS, "--logits-out", "LOGITS", "-n", "3"], "-n", ["--tokens", IDS, "--logits-out", "LOGITS"]),
    ([IDS, "2", "--spec", "off", "--spec-k", "4"], "--spec-k", [IDS, "2", "--spec", "ngram", "--spec-k", "4"]),
])
def test_moot_options_are_warned_about(model_dir, tmp_path, args, opt, fine):
    """Options another option makes moot (sampling settings with greedy
    sampling, --system with --raw, -n with --logits-out, --spec-k with --spec
    off) get one warning line, not silence."""
    args = [str(tmp_path / "l.bin") if a == "LOGITS" else a for a in args]
    r = run([QWENC, model_dir] + args + ["--threads", THREADS])
    assert r.returncode == 0, (args, r.stderr[-500:])
    warn = [l for l in r.stderr.decode(errors="replace").splitlines() if "warning" in l and opt + " " in l]
    assert len(warn) == 1 and "no effect" in warn[0], (args, r.stderr[-1000:])
    # and where it has an effect: no warning
    fine = [str(tmp_path / "l.bin") if a == "LOGITS" else a for a in fine]
    r = run([QWENC, model_dir] + fine + ["--threads", THREADS])
    assert r.returncode == 0 and b"no effect" not in r.stderr, (fine, r.stderr[-1000:])


def test_quant_on_quantized_gguf_is_warned_about(model_dir, tmp_path):
    g = str(tmp_path / "q8.gguf")
    import subprocess
    import sys
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "to_gguf.py"), model_dir, g,
                        "--type", "q8_0"], capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr[-1000:]
    r = run([QWENC, g, IDS, "2", "--quant", "q8_0", "--threads", THREADS])
    assert r.returncode == 0, r.stderr[-500:]
    warn = [l for l in r.stderr.decode(errors="replace").splitlines() if "warning" in l and "--quant" in l]
    assert len(warn) == 1 and "kept" in warn[0], r.stderr[-1000:]
