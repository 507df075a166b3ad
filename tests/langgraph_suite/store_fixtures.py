"""`DurableStore` / `AsyncDurableStore` as the ``store`` of langgraph-checkpoint-postgres's store
tests (test_store, test_async_store), beside LangGraph's ``PostgresStore``.

`store_suite.py` copies this file into that sdist's tests (``tests/_durable_graph_store.py``) and
writes two modules next to LangGraph's, ``test_dg_store.py`` and ``test_dg_async_store.py``: each
imports every test of LangGraph's module and then this module's ``store`` fixture, which so takes
the place of LangGraph's (parameters ``dg_memory``, ``dg_sqlite``, ``dg_postgres``: a fresh store
each, with the TTL configuration LangGraph's fixture gives ``PostgresStore``). Nothing of
LangGraph's is kept in this repository.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from langgraph.store.base import TTLConfig
from tests._durable_graph_savers import _pg_schema  # type: ignore[import-not-found]

from durable_graph.aio import (
    AsyncInMemoryCheckpointer,
    AsyncPostgresCheckpointer,
    AsyncSqliteCheckpointer,
)
from durable_graph.langgraph.store import AsyncDurableStore, DurableStore
from durable_graph.memory.store import InMemoryCheckpointer
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.sqlite import SqliteCheckpointer

TTL_SECONDS = 6
TTL_MINUTES = TTL_SECONDS / 60


def _ttl() -> TTLConfig:
    """What LangGraph's ``store`` fixture gives PostgresStore (a new dict: a test may change it)."""
    return {
        "default_ttl": TTL_MINUTES,
        "refresh_on_read": True,
        "sweep_interval_minutes": TTL_MINUTES / 2,  # type: ignore[typeddict-item]  # theirs too
    }


BACKENDS = ["dg_memory", "dg_sqlite", "dg_postgres"]


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest) -> Iterator[DurableStore]:
    with tempfile.TemporaryDirectory() as tmp:
        if request.param == "dg_memory":
            opened: Any = InMemoryCheckpointer()
        elif request.param == "dg_sqlite":
            opened = SqliteCheckpointer.open(os.path.join(tmp, "lg.db"))
        else:
            schema_cm = _pg_schema()
            dsn, schema = schema_cm.__enter__()
            opened = PostgresCheckpointer.open(dsn, PostgresConfig(schema=schema))
        with opened:
            ours = DurableStore(opened.run_queue, ttl=_ttl())
            ours.start_ttl_sweeper()
            try:
                yield ours
            finally:
                ours.stop_ttl_sweeper()


@pytest.fixture(params=BACKENDS, name="store")
async def astore(request: pytest.FixtureRequest) -> AsyncIterator[AsyncDurableStore]:
    with tempfile.TemporaryDirectory() as tmp:
        if request.param == "dg_memory":
            opened: Any = AsyncInMemoryCheckpointer()
        elif request.param == "dg_sqlite":
            opened = await AsyncSqliteCheckpointer.open(os.path.join(tmp, "lg.db"))
        else:
            schema_cm = _pg_schema()
            dsn, schema = schema_cm.__enter__()
            opened = await AsyncPostgresCheckpointer.open(dsn, PostgresConfig(schema=schema))
        try:
            ours = AsyncDurableStore(opened.run_queue, ttl=_ttl())
            await ours.start_ttl_sweeper()
            try:
                yield ours
            finally:
                await ours.stop_ttl_sweeper()
        finally:
            await opened.close()


__all__ = ["astore", "store"]
