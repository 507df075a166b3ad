"""Client CPU per PostgreSQL call: `time.process_time` around serial calls through the store.

    .venv/bin/python -m tests.bench.client_cpu [--dsn DSN] [--batches 30] [--batch 20]

Without ``--dsn`` a throwaway durable server is started. One process, one store with a pool of
one connection, a fresh schema. The calls are measured in interleaved batches (commit, get,
submit, lease(run_id), close, and psycopg's bare ``SELECT 1`` on its own connection) so that a
busy machine slows them alike; reported: the median and the minimum over batches of the process
CPU per call (this includes every thread of the process, e.g. the watchdog's), in µs.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import psycopg

from durable_graph.core.model import Commit, Completed, Lease, Submission
from durable_graph.postgres import PostgresCheckpointer
from durable_graph.postgres.config import PostgresConfig
from durable_graph.testkit.postgres import server as pg_server


def _state() -> dict[str, Any]:
    """~1 KB agent state, as the checkpoint benchmarks use."""
    return {
        "messages": [
            {"role": "user" if i % 2 else "assistant", "content": "x" * 80, "id": i}
            for i in range(10)
        ]
    }


def measure(dsn: str, batches: int, batch: int) -> dict[str, tuple[float, float]]:
    """{call: (median µs, min µs)} of process CPU per call."""
    config = PostgresConfig(max_pool_size=1, schema="cpu_" + uuid.uuid4().hex[:10])
    store = PostgresCheckpointer.open(dsn, config)
    queue = store.run_queue
    state = _state()
    claim = store.claim("t-cpu", "holder")
    counter = [0]
    parent: list[str | None] = [None]
    leases: list[Lease] = []

    def commit() -> None:
        counter[0] += 1
        checkpoint_id = f"c{counter[0]:09d}"
        store.commit(
            claim,
            Commit(
                checkpoint_id=checkpoint_id,
                parent_id=parent[0],
                run_id="run-1",
                state=state,
                metadata={"step": counter[0]},
                next=("agent",),
            ),
        )
        parent[0] = checkpoint_id

    def get() -> None:
        store.get("t-cpu")

    def submit() -> None:
        counter[0] += 1
        queue.submit(Submission(thread_id=f"q{counter[0]}", input={"job": counter[0]}))

    def lease() -> None:
        counter[0] += 1
        found = queue.lease("worker", timedelta(seconds=30), run_id=f"r{counter[0]}")
        assert found is not None
        leases.append(found)

    def close() -> None:
        queue.close(leases.pop(), Completed({"ok": True}))

    with psycopg.connect(dsn, autocommit=True) as conn:

        def select1() -> None:
            conn.execute("SELECT 1").fetchall()

        calls: list[tuple[str, Callable[[], None]]] = [
            ("SELECT 1 (bare psycopg)", select1),
            ("commit (~1 KB state)", commit),
            ("get", get),
            ("submit", submit),
            ("lease(run_id)", lease),
            ("close", close),
        ]
        samples: dict[str, list[float]] = {name: [] for name, _ in calls}
        for round_ in range(batches + 2):
            for name, fn in calls:
                started = time.process_time()
                for _ in range(batch):
                    fn()
                if round_ >= 2:  # the first rounds warm up (prepared statements, caches)
                    samples[name].append((time.process_time() - started) / batch * 1e6)
    store.close()
    return {name: (statistics.median(v), min(v)) for name, v in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--dsn")
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--batch", type=int, default=20)
    args = parser.parse_args()
    if args.dsn:
        results = measure(args.dsn, args.batches, args.batch)
    else:
        server = pg_server.start(durable=True)
        try:
            results = measure(server.dsn(), args.batches, args.batch)
        finally:
            server.stop()
    print("| call | client CPU µs, median | min |")
    print("|---|---:|---:|")
    for name, (median, low) in results.items():
        print(f"| {name} | {median:.0f} | {low:.0f} |")


if __name__ == "__main__":
    main()
