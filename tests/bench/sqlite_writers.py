"""Writer processes on one SQLite file (issue 26 item 6): does a busy store use up attempts?

    .venv/bin/python -m tests.bench.sqlite_writers --out bench-sqlite-writers.md   (`make bench`)

Figures, not assertions. ``--entries`` entries (each ``max_attempts=3``, over as many threads)
are run by ``--processes`` worker processes (8), each a `Worker` whose handler makes
``--commits`` commits (``ctx.commit``, one transaction each, fsync on), on one file. Each run
is made twice: with SQLite's default ``busy_timeout`` (5 s) and with a short one (20 ms), where
a write lock held by the others past the timeout is common. Reported per run: jobs per second,
how often an attempt's call met a busy store and waited (D69: the same call again, same
attempt), how many `StoreBusy` reached a worker's loop (a `begin_attempt` that did nothing),
and the attempts used: with every wait absorbed, one attempt per entry and every entry
completed.

``tests/test_sqlite_writers.py`` runs this (``--json``), fewer and shorter, with a process that
holds the write lock past the timeout again and again (``--hog-ms``), and asserts that.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import multiprocessing
import os
import sqlite3
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from durable_graph.core.errors import StoreBusy
from durable_graph.core.model import Completed, QueueEntry, Submission
from durable_graph.sqlite import SqliteCheckpointer, SqliteConfig
from durable_graph.worker.sync import RunContext, Worker


def log(message: str) -> None:
    print(f"[sqlite_writers {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class _Counts(logging.Handler):
    """Counts the worker's records of a busy store: waits (D69) and store errors in its loop."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.busy_waits = 0
        self.loop_store_errors = 0
        self.calls: dict[str, int] = {}

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == "durable_graph.worker.busy":
            self.busy_waits += 1
            call = str(record.args[1]) if isinstance(record.args, tuple) else "?"
            self.calls[call] = self.calls.get(call, 0) + 1
        elif record.levelno >= logging.WARNING and "store error" in record.getMessage():
            self.loop_store_errors += 1


def _handler(commits: int) -> Any:
    def handler(ctx: RunContext) -> Any:
        for step in range(commits):
            ctx.commit({"step": step}, next=("more",) if step + 1 < commits else ())
        return "done"

    return handler


def _open(path: str, config: SqliteConfig) -> SqliteCheckpointer:
    """Open (its first transaction may meet a busy file, as any write: `StoreBusy`)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return SqliteCheckpointer.open(path, config=config)
        except StoreBusy:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _work(path: str, busy_ms: int, commits: int, holder: str, out: str, ttl_s: float) -> None:
    """One worker process: run until no entry is open, then write what it counted to ``out``."""
    counts = _Counts()
    for name in ("durable_graph.worker", "durable_graph.worker.busy"):
        logger = logging.getLogger(name)
        logger.addHandler(counts)
        logger.setLevel(logging.DEBUG)
    logging.getLogger("durable_graph.worker").propagate = False
    config = SqliteConfig(busy_timeout=timedelta(milliseconds=busy_ms))
    store = _open(path, config)
    worker = Worker(
        store,
        _handler(commits),
        holder=holder,
        lease_ttl=timedelta(seconds=ttl_s),
        poll_interval=timedelta(milliseconds=50),
    )
    attempts = 0
    started = time.monotonic()
    while True:
        try:
            report = worker.run_once()
        except Exception:  # a busy begin_attempt: nothing leased (the loop's log says so)
            counts.loop_store_errors += 1
            time.sleep(0.02)
            continue
        if report is not None:
            attempts += 1
            continue
        try:
            stats = store.run_queue.stats()
            if stats.open + stats.running == 0:
                break
        except Exception:
            pass
        time.sleep(0.02)
    store.close()
    Path(out).write_text(
        json.dumps(
            {
                "attempts_run": attempts,
                "busy_waits": counts.busy_waits,
                "busy_calls": counts.calls,
                "loop_store_errors": counts.loop_store_errors,
                "seconds": time.monotonic() - started,
            }
        )
    )


def _hog(path: str, hold_ms: int, gap_ms: int, stop_file: str) -> None:
    """Hold the write lock ``hold_ms`` at a time, ``gap_ms`` apart, until ``stop_file`` exists."""
    raw = sqlite3.connect(path, isolation_level=None, timeout=60)
    while not os.path.exists(stop_file):
        raw.execute("BEGIN IMMEDIATE")
        time.sleep(hold_ms / 1000)
        raw.execute("ROLLBACK")
        time.sleep(gap_ms / 1000)
    raw.close()


def _every_entry(store: SqliteCheckpointer) -> list[QueueEntry]:
    """Every entry, page by page (newest first)."""
    found: list[QueueEntry] = []
    after: int | None = None
    while page := store.run_queue.entries(after=after, limit=1000):
        found.extend(page)
        after = page[-1].entry_id
    return found


@dataclass(frozen=True)
class Result:
    processes: int
    entries: int
    busy_timeout_ms: int
    seconds: float
    completed: int
    not_completed: int
    attempts_used: int
    entries_retried: int
    busy_waits: int
    busy_calls: dict[str, int]
    loop_store_errors: int


def run(
    folder: Path,
    *,
    processes: int,
    entries: int,
    busy_ms: int,
    commits: int = 3,
    hog_ms: int | None = None,
    ttl_s: float = 30.0,
) -> Result:
    """``entries`` entries run by ``processes`` worker processes on one new file in ``folder``;
    with ``hog_ms``, one more process holds the write lock that long at a time."""
    path = str(folder / "writers.db")
    with SqliteCheckpointer.open(path) as store:
        store.run_queue.submit_many(
            [Submission(f"t-{i}", {"i": i}, max_attempts=3) for i in range(entries)]
        )
    spawn = multiprocessing.get_context("spawn")
    outs = [str(folder / f"worker-{n}.json") for n in range(processes)]
    stop_file = str(folder / "stop-hog")
    hog = None
    if hog_ms is not None:
        hog = spawn.Process(target=_hog, args=(path, hog_ms, max(5, hog_ms // 4), stop_file))
        hog.start()
    started = time.monotonic()
    workers = [
        spawn.Process(target=_work, args=(path, busy_ms, commits, f"writer-{n}", outs[n], ttl_s))
        for n in range(processes)
    ]
    for p in workers:
        p.start()
    for p in workers:
        p.join()
    seconds = time.monotonic() - started
    if hog is not None:
        Path(stop_file).touch()
        hog.join()
    for p in workers:
        if p.exitcode != 0:
            raise RuntimeError(f"a writer process exited with {p.exitcode}")
    counted = [json.loads(Path(o).read_text()) for o in outs]
    calls: dict[str, int] = {}
    for c in counted:
        for call, n in c["busy_calls"].items():
            calls[call] = calls.get(call, 0) + n
    with SqliteCheckpointer.open(path) as store:
        every = _every_entry(store)
    completed = sum(1 for e in every if isinstance(e.outcome, Completed))
    attempts = sum(len(e.attempts) for e in every)
    retried = sum(1 for e in every if len(e.attempts) > 1)
    return Result(
        processes=processes,
        entries=entries,
        busy_timeout_ms=busy_ms,
        seconds=seconds,
        completed=completed,
        not_completed=entries - completed,
        attempts_used=attempts,
        entries_retried=retried,
        busy_waits=sum(c["busy_waits"] for c in counted),
        busy_calls=calls,
        loop_store_errors=sum(c["loop_store_errors"] for c in counted),
    )


def row(r: Result) -> str:
    calls = ", ".join(f"{k} {v}" for k, v in sorted(r.busy_calls.items())) or "none"
    return (
        f"| {r.processes} | {r.entries} | {r.busy_timeout_ms} ms | {r.entries / r.seconds:.1f} "
        f"| {r.busy_waits} ({calls}) | {r.loop_store_errors} | {r.attempts_used} "
        f"| {r.entries_retried} | {r.completed} | {r.not_completed} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="bench-sqlite-writers.md")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON here")
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--commits", type=int, default=3)
    parser.add_argument(
        "--busy-timeout-ms", type=int, action="append", help="one run each (default 5000 and 20)"
    )
    parser.add_argument("--hog-ms", type=int, help="one more process holds the lock this long")
    parser.add_argument("--lease-ttl", type=float, default=30.0, help="seconds")
    args = parser.parse_args(argv)
    hog = (
        ""
        if args.hog_ms is None
        else f", one more holding the write lock {args.hog_ms} ms at a time"
    )
    lines = [
        f"{args.processes} worker processes on one SQLite file{hog}, {args.entries} entries of "
        f"{args.commits} commits each (`python -m tests.bench.sqlite_writers`; "
        f"{os.cpu_count()} CPUs).",
        "",
        "| processes | entries | busy_timeout | jobs/s | busy waits (by call) | StoreBusy in a "
        "worker's loop | attempts used | entries retried | completed | not completed |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    results = []
    for busy_ms in args.busy_timeout_ms or (5000, 20):
        with tempfile.TemporaryDirectory() as folder:
            log(f"{args.processes} processes, {args.entries} entries, busy_timeout {busy_ms} ms")
            result = run(
                Path(folder),
                processes=args.processes,
                entries=args.entries,
                busy_ms=busy_ms,
                commits=args.commits,
                hog_ms=args.hog_ms,
                ttl_s=args.lease_ttl,
            )
        results.append(result)
        lines.append(row(result))
        log(lines[-1])
    text = "\n".join(lines) + "\n"
    Path(args.out).write_text(text)
    if args.json:
        Path(args.json).write_text(json.dumps([dataclasses.asdict(r) for r in results]))
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
