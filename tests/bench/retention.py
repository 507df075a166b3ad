"""Retention growth (SPEC §24.4, issue 47 item 5): how big the store gets over many runs, with a
``keep_latest`` thread TTL swept by the queue's sweep job and without one, beside LangGraph's
``PostgresSaver`` with no cleanup, on the same runs.

``python -m tests.bench.retention --out bench-retention.md`` (in ``make bench``; ``make
bench-retention`` alone; a throwaway durable server unless ``DURABLE_GRAPH_TEST_DSN`` is set).
Defaults: 100,000 runs round-robin over 1,000 threads, sizes read every 20,000 runs. A run is a
LangGraph job: a queue entry submitted, begun (``begin_attempt``), the three-node graph of
`tests.bench.graph` (~1 KB of state: four checkpoints and their writes) invoked with
`DurableSaver` bound to the run's claim, finished (``finish_attempt``). The variants:

* **ours, TTL**: every thread gets a ``keep_latest`` TTL of ``--ttl-minutes`` after its first
  run (as ``checkpointer.ttl.default_ttl`` gives it to a new thread). The sweep is the service's:
  ``retention.set_up`` puts the ``retention:threads`` schedule (``*/--sweep-every-minutes``,
  ``sweep_limit`` ``--sweep-limit``), the bench fires each slot as a scheduler does
  (``fire_schedule``), and an `AsyncWorker` of kind ``retention`` in another process runs it
  with ``with_retention`` (``sweep_threads`` transactions until one takes fewer than its limit,
  each timed). After each sweep job the same process reclaims closed queue entries older than
  ``--keep-runs-minutes`` (``reclaim``, what an operator schedules: a TTL never removes runs);
* **ours, no TTL**: the same runs, nothing swept or reclaimed;
* **PostgresSaver**: the same graph on the same threads with LangGraph's saver, no cleanup (it
  has none).

Time is the store's, moved on (`PgClock`'s ``store_now()``) by ``--thread-gap-minutes`` /
``--threads`` a run: each thread runs once every ``--thread-gap-minutes`` of store time however
fast the machine is, so which threads are idle past their TTL at a mark, and therefore every
size, does not depend on the machine. At the defaults (a thread every 2 hours, TTL 1 hour, a
sweep every 5 minutes, runs kept a day) 100,000 runs are 200 hours of store time; the TTL must be
shorter than a thread's gap or nothing is ever idle long enough to be swept.

Reported at each mark: each schema's tables with their indexes and TOAST
(``pg_total_relation_size``, after ``VACUUM``: free space reusable, not returned to the OS — the
size an operator sees), the ratio of the last mark to the first (issue 47's target: within 1.2x
with a TTL), each table's heap, indexes and rows; for the sweep its transactions' durations
(p50, p99), the rows they removed a second, and the run cycle's p99 for runs that overlapped a
sweep job against those that did not (target: within 1.2x), beside the no-TTL variant's. Sizes
and rows are machine-independent; every timing moves with the machine's load.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import multiprocessing
import os
import signal
import statistics
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from durable_graph.core.model import JSON, ClaimPolicy, Completed, Submission, ThreadSweep
from durable_graph.postgres import PostgresCheckpointer
from durable_graph.postgres.async_store import AsyncPostgresCheckpointer
from durable_graph.postgres.config import PostgresConfig
from durable_graph.testkit.postgres import server as pg_server
from durable_graph.testkit.postgres.clock import PgClock

from .common import percentile
from .graph import INPUT, build_graph

LEASE = timedelta(minutes=5)
CLAIM = ClaimPolicy(ttl=timedelta(minutes=5))
RUN_KIND = "run"
SWEPT = ("checkpoints", "pending_writes", "events")
"""The tables a ``keep_latest`` sweep deletes from (its rows a second are theirs)."""
VACUUMED = (*SWEPT, "queue_entries", "queue_attempts", "thread_ttls", "threads")
"""The tables the sweep, the reclaim and the runs leave dead rows in."""
STOP = threading.Event()
"""Set by SIGUSR1: the soak stops at its next mark and the report is written with the marks so
far (a long run cut short keeps what it measured)."""


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


@dataclass(frozen=True)
class TableSize:
    total: int
    heap: int
    indexes: int
    rows: int


def sizes(dsn: str, schema: str) -> dict[str, TableSize]:
    """Each table of ``schema`` (the bench's clock table aside) after VACUUM, in bytes."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        tables = [
            str(r[0])
            for r in conn.execute(
                "SELECT c.relname FROM pg_class c WHERE c.relnamespace = %s::regnamespace"
                " AND c.relkind = 'r' AND c.relname <> 'dg_test_clock' ORDER BY 1",
                (schema,),
            )
        ]
        out: dict[str, TableSize] = {}
        for table in tables:
            conn.execute(f'VACUUM "{schema}"."{table}"')
            row = conn.execute(
                "SELECT pg_total_relation_size(c.oid), pg_relation_size(c.oid),"
                " pg_indexes_size(c.oid) FROM pg_class c"
                " WHERE c.oid = format('%%I.%%I', %s::text, %s::text)::regclass",
                (schema, table),
            ).fetchone()
            count = conn.execute(f'SELECT count(*) FROM "{schema}"."{table}"').fetchone()
            assert row is not None and count is not None
            out[table] = TableSize(int(row[0]), int(row[1]), int(row[2]), int(count[0]))
        return out


def deletes(dsn: str, schema: str, tables: tuple[str, ...]) -> int:
    """Rows deleted from ``tables`` of ``schema`` since the server started (its statistics)."""
    time.sleep(1.5)  # a backend's counts reach the shared statistics within a second
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT coalesce(sum(n_tup_del), 0) FROM pg_stat_user_tables"
            " WHERE schemaname = %s AND relname = ANY (%s)",
            (schema, list(tables)),
        ).fetchone()
    return int(row[0]) if row is not None else 0


class TimedStore(AsyncPostgresCheckpointer):
    """The sweeper's store: each `sweep_threads` transaction timed onto ``timings``."""

    timings: Any = None

    async def sweep_threads(self, limit: int = 100) -> ThreadSweep:
        started = time.monotonic()
        done = await super().sweep_threads(limit)
        self.timings.put(("tx", started, time.monotonic(), done.kept_latest + done.deleted))
        return done


def _sweeper(
    dsn: str, schema: str, args: argparse.Namespace, ready: Any, stop: Any, out: Any
) -> None:
    """The sweep as `serve` runs it: ``retention.set_up`` puts the schedule, a worker of kind
    ``retention`` runs each slot's entry through ``with_retention``; then the operator's reclaim."""
    from durable_graph.service import retention
    from durable_graph.worker.aio import AsyncWorker

    async def main() -> None:
        config = PostgresConfig(schema=schema, auto_migrate=False)
        store = await TimedStore.open(dsn, config)
        assert isinstance(store, TimedStore)
        store.timings = out
        ttl = retention.ThreadTtlConfig(
            strategy="keep_latest",
            default_ttl=args.ttl_minutes,
            sweep_interval_minutes=args.sweep_every_minutes,
            sweep_limit=args.sweep_limit,
        )
        await retention.set_up(store, ttl, None)
        ready.set()

        async def runs_only(ctx: Any) -> JSON:
            raise AssertionError(f"the sweeper leased a {ctx.entry.kind} entry")

        sweep = retention.with_retention(runs_only)

        async def job(ctx: Any) -> JSON:
            started = time.monotonic()
            result = await sweep(ctx)
            swept = time.monotonic()
            removed = await store.run_queue.reclaim(
                timedelta(minutes=args.keep_runs_minutes), 100_000
            )
            out.put(("job", started, swept, time.monotonic(), removed))
            if args.vacuum == "after-sweep":
                await vacuum()
            return result

        async def vacuum() -> None:
            # Autovacuum in store time: a real deployment's autovacuum (naptime 1 min) passes
            # within a minute of a sweep; here a store minute is a fraction of a real second.
            started = time.monotonic()
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
                for table in VACUUMED:
                    await conn.execute(f'VACUUM "{schema}"."{table}"')
            out.put(("vacuum", started, time.monotonic()))

        long = timedelta(days=30)  # store time runs hours a second here
        worker = AsyncWorker(
            store,
            job,
            kinds=[retention.KIND],
            lease_ttl=long,
            claim_policy=ClaimPolicy(ttl=long),
            poll_interval=timedelta(milliseconds=20),
        )

        async def stopper() -> None:
            while not stop.is_set():
                await asyncio.sleep(0.05)
            worker.stop()

        try:
            await asyncio.gather(worker.run(), stopper())
        finally:
            await store.close()

    asyncio.run(main())


class Ours:
    def __init__(self, dsn: str, schema: str) -> None:
        from durable_graph.langgraph import DurableSaver

        self.store = PostgresCheckpointer.open(dsn, PostgresConfig(schema=schema))
        self.saver = DurableSaver(self.store)

    def run(self, thread_id: str) -> None:
        run_id = f"run-{uuid.uuid4().hex}"
        self.store.run_queue.submit(Submission(thread_id=thread_id, input={"go": 1}, kind=RUN_KIND))
        begun = self.store.begin_attempt(
            "bench", LEASE, run_id=run_id, claim_policy=CLAIM, kinds=[RUN_KIND]
        )
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


class StoreTime:
    """The store's clock, moved on a run at a time over one connection (`PgClock`'s table)."""

    def __init__(self, dsn: str, schema: str) -> None:
        PgClock(dsn, schema)
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.conn.execute("SET synchronous_commit = off")  # the bench's clock, not a result
        self.table = f'"{schema}".dg_test_clock'

    def advance(self, delta: timedelta) -> datetime:
        row = self.conn.execute(
            f"UPDATE {self.table} SET clock_offset = clock_offset + %s"
            " RETURNING clock_timestamp() + clock_offset",
            (delta,),
        ).fetchone()
        assert row is not None
        return row[0]  # type: ignore[no-any-return]

    def close(self) -> None:
        self.conn.close()


@dataclass
class Soak:
    variant: str
    marks: list[tuple[int, dict[str, TableSize]]] = field(default_factory=list)
    cycles: list[tuple[float, float]] = field(default_factory=list)  # (start, end), monotonic
    txs: list[tuple[float, float, int]] = field(default_factory=list)  # (start, end, threads)
    jobs: list[tuple[float, float, float, int]] = field(default_factory=list)
    vacuums: list[tuple[float, float]] = field(default_factory=list)
    rows_swept: int = 0
    seconds: float = 0.0


def _drain(out: Any, soak: Soak) -> None:
    while True:
        try:
            item = out.get_nowait()
        except Exception:  # queue.Empty
            return
        if item[0] == "tx":
            soak.txs.append((item[1], item[2], item[3]))
        elif item[0] == "vacuum":
            soak.vacuums.append((item[1], item[2]))
        else:
            soak.jobs.append((item[1], item[2], item[3], item[4]))


def soak(args: argparse.Namespace, dsn: str, variant: str) -> Soak:
    """``args.runs`` runs of ``variant``, its sizes at every mark."""
    schema = f"bench_ret_{variant}_{uuid.uuid4().hex[:6]}"
    runner: Ours | Theirs = Theirs(dsn, schema) if variant == "saver" else Ours(dsn, schema)
    threads = [f"t-{i}" for i in range(args.threads)]
    result = Soak(variant)
    step = timedelta(minutes=args.thread_gap_minutes / args.threads)
    every = timedelta(minutes=args.sweep_every_minutes)
    clock = StoreTime(dsn, schema) if variant == "ttl" else None
    stop = multiprocessing.Event()
    ready = multiprocessing.Event()
    out: Any = multiprocessing.Queue()
    sweeper = None
    fired = 0
    last_slot: datetime | None = None
    began = time.monotonic()
    try:
        if clock is not None:
            sweeper = multiprocessing.Process(
                target=_sweeper, args=(dsn, schema, args, ready, stop, out)
            )
            sweeper.start()
            if not ready.wait(120):
                raise RuntimeError("the sweeper did not start")
        for done in range(1, args.runs + 1):
            thread_id = threads[(done - 1) % args.threads]
            if clock is not None and isinstance(runner, Ours):
                now = clock.advance(step)
                slot = datetime.fromtimestamp(
                    now.timestamp() // every.total_seconds() * every.total_seconds(), now.tzinfo
                )
                if last_slot is None or slot > last_slot:
                    from durable_graph.service.retention import THREADS

                    if runner.store.run_queue.fire_schedule(THREADS, slot) is not None:
                        fired += 1
                    last_slot = slot
            t0 = time.monotonic()
            runner.run(thread_id)
            result.cycles.append((t0, time.monotonic()))
            if clock is not None and done <= args.threads:
                assert isinstance(runner, Ours)
                runner.store.set_thread_ttl(thread_id, args.ttl_minutes, "keep_latest")
            if done % args.mark == 0:
                if clock is not None:  # the slots fired so far swept before sizes are read
                    deadline = time.monotonic() + 300
                    while len(result.jobs) < fired and time.monotonic() < deadline:
                        _drain(out, result)
                        time.sleep(0.01)
                measured = sizes(dsn, schema)
                result.marks.append((done, measured))
                total = sum(s.total for s in measured.values())
                big = sorted(measured.items(), key=lambda kv: -kv[1].total)[:4]
                parts = ", ".join(f"{k} {v.total / 2**20:.1f}" for k, v in big)
                log(
                    f"  {variant} {done:,} runs: {total / 2**20:.1f} MiB ({parts});"
                    f" {time.monotonic() - began:.0f} s"
                )
                if STOP.is_set():
                    log(f"  {variant}: stopped at {done:,} runs (SIGUSR1)")
                    break
    finally:
        stop.set()
        if sweeper is not None:
            sweeper.join(timeout=120)
        _drain(out, result)
        runner.close()
        if clock is not None:
            clock.close()
    result.seconds = time.monotonic() - began
    if variant == "ttl":
        result.rows_swept = deletes(dsn, schema, SWEPT)
    return result


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f}"


def size_table(soaks: list[Soak]) -> list[str]:
    names = {"ttl": "ours, keep_latest TTL", "none": "ours, no TTL", "saver": "PostgresSaver"}
    lines = [
        "| runs | " + " | ".join(f"{names[s.variant]} (MiB)" for s in soaks) + " |",
        "|---:|" + "---:|" * len(soaks),
    ]
    marks = [m for m, _ in soaks[0].marks]
    for i, mark in enumerate(marks):
        cells = []
        for s in soaks:
            if i < len(s.marks):
                cells.append(_mib(sum(t.total for t in s.marks[i][1].values())))
            else:
                cells.append("-")
        lines.append(f"| {mark:,} | " + " | ".join(cells) + " |")
    ratios = []
    for s in soaks:
        totals = [sum(t.total for t in m.values()) for _, m in s.marks]
        ratios.append(f"{totals[-1] / totals[0]:.2f}x" if totals else "-")
    lines.append("| last ÷ first | " + " | ".join(ratios) + " |")
    return lines


def detail_table(s: Soak) -> list[str]:
    tables = sorted(
        {t for _, m in s.marks for t, v in m.items() if v.total >= 64 * 1024},
        key=lambda t: -s.marks[-1][1].get(t, TableSize(0, 0, 0, 0)).total,
    )
    lines = [
        f"{s.variant}: each table's total MiB (heap + indexes MiB, rows) at each mark",
        "",
        "| table | " + " | ".join(f"{m:,}" for m, _ in s.marks) + " |",
        "|---|" + "---:|" * len(s.marks),
    ]
    for t in tables:
        cells = []
        for _, m in s.marks:
            v = m.get(t, TableSize(0, 0, 0, 0))
            cells.append(f"{_mib(v.total)} ({_mib(v.heap)} + {_mib(v.indexes)}, {v.rows:,})")
        lines.append(f"| {t} | " + " | ".join(cells) + " |")
    return lines


class Windows:
    """Intervals of the sweeper's activity (monotonic seconds), asked whether a run overlapped
    one: a bisect over their sorted starts (intervals never overlap: one sweeper)."""

    def __init__(self, windows: list[tuple[float, float]]) -> None:
        self.windows = sorted(windows)
        self.starts = [a for a, _ in self.windows]

    def overlaps(self, start: float, end: float) -> bool:
        i = bisect.bisect_right(self.starts, end)  # windows starting at or before the run ended
        return i > 0 and self.windows[i - 1][1] >= start


def _cycle_row(name: str, cycles: list[float]) -> str:
    if not cycles:
        return f"| {name} | 0 | | |"
    return (
        f"| {name} | {len(cycles):,} | {statistics.median(cycles) * 1000:.1f} |"
        f" {percentile(cycles, 0.99) * 1000:.1f} |"
    )


def sweep_report(ttl: Soak, none: Soak | None) -> list[str]:
    durations = [end - start for start, end, _ in ttl.txs]
    swept = sum(n for _, _, n in ttl.txs)
    busy = sum(durations)
    txs = Windows([(a, b) for a, b, _ in ttl.txs])
    jobs = Windows([(a, c) for a, _, c, _ in ttl.jobs])
    vacuums = Windows(ttl.vacuums)
    in_tx: list[float] = []
    in_job: list[float] = []
    in_vacuum: list[float] = []
    quiet: list[float] = []
    for s, e in ttl.cycles:
        if txs.overlaps(s, e):
            in_tx.append(e - s)
        elif jobs.overlaps(s, e):
            in_job.append(e - s)
        elif vacuums.overlaps(s, e):
            in_vacuum.append(e - s)
        else:
            quiet.append(e - s)
    lines = [
        "| the sweep | |",
        "|---|---:|",
        f"| sweep jobs (slots fired and run) | {len(ttl.jobs):,} |",
        f"| `dg_sweep_threads_v1` transactions | {len(durations):,} |",
        f"| transaction p50 / p99 / max (ms) | {percentile(durations, 0.5) * 1000:.1f} /"
        f" {percentile(durations, 0.99) * 1000:.1f} / {max(durations, default=0) * 1000:.1f} |",
        f"| threads pruned to their head | {swept:,} |",
        f"| rows removed (checkpoints, writes, events) | {ttl.rows_swept:,} |",
        f"| rows removed a second of sweep transaction | {ttl.rows_swept / max(busy, 1e-9):,.0f} |",
        f"| closed queue entries reclaimed | {sum(r for *_, r in ttl.jobs):,} |",
        "",
        "| run cycle (submit → lease → graph → finish) | runs | p50 ms | p99 ms |",
        "|---|---:|---:|---:|",
        _cycle_row("TTL, overlapping a sweep transaction", in_tx),
        _cycle_row("TTL, overlapping the rest of a sweep job (lease, reclaim, finish)", in_job),
        _cycle_row("TTL, overlapping the bench's VACUUM only", in_vacuum),
        _cycle_row("TTL, nothing of the sweeper running", quiet),
    ]
    if none is not None and none.cycles:
        lines.append(_cycle_row("no TTL (no sweep at all)", [e - s for s, e in none.cycles]))
    if in_tx and quiet:
        ratio = percentile(in_tx, 0.99) / percentile(quiet, 0.99)
        lines += [
            "",
            f"p99 overlapping a sweep transaction ÷ p99 with nothing of the sweeper running:"
            f" **{ratio:.2f}x** (target ≤ 1.2x).",
        ]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="bench-retention.md")
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--threads", type=int, default=1_000)
    parser.add_argument("--mark", type=int, default=20_000, help="read sizes every N runs")
    parser.add_argument("--thread-gap-minutes", type=float, default=120.0,
                        help="store time between two runs of a thread")  # fmt: skip
    parser.add_argument("--ttl-minutes", type=float, default=60.0)
    parser.add_argument("--sweep-every-minutes", type=int, default=5)
    parser.add_argument("--sweep-limit", type=int, default=1_000)
    parser.add_argument("--keep-runs-minutes", type=float, default=1440.0,
                        help="reclaim closed queue entries older than this")  # fmt: skip
    parser.add_argument(
        "--vacuum",
        choices=("after-sweep", "auto"),
        default="after-sweep",
        help="VACUUM the swept tables after each sweep job (autovacuum in store time), or leave"
        " them to the server's autovacuum (real time: sizes then depend on the machine)",
    )
    parser.add_argument("--only", choices=("ttl", "none", "saver"), action="append")
    args = parser.parse_args(argv)
    if args.ttl_minutes >= args.thread_gap_minutes:
        parser.error("--ttl-minutes must be below --thread-gap-minutes, or nothing is swept")
    soaks: list[Soak] = []
    signal.signal(signal.SIGUSR1, lambda *_: STOP.set())
    with postgres_dsn() as dsn:
        for variant in args.only or ("ttl", "none", "saver"):
            log(f"{variant}: {args.runs:,} runs over {args.threads:,} threads")
            soaks.append(soak(args, dsn, variant))
            if STOP.is_set():
                break
    lines = [
        f"# Retention growth: {args.runs:,} runs over {args.threads:,} threads",
        "",
        f"`python -m tests.bench.retention --runs {args.runs} --threads {args.threads}"
        f" --mark {args.mark}`; store time: a thread runs every {args.thread_gap_minutes:g} min,"
        f" `keep_latest` TTL {args.ttl_minutes:g} min, a sweep every"
        f" {args.sweep_every_minutes} min (`sweep_limit` {args.sweep_limit}), closed runs"
        f" reclaimed after {args.keep_runs_minutes:g} min. Sizes: `pg_total_relation_size` of"
        " every table after VACUUM (machine-independent). Wall time: "
        + ", ".join(f"{s.variant} {s.seconds:.0f} s" for s in soaks)
        + " (timings below move with the machine's load).",
        "",
        *size_table(soaks),
    ]
    for s in soaks:
        lines += ["", *detail_table(s)]
    by = {s.variant: s for s in soaks}
    if "ttl" in by:
        lines += ["", *sweep_report(by["ttl"], by.get("none"))]
    text = "\n".join(lines) + "\n"
    Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
