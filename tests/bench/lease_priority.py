"""Lease cost at 50,000 waiting heads (SPEC §15, issue 27): FIFO heads vs mixed priorities and
kinds, on one throwaway PostgreSQL (or DURABLE_GRAPH_TEST_DSN).

    .venv/bin/python -m tests.bench.lease_priority [--heads 50000] [--leases 2000]

Fills a fresh schema with ``--heads`` threads of one waiting entry each, then times
``--leases`` consecutive `lease` calls (each takes a new head; leased threads leave the
unleased index, so the queue stays at about ``--heads`` waiting heads), per call, client round
trip included, and prints the median, p95 and mean in microseconds, and the shared buffers one
lease touches (``pg_stat_database`` over the timed leases): the work done, which other load on
the machine does not change (timings on a loaded machine do).

Workloads (each on its own schema):
- ``fifo``: every head priority 0, kind ``default`` — what a queue holds today;
- ``mixed``: priorities uniform in -5..5 and four kinds, leased with every kind;
- ``mixed-kinds``: the same heads, leased with ``kinds=[two of the four]``.

Run with the package of another checkout (e.g. main's virtualenv) to measure "today": on a
package without ``Submission.priority`` only ``fifo`` runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import statistics
import time
import uuid
from datetime import timedelta
from typing import Any

from durable_graph.core.model import Submission
from durable_graph.postgres.config import PostgresConfig
from durable_graph.postgres.store import PostgresCheckpointer

TTL = timedelta(hours=1)
KINDS = ("a", "b", "c", "d")


def _has_scheduling() -> bool:
    return "priority" in {f.name for f in dataclasses.fields(Submission)}


def _fill(store: Any, heads: int, mixed: bool) -> None:
    rng = random.Random(27)
    batch: list[Submission] = []
    for i in range(heads):
        if mixed:
            kind = KINDS[i % len(KINDS)]
            sub = Submission(f"t-{i}", i, priority=rng.randint(-5, 5), kind=kind)
        else:
            sub = Submission(f"t-{i}", i)
        batch.append(sub)
        if len(batch) == 2_000:
            store.run_queue.submit_many(batch)
            batch = []
    if batch:
        store.run_queue.submit_many(batch)


def _measure(store: Any, dsn: str, leases: int, kinds: list[str] | None) -> dict[str, float]:
    q = store.run_queue
    extra: dict[str, Any] = {} if kinds is None else {"kinds": kinds}
    for _ in range(50):  # warm the plans and the pool
        assert q.lease("warm", TTL, **extra) is not None
    times: list[float] = []
    before = _buffers(dsn)
    for _ in range(leases):
        start = time.perf_counter()
        lease = q.lease("bench", TTL, **extra)
        times.append((time.perf_counter() - start) * 1e6)
        assert lease is not None
    time.sleep(1.0)  # the store's backends report their statistics
    touched = _buffers(dsn) - before
    times.sort()
    return {
        "median_us": round(statistics.median(times), 1),
        "p95_us": round(times[int(len(times) * 0.95)], 1),
        "mean_us": round(statistics.fmean(times), 1),
        # the work of one lease (each its own transaction), whatever else loads the machine;
        # includes the two counter reads, amortised over the leases
        "buffers_per_lease": round(touched / leases, 1),
    }


def _buffers(dsn: str) -> int:
    """Shared buffers touched so far in the database (``pg_stat_database`` blks_hit +
    blks_read, every backend's statistics flushed first)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_catalog.pg_stat_force_next_flush()")
        row = conn.execute(
            "SELECT blks_hit + blks_read FROM pg_catalog.pg_stat_database"
            " WHERE datname = pg_catalog.current_database()"
        ).fetchone()
        assert row is not None
        return int(row[0])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--heads", type=int, default=50_000)
    parser.add_argument("--leases", type=int, default=2000)
    args = parser.parse_args()
    server = None
    dsn = os.environ.get("DURABLE_GRAPH_TEST_DSN")
    if not dsn:
        from durable_graph.testkit.postgres import server as pg_server

        server = pg_server.start()
        dsn = server.dsn()
    workloads: list[tuple[str, bool, list[str] | None]] = [("fifo", False, None)]
    if _has_scheduling():
        workloads += [("mixed", True, None), ("mixed-kinds", True, ["b", "d"])]
    results: dict[str, Any] = {"heads": args.heads, "leases": args.leases}
    try:
        for name, mixed, kinds in workloads:
            schema = f"bench_{uuid.uuid4().hex[:10]}"
            config = PostgresConfig(schema=schema, call_timeout=timedelta(seconds=120))
            store = PostgresCheckpointer.open(dsn, config)
            try:
                _fill(store, args.heads, mixed)
                timing = _measure(store, dsn, args.leases, kinds)
                results[name] = timing
            finally:
                store.close()
    finally:
        if server is not None:
            server.stop()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
