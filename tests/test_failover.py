"""Failover: a fleet of 8 worker machines (network namespaces) and 2 producers on a PostgreSQL
primary with a synchronous standby, through a hard kill of the primary and the standby's
promotion, with one machine partitioned for longer than a lease ttl. See `tests/failover/fleet.py`
for what is checked.

Everything connects with one multi-host DSN (``host=a,b port=p1,p2
target_session_attrs=read-write``): libpq tries the servers in order and keeps the one that
accepts writes, so after the promotion new connections find the new primary by themselves.

One summary line (run with ``-s``): the chaos counts and violations, then the throughput before,
during (the kill and 10 s after) and after, the outage and the time to the first close.
Short by default (60 s, about 90 s in all); ``DURABLE_GRAPH_FLEET=long`` (`make soak`) runs
11 minutes.
"""

from __future__ import annotations

import os
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg

from chaos.netns import Netns, unavailable_reason
from chaos.supervisor import Env
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.testkit import pg_server
from failover.fleet import Fleet, FleetEnv, FleetPlan

LONG = os.environ.get("DURABLE_GRAPH_FLEET") == "long"
SEED = int(os.environ.get("DURABLE_GRAPH_CHAOS_SEED", "1"))


def plan() -> FleetPlan:
    if LONG:
        return FleetPlan(seconds=660, threads=64, partition_at=0.3, failover_at=0.5, seed=SEED)
    return FleetPlan(seconds=60, threads=32, partition_at=0.2, failover_at=0.5, seed=SEED)


def store_config(schema: str, **kw: Any) -> PostgresConfig:
    """The workers' timeouts (tests/chaos/worker.py): every call ends within 3 s."""
    return PostgresConfig(
        schema=schema,
        call_timeout=timedelta(seconds=2),
        connection_timeout=timedelta(seconds=1),
        max_pool_size=2,
        **kw,
    )


def test_fleet_rides_through_a_primary_kill_and_promotion_losing_nothing_acknowledged(
    tmp_path: Path,
) -> None:
    reason = unavailable_reason()
    netns = [] if reason is not None else [Netns(i) for i in range(8)]
    try:
        for ns in netns:
            ns.setup()
        listen = ",".join(["127.0.0.1"] + [ns.host_ip for ns in netns])
        hba = (f"host all all {netns[0].fleet_subnet} trust",) if netns else ()
        with pg_server.running_replicated({"listen_addresses": listen}, hba_lines=hba) as pair:
            result, figures = run_fleet(pair, netns, tmp_path)
    finally:
        for ns in netns:
            ns.teardown()
    print()
    print(result.line())
    print(f"  failover: {figures.line()}")
    print(f"  outcomes={dict(result.outcomes)} commits={result.commits} kills={result.kills}")
    for violation in result.violations[:40]:
        print("  VIOLATION", violation)
    if reason is not None:
        message = f"failover: no namespaces, workers share the host network: {reason}"
        print(message)
        warnings.warn(message, stacklevel=1)
    assert not result.violations, f"{len(result.violations)} violations: {result.violations[:5]}"
    assert figures.after > 0.5 * figures.before, "throughput did not come back after the failover"


def run_fleet(pair: pg_server.ReplicatedPair, netns: list[Netns], tmp_path: Path) -> Any:
    schema = "fleet"
    dsn = pair.dsn()
    PostgresCheckpointer.open(dsn, store_config(schema)).close()  # migrate before the race
    with psycopg.connect(dsn, autocommit=True) as conn:
        # Acknowledged means replicated: the standby has flushed every commit the store returned.
        setting = conn.execute("SHOW synchronous_standby_names").fetchone()
        assert setting is not None and setting[0] == pair.standby_name
    worker_cfg: dict[str, Any] = {
        "backend": "postgres",
        "dsn": dsn,
        "schema": schema,
        "time_calls": True,
    }

    def open_store() -> PostgresCheckpointer:
        return PostgresCheckpointer.open(dsn, store_config(schema, auto_migrate=False))

    def kill_primary() -> None:
        pair.primary.kill_hard()

    fenv = FleetEnv(
        env=Env(open_store=open_store, worker_cfg=worker_cfg),
        kill_primary=kill_primary,
        promote=pair.promote,
        netns=netns,
        slot_cfgs=[{**worker_cfg, "dsn": pair.dsn(host=ns.host_ip)} for ns in netns],
        open_producer_store=open_store,
    )
    return Fleet(plan(), fenv, tmp_path).run_fleet()
