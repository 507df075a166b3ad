"""Where a job's server time goes, line by line of our PL/pgSQL (SPEC §26, issue 49 item 2).

    .venv/bin/python -m tests.bench.plprofile [--jobs 2000] [--out bench-plprofile.md]

Needs Debian's ``postgresql-15-plprofiler`` (``make plprofiler-deps``). A throwaway durable
server is started with ``shared_preload_libraries = plprofiler``; the job of the fast-path bench
(`jobs.OursJob`: submit ~100 B → begin_attempt → finish_attempt with one ~1 KB checkpoint, the
calls a `Worker` makes) runs ``jobs`` times after 200 to warm up, with the profiler collecting
in every backend. Reported: each function's calls and time per job (with and without what it
calls), and the statements that cost most, per job, with their source line. plprofiler times
the PL/pgSQL statements, so a function's time includes the SQL it runs (planning, executing,
locks, WAL inserts) but not the client round trip, the parse of the top-level call, or the
commit's WAL flush: those are `job_profile`'s server time minus the total here.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import psycopg

from durable_graph.postgres.migrations import migrate
from durable_graph.testkit.postgres import server as pg_server

from .jobs import OursCycle, OursJob

SCHEMA = "bench"
WHAT = {
    "job": "the job (`jobs.OursJob`: submit, begin_attempt, finish_attempt with its commit)",
    "checkpoint": "the checkpoint cycle (`jobs.OursCycle`: commit + get, one channel)",
}


def log(message: str) -> None:
    print(f"[plprofile {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _run_jobs(dsn: str, count: int, cycle: str) -> None:
    params = {"backend": "postgres", "dsn": dsn, "schema": SCHEMA, "tag": "p"}
    job: OursJob | OursCycle = OursJob(params, 0) if cycle == "job" else OursCycle(params, 0)
    job.setup()
    try:
        for _ in range(count):
            job.op()
    finally:
        job.close()


def _functions(conn: psycopg.Connection[Any], jobs: int) -> list[str]:
    """Each profiled function's calls and microseconds per job, from the call graph (self:
    its own statements' time without the functions it calls)."""
    rows = conn.execute(
        """
        SELECT s.stack[pg_catalog.array_length(s.stack, 1)]::regprocedure::text AS fn,
               sum(s.call_count), sum(s.us_total), sum(s.us_self)
          FROM pl_profiler_callgraph_shared() s
         GROUP BY 1 ORDER BY 4 DESC
        """
    ).fetchall()
    lines = [
        "| function | calls / op | µs / op (with callees) | µs / op (self) |",
        "|---|---:|---:|---:|",
    ]
    for fn, calls, total, self_us in rows:
        lines.append(f"| `{fn}` | {calls / jobs:.2f} | {total / jobs:.1f} | {self_us / jobs:.1f} |")
    return lines


def _statements(conn: psycopg.Connection[Any], jobs: int, top: int) -> list[str]:
    """The ``top`` statements by time per job: function, line, executions and µs per job."""
    rows = conn.execute(
        """
        WITH l AS (SELECT * FROM pl_profiler_linestats_shared() WHERE line_number > 0),
             src AS (SELECT * FROM pl_profiler_funcs_source(
                         (SELECT pg_catalog.array_agg(DISTINCT func_oid) FROM l)))
        SELECT l.func_oid::regprocedure::text, l.line_number, l.exec_count, l.total_time,
               pg_catalog.btrim(src.source)
          FROM l JOIN src USING (func_oid, line_number)
         ORDER BY l.total_time DESC
         LIMIT %s
        """,
        (top,),
    ).fetchall()
    lines = [
        "| function | line | runs / op | µs / op | statement (its first line) |",
        "|---|---:|---:|---:|---|",
    ]
    for fn, line, count, total, source in rows:
        text = (source or "").replace("|", "\\|")[:90]
        lines.append(f"| `{fn}` | {line} | {count / jobs:.2f} | {total / jobs:.1f} | `{text}` |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", default="bench-plprofile.md")
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument(
        "--cycle",
        choices=["job", "checkpoint"],
        default="job",
        help="the job, or the checkpoint cycle (commit + get on one claimed thread)",
    )
    args = parser.parse_args(argv)
    server = pg_server.start({"shared_preload_libraries": "plprofiler"}, durable=True)
    try:
        dsn = server.dsn()
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute("CREATE EXTENSION IF NOT EXISTS plprofiler")
        migrate(dsn, SCHEMA)
        log("warm-up: 200 jobs")
        _run_jobs(dsn, 200, args.cycle)
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute("SELECT pl_profiler_reset_shared()")
            admin.execute("SELECT pl_profiler_set_enabled_global(true)")
            admin.execute("SELECT pl_profiler_set_collect_interval(1)")
        log(f"profiling {args.jobs} jobs")
        started = time.monotonic()
        _run_jobs(dsn, args.jobs, args.cycle)
        wall = time.monotonic() - started
        time.sleep(1.5)  # every backend's last interval collected
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute("SELECT pl_profiler_set_enabled_global(false)")
            out = [
                f"## Where {args.cycle} PL/pgSQL time goes (plprofiler, issue 49)",
                "",
                f"{args.jobs} runs of {WHAT[args.cycle]}, one client, "
                f"{1000 * wall / args.jobs:.2f} ms each, wall time, with the profiler on "
                "(it slows every statement: compare shares, not totals).",
                "",
                *_functions(admin, args.jobs),
                "",
                *_statements(admin, args.jobs, args.top),
            ]
    finally:
        server.stop()
    with open(args.out, "w") as f:
        f.write("\n".join(out) + "\n")
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
