"""Chaos: worker processes run the SPEC §5 protocol against SQLite and PostgreSQL while a supervisor
SIGKILLs and restarts them, restarts the PostgreSQL server (immediate shutdown), cuts one worker's
network (its own namespace) for longer than the lease ttl, cancels entries and deletes threads.
Afterwards the store and the workers' logs are checked (see `tests/chaos/supervisor.py`): every
entry closed exactly once with a valid outcome, every input applied at most once, no commit from
a fenced claim or a delete-marked attempt, no acknowledged submit lost, tokens only increasing.

One summary line per backend (run with ``-s``):
``chaos: backend=... entries=N threads=T kills=K restarts=R partitions=P violations=V``.

Short by default (about 200 entries, under a minute per backend); ``DURABLE_GRAPH_CHAOS=long``
(`make chaos`) runs 2,000 entries over 24 threads.
"""

from __future__ import annotations

import os
import uuid
import warnings
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from chaos.netns import Netns, unavailable_reason
from chaos.supervisor import ChaosPlan, Env, Result, Supervisor
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.sqlite import SqliteCheckpointer
from durable_graph.testkit.postgres import server as pg_server

LONG = os.environ.get("DURABLE_GRAPH_CHAOS") == "long"


def plan_for(backend: str) -> ChaosPlan:
    if LONG:
        return ChaosPlan(
            backend=backend,
            entries=2000,
            threads=24,
            workers=6,
            pg_restarts=(0.1, 0.3, 0.5, 0.7, 0.9),
            partition_at=0.45,
            deletes=12,
            deadline_seconds=1200,
            seed=int(os.environ.get("DURABLE_GRAPH_CHAOS_SEED", "1")),
        )
    return ChaosPlan(
        backend=backend,
        entries=200,
        threads=10,
        workers=4,
        pg_restarts=(0.3, 0.65),
        partition_at=0.4,
        deletes=3,
        deadline_seconds=55,
        seed=int(os.environ.get("DURABLE_GRAPH_CHAOS_SEED", "1")),
    )


def report(result: Result) -> None:
    print()
    print(result.line())
    print(
        f"  outcomes={dict(result.outcomes)} commits={result.commits} "
        f"refused_commits={result.refused_commits} deletes={result.deletes} "
        f"cancels={result.cancels}"
    )
    for violation in result.violations[:40]:
        print("  VIOLATION", violation)
    assert not result.violations, f"{len(result.violations)} violations: {result.violations[:5]}"


def test_sqlite_survives_killed_workers_with_every_entry_closed_once(tmp_path: Path) -> None:
    path = str(tmp_path / "chaos.db")
    SqliteCheckpointer.open(path).close()  # create the schema before the workers race
    env = Env(
        open_store=lambda: SqliteCheckpointer.open(path),
        worker_cfg={"backend": "sqlite", "path": path},
    )
    result = Supervisor(plan_for("sqlite"), env, tmp_path).run()
    report(result)


# --- PostgreSQL ------------------------------------------------------------------------------------


class PgTarget:
    """The server the chaos run restarts: made durable for the run, widened for the namespace.

    The session's throwaway server runs with ``synchronous_commit=off`` (tests do not measure
    durability); an immediate shutdown then loses transactions the store already acknowledged.
    A chaos run checks exactly that nothing acknowledged is lost, so it turns
    ``synchronous_commit`` on for its duration (``fsync=off`` is harmless here: an immediate
    shutdown kills the server, not the machine, and the kernel keeps what was written).
    """

    def __init__(self, server: pg_server.PgServer, dsn: str) -> None:
        self.server = server
        self.dsn = dsn
        self.hba = Path(server.datadir) / "pg_hba.conf"
        self.hba_before: str | None = None

    def _alter(self, statement: sql.Composed | str) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(statement)

    def prepare(self, netns: Netns | None) -> None:
        self._alter("ALTER SYSTEM SET synchronous_commit = on")
        if netns is not None:
            self.hba_before = self.hba.read_text()
            with self.hba.open("a") as f:
                f.write(f"\nhost all all {netns.subnet} trust  # durable_graph chaos\n")
            self._alter(
                sql.SQL("ALTER SYSTEM SET listen_addresses = {}").format(
                    sql.Literal(f"127.0.0.1,{netns.host_ip}")
                )
            )
        self.server.restart(mode="fast")

    def restore(self) -> None:
        if self.hba_before is not None:
            self.hba.write_text(self.hba_before)
            self._alter("ALTER SYSTEM RESET listen_addresses")
        self._alter("ALTER SYSTEM RESET synchronous_commit")
        self.server.restart(mode="fast")


@pytest.fixture
def pg_target(
    pg_server_handle: pg_server.PgServer | None, request: pytest.FixtureRequest
) -> Iterator[PgTarget]:
    if pg_server_handle is not None:
        dsn = request.getfixturevalue("pg_dsn")
        yield PgTarget(pg_server_handle, dsn)
        return
    # DURABLE_GRAPH_TEST_DSN names a server we must not restart: a private one for this test.
    server = pg_server.start()
    try:
        yield PgTarget(server, server.dsn())
    finally:
        server.stop()


def test_postgres_survives_kills_restarts_and_a_partition_with_every_entry_closed_once(
    pg_target: PgTarget, tmp_path: Path
) -> None:
    schema = f"chaos_{uuid.uuid4().hex[:12]}"
    dsn = pg_target.dsn
    config = PostgresConfig(
        schema=schema,
        call_timeout=timedelta(seconds=2),
        connection_timeout=timedelta(seconds=1),
        max_pool_size=2,
    )
    PostgresCheckpointer.open(dsn, config).close()  # migrate before the workers start
    worker_cfg: dict[str, Any] = {"backend": "postgres", "dsn": dsn, "schema": schema}
    netns: Netns | None = None
    ns_cfg: dict[str, Any] | None = None
    reason = unavailable_reason()
    if reason is None:
        netns = Netns()
        netns.setup()
        params = psycopg.conninfo.conninfo_to_dict(dsn)
        params["host"] = netns.host_ip
        ns_cfg = {
            **worker_cfg,
            "dsn": psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in params.items()}),
        }
    try:
        pg_target.prepare(netns)
        env = Env(
            open_store=lambda: PostgresCheckpointer.open(
                dsn, PostgresConfig(schema=schema, auto_migrate=False, max_pool_size=2)
            ),
            worker_cfg=worker_cfg,
            restart_server=lambda: pg_target.server.restart(mode="immediate"),
            netns=netns,
            netns_worker_cfg=ns_cfg,
        )
        result = Supervisor(plan_for("postgres"), env, tmp_path).run()
    finally:
        if netns is not None:
            netns.teardown()
        pg_target.restore()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    if reason is not None:
        message = f"chaos: network partition skipped: {reason}"
        print("\n" + message)
        warnings.warn(message, stacklevel=1)
    report(result)
