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

from durable_graph import BackoffPolicy, ClaimLost, ClaimPolicy, Commit, Submission
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

    def slow(ctx: RunContext) -> Any:
        for i in range(100):  # one step per 0.2 s
            if ctx.cancelled:
                seen["noticed"] = time.monotonic()
                # Its claim is given back: even a write that bypasses the context raises.
                _wait(lambda: store.thread(ctx.thread_id).claim_holder is None, 2.0)  # type: ignore[union-attr]
                assert ctx.head is not None
                try:
                    store.commit(
                        ctx.claim,
                        Commit(f"late-{i}", ctx.head.checkpoint_id, ctx.run_id, {"late": i}),
                    )
                except ClaimLost:
                    seen["claim_lost"] = True
                return None
            ctx.commit({"step": i}, next=("more",))
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
    assert "noticed" in seen and seen.get("claim_lost") is True
    # Within one renewal interval, plus the step the handler was sleeping in, plus slack.
    assert seen["noticed"] - cancelled_at <= RENEW + 0.2 + 0.4
    assert len([t for t in steps if t > cancelled_at]) <= 3


def test_a_version_2_sqlite_file_gains_the_operating_columns(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store = SqliteCheckpointer.open(path)
    entry_id = store.run_queue.submit(Submission("t1", {"x": 1})).entry_id
    store.close()
    with sqlite3.connect(path) as raw:  # what version 2 had: none of the version-3 columns
        raw.execute("ALTER TABLE queue_entries DROP COLUMN not_before")
        raw.execute("ALTER TABLE queue_entries DROP COLUMN retry_of")
        raw.execute("ALTER TABLE queue_attempts DROP COLUMN error")
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
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 5


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
            for i in range(100):
                if ctx.cancelled:
                    seen["noticed"] = time.monotonic()
                    return None
                await ctx.commit({"step": i}, next=("more",))
                seen["steps"].append(time.monotonic())
                await asyncio.sleep(0.2)
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
