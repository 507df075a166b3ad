"""Operating a big queue (issue 26): what `health`, one `queue ls` page and listing everything
page by page cost at 100,000 open entries, on PostgreSQL and SQLite, and what the memory store's
`submit_many` costs (and makes a concurrent call wait) at 40,000 and 100,000 entries.

    .venv/bin/python -m tests.bench.operating --out bench-operating.md   (run by `make bench`)

Figures, not assertions. Per backend: ``entries`` (100,000) open entries over ``threads``
(10,000) threads, submitted through ``submit_many`` in batches of 1000; then

* ``health``: the CLI (`durable-graph health --json`, a process of its own, so Python's start is
  included: the line ``python -c pass`` says how much that is) and the call it makes
  (`RunQueue.stats`) in this process;
* one page: `durable-graph queue ls --limit 100 --after <middle>` and the call
  (`open_entries(after=<middle>, limit=100)`);
* every page: `open_entries(limit=1000)` continued with ``after`` until an empty page, with
  nothing changing; then again while another thread drains the queue (lease + close, one entry
  at a time), counting rows listed twice and entries open throughout that were not listed
  (issue 26 item 1: both must be 0).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

from durable_graph.core.model import ANY, Completed, Submission
from durable_graph.memory.store import InMemoryCheckpointer
from durable_graph.postgres import PostgresCheckpointer
from durable_graph.postgres.config import PostgresConfig
from durable_graph.sqlite import SqliteCheckpointer
from durable_graph.testkit.postgres import server as pg_server

BIN = Path(sys.executable).with_name("durable-graph")


def log(message: str) -> None:
    print(f"[operating {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    value = fn()
    return time.perf_counter() - started, value


def fill(store: Any, entries: int, threads: int) -> None:
    batch: list[Submission] = []
    for i in range(entries):
        batch.append(Submission(f"g-{i % threads}", {"i": i}))
        if len(batch) == 1000:
            store.run_queue.submit_many(batch)
            batch = []
    if batch:
        store.run_queue.submit_many(batch)


def walk(queue: Any, limit: int = 1000) -> list[int]:
    ids: list[int] = []
    after: int | None = None
    while page := queue.open_entries(ANY, None, after, limit):
        ids.extend(e.entry_id for e in page)
        after = page[-1].entry_id
    return ids


def walk_while_draining(queue: Any, drain_seconds: float) -> dict[str, Any]:
    """Walk the pages while another thread closes entries; count repeats and skips."""
    closed: set[int] = set()
    stop = threading.Event()

    def drain() -> None:
        deadline = time.monotonic() + drain_seconds
        while not stop.is_set() and time.monotonic() < deadline:
            lease = queue.lease("drainer", timedelta(seconds=60))
            if lease is None:
                return
            closed.add(lease.entry.entry_id)
            queue.close(lease, Completed())

    before = set(walk(queue))
    drainer = threading.Thread(target=drain)
    drainer.start()
    seconds, listed = timed(lambda: walk(queue, 1000))
    stop.set()
    drainer.join()
    throughout = before - closed
    return {
        "seconds": seconds,
        "listed": len(listed),
        "closed meanwhile": len(closed),
        "repeated": len(listed) - len(set(listed)),
        "skipped": len(throughout - set(listed)),
    }


def cli(*args: str) -> float:
    started = time.perf_counter()
    done = subprocess.run([str(BIN), *args], capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise RuntimeError(f"durable-graph {' '.join(args)}: {done.stderr}")
    return seconds


def measure(name: str, store: Any, store_args: list[str], entries: int) -> list[str]:
    queue = store.run_queue
    ids = walk(queue)
    middle = ids[len(ids) // 2]
    stats_s, stats = timed(lambda: queue.stats(ANY))
    page_s, _ = timed(lambda: queue.open_entries(ANY, None, middle, 100))
    walk_s, listed = timed(lambda: walk(queue))
    rows = [
        f"| {name} | `durable-graph health` (process) | {cli('health', '--json', *store_args):.3f} s |",
        f"| {name} | `stats()` call (open {stats.open}) | {stats_s * 1000:.1f} ms |",
        f"| {name} | `durable-graph queue ls --limit 100 --after <middle>` (process) | "
        f"{cli('queue', 'ls', '--limit', '100', '--after', str(middle), *store_args):.3f} s |",
        f"| {name} | one page: `open_entries(after=<middle>, limit=100)` | {page_s * 1000:.1f} ms |",
        f"| {name} | every page: `open_entries(limit=1000)` x {len(listed) // 1000 + 1}, "
        f"{len(listed)} rows | {walk_s:.2f} s |",
    ]
    drained = walk_while_draining(queue, drain_seconds=20.0)
    rows.append(
        f"| {name} | every page while draining: {drained['listed']} rows, "
        f"{drained['closed meanwhile']} closed meanwhile, {drained['repeated']} repeated, "
        f"{drained['skipped']} skipped | {drained['seconds']:.2f} s |"
    )
    log(
        f"{name}: "
        + "; ".join(r.split("|")[2].strip() + " " + r.split("|")[3].strip() for r in rows)
    )
    return rows


def memory_submit_many(existing: int) -> str:
    """One submit_many of 1000 at ``existing`` open entries, and the longest a concurrent
    `get` waited meanwhile."""
    store = InMemoryCheckpointer()
    fill(store, existing, existing // 10)
    waits: list[float] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            started = time.perf_counter()
            store.get("nobody")
            waits.append(time.perf_counter() - started)

    thread = threading.Thread(target=reader)
    thread.start()
    seconds, _ = timed(
        lambda: store.run_queue.submit_many([Submission(f"new-{i}", i) for i in range(1000)])
    )
    stop.set()
    thread.join()
    return (
        f"| memory | `submit_many` of 1000 at {existing} open entries; longest concurrent "
        f"`get` {max(waits) * 1000:.1f} ms | {seconds * 1000:.1f} ms |"
    )


@contextmanager
def postgres_dsn() -> Iterator[str]:
    given = os.environ.get("DURABLE_GRAPH_TEST_DSN")
    if given:
        yield given
        return
    server = pg_server.start(durable=True)
    try:
        yield server.dsn()
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="bench-operating.md")
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--threads", type=int, default=10_000)
    parser.add_argument("--only", choices=("postgres", "sqlite", "memory"), action="append")
    args = parser.parse_args(argv)
    only = set(args.only or ("postgres", "sqlite", "memory"))
    python_start, _ = timed(
        lambda: subprocess.run([sys.executable, "-c", "pass"], check=True, capture_output=True)
    )
    rows = [
        f"Operating at {args.entries} open entries over {args.threads} threads "
        f"(`python -m tests.bench.operating`; `python -c pass` takes {python_start:.3f} s).",
        "",
        "| store | what | time |",
        "|---|---|---|",
    ]
    if "memory" in only:
        for existing in (40_000, args.entries):
            rows.append(memory_submit_many(existing))
            log(rows[-1])
    if "sqlite" in only:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "bench.db")
            store = SqliteCheckpointer.open(path)
            log(f"sqlite: filling {args.entries}")
            fill(store, args.entries, args.threads)
            rows += measure("SQLite", store, ["--sqlite", path], args.entries)
            store.close()
    if "postgres" in only:
        with postgres_dsn() as dsn:
            schema = "bench_operating"
            pg = PostgresCheckpointer.open(dsn, PostgresConfig(schema=schema))
            try:
                log(f"postgres: filling {args.entries}")
                fill(pg, args.entries, args.threads)
                rows += measure("PostgreSQL", pg, ["--dsn", dsn, "--schema", schema], 0)
            finally:
                pg.close()
    text = "\n".join(rows) + "\n"
    Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
