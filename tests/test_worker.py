"""The worker runtime (durable_graph.worker.sync) on the in-memory store and on real SQLite files.

Crashed attempts are staged with the store's own calls (lease with a run id, claim, commit, then
nothing — as a SIGKILLed worker leaves it); the store clock is moved past their ttls.
"""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
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
    Resume,
    Submission,
    ThreadBusy,
    ValidationError,
)
from durable_graph.core.checkpointer import Checkpointer
from durable_graph.memory.store import InMemoryCheckpointer
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.sqlite import SqliteCheckpointer
from durable_graph.testkit import ClockControl, ManualClock
from durable_graph.testkit.postgres.clock import PgClock
from durable_graph.worker.signals import StopSignals
from durable_graph.worker.sync import RunContext, Worker, output_effect_key
from hooked_store import HookedStore
from worker_support import FAST


class Backend:
    """Opens the store under test: ``store()`` on the real clock, ``clocked()`` with a movable one."""

    def __init__(self, kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        self.kind = kind
        self._tmp_path = tmp_path
        self._request = request
        self.opened: list[Checkpointer] = []

    def _open(self, clock: Callable[[], float]) -> Checkpointer:
        store: Checkpointer
        if self.kind == "memory":
            store = InMemoryCheckpointer(clock=clock)
        elif self.kind == "sqlite":
            store = SqliteCheckpointer.open(self._tmp_path / f"s{len(self.opened)}.db", clock=clock)
        else:
            store = PostgresCheckpointer.open(self._dsn, PostgresConfig(schema=self._schema))
        self.opened.append(store)
        return store

    @property
    def _dsn(self) -> str:
        dsn: str = self._request.getfixturevalue("pg_dsn")
        return dsn

    @property
    def _schema(self) -> str:
        schema: str = self._request.getfixturevalue("pg_schema")
        return schema

    def store(self) -> Checkpointer:
        return self._open(time.time)

    def clocked(self) -> tuple[Checkpointer, ClockControl]:
        if self.kind == "postgres":
            store = self._open(time.time)
            return store, PgClock(self._dsn, self._schema)
        clock = ManualClock()
        return self._open(clock), clock


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    made = Backend(request.param, tmp_path, request)
    yield made
    for store in made.opened:
        store.close()


def _three_steps(ctx: RunContext) -> Any:
    """Commit one checkpoint per step, resuming after the last committed one."""
    steps = ["a", "b", "c"]
    start = steps.index(ctx.plan.checkpoint.next[0]) if isinstance(ctx.plan, Resume) else 0
    for i in range(start, len(steps)):
        ctx.commit(
            {"step": steps[i]},
            next=steps[i + 1 : i + 2],
            metadata={"applied": ctx.entry.entry_id} if i == 0 else {"step": steps[i]},
        )
    return {"done": ctx.entry.entry_id}


def _stage_crash(
    store: Checkpointer, clock: ClockControl, *, commits: list[tuple[str, ...]]
) -> tuple[int, str]:
    """Submit an entry and leave an attempt as a killed worker would: leased, claimed, committed."""
    queue = store.run_queue
    ticket = queue.submit(Submission("t1", {"x": 1}, max_attempts=3))
    lease = queue.lease("crashed-worker", timedelta(seconds=5), run_id="run-1")
    assert lease is not None
    claim = store.claim(
        "t1", "run-1", ClaimPolicy(ttl=timedelta(seconds=5), renew_every=timedelta(seconds=1))
    )
    parent = None
    for i, nxt in enumerate(commits):
        cp = store.commit(
            claim,
            Commit(
                f"cp-{i}",
                parent,
                "run-1",
                {"step": "a"},
                metadata={"applied": ticket.entry_id} if i == 0 else None,
                next=nxt,
            ),
        )
        parent = cp.checkpoint_id
    clock.advance(timedelta(seconds=10))  # both the lease and the claim expire
    return ticket.entry_id, "run-1"


def test_completed_run_closes_with_the_handler_output(backend: Backend) -> None:
    store = backend.store()
    ticket = store.run_queue.submit(Submission("t1", {"x": 1}))
    report = Worker(store, _three_steps, **FAST).run_once()
    assert report is not None and report.note == "completed" and report.plan == Fresh()
    entry = store.run_queue.entry(ticket.entry_id)
    assert entry is not None and entry.outcome == Completed({"done": ticket.entry_id})
    assert [cp.state for cp in store.history("t1")] == [{"step": "c"}, {"step": "b"}, {"step": "a"}]
    assert Worker(store, _three_steps, **FAST).run_once() is None


def test_commits_chain_parent_ids_from_the_thread_head(backend: Backend) -> None:
    store = backend.store()
    store.run_queue.submit(Submission("t1", 1))
    store.run_queue.submit(Submission("t1", 2))
    worker = Worker(store, _three_steps, **FAST)
    assert worker.run_once() is not None and worker.run_once() is not None
    history = list(reversed(store.history("t1")))
    assert len(history) == 6
    assert history[0].parent_id is None
    for parent, child in itertools.pairwise(history):
        assert child.parent_id == parent.checkpoint_id


def test_renewal_keeps_a_long_attempt_alive_past_its_ttl(backend: Backend) -> None:
    store = backend.store()
    queue = store.run_queue
    ticket = queue.submit(Submission("t1", None))
    seen_by_thief: list[object] = []

    def slow(ctx: RunContext) -> Any:
        ctx.commit({"n": 0}, next=["more"])
        for _ in range(3):  # 3 x 0.6 s = three ttls
            time.sleep(0.6)
            seen_by_thief.append(queue.lease("thief", timedelta(seconds=5)))
            with pytest.raises(ThreadBusy):
                store.claim("t1", "thief")
            assert not ctx.cancelled
        ctx.commit({"n": 1})
        return "ok"

    report = Worker(store, slow, **FAST).run_once()
    assert report is not None and report.note == "completed"
    assert seen_by_thief == [None, None, None]
    entry = queue.entry(ticket.entry_id)
    assert entry is not None and entry.outcome == Completed("ok") and len(entry.attempts) == 1


def test_shutdown_lets_running_attempts_finish(backend: Backend) -> None:
    store = backend.store()
    ticket = store.run_queue.submit(Submission("t1", None))
    started = threading.Event()

    def handler(ctx: RunContext) -> Any:
        started.set()
        time.sleep(0.5)
        ctx.commit({"done": True})
        return "finished"

    worker = Worker(store, handler, shutdown_deadline=timedelta(seconds=10), **FAST)
    runner = threading.Thread(target=worker.run)
    runner.start()
    assert started.wait(5)
    worker.stop()
    runner.join(10)
    assert not runner.is_alive()
    entry = store.run_queue.entry(ticket.entry_id)
    assert entry is not None and entry.outcome == Completed("finished")


def test_shutdown_stops_leasing_and_releases_attempts_past_the_deadline(
    backend: Backend,
) -> None:
    store = backend.store()
    queue = store.run_queue
    first = queue.submit(Submission("t1", None))
    release = threading.Event()
    contexts: list[RunContext] = []
    errors: list[BaseException] = []

    def stuck(ctx: RunContext) -> Any:
        contexts.append(ctx)
        ctx.commit({"step": 1}, next=["step2"])
        release.wait(10)
        try:
            ctx.commit({"step": 2})
        except ClaimLost as exc:
            errors.append(exc)
            raise
        return "late"

    worker = Worker(store, stuck, shutdown_deadline=timedelta(milliseconds=300), **FAST)
    runner = threading.Thread(target=worker.run)
    runner.start()
    deadline = time.monotonic() + 5
    while not contexts and time.monotonic() < deadline:
        time.sleep(0.02)
    assert contexts
    worker.stop()
    second = queue.submit(Submission("t2", None))
    runner.join(5)
    assert not runner.is_alive()

    # The stuck attempt was cancelled and its claim and lease released...
    assert contexts[0].cancelled
    entry = queue.entry(first.entry_id)
    assert entry is not None and not entry.closed and entry.lease_holder is None
    info = store.thread("t1")
    assert info is not None and info.claim_holder is None
    # ...no new entry was leased after stop()...
    later = queue.entry(second.entry_id)
    assert later is not None and later.attempts == () and later.lease_holder is None
    # ...and the stuck handler, when it wakes, is refused.
    release.set()
    time.sleep(0.1)
    assert errors and isinstance(errors[0], ClaimLost)
    # Another worker resumes the released entry from its checkpoint.
    report = Worker(store, _three_steps_from_step, **FAST).run_once()
    assert report is not None and report.entry_id == first.entry_id
    assert isinstance(report.plan, Resume) and report.note == "completed"


def _three_steps_from_step(ctx: RunContext) -> Any:
    ctx.commit({"resumed": True})
    return "resumed"


def test_exhausted_entry_closes_failed(backend: Backend) -> None:
    store, clock = backend.clocked()
    queue = store.run_queue
    ticket = queue.submit(Submission("t1", None, max_attempts=1))
    assert queue.lease("crashed-worker", timedelta(seconds=5), run_id="run-1") is not None
    clock.advance(timedelta(seconds=10))
    called: list[int] = []
    report = Worker(store, lambda ctx: called.append(1), **FAST).run_once()
    assert report is not None and report.note == "failed"
    assert called == []
    entry = queue.entry(ticket.entry_id)
    assert entry is not None and entry.outcome == Failed("exhausted")


def test_exhausted_entry_whose_run_finished_closes_completed(backend: Backend) -> None:
    store, clock = backend.clocked()
    queue = store.run_queue
    ticket = queue.submit(Submission("t1", None, max_attempts=1))
    assert queue.lease("crashed-worker", timedelta(seconds=5), run_id="run-1") is not None
    claim = store.claim("t1", "run-1")
    store.commit(claim, Commit("cp-0", None, "run-1", {"done": True}))
    store.record_effect(claim, output_effect_key(ticket.entry_id), "the output", run_id="run-1")
    clock.advance(timedelta(seconds=60))
    report = Worker(store, lambda ctx: pytest.fail("must not run"), **FAST).run_once()
    assert report is not None and report.note == "completed"
    entry = queue.entry(ticket.entry_id)
    assert entry is not None and entry.outcome == Completed("the output")


def test_handler_exception_is_retried_then_closes_failed(backend: Backend) -> None:
    store = backend.store()
    queue = store.run_queue
    ticket = queue.submit(Submission("t1", None, max_attempts=2))

    def boom(ctx: RunContext) -> Any:
        raise RuntimeError(f"boom {ctx.attempt}")

    worker = Worker(store, boom, **FAST)
    first = worker.run_once()
    assert first is not None and first.note == "retry"
    entry = queue.entry(ticket.entry_id)
    assert entry is not None and not entry.closed and entry.lease_holder is None
    assert len(entry.attempts) == 1
    assert store.thread("t1") is None  # nothing committed, no claim left behind
    second = worker.run_once()
    assert second is not None and second.note == "failed"
    entry = queue.entry(ticket.entry_id)
    assert entry is not None and isinstance(entry.outcome, Failed)
    # Issue 26 item 9: the closing attempt keeps its traceback, whose last line names the type.
    assert entry.outcome.error.startswith("Traceback")
    assert entry.outcome.error.endswith("RuntimeError: boom 2")
    assert entry.attempts[-1].error == entry.outcome.error


def test_retry_after_an_exception_resumes_from_the_last_checkpoint(
    backend: Backend,
) -> None:
    store = backend.store()
    ticket = store.run_queue.submit(Submission("t1", None))
    plans: list[object] = []

    def flaky(ctx: RunContext) -> Any:
        plans.append(ctx.plan)
        if ctx.attempt == 1:
            ctx.commit({"step": 1}, next=["two"], metadata={"applied": ctx.entry.entry_id})
            raise RuntimeError("transient")
        assert ctx.head is not None and ctx.head.state == {"step": 1}
        ctx.commit({"step": 2})
        return "ok"

    worker = Worker(store, flaky, **FAST)
    assert [worker.run_once(), worker.run_once()][1] is not None
    assert isinstance(plans[0], Fresh) and isinstance(plans[1], Resume)
    entry = store.run_queue.entry(ticket.entry_id)
    assert entry is not None and entry.outcome == Completed("ok")
    applied = [cp for cp in store.history("t1") if (cp.metadata or {}).get("applied")]  # type: ignore[union-attr]
    assert len(applied) == 1


def test_resume_after_a_crashed_attempt(backend: Backend) -> None:
    store, clock = backend.clocked()
    entry_id, _ = _stage_crash(store, clock, commits=[("b",)])
    seen: list[RunContext] = []

    def handler(ctx: RunContext) -> Any:
        seen.append(ctx)
        ctx.commit({"step": "b"})
        return "resumed"

    report = Worker(store, handler, **FAST).run_once()
    assert report is not None and report.note == "completed" and report.attempt == 2
    ctx = seen[0]
    assert isinstance(ctx.plan, Resume) and ctx.plan.checkpoint.checkpoint_id == "cp-0"
    head = store.get("t1")
    assert head is not None and head.parent_id == "cp-0" and head.run_id == report.run_id
    entry = store.run_queue.entry(entry_id)
    assert entry is not None and entry.outcome == Completed("resumed")


def test_finished_run_is_not_applied_again(backend: Backend) -> None:
    store, clock = backend.clocked()
    entry_id, _ = _stage_crash(store, clock, commits=[("b",), ()])
    report = Worker(store, lambda ctx: pytest.fail("must not run"), **FAST).run_once()
    assert report is not None and report.note == "completed"
    assert isinstance(report.plan, Finished)
    assert len(store.history("t1")) == 2
    entry = store.run_queue.entry(entry_id)
    assert entry is not None and entry.outcome == Completed(None)


def test_busy_thread_is_waited_for_without_burning_attempts(backend: Backend) -> None:
    store = backend.store()
    ticket = store.run_queue.submit(Submission("t1", None, max_attempts=1))
    store.claim(
        "t1",
        "someone-else",
        ClaimPolicy(ttl=timedelta(milliseconds=500), renew_every=timedelta(milliseconds=100)),
    )
    report = Worker(store, _three_steps, **FAST).run_once()
    assert report is not None and report.note == "completed"
    entry = store.run_queue.entry(ticket.entry_id)
    assert entry is not None and entry.outcome == Completed({"done": ticket.entry_id})
    assert len(entry.attempts) == 1


def test_cancel_stops_the_attempt_cooperatively(backend: Backend) -> None:
    store = backend.store()
    queue = store.run_queue
    ticket = queue.submit(Submission("t1", None))
    errors: list[BaseException] = []
    started = threading.Event()

    def looping(ctx: RunContext) -> Any:
        ctx.commit({"n": 0}, next=["loop"])
        started.set()
        deadline = time.monotonic() + 5
        while not ctx.cancelled and time.monotonic() < deadline:
            time.sleep(0.02)
        try:
            ctx.commit({"n": 1})
        except EntryClosed as exc:
            errors.append(exc)
            raise
        return "not reached"

    reports: list[object] = []
    runner = threading.Thread(
        target=lambda: reports.append(Worker(store, looping, **FAST).run_once())
    )
    runner.start()
    assert started.wait(5)
    queue.cancel(ticket.entry_id)
    runner.join(10)
    assert errors and isinstance(errors[0], EntryClosed)
    assert reports and getattr(reports[0], "note", None) == "cancelled"
    info = store.thread("t1")
    assert info is not None and info.claim_holder is None  # the claim was released


def test_thread_deleted_entry_is_skipped(backend: Backend) -> None:
    store = backend.store()
    ticket = store.run_queue.submit(Submission("t1", None))
    assert store.delete_thread("t1") is False  # no commit yet, but the open entry is marked
    report = Worker(store, lambda ctx: pytest.fail("must not run"), **FAST).run_once()
    assert report is not None and report.note == "thread_deleted"
    entry = store.run_queue.entry(ticket.entry_id)
    assert entry is not None and entry.closed


def test_invalid_output_closes_failed(backend: Backend) -> None:
    store = backend.store()
    ticket = store.run_queue.submit(Submission("t1", None))
    report = Worker(store, lambda ctx: {"when": object()}, **FAST).run_once()
    assert report is not None and report.note == "failed"
    entry = store.run_queue.entry(ticket.entry_id)
    assert entry is not None and isinstance(entry.outcome, Failed)
    assert "invalid output" in entry.outcome.error


def test_record_effect_runs_the_function_once_and_returns_the_recorded_value(
    backend: Backend,
) -> None:
    store = backend.store()
    store.run_queue.submit(Submission("t1", None, max_attempts=2))
    calls: list[int] = []

    def pay() -> int:
        calls.append(1)
        return len(calls)

    def handler(ctx: RunContext) -> Any:
        if ctx.head is None:
            ctx.commit({"start": True}, next=["act"])
        value = ctx.record_effect("pay", pay)
        if ctx.attempt == 1:
            raise RuntimeError("crash after the effect")
        ctx.commit({"paid": value})
        return value

    worker = Worker(store, handler, **FAST)
    worker.run_once()
    report = worker.run_once()
    assert report is not None and report.outcome == Completed(1)
    assert calls == [1]


def test_concurrency_runs_attempts_in_parallel(backend: Backend) -> None:
    store = backend.store()
    tickets = [store.run_queue.submit(Submission(f"t{i}", i)) for i in range(3)]
    barrier = threading.Barrier(3, timeout=10)

    def together(ctx: RunContext) -> Any:
        barrier.wait()  # passes only when three attempts run at once
        ctx.commit({"i": ctx.input})
        return ctx.input

    worker = Worker(store, together, concurrency=3, **FAST)
    runner = threading.Thread(target=worker.run)
    runner.start()
    try:
        for ticket in tickets:
            closed = store.run_queue.await_closed(ticket.entry_id, timedelta(seconds=15))
            assert closed is not None and isinstance(closed.outcome, Completed)
    finally:
        worker.stop()
        runner.join(10)
    assert not barrier.broken


# --- the attempt flow's three former drifts (the same test for AsyncWorker) ----------------


def _never_called(calls: list[str]) -> Callable[[RunContext], Any]:
    def handler(ctx: RunContext) -> Any:
        calls.append(ctx.run_id)
        return "ran"

    return handler


def test_handler_is_not_called_once_the_lease_was_lost_before_it_starts() -> None:
    store = HookedStore()
    ticket = store.run_queue.submit(Submission("t1", None))
    calls: list[str] = []
    # Busy at begin_attempt (until it expires), so the worker claims with `claim_attempt`: the
    # hook runs after that call, right before the handler would start.
    store.claim(
        "t1", "someone-else", ClaimPolicy(timedelta(milliseconds=300), timedelta(milliseconds=100))
    )

    def cancel_and_let_the_renewal_notice() -> None:
        store.run_queue.cancel(ticket.entry_id)
        time.sleep(1.0)  # several renewals (every 150 ms): the keeper has seen EntryClosed

    store.before_handler = cancel_and_let_the_renewal_notice
    report = Worker(store, _never_called(calls), **FAST).run_once()
    assert report is not None and report.note == "lost"
    assert calls == []


def test_claim_wait_ended_by_a_lost_lease_reports_lost_not_busy() -> None:
    store = HookedStore()
    ticket = store.run_queue.submit(Submission("t1", None))
    store.claim("t1", "someone-else", ClaimPolicy(ttl=timedelta(seconds=30)))

    def cancel() -> None:
        store.run_queue.cancel(ticket.entry_id)

    store.before_claim = cancel
    calls: list[str] = []
    report = Worker(store, _never_called(calls), **FAST).run_once()
    assert report is not None and report.note == "lost" and calls == []


def test_claim_taken_after_shutdown_abandoned_the_attempt_is_given_back() -> None:
    store = HookedStore()
    store.run_queue.submit(Submission("t1", None))
    long_claims = ClaimPolicy(ttl=timedelta(seconds=30), renew_every=timedelta(milliseconds=150))
    calls: list[str] = []
    worker = Worker(
        store,
        _never_called(calls),
        **{**FAST, "claim_policy": long_claims, "shutdown_deadline": timedelta(milliseconds=1)},
    )
    runner = threading.Thread(target=worker.run)

    def shut_down_meanwhile() -> None:
        worker.stop()
        runner.join(10)  # run() returns once it abandoned this attempt: lease released

    store.before_claim = shut_down_meanwhile
    runner.start()
    runner.join(15)
    assert not runner.is_alive()
    assert store.hooked_claim_taken.wait(5)
    deadline = time.monotonic() + 5
    while True:  # the slot thread gives the late claim back right after it is taken
        try:
            store.claim("t1", "next-worker")
            break
        except ThreadBusy:
            assert time.monotonic() < deadline, "the late claim was kept"
            time.sleep(0.05)
    assert calls == []


# --- the last checkpoint committed with the close (SPEC §18.1) ------------------------------


def test_commit_last_lands_with_the_close(backend: Backend) -> None:
    store = backend.store()
    ticket = store.run_queue.submit(Submission("t1", {"x": 1}))

    def one_step(ctx: RunContext) -> Any:
        ctx.commit({"step": "a"}, next=["b"])
        ctx.commit_last({"step": "b"}, metadata={"last": True})
        assert ctx.head is not None and ctx.head.state == {"step": "a"}  # not committed yet
        return None

    report = Worker(store, one_step, **FAST).run_once()
    assert report is not None and report.note == "completed"
    entry = store.run_queue.entry(ticket.entry_id)
    assert entry is not None and entry.outcome == Completed(None) and entry.admitted
    head = store.get("t1")
    assert head is not None and head.state == {"step": "b"} and head.next == ()
    assert head.metadata == {"last": True} and head.run_id == report.run_id
    assert [cp.state for cp in store.history("t1")] == [{"step": "b"}, {"step": "a"}]
    store.claim("t1", "next")  # the claim was released


def test_commit_last_with_an_output_records_it_after_the_commit(backend: Backend) -> None:
    store = backend.store()
    ticket = store.run_queue.submit(Submission("t1", None))

    def answer(ctx: RunContext) -> Any:
        ctx.commit_last({"done": True})
        return {"answer": 42}

    report = Worker(store, answer, **FAST).run_once()
    assert report is not None and report.note == "completed"
    entry = store.run_queue.entry(ticket.entry_id)
    assert entry is not None and entry.outcome == Completed({"answer": 42})
    head = store.get("t1")
    assert head is not None and head.state == {"done": True}
    effect = store.get_effect("t1", output_effect_key(ticket.entry_id))
    assert effect is not None and effect.value == {"answer": 42}


def test_commit_last_then_a_raise_commits_it_and_the_retry_finds_the_run_finished(
    backend: Backend,
) -> None:
    store = backend.store()
    ticket = store.run_queue.submit(Submission("t1", None, max_attempts=3))
    calls: list[int] = []

    def late_raise(ctx: RunContext) -> Any:
        calls.append(ctx.attempt)
        ctx.commit_last({"done": True})
        raise RuntimeError("after the last commit")

    worker = Worker(store, late_raise, **FAST)
    first = worker.run_once()
    assert first is not None and first.note == "retry"
    head = store.get("t1")
    assert head is not None and head.state == {"done": True}  # committed where it stood
    second = worker.run_once()
    assert second is not None and second.note == "completed"
    assert isinstance(second.plan, Finished) and calls == [1]  # not run again
    entry = store.run_queue.entry(ticket.entry_id)
    assert entry is not None and entry.outcome == Completed(None)


def test_no_write_may_follow_commit_last(backend: Backend) -> None:
    store = backend.store()
    store.run_queue.submit(Submission("t1", None, max_attempts=1))
    refused: list[str] = []

    def writes_on(ctx: RunContext) -> Any:
        ctx.commit_last({"done": True})
        for write in (
            lambda: ctx.commit({"more": 1}),
            lambda: ctx.commit_last({"again": 1}),
            lambda: ctx.append_events([]),
            lambda: ctx.record_effect("k", lambda: 1),
        ):
            try:
                write()
            except ValidationError as exc:
                refused.append(str(exc))
        return None

    report = Worker(store, writes_on, **FAST).run_once()
    assert report is not None and report.note == "completed" and len(refused) == 4
    assert all("commit_last" in message for message in refused)  # refused for being after it
    head = store.get("t1")
    assert head is not None and head.state == {"done": True}


def test_commit_last_refuses_a_bad_state_at_once(backend: Backend) -> None:
    store = backend.store()
    store.run_queue.submit(Submission("t1", None, max_attempts=1))
    seen: list[BaseException] = []

    def bad(ctx: RunContext) -> Any:
        try:
            ctx.commit_last({"x": float("nan")})
        except ValidationError as exc:
            seen.append(exc)
        return None

    report = Worker(store, bad, **FAST).run_once()
    assert report is not None and report.note == "completed" and len(seen) == 1
    assert store.get("t1") is None


# --- SPEC §19.3: a retry continues its chain -----------------------------------------------


def test_a_retry_of_an_admitted_entry_resumes_and_never_applies_the_input_again(
    backend: Backend,
) -> None:
    """A failed entry whose input was applied, retried twice (the first retry failing before any
    commit of its own): each retry is planned with the whole chain's runs, so it resumes from
    the newest checkpoint they committed; the input is applied once."""
    store = backend.store()
    queue = store.run_queue
    first = queue.submit(Submission("t1", {"x": 1}, max_attempts=1))
    plans: list[object] = []

    def failing_after_a_step(ctx: RunContext) -> Any:
        plans.append(ctx.plan)
        if isinstance(ctx.plan, Fresh):
            ctx.commit({"step": 1}, next=["two"], metadata={"applied": ctx.entry.entry_id})
        raise RuntimeError("a tool failed")

    assert Worker(store, failing_after_a_step, **FAST).run_once() is not None
    retry = queue.retry(first.entry_id)
    assert Worker(store, failing_after_a_step, **FAST).run_once() is not None
    assert isinstance(plans[1], Resume) and plans[1].checkpoint.state == {"step": 1}
    again = queue.retry(retry.entry_id)

    def finishing(ctx: RunContext) -> Any:
        plans.append(ctx.plan)
        ctx.commit({"step": 2})
        return "ok"

    assert Worker(store, finishing, **FAST).run_once() is not None
    assert isinstance(plans[2], Resume) and plans[2].checkpoint.state == {"step": 1}
    entry = queue.entry(again.entry_id)
    assert entry is not None and entry.outcome == Completed("ok")
    applied = [cp for cp in store.history("t1") if (cp.metadata or {}).get("applied")]  # type: ignore[union-attr]
    assert len(applied) == 1


def test_a_retry_begun_while_the_claim_is_busy_is_planned_with_its_chain(backend: Backend) -> None:
    """The thread's claim is live at `begin_attempt` (D41), so the worker claims later with
    `claim_attempt`, which plans with the retry chain too (D229, D231): it resumes."""
    store = backend.store()
    queue = store.run_queue
    first = queue.submit(Submission("t1", {"x": 1}, max_attempts=1))

    def failing_after_a_step(ctx: RunContext) -> Any:
        ctx.commit({"step": 1}, next=["two"])
        raise RuntimeError("a tool failed")

    assert Worker(store, failing_after_a_step, **FAST).run_once() is not None
    queue.retry(first.entry_id)
    store.claim(
        "t1", "an-operator", ClaimPolicy(timedelta(milliseconds=300), timedelta(milliseconds=100))
    )
    plans: list[object] = []

    def recording(ctx: RunContext) -> Any:
        plans.append(ctx.plan)
        return "ok"

    report = Worker(store, recording, **FAST).run_once()
    assert report is not None and report.note == "completed"
    assert isinstance(plans[0], Resume) and plans[0].checkpoint.state == {"step": 1}


def test_a_retry_of_an_entry_never_admitted_applies_the_input(backend: Backend) -> None:
    store = backend.store()
    queue = store.run_queue
    first = queue.submit(Submission("t1", {"x": 1}, max_attempts=1))
    Worker(
        store, lambda ctx: (_ for _ in ()).throw(RuntimeError("before any step")), **FAST
    ).run_once()
    queue.retry(first.entry_id)
    plans: list[object] = []

    def recording(ctx: RunContext) -> Any:
        plans.append(ctx.plan)
        ctx.commit({"step": 1})
        return "ok"

    assert Worker(store, recording, **FAST).run_once() is not None
    assert isinstance(plans[0], Fresh)


# --- stop signals: the handler takes no lock (worker/signals.py) ---------------------------


@pytest.mark.usefixtures("restore_signals")
def test_a_stop_signal_while_the_main_thread_holds_a_lock_is_noted_not_waited_on() -> None:
    """Where Event.wait holds its condition's lock, a handler calling ``event.set()`` waited for
    itself for ever (a scheduler once hung so); the handler now only notes the signal."""
    signals = StopSignals()
    held = threading.Lock()  # as Event.wait holds its condition's lock between some bytecodes
    with signals.installed(), held:
        signal.raise_signal(signal.SIGTERM)
        signal.raise_signal(signal.SIGINT)
    assert signals.take() == [signal.SIGTERM, signal.SIGINT]
    assert signals.take() == []


@pytest.mark.usefixtures("restore_signals")
def test_a_storm_of_sigterms_stops_a_worker_running_in_the_main_thread() -> None:
    """Signals land anywhere in the main thread's loop (its waits, its locks, its log lines):
    the first stops leasing, the second stops waiting, and the rest change nothing."""
    with InMemoryCheckpointer() as store:
        ticket = store.run_queue.submit(Submission("t1", None))
        started = threading.Event()

        def handler(ctx: RunContext) -> Any:
            started.set()
            time.sleep(0.5)
            return "finished"

        worker = Worker(store, handler, shutdown_deadline=timedelta(seconds=30), **FAST)
        ignore = lambda signum, frame: None  # noqa: E731  (the storm may outlast the worker)
        signal.signal(signal.SIGTERM, ignore)

        def storm() -> None:
            started.wait(10)
            for _ in range(3000):
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.00005)

        sender = threading.Thread(target=storm, daemon=True)
        sender.start()
        began = time.monotonic()
        worker.run()  # in the main thread, so its handlers are installed
        sender.join(10)
        assert worker.stopping and time.monotonic() - began < 10  # forced: not the 30 s deadline
        assert signal.getsignal(signal.SIGTERM) is ignore  # the previous handler is back
        entry = store.run_queue.entry(ticket.entry_id)
        assert entry is not None and entry.attempts
