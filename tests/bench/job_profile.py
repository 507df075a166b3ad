"""Where a job's cost goes, per stack: time, WAL, index entries, statements, locks (SPEC §18.2).

    .venv/bin/python -m tests.bench.job_profile [--jobs 1000] [--open 100000] [--out FILE]

Each stack of the fast-path bench's job family (`tests.bench.jobs`: submit ~100 B → take →
one ~1 KB checkpoint → complete) runs ``jobs`` jobs in a row, after 200 to warm up, alone, on
one durable server (fsync on, ``autovacuum`` off so that only the stack writes WAL) with
``pg_stat_statements`` (``track = all``) and ``pg_walinspect``. Reported per job:

- wall time and the client process's CPU (``process_time``);
- server time: the execution time of the top-level statements (``toplevel``), and statements:
  every statement executed, nested ones (inside PL/pgSQL) included;
- the WAL written in the window: its bytes (the distance between the window's two LSNs, as
  ``pg_wal_lsn_diff`` gives it), and from its records (``pg_get_wal_stats``) the commit records
  (durable transactions), index entries (B-tree leaf inserts, splits included), heap row versions
  (insert, update, HOT update) and row-lock records (``Heap/LOCK``, ``Heap2/LOCK_UPDATED``).

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

from . import jobs
from .checkpoint import setup_langgraph
from .common import JOB_INPUT, settled
from .queue import setup_pgqueuer, setup_procrastinate
from .run import create_databases

WARMUP = 200

_INDEX = ("INSERT_LEAF", "INSERT_POST", "SPLIT_L", "SPLIT_R")
_HEAP = ("INSERT", "INSERT+INIT", "UPDATE", "UPDATE+INIT", "HOT_UPDATE", "HOT_UPDATE+INIT")


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


def _lsn(admin: psycopg.Connection[Any]) -> str:
    row = admin.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
    assert row is not None
    return str(row[0])


def _wal_stats(admin: psycopg.Connection[Any], start: str, end: str) -> dict[str, int]:
    """{"Rmgr/TYPE": records} between two LSNs (the WAL is flushed first)."""
    admin.execute("SELECT pg_switch_wal()")  # the window's WAL flushed: walinspect reads it
    rows = admin.execute(
        'SELECT "resource_manager/record_type", count'
        " FROM pg_get_wal_stats(%s::pg_lsn, %s::pg_lsn, true)",
        (start, end),
    ).fetchall()
    return {str(r[0]): int(r[1]) for r in rows}


def _count(stats: dict[str, int], rmgr: str, types: tuple[str, ...]) -> int:
    return sum(stats.get(f"{rmgr}/{t}", 0) for t in types)


async def _profile(name: str, store: str, workload: Any, admin_dsn: str, n: int) -> Profile:
    await settled(workload.setup())
    for _ in range(WARMUP):
        await settled(workload.op())
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_stat_statements_reset()")
        start = _lsn(admin)
    steps: dict[str, int] = {}
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(n):
        for step, ns in (await settled(workload.op())).items():
            steps[step] = steps.get(step, 0) + ns
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        end = _lsn(admin)
        await settled(workload.close())
        total = admin.execute(
            "SELECT coalesce(sum(total_exec_time) FILTER (WHERE toplevel), 0),"
            "       coalesce(sum(calls), 0)"
            " FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'"
            "   AND query NOT LIKE '%pg_current_wal%'"
        ).fetchone()
        top = admin.execute(
            "SELECT total_exec_time / %s, left(regexp_replace(query, '\\s+', ' ', 'g'), 60)"
            " FROM pg_stat_statements WHERE toplevel AND query NOT LIKE '%%pg_stat_statements%%'"
            "   AND query NOT LIKE '%%pg_current_wal%%'"
            " ORDER BY total_exec_time DESC LIMIT 4",
            (n,),
        ).fetchall()
        stats = _wal_stats(admin, start, end)
    assert total is not None
    wal = pg_lsn_diff(start, end)
    return Profile(
        name=name,
        store=store,
        wall_ms=wall / n * 1e3,
        cpu_ms=cpu / n * 1e3,
        server_ms=float(total[0]) / n,
        statements=float(total[1]) / n,
        wal_bytes=wal / n,
        commits=_count(stats, "Transaction", ("COMMIT",)) / n,
        index_entries=_count(stats, "Btree", _INDEX) / n,
        heap_versions=_count(stats, "Heap", _HEAP) / n,
        hot_updates=_count(stats, "Heap", ("HOT_UPDATE", "HOT_UPDATE+INIT")) / n,
        lock_records=(_count(stats, "Heap", ("LOCK",)) + _count(stats, "Heap2", ("LOCK_UPDATED",)))
        / n,
        steps={k: v / n / 1e6 for k, v in steps.items()},
        top=[(float(t), str(q)) for t, q in top],
    )


def pg_lsn_diff(start: str, end: str) -> int:
    """The bytes from ``start`` to ``end`` (two LSNs), as PostgreSQL's ``pg_wal_lsn_diff``."""

    def value(lsn: str) -> int:
        hi, lo = lsn.split("/")
        return (int(hi, 16) << 32) + int(lo, 16)

    return value(end) - value(start)


def populate_ours(dsn: str, schema: str, n: int) -> None:
    """``n`` open entries not due for a year, one per thread, with their queue rows."""
    job = json.dumps(JOB_INPUT, sort_keys=True, separators=(",", ":"))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'SET search_path = "{schema}"')
        with conn.transaction():
            conn.execute(
                """INSERT INTO queue_entries (tenant, thread_id, key, input, mode, max_attempts,
                                              submitted_at, not_before)
                   SELECT NULL, 'pop-' || g, NULL, %s, 'enqueue', 3, now(),
                          now() + interval '365 days'
                     FROM generate_series(1, %s) g ORDER BY g""",
                (job, n),
            )
            conn.execute(
                """INSERT INTO queue_threads (thread_id, head_entry_id, head_tenant,
                                              lease_expires_at)
                   SELECT thread_id, entry_id, NULL, not_before FROM queue_entries
                    WHERE thread_id LIKE 'pop-%%'"""
            )
        for table in ("queue_entries", "queue_threads"):
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
    settings = {
        "shared_preload_libraries": "pg_stat_statements",
        "pg_stat_statements.track": "all",
        "autovacuum": "off",
    }
    server = pg_server.start(settings, durable=True)
    profiles: list[Profile] = []
    try:
        base = server.dsn()
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            admin.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
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
