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
import time
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from chaos.netns import Netns, unavailable_reason
from chaos.supervisor import Env
from durable_graph import ClaimLost, ClaimPolicy, Commit, ProcessingError, Submission
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.testkit.postgres import server as pg_server
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


def print_fleet_report(result: Any, figures: Any) -> None:
    """A fleet run's line, its failover figures, outcomes and first violations (``-s`` shows)."""
    print()
    print(result.line())
    print(f"  failover: {figures.line()}")
    print(f"  outcomes={dict(result.outcomes)} commits={result.commits} kills={result.kills}")
    for violation in result.violations[:40]:
        print("  VIOLATION", violation)


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
    print_fleet_report(result, figures)
    if reason is not None:
        message = f"failover: no namespaces, workers share the host network: {reason}"
        print(message)
        warnings.warn(message, stacklevel=1)
    assert not result.violations, f"{len(result.violations)} violations: {result.violations[:5]}"
    # Loose: the machine is shared; the per-machine recovery check above is the strict one.
    assert figures.after > 0.25 * figures.before, "throughput did not come back after the failover"


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


# --- an asynchronous standby: what is lost, and what the documented remedy restores ---------------


def wait_replayed(pair: pg_server.ReplicatedPair) -> None:
    """Until the standby has replayed everything the primary has written so far."""
    with (
        psycopg.connect(pair.primary.dsn(), autocommit=True) as primary,
        psycopg.connect(pair.standby.dsn(), autocommit=True) as standby,
    ):
        target = primary.execute("SELECT pg_current_wal_lsn()::text").fetchone()
        assert target is not None
        for _ in range(300):
            row = standby.execute(
                "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (target[0],)
            ).fetchone()
            if row is not None and row[0]:
                return
            time.sleep(0.05)
    raise AssertionError("the standby did not catch up")


ADVANCE_SEQUENCES = """
SELECT setval('{schema}.fencing_token_seq',
              (SELECT last_value FROM {schema}.fencing_token_seq) + 1000000000);
SELECT setval(pg_get_serial_sequence('{schema}.queue_entries', 'entry_id'),
              (SELECT last_value FROM {seq}) + 1000000000);
"""
"""The remedy docs/failover.md prescribes after promoting an asynchronous standby."""


@pytest.mark.parametrize("advanced", [False, True], ids=["as_promoted", "sequences_advanced"])
def test_async_standby_loses_acknowledged_writes_and_repeats_tokens_unless_advanced(
    advanced: bool,
) -> None:
    schema = "lag"
    policy = ClaimPolicy(ttl=timedelta(minutes=5))
    with pg_server.running_replicated(synchronous=False) as pair:
        store = PostgresCheckpointer.open(pair.dsn(), store_config(schema))
        store.claim("warm", "w", policy)  # the sequence's WAL record reaches the standby
        wait_replayed(pair)
        # The standby falls behind (here: it stops); the primary goes on acknowledging.
        pair.standby.pg_ctl("stop", "-m", "fast", "-w")
        lost = store.run_queue.submit(Submission("lost", {"n": 1}))
        others = [store.claim(f"other-{i}", "w", policy) for i in range(40)]  # > 32 prefetched
        step = Commit(checkpoint_id="c1", parent_id=None, run_id="r1", state={"n": 1})
        assert store.commit(others[0], step).seq > 0  # acknowledged
        zombie = store.claim("victim", "zombie", policy)  # the highest token issued
        assert zombie.token > max(c.token for c in others)
        store.close()
        pair.primary.kill_hard()
        pair.standby.pg_ctl("start", "-w", "-t", "60", "-l", f"{pair.standby.datadir}/server.log")
        pair.promote()
        if advanced:
            with psycopg.connect(pair.standby.dsn(), autocommit=True) as conn:
                seq = conn.execute(
                    "SELECT pg_get_serial_sequence(%s, 'entry_id')", (f"{schema}.queue_entries",)
                ).fetchone()
                assert seq is not None
                conn.execute(ADVANCE_SEQUENCES.format(schema=schema, seq=seq[0]))
        store = PostgresCheckpointer.open(pair.dsn(), store_config(schema))
        try:
            # Acknowledged on the old primary, never replicated: gone, whatever we do.
            assert store.run_queue.entry(lost.entry_id) is None
            assert store.get("other-0") is None
            # Claims on fresh threads until the new primary reaches the zombie's token.
            fresh = store.claim("victim", "new", policy)
            n = 0
            while fresh.token < zombie.token and n < 100:
                store.release_claim(fresh)
                fresh = store.claim("victim", "new", policy)
                n += 1
            commit = Commit(checkpoint_id="z", parent_id=None, run_id="zombie-run", state={})
            if advanced:
                # Every new token is above every token the lost primary issued: fenced.
                assert fresh.token > zombie.token + 1_000_000
                with pytest.raises(ClaimLost):
                    store.commit(zombie, commit)
            else:
                # The promoted sequence resumed below tokens the lost primary had returned: the
                # zombie's token is issued again, to another holder, and its commit is accepted.
                assert fresh.token == zombie.token
                assert store.commit(zombie, commit).checkpoint_id == "z"
            new_id = store.run_queue.submit(Submission("new", {"n": 2})).entry_id
            assert (new_id > lost.entry_id + 1_000_000) if advanced else new_id <= lost.entry_id
        finally:
            store.close()


def test_writes_fail_within_the_bound_while_the_synchronous_standby_is_down() -> None:
    """With its only synchronous standby gone the primary cannot acknowledge a commit: a write
    call fails with ProcessingError at call_timeout, reads go on, and writes resume when the
    standby is back. (The transaction committed locally and is visible: not acknowledged is not
    the same as not done, as for any ProcessingError.)"""
    config = store_config("nostandby")
    with pg_server.running_replicated() as pair:
        store = PostgresCheckpointer.open(pair.dsn(), config)
        try:
            store.run_queue.submit(Submission("t", {"n": 0}))
            pair.standby.pg_ctl("stop", "-m", "fast", "-w")
            started = time.monotonic()
            with pytest.raises(ProcessingError):
                store.run_queue.submit(Submission("t", {"n": 1}))
            took = time.monotonic() - started
            bound = (config.call_timeout + config.connection_timeout).total_seconds()
            assert config.call_timeout.total_seconds() <= took <= bound + 0.5
            # The watchdog's cancel ends the backend's wait for the standby: the transaction,
            # already committed locally, becomes visible a moment later (PostgreSQL warns).
            deadline = time.monotonic() + 5
            while len(store.run_queue.open_entries(thread_id="t")) < 2:
                assert time.monotonic() < deadline, "the unacknowledged submit never appeared"
                time.sleep(0.05)
            pair.standby.pg_ctl(
                "start", "-w", "-t", "60", "-l", f"{pair.standby.datadir}/server.log"
            )
            assert store.run_queue.submit(Submission("t", {"n": 2})).entry_id > 0
        finally:
            store.close()
