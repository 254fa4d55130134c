"""The web chat page at / (src/server/webui/index.html).

Two tiers:
  * over plain HTTP: GET / serves the embedded page (HTML, CSP, no asset from
    another origin); --no-webui turns it off; with --api-key the page itself is
    public but the API it uses is not; the DNS-rebinding Host check covers it.
  * in headless Chromium (Debian's chromium + chromium-driver, driven by
    selenium): load the page against the tiny random-weights model, see the
    random-weights warning, send a message and watch the streamed answer
    arrive (it must equal the API's greedy answer), stop a long answer,
    regenerate, reload (conversations come back from localStorage), the
    Markdown renderer's safety, dark mode, a phone-width layout, the API key
    prompt. Screenshots are kept under $BUILD/artifacts/ (webui-*.png).
    These tests skip, saying why, where chromium or chromedriver is missing.

Streaming is made slow on the browser's side with Chrome's network throttling
(DevTools Network.emulateNetworkConditions), so "stop while it streams" does
not depend on how fast the machine generates: a 400-token answer takes tens
of seconds to reach the page, and Stop is clicked after its first token.
"""

import json
import os
import re
import shutil
import time

import pytest
import requests

from conftest import BUILD, ROOT, start_http, stop_checked
from helpers import api_error, chat_text

CHROMIUM = os.environ.get("QWENC_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = os.environ.get("QWENC_CHROMEDRIVER") or shutil.which("chromedriver")
ARTIFACTS = os.path.join(BUILD, "artifacts")


@pytest.fixture(scope="module")
def server(model_dir):
    s = start_http(model_dir, "--parallel", "2")
    yield s
    stop_checked(s)


# ---------------------------------------------------------------------------
# Over plain HTTP.


def test_page_is_served_with_its_headers(server):
    r = requests.get(server.url + "/", timeout=30)
    assert r.status_code == 200, r.text[:300]
    assert r.headers["Content-Type"] == "text/html; charset=utf-8"
    csp = r.headers.get("Content-Security-Policy", "")
    assert "default-src 'none'" in csp and "connect-src 'self'" in csp and "frame-ancestors 'none'" in csp, csp
    assert r.headers.get("X-Content-Type-Options") == "nosniff"
    page = r.content.decode("utf-8")
    assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>")
    assert "v1/chat/completions" in page and "localStorage" in page
    assert requests.get(server.url + "/index.html", timeout=30).content == r.content
    # the embedded bytes are the source file's, exactly (tools/embed.c)
    with open(os.path.join(ROOT, "src", "server", "webui", "index.html"), "rb") as f:
        assert r.content == f.read()


def test_page_loads_nothing_from_elsewhere(server):
    page = requests.get(server.url + "/", timeout=30).text
    low = page.lower()
    # every asset is inline: no <script src>, <link> or @import, no CDN
    assert "<script src" not in low and "<link" not in low and "@import" not in low
    # no absolute URL at all (the link pattern in the script is written https?:\/\/)
    hosts = re.findall(r"(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}", low)
    assert not hosts, f"the page names other hosts: {hosts}"


def test_no_webui_turns_it_off(model_dir):
    s = start_http(model_dir, "--no-webui")
    try:
        msg = api_error(requests.get(s.url + "/", timeout=30), 404)
        assert "--no-webui" in msg
        # the API is still there
        assert requests.get(s.url + "/v1/models", timeout=30).status_code == 200
    finally:
        stop_checked(s)


def test_api_key_page_public_api_not(model_dir):
    s = start_http(model_dir, "--api-key", "sekrit")
    try:
        r = requests.get(s.url + "/", timeout=30)
        assert r.status_code == 200 and "<!doctype html>" in r.text
        api_error(requests.get(s.url + "/v1/models", timeout=30), 401)
        r = requests.get(s.url + "/v1/models", headers={"Authorization": "Bearer sekrit"}, timeout=30)
        assert r.status_code == 200
    finally:
        stop_checked(s)


def test_host_check_covers_the_page(server):
    r = requests.get(server.url + "/", headers={"Host": f"evil.example:{server.port}"}, timeout=30)
    api_error(r, 403)


def test_page_method_not_allowed(server):
    r = requests.post(server.url + "/", data="x", timeout=30)
    api_error(r, 405)


# ---------------------------------------------------------------------------
# In headless Chromium.


def _need_browser():
    if not CHROMIUM or not CHROMEDRIVER:
        pytest.skip("the web UI browser tests need Debian's chromium and chromium-driver "
                    f"(apt-get install chromium chromium-driver; found chromium={CHROMIUM}, "
                    f"chromedriver={CHROMEDRIVER})")
    try:
        import selenium  # noqa: F401
    except ImportError:
        pytest.skip("the web UI browser tests need selenium (tools/venv.sh installs it)")


@pytest.fixture
def browser():
    _need_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
              "--window-size=1200,900", "--disable-extensions", "--no-first-run"):
        opts.add_argument(a)
    service = Service(executable_path=CHROMEDRIVER, log_output=os.path.join(BUILD, "chromedriver.log"))
    try:
        d = webdriver.Chrome(service=service, options=opts)
    except Exception as e:  # a broken browser install is an environment problem, said clearly
        pytest.fail(f"cannot start headless chromium ({CHROMIUM}) with {CHROMEDRIVER}: {e}")
    d.set_script_timeout(30)
    yield d
    d.quit()


def shot(d, name):
    os.makedirs(ARTIFACTS, exist_ok=True)
    path = os.path.join(ARTIFACTS, f"webui-{name}.png")
    assert d.save_screenshot(path), f"screenshot {path} failed"
    assert os.path.getsize(path) > 1000
    return path


def wait_for(d, js, timeout=30, what=None):
    """Poll a JS expression until truthy; returns its value."""
    deadline = time.monotonic() + timeout
    while True:
        v = d.execute_script("return (" + js + ");")
        if v:
            return v
        if time.monotonic() > deadline:
            logs = ""
            try:
                logs = "; console: " + json.dumps(d.get_log("browser"))[-2000:]
            except Exception:
                pass
            raise AssertionError(f"timed out waiting for {what or js}{logs}")
        time.sleep(0.05)


def throttle(d, bytes_per_s):
    d.execute_cdp_cmd("Network.enable", {})
    d.execute_cdp_cmd("Network.emulateNetworkConditions", {
        "offline": False, "latency": 0, "downloadThroughput": bytes_per_s, "uploadThroughput": -1})


def unthrottle(d):
    d.execute_cdp_cmd("Network.emulateNetworkConditions", {
        "offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})


def open_page(d, server, storage=None):
    d.get(server.url + "/")
    d.execute_script("localStorage.clear();")
    for k, v in (storage or {}).items():
        d.execute_script("localStorage.setItem(arguments[0], arguments[1]);", k, json.dumps(v))
    d.get(server.url + "/")
    wait_for(d, "document.body.dataset.busy === '0'", what="the page's script to start")


def send(d, text):
    from selenium.webdriver.common.by import By
    box = d.find_element(By.ID, "input")
    box.send_keys(text)
    d.find_element(By.ID, "send").click()


def stored_messages(d):
    convs = json.loads(d.execute_script("return localStorage.getItem('qwenc.convs');") or "[]")
    cur = json.loads(d.execute_script("return localStorage.getItem('qwenc.current');") or "null")
    conv = next(c for c in convs if c["id"] == cur)
    return conv["messages"]


LAST_ANSWER = "(() => { const b = document.querySelectorAll('.msg.assistant .body'); return b.length ? b[b.length - 1].textContent : ''; })()"
LAST_STATS = "(() => { const b = document.querySelectorAll('.msg.assistant .stats'); return b.length ? b[b.length - 1].textContent : ''; })()"


def test_browser_chat_streams_the_api_answer(server, browser):
    d = browser
    # long enough to fill a KV page (64 positions): a repeat hits the prefix cache
    prompt = "Hello there, tell me about the sea and the sky. " * 8
    want, finish, _ = chat_text(server, prompt, max_tokens=40)
    assert finish == "length", "the tiny model was expected to run to max_tokens greedily"
    open_page(d, server, {"qwenc.settings": {"max_tokens": 40}})
    # the tiny model has random weights: the page says so
    wait_for(d, "!document.getElementById('warning').hidden", what="the random-weights warning")
    assert "RANDOM WEIGHTS" in d.execute_script("return document.getElementById('warning').textContent;")
    wait_for(d, "document.getElementById('model-name').textContent !== 'qwenc'", what="the model name")

    # slow delivery: the answer is seen while it streams, then in full
    throttle(d, 3000)
    send(d, prompt)
    wait_for(d, "document.body.dataset.busy === '1' && " + LAST_ANSWER + ".length > 0", timeout=60,
             what="the first streamed tokens while busy")
    partial = d.execute_script("return " + LAST_ANSWER + ";")
    shot(d, "streaming")
    unthrottle(d)
    wait_for(d, "document.body.dataset.busy === '0'", timeout=60, what="the answer to finish")
    msgs = stored_messages(d)
    assert [m["role"] for m in msgs] == ["user", "assistant"]
    assert msgs[0]["content"] == prompt
    assert msgs[1]["content"] == want, "the page's streamed answer differs from the API's greedy answer"
    # seen in pieces: at 3 KB/s the 40 events take seconds, the poll 50 ms
    assert 0 < len(partial) < len(d.execute_script("return " + LAST_ANSWER + ";"))
    stats = d.execute_script("return " + LAST_STATS + ";")
    assert "40 tokens" in stats and "tok/s" in stats and "prompt tokens" in stats, stats
    # usage.prompt_tokens_details.cached_tokens, shown as prompt-cache hits
    assert re.search(r"\(\d+ from the prompt cache\)", stats), stats
    assert "stopped" not in stats
    shot(d, "answer")

    # regenerate: same greedy answer again, still two messages
    # (waits on the conversation's "updated" stamp, written when an answer
    # ends: a fast answer may come and go between two polls of "busy")
    updated = "JSON.parse(localStorage.getItem('qwenc.convs'))[0].updated"
    before = d.execute_script("return " + updated + ";")
    d.execute_script("document.querySelector('.msg.assistant .regen').click();")
    wait_for(d, f"document.body.dataset.busy === '0' && {updated} !== {before}", timeout=60,
             what="regenerate to finish")
    msgs = stored_messages(d)
    assert len(msgs) == 2 and msgs[1]["content"] == want
    # the same prompt again: its pages came from the prefix cache, and the page says so
    hits = re.search(r"\((\d+) from the prompt cache\)", d.execute_script("return " + LAST_STATS + ";"))
    assert hits and int(hits.group(1)) >= 64, d.execute_script("return " + LAST_STATS + ";")

    # the conversation survives a reload (localStorage)
    d.get(server.url + "/")
    wait_for(d, "document.querySelectorAll('.msg').length === 2", what="the conversation after a reload")
    assert d.execute_script("return document.querySelectorAll('#conv-list li').length;") == 1


def test_browser_stop_a_long_answer(server, browser):
    d = browser
    _, finish, j = chat_text(server, "Write a long story", max_tokens=400)
    assert finish == "length" and j["usage"]["completion_tokens"] == 400
    open_page(d, server, {"qwenc.settings": {"max_tokens": 400}})
    # ~150 bytes per SSE event: 400 tokens take ~60 s to arrive at 1 KB/s
    throttle(d, 1000)
    send(d, "Write a long story")
    wait_for(d, LAST_ANSWER + ".length > 0", timeout=60, what="the first tokens")
    d.find_element("id", "stop").click()
    wait_for(d, "document.body.dataset.busy === '0'", timeout=10, what="the page to stop")
    unthrottle(d)
    stats = d.execute_script("return " + LAST_STATS + ";")
    assert "stopped" in stats, stats
    assert not d.execute_script("return document.querySelector('.msg .err');"), "stop showed an error"
    msgs = stored_messages(d)
    assert msgs[-1]["stats"]["stopped"] is True
    assert msgs[-1]["stats"]["completion_tokens"] < 400
    # the send button is back and the server is fine
    assert d.execute_script("return !document.getElementById('send').hidden;")
    shot(d, "stopped")
    server.check_alive("after the page stopped a stream")


def test_browser_markdown_is_safe_and_rendered(server, browser):
    d = browser
    open_page(d, server)
    src = ("# Title\n\nSome **bold** and `code` and <img src=x onerror=\"window.pwned=1\">\n\n"
           "```python\nprint('<b>hi</b>')\n```\n\n- one\n- two\n\n"
           "[bad](javascript:window.pwned=1) [good](https://example.org/x)\n\n| a | b |\n|---|---|\n| 1 | 2 |")
    info = d.execute_script("""
        const n = window.qwencMarkdown(arguments[0]);
        const box = document.createElement('div'), body = document.createElement('div');
        box.className = 'msg assistant'; body.className = 'body';
        body.appendChild(n); box.appendChild(body);
        document.getElementById('messages').appendChild(box);  // styled as an answer
        return {
          h1: n.querySelector('h1') && n.querySelector('h1').textContent,
          strong: n.querySelector('strong') && n.querySelector('strong').textContent,
          imgs: n.querySelectorAll('img').length,
          text: n.textContent,
          code: n.querySelector('.codeblock pre code').textContent,
          lang: n.querySelector('.codeblock .head span').textContent,
          copy: !!n.querySelector('.codeblock button.copy'),
          bold_in_code: n.querySelectorAll('.codeblock b').length,
          items: n.querySelectorAll('ul li').length,
          links: Array.from(n.querySelectorAll('a')).map(a => a.getAttribute('href')),
          cells: n.querySelectorAll('td').length,
        };""", src)
    assert info["h1"] == "Title" and info["strong"] == "bold"
    assert info["imgs"] == 0 and '<img src=x onerror="window.pwned=1">' in info["text"]
    assert info["code"] == "print('<b>hi</b>')" and info["lang"] == "python" and info["copy"]
    assert info["bold_in_code"] == 0
    assert info["items"] == 2 and info["cells"] == 2
    assert info["links"] == ["https://example.org/x"], info["links"]
    assert d.execute_script("return window.pwned === undefined;")
    shot(d, "markdown")
    # the copy button copies (headless: the clipboard may refuse; the label says which)
    d.execute_script("document.querySelector('#messages .codeblock button.copy').click();")
    wait_for(d, "document.querySelector('#messages .codeblock button.copy').textContent !== 'Copy'",
             what="the copy button's feedback")


def test_browser_dark_mode_and_phone_width(server, browser):
    d = browser
    open_page(d, server, {"qwenc.settings": {"max_tokens": 8}})
    bg = "getComputedStyle(document.body).backgroundColor"
    light = d.execute_script("document.documentElement.setAttribute('data-theme', 'light'); return " + bg + ";")
    # the toggle goes auto -> light -> dark
    d.execute_script("localStorage.setItem('qwenc.theme', JSON.stringify('light')); location.reload();")
    wait_for(d, "document.body && document.body.dataset.busy === '0'")
    d.find_element("id", "theme").click()
    assert d.execute_script("return document.documentElement.getAttribute('data-theme');") == "dark"
    dark = d.execute_script("return " + bg + ";")
    assert dark != light, (light, dark)
    assert json.loads(d.execute_script("return localStorage.getItem('qwenc.theme');")) == "dark"
    send(d, "Hi")
    wait_for(d, "document.body.dataset.busy === '0' && " + LAST_STATS + ".length > 0", timeout=60)
    shot(d, "dark")
    d.set_window_size(390, 844)
    time.sleep(0.2)  # let layout settle after the resize (the check below is a layout fact, not a race)
    over = d.execute_script("return document.documentElement.scrollWidth - window.innerWidth;")
    assert over <= 0, f"the page is {over} px wider than a phone screen"
    assert d.execute_script("return getComputedStyle(document.getElementById('menu')).display;") != "none"
    assert d.execute_script("return document.getElementById('sidebar').getBoundingClientRect().right <= 0;")
    d.find_element("id", "menu").click()
    wait_for(d, "document.getElementById('sidebar').getBoundingClientRect().left >= 0", what="the sidebar to open")
    shot(d, "phone")


def test_browser_api_key(model_dir, browser):
    d = browser
    s = start_http(model_dir, "--api-key", "sekrit")
    try:
        open_page(d, s)
        wait_for(d, "!document.getElementById('error').hidden", what="the API key prompt")
        assert "API key" in d.execute_script("return document.getElementById('error').textContent;")
        assert d.execute_script("return !document.getElementById('settings').hidden;")
        key = d.find_element("id", "apikey")
        key.send_keys("sekrit")
        d.find_element("id", "temperature").click()  # blur: the key is saved on change
        wait_for(d, "document.getElementById('error').hidden && "
                    "document.getElementById('model-name').textContent !== 'qwenc'", what="the model after the key")
        assert json.loads(d.execute_script("return localStorage.getItem('qwenc.key');")) == "sekrit"
    finally:
        stop_checked(s)
