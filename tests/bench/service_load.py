"""The service under load (SPEC §20.1, issue 35), beside LangGraph's own server.

    .venv/bin/python -m tests.bench.service_load --out bench-service-load.md   (part of `make bench`)

One API process each: ``durable-graph serve`` on SQLite, on PostgreSQL (a throwaway durable
server, or ``DURABLE_GRAPH_TEST_DSN``'s), and the reference ``langgraph dev`` (in-memory; its
``langgraph`` in ``.venv-reference``, skipped when absent), all serving tests/service_app's
graph with 8 runs at once (``--workers 8``; ``--n-jobs-per-worker 8``). Against each, from one
asyncio client process (raw HTTP/1.1 over asyncio streams, so the client holds little more than
sockets):

- ``--joins`` idle joins: clients joining one long run (``GET .../join``; the run sleeps
  600 s), held for the whole measurement (runs queued behind a busy thread would measure
  something else: LangGraph's server holds a job slot for each, D198);
- ``--streams`` streamed runs, each on a thread of its own, all started at once
  (``POST /threads/{id}/runs/stream``, ``messages-tuple``): time to the first token
  (``messages`` event) and to the end of the response, p50 / p95 / max;
- a probe: ``GET /threads/{id}`` of an unrelated thread every 50 ms while the streams run, its
  p95 and max;
- the API process's peak RSS (its process tree, sampled every 0.2 s) and the CPU the machine
  spent on anything but the server tree and this client (**foreign CPU**, in cores, from
  ``/proc``): a figure taken beside more than 0.2 core of foreign load is marked.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from durable_graph.testkit.postgres import server as pg_server

from .common import FOREIGN_LIMIT, ForeignCpu, postmaster_pid, process_tree

sys.path.insert(0, str(Path(__file__).parent.parent))  # tests/: the service tests' helpers
from service_support import (
    APP,
    Backend,
    reference_serving_process,
    serving_process,
)

HI = {"messages": [{"role": "user", "content": "hi"}]}
REFERENCE = Path(__file__).parent.parent.parent / ".venv-reference" / "bin" / "langgraph"
RUNS_AT_ONCE = 8


@dataclass
class Cell:
    target: str
    first_token: list[float] = field(default_factory=list)
    end: list[float] = field(default_factory=list)
    probe: list[float] = field(default_factory=list)
    failed: int = 0
    rss_peak: int = 0
    wall: float = 0.0
    foreign: float = 0.0


# --- /proc ---------------------------------------------------------------------------------------


def _rss(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


# --- raw HTTP -------------------------------------------------------------------------------------


async def _request(port: int, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(_head(method, path, body))
        await writer.drain()
        raw = await reader.read()
    finally:
        writer.close()
    head, _, rest = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if b"transfer-encoding: chunked" in head.lower():
        rest = _unchunk(rest)
    return status, rest


def _head(method: str, path: str, body: Any) -> bytes:
    data = b"" if body is None else json.dumps(body).encode()
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(data)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


def _unchunk(raw: bytes) -> bytes:
    out, rest = b"", raw
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out, rest = out + rest[:size], rest[size + 2 :]
    return out


async def _json(port: int, method: str, path: str, body: Any = None) -> Any:
    status, data = await _request(port, method, path, body)
    if status >= 300:
        raise RuntimeError(f"{method} {path}: {status} {data[:200]!r}")
    return json.loads(data)


async def _stream(port: int, thread_id: str, cell: Cell) -> None:
    """One streamed run: time to its first token and to the end of the response."""
    body = {"assistant_id": "agent", "input": HI, "stream_mode": ["messages-tuple"]}
    started = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(_head("POST", f"/threads/{thread_id}/runs/stream", body))
        await writer.drain()
        first = None
        while line := await reader.readline():
            if first is None and line.startswith(b"event: messages"):
                first = time.monotonic() - started
        cell.end.append(time.monotonic() - started)
        if first is None:
            cell.failed += 1
        else:
            cell.first_token.append(first)
    except OSError:
        cell.failed += 1
    finally:
        writer.close()


async def _hold_join(port: int, path: str, held: list[asyncio.StreamWriter]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_head("GET", path, None))
    await writer.drain()
    held.append(writer)
    await reader.read()  # until the measurement ends and closes it


async def _measure(port: int, roots: list[int], streams: int, joins: int, cell: Cell) -> None:
    """``roots``: the API process, then the PostgreSQL server's when it runs here (own CPU)."""
    pids = process_tree(roots[0])
    probe_thread = (await _json(port, "POST", "/threads", {}))["thread_id"]
    busy = (await _json(port, "POST", "/threads", {}))["thread_id"]
    slow = {"messages": [{"role": "user", "content": "slow 600"}]}
    run = await _json(
        port, "POST", f"/threads/{busy}/runs", {"assistant_id": "agent", "input": slow}
    )
    held: list[asyncio.StreamWriter] = []
    path = f"/threads/{busy}/runs/{run['run_id']}/join"
    # Idle clients: each joins the one long run (one run busy, as on every target).
    join_tasks = [asyncio.create_task(_hold_join(port, path, held)) for _ in range(joins)]
    threads = [(await _json(port, "POST", "/threads", {}))["thread_id"] for _ in range(streams)]
    done = asyncio.Event()

    async def probe() -> None:
        while not done.is_set():
            t0 = time.monotonic()
            status, _ = await _request(port, "GET", f"/threads/{probe_thread}")
            if status == 200:
                cell.probe.append(time.monotonic() - t0)
            await asyncio.sleep(0.05)

    async def memory() -> None:
        while not done.is_set():
            cell.rss_peak = max(cell.rss_peak, _rss(pids))
            await asyncio.sleep(0.2)

    watchers = [asyncio.create_task(probe()), asyncio.create_task(memory())]
    watch = ForeignCpu([*roots, os.getpid()])
    watch.start()
    await asyncio.gather(*(_stream(port, t, cell) for t in threads))
    foreign, cell.wall = watch.stop()
    cell.foreign = foreign / cell.wall
    done.set()
    await asyncio.gather(*watchers)
    for writer in held:
        writer.close()
    for task in join_tasks:
        task.cancel()
    await asyncio.gather(*join_tasks, return_exceptions=True)


# --- targets -------------------------------------------------------------------------------------


@contextmanager
def _target(name: str, tmp: Path, stack: ExitStack) -> Iterator[tuple[int, list[int]]]:
    """(port, own process roots) of the API process serving ``name``: the API process, and
    the PostgreSQL server's main process when there is one here."""
    if name == "reference":
        with reference_serving_process(str(REFERENCE), tmp, jobs=RUNS_AT_ONCE) as (url, proc):
            yield int(url.rsplit(":", 1)[1]), [proc.pid]
        return
    server: list[int] = []
    if name == "postgres":
        given = os.environ.get("DURABLE_GRAPH_TEST_DSN")
        dsn = given or stack.enter_context(_pg()).dsn()
        schema = f"load_{uuid.uuid4().hex[:10]}"
        backend = Backend("postgres", ("--schema", schema), {"DURABLE_GRAPH_DSN": dsn})
        server = [p for p in [postmaster_pid(dsn)] if p is not None]
    else:
        backend = Backend("sqlite", ("--sqlite", str(tmp / "load.db")), {})
    with serving_process(backend, tmp, workers=RUNS_AT_ONCE) as (url, proc):
        yield int(url.rsplit(":", 1)[1]), [proc.pid, *server]


@contextmanager
def _pg() -> Iterator[Any]:
    server = pg_server.start(durable=True)
    try:
        yield server
    finally:
        server.stop()


def _ms(values: list[float], q: float) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    return f"{ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000:,.0f}"


def report(cells: list[Cell], streams: int, joins: int) -> str:
    lines = [
        f"## The service under load: {streams} streamed runs, {joins} idle joins",
        "",
        f"One API process each, {RUNS_AT_ONCE} runs at once; times in ms "
        "(p50 / p95 / max); RSS the API process tree's peak; foreign CPU in cores.",
        "",
        "| target | first token | end of stream | probe `threads.get` p95 / max | failed "
        "| all streams done (s) | RSS peak (MiB) | foreign CPU |",
        "|---|---|---|---|---:|---:|---:|---:|",
    ]
    for c in cells:
        mark = "" if c.foreign <= FOREIGN_LIMIT else " (not comparable)"
        lines.append(
            f"| {c.target} | {_ms(c.first_token, 0.5)} / {_ms(c.first_token, 0.95)} / "
            f"{_ms(c.first_token, 1.0)} | {_ms(c.end, 0.5)} / {_ms(c.end, 0.95)} / "
            f"{_ms(c.end, 1.0)} | {_ms(c.probe, 0.95)} / {_ms(c.probe, 1.0)} | {c.failed} | "
            f"{c.wall:.1f} | {c.rss_peak / 2**20:,.0f} | {c.foreign:.2f}{mark} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--joins", type=int, default=200)
    parser.add_argument("--targets", nargs="+", default=["sqlite", "postgres", "reference"])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    cells = []
    for name in args.targets:
        if name == "reference" and not REFERENCE.exists():
            print(f"reference: {REFERENCE} is missing (make service-reference)", file=sys.stderr)
            continue
        with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
            port, roots = stack.enter_context(_target(name, Path(tmp), stack))
            cell = Cell(name)
            asyncio.run(_measure(port, roots, args.streams, args.joins, cell))
            cells.append(cell)
            print(f"{name}: {cell.wall:.1f} s, {cell.failed} failed", file=sys.stderr)
    text = report(cells, args.streams, args.joins)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    assert APP.exists()
    sys.exit(main())
