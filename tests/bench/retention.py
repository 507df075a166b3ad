"""Retention growth (SPEC §24.4, issue 47 item 5): how big the store gets over many runs, with a
``keep_latest`` thread TTL swept as a queue job and without one, beside LangGraph's
``PostgresSaver`` with no cleanup, on the same runs.

``python -m tests.bench.retention --out bench-retention.md`` (in ``make bench``; a throwaway
server unless ``DURABLE_GRAPH_TEST_DSN`` is set). Defaults: 100,000 runs round-robin over 1,000
threads, sizes read every 20,000 runs. A run is the three-node graph of `tests.bench.graph`
(~1 KB of state, four checkpoints and their writes) invoked on its thread:

* **ours, TTL**: a queue entry submitted, begun (`begin_attempt`), the graph run with
  `DurableSaver` bound to the run's claim, finished (`finish_attempt`); every thread has a
  ``keep_latest`` TTL of ``--ttl-seconds`` (2 s); a sweeper process runs the sweep job's loop
  as `service.retention.sweep` runs it (`sweep_threads` transactions of ``--sweep-limit``
  threads until one finds fewer, each timed) every
  ``--sweep-every`` seconds, and closed entries are reclaimed as an operator does
  (``reclaim(older_than=--ttl-seconds)`` with each sweep);
* **ours, no TTL**: the same runs, no sweep, no reclaim;
* **PostgresSaver**: the same graph on LangGraph's saver, no cleanup (it has none to run).

Reported at each mark: the schema's tables with their indexes (``pg_total_relation_size``, after
``VACUUM``, so free space left by deletes is reusable but not returned to the OS: the size an
operator sees), the ratio of the last mark to the first (the issue's target: within 1.2x with a
TTL), and for the sweep its transactions' durations (p50, p99), the rows a second it removes,
and the p99 of the run cycle while a sweep runs against while none does (target: within 1.2x).
The machine's load moves every timing; sizes do not. A thread expires only after ``--ttl-seconds``
without a run: keep it well below the time between two runs of a thread (``--threads`` runs at
the cycle's rate; about ten seconds at the defaults), or nothing is ever swept.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import statistics
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg

from durable_graph.core.model import ClaimPolicy, Completed, Submission
from durable_graph.postgres import PostgresCheckpointer
from durable_graph.postgres.config import PostgresConfig
from durable_graph.testkit.postgres import server as pg_server

from .common import percentile
from .graph import INPUT, build_graph

LEASE = timedelta(minutes=5)
CLAIM = ClaimPolicy(ttl=timedelta(minutes=5))


def log(line: str) -> None:
    print(line, flush=True)


@contextlib.contextmanager
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


def sizes(dsn: str, schema: str) -> dict[str, int]:
    """Each table of ``schema`` with its indexes and TOAST, after VACUUM, in bytes."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT c.relname FROM pg_class c WHERE c.relnamespace = %s::regnamespace"
                " AND c.relkind = 'r' ORDER BY 1",
                (schema,),
            )
        ]
        for table in tables:
            conn.execute(f'VACUUM "{schema}"."{table}"')
        return {
            table: int(
                conn.execute(
                    "SELECT pg_total_relation_size(format('%%I.%%I', %s::text, %s::text))",
                    (schema, table),
                ).fetchone()[0]  # type: ignore[index]
            )
            for table in tables
        }


def _sweeper(
    dsn: str, schema: str, every: float, limit: int, ttl: float, stop: Any, out: Any
) -> None:
    """The sweep job's loop, as a worker runs it each slot: its transactions' durations, the
    threads they swept, and when each sweep ran (for the concurrent p99)."""
    import asyncio

    from durable_graph.postgres.async_store import AsyncPostgresCheckpointer

    async def loop() -> None:
        config = PostgresConfig(schema=schema, auto_migrate=False)
        async with await AsyncPostgresCheckpointer.open(dsn, config) as store:
            while not stop.is_set():
                started = time.monotonic()
                while True:
                    t0 = time.perf_counter()
                    done = await store.sweep_threads(limit)
                    out.put(("tx", time.perf_counter() - t0, done.deleted + done.kept_latest))
                    if done.checked < limit:
                        break
                await store.run_queue.reclaim(timedelta(seconds=ttl), 10_000)
                out.put(("sweep", started, time.monotonic()))
                await asyncio.sleep(every)

    asyncio.run(loop())


class Ours:
    def __init__(self, dsn: str, schema: str) -> None:
        self.store = PostgresCheckpointer.open(dsn, PostgresConfig(schema=schema))
        from durable_graph.langgraph import DurableSaver

        self.saver = DurableSaver(self.store)

    def run(self, thread_id: str) -> None:
        run_id = f"run-{uuid.uuid4().hex}"
        self.store.run_queue.submit(Submission(thread_id=thread_id, input={"go": 1}))
        begun = self.store.begin_attempt("bench", LEASE, run_id=run_id, claim_policy=CLAIM)
        assert begun is not None and begun.claim is not None, begun
        graph = build_graph(self.saver.for_run(begun.claim, run_id))
        out = graph.invoke(INPUT, {"configurable": {"thread_id": thread_id}})
        assert out["step"] == 3
        self.store.finish_attempt(begun.lease, Completed(), begun.claim)

    def close(self) -> None:
        self.store.close()


class Theirs:
    def __init__(self, dsn: str, schema: str) -> None:
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        self.conn = psycopg.Connection.connect(
            dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row,
            options=f"-c search_path={schema}",
        )  # fmt: skip
        self.conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        saver = PostgresSaver(self.conn)
        saver.setup()
        self.graph = build_graph(saver)

    def run(self, thread_id: str) -> None:
        out = self.graph.invoke(INPUT, {"configurable": {"thread_id": thread_id}})
        assert out["step"] == 3

    def close(self) -> None:
        self.conn.close()


def soak(args: argparse.Namespace, dsn: str, variant: str) -> tuple[list[str], list[str]]:
    """The variant's size rows, and (with a TTL) the sweep's report."""
    schema = f"bench_ret_{variant}_{uuid.uuid4().hex[:6]}"
    runner: Ours | Theirs = Theirs(dsn, schema) if variant == "saver" else Ours(dsn, schema)
    threads = [f"t-{i}" for i in range(args.threads)]
    stop = multiprocessing.Event()
    out: Any = multiprocessing.Queue()
    sweeper = None
    cycle: list[tuple[float, float]] = []  # (when it ended, seconds)
    rows: list[str] = []
    first: int | None = None
    try:
        if variant == "ttl":
            assert isinstance(runner, Ours)
            for thread_id in threads:  # each thread made by its first run, then given its TTL
                runner.run(thread_id)
                runner.store.set_thread_ttl(thread_id, args.ttl_seconds / 60, "keep_latest")
            sweeper = multiprocessing.Process(
                target=_sweeper,
                args=(dsn, schema, args.sweep_every, args.sweep_limit, args.ttl_seconds, stop, out),
            )
            sweeper.start()
        done = args.threads if variant == "ttl" else 0
        while done < args.runs:
            t0 = time.perf_counter()
            runner.run(threads[done % args.threads])
            cycle.append((time.monotonic(), time.perf_counter() - t0))
            done += 1
            if done % args.mark == 0:
                measured = sizes(dsn, schema)
                total = sum(measured.values())
                first = first if first is not None else total
                big = sorted(measured.items(), key=lambda kv: -kv[1])[:4]
                parts = ", ".join(f"{k} {v / 2**20:.1f}" for k, v in big)
                rows.append(
                    f"| {variant} | {done:,} | {total / 2**20:.1f} | {total / first:.2f}x | {parts} |"
                )
                log(rows[-1])
    finally:
        stop.set()
        if sweeper is not None:
            sweeper.join(timeout=120)
        runner.close()
    return rows, sweep_report(out, cycle) if variant == "ttl" else []


def sweep_report(out: Any, cycle: list[tuple[float, float]]) -> list[str]:
    txs: list[float] = []
    swept = 0
    windows: list[tuple[float, float]] = []
    while not out.empty():
        kind, a, b = out.get()
        if kind == "tx":
            txs.append(a)
            swept += b
        else:
            windows.append((a, b))
    during = [s for end, s in cycle if any(lo <= end <= hi for lo, hi in windows)]
    outside = [s for end, s in cycle if not any(lo <= end <= hi for lo, hi in windows)]
    lines = [
        f"Sweep: {len(txs)} transactions, p50 {percentile(txs, 0.50) * 1000:.1f} ms, "
        f"p99 {percentile(txs, 0.99) * 1000:.1f} ms; {swept:,} threads swept, "
        f"{swept / max(sum(txs), 1e-9):,.0f} threads a second of sweep time."
        if txs
        else "Sweep: no transaction ran.",
    ]
    if during and outside:
        p99_in, p99_out = percentile(during, 0.99), percentile(outside, 0.99)
        lines.append(
            f"Run cycle p99 while a sweep ran {p99_in * 1000:.1f} ms ({len(during)} runs), "
            f"otherwise {p99_out * 1000:.1f} ms ({len(outside)} runs): "
            f"{p99_in / p99_out:.2f}x (median {statistics.median(during) * 1000:.1f} / "
            f"{statistics.median(outside) * 1000:.1f} ms)."
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="bench-retention.md")
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--threads", type=int, default=1_000)
    parser.add_argument("--mark", type=int, default=20_000, help="read sizes every N runs")
    parser.add_argument("--ttl-seconds", type=float, default=2.0)
    parser.add_argument("--sweep-every", type=float, default=5.0)
    parser.add_argument("--sweep-limit", type=int, default=1_000)
    parser.add_argument("--only", choices=("ttl", "none", "saver"), action="append")
    args = parser.parse_args(argv)
    rows = [
        f"Retention growth: {args.runs:,} runs over {args.threads:,} threads "
        f"(`python -m tests.bench.retention`), sizes every {args.mark:,} runs (MiB, with "
        "indexes and TOAST, after VACUUM).",
        "",
        "| variant | runs | total MiB | ÷ first mark | largest tables (MiB) |",
        "|---|---:|---:|---:|---|",
    ]
    with postgres_dsn() as dsn:
        notes: list[str] = []
        for variant in args.only or ("ttl", "none", "saver"):
            log(f"{variant}: {args.runs} runs")
            table, report = soak(args, dsn, variant)
            rows += table
            notes += report
        rows += ["", *notes]
    text = "\n".join(rows) + "\n"
    Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
