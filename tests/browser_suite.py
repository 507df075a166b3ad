"""LangGraph's React hook ``useStream`` in headless Chromium against ``durable-graph serve`` and
``langgraph dev`` (SPEC §25).

`make browser-suite` runs this module (not part of `make test`: it installs packages from npm).
A chat page (tests/browser_hook/app.jsx: ``useStream`` from ``@langchain/langgraph-sdk/react``
with its default options) is bundled at test time with esbuild, React and the pinned SDK
(installed under ``build/js``, `tests.js_support`) and served from a port of its own (an origin
``serve`` is told to allow, as a Vite dev server's would be). Against ``serve`` on SQLite and
PostgreSQL and, with ``DURABLE_GRAPH_LANGGRAPH_DEV`` set, against LangGraph's own ``langgraph dev``
serving the same graph (tests/service_js/chat.py), Chromium types and clicks: a reply streams in
token by token; an interrupt is answered; a message edited branches from the checkpoint before it;
stop ends a reply mid-way and the run is cancelled; a reload mid-run re-joins the run and sees the
rest of its tokens. Two scenarios set the one option the hook needs for them: branching
``fetchStateHistory`` (the history the hook finds a message's checkpoint in), the reload
``reconnectOnMount`` (without it the hook sends ``on_disconnect: "cancel"``: a reload cancels).
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from playwright.sync_api import Browser, Page

from browser_support import headless_chromium
from js_support import CONFIG, SDK_PINNED, npm_dir
from service_support import SERVED_KINDS, served_url

APP = Path(__file__).parent / "browser_hook" / "app.jsx"
PACKAGES = [
    f"@langchain/langgraph-sdk@{SDK_PINNED}",
    "@langchain/core@1.5.0",
    "react@19.3.1",
    "react-dom@19.3.1",
    "esbuild@0.28.2",
]
INDEX = (
    '<!doctype html><html><head><meta charset="utf-8"><title>useStream</title></head>'
    '<body><div id="root"></div><script type="module" src="app.js"></script></body></html>'
)
SEEN = """
window.__seen = [];
new MutationObserver(() => {
  for (const li of document.querySelectorAll('#messages li[data-type="ai"]')) {
    const last = window.__seen[window.__seen.length - 1];
    if (li.textContent !== last) window.__seen.push(li.textContent);
  }
}).observe(document, { subtree: true, childList: true, characterData: true });
"""
"""An init script (run on every load): each text an AI message of the page showed, in order."""


def reply_to(text: str) -> str:
    """tests/service_js/chat.py's reply to ``text``."""
    words = 120 if text.startswith("long") else 8
    return f"echo {text}: " + " ".join(f"word{i}" for i in range(words))


class Quiet(SimpleHTTPRequestHandler):
    """The page's files, without a log line a request."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def page_origin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The page, bundled, served from a port of its own: its origin."""
    folder = npm_dir(f"browser-{SDK_PINNED}", PACKAGES)
    shutil.copyfile(APP, folder / APP.name)
    site = tmp_path_factory.mktemp("site")
    subprocess.run(
        [str(folder / "node_modules" / ".bin" / "esbuild"), APP.name, "--bundle",
         f"--outfile={site / 'app.js'}", "--format=esm", "--jsx=automatic",
         "--define:process.env.NODE_ENV=\"production\"", "--log-level=warning"],
        cwd=folder, check=True,
    )  # fmt: skip
    (site / "index.html").write_text(INDEX, encoding="utf-8")
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module", params=SERVED_KINDS)
def api(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, page_origin: str
) -> Iterator[str]:
    with served_url(
        request, tmp_path_factory, CONFIG, "hook", extra=["--allow-origin", page_origin]
    ) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with headless_chromium() as chromium:
        yield chromium


@pytest.fixture
def open_page(browser: Browser, page_origin: str, api: str) -> Iterator[Any]:
    """A function opening the page in a new context (``reconnect``: with ``reconnectOnMount``;
    ``history``: with ``fetchStateHistory``)."""
    context = browser.new_context()

    def opening(reconnect: bool = False, history: bool = False) -> Page:
        page = context.new_page()
        page.add_init_script(SEEN)
        page.set_default_timeout(30_000)
        query = f"?api={quote(api, safe='')}" + ("&reconnect=1" if reconnect else "")
        query += "&history=1" if history else ""
        page.goto(f"{page_origin}/index.html{query}")
        page.wait_for_selector("#draft")
        return page

    try:
        yield opening
    finally:
        context.close()


def messages(page: Page) -> list[str]:
    texts: list[str] = page.eval_on_selector_all(
        "#messages li", "els => els.map(e => e.dataset.type + ': ' + e.textContent)"
    )
    return texts


def send(page: Page, text: str) -> None:
    page.fill("#draft", text)
    page.click("#send")


def settled(page: Page, last: str) -> None:
    """Wait until the page's last message is ``last`` and the hook is no longer loading."""
    page.wait_for_function(
        "last => { const li = [...document.querySelectorAll('#messages li')].pop();"
        " return li && li.textContent === last"
        " && document.querySelector('#loading').textContent === 'false'; }",
        arg=last,
    )
    assert page.text_content("#error") == ""


def showing(page: Page, fragment: str) -> None:
    page.wait_for_function(
        "f => [...document.querySelectorAll('#messages li')].some(e => e.textContent.includes(f))",
        arg=fragment,
    )


def thread_of(page: Page) -> str:
    thread = page.evaluate("() => new URLSearchParams(location.search).get('thread')")
    assert isinstance(thread, str), page.url
    return thread


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def test_tokens_stream_in(open_page: Any) -> None:
    page = open_page()
    send(page, "hello")
    settled(page, reply_to("hello"))
    assert messages(page) == ["human: hello", f"ai: {reply_to('hello')}"]
    seen: list[str] = page.evaluate("() => window.__seen")
    partial = [text for text in seen if text != reply_to("hello")]
    assert len(partial) >= 3, seen
    assert all(reply_to("hello").startswith(text) for text in seen), seen


def test_interrupt_resumed(open_page: Any, api: str) -> None:
    page = open_page()
    send(page, "ask")
    page.wait_for_selector("#resume")
    assert page.text_content("#interrupt") == "what is your name?Ada"
    assert get(f"{api}/threads/{thread_of(page)}")["status"] == "interrupted"
    page.click("#resume")
    settled(page, "hello Ada")
    assert messages(page) == ["human: ask", "ai: hello Ada"]
    assert page.text_content("#interrupt") == ""
    assert get(f"{api}/threads/{thread_of(page)}")["status"] == "idle"


def test_branch_from_an_earlier_checkpoint(open_page: Any, api: str) -> None:
    page = open_page(history=True)
    send(page, "first")
    settled(page, reply_to("first"))
    send(page, "second")
    settled(page, reply_to("second"))
    page.evaluate("() => window.__edit(2, 'other')")
    settled(page, reply_to("other"))
    assert messages(page) == [
        "human: first", f"ai: {reply_to('first')}", "human: other", f"ai: {reply_to('other')}",
    ]  # fmt: skip
    state = get(f"{api}/threads/{thread_of(page)}/state")
    texts = [m["content"] for m in state["values"]["messages"]]
    assert texts == ["first", reply_to("first"), "other", reply_to("other")]


def test_stop_mid_reply(open_page: Any, api: str) -> None:
    page = open_page()
    send(page, "long stop")
    showing(page, "word3")
    page.click("#stop")
    page.wait_for_function("() => document.querySelector('#loading').textContent === 'false'")
    thread = thread_of(page)
    deadline = time.monotonic() + 15
    while (runs := get(f"{api}/threads/{thread}/runs"))[0]["status"] in ("pending", "running"):
        assert time.monotonic() < deadline, runs
        time.sleep(0.2)
    assert [run["status"] for run in runs] == ["interrupted"]
    time.sleep(1)
    assert not any("word119" in text for text in messages(page)), messages(page)
    state = get(f"{api}/threads/{thread}/state")
    assert all(m["content"] != reply_to("long stop") for m in state["values"]["messages"])


def test_reload_mid_run_rejoins(open_page: Any, api: str) -> None:
    page = open_page(reconnect=True)
    send(page, "long reload")
    showing(page, "word3")
    thread = thread_of(page)
    page.reload()
    page.wait_for_selector("#draft")
    assert thread_of(page) == thread
    settled(page, reply_to("long reload"))
    assert messages(page) == ["human: long reload", f"ai: {reply_to('long reload')}"]
    seen: list[str] = page.evaluate("() => window.__seen")
    assert any(text != reply_to("long reload") for text in seen), "no token after the reload"
    assert [run["status"] for run in get(f"{api}/threads/{thread}/runs")] == ["success"]
