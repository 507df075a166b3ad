"""Shared fixtures: a real PostgreSQL for the whole session.

`DURABLE_GRAPH_TEST_DSN` names a server to use; otherwise a throwaway one is started
(`durable_graph.testkit.postgres.server`) and removed at the end. Each session gets a fresh database
from pytest-postgresql's `DatabaseJanitor`; each test gets its own schema inside it.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from pytest_postgresql.janitor import DatabaseJanitor

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.memory.store import InMemoryCheckpointer
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.postgres.migrations import migrate
from durable_graph.sqlite import SqliteCheckpointer
from durable_graph.testkit.harness import ClockControl, ManualClock
from durable_graph.testkit.postgres import server as pg_server
from durable_graph.testkit.postgres.clock import PgClock

# A shell starts a background job (`make test &`) with SIGINT ignored, and every process the
# tests start would inherit that: the tests that stop a command with Ctrl-C (SIGINT) would then
# wait on it forever. The suite runs as a foreground one would.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
from durable_graph.worker.signals import STOP_SIGNALS

_SERVER: pg_server.PgServer | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _SERVER
    if not os.environ.get("DURABLE_GRAPH_TEST_DSN") and _SERVER is None:
        _SERVER = pg_server.start()
        os.environ["DURABLE_GRAPH_TEST_DSN"] = _SERVER.dsn()


def pytest_unconfigure(config: pytest.Config) -> None:
    global _SERVER
    if _SERVER is not None:
        _SERVER.stop()
        _SERVER = None


@pytest.fixture(scope="session")
def pg_server_handle() -> pg_server.PgServer | None:
    """The throwaway server when this session started one (None with DURABLE_GRAPH_TEST_DSN)."""
    return _SERVER


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    """A DSN to a database of this session's own, dropped at the end."""
    base = psycopg.conninfo.conninfo_to_dict(os.environ["DURABLE_GRAPH_TEST_DSN"])
    dbname = f"dg_test_{uuid.uuid4().hex[:12]}"
    janitor = DatabaseJanitor(
        user=str(base.get("user") or "postgres"),
        host=str(base.get("host") or "127.0.0.1"),
        port=str(base.get("port") or 5432),
        dbname=dbname,
        password=str(base["password"]) if base.get("password") else None,
    )
    janitor.init()
    try:
        base["dbname"] = dbname
        yield psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in base.items()})
    finally:
        janitor.drop()


@pytest.fixture
def pg_schema(pg_dsn: str) -> Iterator[str]:
    """A fresh schema name for one test, dropped afterwards."""
    schema = f"t_{uuid.uuid4().hex[:16]}"
    yield schema
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture(scope="class")
def class_schema(pg_dsn: str) -> Iterator[tuple[str, PgClock]]:
    """A schema migrated once for a whole test class, with a movable clock.

    Tests empty it with `durable_graph.testkit.postgres.schema.reset_store` before each run.
    """
    schema = f"c_{uuid.uuid4().hex[:16]}"
    migrate(pg_dsn, schema)
    clock = PgClock(pg_dsn, schema)
    yield schema, clock
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture(scope="module")
def module_schema(pg_dsn: str) -> Iterator[str]:
    """A schema migrated once for a whole test module (emptied with ``reset_store``)."""
    schema = f"m_{uuid.uuid4().hex[:16]}"
    migrate(pg_dsn, schema)
    yield schema
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def clocked_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[Checkpointer, ClockControl]]:
    """A store of each kind (memory, SQLite, PostgreSQL) and the clock that moves its time."""
    store: Checkpointer
    clock: ClockControl
    if request.param == "postgres":
        dsn: str = request.getfixturevalue("pg_dsn")
        schema: str = request.getfixturevalue("pg_schema")
        store = PostgresCheckpointer.open(dsn, PostgresConfig(schema=schema))
        clock = PgClock(dsn, schema)
    else:
        manual = ManualClock(start=time.time())
        clock = manual
        if request.param == "memory":
            store = InMemoryCheckpointer(clock=manual)
        else:
            store = SqliteCheckpointer.open(tmp_path / "lg.db", clock=manual)
    yield store, clock
    store.close()


@pytest.fixture
def second_schema(pg_dsn: str, pg_schema: str) -> Iterator[str]:
    """A second schema name beside ``pg_schema`` (for a test to install), dropped afterwards."""
    other = pg_schema + "_b"
    yield other
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(other)))


@pytest.fixture
def restore_signals() -> Iterator[None]:
    """Puts SIGTERM's and SIGINT's handlers back after a test that installs a worker's own."""
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    yield
    for sig, handler in previous.items():
        signal.signal(sig, handler)
