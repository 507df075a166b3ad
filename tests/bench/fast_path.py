"""The fast-path bench (SPEC §11, issue 14) on one durable PostgreSQL (fsync on).

    .venv/bin/python -m tests.bench.fast_path --out bench-fast-path.md   (part of `make bench`)

Families, each system in its own database of one server, measured in alternating rounds
(`tests.bench.common.measure_interleaved`, each client its own process, the foreign CPU of every
cell beside it): the job (submit → take → commit ~1 KB → complete) against procrastinate +
LangGraph and pgqueuer + LangGraph, ours as a user's process runs it (its own store, a pool of
2, a `Worker`), every stack on fresh databases CHECKPOINTed before each concurrency, with
pgbench's minimal durable transaction as the ceiling each stack's jobs/s is a fraction of
(issue 38: how the independent harness measured); the checkpoint cycle against LangGraph with
a one-channel and a two-channel state; what notifications cost submit and commit; wake-up
latency of an idle worker against procrastinate's and pgqueuer's LISTEN/NOTIFY workers; and
transactions per job, from ``pg_stat_database.xact_commit`` (all) and the WAL's commit records
(durable ones).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
from typing import Any

import psycopg

from durable_graph.postgres.migrations import migrate
from durable_graph.testkit.postgres import server as pg_server

from . import notify_cost, pgbench, wakeup
from .checkpoint import setup_langgraph
from .common import (
    FOREIGN_LIMIT,
    Result,
    foreign_cell,
    measure_interleaved,
    postmaster_pid,
    ratio_cell,
    round_ratios,
    settled,
    summarize,
)
from .queue import setup_pgqueuer, setup_procrastinate
from .run import create_databases, drop_databases, server_facts

B = "tests.bench"


def log(message: str) -> None:
    print(f"[fast-path {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def compare(
    family: str,
    entries: list[tuple[str, str, str, dict[str, Any]]],
    args: argparse.Namespace,
    concurrency: list[int] | None = None,
) -> list[Result]:
    """Each entry (system, cycle, "module:Class", params) measured against the others at every
    concurrency (``args.concurrency`` unless given)."""
    out: list[Result] = []
    for c in concurrency or args.concurrency:
        pooled = measure_interleaved(
            [(ref, {**p, "tag": f"{family}{i}-{c}"}) for i, (_, _, ref, p) in enumerate(entries)],
            c,
            rounds=args.rounds,
            warmup=args.warmup,
            duration=args.duration,
            server_pid=args.server_pid,
        )
        for (system, cycle, _, _), measured in zip(entries, pooled, strict=True):
            result = summarize(
                family, system, cycle, c, measured.samples, "", measured.foreign_cores
            )
            result.rounds, result.server_ms_per_op = measured.rounds, measured.server_ms_per_op
            out.append(result)
            server = measured.server_ms_per_op
            log(
                f"  {family} | {system} | c={c}: {result.ops_per_s:.0f} ops/s, "
                f"server CPU {'n/a' if server is None else f'{server:.3f} ms/op'}, "
                f"foreign CPU {measured.foreign_cores:.2f}"
            )
    return out


def job_entries(dsns: dict[str, str]) -> list[tuple[str, str, str, dict[str, Any]]]:
    """The job family's stacks on ``dsns`` (ours: schema "bench"). durable_graph is measured as
    a user's process runs it (`jobs.UserJob`: its own store with a pool of 2, a Worker); the
    same job by its three store calls alone, on a pool of one, shows what the worker adds."""
    ours: dict[str, Any] = {"backend": "postgres", "dsn": dsns["ours"], "schema": "bench"}
    proc = {"dsn": dsns["procrastinate"], "lg_dsn": dsns["langgraph"]}
    pgq = {"dsn": dsns["pgqueuer"], "lg_dsn": dsns["langgraph"]}
    return [
        ("durable_graph", "submit + Worker.run_once (commit_last)", f"{B}.jobs:UserJob", ours),
        (
            "durable_graph, store calls only",
            "submit+begin+finish(commit)",
            f"{B}.jobs:OursJob",
            ours,
        ),
        (
            "procrastinate + LangGraph",
            "defer+fetch+aput+finish",
            f"{B}.jobs:ProcrastinateJob",
            proc,
        ),
        ("pgqueuer + LangGraph", "enqueue+dequeue+aput+log", f"{B}.jobs:PgqueuerJob", pgq),
        (
            "pgqueuer (asyncpg) + LangGraph",
            "enqueue+dequeue+aput+log",
            f"{B}.jobs:PgqueuerJob",
            {**pgq, "driver": "asyncpg"},
        ),
    ]


def fresh_job_databases(base: str) -> dict[str, str]:
    """New databases for every job stack, set up, then a CHECKPOINT: each concurrency of the job
    family starts as the issue's harness started every run (fresh schema, the WAL's full-page
    images of the first writes after a checkpoint paid in the measurement, not before it)."""
    dsns = create_databases(base, ["ours", "langgraph", "procrastinate", "pgqueuer"])
    migrate(dsns["ours"], "bench")
    setup_langgraph(dsns["langgraph"])
    asyncio.run(setup_procrastinate(dsns["procrastinate"]))
    asyncio.run(setup_pgqueuer(dsns["pgqueuer"]))
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute("CHECKPOINT")
    return dsns


def _xact_commit(admin: psycopg.Connection[Any], dbnames: list[str]) -> int:
    row = admin.execute(
        "SELECT sum(xact_commit) FROM pg_stat_database WHERE datname = ANY(%s)", (dbnames,)
    ).fetchone()
    assert row is not None
    return int(row[0])


def transactions_per_job(
    ref: str, params: dict[str, Any], base: str, jobs: int
) -> tuple[float, float]:
    """(transactions, durable transactions) per job of the workload ``ref``, run alone."""
    module, _, name = ref.partition(":")
    cls = getattr(__import__(module, fromlist=[name]), name)
    workload = cls({**params, "tag": "txn"}, 0)
    dbnames = [
        str(psycopg.conninfo.conninfo_to_dict(params[k])["dbname"])
        for k in ("dsn", "lg_dsn")
        if k in params
    ]

    async def run() -> tuple[float, float]:
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
            await settled(workload.setup())
            for _ in range(5):
                await settled(workload.op())
            time.sleep(1.5)  # let the workload's session report its statistics (idle: < 1 s)
            before = _xact_commit(admin, dbnames)
            start = admin.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
            for _ in range(jobs):
                await settled(workload.op())
            end = admin.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
            await settled(workload.close())  # its sessions end: their statistics are flushed
            time.sleep(1.5)
            after = _xact_commit(admin, dbnames)
            admin.execute("CHECKPOINT")
            assert start is not None and end is not None
            row = admin.execute(
                "SELECT count(*) FROM pg_get_wal_records_info(%s::pg_lsn, %s::pg_lsn)"
                " WHERE resource_manager = 'Transaction' AND record_type = 'COMMIT'",
                (start[0], end[0]),
            ).fetchone()
            assert row is not None
            return (after - before) / jobs, int(row[0]) / jobs

    return asyncio.run(run())


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _by_family(results: list[Result]) -> dict[tuple[str, int], list[Result]]:
    groups: dict[tuple[str, int], list[Result]] = {}
    for r in results:
        groups.setdefault((r.family, r.concurrency), []).append(r)
    return groups


TARGETS: dict[str, tuple[float, float]] = {
    "job": (1.2, 1.2),
    "checkpoint one-channel": (1.3, 1.5),
    "checkpoint two-channel": (1.3, 1.5),
}
"""Issue 38's goal for durable_graph ÷ the fastest anchor: (at c=1, at higher c)."""


def _ratios(results: list[Result]) -> list[str]:
    lines = [
        "| family | c | durable_graph ÷ the fastest anchor (pooled) | median of the rounds' "
        "ratios (min-max) | fastest anchor | server CPU ms/op, ours / anchor | target | met |",
        "|---|---:|---|---|---|---|---:|:---:|",
    ]
    for (family, c), group in _by_family(results).items():
        ours = [r for r in group if r.system == "durable_graph"]
        anchors = [r for r in group if not r.system.startswith(("durable_graph", "pgbench"))]
        if not ours or not anchors:
            continue
        best = max(anchors, key=lambda r: r.ops_per_s)
        goal = TARGETS.get(family, (0.0, 0.0))[0 if c == 1 else 1]
        spread = round_ratios(ours[0].rounds, best.rounds)
        # SPEC §26: the target is judged on the median of the per-round ratios when rounds
        # were measured (the pooled ratio is kept beside it for continuity).
        ratio = (
            spread[0] if spread else (ours[0].ops_per_s / best.ops_per_s if best.ops_per_s else 0.0)
        )
        if not goal:
            met = ""
        elif not (ours[0].comparable and best.comparable):
            met = "not comparable"
        else:
            met = "yes" if ratio >= goal else "**no**"
        rounds = f"{spread[0]:.2f}x ({spread[1]:.2f}-{spread[2]:.2f})" if spread else "—"
        lines.append(
            f"| {family} | {c} | {ratio_cell(ours[0], best)} | {rounds} | {best.system} | "
            f"{_server_cell(ours[0], best)} | {f'≥ {goal:g}x' if goal else ''} | {met} |"
        )
    return lines


def _server_cell(ours: Result, anchor: Result) -> str:
    if ours.server_ms_per_op is None or anchor.server_ms_per_op is None:
        return "—"
    return f"{ours.server_ms_per_op:.3f} / {anchor.server_ms_per_op:.3f}"


def _ceiling(results: list[Result]) -> list[str]:
    """Each job stack's jobs/s as a fraction of pgbench's durable-commit ceiling, measured in the
    same rounds (DBOS reports its throughput so: what share of the database's own limit)."""
    lines = [
        "| c | pgbench durable txn/s | its foreign CPU | system | jobs/s | of the ceiling |",
        "|---:|---:|---:|---|---:|---:|",
    ]
    for (family, c), group in _by_family(results).items():
        ceiling = next((r for r in group if r.system == "pgbench"), None)
        if family != "job" or ceiling is None:
            continue
        for r in group:
            if r is ceiling:
                continue
            lines.append(
                f"| {c} | {ceiling.ops_per_s:,.0f} | {foreign_cell(ceiling)} | {r.system} | "
                f"{r.ops_per_s:,.0f} | {ratio_cell(r, ceiling, 3, '')} |"
            )
    return lines


def render(
    results: list[Result],
    wake: dict[str, list[float]],
    txns: dict[str, tuple[float, float]],
    facts: dict[str, str],
    args: argparse.Namespace,
) -> str:
    lines = [
        "## Fast path and notifications (issue 14)",
        "",
        f"Server: PostgreSQL {facts.get('server_version')}, fsync={facts.get('fsync')}, "
        f"synchronous_commit={facts.get('synchronous_commit')}; {args.rounds} alternating rounds "
        f"of {args.duration:g} s per system and concurrency (c = client processes). Foreign "
        "CPU: cores the machine spent on anything but these clients and this server while the "
        f"row was measured; a ratio beside more than {FOREIGN_LIMIT:g} core is not comparable. "
        "Server CPU: the PostgreSQL server's process tree's CPU time (/proc: postmaster, "
        "backends, WAL writer, checkpointer) during each round's measured seconds, over the "
        "operations of that round. Ratios: the pooled one (every round's operations together) "
        "and the median of the per-round ratios with their spread (SPEC §26); the target is "
        "judged on the median.",
        "",
        "| family | system | cycle | c | ops/s | p50 ms | p99 ms | server CPU ms/op | "
        "foreign CPU |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        server = "—" if r.server_ms_per_op is None else f"{r.server_ms_per_op:.3f}"
        lines.append(
            f"| {r.family} | {r.system} | {r.cycle} | {r.concurrency} | {r.ops_per_s:.0f} | "
            f"{r.p50_ms:.2f} | {r.p99_ms:.2f} | {server} | {foreign_cell(r)} |"
        )
    lines += ["", *_ratios(results)]
    if any(r.family == "job" and r.system == "pgbench" for r in results):
        lines += ["", "Jobs against the durable-commit ceiling (pgbench, same rounds):", ""]
        lines += _ceiling(results)
    lines += ["", "| wake-up (idle worker, submit → handler start) | n | p50 ms | p99 ms |"]
    lines.append("|---|---:|---:|---:|")
    for name, values in wake.items():
        lines.append(
            f"| {name} | {len(values)} | {statistics.median(values) if values else float('nan'):.2f}"
            f" | {_pct(values, 0.99):.2f} |"
        )
    lines += ["", "| transactions per job | pg_stat_database xact_commit | durable (WAL) |"]
    lines.append("|---|---:|---:|")
    for name, (total, durable) in txns.items():
        lines.append(f"| {name} | {total:.2f} | {durable:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", default="bench-fast-path.md")
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--wake-jobs", type=int, default=50)
    parser.add_argument("--txn-jobs", type=int, default=200)
    parser.add_argument(
        "--only", nargs="+", default=["job", "checkpoint", "notify", "wake", "txns"]
    )
    args = parser.parse_args(argv)
    only = set(args.only)
    # WAL kept (not recycled by the checkpoints between families) so that the transactions
    # family can read its window back with pg_walinspect.
    server = pg_server.start({"wal_keep_size": "4096"}, durable=True)
    results: list[Result] = []
    wake: dict[str, list[float]] = {}
    txns: dict[str, tuple[float, float]] = {}
    try:
        base = server.dsn()
        facts = server_facts(base)
        args.server_pid = postmaster_pid(base)
        dsns = create_databases(base, ["ours", "langgraph", "procrastinate", "pgqueuer", "ref"])
        try:
            ours: dict[str, Any] = {"backend": "postgres", "dsn": dsns["ours"], "schema": "bench"}
            migrate(dsns["ours"], "bench")
            setup_langgraph(dsns["langgraph"])
            asyncio.run(setup_procrastinate(dsns["procrastinate"]))
            asyncio.run(setup_pgqueuer(dsns["pgqueuer"]))
            pgbench.setup(dsns["ref"])
            if "job" in only:
                for c in args.concurrency:
                    log(f"job c={c}: fresh databases, CHECKPOINT")
                    fresh = fresh_job_databases(base)
                    try:
                        results += compare(
                            "job",
                            [
                                *job_entries(fresh),
                                (
                                    "pgbench",
                                    "durable txn",
                                    "pgbench:durable_txn",
                                    {"dsn": dsns["ref"]},
                                ),
                            ],
                            args,
                            [c],
                        )
                    finally:
                        drop_databases(base, fresh)
            if "checkpoint" in only:
                for two in (False, True):
                    shape = "two-channel" if two else "one-channel"
                    log(f"checkpoint {shape}")
                    results += compare(
                        f"checkpoint {shape}",
                        [
                            (
                                "durable_graph",
                                "commit + get",
                                f"{B}.jobs:OursCycle",
                                {**ours, "two_channels": two},
                            ),
                            (
                                "LangGraph PostgresSaver",
                                "put + get_tuple",
                                f"{B}.jobs:LangGraphCycle",
                                {"dsn": dsns["langgraph"], "two_channels": two},
                            ),
                        ],
                        args,
                    )
            if "notify" in only:
                log("notify cost")
                schemas = {"off": "n_off", "on": "n_on", "watched": "n_watched"}
                for schema in schemas.values():
                    migrate(dsns["ours"], schema)
                notify_cost.disable_triggers(dsns["ours"], schemas["off"])
                for kind in ("SubmitOnly", "CommitOnly"):
                    results += compare(
                        f"notify {kind}",
                        [
                            (
                                f"triggers {state}",
                                kind,
                                f"{B}.notify_cost:{kind}",
                                {**ours, "schema": schema, "watched": state == "watched"},
                            )
                            for state, schema in schemas.items()
                        ],
                        args,
                    )
            if "wake" in only:
                log("wake-up latency")
                wake["durable_graph Worker"] = wakeup.ours(
                    dsns["ours"], "bench", args.wake_jobs, 0.05
                )
                wake["procrastinate worker"] = wakeup.procrastinate_worker(
                    dsns["procrastinate"], args.wake_jobs, 0.05
                )
                wake["pgqueuer QueueManager (asyncpg)"] = wakeup.pgqueuer_worker(
                    dsns["pgqueuer"], args.wake_jobs, 0.05, "asyncpg"
                )
                wake["pgqueuer QueueManager (psycopg)"] = wakeup.pgqueuer_worker(
                    dsns["pgqueuer"], args.wake_jobs, 0.05, "psycopg"
                )
                for name, values in wake.items():
                    log(f"  {name}: p50 {statistics.median(values):.2f} ms")
            if "txns" in only:
                log("transactions per job")
                for system, _, ref, params in job_entries(dsns):
                    txns[system] = transactions_per_job(ref, params, base, args.txn_jobs)
                    log(f"  {system}: {txns[system]}")
        finally:
            with contextlib.suppress(Exception):
                drop_databases(base, dsns)
    finally:
        server.stop()
    text = render(results, wake, txns, facts, args)
    with open(args.out, "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
