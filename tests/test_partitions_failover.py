"""The fleet soak on a partitioned store (SPEC §16.4): 8 partitions, the proxy and partitions
0, 3, 6 on one server, 2, 5 on another, and 1, 4, 7 on a primary with a synchronous standby
whose primary is killed mid-run and the standby promoted (`tests/failover/fleet.py` checks
what `tests/test_failover.py` checks: exactly-once, nothing acknowledged lost). The proxy
reaches those partitions by a multi-host DSN (``target_session_attrs=read-write``), so after
the promotion its new connections find the new primary. The workers and producers call the
proxy only; no network namespaces (the workers share the host network).

Short by default (60 s); ``DURABLE_GRAPH_FLEET=long`` (`make soak`) runs 11 minutes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from chaos.supervisor import Env
from durable_graph.postgres import PostgresCheckpointer
from durable_graph.testkit.postgres import partitioned
from durable_graph.testkit.postgres import server as pg_server
from failover.fleet import Fleet, FleetEnv, FleetPlan
from test_failover import print_fleet_report, store_config

LONG = os.environ.get("DURABLE_GRAPH_FLEET") == "long"
SEED = int(os.environ.get("DURABLE_GRAPH_CHAOS_SEED", "1"))
SCHEMA = "dg"


def plan() -> FleetPlan:
    if LONG:
        return FleetPlan(seconds=660, threads=64, partition_at=0.3, failover_at=0.5, seed=SEED)
    return FleetPlan(seconds=60, threads=32, partition_at=0.2, failover_at=0.5, seed=SEED)


def test_fleet_on_partitions_rides_through_one_partition_servers_failover(tmp_path: Path) -> None:
    plain = [pg_server.start(), pg_server.start()]
    try:
        with pg_server.running_replicated() as pair:
            multi = pair.dsn("{db}").replace(f"user={pair.primary.user} ", "")
            homes = [
                (plain[0].dsn(), f"host={plain[0].host} port={plain[0].port} dbname={{db}}"),
                (pair.primary.dsn(), multi),
                (plain[1].dsn(), f"host={plain[1].host} port={plain[1].port} dbname={{db}}"),
            ]
            ps = partitioned.create(plain, 8, SCHEMA, homes=homes)
            try:
                result, figures = run_fleet(ps, pair, tmp_path)
            finally:
                ps.close()
    finally:
        for server in plain:
            server.stop()
    print_fleet_report(result, figures)
    assert not result.violations, f"{len(result.violations)} violations: {result.violations[:5]}"
    assert figures.after > 0.25 * figures.before, "throughput did not come back after the failover"


def run_fleet(
    ps: partitioned.PartitionedStore, pair: pg_server.ReplicatedPair, tmp_path: Path
) -> Any:
    worker_cfg: dict[str, Any] = {
        "backend": "postgres",
        "dsn": ps.proxy,
        "schema": SCHEMA,
        "time_calls": True,
    }

    def open_store() -> PostgresCheckpointer:
        return PostgresCheckpointer.open(ps.proxy, store_config(SCHEMA, auto_migrate=False))

    fenv = FleetEnv(
        env=Env(open_store=open_store, worker_cfg=worker_cfg, tokens_per_thread=True),
        kill_primary=pair.primary.kill_hard,
        promote=pair.promote,
        netns=[],
        slot_cfgs=[],
        open_producer_store=open_store,
    )
    return Fleet(plan(), fenv, tmp_path).run_fleet()
