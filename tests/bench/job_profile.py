"""Where a job's time goes, per stack: client CPU, server execution, WAL (issue 14's profile).

    .venv/bin/python -m tests.bench.job_profile [--jobs 1000]

Each stack of the fast-path bench's job family (`tests.bench.jobs`) runs ``jobs`` jobs in a row,
after 200 to warm up, alone, on one fresh durable server with ``pg_stat_statements`` (top-level
statements) loaded. Reported per job: wall time, the client process's CPU (``process_time``),
the server's execution time (the sum over statements) and WAL bytes, and the costliest
statements. Serial and one client, so that nothing but the stack's own work is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import psycopg

from durable_graph.postgres.migrations import migrate
from durable_graph.testkit.postgres import server as pg_server

from . import jobs
from .checkpoint import setup_langgraph
from .common import settled
from .queue import setup_pgqueuer, setup_procrastinate
from .run import create_databases

WARMUP = 200


async def _profile(name: str, workload: Any, admin_dsn: str, n: int) -> list[str]:
    await settled(workload.setup())
    for _ in range(WARMUP):
        await settled(workload.op())
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_stat_statements_reset()")
    steps: dict[str, int] = {}
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(n):
        for step, ns in (await settled(workload.op())).items():
            steps[step] = steps.get(step, 0) + ns
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    await settled(workload.close())
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        total = admin.execute(
            "SELECT sum(total_exec_time), sum(wal_bytes) FROM pg_stat_statements"
            " WHERE query NOT LIKE '%pg_stat_statements%'"
        ).fetchone()
        top = admin.execute(
            "SELECT total_exec_time / %s, left(regexp_replace(query, '\\s+', ' ', 'g'), 70)"
            " FROM pg_stat_statements WHERE query NOT LIKE '%%pg_stat_statements%%'"
            " ORDER BY total_exec_time DESC LIMIT 5",
            (n,),
        ).fetchall()
    assert total is not None
    lines = [
        f"| {name} | {wall / n * 1e3:.2f} | {cpu / n * 1e3:.2f} | {float(total[0]) / n:.2f} | "
        f"{float(total[1]) / n / 1024:.1f} |"
    ]
    lines.append(
        "|  | steps (ms): "
        + ", ".join(f"{k} {v / n / 1e6:.2f}" for k, v in steps.items())
        + " | top statements (ms): "
        + "; ".join(f"{t:.2f} `{q}`" for t, q in top)
        + " | | |"
    )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=1000)
    args = parser.parse_args(argv)
    settings = {
        "shared_preload_libraries": "pg_stat_statements",
        "pg_stat_statements.track": "top",
    }
    server = pg_server.start(settings, durable=True)
    try:
        base = server.dsn()
        dsns = create_databases(base, ["ours", "langgraph", "procrastinate", "pgqueuer"])
        migrate(dsns["ours"], "bench")
        setup_langgraph(dsns["langgraph"])
        asyncio.run(setup_procrastinate(dsns["procrastinate"]))
        asyncio.run(setup_pgqueuer(dsns["pgqueuer"]))
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        anchors = {"lg_dsn": dsns["langgraph"], "tag": "profile"}
        stacks: list[tuple[str, Any]] = [
            (
                "durable_graph",
                jobs.OursJob(
                    {"backend": "postgres", "dsn": dsns["ours"], "schema": "bench", "tag": "p"},
                    0,
                ),
            ),
            (
                "procrastinate + LangGraph",
                jobs.ProcrastinateJob({**anchors, "dsn": dsns["procrastinate"]}, 0),
            ),
            (
                "pgqueuer (asyncpg) + LangGraph",
                jobs.PgqueuerJob({**anchors, "dsn": dsns["pgqueuer"], "driver": "asyncpg"}, 0),
            ),
        ]
        lines = [
            "| per job | wall ms | client CPU ms | server execution ms | WAL KiB |",
            "|---|---:|---:|---:|---:|",
        ]
        for name, workload in stacks:
            lines += asyncio.run(_profile(name, workload, base, args.jobs))
    finally:
        server.stop()
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
