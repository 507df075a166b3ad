"""How far one PostgreSQL server carries: the figures behind `docs/scaling.md`.

    PYTHONPATH=tests .venv/bin/python tests/failover/capacity.py [JOBS] [STEPS]

On a throwaway durable server (fsync and synchronous_commit on) it runs JOBS jobs serially
through the real store, each the SPEC §5 worker cycle on a new thread: ``submit`` ->
``lease(run_id)`` -> ``claim`` -> ``entry`` -> ``latest_of_runs`` -> STEPS x ``commit`` (~1 KB
state, one per graph step) -> ``release_claim`` -> ``close``. It reports

- per call: ``pg_stat_statements`` mean execution time of its function and calls per job;
- per job: the server's CPU (utime + stime of every process of the cluster, from ``/proc``,
  before and after), WAL bytes and WAL flushes (``pg_stat_wal``);
- storage: the schema's tables and indexes (``pg_total_relation_size``) per thread and per
  checkpoint, before and after ``reclaim`` of the closed entries.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from datetime import timedelta
from typing import Any

import psycopg

from durable_graph import ClaimPolicy, Commit, Completed, Submission, plan_attempt
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.testkit.postgres import server as pg_server

STATE = {"messages": [{"role": "user", "content": "x" * 200} for _ in range(4)], "step": 0}
"""About 1 KB of agent state, as in the benchmarks."""


def cluster_cpu_seconds(postmaster: int) -> float:
    """utime + stime of the postmaster and its live children (backends persist: one pool)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid, fields in pg_server.process_stats():
        if pid == postmaster or int(fields[1]) == postmaster:
            total += int(fields[11]) + int(fields[12])
    return total / tick


def one_job(store: Any, steps: int) -> None:
    thread_id = f"t-{uuid.uuid4().hex[:12]}"
    queue = store.run_queue
    queue.submit(Submission(thread_id, {"job": thread_id}))
    run_id = uuid.uuid4().hex
    lease = queue.lease("w", timedelta(minutes=5), run_id=run_id)
    assert lease is not None
    claim = store.claim(thread_id, run_id, ClaimPolicy(ttl=timedelta(minutes=5)))
    entry = queue.entry(lease.entry.entry_id)
    latest = store.latest_of_runs(thread_id, [a.run_id for a in entry.attempts])
    plan_attempt(entry, latest)
    parent = None
    for step in range(steps):
        cp = store.commit(
            claim,
            Commit(
                checkpoint_id=uuid.uuid4().hex,
                parent_id=parent,
                run_id=run_id,
                state={**STATE, "step": step},
                metadata={"step": step},
                next=("agent",) if step < steps - 1 else (),
            ),
        )
        parent = cp.checkpoint_id
    store.release_claim(claim)
    queue.close(lease, Completed({"ok": True}))


def storage(conn: psycopg.Connection[Any], schema: str) -> int:
    row = conn.execute(
        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
        (schema,),
    ).fetchone()
    return int(row[0]) if row else 0


def main(jobs: int, steps: int) -> None:
    server = pg_server.start(durable=True)
    try:
        measure(server, jobs, steps)
    finally:
        server.stop()


def measure(server: pg_server.PgServer, jobs: int, steps: int) -> None:
    schema = "capacity"
    dsn = server.dsn()
    store = PostgresCheckpointer.open(dsn, PostgresConfig(schema=schema, max_pool_size=1))
    admin = psycopg.connect(dsn, autocommit=True)
    admin.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    for _ in range(50):  # warm up: plans cached, pool connected
        one_job(store, steps)
    postmaster = server.postmaster_pid()
    assert postmaster is not None
    admin.execute("SELECT pg_stat_statements_reset(), pg_stat_reset_shared('wal')")
    wal0 = admin.execute("SELECT wal_bytes, wal_sync FROM pg_stat_wal").fetchone()
    cpu0 = cluster_cpu_seconds(postmaster)
    t0 = time.perf_counter()
    for _ in range(jobs):
        one_job(store, steps)
    wall = time.perf_counter() - t0
    cpu = cluster_cpu_seconds(postmaster) - cpu0
    wal1 = admin.execute("SELECT wal_bytes, wal_sync FROM pg_stat_wal").fetchone()
    assert wal0 is not None and wal1 is not None
    rows = admin.execute(
        "SELECT substring(query from 'dg_[a-z_]+_v1') AS fn, calls, mean_exec_time "
        "FROM pg_stat_statements WHERE query LIKE %s ORDER BY calls DESC, fn",
        (f"%{schema}%dg_%",),
    ).fetchall()
    print(f"{jobs} jobs of {steps} commits, serial, one connection; {wall:.1f} s wall")
    print("| function | calls per job | mean server exec ms | ms per job |")
    print("|---|---:|---:|---:|")
    exec_total = 0.0
    for fn, calls, mean in rows:
        if calls < jobs // 2:
            continue  # the admin's own statements, the warm-up's leftovers
        per_job = calls / jobs
        exec_total += per_job * mean
        print(f"| {fn} | {per_job:.2f} | {mean:.3f} | {per_job * mean:.3f} |")
    print(f"| **sum of function execution** | | | **{exec_total:.3f}** |")
    print(
        f"server CPU per job (all cluster processes): {1000 * cpu / jobs:.2f} ms "
        f"-> {jobs / cpu:.0f} jobs/s per core; wall per job {1000 * wall / jobs:.2f} ms"
    )
    wal_bytes = float(wal1[0] - wal0[0])
    print(
        f"WAL per job: {wal_bytes / jobs:,.0f} bytes; WAL flushes per job "
        f"{(wal1[1] - wal0[1]) / jobs:.2f}"
    )
    admin.execute("VACUUM ANALYZE")  # dead row versions out of the count
    threads = jobs + 50
    size = storage(admin, schema)
    print(
        f"storage: {size / threads:,.0f} bytes per thread ({steps} checkpoints, 1 closed entry), "
        f"{size / (threads * steps):,.0f} per checkpoint"
    )
    store.run_queue.reclaim(timedelta(0))
    admin.execute("VACUUM ANALYZE")
    size = storage(admin, schema)
    print(f"after reclaim of closed entries: {size / threads:,.0f} bytes per thread")
    store.close()
    admin.close()


if __name__ == "__main__":
    main(
        int(sys.argv[1]) if len(sys.argv) > 1 else 2000,
        int(sys.argv[2]) if len(sys.argv) > 2 else 3,
    )
