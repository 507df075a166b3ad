"""The async worker runtime (durable_graph.worker.aio) on the three async stores.

Each test runs its own event loop (``asyncio.run``) on a fresh store: in memory, a real SQLite
file, or a fresh schema of the session's real PostgreSQL. Crashed attempts are staged with the
store's own calls (lease with a run id, claim, commit, then nothing — as a SIGKILLed worker leaves
it) and the store clock is moved past their ttls.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import threading
import time
from collections.abc import Callable, Coroutine
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from durable_graph import (
    ClaimLost,
    ClaimPolicy,
    Commit,
    Completed,
    EntryClosed,
    Failed,
    Finished,
    Fresh,
    QueueEntry,
    Resume,
    Submission,
    ThreadBusy,
    ValidationError,
)
from durable_graph.aio import AsyncCheckpointer, AsyncInMemoryCheckpointer, AsyncSqliteCheckpointer
from durable_graph.embedded.threaded import ThreadedCheckpointer
from durable_graph.postgres import PostgresConfig
from durable_graph.postgres.async_store import AsyncPostgresCheckpointer
from durable_graph.testkit import ClockControl, ManualClock
from durable_graph.testkit.postgres.clock import PgClock
from durable_graph.worker.aio import AsyncRunContext, AsyncWorker, WorkerStopped
from durable_graph.worker.sync import output_effect_key
from hooked_store import HookedStore
from worker_support import FAST

SEC = timedelta(seconds=1)


class Backend:
    """Opens the async store under test, inside the test's event loop."""

    def __init__(self, kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        self.kind = kind
        self._tmp_path = tmp_path
        self._request = request
        self._opened = 0

    async def store(self, clock: ManualClock | None = None) -> AsyncCheckpointer:
        self._opened += 1
        if self.kind == "memory":
            return AsyncInMemoryCheckpointer(clock=clock or time.time)
        if self.kind == "sqlite":
            path = self._tmp_path / f"s{self._opened}.db"
            return await AsyncSqliteCheckpointer.open(path, clock=clock or time.time)
        dsn: str = self._request.getfixturevalue("pg_dsn")
        schema: str = self._request.getfixturevalue("pg_schema")
        return await AsyncPostgresCheckpointer.open(dsn, PostgresConfig(schema=schema))

    async def clocked(self) -> tuple[AsyncCheckpointer, ClockControl]:
        """A store whose clock the test moves (PostgreSQL: `PgClock`, once the schema exists)."""
        if self.kind == "postgres":
            store = await self.store()
            dsn: str = self._request.getfixturevalue("pg_dsn")
            schema: str = self._request.getfixturevalue("pg_schema")
            return store, await asyncio.to_thread(PgClock, dsn, schema)
        clock = ManualClock()
        return await self.store(clock), clock


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return Backend(request.param, tmp_path, request)


def run(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(main())


async def _three_steps(ctx: AsyncRunContext) -> Any:
    """Commit one checkpoint per step, resuming after the last committed one."""
    steps = ["a", "b", "c"]
    start = steps.index(ctx.plan.checkpoint.next[0]) if isinstance(ctx.plan, Resume) else 0
    for i in range(start, len(steps)):
        await ctx.commit({"step": steps[i]}, next=steps[i + 1 : i + 2])
    return {"done": ctx.entry.entry_id}


async def _finish_step2(ctx: AsyncRunContext) -> Any:
    assert isinstance(ctx.plan, Resume) and ctx.plan.checkpoint.next == ("step2",)
    await ctx.commit({"step": 2})
    return "resumed"


async def _must_not_run(ctx: AsyncRunContext) -> Any:
    raise AssertionError("the handler must not run")


async def _stage_crash(
    store: AsyncCheckpointer, clock: ClockControl, *, commits: list[tuple[str, ...]]
) -> int:
    """Submit an entry and leave an attempt as a killed worker would: leased, claimed, committed."""
    queue = store.run_queue
    ticket = await queue.submit(Submission("t1", {"x": 1}, max_attempts=3))
    assert await queue.lease("crashed-worker", 5 * SEC, run_id="run-1") is not None
    claim = await store.claim("t1", "run-1", ClaimPolicy(ttl=5 * SEC, renew_every=SEC))
    parent = None
    for i, nxt in enumerate(commits):
        cp = await store.commit(claim, Commit(f"cp-{i}", parent, "run-1", {"i": i}, next=nxt))
        parent = cp.checkpoint_id
    await asyncio.to_thread(clock.advance, 10 * SEC)  # both the lease and the claim expire
    return ticket.entry_id


async def _wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.01)


async def _closed(store: AsyncCheckpointer, entry_id: int) -> QueueEntry:
    entry = await store.run_queue.await_closed(entry_id, 15 * SEC)
    assert entry is not None, f"entry {entry_id} did not close"
    return entry


# --- many attempts, one loop --------------------------------------------------------------


def test_many_attempts_overlap_on_one_event_loop(backend: Backend) -> None:
    async def main() -> None:
        async with await backend.store() as store:
            tickets = [await store.run_queue.submit(Submission(f"t{i}", i)) for i in range(20)]
            active = 0
            most = 0
            loop_threads: set[int] = set()

            async def handler(ctx: AsyncRunContext) -> Any:
                nonlocal active, most
                loop_threads.add(threading.get_ident())
                active += 1
                most = max(most, active)
                await asyncio.sleep(0.3)
                active -= 1
                await ctx.commit({"i": ctx.input})
                return ctx.input

            worker = AsyncWorker(store, handler, concurrency=8, **FAST)
            threads_before = set(threading.enumerate())
            started = time.monotonic()
            runner = asyncio.create_task(worker.run())
            closed = [await _closed(store, t.entry_id) for t in tickets]
            elapsed = time.monotonic() - started
            worker.stop()
            await runner
            assert [e.outcome for e in closed] == [Completed(i) for i in range(20)]
            assert most == 8  # never more than `concurrency`, and that many at once
            assert elapsed < 20 * 0.3 / 2  # far below the serial time
            assert loop_threads == {threading.get_ident()}  # every handler ran on this loop
            if backend.kind == "postgres":  # native asyncio: the worker started no thread
                assert set(threading.enumerate()) <= threads_before

    run(main)


def test_commits_chain_parent_ids_from_the_thread_head(backend: Backend) -> None:
    async def main() -> None:
        async with await backend.store() as store:
            first = await store.run_queue.submit(Submission("t1", 1))
            await store.run_queue.submit(Submission("t1", 2))
            worker = AsyncWorker(store, _three_steps, **FAST)
            report = await worker.run_once()
            assert report is not None and report.plan == Fresh() and report.note == "completed"
            assert (await worker.run_once()) is not None
            assert (await worker.run_once()) is None
            entry = await store.run_queue.entry(first.entry_id)
            assert entry is not None and entry.outcome == Completed({"done": first.entry_id})
            history = list(reversed(await store.history("t1")))
            assert len(history) == 6 and history[0].parent_id is None
            for parent, child in itertools.pairwise(history):
                assert child.parent_id == parent.checkpoint_id

    run(main)


def test_renewal_keeps_a_long_attempt_alive_past_its_ttl(backend: Backend) -> None:
    async def main() -> None:
        async with await backend.store() as store:
            queue = store.run_queue
            ticket = await queue.submit(Submission("t1", None))
            thief_leases: list[object] = []

            async def slow(ctx: AsyncRunContext) -> Any:
                await ctx.commit({"n": 0}, next=["more"])
                for _ in range(3):  # 3 x 0.6 s = three ttls
                    await asyncio.sleep(0.6)
                    thief_leases.append(await queue.lease("thief", 5 * SEC))
                    with pytest.raises(ThreadBusy):
                        await store.claim("t1", "thief")
                    assert not ctx.cancelled
                await ctx.commit({"n": 1})
                return "ok"

            report = await AsyncWorker(store, slow, **FAST).run_once()
            assert report is not None and report.note == "completed"
            assert thief_leases == [None, None, None]
            entry = await queue.entry(ticket.entry_id)
            assert entry is not None and entry.outcome == Completed("ok")
            assert len(entry.attempts) == 1

    run(main)


# --- failures, exhaustion, crashes ---------------------------------------------------------


def test_handler_exception_is_retried_then_closes_failed(backend: Backend) -> None:
    async def main() -> None:
        async with await backend.store() as store:
            queue = store.run_queue
            ticket = await queue.submit(Submission("t1", None, max_attempts=2))

            async def boom(ctx: AsyncRunContext) -> Any:
                raise RuntimeError(f"boom {ctx.attempt}")

            worker = AsyncWorker(store, boom, **FAST)
            first = await worker.run_once()
            assert first is not None and first.note == "retry"
            entry = await queue.entry(ticket.entry_id)
            assert entry is not None and not entry.closed and entry.lease_holder is None
            assert await store.thread("t1") is None  # nothing committed, no claim left behind
            second = await worker.run_once()
            assert second is not None and second.note == "failed"
            entry = await queue.entry(ticket.entry_id)
            assert entry is not None and isinstance(entry.outcome, Failed)
            assert entry.outcome.error.startswith("Traceback")
            assert entry.outcome.error.endswith("RuntimeError: boom 2")
            assert entry.attempts[-1].error == entry.outcome.error

    run(main)


def test_exhausted_entry_closes_failed(backend: Backend) -> None:
    async def main() -> None:
        store, clock = await backend.clocked()
        async with store:
            queue = store.run_queue
            ticket = await queue.submit(Submission("t1", None, max_attempts=1))
            assert await queue.lease("crashed-worker", 5 * SEC, run_id="run-1") is not None
            await asyncio.to_thread(clock.advance, 10 * SEC)
            report = await AsyncWorker(store, _must_not_run, **FAST).run_once()
            assert report is not None and report.note == "failed"
            entry = await queue.entry(ticket.entry_id)
            assert entry is not None and entry.outcome == Failed("exhausted")

    run(main)


def test_resume_after_a_crashed_attempt(backend: Backend) -> None:
    async def main() -> None:
        store, clock = await backend.clocked()
        async with store:
            entry_id = await _stage_crash(store, clock, commits=[("b",)])
            plans: list[object] = []

            async def handler(ctx: AsyncRunContext) -> Any:
                plans.append(ctx.plan)
                await ctx.commit({"step": "b"})
                return "resumed"

            report = await AsyncWorker(store, handler, **FAST).run_once()
            assert report is not None and report.note == "completed" and report.attempt == 2
            assert isinstance(plans[0], Resume) and plans[0].checkpoint.checkpoint_id == "cp-0"
            head = await store.get("t1")
            assert head is not None and head.parent_id == "cp-0" and head.run_id == report.run_id
            entry = await store.run_queue.entry(entry_id)
            assert entry is not None and entry.outcome == Completed("resumed")

    run(main)


def test_finished_run_is_not_applied_again(backend: Backend) -> None:
    async def main() -> None:
        store, clock = await backend.clocked()
        async with store:
            entry_id = await _stage_crash(store, clock, commits=[("b",), ()])
            report = await AsyncWorker(store, _must_not_run, **FAST).run_once()
            assert report is not None and report.note == "completed"
            assert isinstance(report.plan, Finished)
            assert len(await store.history("t1")) == 2
            entry = await store.run_queue.entry(entry_id)
            assert entry is not None and entry.outcome == Completed(None)

    run(main)


def test_finished_run_closes_with_its_recorded_output(backend: Backend) -> None:
    async def main() -> None:
        store, clock = await backend.clocked()
        async with store:
            queue = store.run_queue
            ticket = await queue.submit(Submission("t1", None, max_attempts=1))
            assert await queue.lease("crashed-worker", 5 * SEC, run_id="run-1") is not None
            claim = await store.claim("t1", "run-1")
            await store.commit(claim, Commit("cp-0", None, "run-1", {"done": True}))
            key = output_effect_key(ticket.entry_id)
            await store.record_effect(claim, key, "the output", run_id="run-1")
            await asyncio.to_thread(clock.advance, 60 * SEC)
            report = await AsyncWorker(store, _must_not_run, **FAST).run_once()
            assert report is not None and report.note == "completed"  # exhausted, yet finished
            entry = await queue.entry(ticket.entry_id)
            assert entry is not None and entry.outcome == Completed("the output")

    run(main)


def test_cancelled_entry_is_seen_by_the_handler_and_its_claim_released(backend: Backend) -> None:
    async def main() -> None:
        async with await backend.store() as store:
            queue = store.run_queue
            ticket = await queue.submit(Submission("t1", None))
            errors: list[BaseException] = []

            async def looping(ctx: AsyncRunContext) -> Any:
                await ctx.commit({"n": 0}, next=["loop"])
                await queue.cancel(ticket.entry_id)
                try:
                    await _wait_until(lambda: ctx.cancelled)
                except asyncio.CancelledError:  # the worker cancels the task (issue 26 item 7)
                    assert ctx.cancelled
                    try:
                        await ctx.commit({"n": 1})
                    except EntryClosed as exc:
                        errors.append(exc)
                    raise
                return "not reached"

            report = await AsyncWorker(store, looping, **FAST).run_once()
            assert report is not None and report.note == "cancelled"
            assert errors and isinstance(errors[0], EntryClosed)
            info = await store.thread("t1")
            assert info is not None and info.claim_holder is None

    run(main)


def test_busy_thread_is_waited_for_without_burning_attempts(backend: Backend) -> None:
    async def main() -> None:
        async with await backend.store() as store:
            ticket = await store.run_queue.submit(Submission("t1", None, max_attempts=1))
            short = ClaimPolicy(
                ttl=timedelta(milliseconds=400), renew_every=timedelta(milliseconds=100)
            )
            await store.claim("t1", "someone-else", short)  # live, never renewed
            report = await AsyncWorker(store, _three_steps, **FAST).run_once()
            assert report is not None and report.note == "completed"
            entry = await store.run_queue.entry(ticket.entry_id)
            assert entry is not None and entry.outcome == Completed({"done": ticket.entry_id})
            assert len(entry.attempts) == 1

    run(main)


def test_thread_deleted_entry_is_skipped(backend: Backend) -> None:
    async def main() -> None:
        async with await backend.store() as store:
            ticket = await store.run_queue.submit(Submission("t1", None))
            assert await store.delete_thread("t1") is False  # no commit, but the entry is marked
            report = await AsyncWorker(store, _must_not_run, **FAST).run_once()
            assert report is not None and report.note == "thread_deleted"
            entry = await store.run_queue.entry(ticket.entry_id)
            assert entry is not None and entry.closed

    run(main)


def test_invalid_output_closes_failed_without_retry(backend: Backend) -> None:
    async def main() -> None:
        async with await backend.store() as store:
            ticket = await store.run_queue.submit(Submission("t1", None))

            async def bad(ctx: AsyncRunContext) -> Any:
                return {"when": object()}

            report = await AsyncWorker(store, bad, **FAST).run_once()
            assert report is not None and report.note == "failed"
            entry = await store.run_queue.entry(ticket.entry_id)
            assert entry is not None and isinstance(entry.outcome, Failed)
            assert "invalid output" in entry.outcome.error and len(entry.attempts) == 1

    run(main)


def test_record_effect_runs_an_async_function_once_across_attempts(backend: Backend) -> None:
    async def main() -> None:
        async with await backend.store() as store:
            await store.run_queue.submit(Submission("t1", None, max_attempts=2))
            calls: list[int] = []

            async def pay() -> int:
                calls.append(1)
                return len(calls)

            async def handler(ctx: AsyncRunContext) -> Any:
                if ctx.head is None:
                    await ctx.commit({"start": True}, next=["act"])
                value = await ctx.record_effect("pay", pay)
                if ctx.attempt == 1:
                    raise RuntimeError("crash after the effect")
                await ctx.commit({"paid": value})
                return value

            worker = AsyncWorker(store, handler, **FAST)
            first = await worker.run_once()
            assert first is not None and first.note == "retry"
            report = await worker.run_once()
            assert report is not None and report.outcome == Completed(1)
            assert calls == [1]

    run(main)


# --- stopping ------------------------------------------------------------------------------


def test_stop_lets_running_attempts_finish(backend: Backend) -> None:
    async def main() -> None:
        async with await backend.store() as store:
            ticket = await store.run_queue.submit(Submission("t1", None))
            started = asyncio.Event()

            async def handler(ctx: AsyncRunContext) -> Any:
                started.set()
                await asyncio.sleep(0.4)
                await ctx.commit({"done": True})
                return "finished"

            worker = AsyncWorker(store, handler, shutdown_deadline=10 * SEC, **FAST)
            runner = asyncio.create_task(worker.run())
            await asyncio.wait_for(started.wait(), 5)
            worker.stop()
            await asyncio.wait_for(runner, 5)
            entry = await store.run_queue.entry(ticket.entry_id)
            assert entry is not None and entry.outcome == Completed("finished")

    run(main)


def test_stop_wakes_an_idle_worker_at_once(backend: Backend) -> None:
    async def main() -> None:
        async with await backend.store() as store:
            worker = AsyncWorker(
                store, _must_not_run, **{**FAST, "poll_interval": timedelta(seconds=30)}
            )
            runner = asyncio.create_task(worker.run())
            await asyncio.sleep(0.2)  # the worker polled once and sleeps for ~30 s
            stopped = time.monotonic()
            worker.stop()
            await asyncio.wait_for(runner, 5)
            assert time.monotonic() - stopped < 1

    run(main)


def test_stop_cancels_attempts_past_the_deadline_and_releases_them(backend: Backend) -> None:
    async def main() -> None:
        async with await backend.store() as store:
            queue = store.run_queue
            first = await queue.submit(Submission("t1", None))
            contexts: list[AsyncRunContext] = []
            cancelled = asyncio.Event()
            errors: list[BaseException] = []

            async def stuck(ctx: AsyncRunContext) -> Any:
                contexts.append(ctx)
                await ctx.commit({"step": 1}, next=["step2"])
                try:
                    await asyncio.sleep(30)
                except asyncio.CancelledError:
                    cancelled.set()
                    try:  # a handler that tries to write anyway is refused
                        await ctx.commit({"step": 2})
                    except ClaimLost as exc:
                        errors.append(exc)
                    raise
                return "late"

            worker = AsyncWorker(
                store, stuck, shutdown_deadline=timedelta(milliseconds=300), **FAST
            )
            runner = asyncio.create_task(worker.run())
            await _wait_until(lambda: bool(contexts) and contexts[0].head is not None)
            worker.stop()
            second = await queue.submit(Submission("t2", None))
            await asyncio.wait_for(runner, 5)

            assert cancelled.is_set() and contexts[0].cancelled
            assert errors and isinstance(errors[0], WorkerStopped)
            entry = await queue.entry(first.entry_id)
            assert entry is not None and not entry.closed and entry.lease_holder is None
            info = await store.thread("t1")
            assert info is not None and info.claim_holder is None
            later = await queue.entry(second.entry_id)  # nothing was leased after stop()
            assert later is not None and later.attempts == () and later.lease_holder is None
            # Another worker resumes the released entry from its checkpoint, at once.
            report = await AsyncWorker(store, _finish_step2, **FAST).run_once()
            assert report is not None and report.entry_id == first.entry_id
            assert isinstance(report.plan, Resume) and report.note == "completed"

    run(main)


def test_cancelling_run_releases_running_attempts_and_reraises(backend: Backend) -> None:
    async def main() -> None:
        async with await backend.store() as store:
            queue = store.run_queue
            ticket = await queue.submit(Submission("t1", None))
            in_handler = asyncio.Event()

            async def forever(ctx: AsyncRunContext) -> Any:
                await ctx.commit({"step": 1}, next=["step2"])
                in_handler.set()
                await asyncio.sleep(30)

            worker = AsyncWorker(store, forever, **FAST)
            runner = asyncio.create_task(worker.run())
            await asyncio.wait_for(in_handler.wait(), 5)
            runner.cancel()
            with pytest.raises(asyncio.CancelledError):
                await runner
            assert worker.running_attempts == 0
            entry = await queue.entry(ticket.entry_id)
            assert entry is not None and not entry.closed and entry.lease_holder is None
            info = await store.thread("t1")
            assert info is not None and info.claim_holder is None

    run(main)


# --- configuration and signals (backend-independent) ---------------------------------------


def test_handler_must_be_an_async_function() -> None:
    store = AsyncInMemoryCheckpointer()

    def sync_handler(ctx: AsyncRunContext) -> None:
        return None

    with pytest.raises(ValidationError, match="async"):
        AsyncWorker(store, sync_handler)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="concurrency"):
        AsyncWorker(store, _three_steps, concurrency=0)
    with pytest.raises(ValidationError, match="lease_ttl"):
        AsyncWorker(store, _three_steps, lease_ttl=30)  # type: ignore[arg-type]


@pytest.mark.usefixtures("restore_signals")
def test_sigterm_stops_a_worker_with_signal_handlers_installed() -> None:
    async def main() -> None:
        async with AsyncInMemoryCheckpointer() as store:
            ticket = await store.run_queue.submit(Submission("t1", None))
            started = asyncio.Event()

            async def handler(ctx: AsyncRunContext) -> Any:
                started.set()
                await asyncio.sleep(0.3)
                await ctx.commit({"done": True})
                return "finished"

            worker = AsyncWorker(store, handler, install_signal_handlers=True, **FAST)
            runner = asyncio.create_task(worker.run())
            await asyncio.wait_for(started.wait(), 5)
            os.kill(os.getpid(), signal.SIGTERM)
            await asyncio.wait_for(runner, 5)
            assert worker.stopping
            entry = await store.run_queue.entry(ticket.entry_id)
            assert entry is not None and entry.outcome == Completed("finished")
        assert signal.getsignal(signal.SIGTERM) is not None  # the previous handler is back

    run(main)


# --- the attempt flow's three former drifts (the same tests as for the sync Worker) ---------


def _counting(calls: list[str]) -> Callable[[AsyncRunContext], Coroutine[Any, Any, Any]]:
    async def handler(ctx: AsyncRunContext) -> Any:
        calls.append(ctx.run_id)
        return "ran"

    return handler


def test_handler_is_not_called_once_the_lease_was_lost_before_it_starts() -> None:
    async def main() -> None:
        inner = HookedStore()
        store = ThreadedCheckpointer(inner)
        ticket = await store.run_queue.submit(Submission("t1", None))
        # Busy at begin_attempt (until it expires), so the worker claims with `claim_attempt`:
        # the hook runs after that call, right before the handler would start.
        inner.claim(
            "t1",
            "someone-else",
            ClaimPolicy(timedelta(milliseconds=300), timedelta(milliseconds=100)),
        )

        def cancel_and_let_the_renewal_notice() -> None:  # runs in a worker thread
            inner.run_queue.cancel(ticket.entry_id)
            time.sleep(1.0)  # several renewals (every 150 ms): the keeper has seen EntryClosed

        inner.before_handler = cancel_and_let_the_renewal_notice
        calls: list[str] = []
        report = await AsyncWorker(store, _counting(calls), **FAST).run_once()
        assert report is not None and report.note == "lost"
        assert calls == []

    run(main)


def test_claim_wait_ended_by_a_lost_lease_reports_lost_not_busy() -> None:
    async def main() -> None:
        inner = HookedStore()
        store = ThreadedCheckpointer(inner)
        ticket = await store.run_queue.submit(Submission("t1", None))
        await store.claim("t1", "someone-else", ClaimPolicy(ttl=timedelta(seconds=30)))

        def cancel() -> None:
            inner.run_queue.cancel(ticket.entry_id)

        inner.before_claim = cancel
        calls: list[str] = []
        report = await AsyncWorker(store, _counting(calls), **FAST).run_once()
        assert report is not None and report.note == "lost" and calls == []

    run(main)


def test_claim_taken_after_shutdown_abandoned_the_attempt_is_given_back() -> None:
    async def main() -> None:
        inner = HookedStore()
        store = ThreadedCheckpointer(inner)
        ticket = await store.run_queue.submit(Submission("t1", None))
        long_claims = ClaimPolicy(
            ttl=timedelta(seconds=30), renew_every=timedelta(milliseconds=150)
        )
        calls: list[str] = []
        worker = AsyncWorker(store, _counting(calls), **{**FAST, "claim_policy": long_claims})

        def shut_down_meanwhile() -> None:  # runs in a worker thread, inside begin_attempt
            worker.stop(force=True)

        inner.before_claim = shut_down_meanwhile
        await asyncio.wait_for(worker.run(), 20)
        await store.claim("t1", "next-worker")  # the late claim was given back, not kept
        entry = await store.run_queue.entry(ticket.entry_id)
        assert entry is not None and entry.lease_holder is None  # and the lease
        assert calls == []

    run(main)
