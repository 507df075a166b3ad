"""Throughput of the partitioned store, for `docs/scaling.md` (an experiment, not a test).

    PYTHONPATH=tests .venv/bin/python tests/failover/partition_throughput.py [SECONDS] [CLIENTS]

On throwaway durable servers (fsync on) it runs CLIENTS client threads for SECONDS each doing
a worker's job (`worker_job`: submit, lease the oldest, claim, 3 commits, release, close) against: one plain store on one
server; the same through a proxy of 8 partitions on that one server; through a proxy of 8
partitions on 3 servers; the last again with a concurrency limit set that never binds (a kind
limit on "default" of 1,000,000), so every lease takes the proxy's limit lock and counts
leases store-wide (D142). Then, serially, the per-call latency of ``get`` and ``claim`` +
``release_claim`` on one thread, direct to its partition and through the proxy (the hop).
"""

from __future__ import annotations

import functools
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from durable_graph import ClaimPolicy, Commit, Completed, Submission
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.postgres.partitions import partition_of_thread
from durable_graph.testkit.postgres import partitioned
from durable_graph.testkit.postgres import server as pg_server
from failover.capacity import STATE

SCHEMA = "dg"


def worker_job(store: Any, steps: int) -> bool:
    """Submit a job, lease whatever is oldest (another client's, maybe) and run it as a worker
    does: claim, ``steps`` commits (~1 KB state), release, close. False when nothing leased."""
    queue = store.run_queue
    thread_id = f"t-{uuid.uuid4().hex[:12]}"
    queue.submit(Submission(thread_id, {"job": thread_id}))
    run_id = uuid.uuid4().hex
    lease = queue.lease("w", timedelta(minutes=5), run_id=run_id)
    if lease is None:
        return False
    thread = lease.entry.thread_id
    claim = store.claim(thread, run_id, ClaimPolicy(ttl=timedelta(minutes=5)))
    parent = None
    for step in range(steps):
        cp = store.commit(
            claim,
            Commit(uuid.uuid4().hex, parent, run_id, {**STATE, "step": step}, {"step": step}),
        )
        parent = cp.checkpoint_id
    store.release_claim(claim)
    queue.close(lease, Completed({"ok": True}))
    return True


def throughput(store: Any, seconds: float, clients: int) -> float:
    """Jobs closed per second by ``clients`` threads for ``seconds``."""
    done = [0] * clients
    stop = time.monotonic() + seconds

    def run(i: int) -> None:
        while time.monotonic() < stop:
            done[i] += worker_job(store, 3)

    worker_job(store, 3)  # warm-up
    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done) / (time.monotonic() - started)


def config() -> PostgresConfig:
    return PostgresConfig(schema=SCHEMA, max_pool_size=16)


def p50_ms(fn: Callable[[], object], n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1000 * statistics.median(times)


def hop(ps: partitioned.PartitionedStore, n: int) -> None:
    proxy = PostgresCheckpointer.open(ps.proxy, config())
    thread_id = f"hop-{uuid.uuid4().hex[:8]}"
    part = partition_of_thread(thread_id, len(ps.partitions))
    direct = PostgresCheckpointer.open(ps.partitions[part], config())
    policy = ClaimPolicy(ttl=timedelta(minutes=1))

    def claim_release(store: Any) -> None:
        store.release_claim(store.claim(thread_id, "h", policy))

    print("| path | get p50 ms | claim + release_claim p50 ms |")
    print("|---|---:|---:|")
    for _ in range(2):
        for name, store in (("direct to the partition", direct), ("through the proxy", proxy)):
            g = p50_ms(functools.partial(store.get, thread_id), n)
            c = p50_ms(functools.partial(claim_release, store), n)
            print(f"| {name} | {g:.2f} | {c:.2f} |")
    proxy.close()
    direct.close()


def main(seconds: float, clients: int) -> None:
    results = {}
    one = pg_server.start(durable=True)
    try:
        plain = PostgresCheckpointer.open(one.dsn(), config())
        results["1 server, plain store"] = throughput(plain, seconds, clients)
        plain.close()
        ps = partitioned.create([one], 8, SCHEMA, prefix="one_p", proxy_db="one_proxy")
        store = PostgresCheckpointer.open(ps.proxy, config())
        results["1 server, proxy + 8 partitions"] = throughput(store, seconds, clients)
        store.close()
    finally:
        one.stop()
    servers = [pg_server.start(durable=True) for _ in range(3)]
    try:
        ps = partitioned.create(servers, 8, SCHEMA)
        store = PostgresCheckpointer.open(ps.proxy, config())
        results["3 servers, proxy + 8 partitions"] = throughput(store, seconds, clients)
        store.run_queue.set_limit("kind", "default", 1_000_000)
        results["3 servers, proxy + 8 partitions, a limit set"] = throughput(
            store, seconds, clients
        )
        store.run_queue.remove_limit("kind", "default")
        store.close()
        hop(ps, 300)
    finally:
        for s in servers:
            s.stop()
    print(f"| layout ({clients} clients, {seconds:.0f} s) | jobs/s |")
    print("|---|---:|")
    for name, rate in results.items():
        print(f"| {name} | {rate:.1f} |")


if __name__ == "__main__":
    main(
        float(sys.argv[1]) if len(sys.argv) > 1 else 20.0,
        int(sys.argv[2]) if len(sys.argv) > 2 else 8,
    )
