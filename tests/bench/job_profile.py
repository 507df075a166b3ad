"""Where a job's cost goes, per stack: time, WAL, index entries, statements, locks (SPEC §18.2).

    .venv/bin/python -m tests.bench.job_profile [--jobs 1000] [--open 100000] [--out FILE]

Each stack of the fast-path bench's job family (`tests.bench.jobs`: submit ~100 B → take →
one ~1 KB checkpoint → complete) runs ``jobs`` jobs in a row, after 200 to warm up, alone, on
one durable server (fsync on) with `tests.bench.inventory`'s settings. Reported per job: the wall
time and the client process's CPU (``process_time``), and what `tests.bench.inventory` counts
over the window: server time, statements executed (nested included), WAL bytes, durable
transactions, index entries, heap row versions and row-lock records.

Every stack is measured twice: on a fresh store, and on a populated one, ``open`` open entries
(jobs) that are not due (delayed a year) on as many other threads, as a store in service holds
— a cost that grows with them shows there (issue 25's growth bug: the independent harness ran
on a store that had accumulated entries, this profile used to run on an empty one). ``ours (4
txns)`` is the same job with ``commit`` then ``finish_attempt``, for the fusion's price.
Serial and one client, so that nothing but the stack's own work is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg

from durable_graph.postgres.migrations import migrate
from durable_graph.testkit.postgres import server as pg_server

from . import inventory, jobs
from .checkpoint import setup_langgraph
from .common import JOB_INPUT, settled
from .queue import setup_pgqueuer, setup_procrastinate
from .run import create_databases

WARMUP = 200


@dataclass
class Profile:
    """One stack's per-job figures."""

    name: str
    store: str
    wall_ms: float
    cpu_ms: float
    server_ms: float
    statements: float
    wal_bytes: float
    commits: float
    index_entries: float
    heap_versions: float
    hot_updates: float
    lock_records: float
    steps: dict[str, float]
    top: list[tuple[float, str]]

    def row(self) -> str:
        return (
            f"| {self.name} | {self.store} | {self.wall_ms:.2f} | {self.cpu_ms:.2f} | "
            f"{self.server_ms:.3f} | {self.wal_bytes / 1024:.2f} | {self.commits:.1f} | "
            f"{self.index_entries:.1f} | {self.heap_versions:.1f} ({self.hot_updates:.1f} HOT) | "
            f"{self.lock_records:.1f} | {self.statements:.0f} |"
        )


HEADER = [
    "| per job | store | wall ms | client CPU ms | server ms | WAL KiB | durable txns "
    "| index entries | heap row versions | lock records | statements |",
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
]


async def _profile(name: str, store: str, workload: Any, admin_dsn: str, n: int) -> Profile:
    await settled(workload.setup())
    for _ in range(WARMUP):
        await settled(workload.op())
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        start = inventory.start_window(admin)
    steps: dict[str, int] = {}
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(n):
        for step, ns in (await settled(workload.op())).items():
            steps[step] = steps.get(step, 0) + ns
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        counted = inventory.end_window(admin, start, n)
    await settled(workload.close())
    return Profile(
        name=name,
        store=store,
        wall_ms=wall / n * 1e3,
        cpu_ms=cpu / n * 1e3,
        server_ms=counted.server_ms,
        statements=counted.statement_count,
        wal_bytes=counted.wal_bytes,
        commits=counted.commits,
        index_entries=counted.index_entries,
        heap_versions=counted.heap_versions,
        hot_updates=counted.hot_updates,
        lock_records=counted.lock_records,
        steps={k: v / n / 1e6 for k, v in steps.items()},
        top=counted.top(4),
    )


def populate_ours(dsn: str, schema: str, n: int) -> None:
    """``n`` open entries not due for a year, one per thread, with their thread rows (the queue
    head on each, migration 0018)."""
    job = json.dumps(JOB_INPUT, sort_keys=True, separators=(",", ":"))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'SET search_path = "{schema}"')
        with conn.transaction():
            conn.execute(
                """INSERT INTO queue_entries (tenant, thread_id, key, input, mode, max_attempts,
                                              submitted_at, not_before, queue_rank)
                   SELECT NULL, 'pop-' || g, NULL, %s, 'enqueue', 3, now(),
                          now() + interval '365 days', 2
                     FROM generate_series(1, %s) g ORDER BY g""",
                (job, n),
            )
            conn.execute(
                """INSERT INTO threads (thread_id, head_entry_id, head_tenant,
                                        lease_expires_at)
                   SELECT thread_id, entry_id, NULL, not_before FROM queue_entries
                    WHERE thread_id LIKE 'pop-%%'"""
            )
        for table in ("queue_entries", "threads"):
            conn.execute(f"VACUUM ANALYZE {table}")


async def populate_procrastinate(dsn: str, n: int) -> None:
    """``n`` jobs scheduled a year ahead (procrastinate's own columns), in the bench queue."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            """INSERT INTO procrastinate_jobs (queue_name, task_name, args, scheduled_at)
               SELECT 'bench', 'bench_task', %s::jsonb, now() + interval '365 days'
                 FROM generate_series(1, %s)""",
            (json.dumps(JOB_INPUT), n),
        )
        conn.execute("VACUUM ANALYZE procrastinate_jobs")


async def populate_pgqueuer(dsn: str, n: int) -> None:
    """``n`` queued jobs of another entrypoint (pgqueuer has no delay in this version's
    dequeue path for them to wait behind: they are simply not asked for)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            """INSERT INTO pgqueuer (priority, entrypoint, payload, status)
               SELECT 0, 'other', %s::bytea, 'queued' FROM generate_series(1, %s)""",
            (json.dumps(JOB_INPUT).encode(), n),
        )
        conn.execute("VACUUM ANALYZE pgqueuer")


STACKS = ("ours", "ours4", "procrastinate", "pgqueuer")
"""The stacks `--stacks` names: ours (fused, 3 transactions), ours4 (commit then finish)."""


def _stacks(dsns: dict[str, str], tag: str, wanted: set[str]) -> list[tuple[str, Any]]:
    anchors = {"lg_dsn": dsns["langgraph"], "tag": tag}
    ours = {"backend": "postgres", "dsn": dsns["ours"], "schema": "bench", "tag": tag}
    every: dict[str, tuple[str, Callable[[], Any]]] = {
        "ours": ("durable_graph", lambda: jobs.OursJob(ours, 0)),
        "ours4": (
            "durable_graph (4 txns)",
            lambda: jobs.OursJob({**ours, "fused": False, "tag": tag + "u"}, 0),
        ),
        "procrastinate": (
            "procrastinate + LangGraph",
            lambda: jobs.ProcrastinateJob({**anchors, "dsn": dsns["procrastinate"]}, 0),
        ),
        "pgqueuer": (
            "pgqueuer (asyncpg) + LangGraph",
            lambda: jobs.PgqueuerJob({**anchors, "dsn": dsns["pgqueuer"], "driver": "asyncpg"}, 0),
        ),
    }
    return [(every[k][0], every[k][1]()) for k in STACKS if k in wanted]


def run(n: int, open_entries: int, wanted: set[str]) -> list[Profile]:
    server = pg_server.start(inventory.SETTINGS, durable=True)
    profiles: list[Profile] = []
    try:
        base = server.dsn()
        with psycopg.connect(base, autocommit=True) as admin:
            inventory.prepare(admin)
        for store in ("fresh", f"{open_entries:,} open"):
            names = ["ours", "langgraph", "procrastinate", "pgqueuer"]
            dsns = create_databases(base, names)
            migrate(dsns["ours"], "bench")
            setup_langgraph(dsns["langgraph"])
            asyncio.run(setup_procrastinate(dsns["procrastinate"]))
            asyncio.run(setup_pgqueuer(dsns["pgqueuer"]))
            if store != "fresh":
                populate_ours(dsns["ours"], "bench", open_entries)
                asyncio.run(populate_procrastinate(dsns["procrastinate"], open_entries))
                asyncio.run(populate_pgqueuer(dsns["pgqueuer"], open_entries))
            for name, workload in _stacks(dsns, "fresh" if store == "fresh" else "pop", wanted):
                profile = asyncio.run(_profile(name, store, workload, base, n))
                print(profile.row(), flush=True)
                profiles.append(profile)
    finally:
        server.stop()
    return profiles


def report(profiles: list[Profile]) -> list[str]:
    lines = list(HEADER) + [p.row() for p in profiles]
    lines += ["", "Per step (ms, client-measured) and the costliest top-level statements (ms):", ""]
    for p in profiles:
        steps = ", ".join(f"{k} {v:.2f}" for k, v in p.steps.items())
        top = "; ".join(f"{t:.3f} `{q}`" for t, q in p.top)
        lines.append(f"- {p.name}, {p.store}: {steps}. Top: {top}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--open", type=int, default=100_000, dest="open_entries")
    parser.add_argument("--out", default=None)
    parser.add_argument("--stacks", default=",".join(STACKS), help="of " + ", ".join(STACKS))
    args = parser.parse_args(argv)
    lines = report(run(args.jobs, args.open_entries, set(args.stacks.split(","))))
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write("# Job profile (tests.bench.job_profile)\n\n" + text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
