#!/usr/bin/env python3
"""fake_hub.py - a local stand-in for the Hugging Face hub, for tests of `qwenc pull`.

Serves the files of one folder as the model repo REPO_ID the way
huggingface.co does (as huggingface_hub's hf_hub_download sees it):

  HEAD/GET /{repo}/resolve/{rev}/{file}      rev = "main" or the commit
    git files (small):  307 to /api/resolve-cache/models/{repo}/{commit}/{file}
                        (a relative redirect, as the hub now sends), which
                        answers 200 with ETag: "<git blob sha1>", X-Repo-Commit
    LFS files (*.safetensors, *.bin, *.gguf, >= 10 MiB):
                        302 to /cdn/{sha256} (an absolute URL: the "CDN"),
                        X-Linked-Etag: "<sha256>", X-Linked-Size, X-Repo-Commit
  GET /cdn/{sha256}    the content, with Range support (206 / 416)
  GET /api/models/{repo}/tree/{rev}[?recursive=true]
                       the repo's listing, as the hub's API gives it: a JSON
                       array of {"type": "file", "oid", "size", "path"} (+
                       "lfs": {"oid": sha256, "size"} for LFS files) and
                       {"type": "directory", "path"} for folders (all levels:
                       the stand-in always answers as if recursive=true)
  404 with X-Error-Code: EntryNotFound for a missing file, RevisionNotFound
  for an unknown revision, RepoNotFound for another repo.

Loopback only, on a free port; the first line on stdout is the base URL.

Test switches:
  --cut-once NAME    the first GET of NAME's content sends the headers of the
                     whole file, half the body, then drops the connection
  --corrupt NAME     NAME's content is served with one byte flipped (the ETag
                     stays the true one)
  --token T          require "Authorization: Bearer T" on /{repo}/resolve (401)
  --log FILE         one JSON line per request: method, path, range, auth
  --bad-etag NAME    NAME's ETag is "../../evil" (a path escape attempt)
  --index-escape     serve a model.safetensors.index.json whose weight_map
                     names "../../../evil.safetensors"

Runs with any Python 3.8+ (standard library only).
"""
import argparse
import hashlib
import http.server
import json
import os
import socketserver
import sys
import threading
import urllib.parse

LFS_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth")
LFS_MIN_SIZE = 10 << 20


def git_blob_sha1(data):
    h = hashlib.sha1()
    h.update(b"blob %d\0" % len(data))
    h.update(data)
    return h.hexdigest()


class Repo:
    def __init__(self, folder, repo_id, args):
        self.repo_id = repo_id
        self.files = {}  # name -> dict(data, lfs, sha256, gitsha)
        for root, _dirs, names in os.walk(folder):
            for n in names:
                full = os.path.join(root, n)
                rel = os.path.relpath(full, folder).replace(os.sep, "/")
                if rel.endswith(".tmp") or rel.endswith(".incomplete"):
                    continue
                with open(full, "rb") as f:
                    data = f.read()
                self.add(rel, data)
        if args.index_escape:
            idx = {"metadata": {}, "weight_map": {"model.embed_tokens.weight": "../../../evil.safetensors"}}
            self.add("model.safetensors.index.json", json.dumps(idx).encode())
        # The commit: a hash over names and contents, stable for a fixture.
        h = hashlib.sha1()
        for name in sorted(self.files):
            h.update(name.encode() + b"\0" + self.files[name]["gitsha"].encode())
        self.commit = h.hexdigest()
        self.by_sha = {f["sha256"]: name for name, f in self.files.items()}

    def add(self, name, data):
        lfs = name.endswith(LFS_SUFFIXES) or len(data) >= LFS_MIN_SIZE
        self.files[name] = {
            "data": data,
            "lfs": lfs,
            "sha256": hashlib.sha256(data).hexdigest(),
            "gitsha": git_blob_sha1(data),
        }


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-hub/1"

    def log_message(self, fmt, *a):  # quiet; --log has the details
        pass

    def record(self):
        st = self.server.state
        if st.log:
            with st.lock:
                st.log.write(json.dumps({
                    "method": self.command,
                    "path": self.path,
                    "range": self.headers.get("Range"),
                    "auth": self.headers.get("Authorization"),
                }) + "\n")
                st.log.flush()

    def send_plain(self, code, body=b"", headers=()):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self):
        self.handle_any()

    def do_GET(self):
        self.handle_any()

    def handle_any(self):
        self.record()
        st = self.server.state
        repo = st.repo
        path = self.path.split("?", 1)[0]
        if path.startswith("/cdn/"):
            sha = path[len("/cdn/"):]
            name = repo.by_sha.get(sha)
            if name is None:
                return self.send_plain(404, b"no such object")
            return self.send_content(name, etag=sha)
        if path.startswith("/api/models/"):
            return self.send_tree(path)
        prefix_cache = "/api/resolve-cache/models/%s/" % repo.repo_id
        if path.startswith(prefix_cache):
            rest = path[len(prefix_cache):]
            commit, _, name = rest.partition("/")
            if commit != repo.commit or name not in repo.files:
                return self.send_plain(404, b"not found", [("X-Error-Code", "EntryNotFound")])
            f = repo.files[name]
            return self.send_content(name, etag=self.etag_of(name, f["gitsha"]),
                                     extra=[("X-Repo-Commit", repo.commit)])
        prefix = "/%s/resolve/" % repo.repo_id
        if not path.startswith(prefix):
            return self.send_plain(404, b"Repository not found", [("X-Error-Code", "RepoNotFound")])
        if st.token is not None and self.headers.get("Authorization") != "Bearer " + st.token:
            return self.send_plain(401, b"Invalid credentials", [("X-Error-Code", "GatedRepo")])
        rest = path[len(prefix):]
        rev, _, name = rest.partition("/")
        if rev not in ("main", repo.commit):
            return self.send_plain(404, b"Revision not found", [("X-Error-Code", "RevisionNotFound")])
        f = repo.files.get(name)
        if f is None:
            return self.send_plain(404, b"Entry not found", [("X-Error-Code", "EntryNotFound"),
                                                              ("X-Repo-Commit", repo.commit)])
        if f["lfs"]:
            host = self.headers.get("Host", "127.0.0.1:%d" % self.server.server_address[1])
            loc = "http://%s/cdn/%s?X-Amz-Signature=fake" % (host, f["sha256"])
            return self.send_plain(302, b"Found. Redirecting to " + loc.encode(), [
                ("Location", loc),
                ("X-Repo-Commit", repo.commit),
                ("X-Linked-Etag", '"%s"' % self.etag_of(name, f["sha256"])),
                ("X-Linked-Size", str(len(f["data"]))),
                ("ETag", '"%s"' % git_blob_sha1(b"version https://git-lfs.github.com/spec/v1\n")),
            ])
        loc = "/api/resolve-cache/models/%s/%s/%s" % (repo.repo_id, repo.commit, name)
        return self.send_plain(307, b"Temporary Redirect", [("Location", loc),
                                                            ("X-Repo-Commit", repo.commit)])

    def send_tree(self, path):
        st = self.server.state
        repo = st.repo
        prefix = "/api/models/%s/tree/" % repo.repo_id
        if not path.startswith(prefix):
            return self.send_json(404, {"error": "Repository not found"}, [("X-Error-Code", "RepoNotFound")])
        if st.token is not None and self.headers.get("Authorization") != "Bearer " + st.token:
            return self.send_json(401, {"error": "Invalid credentials"}, [("X-Error-Code", "GatedRepo")])
        rev = urllib.parse.unquote(path[len(prefix):])
        if rev not in ("main", repo.commit):
            return self.send_json(404, {"error": "Invalid rev id: " + rev}, [("X-Error-Code", "RevisionNotFound")])
        out, dirs = [], set()
        for name in sorted(repo.files):
            parts = name.split("/")
            for i in range(1, len(parts)):
                dirs.add("/".join(parts[:i]))
            f = repo.files[name]
            e = {"type": "file", "oid": f["gitsha"], "size": len(f["data"]), "path": name}
            if f["lfs"]:
                e["lfs"] = {"oid": f["sha256"], "size": len(f["data"]), "pointerSize": 134}
            out.append(e)
        out += [{"type": "directory", "oid": "0" * 40, "size": 0, "path": d} for d in sorted(dirs)]
        return self.send_json(200, out)

    def send_json(self, code, obj, headers=()):
        body = json.dumps(obj).encode()
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def etag_of(self, name, real):
        return "../../evil" if name == self.server.state.bad_etag else real

    def send_content(self, name, etag, extra=()):
        st = self.server.state
        data = st.repo.files[name]["data"]
        if name == st.corrupt and data:
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        size = len(data)
        start, end, code = 0, size - 1, 200
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes="):
            a, _, b = rng[len("bytes="):].partition("-")
            try:
                start = int(a)
                end = int(b) if b else size - 1
            except ValueError:
                return self.send_plain(400, b"bad range")
            if start >= size:
                return self.send_plain(416, b"Range Not Satisfiable",
                                       [("Content-Range", "bytes */%d" % size)])
            end = min(end, size - 1)
            code = 206
        body = data[start:end + 1]
        self.send_response(code)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", '"%s"' % etag)
        self.send_header("Accept-Ranges", "bytes")
        if code == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, size))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command == "HEAD":
            return
        cut = False
        with st.lock:
            if st.cut_once == name and not st.cut_done:
                st.cut_done = True
                cut = True
        if cut:
            half = len(body) // 2
            self.wfile.write(body[:half])
            self.wfile.flush()
            self.close_connection = True
            try:
                import socket
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        # Chunked writes so that a slow reader sees progress.
        for i in range(0, len(body), 1 << 20):
            self.wfile.write(body[i:i + (1 << 20)])


class State:
    pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", help="files of the repo")
    ap.add_argument("--repo-id", default="qwenc-test/tiny-qwen2")
    ap.add_argument("--port", type=int, default=0, help="0 = a free port")
    ap.add_argument("--cut-once")
    ap.add_argument("--corrupt")
    ap.add_argument("--token")
    ap.add_argument("--log")
    ap.add_argument("--bad-etag")
    ap.add_argument("--index-escape", action="store_true")
    args = ap.parse_args()

    st = State()
    st.repo = Repo(args.folder, args.repo_id, args)
    st.cut_once, st.cut_done = args.cut_once, False
    st.corrupt, st.token, st.bad_etag = args.corrupt, args.token, args.bad_etag
    st.lock = threading.Lock()
    st.log = open(args.log, "a") if args.log else None
    srv = Server(("127.0.0.1", args.port), Handler)
    srv.state = st
    print("http://127.0.0.1:%d" % srv.server_address[1], flush=True)
    print("commit %s" % st.repo.commit, flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
