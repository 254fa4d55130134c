"""`qwenc pull` against tools/fake_hub.py, a local stand-in for the hub.

The fixture repo is the e2e tiny model (conftest's model_dir: random weights
from `qwenc synth` + the Qwen2.5 tokenizer fixture) served the way
huggingface.co serves it: resolve URLs, a relative redirect for git files, a
302 to a "CDN" for LFS files, ETag / X-Linked-Etag / X-Repo-Commit, Range.
Every test gets its own HF_HOME and its own server.
"""

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys

import pytest

from conftest import QWENC, ROOT, run

FAKE_HUB = os.path.join(ROOT, "tools", "fake_hub.py")
REPO = "qwenc-test/tiny-qwen2"
REPO_FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
              "tokenizer_config.json")


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def git_sha1_file(path):
    data = open(path, "rb").read()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class FakeHub:
    def __init__(self, folder, log, *flags):
        self.log = log
        self.proc = subprocess.Popen([sys.executable, FAKE_HUB, folder, "--repo-id", REPO, "--log", log,
                                      *flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.url = self.proc.stdout.readline().decode().strip()
        line = self.proc.stdout.readline().decode().split()
        if not self.url.startswith("http://127.0.0.1:") or len(line) != 2:
            self.proc.kill()
            pytest.fail(f"fake_hub.py did not start: {self.url!r} {self.proc.stderr.read()[-2000:]!r}")
        self.commit = line[1]

    def requests(self):
        if not os.path.exists(self.log):
            return []
        return [json.loads(l) for l in open(self.log)]

    def stop(self):
        self.proc.kill()
        self.proc.wait(10)
        self.proc.stdout.close()
        self.proc.stderr.close()


@pytest.fixture(scope="module")
def repo_folder(model_dir, tmp_path_factory):
    d = tmp_path_factory.mktemp("hubrepo")
    for name in REPO_FILES:
        shutil.copy(os.path.join(model_dir, name), d / name)
    return str(d)


@pytest.fixture
def hub_env(tmp_path):
    """Start servers with hub(*flags); returns (start, env-for(url))."""
    started = []

    def start(folder, *flags):
        h = FakeHub(folder, str(tmp_path / f"hub{len(started)}.log"), *flags)
        started.append(h)
        return h

    yield start
    for h in started:
        h.stop()


def env_for(tmp_path, url):
    env = dict(os.environ)
    env["HF_HOME"] = str(tmp_path / "hf")
    env["HF_ENDPOINT"] = url
    env.pop("HF_TOKEN", None)
    env.pop("HF_HUB_OFFLINE", None)
    env.pop("HF_HUB_CACHE", None)
    env.pop("HUGGINGFACE_HUB_CACHE", None)
    return env


def pull(env, *args, timeout=120):
    return run([QWENC, "pull", REPO, *args], timeout=timeout, env=env)


def repo_cache(tmp_path):
    return tmp_path / "hf" / "hub" / "models--qwenc-test--tiny-qwen2"


def all_paths(root):
    out = []
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            out.append(os.path.join(d, n))
    return out


def check_snapshot(tmp_path, hub, folder):
    """The standard layout, every file verified against the original."""
    rc = repo_cache(tmp_path)
    assert (rc / "refs" / "main").read_text().strip() == hub.commit
    snap = rc / "snapshots" / hub.commit
    assert snap.is_dir(), all_paths(rc)
    for name in REPO_FILES:
        link = snap / name
        assert link.is_symlink(), f"{link} is not a symlink"
        target = os.readlink(link)
        src = os.path.join(folder, name)
        etag = sha256_file(src) if name.endswith(".safetensors") or os.path.getsize(src) >= 10 << 20 \
            else git_sha1_file(src)
        assert target == f"../../blobs/{etag}", f"{name} -> {target}"
        assert sha256_file(link) == sha256_file(src), f"{name}: content differs"
    for name in ("vocab.json", "merges.txt", "model.safetensors.index.json"):
        assert not (snap / name).exists(), f"{name} is not in the repo but appeared"
    left = [p for p in all_paths(rc) if p.endswith(".incomplete") or p.endswith(".tmp")]
    assert not left, f"leftovers: {left}"
    return snap


def test_pull_layout_and_reuse(repo_folder, hub_env, tmp_path):
    hub = hub_env(repo_folder)
    env = env_for(tmp_path, hub.url)
    r = pull(env)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 0, err
    snap = check_snapshot(tmp_path, hub, repo_folder)
    assert r.stdout.decode().strip() == str(snap), r.stdout
    gets = [q for q in hub.requests() if q["method"] == "GET"]
    assert any(q["path"].startswith("/cdn/") for q in gets), "LFS file not fetched through the redirect"
    # Not a TTY: plain progress lines, one per file at least.
    assert "model.safetensors:" in err and "done" in err, err

    # Second pull: nothing downloaded again, only metadata requests.
    n_before = len(hub.requests())
    r2 = pull(env)
    err2 = r2.stderr.decode(errors="replace")
    assert r2.returncode == 0, err2
    new = hub.requests()[n_before:]
    assert new and all(q["method"] == "HEAD" for q in new), f"second pull downloaded again: {new}"
    assert "0 files downloaded" in err2 and "cached" in err2, err2
    check_snapshot(tmp_path, hub, repo_folder)


def test_resume_within_one_run(repo_folder, hub_env, tmp_path):
    hub = hub_env(repo_folder, "--cut-once", "model.safetensors")
    env = env_for(tmp_path, hub.url)
    r = pull(env)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 0, err
    check_snapshot(tmp_path, hub, repo_folder)
    size = os.path.getsize(os.path.join(repo_folder, "model.safetensors"))
    ranges = [q["range"] for q in hub.requests() if q["method"] == "GET" and q["range"]]
    assert ranges, "no Range request after the cut"
    start = int(ranges[-1].split("=")[1].split("-")[0])
    assert 0 < start < size and start >= size // 2 - (1 << 20), (start, size)
    assert "resuming" in err, err


def test_resume_across_runs(repo_folder, hub_env, tmp_path):
    hub = hub_env(repo_folder, "--cut-once", "model.safetensors")
    env = env_for(tmp_path, hub.url)
    r = pull(env, "--retries", "0")
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 1, f"a cut download must fail without retries: {err}"
    assert "model.safetensors" in err and "resume" in err, err
    sha = sha256_file(os.path.join(repo_folder, "model.safetensors"))
    part = repo_cache(tmp_path) / "blobs" / f"{sha}.incomplete"
    assert part.is_file(), all_paths(repo_cache(tmp_path))
    have = part.stat().st_size
    size = os.path.getsize(os.path.join(repo_folder, "model.safetensors"))
    assert 0 < have < size
    assert not (repo_cache(tmp_path) / "refs" / "main").exists(), "refs/main written for an incomplete pull"

    n_before = len(hub.requests())
    r2 = pull(env, "--retries", "0")
    err2 = r2.stderr.decode(errors="replace")
    assert r2.returncode == 0, err2
    new = [q for q in hub.requests()[n_before:] if q["method"] == "GET"]
    safet = [q for q in new if "model.safetensors" in q["path"] or q["path"].startswith("/cdn/" + sha)]
    assert safet and all(q["range"] == f"bytes={have}-" for q in safet), safet
    assert f"resuming at byte {have}" in err2, err2
    check_snapshot(tmp_path, hub, repo_folder)


@pytest.mark.parametrize("name", ["model.safetensors", "config.json"])
def test_corruption_detected(repo_folder, hub_env, tmp_path, name):
    hub = hub_env(repo_folder, "--corrupt", name)
    env = env_for(tmp_path, hub.url)
    r = pull(env)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 1, err
    assert "corrupt" in err and name in err, err
    src = os.path.join(repo_folder, name)
    etag = sha256_file(src) if name.endswith(".safetensors") else git_sha1_file(src)
    blobs = repo_cache(tmp_path) / "blobs"
    assert not (blobs / etag).exists(), "a corrupted file was stored under its ETag"
    assert not (blobs / f"{etag}.incomplete").exists(), "the corrupted part was kept"
    snaps = repo_cache(tmp_path) / "snapshots"
    assert not any(p.endswith("/" + name) for p in all_paths(snaps)), "corrupted file linked"


@pytest.mark.parametrize("repo", ["../evil", "a/b/c", "/etc", "org/..", "org/na me", "org/-x",
                                  "..", "org//name", "org/name\n", "org/x--y"])
def test_bad_repo_ids_rejected(tmp_path, repo):
    env = env_for(tmp_path, "http://127.0.0.1:9")
    r = run([QWENC, "pull", repo], env=env)
    assert r.returncode == 2, (repo, r.stderr)
    assert b"repo id" in r.stderr, r.stderr
    assert not (tmp_path / "hf").exists() or not all_paths(tmp_path / "hf"), "something was written"


@pytest.mark.parametrize("rev", ["../../../tmp", "/abs", "a/../b", "main\r\nX: y", ""])
def test_bad_revisions_rejected(tmp_path, rev):
    env = env_for(tmp_path, "http://127.0.0.1:9")
    r = run([QWENC, "pull", REPO, "--revision", rev], env=env)
    assert r.returncode == 2, (rev, r.stderr)
    assert b"revision" in r.stderr, r.stderr


def test_server_path_escapes_rejected(repo_folder, hub_env, tmp_path):
    # An ETag naming a path, and an index naming a shard outside the repo.
    outside = tmp_path / "evil"
    hub = hub_env(repo_folder, "--bad-etag", "config.json")
    env = env_for(tmp_path, hub.url)
    r = pull(env)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 1 and "ETag" in err, err
    assert not outside.exists()

    hub2 = hub_env(repo_folder, "--index-escape")
    env2 = env_for(tmp_path / "second", hub2.url)
    r2 = pull(env2)
    err2 = r2.stderr.decode(errors="replace")
    assert r2.returncode == 1 and "weight_map" in err2 and ".." in err2, err2
    evil = [p for p in all_paths(tmp_path) if "evil.safetensors" in p]
    assert not evil, evil
    assert not any("evil.safetensors" in q["path"] for q in hub2.requests())


def test_token_sent_and_required(repo_folder, hub_env, tmp_path):
    hub = hub_env(repo_folder, "--token", "s3cret")
    env = env_for(tmp_path, hub.url)
    r = pull(env)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 1 and "401" in err and "HF_TOKEN" in err, err
    env["HF_TOKEN"] = "s3cret"
    r = pull(env)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    resolves = [q for q in hub.requests() if "/resolve/" in q["path"]]
    assert resolves and resolves[-1]["auth"] == "Bearer s3cret"


def test_missing_repo_file_and_unreachable(repo_folder, hub_env, tmp_path):
    # A repo without weights: a clear error naming the file.
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(os.path.join(repo_folder, "config.json"), bare / "config.json")
    hub = hub_env(str(bare))
    r = pull(env_for(tmp_path / "a", hub.url))
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 1 and "model.safetensors" in err and "404" in err, err

    # Nothing listening, nothing cached: says it cannot reach the hub.
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    r = pull(env_for(tmp_path / "b", f"http://127.0.0.1:{port}"))
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 1 and "cannot reach" in err, err

    # Unreachable but cached: the cached snapshot is used.
    hub2 = hub_env(repo_folder)
    env = env_for(tmp_path / "c", hub2.url)
    assert pull(env).returncode == 0
    env["HF_ENDPOINT"] = f"http://127.0.0.1:{port}"
    r = pull(env)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 0 and "unreachable" in err and "cached" in err, err

    # HF_HUB_OFFLINE=1: the cache without asking the hub; an uncached repo fails.
    n_before = len(hub2.requests())
    env["HF_ENDPOINT"] = hub2.url
    env["HF_HUB_OFFLINE"] = "1"
    r = pull(env)
    assert r.returncode == 0 and r.stdout.strip(), r.stderr
    assert len(hub2.requests()) == n_before, "offline mode contacted the hub"
    r = run([QWENC, "pull", "other/model"], env=env)
    assert r.returncode == 1 and b"HF_HUB_OFFLINE" in r.stderr, r.stderr


def test_model_resolved_from_cache(repo_folder, model_dir, hub_env, tmp_path):
    hub = hub_env(repo_folder)
    env = env_for(tmp_path, hub.url)
    assert pull(env).returncode == 0
    env["HF_ENDPOINT"] = "http://127.0.0.1:9"  # resolution never touches the network

    # Token mode by repo id == by folder.
    a = run([QWENC, REPO, "151644 8948 198", "4", "--threads", "1"], env=env)
    b = run([QWENC, model_dir, "151644 8948 198", "4", "--threads", "1"], env=env)
    assert a.returncode == 0, a.stderr.decode(errors="replace")
    assert a.stdout == b.stdout and a.stdout.strip(), (a.stdout, b.stdout)

    # Text mode by repo id: the tokenizer comes from the snapshot.
    t = run([QWENC, REPO, "--tokenize", "hi"], env=env)
    assert t.returncode == 0, t.stderr.decode(errors="replace")
    # [6023]: Tokenizer.from_file(tokenizer.json).encode("hi").ids with HF tokenizers
    assert t.stdout.split() == [b"6023"], t.stdout

    # A repo id not in the cache: a clear message saying how to get it.
    r = run([QWENC, "nobody/nothing", "1 2", "1"], env=env)
    err = r.stderr.decode(errors="replace")
    assert r.returncode != 0 and "qwenc pull nobody/nothing" in err, err


def split_safetensors(src, out_dir, n_shards=2):
    """Split src into n_shards files + model.safetensors.index.json (the
    layout transformers writes for big models)."""
    import struct
    with open(src, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        base = 8 + n
        hdr.pop("__metadata__", None)
        names = sorted(hdr, key=lambda k: hdr[k]["data_offsets"][0])
        groups = [names[i::n_shards] for i in range(n_shards)]
        weight_map = {}
        for i, group in enumerate(groups):
            fname = f"model-{i + 1:05d}-of-{n_shards:05d}.safetensors"
            h, blobs, off = {}, [], 0
            for name in group:
                a, b = hdr[name]["data_offsets"]
                f.seek(base + a)
                blobs.append(f.read(b - a))
                h[name] = {"dtype": hdr[name]["dtype"], "shape": hdr[name]["shape"],
                           "data_offsets": [off, off + b - a]}
                off += b - a
                weight_map[name] = fname
            hj = json.dumps(h).encode()
            hj += b" " * (-len(hj) % 8)
            with open(os.path.join(out_dir, fname), "wb") as o:
                o.write(struct.pack("<Q", len(hj)) + hj + b"".join(blobs))
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as o:
        json.dump({"metadata": {"total_size": sum(os.path.getsize(os.path.join(out_dir, f))
                                                  for f in set(weight_map.values()))},
                   "weight_map": weight_map}, o)
    return sorted(set(weight_map.values()))


def test_sharded_repo(model_dir, hub_env, tmp_path):
    folder = tmp_path / "sharded"
    folder.mkdir()
    for name in REPO_FILES:
        if name != "model.safetensors":
            shutil.copy(os.path.join(model_dir, name), folder / name)
    shards = split_safetensors(os.path.join(model_dir, "model.safetensors"), str(folder))
    hub = hub_env(str(folder), "--cut-once", shards[1])
    env = env_for(tmp_path, hub.url)
    r = pull(env)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 0, err
    snap = repo_cache(tmp_path) / "snapshots" / hub.commit
    for name in shards + ["model.safetensors.index.json"]:
        assert (snap / name).is_symlink(), f"{name} missing: {all_paths(snap)}"
        assert sha256_file(snap / name) == sha256_file(folder / name), name
    assert not (snap / "model.safetensors").exists()
    # The sharded snapshot runs, by repo id, like the single-file folder.
    env["HF_ENDPOINT"] = "http://127.0.0.1:9"
    a = run([QWENC, REPO, "151644 8948 198", "4", "--threads", "1"], env=env)
    b = run([QWENC, model_dir, "151644 8948 198", "4", "--threads", "1"], env=env)
    assert a.returncode == 0, a.stderr.decode(errors="replace")
    assert a.stdout == b.stdout and a.stdout.strip()


def test_setup_pulls_and_smoke_tests(repo_folder, hub_env, tmp_path):
    """./setup.sh --no-serve against the stand-in hub: deps present, build
    up to date, the model pulled into HF_HOME, a smoke test; a second run
    downloads nothing."""
    hub = hub_env(repo_folder)
    env = env_for(tmp_path, hub.url)
    env["QWENC_SETUP_STATE"] = str(tmp_path / "MODEL")
    setup = os.path.join(ROOT, "setup.sh")
    r = run(["bash", setup, "--no-serve", "--model", REPO, "--threads", "1"], env=env, timeout=300)
    out = (r.stdout + r.stderr).decode(errors="replace")
    assert r.returncode == 0, out[-3000:]
    snap = repo_cache(tmp_path) / "snapshots" / hub.commit
    assert (tmp_path / "MODEL").read_text().strip() == str(snap), out[-2000:]
    assert "smoke test passed" in out and "serving skipped" in out, out[-2000:]
    n_before = len(hub.requests())
    r = run(["bash", setup, "--no-serve", "--model", REPO, "--threads", "1"], env=env, timeout=300)
    out = (r.stdout + r.stderr).decode(errors="replace")
    assert r.returncode == 0 and "is in the Hugging Face cache" in out, out[-2000:]
    assert len(hub.requests()) == n_before, "the second setup contacted the hub"

    r = run(["bash", setup, "--bogus"], env=env)
    assert r.returncode == 2 and b"--bogus" in r.stderr


# ---------------------------------------------------------------------------
# GGUF repos (issue 14): REPO[:QUANT] lists the repo's files through the
# hub's API (GET /api/models/{repo}/tree/{rev}) and downloads one .gguf.

GGUF_REPO = "qwenc-test/tiny-qwen2-GGUF"


@pytest.fixture(scope="module")
def gguf_folder(model_dir, tmp_path_factory):
    """A GGUF repo as the hub has them: one file per quant, a README, no config.json."""
    d = tmp_path_factory.mktemp("ggufrepo")
    to_gguf = os.path.join(ROOT, "tools", "to_gguf.py")
    for typ, name in (("q8_0", "tiny-qwen2-Q8_0.gguf"), ("bf16", "tiny-qwen2-bf16.gguf")):
        r = subprocess.run([sys.executable, to_gguf, model_dir, str(d / name), "--type", typ], capture_output=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
    (d / "README.md").write_text("# tiny-qwen2-GGUF\n")
    return str(d)


def gguf_cache(tmp_path):
    return tmp_path / "hf" / "hub" / "models--qwenc-test--tiny-qwen2-GGUF"


class GgufHub(FakeHub):
    def __init__(self, folder, log, *flags):
        self.log = log
        self.proc = subprocess.Popen([sys.executable, FAKE_HUB, folder, "--repo-id", GGUF_REPO, "--log", log,
                                      *flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.url = self.proc.stdout.readline().decode().strip()
        line = self.proc.stdout.readline().decode().split()
        if not self.url.startswith("http://127.0.0.1:") or len(line) != 2:
            self.proc.kill()
            pytest.fail(f"fake_hub.py did not start: {self.url!r} {self.proc.stderr.read()[-2000:]!r}")
        self.commit = line[1]


@pytest.fixture
def ghub(tmp_path):
    started = []

    def start(folder, *flags):
        h = GgufHub(folder, str(tmp_path / f"ghub{len(started)}.log"), *flags)
        started.append(h)
        return h

    yield start
    for h in started:
        h.stop()


def test_pull_gguf_repo_by_quant(gguf_folder, ghub, tmp_path):
    hub = ghub(gguf_folder)
    env = env_for(tmp_path, hub.url)
    # Two quants and none asked for: says which exist, downloads nothing.
    r = run([QWENC, "pull", GGUF_REPO], env=env)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 1 and "Q8_0" in err and "BF16" in err and ":QUANT" in err, err
    # A quant the repo does not have: the same.
    r = run([QWENC, "pull", GGUF_REPO + ":Q4_K_M"], env=env)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 1 and "Q4_K_M" in err and "Q8_0" in err and "BF16" in err, err
    assert not any(q["path"].startswith("/cdn/") for q in hub.requests()), "downloaded without a match"

    # The quant, in any case: the one file, into the cache layout, checked.
    r = run([QWENC, "pull", GGUF_REPO + ":q8_0"], env=env)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 0, err
    assert any(q["path"].startswith(f"/api/models/{GGUF_REPO}/tree/main") for q in hub.requests()), \
        "the repo's files were not listed through the hub API"
    snap = gguf_cache(tmp_path) / "snapshots" / hub.commit
    f = snap / "tiny-qwen2-Q8_0.gguf"
    assert r.stdout.decode().strip() == str(f), r.stdout
    sha = sha256_file(os.path.join(gguf_folder, "tiny-qwen2-Q8_0.gguf"))
    assert f.is_symlink() and os.readlink(f) == f"../../blobs/{sha}"
    assert sha256_file(f) == sha
    assert sorted(os.listdir(snap)) == ["tiny-qwen2-Q8_0.gguf"], os.listdir(snap)
    assert (gguf_cache(tmp_path) / "refs" / "main").read_text().strip() == hub.commit
    assert "tiny-qwen2-Q8_0.gguf:" in err and "done" in err, err  # progress lines

    # Runs by REPO:QUANT (and by REPO: the one cached) as by the file.
    env["HF_ENDPOINT"] = "http://127.0.0.1:9"
    want = run([QWENC, str(f), "151644 8948 198", "4", "--threads", "1"], env=env)
    assert want.returncode == 0 and want.stdout.strip(), want.stderr
    for m in (GGUF_REPO + ":Q8_0", GGUF_REPO + ":q8_0", GGUF_REPO):
        a = run([QWENC, m, "151644 8948 198", "4", "--threads", "1"], env=env)
        assert a.returncode == 0 and a.stdout == want.stdout, (m, a.stderr[-500:])
    a = run([QWENC, GGUF_REPO + ":BF16", "1 2", "1"], env=env)
    assert a.returncode == 1 and b"BF16" in a.stderr and b"Q8_0" in a.stderr, a.stderr

    # Again: cached, nothing downloaded.
    env["HF_ENDPOINT"] = hub.url
    n_before = len(hub.requests())
    r = run([QWENC, "pull", GGUF_REPO + ":Q8_0"], env=env)
    assert r.returncode == 0 and b"cached" in r.stderr, r.stderr
    assert not any(q["path"].startswith("/cdn/") for q in hub.requests()[n_before:])
    # The hub unreachable: the cached file, with a warning.
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = s.getsockname()[1]
    s.close()
    env["HF_ENDPOINT"] = f"http://127.0.0.1:{dead}"
    r = run([QWENC, "pull", GGUF_REPO + ":q8_0"], env=env)
    assert r.returncode == 0 and r.stdout.decode().strip() == str(f) and b"unreachable" in r.stderr, r.stderr
    r = run([QWENC, "pull", GGUF_REPO + ":BF16"], env=env)
    assert r.returncode == 1 and b"cannot reach" in r.stderr, r.stderr
    env["HF_ENDPOINT"] = hub.url
    # Offline: the cached file, without asking.
    env["HF_HUB_OFFLINE"] = "1"
    n_before = len(hub.requests())
    r = run([QWENC, "pull", GGUF_REPO + ":Q8_0"], env=env)
    assert r.returncode == 0 and r.stdout.decode().strip() == str(f), r.stderr
    assert len(hub.requests()) == n_before


def test_pull_gguf_resume_and_corruption(gguf_folder, ghub, tmp_path):
    name = "tiny-qwen2-bf16.gguf"
    hub = ghub(gguf_folder, "--cut-once", name)
    env = env_for(tmp_path / "a", hub.url)
    r = run([QWENC, "pull", GGUF_REPO + ":BF16"], env=env)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 0 and "resuming" in err, err
    assert sha256_file(r.stdout.decode().strip()) == sha256_file(os.path.join(gguf_folder, name))
    hub2 = ghub(gguf_folder, "--corrupt", name)
    env = env_for(tmp_path / "b", hub2.url)
    r = run([QWENC, "pull", GGUF_REPO + ":bf16"], env=env)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 1 and "corrupt" in err and name in err, err


def test_pull_gguf_only_repo_without_quant(model_dir, ghub, tmp_path):
    """A repo with one .gguf and no config.json: plain `pull REPO` finds it."""
    d = tmp_path / "one"
    d.mkdir()
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "to_gguf.py"), model_dir,
                        str(d / "tiny-qwen2-q8_0.gguf"), "--type", "q8_0"], capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr
    hub = ghub(str(d))
    env = env_for(tmp_path, hub.url)
    r = run([QWENC, "pull", GGUF_REPO], env=env)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    assert r.stdout.decode().strip().endswith("/tiny-qwen2-q8_0.gguf"), r.stdout


def test_pull_gguf_split_and_errors(model_dir, ghub, tmp_path):
    """A split GGUF (llama-gguf-split's naming and keys) is downloaded whole,
    named by its first part, loads like the one-file model, is one row in
    `qwenc list` and goes whole with `qwenc rm`; a wrong repo or a gated one
    gets a clear message."""
    d = tmp_path / "split"
    d.mkdir()
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "to_gguf.py"), model_dir,
                        str(d / "big-Q4_K_M.gguf"), "--type", "q8_0", "--split-max-tensors", "12"],
                       capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "to_gguf.py"), model_dir,
                        str(d / "big-Q8_0.gguf"), "--type", "q8_0"], capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr
    parts = sorted(p.name for p in d.iterdir() if "-of-" in p.name)
    assert parts == [f"big-Q4_K_M-0000{i}-of-00003.gguf" for i in (1, 2, 3)], parts
    hub = ghub(str(d))
    env = env_for(tmp_path, hub.url)
    r = run([QWENC, "pull", GGUF_REPO + ":q4_k_m"], env=env)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    first = r.stdout.decode().strip()
    assert first.endswith("/big-Q4_K_M-00001-of-00003.gguf"), first
    for p in parts:
        assert os.path.exists(os.path.join(os.path.dirname(first), p)), p
    a = run([QWENC, GGUF_REPO + ":Q4_K_M", "--tokens", "1 2 3", "-n", "6", "--threads", "2"], env=env)
    b = run([QWENC, str(d / "big-Q8_0.gguf"), "--tokens", "1 2 3", "-n", "6", "--threads", "2"], env=env)
    assert a.returncode == 0 and a.stdout == b.stdout and a.stdout.strip(), (a.stderr, b.stderr)
    r = run([QWENC, "list"], env=env)
    rows = [l for l in r.stdout.decode().splitlines() if "Q4_K_M" in l]
    assert len(rows) == 1 and "3 parts" in rows[0], r.stdout
    total = sum(os.path.getsize(d / p) for p in parts)
    assert f"{total / 1e6:.1f} MB" in rows[0], (total, rows)
    r = run([QWENC, "rm", GGUF_REPO + ":q4_k_m"], env=env)
    assert r.returncode == 0, r.stderr
    for p in parts:
        assert not os.path.exists(os.path.join(os.path.dirname(first), p)), p
    os.remove(d / parts[1])                       # the hub lists a split model with a part missing
    r = run([QWENC, "pull", GGUF_REPO + ":q4_k_m"], env=env_for(tmp_path / "m", ghub(str(d)).url))
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 1 and "part 2 of 3" in err and "missing" in err, err
    r = run([QWENC, "pull", "other/repo:Q4_K_M"], env=env)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 1 and "other/repo" in err and "404" in err, err
    for bad in (GGUF_REPO + ":", GGUF_REPO + ":../x"):
        r = run([QWENC, "pull", bad], env=env)
        assert r.returncode == 2 and b"REPO:QUANT" in r.stderr, (bad, r.stderr)
    hub2 = ghub(str(d), "--token", "s3cret")
    r = run([QWENC, "pull", GGUF_REPO + ":Q8_0"], env=env_for(tmp_path / "t", hub2.url))
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 1 and "401" in err and "HF_TOKEN" in err, err


def test_list_and_rm(repo_folder, gguf_folder, hub_env, ghub, tmp_path):
    """qwenc list shows what MODEL can name, with sizes; qwenc rm removes it."""
    env = env_for(tmp_path, hub_env(repo_folder).url)
    r = run([QWENC, "list"], env=env)
    assert r.returncode == 0 and b"no models" in r.stderr, r
    assert pull(env).returncode == 0
    env["HF_ENDPOINT"] = ghub(gguf_folder).url
    for q in ("Q8_0", "bf16"):
        assert run([QWENC, "pull", f"{GGUF_REPO}:{q}"], env=env).returncode == 0
    r = run([QWENC, "list"], env=env)
    assert r.returncode == 0, r.stderr
    rows = {l.split()[0]: l for l in r.stdout.decode().splitlines()[1:]}
    assert set(rows) == {REPO, GGUF_REPO + ":Q8_0", GGUF_REPO + ":BF16"}, r.stdout
    assert "safetensors" in rows[REPO] and "GGUF" in rows[GGUF_REPO + ":Q8_0"], rows
    q8 = os.path.getsize(os.path.join(gguf_folder, "tiny-qwen2-Q8_0.gguf"))
    assert f"{q8 / 1e6:.1f} MB" in rows[GGUF_REPO + ":Q8_0"], (q8, rows)

    r = run([QWENC, "rm", GGUF_REPO + ":q8_0"], env=env)
    assert r.returncode == 0 and b"removed" in r.stdout, r.stderr
    sha = sha256_file(os.path.join(gguf_folder, "tiny-qwen2-Q8_0.gguf"))
    assert not (gguf_cache(tmp_path) / "blobs" / sha).exists(), "the blob was kept"
    r = run([QWENC, "list"], env=env)
    assert GGUF_REPO + ":Q8_0" not in r.stdout.decode() and GGUF_REPO + ":BF16" in r.stdout.decode(), r.stdout
    r = run([QWENC, "rm", REPO], env=env)
    assert r.returncode == 0 and not repo_cache(tmp_path).exists(), r.stderr
    r = run([QWENC, "rm", GGUF_REPO + ":bf16"], env=env)
    assert r.returncode == 0 and not gguf_cache(tmp_path).exists(), "an emptied repo folder was left"
    r = run([QWENC, "rm", REPO], env=env)
    assert r.returncode == 1 and b"not in the Hugging Face cache" in r.stderr, r.stderr
    r = run([QWENC, "rm", "../etc"], env=env)
    assert r.returncode == 2, r.stderr
