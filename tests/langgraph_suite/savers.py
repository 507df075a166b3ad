"""Our savers for LangGraph's tests: `DurableSaver` / `AsyncDurableSaver` on a fresh store each.

Copied beside LangGraph's tests as ``tests/_durable_graph_savers.py`` by `run.py`; used by
``fixtures.py`` (the langgraph sdist) and ``fixtures_postgres.py`` (langgraph-checkpoint-postgres).
PostgreSQL stores use one schema per test process on the suite's server (``DG_SUITE_PG_URI``),
emptied before each test.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import psycopg

from durable_graph.aio import (
    AsyncInMemoryCheckpointer,
    AsyncPostgresCheckpointer,
    AsyncSqliteCheckpointer,
)
from durable_graph.langgraph import AsyncDurableSaver, DurableSaver
from durable_graph.memory.store import InMemoryCheckpointer
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.postgres.migrations import migrate
from durable_graph.sqlite import SqliteCheckpointer
from durable_graph.testkit.postgres.schema import reset_store

PG_URI = os.environ.get("DG_SUITE_PG_URI", "")
"""The suite's server (a URI ending in ``/``; LangGraph's fixtures add a database name)."""

OURS = [n.strip() for n in os.environ.get("DG_SUITE_OURS", "memory,sqlite,postgres").split(",")]
OURS = [n for n in OURS if n]
"""Our backends to run."""


_SCHEMA: list[str] = []
"""The one schema the PostgreSQL stores of this test process use (migrated once)."""


@contextmanager
def _pg_schema() -> Iterator[tuple[str, str]]:
    """(dsn, the process's store schema, emptied): migrating a fresh schema per test would cost
    more than most tests (the tests of a process run one after another)."""
    dsn = PG_URI.rstrip("/") + "/postgres"
    with psycopg.connect(dsn, autocommit=True) as conn:
        if not _SCHEMA:
            _SCHEMA.append(f"lg_{secrets.token_hex(8)}")  # uuid4 may be patched by a test
            migrate(dsn, _SCHEMA[0])
        else:
            reset_store(conn, _SCHEMA[0])
    yield dsn, _SCHEMA[0]


@contextmanager
def dg_memory() -> Iterator[DurableSaver]:
    with InMemoryCheckpointer() as store:
        yield DurableSaver(store)


@contextmanager
def dg_sqlite() -> Iterator[DurableSaver]:
    with (
        tempfile.TemporaryDirectory() as tmp,
        SqliteCheckpointer.open(os.path.join(tmp, "lg.db")) as store,
    ):
        yield DurableSaver(store)


@contextmanager
def dg_postgres() -> Iterator[DurableSaver]:
    with (
        _pg_schema() as (dsn, schema),
        PostgresCheckpointer.open(dsn, PostgresConfig(schema=schema)) as store,
    ):
        yield DurableSaver(store)


@asynccontextmanager
async def dg_memory_aio() -> AsyncIterator[AsyncDurableSaver]:
    store = AsyncInMemoryCheckpointer()
    try:
        yield AsyncDurableSaver(store)
    finally:
        await store.close()


@asynccontextmanager
async def dg_sqlite_aio() -> AsyncIterator[AsyncDurableSaver]:
    with tempfile.TemporaryDirectory() as tmp:
        store = await AsyncSqliteCheckpointer.open(os.path.join(tmp, "lg.db"))
        try:
            yield AsyncDurableSaver(store)
        finally:
            await store.close()


@asynccontextmanager
async def dg_postgres_aio() -> AsyncIterator[AsyncDurableSaver]:
    with _pg_schema() as (dsn, schema):
        store = await AsyncPostgresCheckpointer.open(dsn, PostgresConfig(schema=schema))
        try:
            yield AsyncDurableSaver(store)
        finally:
            await store.close()


SYNC_OURS = {"memory": dg_memory, "sqlite": dg_sqlite, "postgres": dg_postgres}
ASYNC_OURS = {"memory": dg_memory_aio, "sqlite": dg_sqlite_aio, "postgres": dg_postgres_aio}
