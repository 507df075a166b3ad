"""Every live-tail slot comes back when its client goes (issue 46 item 10).

A real ``durable-graph dashboard`` process, on SQLite and PostgreSQL, while a writer appends
events to the tailed thread (so sends are in flight): rounds of 100 tails opened at once and
dropped in every way a client goes — before the request is whole, before the first byte, right
after the first message with a FIN or a reset, mid-stream while not reading, half-closed,
pipelined — and then all `MAX_TAILS` slots open again. And on a server speaking ASGI spec 2.4
(where Starlette's streaming response no longer listens for the client's disconnect, and uvicorn's
``send`` to a gone client returns quietly), and when the store fails mid-tail, no slot is kept.
"""

from __future__ import annotations

import random
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import uvicorn

from durable_graph import Checkpointer, Commit, EventIn
from durable_graph.dashboard import create_app
from durable_graph.dashboard.app import MAX_TAILS
from durable_graph.memory.store import InMemoryCheckpointer
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.postgres.migrations import migrate
from durable_graph.sqlite import SqliteCheckpointer

BIN = Path(sys.executable).with_name("durable-graph")
THREAD = "tailed"
RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends a reset
ROUNDS = 5
CLIENTS = 100


def _request(port: int, thread: str = THREAD) -> bytes:
    path = f"/thread/events?after=0&id={quote(thread)}"
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()


def _first_message(s: socket.socket) -> bytes:
    data = b""
    while b"tail open" not in data and b"too many" not in data:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def _drop(port: int, how: int) -> None:
    """One tail, dropped the ``how``-th way (of 8)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
            if how == 0:  # the request never whole
                s.sendall(_request(port)[:-2])
            elif how == 1:  # before the first byte
                s.sendall(_request(port))
            elif how == 2:  # before the first byte, a reset
                s.sendall(_request(port))
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, RESET)
            elif how == 3:  # after the first message, a reset
                s.sendall(_request(port))
                _first_message(s)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, RESET)
            elif how == 4:  # a while later, mid-stream
                s.sendall(_request(port))
                _first_message(s)
                time.sleep(random.random() * 1.5)
            elif how == 5:  # not reading while the events pile up, then a reset
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
                s.sendall(_request(port))
                time.sleep(random.random() * 2)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, RESET)
            elif how == 6:  # half-closed first
                s.sendall(_request(port))
                _first_message(s)
                s.shutdown(socket.SHUT_WR)
                time.sleep(random.random())
            else:  # a second request pipelined behind the tail
                s.sendall(_request(port) * 2)
                _first_message(s)
    except OSError:
        pass  # refused or reset while the server is busy: a client gone all the same


def _slots_open(port: int, seconds: float) -> tuple[int, float]:
    """How many tails open at once (of MAX_TAILS + 1 tried, each retried until ``seconds``
    pass), and how long it took; every socket closed after."""
    start = time.monotonic()
    held: list[socket.socket] = []
    try:
        while len(held) < MAX_TAILS and time.monotonic() - start < seconds:
            s = socket.create_connection(("127.0.0.1", port), timeout=20)
            s.sendall(_request(port))
            if b"tail open" in _first_message(s):
                held.append(s)
            else:
                s.close()
                time.sleep(0.05)
        took = time.monotonic() - start
        with socket.create_connection(("127.0.0.1", port), timeout=20) as extra:
            extra.sendall(_request(port))
            assert b"too many live tails" in _first_message(extra)  # at most MAX_TAILS
        return len(held), took
    finally:
        for s in held:
            s.close()


def _commit_thread(store: Checkpointer) -> None:
    claim = store.claim(THREAD, "run-1")
    store.commit(claim, Commit("c1", None, "run-1", {"n": 0}))
    store.release_claim(claim)


@contextmanager
def _writing(store: Checkpointer) -> Iterator[None]:
    """Events appended to THREAD every 100 ms (5 of 2 KB each) until the block ends."""
    stop = threading.Event()

    def write() -> None:
        while not stop.wait(0.1):
            claim = store.claim(THREAD, "writer")
            try:
                events = [EventIn("big", {"x": "y" * 2_000}) for _ in range(5)]
                store.append_events(claim, events, run_id="writer")
            finally:
                store.release_claim(claim)

    writer = threading.Thread(target=write, name="writer", daemon=True)
    writer.start()
    try:
        yield
    finally:
        stop.set()
        writer.join(10)


@contextmanager
def _dashboard(store_args: list[str], log: Path) -> Iterator[int]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    with log.open("wb") as out:
        server = subprocess.Popen(
            [str(BIN), *store_args, "dashboard", "--port", str(port)], stdout=out, stderr=out
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None, log.read_text()
                assert time.monotonic() < deadline, "the dashboard did not come up"
                time.sleep(0.1)
        yield port
    finally:
        server.terminate()
        server.wait(20)


@pytest.fixture(params=["sqlite", "postgres"])
def store_and_args(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[Checkpointer, list[str]]]:
    store: Checkpointer
    if request.param == "sqlite":
        db = tmp_path / "tails.db"
        store = SqliteCheckpointer.open(str(db))
        args = ["--sqlite", str(db)]
    else:
        dsn: str = request.getfixturevalue("pg_dsn")
        schema = f"tails_{uuid.uuid4().hex[:10]}"
        migrate(dsn, schema)
        store = PostgresCheckpointer.open(dsn, PostgresConfig(schema=schema))
        args = ["--dsn", dsn, "--schema", schema]
    try:
        yield store, args
    finally:
        store.close()


def test_every_slot_comes_back_after_hundreds_of_dropped_tails(
    store_and_args: tuple[Checkpointer, list[str]], tmp_path: Path
) -> None:
    """The review's run (500 tails, 100 at a time, 3 s apart) with every way of dropping one;
    then all MAX_TAILS slots open, within a few of the tail's 1 s waits, twice over."""
    store, args = store_and_args
    _commit_thread(store)
    log = tmp_path / "dashboard.log"
    with _dashboard(args, log) as port, _writing(store):
        for round_ in range(ROUNDS):
            clients = [
                threading.Thread(target=_drop, args=(port, (round_ + i) % 8), daemon=True)
                for i in range(CLIENTS)
            ]
            for c in clients:
                c.start()
            for c in clients:
                c.join(60)
            time.sleep(3)
        for _ in range(2):
            opened, took = _slots_open(port, 5.0)
            assert opened == MAX_TAILS, f"{MAX_TAILS - opened} slots kept: {log.read_text()}"
            print(f"all {MAX_TAILS} slots open after {took:.2f} s")
    assert "Traceback" not in log.read_text()


# --- the exit paths on a server of our own making (uvicorn in this process) -------------------


class _SpecVersion:
    """The dashboard as a server speaking ASGI spec ``version`` runs it."""

    def __init__(self, app: Any, version: str) -> None:
        self.app = app
        self.version = version

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            scope = {**scope, "asgi": {**scope.get("asgi", {}), "spec_version": self.version}}
        await self.app(scope, receive, send)


class _FailingTails(InMemoryCheckpointer):
    """The real in-memory store whose waits for thread ``boom`` fail (the store's server-side
    error mid-tail), after the first."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def await_events_after(self, thread_id: str, after_seq: int, *args: Any, **kw: Any) -> Any:
        if thread_id == "boom":
            self.calls += 1
            if self.calls > 1:
                raise RuntimeError("the store broke mid-tail")
        return super().await_events_after(thread_id, after_seq, *args, **kw)


@contextmanager
def _in_process(app: Any) -> Iterator[int]:
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="critical", timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline
        time.sleep(0.02)
    try:
        yield int(server.servers[0].sockets[0].getsockname()[1])
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.mark.parametrize("version", ["2.3", "2.4"])
def test_a_gone_client_frees_its_slot_whatever_spec_the_server_speaks(version: str) -> None:
    """Under spec 2.4 Starlette's `StreamingResponse` stops listening for ``http.disconnect``
    and waits for ``send`` to raise, which uvicorn's never does for a gone client: a tail that
    relied on it kept its slot (and a thread) forever. Ours watches ``receive`` itself."""
    store = InMemoryCheckpointer()
    _commit_thread(store)
    app = _SpecVersion(create_app(store, tail_wait=timedelta(milliseconds=200)), version)
    with _in_process(app) as port:
        for _ in range(3):
            for how in (1, 3, 4):
                dropped = [threading.Thread(target=_drop, args=(port, how)) for _ in range(20)]
                for t in dropped:
                    t.start()
                for t in dropped:
                    t.join(30)
            opened, _ = _slots_open(port, 5.0)
            assert opened == MAX_TAILS, f"spec {version}: {MAX_TAILS - opened} slots kept"
    store.close()


def test_a_server_side_error_mid_tail_frees_its_slot() -> None:
    store = _FailingTails()
    _commit_thread(store)
    claim = store.claim("boom", "run-1")
    store.commit(claim, Commit("c1", None, "run-1", {}))
    store.release_claim(claim)
    with _in_process(create_app(store, tail_wait=timedelta(milliseconds=100))) as port:
        for _ in range(MAX_TAILS * 2):
            store.calls = 0
            with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
                s.sendall(_request(port, "boom"))
                while s.recv(4096):  # the response ends: the server closes it
                    pass
        opened, _ = _slots_open(port, 5.0)
        assert opened == MAX_TAILS
    store.close()
