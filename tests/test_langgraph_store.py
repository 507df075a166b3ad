"""`DurableStore` and `AsyncDurableStore` (SPEC §20.3 "the store"): LangGraph's `BaseStore` over
the store's items, on memory, SQLite and PostgreSQL. LangGraph's own store tests run against
them in ``make langgraph-store-suite``; these are the parts of ours those do not show."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest
from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp, SearchOp

from durable_graph.aio import (
    AsyncInMemoryCheckpointer,
    AsyncPostgresCheckpointer,
    AsyncSqliteCheckpointer,
)
from durable_graph.core.checkpointer import Checkpointer
from durable_graph.langgraph.store import AsyncDurableStore, DurableStore
from durable_graph.postgres import PostgresConfig
from durable_graph.testkit.harness import ClockControl


async def _opened(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncInMemoryCheckpointer | AsyncSqliteCheckpointer | AsyncPostgresCheckpointer:
    if backend == "postgres":
        dsn: str = request.getfixturevalue("pg_dsn")
        schema: str = request.getfixturevalue("pg_schema")
        return await AsyncPostgresCheckpointer.open(dsn, PostgresConfig(schema=schema))
    if backend == "sqlite":
        return await AsyncSqliteCheckpointer.open(tmp_path / "lg.db")
    return AsyncInMemoryCheckpointer()


def test_put_get_search_list_delete_and_tenants(
    clocked_store: tuple[Checkpointer, ClockControl],
) -> None:
    store, _ = clocked_store
    mine = DurableStore(store.run_queue, tenant="me")
    theirs = DurableStore(store.run_queue, tenant="them")
    mine.put(("users", "u1"), "prefs", {"theme": "dark", "n": 3})
    item = mine.get(("users", "u1"), "prefs")
    assert item is not None and item.value == {"theme": "dark", "n": 3}
    assert item.namespace == ("users", "u1")
    assert theirs.get(("users", "u1"), "prefs") is None
    assert [i.key for i in mine.search(("users",), filter={"n": {"$gt": 2}})] == ["prefs"]
    assert mine.search(("users",), filter={"n": {"$gt": 3}}) == []
    assert mine.list_namespaces(prefix=("users",)) == [("users", "u1")]
    assert theirs.list_namespaces() == []
    mine.delete(("users", "u1"), "prefs")
    assert mine.get(("users", "u1"), "prefs") is None


def test_a_batch_with_a_bad_namespace_runs_none_of_its_ops(
    clocked_store: tuple[Checkpointer, ClockControl],
) -> None:
    store, _ = clocked_store
    items = DurableStore(store.run_queue)
    with pytest.raises(InvalidNamespaceError):
        items.batch([PutOp(("ok",), "k", {"v": 1}), GetOp(("a.b",), "k")])
    assert items.get(("ok",), "k") is None


def test_ttl_expires_refreshes_and_sweeps(clocked_store: tuple[Checkpointer, ClockControl]) -> None:
    store, clock = clocked_store
    items = DurableStore(store.run_queue, ttl={"default_ttl": 1.0, "refresh_on_read": True})
    items.put(("t",), "default", {"v": 1})  # the config's default_ttl: 1 minute
    items.put(("t",), "forever", {"v": 2}, ttl=None)
    clock.advance(timedelta(seconds=40))
    assert items.get(("t",), "default") is not None  # refresh_on_read: a minute from now
    clock.advance(timedelta(seconds=40))
    assert items.get(("t",), "default", refresh_ttl=False) is not None
    clock.advance(timedelta(seconds=30))
    assert items.get(("t",), "default") is None
    assert [i.key for i in items.search(("t",))] == ["forever"]
    assert items.sweep_ttl() == 1
    assert items.sweep_ttl() == 0


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"])
def test_the_async_store_answers_async_and_sync_calls_off_its_loop(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    if backend == "postgres":  # the fixtures before the loop: they block
        request.getfixturevalue("pg_dsn")
        request.getfixturevalue("pg_schema")

    async def main() -> None:
        opened = await _opened(backend, request, tmp_path)
        try:
            items = AsyncDurableStore(opened.run_queue)
            await items.aput(("a",), "k", {"v": 1})
            found = await items.abatch([GetOp(("a",), "k"), SearchOp(("a",))])
            assert found[0] is not None and found[0].value == {"v": 1}  # type: ignore[union-attr]
            got = await asyncio.to_thread(items.get, ("a",), "k")
            assert got is not None and got.value == {"v": 1}
            with pytest.raises(asyncio.InvalidStateError):
                items.get(("a",), "k")  # on its own loop: it would block the loop
            many = [items.aput(("b",), f"k{i}", {"i": i}) for i in range(200)]
            await asyncio.gather(*many)
            assert len(await items.asearch(("b",), limit=1000)) == 200
        finally:
            await opened.close()

    asyncio.run(main())
