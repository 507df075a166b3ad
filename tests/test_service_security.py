"""``durable-graph serve`` safe by default on loopback (SPEC §20.5, issue 35), against a real
``serve`` process on SQLite: a page of another origin, in a real browser (Debian's chromium
driven by Playwright), can neither write nor read, while an allowed origin's page can use the
API; bodies must be JSON; the size limit holds while a body is read (before it, when declared)
and deep nesting is a 422; hostile bodies are 4xx, never 500; a refused request writes, queues
and cancels nothing; thread ids the service cannot answer for are refused before queueing."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import UnprocessableEntityError
from playwright.sync_api import Browser

from browser_support import headless_chromium
from durable_graph.service.guard import MAX_BODY_DEPTH, Origins, check_origin
from durable_graph.sqlite import SqliteCheckpointer
from service_support import APP, BIN, Backend, env_of, free_port, serving

LIMIT = 1 << 20
"""The test server's ``--max-body-bytes``."""
HI = {"messages": [{"role": "user", "content": "hi"}]}
JSON_TYPE = {"Content-Type": "application/json"}


def _say(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


# --- the servers ---------------------------------------------------------------------------------


class _PageServer(ThreadingHTTPServer):
    html = "<!doctype html><title>empty</title>"


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        assert isinstance(self.server, _PageServer)
        body = self.server.html.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def page_server(port: int) -> Iterator[_PageServer]:
    """A web site of its own on 127.0.0.1:``port``, serving its ``html`` at every path."""
    server = _PageServer(("127.0.0.1", port), _Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@dataclass(frozen=True)
class Served:
    url: str
    db: Path
    attacker: _PageServer
    friend: _PageServer

    @property
    def port(self) -> int:
        port = urlsplit(self.url).port
        assert port is not None
        return port

    def origin_of(self, site: _PageServer) -> str:
        return f"http://127.0.0.1:{site.server_address[1]}"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``serve`` on SQLite with a 1 MiB body limit, one worker, and the friend's site allowed;
    the attacker's site is another local port, not allowed."""
    tmp = tmp_path_factory.mktemp("security")
    db = tmp / "service.db"
    backend = Backend("sqlite", ("--sqlite", str(db)), {})
    with page_server(free_port()) as attacker, page_server(free_port()) as friend:
        allowed = f"http://127.0.0.1:{friend.server_address[1]}"
        extra = ["--max-body-bytes", str(LIMIT), "--allow-origin", allowed]
        with serving(backend, tmp, workers=1, extra=extra) as url:
            yield Served(url, db, attacker, friend)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with headless_chromium() as browser:
        yield browser


def _thread_count(url: str) -> int:
    count = httpx.post(url + "/threads/count", json={}, timeout=30).json()
    assert isinstance(count, int)
    return count


def _humans(values: dict[str, Any]) -> list[str]:
    return [m["content"] for m in values["messages"] if m["type"] == "human"]


# --- origins, in a real browser ------------------------------------------------------------------

_ATTACK = """<!doctype html><meta charset=utf-8><title>attack</title>
<iframe name=sink1></iframe><iframe name=sink2></iframe><iframe name=sink3></iframe>
<form id=form1 method=post enctype=text/plain target=sink1 action="API/threads"><input
 name='{"thread_id":"csrf-form","metadata":{"by":"csrf"},"x":"' value='"}'></form>
<form id=form2 method=post enctype=text/plain target=sink2 action="API/runs/wait"><input
 name='{"assistant_id":"agent","input":{"messages":[{"role":"user","content":"csrf"}]},"x":"'
 value='"}'></form>
<form id=form3 method=post target=sink3 action="API/threads"><input name=thread_id
 value=csrf-urlencoded></form>
<script>
const api = "API", victim = "VICTIM";
const input = {messages: [{role: "user", content: "csrf"}]};
window.results = {};
async function attempt(name, act) {
  try { window.results[name] = String(await act()); }
  catch (e) { window.results[name] = "error: " + e; }
}
function simple(path, body) {  // a "simple" request: no CORS preflight, sent as it is
  return fetch(api + path, {method: "POST", mode: "no-cors",
    headers: {"Content-Type": "text/plain"}, body: JSON.stringify(body)}).then(r => r.type);
}
function submitted(form, frame) {
  return new Promise(resolve => {
    document.querySelector("iframe[name=" + frame + "]").onload = () => resolve("loaded");
    document.getElementById(form).submit();
  });
}
(async () => {
  await attempt("create text/plain", () => simple("/threads",
    {thread_id: "csrf-text", metadata: {by: "csrf"}}));
  await attempt("create untyped blob", () => fetch(api + "/threads", {method: "POST",
    mode: "no-cors", body: new Blob([JSON.stringify({thread_id: "csrf-blob"})])}).then(r => r.type));
  await attempt("create json", () => fetch(api + "/threads", {method: "POST",
    headers: {"Content-Type": "application/json"},
    body: JSON.stringify({thread_id: "csrf-json"})}).then(r => r.status));
  await attempt("update state", () => simple("/threads/" + victim + "/state",
    {values: input}));
  await attempt("run on the victim", () => simple("/threads/" + victim + "/runs",
    {assistant_id: "agent", input: input}));
  await attempt("stateless run", () => simple("/runs/wait",
    {assistant_id: "agent", input: input, metadata: {by: "csrf"}}));
  await attempt("beacon", () => navigator.sendBeacon(api + "/threads",
    JSON.stringify({thread_id: "csrf-beacon"})));
  await attempt("read", () => fetch(api + "/threads/" + victim).then(r => r.text()));
  await attempt("form text/plain", () => submitted("form1", "sink1"));
  await attempt("form run", () => submitted("form2", "sink2"));
  await attempt("form urlencoded", () => submitted("form3", "sink3"));
  document.title = "done";
})();
</script>"""

_FRIEND = """<!doctype html><meta charset=utf-8><title>friend</title>
<script>
const api = "API", id = "FRIEND";
const json = {"Content-Type": "application/json"};
window.results = {};
async function attempt(name, act) {
  try { window.results[name] = String(await act()); }
  catch (e) { window.results[name] = "error: " + e; }
}
(async () => {
  await attempt("create", () => fetch(api + "/threads", {method: "POST", headers: json,
    body: JSON.stringify({thread_id: id, metadata: {by: "friend"}})}).then(r => r.status));
  await attempt("read", () => fetch(api + "/threads/" + id)
    .then(async r => r.status + " " + (await r.json()).metadata.by));
  await attempt("run", () => fetch(api + "/threads/" + id + "/runs/wait", {method: "POST",
    headers: json, body: JSON.stringify({assistant_id: "agent",
    input: {messages: [{role: "user", content: "hi"}]}})})
    .then(r => r.status + " " + r.headers.get("Content-Location")));
  await attempt("text/plain", () => fetch(api + "/threads", {method: "POST",
    headers: {"Content-Type": "text/plain"}, body: JSON.stringify({thread_id: id + "-text"})})
    .then(r => r.status));
  document.title = "done";
})();
</script>"""


def _visit(browser: Browser, url: str) -> dict[str, str]:
    """Open ``url`` in a fresh page, wait until its script is done; its ``results``."""
    page = browser.new_page()
    try:
        page.goto(url)
        page.wait_for_function("document.title === 'done'", timeout=60_000)
        results: dict[str, str] = page.evaluate("window.results")
        return results
    finally:
        page.close()


def test_a_page_of_another_origin_can_neither_write_nor_read(
    served: Served, browser: Browser
) -> None:
    """The attack of issue 35, in Chromium: a page on another local port posts to the API with
    every request a page may send without asking (text/plain and untyped fetches, a beacon,
    forms) and tries to read a thread. Nothing is created, written or run; the victim's thread
    is as it was. The same browser on the allowed origin's page uses the API (the control)."""
    client: Any = get_sync_client(url=served.url)
    victim = client.threads.create(metadata={"test": "victim"})["thread_id"]
    first = client.runs.create(victim, "agent", input=HI)
    client.runs.join(victim, first["run_id"])
    before = _thread_count(served.url)
    served.attacker.html = _ATTACK.replace("API", served.url).replace("VICTIM", victim)
    results = _visit(browser, served.origin_of(served.attacker))
    print(json.dumps(results, indent=1))
    # Preflighted, the browser itself stops these two; every other request was sent.
    refused_by_the_browser = {"read", "create json"}
    for name, result in results.items():
        assert result.startswith("error") == (name in refused_by_the_browser), results
    time.sleep(1.0)  # a beacon is sent after the page moves on
    assert _thread_count(served.url) == before
    for thread_id in ("csrf-text", "csrf-blob", "csrf-json", "csrf-beacon", "csrf-form"):
        assert client.threads.search(ids=[thread_id]) == []
    assert client.threads.search(metadata={"by": "csrf"}) == []
    assert [r["run_id"] for r in client.runs.list(victim)] == [first["run_id"]]
    assert _humans(client.threads.get_state(victim)["values"]) == ["hi"]

    friend_id = f"friend-{uuid.uuid4()}"
    served.friend.html = _FRIEND.replace("API", served.url).replace("FRIEND", friend_id)
    results = _visit(browser, served.origin_of(served.friend))
    assert results["create"] == "200", results
    assert results["read"] == "200 friend", results
    assert results["run"].startswith(f"200 /threads/{friend_id}/runs/"), results
    assert results["text/plain"] == "415", results  # an allowed page must send JSON too
    assert client.threads.get(friend_id)["metadata"]["by"] == "friend"
    assert client.threads.search(ids=[f"{friend_id}-text"]) == []


def test_foreign_origins_are_refused_on_every_route_the_servers_own_are_not(
    served: Served,
) -> None:
    port = served.port
    mark = uuid.uuid4().hex
    foreign = [
        "http://evil.example",
        f"http://127.0.0.1:{port + 1}",  # another local site
        f"https://127.0.0.1:{port}",  # another scheme
        f"http://localhost:{port}.evil.example",
        "null",  # a sandboxed frame, a file
        served.origin_of(served.attacker),
    ]
    routes: list[tuple[str, str, Any]] = [
        ("GET", "/ok", None),
        ("GET", "/threads/anything", None),
        ("POST", "/threads", {"metadata": {"test": mark}}),
        ("POST", "/threads/search", {}),
        ("POST", "/runs", {"assistant_id": "agent", "input": HI, "metadata": {"test": mark}}),
        ("OPTIONS", "/threads", None),
    ]
    with httpx.Client(base_url=served.url, timeout=30) as http:
        for origin in foreign:
            for method, path, body in routes:
                headers = {"Origin": origin, "Access-Control-Request-Method": "POST"}
                response = http.request(method, path, json=body, headers=headers)
                assert response.status_code in (400, 403), (origin, method, path, response.text)
                assert "access-control-allow-origin" not in response.headers
        # A browser's <img> or <script> sends no Origin, but says where it comes from.
        for site in ("cross-site", "same-site"):
            response = http.get("/threads/anything", headers={"Sec-Fetch-Site": site})
            assert response.status_code == 403, site
        assert http.get("/ok", headers={"Sec-Fetch-Site": "same-origin"}).status_code == 200
        # The server itself, reached by any of its loopback names, and the allowed origin.
        for own in (f"http://127.0.0.1:{port}", f"http://localhost:{port}", f"http://[::1]:{port}"):
            body = {"metadata": {"test": mark}}
            response = http.post("/threads", json=body, headers={"Origin": own})
            assert response.status_code == 200, (own, response.text)
        friend = served.origin_of(served.friend)
        response = http.post(
            "/threads", json={"metadata": {"test": mark}}, headers={"Origin": friend}
        )
        assert response.status_code == 200
        assert response.headers["access-control-allow-origin"] == friend
        preflight = http.options(
            "/threads",
            headers={
                "Origin": friend,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type,x-api-key",
            },
        )
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == friend
    found = get_sync_client(url=served.url).threads.search(metadata={"test": mark}, limit=100)
    assert len(found) == 4  # the three loopback names' and the friend's; no refused one


def test_origins_as_a_deployment_names_them() -> None:
    assert check_origin("HTTPS://App.Example.com:443/") == "https://app.example.com"
    assert check_origin("http://localhost:3000") == "http://localhost:3000"
    for bad in ("ftp://x.example", "https://x.example/path", "x.example", "null", "http://u@x"):
        with pytest.raises(ValueError, match="origin"):
            check_origin(bad)
    origins = Origins.of(["https://app.example.com", ""], r"https://[a-z0-9-]+\.preview\.example")
    assert origins.allows("https://app.example.com")
    assert origins.allows("https://app.example.com:443")
    assert origins.allows("https://pr-7.preview.example")
    assert not origins.allows("https://pr-7.preview.example.evil.com")
    assert not origins.allows("http://app.example.com")
    assert not origins.allows("null")
    assert Origins.of(["*"]).allows("null") and not Origins.of([]).configured


def test_langgraph_json_http_cors_allows_its_origins(tmp_path: Path) -> None:
    """LangGraph's own setting (``http.cors`` in langgraph.json) allows origins, as
    ``langgraph dev`` reads it; others stay refused."""
    config = tmp_path / "langgraph.json"
    config.write_text(
        json.dumps(
            {
                "dependencies": [str(APP)],
                "graphs": {"agent": f"{APP}/agent.py:graph"},
                "http": {
                    "cors": {
                        "allow_origins": ["https://app.example.com"],
                        "allow_origin_regex": r"https://[a-z0-9-]+\.preview\.example\.com",
                        "expose_headers": ["Content-Location"],
                    }
                },
            }
        )
    )
    backend = Backend("sqlite", ("--sqlite", str(tmp_path / "cors.db")), {})
    with serving(backend, tmp_path, workers=0, config=config) as url:
        for origin, allowed in (
            ("https://app.example.com", True),
            ("https://pr-12.preview.example.com", True),
            ("https://evil.example.com", False),
            ("https://pr-12.preview.example.com.evil.io", False),
        ):
            response = httpx.post(url + "/threads", json={}, headers={"Origin": origin})
            assert response.status_code == (200 if allowed else 403), origin
            if allowed:
                assert response.headers["access-control-allow-origin"] == origin
                assert response.headers["access-control-expose-headers"] == "Content-Location"


def test_a_malformed_allowed_origin_is_a_usage_error(tmp_path: Path) -> None:
    argv = [str(BIN), "--sqlite", str(tmp_path / "x.db"), "serve", "--allow-origin"]
    backend = Backend("sqlite", (), {})
    done = subprocess.run(
        [*argv, "https://ok.example,ftp://files.example"],
        env=env_of(backend),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=APP,
    )
    assert done.returncode == 2, done.stderr
    assert "--allow-origin" in done.stderr and "ftp://files.example" in done.stderr


# --- bodies: JSON, of a bounded size and depth -----------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/json; charset=latin-1",
        "application/jsonp",
    ],
)
def test_bodies_must_be_application_json(served: Served, content_type: str) -> None:
    thread_id = f"typed-{uuid.uuid4()}"
    body = json.dumps({"thread_id": thread_id})
    headers = {"Content-Type": content_type}
    with httpx.Client(base_url=served.url, timeout=30) as http:
        for path in ("/threads", "/threads/search", "/runs"):
            response = http.post(path, content=body, headers=headers)
            assert response.status_code == 415, (path, response.text)
            assert "application/json" in response.json()["detail"]
        # An empty form is refused too: it would create a thread with the defaults.
        before = _thread_count(served.url)
        assert http.post("/threads", content=b"", headers=headers).status_code == 415
        assert _thread_count(served.url) == before
    assert get_sync_client(url=served.url).threads.search(ids=[thread_id]) == []


def test_json_bodies_in_any_spelling_are_served(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as http:
        for content_type in ("application/json", "Application/JSON; charset=UTF-8"):
            response = http.post("/threads", content=b"{}", headers={"Content-Type": content_type})
            assert response.status_code == 200, content_type
        # No type at all: read as JSON (curl, scripts); a browser sending one is refused above.
        assert http.post("/threads/search", content=b"{}").status_code == 200
        assert http.post("/threads", content=b"").status_code == 200  # the SDK's empty posts


def _exchange(url: str, head: str, chunks: Iterable[bytes] = (), wait: float = 10.0) -> bytes:
    """One request on a raw socket: ``head`` (request line and headers), then ``chunks`` (as
    long as the server takes them); what the server answers within ``wait`` seconds."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    with socket.create_connection((parts.hostname, parts.port), timeout=wait) as s:
        s.sendall(head.replace("\n", "\r\n").encode() + b"\r\n")
        for chunk in chunks:
            try:
                s.sendall(chunk)
            except OSError:  # the server has answered and closed
                break
        data = b""
        try:
            while piece := s.recv(65536):
                data += piece
        except ConnectionResetError:
            pass
        return data


def _status(answer: bytes) -> int:
    assert answer.startswith(b"HTTP/1.1 "), answer[:200]
    return int(answer.split(b" ", 2)[1])


def test_a_declared_body_over_the_limit_is_refused_before_it_is_sent(served: Served) -> None:
    """A client declaring 96 MiB gets 413 at once, on read-only routes too: the server never
    waits for (nor reads) the body. Before, it read all of it (+288 MiB of memory)."""
    host = urlsplit(served.url).netloc
    for method, path in (
        ("POST", "/threads"),
        ("POST", "/threads/search"),
        ("GET", "/ok"),
        ("GET", "/threads/anything/state"),
    ):
        head = (
            f"{method} {path} HTTP/1.1\nHost: {host}\nContent-Type: application/json\n"
            f"Content-Length: {96 * 2**20}\n"
        )
        started = time.monotonic()
        answer = _exchange(served.url, head)  # the body is never sent
        assert _status(answer) == 413, (path, answer[:300])
        assert b"over 1048576 bytes" in answer
        assert time.monotonic() - started < 5


def test_a_chunked_body_is_cut_off_at_the_limit(served: Served) -> None:
    """Without a declared length, the server reads up to the limit and answers 413 without
    waiting for the rest (the last chunk is never sent)."""
    host = urlsplit(served.url).netloc
    head = (
        f"POST /threads/search HTTP/1.1\nHost: {host}\nContent-Type: application/json\n"
        "Transfer-Encoding: chunked\n"
    )
    piece = 64 * 1024
    chunk = f"{piece:x}\r\n".encode() + b" " * piece + b"\r\n"
    chunks = [chunk] * (LIMIT // piece + 1)  # just over the limit, and no final chunk
    answer = _exchange(served.url, head, chunks)
    assert _status(answer) == 413, answer[:300]


def test_a_body_up_to_the_limit_is_served_one_byte_more_is_not(served: Served) -> None:
    note = "x" * (LIMIT - 200)
    body = json.dumps({"metadata": {"note": note}}).encode()
    response = httpx.post(served.url + "/threads", content=body, headers=JSON_TYPE, timeout=30)
    assert response.status_code == 200
    assert len(response.json()["metadata"]["note"]) == len(note)
    body += b" " * (LIMIT - len(body) + 1)
    head = (
        f"POST /threads HTTP/1.1\nHost: {urlsplit(served.url).netloc}\n"
        f"Content-Type: application/json\nContent-Length: {len(body)}\n"
    )
    assert _status(_exchange(served.url, head, [body])) == 413


def _nested(depth: int) -> dict[str, Any]:
    """A body of ``depth`` nested objects (the body itself is one)."""
    value: Any = 1
    for _ in range(depth - 1):
        value = {"a": value}
    return {"metadata": value}


def test_deep_nesting_is_a_422_never_a_500(served: Served) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    with httpx.Client(base_url=served.url, timeout=30, headers=JSON_TYPE) as http:
        thread_id = http.post("/threads", json={}).json()["thread_id"]
        for path in ("/threads", "/threads/search", f"/threads/{thread_id}/runs", "/runs/wait"):
            for body in (deep, b'{"input":' + deep + b"}"):
                response = http.post(path, content=body)
                assert response.status_code == 422, (path, response.text[:200])
                assert "nests deeper" in response.json()["detail"]
        at_limit = http.post("/threads", json=_nested(MAX_BODY_DEPTH))
        assert at_limit.status_code == 200, at_limit.text[:300]
        over = http.post("/threads", json=_nested(MAX_BODY_DEPTH + 1))
        assert over.status_code == 422 and f"deeper than {MAX_BODY_DEPTH}" in over.text


def test_hostile_bodies_get_a_4xx_never_a_500_and_change_nothing(served: Served) -> None:
    client: Any = get_sync_client(url=served.url)
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "agent", input=HI)
    history = len(client.threads.get_history(thread_id, limit=100))
    runs = f"/threads/{thread_id}/runs"
    state = f"/threads/{thread_id}/state"
    cases: list[tuple[str, bytes]] = [
        ("/threads", b'{"metadata": {"n": 1e999}}'),
        ("/threads", b'{"metadata": {"n": -1e999}}'),
        ("/threads", b'{"metadata": {"n": ' + b"9" * 400 + b"}}"),
        ("/threads", b'{"metadata": {"n": ' + b"9" * 5000 + b"}}"),
        ("/threads", b'{"metadata": {"n": NaN}}'),
        ("/threads", b'{"metadata": {"n": Infinity}}'),
        ("/threads", b'{"metadata": {"s": "\xff\xfe"}}'),  # not UTF-8
        ("/threads", b'{"metadata": {"s": "\\ud800"}}'),  # a lone surrogate
        ("/threads", b'{"metadata": {"\\udfff": 1}}'),
        ("/threads", b'{"metadata": {"a": 1}, "metadata": {"b": 2}}'),  # a key twice
        ("/threads", b"\xef\xbb\xbf{}"),  # a byte order mark
        ("/threads", b"[]"),
        ("/threads", b'"a string"'),
        ("/threads", b"{"),
        (state, b'{"values": {"messages": []}, "as_node": "nobody"}'),
        (state, b'{"values": [1, 2]}'),
        (state, b'{"values": {"messages": 5}}'),
        (runs, b'{"assistant_id": "agent", "command": "resume"}'),
        (runs, b'{"assistant_id": "agent", "command": {"resume": 1, "goto": 5, "x": 1}}'),
        (runs, b'{"assistant_id": "agent", "checkpoint": "latest"}'),
        (runs, b'{"assistant_id": "agent", "checkpoint_id": 7}'),
        (runs, b'{"assistant_id": "agent", "interrupt_before": 5}'),
        (runs, b'{"assistant_id": "agent", "context": [1]}'),
        (runs, b'{"assistant_id": "agent", "config": {"configurable": 5}}'),
        (runs, b'{"assistant_id": "agent", "metadata": [1]}'),
        (runs, b'{"assistant_id": "agent", "stream_mode": {"values": 1}}'),
        (runs, b'{"assistant_id": ["agent"]}'),
        (runs, b'{"assistant_id": "agent", "input": {"n": 1e999}}'),
    ]
    with httpx.Client(base_url=served.url, timeout=30, headers=JSON_TYPE) as http:
        before = _thread_count(served.url)
        for path, body in cases:
            response = http.post(path, content=body)
            assert 400 <= response.status_code < 500, (path, body[:80], response.text[:300])
            assert response.json()["detail"], (path, body[:80])
        assert _thread_count(served.url) == before
    assert len(client.threads.get_history(thread_id, limit=100)) == history
    assert len(client.runs.list(thread_id)) == 1


# --- a refused request writes nothing --------------------------------------------------------


def _wait_status(client: Any, thread_id: str, run_id: str, status: str) -> None:
    deadline = time.monotonic() + 30
    while client.runs.get(thread_id, run_id)["status"] != status:
        assert time.monotonic() < deadline, f"run never became {status}"
        time.sleep(0.05)


def test_an_interrupt_refused_for_its_config_cancels_nothing(served: Served) -> None:
    """``multitask_strategy: interrupt`` (or ``rollback``) with a bad ``config`` is a 422, and
    the other client's running run goes on (it used to be cancelled first)."""
    client: Any = get_sync_client(url=served.url)
    thread_id = client.threads.create()["thread_id"]
    first = client.runs.create(thread_id, "agent", input=_say("slow 4"))
    _wait_status(client, thread_id, first["run_id"], "running")
    with httpx.Client(base_url=served.url, timeout=30) as http:
        for strategy in ("interrupt", "rollback"):
            for config in ({"recursion_limit": -1}, "fast", {"tags": "x"}):
                body = {
                    "assistant_id": "agent",
                    "input": HI,
                    "multitask_strategy": strategy,
                    "config": config,
                }
                response = http.post(f"/threads/{thread_id}/runs", json=body)
                assert response.status_code == 422, response.text
    client.runs.join(thread_id, first["run_id"])
    # "success", not "interrupted": no refused request cancelled it.
    assert client.runs.get(thread_id, first["run_id"])["status"] == "success"
    assert [r["run_id"] for r in client.runs.list(thread_id)] == [first["run_id"]]


def test_a_refused_stateless_run_leaves_no_thread(served: Served) -> None:
    refused: list[dict[str, Any]] = [
        {"config": {"recursion_limit": 0}},
        {"config": {"configurable": []}},
        {"context": "x"},
        {"command": "go"},
        {"checkpoint": 1},
    ]
    before = _thread_count(served.url)
    with httpx.Client(base_url=served.url, timeout=30) as http:
        for path in ("/runs", "/runs/wait", "/runs/stream"):
            for bad in refused:
                response = http.post(path, json={"assistant_id": "agent", "input": HI, **bad})
                assert response.status_code == 422, (path, bad, response.text)
    assert _thread_count(served.url) == before


UNANSWERABLE = ["café", "日本語", "a\r\nb", "a\nSet-Cookie: x=1", "a\x00b", "tab\there", "..", "."]
"""Thread ids the service cannot answer for: not ASCII, CR/LF (headers), NUL, controls, dot
segments (resolved away by clients)."""


def _entries(db: Path) -> int:
    with SqliteCheckpointer.open(str(db)) as store:
        return len(store.run_queue.entries(limit=1000))  # the module queues far fewer


def test_thread_ids_the_service_cannot_answer_for_are_refused_before_queueing(
    served: Served,
) -> None:
    """Each is a 422 before anything is queued, so a client retrying it never runs it twice
    (they used to be queued, then answered 500 or a dropped connection)."""
    client: Any = get_sync_client(url=served.url)
    entries, threads = _entries(served.db), _thread_count(served.url)
    with httpx.Client(base_url=served.url, timeout=30) as http:
        for thread_id in UNANSWERABLE:
            path = f"/threads/{quote(thread_id, safe='')}"
            path = path.replace("/.", "/%2E").replace("%2E.", "%2E%2E")  # unresolved
            body = {"assistant_id": "agent", "input": HI, "if_not_exists": "create"}
            for attempt in range(2):  # a retry
                for route in ("/runs", "/runs/wait", "/runs/stream"):
                    response = http.post(path + route, json=body)
                    assert response.status_code == 422, (thread_id, attempt, response.text)
                    assert "thread_id" in response.json()["detail"]
            response = http.post("/threads", json={"thread_id": thread_id})
            assert response.status_code == 422, thread_id
            assert http.get(path).status_code == 422, thread_id
        for thread_id in ("a/b", "a?b", "a#b", "100%", "x" * 513):
            response = http.post("/threads", json={"thread_id": thread_id})
            assert response.status_code == 422, thread_id
    for thread_id in ("café", "日本語"):  # what the SDK can send (it refuses control characters)
        with pytest.raises(UnprocessableEntityError):
            client.runs.create(thread_id, "agent", input=HI, if_not_exists="create")
        with pytest.raises(UnprocessableEntityError):
            client.threads.create(thread_id=thread_id)
    assert _entries(served.db) == entries
    assert _thread_count(served.url) == threads
    # Ids the service answers for, spaces and punctuation included, travel encoded.
    for thread_id in ("chat 1", "user:42|a;b", "a+b=c&d"):
        run = client.runs.create(thread_id, "agent", input=HI, if_not_exists="create")
        assert run["thread_id"] == thread_id
        assert client.runs.join(thread_id, run["run_id"])["messages"][-1]["type"] == "ai"
