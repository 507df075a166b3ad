"""Operating the queue with real workers (SPEC §13): retry backoff stored in the entry with the
attempt's traceback, prompt cancel reaching a running handler, and the SQLite file upgrade that
carries the new columns. The store rules themselves are in testkit/contract/run_queue/operating.py.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from durable_graph import BackoffPolicy, ClaimPolicy, Commit, EntryClosed, Submission
from durable_graph.aio import AsyncInMemoryCheckpointer
from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import ValidationError
from durable_graph.core.validation import fit_error_text
from durable_graph.memory.store import InMemoryCheckpointer
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.sqlite import SCHEMA_VERSION, SqliteCheckpointer, SqliteConfig
from durable_graph.testkit import ManualClock
from durable_graph.worker.aio import AsyncRunContext, AsyncWorker
from durable_graph.worker.sync import RunContext, Worker

RENEW = 0.3
"""The workers' renewal interval here (lease ttl / 3)."""
QUICK: dict[str, Any] = {
    "lease_ttl": timedelta(seconds=3 * RENEW),
    "claim_policy": ClaimPolicy(ttl=timedelta(seconds=3), renew_every=timedelta(seconds=RENEW)),
    "poll_interval": timedelta(milliseconds=50),
}


def test_backoff_policy_grows_exponentially_under_its_cap_with_jitter_below() -> None:
    policy = BackoffPolicy(base=timedelta(seconds=1), factor=2.0, cap=timedelta(seconds=5))
    assert [policy.delay(n, 0.0) for n in (1, 2, 3, 4)] == [
        timedelta(seconds=s) for s in (1, 2, 4, 5)
    ]
    # Equal jitter by default: a random half of the wait is taken off, never more.
    assert policy.delay(2, 0.999) > timedelta(seconds=1)
    assert policy.delay(2, 0.5) == timedelta(seconds=1.5)


def test_worker_refuses_a_bad_backoff_naming_it() -> None:
    with pytest.raises(ValidationError, match=r"backoff\.jitter"):
        Worker(InMemoryCheckpointer(), lambda ctx: None, backoff=BackoffPolicy(jitter=2.0))


@pytest.fixture(params=["memory", "sqlite"])
def clocked(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[Checkpointer, ManualClock]]:
    clock = ManualClock()
    store: Checkpointer = (
        InMemoryCheckpointer(clock=clock)
        if request.param == "memory"
        else SqliteCheckpointer.open(tmp_path / "s.db", clock=clock)
    )
    yield store, clock
    store.close()


def test_failed_attempt_waits_its_backoff_in_the_entry_with_its_traceback(
    clocked: tuple[Checkpointer, ManualClock],
) -> None:
    store, clock = clocked
    calls: list[int] = []

    def flaky(ctx: RunContext) -> Any:
        calls.append(ctx.attempt)
        if ctx.attempt == 1:
            raise RuntimeError("boom on the first try")
        return "fine"

    backoff = BackoffPolicy(base=timedelta(seconds=10), jitter=0.0)
    worker = Worker(store, flaky, backoff=backoff, **QUICK)
    entry_id = store.run_queue.submit(Submission("t1", "go")).entry_id
    first = worker.run_once()
    assert first is not None and first.note == "retry"
    entry = store.run_queue.entry(entry_id)
    assert entry is not None and entry.not_before is not None
    assert entry.not_before == entry.attempts[0].started_at + timedelta(seconds=10)
    error = entry.attempts[0].error
    assert error is not None and "Traceback" in error
    assert "RuntimeError: boom on the first try" in error
    # Held back: no worker takes it before its not_before.
    assert Worker(store, flaky, **QUICK).run_once() is None
    clock.advance(timedelta(seconds=10))
    second = worker.run_once()
    assert second is not None and second.note == "completed" and calls == [1, 2]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def real_time_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Checkpointer]:
    store: Checkpointer
    if request.param == "memory":
        store = InMemoryCheckpointer()
    elif request.param == "sqlite":
        store = SqliteCheckpointer.open(tmp_path / "s.db")
    else:
        dsn = request.getfixturevalue("pg_dsn")
        store = PostgresCheckpointer.open(
            dsn, PostgresConfig(schema=request.getfixturevalue("pg_schema"))
        )
    yield store
    store.close()


def _wait(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_cancel_reaches_a_running_handler_within_one_renewal(
    real_time_store: Checkpointer,
) -> None:
    store = real_time_store
    steps: list[float] = []
    seen: dict[str, Any] = {}

    def reached(ctx: RunContext, i: int) -> bool:
        """Whether the cancel has reached the handler: its renewal found the entry closed
        (``ctx.cancelled``), or, when the step's write came first, the store refused the write
        (SPEC §19.1) — which of the two is first is a race of a few milliseconds."""
        if ctx.cancelled:
            return True
        try:
            ctx.commit({"step": i}, next=("more",))
        except EntryClosed:
            return True
        return False

    def slow(ctx: RunContext) -> Any:
        for i in range(100):  # one step per 0.2 s
            if reached(ctx, i):
                seen["noticed"] = time.monotonic()
                # Its claim is given back and its entry is closed: even a write that bypasses the
                # context raises, and says why (SPEC §19.1: EntryClosed before ClaimLost).
                _wait(lambda: store.thread(ctx.thread_id).claim_holder is None, 2.0)  # type: ignore[union-attr]
                assert ctx.head is not None
                try:
                    store.commit(
                        ctx.claim,
                        Commit(f"late-{i}", ctx.head.checkpoint_id, ctx.run_id, {"late": i}),
                    )
                except EntryClosed:
                    seen["entry_closed"] = True
                return None
            steps.append(time.monotonic())
            time.sleep(0.2)
        return "ran to the end"

    entry_id = store.run_queue.submit(Submission("t-long", "go")).entry_id
    worker = Worker(store, slow, **QUICK)
    runner = threading.Thread(target=worker.run_once)
    runner.start()
    assert _wait(lambda: len(steps) >= 3, 10.0)
    store.run_queue.cancel(entry_id)
    cancelled_at = time.monotonic()
    runner.join(10.0)
    assert not runner.is_alive()
    assert "noticed" in seen and seen.get("entry_closed") is True
    # Within one renewal interval, plus the step the handler was sleeping in, plus slack.
    assert seen["noticed"] - cancelled_at <= RENEW + 0.2 + 0.4
    assert len([t for t in steps if t > cancelled_at]) <= 3


def test_cancel_wakes_a_sync_handler_waiting_on_its_context_and_logs_cancelled(
    real_time_store: Checkpointer, caplog: pytest.LogCaptureFixture
) -> None:
    # Issue 26 item 7: a handler waiting a minute stops within one renewal of the cancel, and
    # the worker logs "cancelled" with the reason, not "lost".
    store = real_time_store
    woke: dict[str, Any] = {}

    def waits(ctx: RunContext) -> Any:
        ctx.commit({"step": 0}, next=("more",))
        woke["cancelled"] = ctx.wait_cancelled(60.0)
        woke["at"] = time.monotonic()
        return "ran to the end"

    entry_id = store.run_queue.submit(Submission("t-wait", "go")).entry_id
    worker = Worker(store, waits, **QUICK)
    reports: list[Any] = []
    runner = threading.Thread(target=lambda: reports.append(worker.run_once()))
    caplog.set_level("INFO", logger="durable_graph.worker")
    runner.start()
    assert _wait(lambda: store.get("t-wait") is not None, 10.0)
    store.run_queue.cancel(entry_id)
    cancelled_at = time.monotonic()
    runner.join(10.0)
    assert not runner.is_alive()
    assert woke["cancelled"] is True and woke["at"] - cancelled_at <= RENEW + 0.5
    assert reports[0].note == "cancelled"
    lines = [r.getMessage() for r in caplog.records if f"entry {entry_id} " in r.getMessage()]
    assert any("cancelled" in m and "(requested)" in m for m in lines), lines


def test_cancel_cancels_an_async_handlers_task_and_logs_cancelled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> tuple[Any, float, bool]:
        store = AsyncInMemoryCheckpointer()
        stopped = {"cancelled": False}

        async def sleeps(ctx: AsyncRunContext) -> Any:
            await ctx.commit({"step": 0}, next=("more",))
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                stopped["cancelled"] = True
                raise
            return "ran to the end"

        entry_id = (await store.run_queue.submit(Submission("t-sleep", "go"))).entry_id
        worker = AsyncWorker(store, sleeps, **QUICK)
        run = asyncio.ensure_future(worker.run_once())
        while await store.get("t-sleep") is None:
            await asyncio.sleep(0.02)
        await store.run_queue.cancel(entry_id)
        cancelled_at = time.monotonic()
        report = await asyncio.wait_for(run, 10.0)
        return report, time.monotonic() - cancelled_at, stopped["cancelled"]

    caplog.set_level("INFO", logger="durable_graph.worker")
    report, took, handler_cancelled = asyncio.run(scenario())
    assert handler_cancelled and took <= RENEW + 0.5
    assert report.note == "cancelled"
    assert any(
        "cancelled" in r.getMessage() and "(requested)" in r.getMessage() for r in caplog.records
    )


def _drop_versions_6_to_10(raw: sqlite3.Connection) -> None:
    """Undo what versions 6 (scheduling), 7 (workers), 8 (items), 9 (thread deletion times)
    and 10 (thread TTLs) added to a SQLite file."""
    for index in (
        "queue_entries_leased_tenant_idx",
        "queue_entries_leased_kind_idx",
        "queue_threads_lease_idx",
        "queue_threads_tenant_lease_idx",
    ):
        raw.execute(f"DROP INDEX {index}")
    raw.execute("DROP TABLE queue_limits")
    raw.execute("DROP TABLE schedules")
    raw.execute("DROP TABLE workers")  # version 7's (migrate_v7.sql)
    raw.execute("DROP TABLE items")  # version 8's (migrate_v8.sql)
    raw.execute("DROP TABLE item_vectors")  # version 11's (migrate_v11.sql)
    raw.execute("DROP TABLE thread_ttls")  # version 10's (migrate_v10.sql)
    for table, column in (
        ("queue_entries", "priority"),
        ("queue_entries", "kind"),
        ("queue_threads", "head_priority_key"),
        ("queue_threads", "head_kind"),
        ("threads", "deleted_at"),  # version 9's (migrate_v9.sql)
    ):
        raw.execute(f"ALTER TABLE {table} DROP COLUMN {column}")


def test_a_version_2_sqlite_file_gains_the_operating_columns(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store = SqliteCheckpointer.open(path)
    entry_id = store.run_queue.submit(Submission("t1", {"x": 1})).entry_id
    store.close()
    with sqlite3.connect(path) as raw:  # what version 2 had: none of the version-3 columns
        raw.execute("DROP INDEX queue_entries_listing_idx")  # nor the version-6 ones
        raw.execute("DROP INDEX queue_entries_retry_of_idx")
        raw.execute("ALTER TABLE queue_entries DROP COLUMN open_since")
        raw.execute("ALTER TABLE queue_entries DROP COLUMN list_after")
        raw.execute("ALTER TABLE queue_entries DROP COLUMN not_before")
        raw.execute("ALTER TABLE queue_entries DROP COLUMN retry_of")
        raw.execute("ALTER TABLE queue_attempts DROP COLUMN error")
        _drop_versions_6_to_10(raw)  # ... nor the version-6 ones (SPEC §15, migrate_v5.sql)
        raw.execute("ALTER TABLE pending_writes DROP COLUMN task_path")  # version 5's
        raw.execute("PRAGMA user_version = 2")
    store = SqliteCheckpointer.open(path)
    try:
        queue = store.run_queue
        lease = queue.lease("w", timedelta(seconds=30), run_id="run-1")
        assert lease is not None and lease.entry.entry_id == entry_id
        failed = queue.defer(lease, timedelta(0), error="kept")
        assert failed.attempts[0].error == "kept"
    finally:
        store.close()
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 12


def test_a_traceback_over_the_stores_value_limit_still_defers_the_entry(tmp_path: Path) -> None:
    clock = ManualClock()
    store = SqliteCheckpointer.open(tmp_path / "s.db", SqliteConfig(max_value_bytes=64), clock)
    try:

        def raising(ctx: RunContext) -> Any:
            raise RuntimeError("x" * 200)

        worker = Worker(store, raising, backoff=BackoffPolicy(jitter=0.0), **QUICK)
        entry_id = store.run_queue.submit(Submission("t1", "go")).entry_id
        report = worker.run_once()
        assert report is not None and report.note == "retry"
        entry = store.run_queue.entry(entry_id)
        assert entry is not None and entry.attempts[0].error is None
        assert entry.not_before == entry.attempts[0].started_at + timedelta(seconds=1)
    finally:
        store.close()


async def _async_cancel_reaches_the_handler() -> dict[str, Any]:
    seen: dict[str, Any] = {"steps": []}
    async with AsyncInMemoryCheckpointer() as store:

        async def slow(ctx: AsyncRunContext) -> Any:
            # The worker cancels the task (issue 26 item 7): the CancelledError may arrive in
            # the sleep or in a commit, and a commit made after the cancel is refused; either
            # way the handler has noticed, so the whole loop is watched.
            try:
                for i in range(100):
                    if ctx.cancelled:
                        seen["noticed"] = time.monotonic()
                        return None
                    await ctx.commit({"step": i}, next=("more",))
                    seen["steps"].append(time.monotonic())
                    await asyncio.sleep(0.2)
            except BaseException:
                seen["noticed"] = time.monotonic()
                raise
            return "ran to the end"

        entry_id = (await store.run_queue.submit(Submission("t-long", "go"))).entry_id
        run = asyncio.create_task(AsyncWorker(store, slow, **QUICK).run_once())
        while len(seen["steps"]) < 3:
            await asyncio.sleep(0.01)
        await store.run_queue.cancel(entry_id)
        seen["cancelled_at"] = time.monotonic()
        await asyncio.wait_for(run, 10.0)
    return seen


def test_cancel_reaches_a_running_async_handler_within_one_renewal() -> None:
    seen = asyncio.run(_async_cancel_reaches_the_handler())
    assert seen["noticed"] - seen["cancelled_at"] <= RENEW + 0.2 + 0.4


async def _async_backoff() -> tuple[Any, Any]:
    clock = ManualClock()
    async with AsyncInMemoryCheckpointer(clock=clock) as store:

        async def raising(ctx: AsyncRunContext) -> Any:
            raise KeyError("missing")

        backoff = BackoffPolicy(base=timedelta(seconds=4), jitter=0.0)
        entry_id = (await store.run_queue.submit(Submission("t1", "go"))).entry_id
        report = await AsyncWorker(store, raising, backoff=backoff, **QUICK).run_once()
        assert report is not None and report.note == "retry"
        return await store.run_queue.entry(entry_id), await AsyncWorker(
            store, raising, **QUICK
        ).run_once()


def test_async_worker_stores_the_backoff_and_traceback_too() -> None:
    entry, held_back = asyncio.run(_async_backoff())
    assert held_back is None
    assert entry.not_before == entry.attempts[0].started_at + timedelta(seconds=4)
    assert "KeyError: 'missing'" in entry.attempts[0].error


@pytest.mark.parametrize("limit", [2, 5, 6, 40, 1000])
def test_an_error_over_the_limit_keeps_its_end(limit: int) -> None:
    text = "Traceback ...\n" + "ü" * 300 + "\nValueError: the end"
    fitted = fit_error_text(text, limit)
    assert len(json.dumps(fitted, ensure_ascii=False).encode()) <= limit
    assert text.endswith(fitted.removeprefix("…"))
    if limit >= 1000:
        assert fitted == text
    elif limit >= 40:
        assert fitted.endswith("ValueError: the end") and fitted.startswith("…")


def test_a_version_5_sqlite_file_gains_fixed_listing_places(tmp_path: Path) -> None:
    # Issue 26 item 1: the open entries of a thread join its first open entry's stretch.
    path = tmp_path / "old.db"
    store = SqliteCheckpointer.open(path)
    a1, b2, a3 = (store.run_queue.submit(Submission(t, 1)).entry_id for t in "aba")
    store.close()
    with sqlite3.connect(path) as raw:  # what version 5 had
        raw.execute("DROP INDEX queue_entries_listing_idx")
        raw.execute("DROP INDEX queue_entries_retry_of_idx")
        raw.execute("ALTER TABLE queue_entries DROP COLUMN open_since")
        raw.execute("ALTER TABLE queue_entries DROP COLUMN list_after")
        _drop_versions_6_to_10(raw)  # and what version 6 added (migrate_v6.sql, scheduling)
        raw.execute("PRAGMA user_version = 5")
    store = SqliteCheckpointer.open(path)
    try:
        assert [e.entry_id for e in store.run_queue.open_entries()] == [a1, a3, b2]
        store.run_queue.cancel(a1)
        assert [e.entry_id for e in store.run_queue.open_entries(after=a1)] == [a3, b2]
    finally:
        store.close()
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_a_busy_sqlite_store_inside_ctx_commit_does_not_use_up_an_attempt(
    tmp_path: Path,
) -> None:
    # Issue 26 item 6: another process holds the write lock past the busy timeout while the
    # handler commits; the commit is made again within the attempt, not counted as a failure.
    path = tmp_path / "s.db"
    store = SqliteCheckpointer.open(
        path, config=SqliteConfig(busy_timeout=timedelta(milliseconds=100))
    )
    entry_id = store.run_queue.submit(Submission("t-busy", "go", max_attempts=1)).entry_id
    locked = threading.Event()
    unlock = threading.Event()

    def hold_the_write_lock() -> None:
        raw = sqlite3.connect(path, isolation_level=None)
        raw.execute("BEGIN IMMEDIATE")
        locked.set()
        unlock.wait(10)
        raw.execute("ROLLBACK")
        raw.close()

    def handler(ctx: RunContext) -> Any:
        holder = threading.Thread(target=hold_the_write_lock)
        holder.start()
        assert locked.wait(5)
        threading.Timer(1.0, unlock.set).start()  # ten busy timeouts
        ctx.commit({"done": True})
        holder.join()
        return "committed"

    try:
        worker = Worker(
            store, handler, lease_ttl=timedelta(seconds=5), poll_interval=timedelta(milliseconds=50)
        )
        report = worker.run_once()
        assert report is not None and report.note == "completed", report
        entry = store.run_queue.entry(entry_id)
        assert entry is not None and len(entry.attempts) == 1
        assert entry.outcome is not None and entry.closed
    finally:
        unlock.set()
        store.close()
