"""Model names over HTTP: /v1/models lists the model under a readable id
(--alias, else the repo id of a hub model, else a GGUF's general.name, else
the folder name); a request naming another model is 404 model_not_found
and /v1/models/ID is 404 for an unknown id, unless --any-model. These
servers start without --any-model (the rest of the suite uses it)."""

import os
import shutil

import pytest
import requests

from conftest import start_http, stop_checked
from helpers import api_error, ok_json, post
from test_gguf import OUT, to_gguf


def models(s):
    return ok_json(requests.get(s.url + "/v1/models", timeout=30))


def chat_as(s, model, path="/v1/chat/completions"):
    if path.endswith("chat/completions"):
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    else:
        body = {"prompt": "hi", "max_tokens": 2}
    if model is not None:
        body["model"] = model
    return post(s, path, body)


def check_served_as(s, name):
    j = models(s)
    assert [m["id"] for m in j["data"]] == [name], j
    one = ok_json(requests.get(s.url + "/v1/models/" + name, timeout=30))
    assert one["id"] == name and one["object"] == "model", one
    r = requests.get(s.url + "/v1/models/not-" + name, timeout=30)
    api_error(r, 404)
    assert r.json()["error"]["code"] == "model_not_found", r.text
    for path in ("/v1/chat/completions", "/v1/completions"):
        assert ok_json(chat_as(s, name, path))["model"] == name
        ok_json(chat_as(s, None, path))  # no "model": the one served
        r = chat_as(s, "gpt-4o-mini", path)
        msg = api_error(r, 404)
        e = r.json()["error"]
        assert e["code"] == "model_not_found" and e["param"] == "model", e
        assert e["type"] == "invalid_request_error", e
        assert "gpt-4o-mini" in msg and name in msg, msg


def test_folder_name_and_model_not_found(model_dir):
    s = start_http(model_dir, "--parallel", "1", any_model=False)
    try:
        check_served_as(s, os.path.basename(os.path.normpath(model_dir)))
    finally:
        stop_checked(s)


def test_alias(model_dir):
    s = start_http(model_dir, "--parallel", "1", "--alias", "my-coder", any_model=False)
    try:
        check_served_as(s, "my-coder")
        api_error(chat_as(s, os.path.basename(model_dir)), 404)  # the folder name is not served
    finally:
        stop_checked(s)


def test_any_model_accepts_every_name(model_dir):
    s = start_http(model_dir, "--parallel", "1", "--alias", "my-coder")  # --any-model
    try:
        assert ok_json(chat_as(s, "gpt-4o-mini"))["model"] == "my-coder"
        assert ok_json(requests.get(s.url + "/v1/models/anything", timeout=30))["id"] == "my-coder"
    finally:
        stop_checked(s)


def test_gguf_general_name(model_dir, tmp_path):
    g = to_gguf(model_dir, os.path.join(OUT, "e2e-model.gguf"), "bf16")
    renamed = tmp_path / "renamed-file.gguf"
    os.symlink(g, renamed)
    s = start_http(str(renamed), "--parallel", "1", any_model=False)
    try:
        # tools/to_gguf.py writes general.name = the source folder's name
        check_served_as(s, os.path.basename(os.path.normpath(model_dir)))
    finally:
        stop_checked(s)


def test_hub_repo_id(model_dir, tmp_path, monkeypatch):
    commit = "5b656be2dcba234bb65811c046e7b5c6b7e676f3"
    repo = tmp_path / "hf" / "hub" / "models--qwenc-test--Tiny-Coder"
    snap = repo / "snapshots" / commit
    snap.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    for f in os.listdir(model_dir):
        if not f.startswith("."):
            shutil.copy(os.path.join(model_dir, f), snap / f)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    for k in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(k, raising=False)
    s = start_http("qwenc-test/Tiny-Coder", "--parallel", "1", any_model=False)
    try:
        check_served_as(s, "qwenc-test/Tiny-Coder")
    finally:
        stop_checked(s)


@pytest.mark.parametrize("bad", [["--alias", ""]])
def test_bad_alias_is_refused(model_dir, bad):
    from conftest import QWENC, run
    r = run([QWENC, model_dir, "--http", "0", *bad], timeout=30)
    assert r.returncode != 0 and b"alias" in r.stderr, r.stderr
