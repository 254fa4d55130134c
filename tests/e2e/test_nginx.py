"""Scale-out: three qwenc replicas behind nginx with deploy/nginx/qwenc.conf
(the documented file, ports substituted). Conversation affinity, least_conn
spreading, a replica SIGKILLed in the middle of concurrent chats (nothing is
lost: clients retry once on a connection error), nginx stops routing to it,
and it rejoins after a restart. Skipped, with a message, without nginx."""

import concurrent.futures as cf
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

import pytest
import requests

from conftest import QWENC, ROOT, Proc

NGINX = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx")
                                       if os.access(p, os.X_OK)), None)
pytestmark = pytest.mark.skipif(NGINX is None, reason="nginx is not installed (apt-get install nginx-light): "
                                                      "the scale-out test behind a load balancer is skipped")
CONF = os.path.join(ROOT, "deploy", "nginx", "qwenc.conf")
CHAT = {"messages": [{"role": "user", "content": "tell me a story"}], "max_tokens": 24, "ignore_eos": True}


def free_port(hosts=("127.0.0.1",)):
    """A port free on every one of hosts."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind((hosts[0], 0))
            port = s.getsockname()[1]
        try:
            for h in hosts[1:]:
                with socket.socket() as s:
                    s.bind((h, port))
            return port
        except OSError:
            continue
    pytest.fail(f"no port free on all of {hosts}")


class Replica(Proc):
    def __init__(self, model, host, port):
        self.port = port
        self.addr = f"{host}:{port}"
        super().__init__([QWENC, model, "--http", str(port), "--host", host, "--threads", "1",
                          "--parallel", "4"])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.alive():
            try:
                if requests.get(f"http://{self.addr}/health", timeout=2,
                            headers={"Host": f"localhost:{port}"}).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        self.kill()
        pytest.fail(f"replica on {port} never answered /health 200:\n{self.log_tail()}")


class Nginx:
    def __init__(self, hosts, port):
        self.dir = tempfile.mkdtemp(prefix="qwenc_nginx_")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.access = os.path.join(self.dir, "access.log")
        conf = open(CONF).read()
        conf = conf.replace("listen 127.0.0.1:8000;", f"listen 127.0.0.1:{self.port};")
        conf = conf.replace(":8001", f":{port}")
        conf = conf.replace("/var/log/nginx/qwenc.access.log", self.access)
        assert conf.count(f":{port} max_fails") == 2 * len(hosts), "the replicas in qwenc.conf are not 127.0.0.1-3:8001"
        open(os.path.join(self.dir, "qwenc.conf"), "w").write(conf)
        temps = "\n".join(f"  {k}_temp_path {self.dir}/{k};" for k in
                          ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        user = "user root;\n" if os.geteuid() == 0 else ""
        main = (f"{user}worker_processes 1;\npid {self.dir}/nginx.pid;\nerror_log {self.dir}/error.log info;\n"
                f"events {{ worker_connections 512; }}\n"
                f"http {{\n{temps}\n  include {self.dir}/qwenc.conf;\n}}\n")
        self.conf = os.path.join(self.dir, "nginx.conf")
        open(self.conf, "w").write(main)
        t = subprocess.run([NGINX, "-t", "-p", self.dir, "-e", f"{self.dir}/error.log", "-c", self.conf],
                           capture_output=True, text=True)
        assert t.returncode == 0, f"nginx -t refused deploy/nginx/qwenc.conf:\n{t.stderr}"
        self.proc = subprocess.Popen([NGINX, "-p", self.dir, "-e", f"{self.dir}/error.log", "-c", self.conf,
                                      "-g", "daemon off;"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if requests.get(self.url + "/nginx-health", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                time.sleep(0.05)
        self.stop()
        pytest.fail("nginx did not start")

    def log(self):
        """[(conv, upstream list, upstream statuses, status)] from the access log."""
        out = []
        for line in open(self.access, errors="replace"):
            m = re.search(r'" (\d+) \d+ conv="([^"]*)" upstream="([^"]*)" upstream_status="([^"]*)"', line)
            if m:
                out.append(("" if m.group(2) == "-" else m.group(2), [u.strip() for u in re.split(r",\s|\s:\s", m.group(3)) if u.strip()],
                            m.group(4), int(m.group(1))))
        return out

    def stop(self):
        self.proc.send_signal(signal.SIGQUIT)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def farm(model_dir):
    hosts = ("127.0.0.1", "127.0.0.2", "127.0.0.3")
    port = free_port(hosts)
    reps = [Replica(model_dir, h, port) for h in hosts]
    ng = Nginx(hosts, port)
    yield ng, reps, model_dir
    ng.stop()
    for r in reps:
        r.kill()


def chat_once(ng, conv=None, stream=False):
    """One chat through nginx; retried once on a connection error, a 5xx from
    nginx or a cut answer. Returns (ok, retried)."""
    h = {"X-Conversation-Id": conv} if conv else {}
    body = dict(CHAT, stream=stream)
    for attempt in range(2):
        try:
            r = requests.post(ng.url + "/v1/chat/completions", json=body, headers=h, timeout=60, stream=stream)
            if r.status_code == 200:
                if not stream:
                    r.json()["choices"][0]["message"]["content"]
                    return True, attempt
                text = r.content.decode()
                if "data: [DONE]" in text:
                    return True, attempt
            elif r.status_code < 500:
                print("client error", r.status_code, r.text[:300])
                return False, attempt
        except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError, ValueError):
            pass
    return False, 1


def test_affinity_and_least_conn(farm):
    ng, reps, _ = farm
    for conv in ("alice", "bob", "carol", "dave"):
        for _ in range(3):
            assert chat_once(ng, conv) == (True, 0)
    with cf.ThreadPoolExecutor(6) as ex:
        assert all(ok for ok, _ in ex.map(lambda _: chat_once(ng), range(12)))
    log = ng.log()
    for conv in ("alice", "bob", "carol", "dave"):
        ups = {tuple(u) for c, u, _, _ in log if c == conv}
        assert len(ups) == 1, f"conversation {conv} went to {ups}: no affinity"
    spread = {u[-1] for c, u, _, s in log if not c and s == 200}
    assert len(spread) >= 2, f"12 concurrent requests without a key all went to {spread}"


def test_sse_passes_through(farm):
    ng, _, _ = farm
    r = requests.post(ng.url + "/v1/chat/completions", json=dict(CHAT, stream=True), stream=True, timeout=60)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/event-stream")
    events = [ln for ln in r.iter_lines() if ln.startswith(b"data: ")]
    assert events[-1] == b"data: [DONE]" and len(events) > 3


def test_replica_killed_mid_run_then_rejoins(farm):
    ng, reps, model_dir = farm
    victim = reps[1]
    n_clients, per_client = 9, 8
    done = [0]
    lock = threading.Lock()
    killed = threading.Event()
    results = []
    mark_kill = [0]

    def client(i):
        out = []
        for k in range(per_client):
            out.append(chat_once(ng, f"conv-{i}", stream=(k % 3 == 2)))
            with lock:
                done[0] += 1
                if done[0] == n_clients * per_client // 3 and not killed.is_set():
                    victim.proc.send_signal(signal.SIGKILL)   # mid-run: other chats are in flight
                    mark_kill[0] = len(ng.log())
                    killed.set()
        return out

    with cf.ThreadPoolExecutor(n_clients) as ex:
        for out in ex.map(client, range(n_clients)):
            results += out
    assert killed.is_set()
    victim.proc.wait(10)
    lost = [r for r in results if not r[0]]
    retried = sum(1 for ok, a in results if ok and a)
    assert not lost, f"{len(lost)} of {len(results)} requests lost (after one retry)"
    # At most the requests in flight on the victim needed a client retry.
    assert retried <= n_clients, f"{retried} client retries for at most {n_clients} requests in flight"

    # nginx stopped routing to it: every answer after the kill came from a
    # live replica, and the dead one was tried only now and then (one probe
    # per fail_timeout per upstream group, plus the requests in flight).
    after = ng.log()[mark_kill[0]:]
    answered_by_dead = [e for e in after if e[3] == 200 and e[1] and e[1][-1] == victim.addr]
    tries_dead = sum(e[1].count(victim.addr) for e in after)
    assert len(answered_by_dead) <= n_clients, answered_by_dead
    assert tries_dead - len(answered_by_dead) <= n_clients + 6, f"nginx kept trying the dead replica {tries_dead} times"

    # Restart on the same port: it gets traffic again (after fail_timeout).
    reps[1] = Replica(model_dir, victim.addr.split(":")[0], victim.port)
    mark = len(ng.log())
    deadline = time.monotonic() + 30
    back = False
    while time.monotonic() < deadline and not back:
        with cf.ThreadPoolExecutor(3) as ex:
            assert all(ok for ok, _ in ex.map(lambda _: chat_once(ng), range(3)))
        back = any(e[3] == 200 and e[1] and e[1][-1] == victim.addr for e in ng.log()[mark:])
        time.sleep(0.5)
    assert back, "the restarted replica never got a request within 30 s"
    print(f"\nnginx farm: {len(results)} chats, {retried} client retries, 0 lost; dead replica tried "
          f"{tries_dead} times after the kill ({len(answered_by_dead)} answered before it died); "
          f"rejoined after {30 - (deadline - time.monotonic()):.1f} s")
