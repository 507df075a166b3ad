"""The async API (SPEC §9): the contract suites run against every async store, plus direct checks.

The suites are sync: `durable_graph.testkit.async_adapter.SyncAdapter` runs each async store on an
event loop in a background thread and exposes it as a sync `Checkpointer`, so the very same
`CheckpointerContract` / `RunQueueContract` prove the async stores behave like the sync ones.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from durable_graph import (
    ClaimLost,
    Commit,
    Completed,
    EventIn,
    Fresh,
    ProcessingError,
    StaleParent,
    Started,
    Submission,
    ThreadBusy,
    ValidationError,
    WatchPolicy,
    plan_attempt,
)
from durable_graph.aio import (
    AsyncCheckpointer,
    AsyncInMemoryCheckpointer,
    AsyncRunQueue,
    AsyncSqliteCheckpointer,
)
from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.run_queue import RunQueue
from durable_graph.postgres import PostgresConfig
from durable_graph.postgres.async_store import AsyncPostgresCheckpointer
from durable_graph.testkit import Harness, ManualClock
from durable_graph.testkit.async_adapter import SyncAdapter
from durable_graph.testkit.contract.checkpointer.suite import CheckpointerContract
from durable_graph.testkit.contract.run_queue.suite import RunQueueContract
from durable_graph.testkit.postgres.clock import PgClock
from durable_graph.testkit.postgres.schema import reset_store

SEC = timedelta(seconds=1)


def _adapted(
    factory: Callable[[], Awaitable[AsyncCheckpointer]], clock: ManualClock | PgClock
) -> Iterator[Harness]:
    adapter = SyncAdapter.open(factory)
    try:
        yield Harness(adapter, clock)
    finally:
        adapter.shutdown()


def _memory_harness() -> Iterator[Harness]:
    clock = ManualClock()

    async def factory() -> AsyncCheckpointer:
        return AsyncInMemoryCheckpointer(clock=clock)

    yield from _adapted(factory, clock)


def _sqlite_harness(path: Path) -> Iterator[Harness]:
    clock = ManualClock()

    async def factory() -> AsyncCheckpointer:
        return await AsyncSqliteCheckpointer.open(path / "store.db", clock=clock)

    yield from _adapted(factory, clock)


def _postgres_harness(pg_dsn: str, migrated: tuple[str, PgClock]) -> Iterator[Harness]:
    schema, clock = migrated
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        reset_store(conn, schema)

    async def factory() -> AsyncCheckpointer:
        config = PostgresConfig(schema=schema, auto_migrate=False)
        return await AsyncPostgresCheckpointer.open(pg_dsn, config)

    yield from _adapted(factory, clock)


class _Memory:
    @pytest.fixture
    def harness(self) -> Iterator[Harness]:
        yield from _memory_harness()


class _Sqlite:
    @pytest.fixture
    def harness(self, tmp_path: Path) -> Iterator[Harness]:
        yield from _sqlite_harness(tmp_path)


class _Postgres:
    @pytest.fixture
    def harness(self, pg_dsn: str, class_schema: tuple[str, PgClock]) -> Iterator[Harness]:
        yield from _postgres_harness(pg_dsn, class_schema)


# Each contract on each async store: the store's harness, then the contract's tests.
class TestAsyncMemoryCheckpointer(_Memory, CheckpointerContract):
    pass


class TestAsyncSqliteCheckpointer(_Sqlite, CheckpointerContract):
    pass


class TestAsyncPostgresCheckpointer(_Postgres, CheckpointerContract):
    pass


class TestAsyncMemoryRunQueue(_Memory, RunQueueContract):
    pass


class TestAsyncSqliteRunQueue(_Sqlite, RunQueueContract):
    pass


class TestAsyncPostgresRunQueue(_Postgres, RunQueueContract):
    pass


# --- direct checks, on every async store ---------------------------------------------------

AsyncFactory = Callable[[], Awaitable[AsyncCheckpointer]]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncFactory:
    """A coroutine function opening a fresh async store (run it inside the test's loop)."""
    if request.param == "memory":

        async def memory() -> AsyncCheckpointer:
            return AsyncInMemoryCheckpointer()

        return memory

    if request.param == "postgres":
        dsn: str = request.getfixturevalue("pg_dsn")
        config = PostgresConfig(schema=request.getfixturevalue("pg_schema"))

        async def postgres() -> AsyncCheckpointer:
            return await AsyncPostgresCheckpointer.open(dsn, config)

        return postgres

    async def sqlite() -> AsyncCheckpointer:
        return await AsyncSqliteCheckpointer.open(tmp_path / "store.db")

    return sqlite


def _commit(cid: str, parent: str | None, run: str = "r1", **kw: object) -> Commit:
    return Commit(checkpoint_id=cid, parent_id=parent, run_id=run, state={"n": cid}, **kw)  # type: ignore[arg-type]


def test_async_stores_implement_the_async_protocols(open_store: AsyncFactory) -> None:
    async def main() -> None:
        async with await open_store() as store:
            assert isinstance(store, AsyncCheckpointer)
            assert isinstance(store.run_queue, AsyncRunQueue)

    asyncio.run(main())


def test_adapter_presents_an_async_store_as_the_sync_protocols(open_store: AsyncFactory) -> None:
    adapter = SyncAdapter.open(open_store)
    try:
        assert isinstance(adapter, Checkpointer)
        assert isinstance(adapter.run_queue, RunQueue)
        claim = adapter.claim("t", "h")
        assert adapter.commit(claim, _commit("c1", None)).seq == 1
        assert next(iter(adapter.subscribe("t"))).kind == "store.checkpoint"
    finally:
        adapter.shutdown()


def test_worker_protocol_applies_input_once_through_the_async_api(
    open_store: AsyncFactory,
) -> None:
    async def main() -> None:
        async with await open_store() as store:
            q = store.run_queue
            ticket = await q.submit(Submission("t", {"x": 1}, key="k"))
            assert (await q.submit(Submission("t", {"x": 1}, key="k"))).existing
            lease = await q.lease("w", 30 * SEC, run_id="run-1")
            assert lease is not None and lease.attempt == Started(1)
            claim = await store.claim("t", "run-1")
            entry = await q.entry(ticket.entry_id)
            assert entry is not None
            latest = await store.latest_of_runs("t", [a.run_id for a in entry.attempts])
            assert plan_attempt(entry, latest) == Fresh()
            await store.commit(claim, _commit("c1", None, run="run-1"))
            closed = await q.close(lease, Completed({"ok": True}))
            assert closed.closed and closed.closed_at_seq == 1
            assert (await q.await_closed(ticket.entry_id, SEC)) == closed

    asyncio.run(main())


def test_store_errors_pass_through_unchanged(open_store: AsyncFactory) -> None:
    async def main() -> None:
        async with await open_store() as store:
            claim = await store.claim("t", "h")
            with pytest.raises(ThreadBusy, match=r"^thread has a live claim$"):
                await store.claim("t", "other")
            await store.release_claim(claim)
            with pytest.raises(ClaimLost):
                await store.renew_claim(claim)
            with pytest.raises(ValidationError, match=r'commit.state\["a"\]'):
                await store.commit(claim, Commit("c1", None, "r1", state={"a": float("inf")}))
            with pytest.raises(ValidationError, match="timeout"):
                await store.await_events_after("t", 0, 5)  # type: ignore[arg-type]
            with pytest.raises(ValidationError, match="thread_id"):
                store.subscribe("")

    asyncio.run(main())


def test_await_events_after_wakes_on_append_without_blocking_the_loop(
    open_store: AsyncFactory,
) -> None:
    async def main() -> None:
        async with await open_store() as store:
            claim = await store.claim("t", "h")
            await store.commit(claim, _commit("c1", None))
            assert await store.await_events_after("t", 1, timedelta(0)) == []
            ticks = 0

            async def ticker() -> None:
                nonlocal ticks
                while True:
                    await asyncio.sleep(0.005)
                    ticks += 1

            async def append_later() -> None:
                await asyncio.sleep(0.2)
                await store.append_events(claim, [EventIn("x")])

            tick_task = asyncio.create_task(ticker())
            append_task = asyncio.create_task(append_later())
            started = time.monotonic()
            events = await store.await_events_after("t", 1, timedelta(seconds=5))
            elapsed = time.monotonic() - started
            tick_task.cancel()
            await append_task
            assert [e.kind for e in events] == ["x"]
            assert 0.15 < elapsed < 2
            assert ticks >= 10  # the loop kept running while the call waited

    asyncio.run(main())


def test_a_write_in_this_process_wakes_waits_long_before_their_poll_interval(
    open_store: AsyncFactory,
) -> None:
    """SPEC §11: in-process waits wake at once on every store (SQLite's and the in-memory
    store's async waits used to sleep their whole poll interval)."""

    async def main() -> None:
        async with await open_store() as store:
            claim = await store.claim("t", "h")
            await store.commit(claim, _commit("c1", None))
            slow = WatchPolicy(poll_interval=timedelta(seconds=60))

            async def append_later(kind: str) -> None:
                await asyncio.sleep(0.1)
                await store.append_events(claim, [EventIn(kind)])

            writer = asyncio.create_task(append_later("x"))
            started = time.monotonic()
            events = await store.await_events_after("t", 1, timedelta(seconds=30), slow)
            assert [e.kind for e in events] == ["x"]
            assert time.monotonic() - started < 10
            await writer

            events_of = store.subscribe("t", after_seq=2, watch=slow)
            writer = asyncio.create_task(append_later("y"))
            started = time.monotonic()
            assert (await asyncio.wait_for(anext(events_of), 30)).kind == "y"
            assert time.monotonic() - started < 10
            await writer

    asyncio.run(main())


def test_subscribe_yields_new_events_in_order_and_fails_after_close(
    open_store: AsyncFactory,
) -> None:
    async def main() -> None:
        store = await open_store()
        claim = await store.claim("t", "h")
        await store.commit(claim, _commit("c1", None))
        events = store.subscribe("t", watch=_fast_watch())
        assert (await anext(events)).seq == 1

        async def later() -> None:
            await asyncio.sleep(0.05)
            await store.append_events(claim, [EventIn("x"), EventIn("y")])

        writer = asyncio.create_task(later())
        assert (await anext(events)).kind == "x"
        await writer
        await store.close()
        with pytest.raises(ProcessingError):
            await anext(events)  # "y" was read but the store is closed: rule 8
        await store.close()  # idempotent
        with pytest.raises(ProcessingError):
            await store.get("t")
        with pytest.raises(ProcessingError):
            await store.run_queue.submit(Submission("t", None))
        with pytest.raises(ProcessingError):
            store.subscribe("t")

    asyncio.run(main())


def _fast_watch() -> WatchPolicy:
    return WatchPolicy(poll_interval=timedelta(milliseconds=10))


def test_await_closed_wakes_when_another_task_cancels_the_entry(open_store: AsyncFactory) -> None:
    async def main() -> None:
        async with await open_store() as store:
            q = store.run_queue
            entry_id = (await q.submit(Submission("t", 1))).entry_id
            assert await q.await_closed(entry_id, timedelta(0)) is None
            assert await q.await_closed(entry_id, timedelta(0), tenant="other") is None

            async def cancel_later() -> None:
                await asyncio.sleep(0.05)
                await q.cancel(entry_id)

            canceller = asyncio.create_task(cancel_later())
            closed = await q.await_closed(entry_id, 5 * SEC)
            await canceller
            assert closed is not None and closed.closed

    asyncio.run(main())


def test_cancellation_requested_before_a_call_is_raised_and_nothing_is_written(
    open_store: AsyncFactory,
) -> None:
    async def main() -> None:
        async with await open_store() as store:

            async def claim_after_cancel() -> None:
                task = asyncio.current_task()
                assert task is not None
                task.cancel()  # requested before the call starts
                await store.claim("t", "h")

            with pytest.raises(asyncio.CancelledError):
                await asyncio.create_task(claim_after_cancel())
            # the claim was never taken: another holder gets it at once
            claim = await store.claim("t", "other")
            assert claim.holder == "other"

    asyncio.run(main())


def test_cancelled_commits_are_all_or_nothing_and_the_store_stays_usable(
    open_store: AsyncFactory,
) -> None:
    async def main() -> None:
        async with await open_store() as store:
            claim = await store.claim("t", "h")
            head = None
            cancelled = 0
            for i in range(60):
                commit = _commit(f"c{i}", head, events=tuple(EventIn("e", j) for j in range(5)))
                task = asyncio.create_task(store.commit(claim, commit))
                await asyncio.sleep(0.0005 * (i % 4))
                task.cancel()
                try:
                    head = (await task).checkpoint_id
                except (asyncio.CancelledError, StaleParent) as exc:
                    # StaleParent: an earlier cancelled statement reached PostgreSQL, landed late
                    cancelled += isinstance(exc, asyncio.CancelledError)
                    current = await store.get("t")
                    head = None if current is None else current.checkpoint_id
            assert cancelled > 0
            # History first: in PostgreSQL a cancelled statement that reached the server may
            # still commit, whole, after its task ended; the events read later then include it.
            history = await store.history("t", limit=1000)
            events = await store.events_after("t", 0, limit=100_000)
            assert [e.seq for e in events] == list(range(1, len(events) + 1))
            # every commit is whole: its 5 events, then its store.checkpoint; no stray events
            kinds = "".join("c" if e.kind == "store.checkpoint" else e.kind for e in events)
            assert kinds == "eeeeec" * (len(events) // 6)
            landed = {e.payload["checkpoint_id"] for e in events if e.kind == "store.checkpoint"}  # type: ignore[index,call-overload]
            assert {c.checkpoint_id for c in history} <= landed

    asyncio.run(main())


def test_postgres_create_uses_the_callers_async_pool_and_never_closes_it(
    pg_dsn: str, pg_schema: str
) -> None:
    from psycopg_pool import AsyncConnectionPool

    config = PostgresConfig(schema=pg_schema)

    async def main() -> None:
        async with AsyncConnectionPool(
            pg_dsn, min_size=1, max_size=2, kwargs=config.connection_kwargs(), open=False
        ) as pool:
            store = await AsyncPostgresCheckpointer.create(pool, config)
            async with store:
                claim = await store.claim("t", "h")
                assert (await store.commit(claim, _commit("c1", None))).seq == 1
            with pytest.raises(ProcessingError):
                await store.get("t")
            assert not pool.closed
            async with pool.connection() as conn:
                await conn.execute("SELECT 1")
            with pytest.raises(ValidationError, match="pool"):
                await AsyncPostgresCheckpointer.create(object(), config)  # type: ignore[arg-type]

    asyncio.run(main())
