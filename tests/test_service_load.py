"""``durable-graph serve`` under many waiting clients (SPEC §20.1), as real processes on SQLite
and PostgreSQL with no worker (``--workers 0``), so every run stays queued and every join and
stream waits for as long as its client holds it:

- 150 joins and 150 streams held open do not delay an unrelated ``threads.get`` (each answered
  within `ANSWER_WITHIN`; a liveness bound, not a benchmark) — with one thread per wait, the 41st
  waiter would hang every other request;
- clients that disconnect release what they held: waves of dropped joins and streams leave the
  process's thread count and the answers of other requests as they were;
- 1,000 streams held open in one API process keep its RSS bounded, and dropping them gives the
  memory back for the next 1,000.

The waiting clients are raw sockets (one request each, read as far as the test needs), so that the
test itself holds nothing but file descriptors.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from service_support import Backend, serving_process, store_backend

ANSWER_WITHIN = 2.0
"""Seconds an unrelated request may take while the waiters are held (generous: a loaded CI
machine; with a thread per wait it never answers)."""
WAITERS = 150
STREAMS_FOR_MEMORY = 1000
RSS_PER_STREAM = 64 * 1024
"""Bytes of RSS one held stream may cost the API process (measured: a few KiB)."""


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Backend:
    return store_backend(request.param, request, tmp_path_factory, schema_prefix="load")


@pytest.fixture(scope="module")
def served(backend: Backend, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving_process(backend, tmp_path_factory.mktemp("logs"), workers=0) as (url, proc):
        yield Served(url, proc.pid)


class Served:
    def __init__(self, url: str, pid: int) -> None:
        self.host, port = url.removeprefix("http://").split(":")
        self.port = int(port)
        self.pid = pid

    def status(self, field: str) -> int:
        """A number of ``/proc/PID/status`` (``Threads``, ``VmRSS`` in kB)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
        raise AssertionError(f"no {field} in /proc/{self.pid}/status")


# --- a raw HTTP/1.1 client ------------------------------------------------------------------


def _request(method: str, path: str, body: Any = None) -> bytes:
    data = b"" if body is None else json.dumps(body).encode()
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
    if body is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
    return (head + "\r\n").encode() + data


async def _call(served: Served, method: str, path: str, body: Any = None) -> Any:
    """One request, its JSON answer (AssertionError unless 2xx)."""
    reader, writer = await asyncio.open_connection(served.host, served.port)
    try:
        writer.write(_request(method, path, body))
        raw = await reader.read()
    finally:
        writer.close()
    head, _, payload = raw.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    assert 200 <= status < 300, raw[:500]
    if b"transfer-encoding: chunked" in head.lower():
        payload = _unchunked(payload)
    return json.loads(payload) if payload else None


def _unchunked(data: bytes) -> bytes:
    out = b""
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        out, data = out + data[:size], data[size + 2 :]
    return out


class Waiter:
    """One held join or stream: connected, its request sent; `drop` disconnects."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    async def first_bytes(self) -> bytes:
        return await self.reader.read(256)

    def drop(self) -> None:
        self.writer.close()


async def _hold(served: Served, path: str) -> Waiter:
    reader, writer = await asyncio.open_connection(served.host, served.port)
    writer.write(_request("GET", path))
    await writer.drain()
    return Waiter(reader, writer)


async def _queued_runs(served: Served, count: int) -> list[tuple[str, str]]:
    """``count`` runs on threads of their own that stay queued (no worker): (thread, run) ids."""
    body = {"assistant_id": "agent", "input": {"messages": [{"role": "user", "content": "hi"}]}}
    runs = []
    for _ in range(count):  # one at a time: creating them is not what is measured
        run = await _call(served, "POST", "/runs", body)
        runs.append((run["thread_id"], run["run_id"]))
    return runs


async def _hold_all(served: Served, runs: list[tuple[str, str]], kind: str) -> list[Waiter]:
    """A join or a stream (``kind``) held on each run; streams once their response has begun."""
    waiters = await asyncio.gather(
        *(_hold(served, f"/threads/{t}/runs/{r}/{kind}") for t, r in runs)
    )
    if kind == "stream":
        firsts = await asyncio.wait_for(asyncio.gather(*(w.first_bytes() for w in waiters)), 60)
        assert all(f.startswith(b"HTTP/1.1 200") for f in firsts), firsts[:3]
    else:
        await asyncio.sleep(1.0)  # every join reaches the server and waits
    return list(waiters)


async def _answer_times(served: Served, thread_id: str, times: int = 5) -> list[float]:
    """How long ``GET /threads/{id}`` takes, ``times`` times in a row."""
    took = []
    for _ in range(times):
        start = time.monotonic()
        thread = await asyncio.wait_for(_call(served, "GET", f"/threads/{thread_id}"), 30)
        took.append(time.monotonic() - start)
        assert thread["thread_id"] == thread_id
    return took


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


# --- the tests ------------------------------------------------------------------------------


def test_held_joins_and_streams_do_not_delay_another_clients_request(served: Served) -> None:
    async def scenario() -> None:
        other = (await _call(served, "POST", "/threads", {}))["thread_id"]
        runs = await _queued_runs(served, WAITERS)
        joins = await _hold_all(served, runs, "join")
        streams = await _hold_all(served, runs, "stream")
        try:
            took = await _answer_times(served, other)
            assert max(took) < ANSWER_WITHIN, took
            # A run created now is queued and answered at once, too.
            started = time.monotonic()
            await _queued_runs(served, 1)
            assert time.monotonic() - started < ANSWER_WITHIN
        finally:
            for w in joins + streams:
                w.drop()

    _run(scenario())


def test_clients_that_disconnect_release_what_they_held(served: Served) -> None:
    async def scenario() -> None:
        other = (await _call(served, "POST", "/threads", {}))["thread_id"]
        runs = await _queued_runs(served, 60)
        threads_before = served.status("Threads")
        for _ in range(3):  # each wave is dropped before the next: nothing may stay held
            wave = await _hold_all(served, runs, "join") + await _hold_all(served, runs, "stream")
            for w in wave:
                w.drop()
            await asyncio.sleep(1.0)
        took = await _answer_times(served, other)
        assert max(took) < ANSWER_WITHIN, took
        # 360 waits came and went; the process holds no thread for any of them.
        assert served.status("Threads") <= threads_before + 8

    _run(scenario())


def test_a_thousand_streams_in_one_process_keep_memory_bounded(served: Served) -> None:
    async def scenario() -> None:
        other = (await _call(served, "POST", "/threads", {}))["thread_id"]
        runs = await _queued_runs(served, 100)  # ten streams per run: 1,000 held responses
        rss_before = served.status("VmRSS") * 1024
        first = await _hold_all(served, runs * 10, "stream")
        rss_held = served.status("VmRSS") * 1024
        took = await _answer_times(served, other)
        for w in first:
            w.drop()
        await asyncio.sleep(1.0)
        second = await _hold_all(served, runs * 10, "stream")
        rss_again = served.status("VmRSS") * 1024
        for w in second:
            w.drop()
        assert max(took) < ANSWER_WITHIN, took
        assert rss_held - rss_before < STREAMS_FOR_MEMORY * RSS_PER_STREAM, rss_held - rss_before
        # The second thousand reuses the first's memory: nothing of a dropped stream stays.
        assert rss_again - rss_held < STREAMS_FOR_MEMORY * RSS_PER_STREAM // 4, rss_again - rss_held

    _run(scenario())
