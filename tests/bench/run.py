"""Benchmarks against LangGraph, procrastinate and pgqueuer on one durable PostgreSQL server.

    .venv/bin/python -m tests.bench.run --out bench-results.md   (what `make bench` runs)

A throwaway server is started with fsync on (`durable_graph.testkit.pg_server.start(
durable=True)`), unless ``DURABLE_GRAPH_TEST_DSN`` names one; every system gets its own database
on that one server. Families: (a) checkpoint cycle, (b) queue lifecycle, (c) worker cycle,
(d) pgbench reference, (e) SQLite, then growth and the diagnosis of what limits us. The results
(markdown) go to ``--out`` and to ``docs/bench.md`` (``--docs``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg

from durable_graph.testkit import pg_server

from . import checkpoint, diagnose, growth, pgbench, report
from . import queue as queue_bench
from .common import Result, measure, summarize
from .stores import open_store

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def server_dsn(settings: dict[str, str]) -> Iterator[tuple[str, str]]:
    """(base DSN, description) of the server all systems are measured on."""
    given = os.environ.get("DURABLE_GRAPH_TEST_DSN")
    if given:
        yield given, "the server of DURABLE_GRAPH_TEST_DSN"
        return
    server = pg_server.start(settings, durable=True)
    try:
        yield server.dsn(), f"throwaway PostgreSQL at {server.datadir} (fsync on)"
    finally:
        server.stop()


def with_db(dsn: str, dbname: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    info["dbname"] = dbname
    return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in info.items()})


def create_databases(base: str, names: list[str]) -> dict[str, str]:
    suffix = uuid.uuid4().hex[:6]
    out = {}
    with psycopg.connect(base, autocommit=True) as conn:
        for name in names:
            db = f"bench_{name}_{suffix}"
            conn.execute(f'CREATE DATABASE "{db}"')
            out[name] = with_db(base, db)
    return out


def drop_databases(base: str, dsns: dict[str, str]) -> None:
    with psycopg.connect(base, autocommit=True) as conn:
        for dsn in dsns.values():
            db = psycopg.conninfo.conninfo_to_dict(dsn)["dbname"]
            with contextlib.suppress(Exception):
                conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


def server_facts(dsn: str) -> dict[str, str]:
    names = [
        "server_version",
        "fsync",
        "synchronous_commit",
        "full_page_writes",
        "wal_sync_method",
        "shared_buffers",
        "wal_level",
    ]
    with psycopg.connect(dsn, autocommit=True) as conn:
        return {n: str(conn.execute(f"SHOW {n}").fetchone()[0]) for n in names}  # type: ignore[index]


class Runner:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.results: list[Result] = []
        self.failures: list[str] = []

    def attempt(self, label: str, fn: Callable[[], Any]) -> Any:
        log(label)
        try:
            return fn()
        except Exception as exc:
            self.failures.append(f"{label}: {exc}")
            log(f"FAILED {label}:\n{traceback.format_exc()}")
            return None

    def cycle(
        self,
        family: str,
        system: str,
        cycle: str,
        ref: str,
        params: dict[str, Any],
        note: str = "",
    ) -> None:
        for c in self.args.concurrency:

            def go(c: int = c) -> None:
                samples = measure(
                    ref,
                    {**params, "tag": f"{cycle}-{c}"},
                    c,
                    warmup=self.args.warmup,
                    duration=self.args.duration,
                )
                result = summarize(family, system, cycle, c, samples, note)
                self.results.append(result)
                log(
                    f"  {system} {cycle} c={c}: {result.ops_per_s:.0f} ops/s, "
                    f"p50 {result.p50_ms:.2f} ms, p99 {result.p99_ms:.2f} ms"
                )

            self.attempt(f"{family}: {system} {cycle} c={c}", go)

    def skip(self, family: str, system: str, cycle: str, reason: str) -> None:
        for c in self.args.concurrency:
            self.results.append(Result(family, system, cycle, c, 0, 0, 0, 0, skipped=reason))


def anchors_available() -> dict[str, str | None]:
    """Each anchor -> None when importable, else why not."""
    out: dict[str, str | None] = {}
    for name, module in (
        ("langgraph", "langgraph.checkpoint.postgres"),
        ("procrastinate", "procrastinate"),
        ("pgqueuer", "pgqueuer.queries"),
    ):
        try:
            __import__(module)
            out[name] = None
        except Exception as exc:
            out[name] = f"not installable/importable here ({type(exc).__name__}: {exc})"
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", default="bench-results.md")
    parser.add_argument("--docs", default=os.path.join(ROOT, "docs", "bench.md"))
    parser.add_argument("--no-docs", action="store_true", help="do not write docs/bench.md")
    parser.add_argument("--duration", type=float, default=6.0, help="seconds measured per run")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds of warm-up per run")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    parser.add_argument(
        "--only",
        nargs="+",
        default=["checkpoint", "queue", "worker", "pgbench", "sqlite", "growth", "diagnose"],
    )
    parser.add_argument("--growth-entries", type=int, default=100_000)
    parser.add_argument("--growth-threads", type=int, default=10_000)
    parser.add_argument("--growth-checkpoints", type=int, default=10_000)
    args = parser.parse_args(argv)
    started = time.monotonic()
    runner = Runner(args)
    anchors = anchors_available()
    growth_result: growth.GrowthReport | None = None
    diagnosis: diagnose.Diagnosis | None = None

    with server_dsn({}) as (base, where):
        facts = server_facts(base)
        log(f"server: {where}; " + ", ".join(f"{k}={v}" for k, v in facts.items()))
        dsns = create_databases(base, ["ours", "langgraph", "procrastinate", "pgqueuer", "ref"])
        tmp = tempfile.mkdtemp(prefix="dg-bench-sqlite-")
        try:
            ours: dict[str, Any] = {"backend": "postgres", "dsn": dsns["ours"], "schema": "bench"}
            open_store(ours, migrate=True).close()
            only = set(args.only)

            if "checkpoint" in only:
                runner.cycle(
                    "checkpoint",
                    "durable_graph",
                    "commit + get",
                    "tests.bench.checkpoint:OursCheckpointCycle",
                    ours,
                )
                if anchors["langgraph"] is None:
                    checkpoint.setup_langgraph(dsns["langgraph"])
                    runner.cycle(
                        "checkpoint",
                        "LangGraph PostgresSaver",
                        "put + get_tuple",
                        "tests.bench.checkpoint:LangGraphCheckpointCycle",
                        {"dsn": dsns["langgraph"]},
                    )
                else:
                    runner.skip("checkpoint", "LangGraph", "put + get_tuple", anchors["langgraph"])

            if "queue" in only:
                runner.cycle(
                    "queue",
                    "durable_graph",
                    "submit + lease + record_attempt + close",
                    "tests.bench.queue:OursQueueLifecycle",
                    ours,
                )
                runner.cycle(
                    "queue",
                    "durable_graph",
                    "submit + lease(run_id) + close",
                    "tests.bench.queue:OursQueueLifecycle",
                    {**ours, "fused": True},
                )
                if anchors["procrastinate"] is None:
                    asyncio.run(queue_bench.setup_procrastinate(dsns["procrastinate"]))
                    runner.cycle(
                        "queue",
                        "procrastinate",
                        "defer + fetch_job + finish_job",
                        "tests.bench.queue:ProcrastinateLifecycle",
                        {"dsn": dsns["procrastinate"]},
                    )
                else:
                    runner.skip("queue", "procrastinate", "defer + fetch + finish", anchors["procrastinate"])
                if anchors["pgqueuer"] is None:
                    asyncio.run(queue_bench.setup_pgqueuer(dsns["pgqueuer"]))
                    runner.cycle(
                        "queue",
                        "pgqueuer",
                        "enqueue + dequeue + log_jobs",
                        "tests.bench.queue:PgqueuerLifecycle",
                        {"dsn": dsns["pgqueuer"]},
                    )
                else:
                    runner.skip("queue", "pgqueuer", "enqueue + dequeue + complete", anchors["pgqueuer"])

            if "worker" in only:
                runner.cycle(
                    "worker",
                    "durable_graph",
                    "lease(run_id) + claim + entry + latest_of_runs + commit + close",
                    "tests.bench.worker_cycle:WorkerCycle",
                    ours,
                    note="feeding submit excluded",
                )
                runner.cycle(
                    "worker",
                    "durable_graph",
                    "Worker.run_once (handler commits once)",
                    "tests.bench.worker_cycle:RuntimeCycle",
                    ours,
                    note="feeding submit excluded",
                )

            if "pgbench" in only:
                pgbench.setup(dsns["ref"])
                for script in ("select1", "durable_txn"):
                    for c in args.concurrency:

                        def bench(script: str = script, c: int = c) -> None:
                            result = pgbench.run(dsns["ref"], script, c, args.duration)
                            runner.results.append(result)
                            log(f"  pgbench {script} c={c}: {result.ops_per_s:.0f} tps")

                        runner.attempt(f"reference: pgbench {script} c={c}", bench)

            if "sqlite" in only:
                lite: dict[str, Any] = {"backend": "sqlite", "path": os.path.join(tmp, "b.db")}
                open_store(lite).close()
                runner.cycle(
                    "sqlite",
                    "durable_graph (SQLite)",
                    "commit + get",
                    "tests.bench.checkpoint:OursCheckpointCycle",
                    lite,
                )
                runner.cycle(
                    "sqlite",
                    "durable_graph (SQLite)",
                    "submit + lease + record_attempt + close",
                    "tests.bench.queue:OursQueueLifecycle",
                    lite,
                )
                runner.cycle(
                    "sqlite",
                    "durable_graph (SQLite)",
                    "submit + lease(run_id) + close",
                    "tests.bench.queue:OursQueueLifecycle",
                    {**lite, "fused": True},
                )
                runner.cycle(
                    "sqlite",
                    "durable_graph (SQLite)",
                    "lease(run_id) + claim + entry + latest_of_runs + commit + close",
                    "tests.bench.worker_cycle:WorkerCycle",
                    lite,
                    note="feeding submit excluded",
                )

            if "growth" in only:
                growth_result = runner.attempt(
                    "growth",
                    lambda: growth.run(
                        dsns["ours"],
                        entries=args.growth_entries,
                        threads=args.growth_threads,
                        checkpoints=args.growth_checkpoints,
                        log=log,
                    ),
                )

            if "diagnose" in only:
                diagnosis = runner.attempt(
                    "diagnose", lambda: diagnose.run(dsns["ours"], growth_result, log=log)
                )
        finally:
            with contextlib.suppress(Exception):
                drop_databases(base, dsns)
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)

    elapsed = time.monotonic() - started
    text = report.render(
        runner.results,
        facts=facts,
        where=where,
        args=args,
        anchors=anchors,
        growth=growth_result,
        diagnosis=diagnosis,
        failures=runner.failures,
        elapsed=elapsed,
    )
    with open(args.out, "w") as f:
        f.write(text)
    log(f"wrote {args.out}")
    if not args.no_docs:
        with open(args.docs, "w") as f:
            f.write(report.docs_page(text))
        log(f"wrote {args.docs}")
    log(f"done in {elapsed:.0f} s")
    return 1 if runner.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
