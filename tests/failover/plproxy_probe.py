"""What a PL/Proxy hop costs, measured for `docs/scaling.md` (an experiment, not product code).

    PYTHONPATH=tests .venv/bin/python tests/failover/plproxy_probe.py [CALLS]

Needs Debian's ``postgresql-15-plproxy``. On one throwaway durable server it makes two shard
databases, each an unchanged durable_graph schema, and a proxy database whose ``dg_*_v1``
functions keyed by ``p_thread_id`` are generated routing stubs (``CLUSTER 'dg'; RUN ON
hashtext(p_thread_id);``, same names and signatures, read from the shards' catalog). It then
times the same calls (claim + release, get, commit) made directly on a shard and through the
proxy: p50 latency from the client and the cluster's CPU per call (every backend of the server:
proxy and shard backends together).
"""

from __future__ import annotations

import statistics
import sys
import time
import uuid
from typing import Any

import psycopg

from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.testkit.postgres import server as pg_server
from failover.capacity import cluster_cpu_seconds

SCHEMA = "dg"
SHARDS = ("shard0", "shard1")


def proxy_stubs(shard: psycopg.Connection[Any]) -> list[str]:
    """One routing function per thread-keyed dg function of the shard's schema."""
    rows = shard.execute(
        "SELECT p.proname, pg_get_function_arguments(p.oid), pg_get_function_result(p.oid) "
        "FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
        "WHERE n.nspname = %s AND p.proname LIKE 'dg\\_%%\\_v1' "
        "AND pg_get_function_arguments(p.oid) LIKE 'p\\_thread\\_id text%%'",
        (SCHEMA,),
    ).fetchall()
    return [
        f"CREATE FUNCTION {SCHEMA}.{name}({args}) RETURNS {result} LANGUAGE plproxy AS $$ "
        f"CLUSTER 'dg'; RUN ON hashtext(p_thread_id); $$"
        for name, args, result in rows
    ]


def setup(server: pg_server.PgServer) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as admin:
        for db in (*SHARDS, "proxy"):
            admin.execute(f"CREATE DATABASE {db}")
    for db in SHARDS:
        PostgresCheckpointer.open(server.dsn(db), PostgresConfig(schema=SCHEMA)).close()
    with psycopg.connect(server.dsn(SHARDS[0]), autocommit=True) as shard:
        stubs = proxy_stubs(shard)
    with psycopg.connect(server.dsn("proxy"), autocommit=True) as proxy:
        proxy.execute("CREATE EXTENSION plproxy")
        parts = ", ".join(
            f"p{i} 'host={server.host} port={server.port} user={server.user} dbname={db}'"
            for i, db in enumerate(SHARDS)
        )
        proxy.execute(f"CREATE SERVER dg FOREIGN DATA WRAPPER plproxy OPTIONS ({parts})")
        proxy.execute("CREATE USER MAPPING FOR PUBLIC SERVER dg")
        proxy.execute(f"CREATE SCHEMA {SCHEMA}")
        for stub in stubs:
            proxy.execute(stub)
    print(f"{len(stubs)} routing stubs generated")


def shard_of(conn: psycopg.Connection[Any], thread_id: str) -> int:
    row = conn.execute("SELECT hashtext(%s) & 1", (thread_id,)).fetchone()
    assert row is not None
    return int(row[0])


def measure(server: pg_server.PgServer, calls: int) -> None:
    postmaster = server.postmaster_pid()
    assert postmaster is not None
    direct = {i: psycopg.connect(server.dsn(db), autocommit=True) for i, db in enumerate(SHARDS)}
    proxy = psycopg.connect(server.dsn("proxy"), autocommit=True)
    state = '{"messages": "' + "x" * 900 + '"}'

    def cycle(conn_for: Any, thread_id: str, times: dict[str, list[float]]) -> None:
        conn = conn_for(thread_id)
        t = time.perf_counter()
        row = conn.execute(
            f"SELECT token FROM {SCHEMA}.dg_claim_v1(%s, 'h', interval '1 minute')", (thread_id,)
        ).fetchone()
        times["claim"].append(time.perf_counter() - t)
        token = row[0]
        t = time.perf_counter()
        conn.execute(
            f"SELECT * FROM {SCHEMA}.dg_commit_v1(%s, %s, %s, NULL, 'r', %s, '{{}}', "
            "'{}'::text[], NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
            (thread_id, token, uuid.uuid4().hex, state),
        ).fetchall()
        times["commit"].append(time.perf_counter() - t)
        t = time.perf_counter()
        conn.execute(f"SELECT * FROM {SCHEMA}.dg_get_v1(%s, NULL)", (thread_id,)).fetchall()
        times["get"].append(time.perf_counter() - t)
        t = time.perf_counter()
        conn.execute(f"SELECT * FROM {SCHEMA}.dg_release_claim_v1(%s, %s)", (thread_id, token))
        times["release_claim"].append(time.perf_counter() - t)

    routes = {
        "direct": lambda tid: direct[shard_of(proxy, tid)],
        "proxy": lambda tid: proxy,
    }
    results: dict[str, dict[str, Any]] = {}
    for rnd in range(4):  # alternate, so both see the same load
        for name, conn_for in routes.items():
            times: dict[str, list[float]] = {
                k: [] for k in ("claim", "commit", "get", "release_claim")
            }
            cpu0 = cluster_cpu_seconds(postmaster)
            for _ in range(calls // 4):
                cycle(conn_for, f"t-{uuid.uuid4().hex[:10]}", times)
            cpu = cluster_cpu_seconds(postmaster) - cpu0
            acc = results.setdefault(name, {"times": {k: [] for k in times}, "cpu": 0.0, "n": 0})
            for k, v in times.items():
                acc["times"][k].extend(v)
            acc["cpu"] += cpu
            acc["n"] += calls // 4 * 4
        _ = rnd
    print(
        "| path | claim p50 ms | commit p50 ms | get p50 ms | release p50 ms | server CPU per call ms |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name, acc in results.items():
        p50 = {k: 1000 * statistics.median(v) for k, v in acc["times"].items()}
        print(
            f"| {name} | {p50['claim']:.3f} | {p50['commit']:.3f} | {p50['get']:.3f} | "
            f"{p50['release_claim']:.3f} | {1000 * acc['cpu'] / acc['n']:.3f} |"
        )
    for conn in (*direct.values(), proxy):
        conn.close()


def main(calls: int) -> None:
    server = pg_server.start(durable=True)
    try:
        setup(server)
        measure(server, calls)
    finally:
        server.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
