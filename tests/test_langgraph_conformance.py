"""LangGraph's own checkpointer conformance suite (langgraph-checkpoint-conformance) against
`DurableSaver` and `AsyncDurableSaver` on the in-memory, SQLite and PostgreSQL stores (SPEC §12).

Every capability must be detected and every one of its tests must pass.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator, Callable
from pathlib import Path

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

from durable_graph.aio import (
    AsyncInMemoryCheckpointer,
    AsyncPostgresCheckpointer,
    AsyncSqliteCheckpointer,
)
from durable_graph.langgraph import AsyncDurableSaver, DurableSaver
from durable_graph.memory.store import InMemoryCheckpointer
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.sqlite import SqliteCheckpointer

SaverFactory = Callable[[], AsyncGenerator[BaseCheckpointSaver[int], None]]


def _check(name: str, factory: SaverFactory) -> None:
    registered = checkpointer_test(name=name)(factory)
    report = asyncio.run(validate(registered))
    failures = [f for r in report.results.values() for f in r.failures]
    detected = {c for c, r in report.results.items() if r.detected}
    passed = sum(r.tests_passed for r in report.results.values())
    failed = sum(r.tests_failed for r in report.results.values())
    print(f"{name}: {passed}/{passed + failed} passed")
    assert detected == {c.value for c in ALL_CAPABILITIES}
    assert failures == []
    assert (passed, failed) == (81, 0)


def test_durable_saver_passes_conformance_on_memory() -> None:
    async def factory() -> AsyncGenerator[BaseCheckpointSaver[int], None]:
        with InMemoryCheckpointer() as store:
            yield DurableSaver(store)

    _check("DurableSaver[memory]", factory)


def test_durable_saver_passes_conformance_on_sqlite(tmp_path: Path) -> None:
    async def factory() -> AsyncGenerator[BaseCheckpointSaver[int], None]:
        with SqliteCheckpointer.open(str(tmp_path / f"{uuid.uuid4().hex}.db")) as store:
            yield DurableSaver(store)

    _check("DurableSaver[sqlite]", factory)


def test_durable_saver_passes_conformance_on_postgres(pg_dsn: str, pg_schema: str) -> None:
    async def factory() -> AsyncGenerator[BaseCheckpointSaver[int], None]:
        with PostgresCheckpointer.open(pg_dsn, PostgresConfig(schema=pg_schema)) as store:
            yield DurableSaver(store)

    _check("DurableSaver[postgres]", factory)


def test_async_durable_saver_passes_conformance_on_memory() -> None:
    async def factory() -> AsyncGenerator[BaseCheckpointSaver[int], None]:
        store = AsyncInMemoryCheckpointer()
        yield AsyncDurableSaver(store)
        await store.close()

    _check("AsyncDurableSaver[memory]", factory)


def test_async_durable_saver_passes_conformance_on_sqlite(tmp_path: Path) -> None:
    async def factory() -> AsyncGenerator[BaseCheckpointSaver[int], None]:
        store = await AsyncSqliteCheckpointer.open(str(tmp_path / f"{uuid.uuid4().hex}.db"))
        yield AsyncDurableSaver(store)
        await store.close()

    _check("AsyncDurableSaver[sqlite]", factory)


def test_async_durable_saver_passes_conformance_on_postgres(pg_dsn: str, pg_schema: str) -> None:
    async def factory() -> AsyncGenerator[BaseCheckpointSaver[int], None]:
        store = await AsyncPostgresCheckpointer.open(pg_dsn, PostgresConfig(schema=pg_schema))
        yield AsyncDurableSaver(store)
        await store.close()

    _check("AsyncDurableSaver[postgres]", factory)
