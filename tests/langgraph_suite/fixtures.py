"""Our savers as checkpointer fixtures beside LangGraph's, for LangGraph's own test suite.

`run.py` copies this file into the tests of the downloaded ``langgraph`` sdist (as
``tests/_durable_graph_fixtures.py``) and appends one line to that sdist's ``conftest.py``::

    from tests._durable_graph_fixtures import *  # durable_graph's savers beside LangGraph's

which runs after LangGraph's own fixtures are defined, in the conftest's namespace. So it:

- redefines ``sync_checkpointer`` and ``async_checkpointer`` with LangGraph's savers (those named
  in ``DG_SUITE_LANGGRAPH_SAVERS``) and ours (``dg_memory``, ``dg_sqlite``, ``dg_postgres``;
  ``dg_memory_aio``, ``dg_sqlite_aio``, ``dg_postgres_aio``), each selectable with
  ``DG_SUITE_OURS``;
- adds ours to the savers ``test_prune_postgres`` parametrizes over (its ``SYNC`` / ``ASYNC``);
- points LangGraph's PostgreSQL fixtures at the throwaway server `run.py` started
  (``DG_SUITE_PG_URI``), and lets the PostgreSQL-only tests run (``NO_DOCKER`` off after the
  fixtures' parameters were chosen without Redis).

Nothing of LangGraph's is changed: its tests, savers and fixtures run as shipped.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import psycopg
import pytest
import tests.conftest_checkpointer as lg_fixtures  # type: ignore[import-not-found]
from psycopg import sql

from durable_graph.aio import (
    AsyncInMemoryCheckpointer,
    AsyncPostgresCheckpointer,
    AsyncSqliteCheckpointer,
)
from durable_graph.langgraph import AsyncDurableSaver, DurableSaver
from durable_graph.memory.store import InMemoryCheckpointer
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.sqlite import SqliteCheckpointer

PG_URI = os.environ.get("DG_SUITE_PG_URI", lg_fixtures.DEFAULT_POSTGRES_URI)
"""A server LangGraph's fixtures create their databases on (a URI ending in ``/``)."""
lg_fixtures.DEFAULT_POSTGRES_URI = PG_URI
NO_DOCKER = not PG_URI  # read by test_prune_postgres once this conftest is loaded

SYNC_LANGGRAPH = {
    "memory": lg_fixtures._checkpointer_memory,
    "memory_migrate_sends": lg_fixtures._checkpointer_memory_migrate_sends,
    "sqlite": lg_fixtures._checkpointer_sqlite,
    "sqlite_aes": lg_fixtures._checkpointer_sqlite_aes,
    "postgres": lg_fixtures._checkpointer_postgres,
    "postgres_pipe": lg_fixtures._checkpointer_postgres_pipe,
    "postgres_pool": lg_fixtures._checkpointer_postgres_pool,
}
ASYNC_LANGGRAPH = {
    "memory": lg_fixtures._checkpointer_memory,  # LangGraph's async fixture uses it too
    "sqlite_aio": lg_fixtures._checkpointer_sqlite_aio,
    "postgres_aio": lg_fixtures._checkpointer_postgres_aio,
    "postgres_aio_pipe": lg_fixtures._checkpointer_postgres_aio_pipe,
    "postgres_aio_pool": lg_fixtures._checkpointer_postgres_aio_pool,
}


def _chosen(variable: str, default: str) -> list[str]:
    return [n.strip() for n in os.environ.get(variable, default).split(",") if n.strip()]


LANGGRAPH_SAVERS = _chosen("DG_SUITE_LANGGRAPH_SAVERS", "memory,sqlite,postgres")
"""LangGraph's savers to run (sync names; an async run takes the async one of each kind)."""
OURS = _chosen("DG_SUITE_OURS", "memory,sqlite,postgres")
"""Our backends to run."""

_ASYNC_OF = {"memory": "memory", "sqlite": "sqlite_aio", "postgres": "postgres_aio"}


# --- our savers -----------------------------------------------------------------------------


@contextmanager
def _pg_schema() -> Iterator[tuple[str, str]]:
    """(dsn, a fresh schema) on the suite's server, the schema dropped afterwards."""
    dsn = PG_URI.rstrip("/") + "/postgres"
    schema = f"lg_{uuid.uuid4().hex[:16]}"
    try:
        yield dsn, schema
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


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

SYNC_PARAMS = [n for n in LANGGRAPH_SAVERS if n in SYNC_LANGGRAPH] + [f"dg_{n}" for n in OURS]
ASYNC_PARAMS = [
    _ASYNC_OF.get(n, n) for n in LANGGRAPH_SAVERS if _ASYNC_OF.get(n, n) in ASYNC_LANGGRAPH
] + [f"dg_{n}_aio" for n in OURS]


# --- the fixtures LangGraph's tests take ----------------------------------------------------


@pytest.fixture(scope="function", params=SYNC_PARAMS)
def sync_checkpointer(request: pytest.FixtureRequest) -> Iterator[Any]:
    name: str = request.param
    factory = SYNC_OURS[name[3:]] if name.startswith("dg_") else SYNC_LANGGRAPH[name]
    with factory() as checkpointer:
        yield checkpointer


@pytest.fixture(scope="function", params=ASYNC_PARAMS)
async def async_checkpointer(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    name: str = request.param
    if name.startswith("dg_"):
        async with ASYNC_OURS[name[3:-4]]() as checkpointer:
            yield checkpointer
    elif name == "memory":
        with ASYNC_LANGGRAPH[name]() as checkpointer:
            yield checkpointer
    else:
        async with ASYNC_LANGGRAPH[name]() as checkpointer:
            yield checkpointer


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Add ours to the savers test_prune_postgres parametrizes ``make_checkpointer`` over."""
    if "make_checkpointer" not in metafunc.fixturenames:
        return
    for mark in metafunc.definition.iter_markers("parametrize"):
        if mark.args[0] != "make_checkpointer":
            continue
        savers: list[Any] = mark.args[1]
        if any(getattr(p, "id", "").startswith("dg_") for p in savers):
            return  # the list is shared by the module's tests: added once
        is_async = any(f in savers for f in ASYNC_LANGGRAPH.values())
        ours = ASYNC_OURS if is_async else SYNC_OURS
        suffix = "_aio" if is_async else ""
        savers.extend(pytest.param(ours[n], id=f"dg_{n}{suffix}") for n in OURS)
        return


__all__ = [
    "NO_DOCKER",
    "async_checkpointer",
    "pytest_generate_tests",
    "sync_checkpointer",
]
