"""Benchmarks against LangGraph, procrastinate and pgqueuer on one durable PostgreSQL server.

    .venv/bin/python -m tests.bench.run --out bench-results.md   (what `make bench` runs)

A throwaway server is started with fsync on (`durable_graph.testkit.postgres.server.start(
durable=True)`), unless ``DURABLE_GRAPH_TEST_DSN`` names one; every system gets its own database
on that one server. Families: (a) checkpoint cycle, (b) queue lifecycle, (c) worker cycle,
(d) pgbench reference, (e) SQLite, then growth and the diagnosis of what limits us. The results
(markdown) go to ``--out``, and with ``--docs PATH`` a page with the method to PATH (docs/bench.md
is written by hand from the runs: current results, method, how to reproduce).
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

from durable_graph.testkit.postgres import server as pg_server

from . import checkpoint, diagnose, growth, pgbench, report
from . import queue as queue_bench
from .common import ForeignCpu, Result, measure_interleaved, postmaster_pid, summarize
from .stores import open_store

B = "tests.bench"
LIFECYCLE = "submit + lease + record_attempt + close"
FUSED = "submit + lease(run_id) + close"
WORKER = "lease(run_id) + claim + entry + latest_of_runs + commit + close"
RUNTIME = "Worker.run_once (handler commits once)"
EXCLUDED = "feeding submit excluded"


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


def reference(dsn: str, *, both: bool = False) -> list[tuple[str, str, str, dict[str, Any], str]]:
    """pgbench's minimal durable transaction (and SELECT 1) measured in the same rounds."""
    names = ["durable_txn", "select1"] if both else ["durable_txn"]
    return [("pgbench", n, f"pgbench:{n}", {"dsn": dsn}, "same rounds") for n in names]


class Runner:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.results: list[Result] = []
        self.failures: list[str] = []
        self.server_pid: int | None = None
        """The PostgreSQL server's main process: its CPU is the benchmark's own."""

    def attempt(self, label: str, fn: Callable[[], Any]) -> Any:
        log(label)
        try:
            return fn()
        except Exception as exc:
            self.failures.append(f"{label}: {exc}")
            log(f"FAILED {label}:\n{traceback.format_exc()}")
            return None

    def compare(
        self, family: str, entries: list[tuple[str, str, str, dict[str, Any], str]]
    ) -> None:
        """Measure (system, cycle, "module:Class", params, note) entries against each other, in
        alternating rounds, at every concurrency."""
        for c in self.args.concurrency:

            def go(c: int = c) -> None:
                pooled = measure_interleaved(
                    [
                        (ref, {**params, "tag": f"{family}{i}-{c}"})
                        for i, (_, _, ref, params, _) in enumerate(entries)
                    ],
                    c,
                    rounds=self.args.rounds,
                    warmup=self.args.warmup,
                    duration=self.args.duration,
                    server_pid=self.server_pid,
                )
                for (system, cycle, _, _, note), measured in zip(entries, pooled, strict=True):
                    result = summarize(
                        family, system, cycle, c, measured.samples, note, measured.foreign_cores
                    )
                    self.results.append(result)
                    log(
                        f"  {system} | {cycle} | c={c}: {result.ops_per_s:.0f} ops/s, "
                        f"p50 {result.p50_ms:.2f} ms, p99 {result.p99_ms:.2f} ms, "
                        f"foreign CPU {measured.foreign_cores:.2f}"
                    )

            self.attempt(f"{family} c={c}: " + " vs ".join(e[0] for e in entries), go)

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
    parser.add_argument("--docs", default=None, help="also write a page of this run here")
    parser.add_argument("--duration", type=float, default=6.0, help="seconds measured per run")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds of warm-up per run")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per comparison")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    parser.add_argument(
        "--only",
        nargs="+",
        default=[
            "checkpoint",
            "graph",
            "queue",
            "worker",
            "pgbench",
            "sqlite",
            "growth",
            "diagnose",
        ],
    )
    parser.add_argument("--growth-entries", type=int, default=100_000)
    parser.add_argument("--growth-threads", type=int, default=10_000)
    parser.add_argument("--growth-checkpoints", type=int, default=10_000)
    parser.add_argument("--growth-busy", type=int, default=50_000, help="threads under a lease")
    parser.add_argument("--growth-backlog", type=int, default=50_000, help="entries on a thread")
    parser.add_argument("--growth-dead", type=int, default=100_000, help="dead thread rows")
    parser.add_argument("--growth-prune-threads", type=int, default=1_000)
    parser.add_argument("--growth-prune-checkpoints", type=int, default=2_200)
    args = parser.parse_args(argv)
    started = time.monotonic()
    load_start = "{:.1f} / {:.1f} / {:.1f}".format(*os.getloadavg())
    runner = Runner(args)
    anchors = anchors_available()
    growth_result: growth.GrowthReport | None = None
    diagnosis: diagnose.Diagnosis | None = None

    with server_dsn({}) as (base, where):
        facts = server_facts(base)
        runner.server_pid = postmaster_pid(base)
        log(f"server: {where}; " + ", ".join(f"{k}={v}" for k, v in facts.items()))
        dsns = create_databases(base, ["ours", "langgraph", "procrastinate", "pgqueuer", "ref"])
        tmp = tempfile.mkdtemp(prefix="dg-bench-sqlite-")
        try:
            ours: dict[str, Any] = {"backend": "postgres", "dsn": dsns["ours"], "schema": "bench"}
            open_store(ours, migrate=True).close()
            only = set(args.only)

            pgbench.setup(dsns["ref"])

            if "checkpoint" in only:
                entries = [
                    (
                        "durable_graph",
                        "commit + get",
                        f"{B}.checkpoint:OursCheckpointCycle",
                        ours,
                        "",
                    )
                ]
                if anchors["langgraph"] is None:
                    checkpoint.setup_langgraph(dsns["langgraph"])
                    entries.append(
                        (
                            "LangGraph PostgresSaver",
                            "put + get_tuple",
                            f"{B}.checkpoint:LangGraphCheckpointCycle",
                            {"dsn": dsns["langgraph"]},
                            "",
                        )
                    )
                else:
                    runner.skip(
                        "checkpoint",
                        "LangGraph PostgresSaver",
                        "put + get_tuple",
                        anchors["langgraph"],
                    )
                runner.compare("checkpoint", entries + reference(dsns["ref"], both=True))

            if "graph" in only:
                cycle = "invoke (3 nodes, ~1 KB state)"
                entries = [
                    (
                        "durable_graph DurableSaver (for_run: fenced)",
                        cycle,
                        f"{B}.graph:OursGraphCycle",
                        ours,
                        "",
                    )
                ]
                if anchors["langgraph"] is None:
                    checkpoint.setup_langgraph(dsns["langgraph"])
                    entries.append(
                        (
                            "LangGraph PostgresSaver",
                            cycle,
                            f"{B}.graph:LangGraphGraphCycle",
                            {"dsn": dsns["langgraph"]},
                            "",
                        )
                    )
                else:
                    runner.skip("graph", "LangGraph PostgresSaver", cycle, anchors["langgraph"])
                runner.compare("graph", entries)

            if "queue" in only:
                entries = [
                    ("durable_graph", LIFECYCLE, f"{B}.queue:OursQueueLifecycle", ours, ""),
                    (
                        "durable_graph",
                        FUSED,
                        f"{B}.queue:OursQueueLifecycle",
                        {**ours, "fused": True},
                        "",
                    ),
                ]
                if anchors["procrastinate"] is None:
                    asyncio.run(queue_bench.setup_procrastinate(dsns["procrastinate"]))
                    entries.append(
                        (
                            "procrastinate",
                            "defer + fetch_job + finish_job",
                            f"{B}.queue:ProcrastinateLifecycle",
                            {"dsn": dsns["procrastinate"]},
                            "",
                        )
                    )
                else:
                    runner.skip(
                        "queue",
                        "procrastinate",
                        "defer + fetch_job + finish_job",
                        anchors["procrastinate"],
                    )
                if anchors["pgqueuer"] is None:
                    asyncio.run(queue_bench.setup_pgqueuer(dsns["pgqueuer"]))
                    entries.append(
                        (
                            "pgqueuer",
                            "enqueue + dequeue + log_jobs",
                            f"{B}.queue:PgqueuerLifecycle",
                            {"dsn": dsns["pgqueuer"]},
                            "",
                        )
                    )
                else:
                    runner.skip(
                        "queue", "pgqueuer", "enqueue + dequeue + log_jobs", anchors["pgqueuer"]
                    )
                runner.compare("queue", entries + reference(dsns["ref"]))

            if "worker" in only:
                runner.compare(
                    "worker",
                    [
                        ("durable_graph", WORKER, f"{B}.worker_cycle:WorkerCycle", ours, EXCLUDED),
                        (
                            "durable_graph",
                            RUNTIME,
                            f"{B}.worker_cycle:RuntimeCycle",
                            ours,
                            EXCLUDED,
                        ),
                        *reference(dsns["ref"]),
                    ],
                )

            if "pgbench" in only:
                for c in args.concurrency:

                    def bench(c: int = c) -> None:
                        server = [] if runner.server_pid is None else [runner.server_pid]
                        watch = ForeignCpu([os.getpid(), *server])
                        watch.start()
                        results = pgbench.run_rounds(dsns["ref"], c, args.duration, args.rounds)
                        spent, wall = watch.stop()
                        for result in results:
                            result.foreign_cores = spent / wall
                            runner.results.append(result)
                            log(
                                f"  pgbench {result.cycle} c={c}: {result.ops_per_s:.0f} tps, p50 {result.p50_ms:.2f} ms"
                            )

                    runner.attempt(f"reference: pgbench c={c}", bench)

            if "sqlite" in only:
                lite: dict[str, Any] = {"backend": "sqlite", "path": os.path.join(tmp, "b.db")}
                open_store(lite).close()
                name = "durable_graph (SQLite)"
                runner.compare(
                    "sqlite",
                    [
                        (name, "commit + get", f"{B}.checkpoint:OursCheckpointCycle", lite, ""),
                        (name, LIFECYCLE, f"{B}.queue:OursQueueLifecycle", lite, ""),
                        (name, FUSED, f"{B}.queue:OursQueueLifecycle", {**lite, "fused": True}, ""),
                        (name, WORKER, f"{B}.worker_cycle:WorkerCycle", lite, EXCLUDED),
                    ],
                )

            if "growth" in only:
                growth_result = runner.attempt(
                    "growth",
                    lambda: growth.run(
                        dsns["ours"],
                        entries=args.growth_entries,
                        threads=args.growth_threads,
                        checkpoints=args.growth_checkpoints,
                        hazards=growth.Hazards(
                            args.growth_busy, args.growth_backlog, args.growth_dead
                        ),
                        prune_threads=args.growth_prune_threads,
                        prune_checkpoints=args.growth_prune_checkpoints,
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
        load=(load_start, "{:.1f} / {:.1f} / {:.1f}".format(*os.getloadavg())),
    )
    with open(args.out, "w") as f:
        f.write(text)
    log(f"wrote {args.out}")
    if args.docs:
        with open(args.docs, "w") as f:
            f.write(report.docs_page(text))
        log(f"wrote {args.docs}")
    log(f"done in {elapsed:.0f} s")
    return 1 if runner.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
