"""Why an independent harness measured our job slower than our own profile did (issue 38).

    .venv/bin/python -m tests.bench.job_setups [--jobs 500] [--reps 3] [--out FILE]

One client process at a time (spawned: each of the harness's clients was its own process), one
job of `tests.bench.jobs` (submit ~100 B → take → one ~1 KB checkpoint → complete) in a loop on
one durable server: 200 jobs to warm up, then ``--jobs`` timed. The setups are the ways the
harness differed from `tests.bench.job_profile`, one at a time, with pgqueuer + LangGraph beside
them; they run in turn, ``--reps`` times, so that a load that comes and goes falls on all.

Per job: wall time; the client process's CPU (``process_time``); the server's CPU (its process
tree, from ``/proc``); WAL bytes; and the foreign CPU beside the run (`common.ForeignCpu`). The
medians over the repetitions are reported, with the most foreign CPU any repetition saw.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import statistics
import time
import uuid
from dataclasses import dataclass
from typing import Any

import psycopg

from durable_graph.postgres.migrations import migrate
from durable_graph.testkit.postgres import server as pg_server

from . import jobs
from .checkpoint import setup_langgraph
from .common import FOREIGN_LIMIT, ForeignCpu, cpu_seconds, postmaster_pid, process_tree, settled
from .queue import setup_pgqueuer
from .run import create_databases

WARMUP = 200


@dataclass(frozen=True)
class Setup:
    """One way of running the job: a workload of `tests.bench.jobs` and how it starts."""

    name: str
    workload: str
    pool: int = 1
    fresh: bool = False
    """A new schema and a CHECKPOINT just before the timed jobs, no warm-up."""


SETUPS = [
    Setup("store calls, pool of 1 (job_profile)", "OursJob", pool=1),
    Setup("store calls, pool of 2", "OursJob", pool=2),
    Setup("Worker.run_once, pool of 1", "UserJob", pool=1),
    Setup("Worker.run_once, pool of 2 (the harness)", "UserJob", pool=2),
    Setup("Worker.run_once, pool of 2, fresh + CHECKPOINT", "UserJob", pool=2, fresh=True),
    Setup("pgqueuer (asyncpg) + LangGraph", "PgqueuerJob"),
]


@dataclass
class Row:
    """One setup's figures per job, one repetition."""

    wall_ms: float
    client_cpu_ms: float
    server_cpu_ms: float
    wal_kib: float
    foreign_cores: float


def _workload(setup: Setup, dsns: dict[str, str], schema: str, tag: str) -> Any:
    if setup.workload == "PgqueuerJob":
        anchor = {"dsn": dsns["pgqueuer"], "lg_dsn": dsns["langgraph"], "driver": "asyncpg"}
        return jobs.PgqueuerJob({**anchor, "tag": tag}, 0)
    ours = {"backend": "postgres", "dsn": dsns["ours"], "schema": schema, "tag": tag}
    cls = jobs.UserJob if setup.workload == "UserJob" else jobs.OursJob
    return cls({**ours, "pool": setup.pool}, 0)


async def _client(work: Any, warmup: int, jobs_n: int, go: Any, done: Any) -> None:
    await settled(work.setup())
    for _ in range(warmup):
        await settled(work.op())
    done.put("ready")
    go.get()  # the parent reads its counters first
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(jobs_n):
        await settled(work.op())
    done.put((time.perf_counter() - wall, time.process_time() - cpu))
    await settled(work.close())


def _child(setup: Setup, dsns: dict[str, str], schema: str, tag: str, n: int, go: Any,
           done: Any) -> None:  # fmt: skip
    work = _workload(setup, dsns, schema, tag)
    asyncio.run(_client(work, 0 if setup.fresh else WARMUP, n, go, done))


def _wal_bytes(admin: psycopg.Connection[Any]) -> int:
    row = admin.execute("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn").fetchone()
    assert row is not None
    return int(row[0])


def measure(setup: Setup, dsns: dict[str, str], base: str, n: int, tag: str) -> Row:
    """One repetition of ``setup``: a spawned client process, timed over ``n`` jobs."""
    schema = "bench"
    if setup.fresh:
        schema = f"fresh_{uuid.uuid4().hex[:8]}"
        migrate(dsns["ours"], schema)
    ctx = mp.get_context("spawn")
    go, done = ctx.Queue(), ctx.Queue()
    client = ctx.Process(target=_child, args=(setup, dsns, schema, tag, n, go, done))
    client.start()
    try:
        if done.get(timeout=300) != "ready":
            raise RuntimeError(f"{setup.name}: the client did not start")
        server = postmaster_pid(base)
        watch = ForeignCpu([os.getpid()] + ([server] if server else []))
        with psycopg.connect(base, autocommit=True) as admin:
            if setup.fresh:
                admin.execute("CHECKPOINT")
            wal = _wal_bytes(admin)
            server_cpu = cpu_seconds(process_tree(server)) if server else 0.0
            watch.start()
            go.put(True)
            wall, client_cpu = done.get(timeout=600)
            foreign, seconds = watch.stop()
            server_cpu = (cpu_seconds(process_tree(server)) if server else 0.0) - server_cpu
            wal = _wal_bytes(admin) - wal
    finally:
        client.join(timeout=60)
    return Row(
        wall_ms=wall / n * 1e3,
        client_cpu_ms=client_cpu / n * 1e3,
        server_cpu_ms=server_cpu / n * 1e3,
        wal_kib=wal / n / 1024,
        foreign_cores=foreign / seconds,
    )


def report(rows: dict[str, list[Row]], n: int, reps: int) -> str:
    lines = [
        f"## One client's job by setup ({n} jobs, median of {reps} alternating repetitions)",
        "",
        "| setup | wall ms | client CPU ms | server CPU ms | WAL KiB | foreign CPU (most) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, runs in rows.items():

        def median(field: str, runs: list[Row] = runs) -> float:
            return float(statistics.median(getattr(r, field) for r in runs))

        foreign = max(r.foreign_cores for r in runs)
        mark = " (not comparable)" if foreign > FOREIGN_LIMIT else ""
        lines.append(
            f"| {name} | {median('wall_ms'):.2f} | {median('client_cpu_ms'):.2f} | "
            f"{median('server_cpu_ms'):.2f} | {median('wal_kib'):.2f} | {foreign:.2f}{mark} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    server = pg_server.start({}, durable=True)
    rows: dict[str, list[Row]] = {s.name: [] for s in SETUPS}
    try:
        base = server.dsn()
        dsns = create_databases(base, ["ours", "langgraph", "pgqueuer"])
        migrate(dsns["ours"], "bench")
        setup_langgraph(dsns["langgraph"])
        asyncio.run(setup_pgqueuer(dsns["pgqueuer"]))
        for rep in range(args.reps):
            for i, setup in enumerate(SETUPS):
                row = measure(setup, dsns, base, args.jobs, f"s{i}-{rep}")
                rows[setup.name].append(row)
                print(f"{setup.name}: {row}", flush=True)
    finally:
        server.stop()
    text = report(rows, args.jobs, args.reps)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
