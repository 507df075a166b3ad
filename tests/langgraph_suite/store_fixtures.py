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
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from typing import Any

import pytest
from langgraph.store.base import Op, Result, TTLConfig
from langgraph.store.base.batch import AsyncBatchedBaseStore
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

NOT_COSINE = (
    "DurableStore ranks by cosine similarity only (index.distance_type 'cosine'; D297): "
    "LangGraph's {0!r} form of this test is not ours to pass"
)


@contextmanager
def _opened(backend: str) -> Iterator[Any]:
    """A fresh sync store of ``backend``."""
    with tempfile.TemporaryDirectory() as tmp:
        if backend == "dg_memory":
            opened: Any = InMemoryCheckpointer()
        elif backend == "dg_sqlite":
            opened = SqliteCheckpointer.open(os.path.join(tmp, "lg.db"))
        else:
            schema_cm = _pg_schema()
            dsn, schema = schema_cm.__enter__()
            opened = PostgresCheckpointer.open(dsn, PostgresConfig(schema=schema))
        with opened:
            yield opened


@asynccontextmanager
async def _aopened(backend: str) -> AsyncIterator[Any]:
    """A fresh async store of ``backend``."""
    with tempfile.TemporaryDirectory() as tmp:
        if backend == "dg_memory":
            opened: Any = AsyncInMemoryCheckpointer()
        elif backend == "dg_sqlite":
            opened = await AsyncSqliteCheckpointer.open(os.path.join(tmp, "lg.db"))
        else:
            schema_cm = _pg_schema()
            dsn, schema = schema_cm.__enter__()
            opened = await AsyncPostgresCheckpointer.open(dsn, PostgresConfig(schema=schema))
        try:
            yield opened
        finally:
            await opened.close()


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest) -> Iterator[DurableStore]:
    with _opened(request.param) as opened:
        ours = DurableStore(opened.run_queue, ttl=_ttl())
        ours.start_ttl_sweeper()
        try:
            yield ours
        finally:
            ours.stop_ttl_sweeper()


@pytest.fixture(params=BACKENDS, name="store")
async def astore(request: pytest.FixtureRequest) -> AsyncIterator[AsyncDurableStore]:
    async with _aopened(request.param) as opened:
        ours = AsyncDurableStore(opened.run_queue, ttl=_ttl())
        await ours.start_ttl_sweeper()
        try:
            yield ours
        finally:
            await ours.stop_ttl_sweeper()


# --- semantic search: LangGraph's vector tests (an index configuration) ---------------------

_BACKEND: list[str] = []
"""The backend `dg_backend` chose for the running test (its `_create_vector_store` reads it)."""
_OPEN: list[ExitStack] = []
"""What the running test opened with `InMemoryStore`, closed when it ends."""


@pytest.fixture(params=BACKENDS)
def dg_backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each backend in turn, for LangGraph's tests that make their store themselves
    (``_create_vector_store``, ``InMemoryStore(...)``; the store suite marks them to use this
    fixture)."""
    _BACKEND[:] = [request.param]
    with ExitStack() as stack:
        _OPEN[:] = [stack]
        yield request.param
    _OPEN.clear()
    _BACKEND.clear()


def InMemoryStore(*, index: Any = None, ttl: TTLConfig | None = None) -> DurableStore:
    """LangGraph's ``InMemoryStore(...)`` in langgraph-checkpoint's store tests, ours: a
    `DurableStore` of the backend `dg_backend` chose, open until the test ends."""
    opened = _OPEN[0].enter_context(_opened(_BACKEND[0]))
    return DurableStore(opened.run_queue, index=index, ttl=ttl)


class MockAsyncBatchedStore(AsyncBatchedBaseStore):
    """The batched store of langgraph-checkpoint's store tests (its ``MockAsyncBatchedStore``:
    LangGraph's `AsyncBatchedBaseStore` over a store), over ours."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__()
        self._store = InMemoryStore(**kwargs)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return self._store.batch(ops)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return self._store.batch(ops)


def _index(
    distance_type: str, fake_embeddings: Any, text_fields: list[str] | None
) -> dict[str, Any]:
    if distance_type != "cosine":
        pytest.skip(NOT_COSINE.format(distance_type))
    return {"dims": fake_embeddings.dims, "embed": fake_embeddings, "fields": text_fields}


@contextmanager
def _create_vector_store(
    vector_type: str,
    distance_type: str,
    fake_embeddings: Any,
    text_fields: list[str] | None = None,
    enable_ttl: bool = True,
) -> Iterator[DurableStore]:
    """LangGraph's ``_create_vector_store`` (test_store), ours: a `DurableStore` of the backend
    `dg_backend` chose, with the index LangGraph's gives PostgresStore (``vector_type`` is
    pgvector's storage type: ours keeps double precision)."""
    index = _index(distance_type, fake_embeddings, text_fields)
    ttl: TTLConfig | None = {"default_ttl": 2, "refresh_on_read": True} if enable_ttl else None
    with _opened(_BACKEND[0]) as opened:
        yield DurableStore(opened.run_queue, index=index, ttl=ttl)


@asynccontextmanager
async def _acreate_vector_store(
    vector_type: str,
    distance_type: str,
    fake_embeddings: Any,
    text_fields: list[str] | None = None,
) -> AsyncIterator[AsyncDurableStore]:
    """LangGraph's ``_create_vector_store`` of test_async_store, ours (as `_create_vector_store`)."""
    index = _index(distance_type, fake_embeddings, text_fields)
    async with _aopened(_BACKEND[0]) as opened:
        yield AsyncDurableStore(opened.run_queue, index=index)


@pytest.fixture(params=BACKENDS, name="vector_store")
def vector_store(request: pytest.FixtureRequest, fake_embeddings: Any) -> Iterator[DurableStore]:
    _BACKEND[:] = [request.param]
    with _create_vector_store("vector", "cosine", fake_embeddings) as ours:
        yield ours


@pytest.fixture(params=BACKENDS, name="vector_store")
async def avector_store(
    request: pytest.FixtureRequest, fake_embeddings: Any
) -> AsyncIterator[AsyncDurableStore]:
    _BACKEND[:] = [request.param]
    async with _acreate_vector_store("vector", "cosine", fake_embeddings) as ours:
        yield ours


__all__ = [
    "InMemoryStore",
    "MockAsyncBatchedStore",
    "_acreate_vector_store",
    "_create_vector_store",
    "astore",
    "avector_store",
    "dg_backend",
    "store",
    "vector_store",
]
