"""Webhooks on run completion (SPEC §20.3) through real ``serve`` processes (SQLite, PostgreSQL)
and LangGraph's SDK: a run's end is POSTed once to its ``webhook``, signed; a receiver that is
down when the run ends gets the delivery once it is up (the queue retries it with its backoff);
a cancelled run's webhook says so.

``DURABLE_GRAPH_WEBHOOK_DOWN=60`` keeps the receiver down for a minute (default 4 s)."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from langgraph_sdk import get_sync_client

from service_support import Backend, free_port, serving

SECRET = "test-webhook-secret"
HI = {"messages": [{"role": "user", "content": "hi"}]}
DOWN = float(os.environ.get("DURABLE_GRAPH_WEBHOOK_DOWN", "4"))


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


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    env = {"DURABLE_GRAPH_WEBHOOK_SECRET": SECRET}
    if request.param == "postgres":
        dsn: str = request.getfixturevalue("pg_dsn")
        schema = f"svc_{uuid.uuid4().hex[:12]}"
        backend = Backend("postgres", ("--schema", schema), {"DURABLE_GRAPH_DSN": dsn, **env})
    else:
        db = tmp_path_factory.mktemp("service") / "service.db"
        backend = Backend("sqlite", ("--sqlite", str(db)), env)
    with serving(backend, tmp_path_factory.mktemp("logs"), workers=2) as served:
        yield served


def _signed(headers: dict[str, str], body: bytes) -> bool:
    fields = dict(part.split("=", 1) for part in headers["x-durable-graph-signature"].split(","))
    mac = hmac.new(SECRET.encode(), fields["t"].encode() + b"." + body, hashlib.sha256)
    return (
        hmac.compare_digest(mac.hexdigest(), fields["v1"])
        and abs(time.time() - int(fields["t"])) < 300
    )


def test_a_finished_run_is_posted_once_signed(url: str) -> None:
    receiver = Receiver(free_port())
    receiver.start()
    try:
        client: Any = get_sync_client(url=url)
        thread_id = client.threads.create()["thread_id"]
        run = client.runs.create(thread_id, "agent", input=HI, webhook=receiver.url)
        client.runs.join(thread_id, run["run_id"])
        [posted] = receiver.wait(1, 30)
        time.sleep(1.0)
        assert len(receiver.got) == 1  # once
        assert posted["run_id"] == run["run_id"] and posted["thread_id"] == thread_id
        assert posted["status"] == "success"
        assert [m["type"] for m in posted["values"]["messages"]] == ["human", "ai"]
        headers, body = receiver.got[0]
        assert headers["content-type"] == "application/json" and _signed(headers, body)
    finally:
        receiver.stop()


def test_a_receiver_that_was_down_gets_the_delivery_when_it_is_up(url: str) -> None:
    receiver = Receiver(free_port())  # nothing listens yet
    client: Any = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    run = client.runs.create(thread_id, "agent", input=HI, webhook=receiver.url)
    client.runs.join(thread_id, run["run_id"])
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
