"""Webhooks on run completion (SPEC §20.3) through real ``serve`` processes (SQLite, PostgreSQL)
and LangGraph's SDK: a run's end is POSTed once to its ``webhook``, signed; a receiver that is
down when the run ends gets the delivery once it is up (the queue retries it with its backoff);
a cancelled run's webhook says so. Deliveries cannot hurt (issue 46): internal receivers are
refused at create unless ``langgraph.json``'s ``webhooks.url`` policy allows them (these tests'
receivers listen on loopback, allowed by ``service_app/webhooks.json``; the refusals are checked
on servers without workers, so nothing is ever sent anywhere but loopback) and again at delivery;
a delivery has a total deadline, reads no answer body, and runs on slots of its own; user info is
refused and the log shows a receiver's scheme and host only.

``DURABLE_GRAPH_WEBHOOK_DOWN=60`` keeps the receiver down for a minute (default 4 s)."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import select
import socket
import socketserver
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client

from service_support import (
    APP,
    BIN,
    CONFIG,
    Backend,
    env_of,
    free_port,
    process,
    serving,
    store_backend,
)

SECRET = "test-webhook-secret"
HI = {"messages": [{"role": "user", "content": "hi"}]}
DOWN = float(os.environ.get("DURABLE_GRAPH_WEBHOOK_DOWN", "4"))
DEADLINE = 6.0
"""The deliveries' total deadline in these servers (``DURABLE_GRAPH_WEBHOOK_TIMEOUT``)."""
LOOPBACK_POLICY = APP / "webhooks.json"
"""The test app with ``webhooks.url``: loopback allowed, only the host ``127.0.0.1``."""


class Receiver:
    """An HTTP receiver on ``port`` that records what is POSTed to it."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}/hook?key=abc"
        self.got: list[tuple[dict[str, str], bytes]] = []
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> None:
        got = self.got

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                got.append(({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def wait(self, count: int, seconds: float) -> list[dict[str, Any]]:
        deadline = time.monotonic() + seconds
        while len(self.got) < count:
            assert time.monotonic() < deadline, f"{len(self.got)} deliveries, not {count}"
            time.sleep(0.1)
        return [json.loads(body) for _, body in self.got]


@dataclass
class Served:
    url: str
    logs: Path

    def log(self) -> str:
        return "".join(p.read_text(errors="replace") for p in sorted(self.logs.glob("*.log")))


def _backend(kind: str, request: pytest.FixtureRequest, tmp: pytest.TempPathFactory) -> Backend:
    base = store_backend(kind, request, tmp, "wh")
    env = {
        "DURABLE_GRAPH_WEBHOOK_SECRET": SECRET,
        "DURABLE_GRAPH_WEBHOOK_TIMEOUT": str(DEADLINE),
        "LG_WEBHOOK_TEAM": "blue",  # `LOOPBACK_POLICY`'s webhooks.headers template reads it
    }
    return Backend(base.name, base.args, {**base.env, **env})


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """``serve --workers 1`` (the default) whose policy allows the loopback receivers."""
    backend = _backend(request.param, request, tmp_path_factory)
    logs = tmp_path_factory.mktemp("logs")
    with serving(backend, logs, workers=1, config=LOOPBACK_POLICY) as url:
        yield Served(url, logs)


@pytest.fixture(scope="module")
def url(served: Served) -> str:
    return served.url


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def unworked(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    """Two servers without workers (what they accept is never delivered): the default policy's
    and `LOOPBACK_POLICY`'s (URLs)."""
    backend = _backend(request.param, request, tmp_path_factory)
    logs = tmp_path_factory.mktemp("logs")
    with (
        serving(backend, logs, workers=0) as strict,
        serving(backend, logs, workers=0, config=LOOPBACK_POLICY) as loose,
    ):
        yield strict, loose


def _signed(headers: dict[str, str], body: bytes) -> bool:
    fields = dict(part.split("=", 1) for part in headers["x-durable-graph-signature"].split(","))
    mac = hmac.new(SECRET.encode(), fields["t"].encode() + b"." + body, hashlib.sha256)
    return (
        hmac.compare_digest(mac.hexdigest(), fields["v1"])
        and abs(time.time() - int(fields["t"])) < 300
    )


def _ended_run(url: str, webhook: str) -> dict[str, Any]:
    """A run with ``webhook`` on a new thread of ``url``'s server, joined to its end."""
    client: Any = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    run: dict[str, Any] = client.runs.create(thread_id, "agent", input=HI, webhook=webhook)
    client.runs.join(thread_id, run["run_id"])
    return run


def test_a_finished_run_is_posted_once_signed(url: str) -> None:
    receiver = Receiver(free_port())
    receiver.start()
    try:
        run = _ended_run(url, receiver.url)
        thread_id = run["thread_id"]
        [posted] = receiver.wait(1, 30)
        time.sleep(1.0)
        assert len(receiver.got) == 1  # once
        assert posted["run_id"] == run["run_id"] and posted["thread_id"] == thread_id
        assert posted["status"] == "success"
        assert [m["type"] for m in posted["values"]["messages"]] == ["human", "ai"]
        headers, body = receiver.got[0]
        assert headers["content-type"] == "application/json" and _signed(headers, body)
        assert headers["x-team"] == "team-blue"  # webhooks.headers, its template resolved
    finally:
        receiver.stop()


def test_a_receiver_that_was_down_gets_the_delivery_when_it_is_up(url: str) -> None:
    receiver = Receiver(free_port())  # nothing listens yet
    run = _ended_run(url, receiver.url)
    time.sleep(DOWN)  # the first attempts find no one
    receiver.start()
    try:
        [posted] = receiver.wait(1, 30 + 2 * DOWN)
        assert posted["run_id"] == run["run_id"] and posted["status"] == "success"
        assert _signed(*receiver.got[0])
    finally:
        receiver.stop()


def test_a_cancelled_runs_webhook_says_so(url: str) -> None:
    receiver = Receiver(free_port())
    receiver.start()
    try:
        client: Any = get_sync_client(url=url)
        thread_id = client.threads.create()["thread_id"]
        say = {"messages": [{"role": "user", "content": "slow"}]}
        run = client.runs.create(thread_id, "agent", input=say, webhook=receiver.url)
        deadline = time.monotonic() + 30
        while client.runs.get(thread_id, run["run_id"])["status"] != "running":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        client.runs.cancel(thread_id, run["run_id"])
        [posted] = receiver.wait(1, 30)
        assert posted["run_id"] == run["run_id"] and posted["status"] == "interrupted"
    finally:
        receiver.stop()


INTERNAL = [
    "http://169.254.169.254/latest/meta-data/",  # link-local: the cloud's metadata
    "http://[::1]:5432/",
    "http://0.0.0.0:22/",
    "http://localhost:6379/",
    "http://LocalHost./",
    "http://db.localhost/",
    "http://10.0.0.1/",
    "http://172.16.0.1/",
    "http://192.168.1.1/",
    "http://100.64.0.1/",  # shared (carrier-grade NAT) space
    "http://[fd00::1]/",
    "http://[fe80::1]/",
    "http://224.0.0.1/",  # multicast
    "http://240.0.0.1/",  # reserved
    "http://[::]/",
    "http://[::ffff:127.0.0.1]/",  # loopback written as IPv6
    "http://2130706433/",  # 127.0.0.1 as one number
    "http://127.1/",
    "http://0x7f.0.0.1/",
]


def _run_request(client: httpx.Client, webhook: str) -> httpx.Response:
    thread_id = client.post("/threads", json={}).json()["thread_id"]
    return client.post(
        f"/threads/{thread_id}/runs",
        json={"assistant_id": "agent", "input": HI, "webhook": webhook},
    )


def _refused(response: httpx.Response) -> bool:
    return response.status_code == 422 and "webhook" in response.json()["detail"]


def test_internal_receivers_are_refused_at_create(unworked: tuple[str, str]) -> None:
    strict, _ = unworked
    receiver = Receiver(free_port())
    receiver.start()
    try:
        with httpx.Client(base_url=strict, timeout=30) as client:
            local = [f"http://127.0.0.1:{receiver.port}/hook", f"http://localhost:{receiver.port}/"]
            for webhook in [*INTERNAL, *local]:
                assert _refused(_run_request(client, webhook)), webhook
            # Every route that stores a webhook: waits, streams, crons.
            for path in ("/runs/wait", "/runs/stream", "/runs/crons"):
                body = {"assistant_id": "agent", "input": HI, "webhook": "http://10.0.0.1/"}
                if path.endswith("crons"):
                    body["schedule"] = "0 0 1 1 *"
                assert _refused(client.post(path, json=body)), path
            thread_id = client.post("/threads", json={}).json()["thread_id"]
            cron = {"assistant_id": "agent", "schedule": "0 0 1 1 *", "webhook": local[0]}
            assert _refused(client.post(f"/threads/{thread_id}/runs/crons", json=cron))
            assert client.get(f"/threads/{thread_id}/runs").json() == []
            # A public receiver is accepted by the default policy (never run here: no workers).
            assert _run_request(client, "https://hooks.example.com/x").status_code == 200
        assert receiver.got == []
    finally:
        receiver.stop()


def test_the_policy_in_langgraph_json_allows_an_internal_receiver_on_purpose(
    unworked: tuple[str, str],
) -> None:
    _, loose = unworked  # loopback allowed, and only the host 127.0.0.1
    with httpx.Client(base_url=loose, timeout=30) as client:
        assert _run_request(client, f"http://127.0.0.1:{free_port()}/hook").status_code == 200
        for webhook in (
            "http://10.0.0.1/",  # private: still refused
            "http://169.254.169.254/",  # link-local: always refused
            "http://[::1]:5432/",  # loopback, but not an allowed domain
            "http://localhost:6379/",
            "http://93.184.216.34/",  # public, but not an allowed domain
            "https://hooks.example.com/",
        ):
            assert _refused(_run_request(client, webhook)), webhook


def test_user_info_is_refused_and_never_recorded(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=30) as client:
        answer = _run_request(client, f"http://ada:hunter2@127.0.0.1:{free_port()}/hook")
        assert _refused(answer) and "hunter2" not in answer.text
    assert "hunter2" not in served.log()


def test_the_log_shows_a_receivers_scheme_and_host_only(served: Served) -> None:
    receiver = Receiver(free_port())
    receiver.url = f"http://127.0.0.1:{receiver.port}/secret-path?token=s3cr3t"
    receiver.start()
    down = f"http://127.0.0.1:{free_port()}/down-path?token=s3cr3t"  # nothing listens
    try:
        client: Any = get_sync_client(url=served.url)
        for webhook in (receiver.url, down):
            thread_id = client.threads.create()["thread_id"]
            run = client.runs.create(thread_id, "agent", input=HI, webhook=webhook)
            client.runs.join(thread_id, run["run_id"])
        receiver.wait(1, 30)
        time.sleep(3)  # the down receiver's first attempts fail meanwhile
    finally:
        receiver.stop()
    log = served.log()
    assert "s3cr3t" not in log and "secret-path" not in log and "down-path" not in log


class _Raw(socketserver.ThreadingTCPServer):
    """A loopback receiver speaking raw HTTP: ``answer(socket)`` writes its answer."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, answer: Any) -> None:
        self.connections: list[list[float | None]] = []  # [opened, closed]
        self.sent = 0
        answer_fn = answer
        server = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                times: list[float | None] = [time.monotonic(), None]
                server.connections.append(times)
                sock: socket.socket = self.request
                try:
                    _read_request(sock)
                    answer_fn(server, sock)
                except OSError:
                    pass
                finally:
                    times[1] = time.monotonic()

        super().__init__(("127.0.0.1", 0), Handler)
        self.port = self.server_address[1]
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def open_now(self) -> int:
        return sum(1 for c in self.connections if c[1] is None)

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


def _read_request(sock: socket.socket) -> None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            return
        body += chunk


def _trickle(server: _Raw, sock: socket.socket) -> None:
    """A byte of the status line every half second, for 40 s at most (never a whole answer)."""
    opened = time.monotonic()
    for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 200:
        sock.sendall(bytes([byte]))
        time.sleep(0.5)
        readable, _, _ = select.select([sock], [], [], 0)
        if readable and sock.recv(1, socket.MSG_PEEK) == b"":
            return  # the client went away
        if time.monotonic() - opened > 40:
            return


def _flood(server: _Raw, sock: socket.socket) -> None:
    """200 and an endless body, as fast as the client reads it (256 MiB at most)."""
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1099511627776\r\n\r\n")
    chunk = b"x" * (1 << 20)
    while server.sent < 256 << 20:
        sock.sendall(chunk)
        server.sent += len(chunk)


def _wait_for(what: Any, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not what():
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_a_stuck_delivery_holds_no_other_run_back(url: str) -> None:
    receiver = _Raw(_trickle)
    try:
        client: Any = get_sync_client(url=url)
        _ended_run(url, receiver.url)
        _wait_for(lambda: receiver.open_now() > 0, 30)  # its delivery is stuck now
        # Another run (of another thread: another user's, say) runs on the one worker at once.
        other = client.threads.create()["thread_id"]
        started = time.monotonic()
        done = client.runs.wait(other, "agent", input=HI)
        assert done["messages"][-1]["type"] == "ai"
        assert time.monotonic() - started < DEADLINE - 1
        assert receiver.open_now() > 0  # the delivery was still stuck meanwhile
    finally:
        receiver.stop()


def test_a_delivery_is_cut_at_its_deadline_and_retried(url: str) -> None:
    receiver = _Raw(_trickle)
    try:
        _ended_run(url, receiver.url)
        _wait_for(lambda: len(receiver.connections) >= 2, DEADLINE + 30)  # retried
        opened, closed = receiver.connections[0]
        assert opened is not None and closed is not None
        assert closed - opened < DEADLINE + 3  # cut at its deadline
    finally:
        receiver.stop()


def test_a_huge_answer_is_not_read(url: str) -> None:
    receiver = _Raw(_flood)
    try:
        _ended_run(url, receiver.url)
        _wait_for(lambda: receiver.connections and receiver.connections[0][1], 60)
        time.sleep(3)
        assert receiver.sent < 64 << 20  # the server stopped reading (socket buffers aside)
        assert len(receiver.connections) == 1  # a 200: delivered, not retried
    finally:
        receiver.stop()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_receiver_is_checked_again_at_delivery(
    kind: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A run accepted under a policy that allowed its loopback receiver is run by a server whose
    policy (the default) refuses it: the delivery fails at once, nothing is sent."""
    backend = _backend(kind, request, tmp_path_factory)
    logs = tmp_path_factory.mktemp("logs")
    receiver = Receiver(free_port())
    receiver.start()
    try:
        with serving(backend, logs, workers=0, config=LOOPBACK_POLICY) as loose:
            client: Any = get_sync_client(url=loose)
            thread_id = client.threads.create()["thread_id"]
            run = client.runs.create(thread_id, "agent", input=HI, webhook=receiver.url)
        with serving(backend, logs, workers=1, config=CONFIG) as strict:
            client = get_sync_client(url=strict)
            client.runs.join(thread_id, run["run_id"])
            failed = deliveries(backend, "failed", 30)
        assert receiver.got == []
        [delivery] = failed
        assert "loopback" in json.dumps(delivery)  # why, in its attempt's error
        assert "/hook" not in json.dumps(delivery["attempts"])  # the scheme and host only
    finally:
        receiver.stop()


def deliveries(backend: Backend, state: str, seconds: float) -> list[dict[str, Any]]:
    """The store's webhook deliveries in ``state`` (``failed``, ``completed``...), once there is
    one within ``seconds`` (``durable-graph queue ls``)."""
    deadline = time.monotonic() + seconds
    while True:
        listed = subprocess.run(
            [str(BIN), *backend.args, "queue", "ls", "--state", state, "--json"],
            env=env_of(backend),
            cwd=APP,
            capture_output=True,
            check=True,
        )
        found = [e for e in json.loads(listed.stdout) if e["kind"] == "webhook"]
        if found:
            return found
        assert time.monotonic() < deadline, f"no delivery {state}"
        time.sleep(0.5)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_worker_process_delivers_on_slots_of_its_own(
    kind: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """``durable-graph worker --langgraph-config`` with one slot for graphs: a stuck delivery
    there holds no run back either."""
    backend = _backend(kind, request, tmp_path_factory)
    logs = tmp_path_factory.mktemp("logs")
    receiver = _Raw(_trickle)
    argv = [str(BIN), *backend.args, "worker", "--langgraph-config", str(LOOPBACK_POLICY)]
    argv += ["--poll-interval", "100ms", "--concurrency", "1"]
    try:
        with (
            serving(backend, logs, workers=0, config=LOOPBACK_POLICY) as url,
            process(argv, backend, logs / "worker.log"),
        ):
            client: Any = get_sync_client(url=url)
            _ended_run(url, receiver.url)
            _wait_for(lambda: receiver.open_now() > 0, 30)  # delivered by the worker, stuck
            other = client.threads.create()["thread_id"]
            started = time.monotonic()
            assert client.runs.wait(other, "agent", input=HI)["messages"][-1]["type"] == "ai"
            assert time.monotonic() - started < DEADLINE - 1
            assert receiver.open_now() > 0
    finally:
        receiver.stop()
