"""The worker, written once: `AsyncWorker` runs attempts as tasks on the calling event loop.

The one source of both workers (SPEC §22, D240): ``sync.py`` (`Worker`, threads) is generated
from it; each ``if ASYNC:`` block is where a task and a thread genuinely differ, its ``else:`` the
sync code. The attempt itself is `attempt_async.AsyncAttempt`; this module runs attempts side by
side (D52): one dispatcher leases while one of ``concurrency`` units is free, each attempt renewed
by a unit of its own until it finishes or is lost (``ctx.cancelled``; an async handler's task is
cancelled). Shutdown (D44): `stop` or a signal stops leasing, running attempts get
``shutdown_deadline``, then each still running is lost and its claim and lease released.
"""

# mypy: always-true=ASYNC
# (so mypy reads only this file's async branches; it checks the sync ones in the generated sync.py)
from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar, Unpack

from durable_graph.core.async_protocols import AsyncCheckpointer
from durable_graph.core.errors import StoreBusy, StoreError, ValidationError
from durable_graph.core.model import (
    JSON,
    AttemptBegun,
    Checkpoint,
    Commit,
    Event,
    EventIn,
    Lease,
    QueueEntry,
)
from durable_graph.core.polling import AsyncChanges
from durable_graph.core.workers import WorkerBeat, WorkerState
from durable_graph.worker._compat_async import (
    ASYNC,
    SIGNALS_BY_DEFAULT,
    Interrupted,
    Signals,
    Unit,
    Wake,
    check_handler,
    resolved,
    spawn,
    wait_event,
    wait_units,
)
from durable_graph.worker.app import App
from durable_graph.worker.attempt_async import AsyncAttempt, begin
from durable_graph.worker.context import (
    LostFlag,
    RunContextBase,
    WorkerStopped,
    busy_pause,
    new_id,
    next_commit,
)
from durable_graph.worker.flow import (
    AttemptReport,
    HandlerCall,
    HandlerResult,
    Note,
    Settlement,
    closing_note,
    describe,
    exhausted_outcome,
    failure_outcome,
    invalid_output,
    output_effect_key,
    recorded_output,
)
from durable_graph.worker.settings import WorkerOptions, WorkerSettings

log = logging.getLogger("durable_graph.worker.aio")
T = TypeVar("T")

AsyncHandler = Callable[["AsyncRunContext"], Awaitable[Any]]
"""A user's run: ``handler(ctx)`` returns the run's output, a JSON value."""

Events = Sequence[EventIn]  # keeps `commit`'s signature short
if ASYNC:
    _ABANDON_GRACE = 5.0  # seconds a cancelled attempt's task gets to unwind at shutdown


class _Attempt(AsyncAttempt):
    """An attempt whose lease and claim another unit renews; finished once."""

    def __init__(self, worker: AsyncWorker, lease: Lease, settings: WorkerSettings) -> None:
        super().__init__(worker.store, lease, settings, log, lambda: worker.stopping)
        self._handler = worker.handler
        self._stop_renewing = Wake()
        self._in_flight = False  # a renewal is in flight
        if ASYNC:
            self.handler_task: asyncio.Task[Any] | None = None  # cancelled if the attempt is lost
            self._finished: asyncio.Future[QueueEntry | None] | None = None
        self._renewer = spawn(self._renewing, f"dg-renew-{lease.entry.entry_id}")

    async def _renewing(self) -> None:
        while not await wait_event(self._stop_renewing, self.settings.renew_every):
            self._in_flight = True  # then look again: `stop_renewing` waits, or we stop
            try:
                if self._stop_renewing.is_set() or not await self.renew():
                    return
            finally:
                self._in_flight = False

    async def stop_renewing(self) -> None:
        """Stop the renewer, letting a renewal in flight finish (cancelling a PostgreSQL call costs
        its connection); one between renewals is not waited for (issue 38)."""
        self._stop_renewing.set()
        renewer = self._renewer
        if renewer.done() or not self._in_flight:
            return
        try:
            await wait_units({renewer})
        except Interrupted:
            renewer.cancel()
            raise

    if ASYNC:

        def lose(self, error: StoreError) -> None:
            super().lose(error)
            if self.handler_task is not None:
                # SPEC §13, issue 26 item 7: a lost attempt (its entry cancelled, re-leased, the
                # worker stopping) stops now: its handler's task is cancelled (again at shutdown).
                self.handler_task.cancel()

        async def finish(
            self, outcome: Settlement, commit: Commit | None = None
        ) -> QueueEntry | None:
            """Stop renewing, then `settle` — once: later calls wait for the first and get its
            answer. Shielded: cancelling a caller never interrupts a close half-way."""
            if self.start_finishing():
                self._finished = asyncio.ensure_future(self._stop_then_settle(outcome, commit))
            if self._finished is None:  # finished without a call: the store closed the entry
                return None
            return await asyncio.shield(self._finished)

        async def _stop_then_settle(
            self, outcome: Settlement, commit: Commit | None
        ) -> QueueEntry | None:
            try:
                await self.stop_renewing()
                return await self.settle(outcome, commit)
            except Exception as exc:
                entry_id = self.lease.entry.entry_id
                log.warning(
                    "entry %d: releasing the lease failed (it will expire): %s", entry_id, exc
                )
                raise

        async def call_handler(self, call: HandlerCall) -> HandlerResult:
            """The handler awaited in a task of its own (cancelled if the attempt is lost)."""
            ctx = AsyncRunContext(self.store, call, self)
            handler_task = asyncio.ensure_future(self._handler(ctx))
            self.handler_task = handler_task
            try:
                return HandlerResult(output=await handler_task, head=ctx.head, last=ctx.last)
            except BaseException as exc:  # D43: the attempt decides between retry and Failed
                this = asyncio.current_task()
                if isinstance(exc, asyncio.CancelledError) and this and this.cancelling():
                    raise  # our own task is being cancelled: `run` releases, then re-raises
                if not isinstance(exc, Exception | asyncio.CancelledError):
                    raise  # KeyboardInterrupt, SystemExit
                return HandlerResult(error=exc, head=ctx.head, last=ctx.last)
            finally:
                self.handler_task = None

    else:

        def finish(self, outcome: Settlement, commit: Commit | None = None) -> QueueEntry | None:
            """Stop renewing, then `settle` — once: a later call does nothing and gets None."""
            if not self.start_finishing():
                return None
            self.stop_renewing()
            return self.settle(outcome, commit)

        def call_handler(self, call: HandlerCall) -> HandlerResult:
            """The handler, called in this thread."""
            ctx = AsyncRunContext(self.store, call, self)
            try:
                return HandlerResult(output=self._handler(ctx), head=ctx.head, last=ctx.last)
            except Exception as exc:  # D43: the attempt decides between retry and Failed
                return HandlerResult(error=exc, head=ctx.head, last=ctx.last)


class AsyncRunContext(RunContextBase[AsyncCheckpointer]):
    """One attempt of one queue entry, as the handler sees it: ``plan`` is `Fresh` (apply
    ``entry.input``) or `Resume` (from ``plan.checkpoint``); `commit` chains checkpoints under the
    attempt's claim; once the attempt is lost, ``cancelled`` is true and every write raises."""

    if not ASYNC:

        @property
        def cancel_event(self) -> threading.Event:
            """Set when the attempt is lost; wait on it rather than `time.sleep`."""
            return self._keeper.lost_event

        def wait_cancelled(self, timeout: float | None = None) -> bool:
            """Wait up to ``timeout`` seconds (None: for ever): whether the attempt was lost."""
            return self.cancel_event.wait(timeout)

    async def commit(
        self, state: JSON, next: Sequence[str] = (), metadata: JSON = None, events: Events = ()
    ) -> Checkpoint:
        """Commit a checkpoint whose parent is the current head; ``next=()`` ends the run."""
        self.check_writable()
        commit = next_commit(self.run_id, self._head, state, next, metadata, events)
        checkpoint = await self._unless_busy(lambda: self.store.commit(self._claim, commit))
        self._head = checkpoint
        return checkpoint

    async def append_events(self, events: Sequence[EventIn]) -> list[Event]:
        """Append events to the thread's log (tagged with this run id), without a checkpoint."""
        self.check_writable()
        return await self._unless_busy(
            lambda: self.store.append_events(self._claim, events, run_id=self.run_id)
        )

    async def record_effect(self, key: str, fn: Callable[[], JSON | Awaitable[JSON]]) -> JSON:
        """The value recorded under ``key``; ``fn`` (sync, or async for `AsyncWorker`) runs only
        when none is recorded yet. First write wins; the thread needs a commit first (`NotFound`
        otherwise); ``fn`` runs again if an attempt crashes before its value is recorded."""
        self.check_writable()
        recorded = await self.store.get_effect(self.thread_id, key)
        if recorded is not None:
            return recorded.value
        value: JSON = await resolved(fn())
        self.check()
        record = await self._unless_busy(
            lambda: self.store.record_effect(self._claim, key, value, run_id=self.run_id)
        )
        return record.value

    async def _unless_busy(self, call: Callable[[], Awaitable[T]]) -> T:
        """``call``, made again while the store is only busy (D69) and the attempt lives."""
        started = time.monotonic()
        while True:
            try:
                return await call()
            except StoreBusy as exc:
                self.check()
                await asyncio.sleep(busy_pause(exc, started, self._keeper.lease, "a context write"))


def log_failure(exc: Exception, where: str) -> None:
    """A failure the worker survives: a `StoreError` as a warning, else with its traceback."""
    if isinstance(exc, StoreError):
        log.warning("store error: %s", exc)
    else:
        log.error("unexpected error in worker %s", where, exc_info=exc)


class AsyncWorker:
    """Leases entries from ``store.run_queue`` and runs ``handler`` for each (SPEC §5)."""

    def __init__(
        self,
        store: AsyncCheckpointer,
        handler: AsyncHandler,
        *,
        install_signal_handlers: bool = SIGNALS_BY_DEFAULT,
        **options: Unpack[WorkerOptions],
    ) -> None:
        """``options``: `WorkerOptions`, each checked; ``install_signal_handlers``: stop on
        SIGTERM / SIGINT (by default for a `Worker`, in the main thread only)."""
        check_handler(handler)
        if isinstance(handler, App):  # SPEC §15: several handlers by kind; only those leased
            if not handler.kinds:
                raise ValidationError("handler: the App registers no handler")
            options.setdefault("kinds", handler.kinds)
        self.settings = settings = WorkerSettings.check(**options)
        self.store = store
        self.handler = handler
        self.install_signal_handlers = bool(install_signal_handlers)
        self.holder = settings.holder
        self.concurrency = settings.concurrency
        self.lease_ttl = settings.lease_ttl
        self.claim_policy = settings.claim_policy
        self.tenant = settings.tenant
        self.poll_interval = settings.poll_interval
        self.shutdown_deadline = settings.shutdown_deadline
        self._stopping = False
        self._forced = False
        self._abandoned = False
        self._stopped: Wake | None = None  # set by `stop`: made by `run`, on its loop
        self._freed: Wake | None = None  # the dispatcher's: a unit ended, a notification, stop
        self._running: set[Unit] = set()
        self._attempts: set[_Attempt] = set()

    @property
    def stopping(self) -> bool:
        return self._stopping

    @property
    def running_attempts(self) -> int:
        """How many attempts are running now."""
        return len(self._attempts)

    def stop(self, *, force: bool = False) -> None:
        """Stop leasing; running attempts get ``shutdown_deadline`` unless ``force``. Thread-safe."""
        self._stopping = True
        self._forced = self._forced or force
        for wake in (self._stopped, self._freed):
            if wake is not None:
                wake.set()

    async def run(self) -> None:
        """Run attempts, up to ``concurrency`` at once, until `stop`; then shut down (D44)."""
        self._stopped = stopped = Wake()
        self._freed = freed = Wake()
        beaten = Wake()  # set once the last beat before "stopped" may go
        if self._stopping:
            stopped.set()
        with Signals(self._on_signal, self.install_signal_handlers).installed() as signals:
            log.info("worker %s started (%d slot(s))", self.holder, self.concurrency)
            beats = spawn(functools.partial(self._beats, beaten), f"dg-heartbeat-{self.holder}")
            dispatcher = spawn(
                functools.partial(self._dispatch, freed), f"dg-dispatch-{self.holder}"
            )
            try:
                await signals.wait(stopped)
                log.info("worker %s stopping", self.holder)
                await wait_units({dispatcher})
                await self._drain(signals, freed)
            except Interrupted:
                log.info("worker %s cancelled: releasing running attempts", self.holder)
                self.stop()
                beaten.set()
                dispatcher.cancel()
                beats.cancel()
                await self._abandon_running()
                raise
            await self._abandon_running()
            beaten.set()
            beats.cancel()
            await wait_units({beats})  # so that no beat of before lands after "stopped"
            await self._beat("stopped")
            log.info("worker %s stopped", self.holder)

    async def run_once(self) -> AttemptReport | None:
        """Lease and process at most one entry here; None if none was ready."""
        run_id = new_id()
        begun = await begin(self.store, self.settings, run_id)
        if begun is None:
            return None
        return await self._process(begun, run_id)

    async def _beats(self, beaten: Wake) -> None:
        """Record every ``heartbeat_every`` that this worker lives, idle or busy (issue 26)."""
        every = self.settings.heartbeat_every.total_seconds()
        while True:
            await self._beat("busy" if self._attempts else "idle")
            if await wait_event(beaten, every):
                return

    async def _beat(self, state: WorkerState) -> None:
        try:
            beat = WorkerBeat(
                self.holder, socket.gethostname(), os.getpid(), self.settings.kinds, state
            )
            await self.store.run_queue.worker_heartbeat(beat)
        except Exception as exc:  # the registry is for people; a failed beat stops nothing
            log.warning("worker %s: heartbeat not recorded: %s", self.holder, exc)

    def _on_signal(self, signum: int) -> None:
        """SIGTERM / SIGINT: the first stops leasing, a second stops waiting for attempts."""
        again, name = self._stopping, signal.Signals(signum).name
        if again:
            log.info("worker %s: %s again: not waiting for running attempts", self.holder, name)
        else:
            log.info("worker %s: %s received: finishing running attempts", self.holder, name)
        self.stop(force=again)

    async def _rest(self, seconds: float) -> None:
        """Sleep ``seconds``, woken by `stop`."""
        assert self._stopped is not None
        await wait_event(self._stopped, seconds)

    async def _dispatch(self, freed: Wake) -> None:
        """Lease while a unit is free, each lease run in a unit of its own; when nothing is
        ready, wait (woken by queue notifications where the store has them, SPEC §11)."""
        changes: AsyncChanges | None = getattr(self.store, "changes", None)
        async with contextlib.AsyncExitStack() as idle:
            watching = False  # registered for queue notifications: only while idle
            while not self._stopping:
                freed.clear()  # then look: a unit that ends from now on sets it
                if len(self._running) >= self.concurrency:
                    await wait_event(freed, None)
                    continue
                generation = changes.generation("queue") if changes is not None else 0
                run_id = new_id()
                try:
                    begun = await begin(self.store, self.settings, run_id)
                except Exception as exc:
                    log_failure(exc, "loop")
                    await self._rest(self.settings.idle_delay())
                    continue
                if begun is None:
                    if changes is None:
                        await self._rest(self.settings.idle_delay())
                    elif not watching:
                        # Register, then look again at once: a submit since the empty begin
                        # was not notified, one from now on is.
                        await idle.enter_async_context(changes.watching("queue"))
                        watching = True
                    else:
                        await changes.wait("queue", generation, self.settings.idle_delay(), freed)
                    continue
                if watching:
                    await idle.aclose()  # busy again (the registration lingers a few seconds)
                    watching = False
                # A lease taken while stop() arrived still runs (within the shutdown deadline):
                # its attempt is recorded already, and giving it back would burn that attempt.
                name = f"dg-attempt-{begun.lease.entry.entry_id}"
                unit = spawn(functools.partial(self._slot, begun, run_id), name)
                self._running.add(unit)
                unit.add_done_callback(self._unit_done)

    def _unit_done(self, unit: Unit) -> None:
        self._running.discard(unit)
        if self._freed is not None:
            self._freed.set()

    async def _slot(self, begun: AttemptBegun, run_id: str) -> None:
        """One attempt as the dispatcher runs it: errors are logged, a busy thread backs off."""
        try:
            report = await self._process(begun, run_id)
        except Exception as exc:
            log_failure(exc, "attempt")
            await self._rest(self.settings.idle_delay())
            return
        if report.note == "busy":
            await self._rest(self.settings.idle_delay(2.0))  # this unit backs off (D41)

    async def _drain(self, signals: Signals, freed: Wake) -> None:
        """Give running attempts ``shutdown_deadline`` to finish (a forced stop cuts it short)."""
        deadline = time.monotonic() + self.shutdown_deadline.total_seconds()
        while True:
            freed.clear()  # then look: an attempt that ends from now on sets it
            remaining = deadline - time.monotonic()
            if not self._running or self._forced or remaining <= 0:
                return
            await signals.wait(freed, remaining)

    async def _abandon_running(self) -> None:
        """Cancel what still runs; release its claim and lease (D44)."""
        self._abandoned = True  # an attempt still beginning gives itself back (_process)
        attempts = list(self._attempts)
        for attempt in attempts:
            log.info("entry %d: shutdown; releasing claim and lease", attempt.lease.entry.entry_id)
            attempt.lose(WorkerStopped("the worker shut down; this attempt's claim was released"))
        for attempt in attempts:
            with contextlib.suppress(StoreError):
                await attempt.finish(None)
        if ASYNC:  # wait for the cancelled tasks to unwind (a thread cannot be cancelled)
            tasks = set(self._running)
            if tasks:
                _, pending = await asyncio.wait(tasks, timeout=_ABANDON_GRACE)
                for task in pending:
                    log.warning("%s ignores cancellation; cancelling its attempt", task.get_name())
                    task.cancel()

    async def _process(self, begun: AttemptBegun, run_id: str) -> AttemptReport:
        """Everything after `begin_attempt`, with the lease renewed meanwhile."""
        settings = self.settings
        if isinstance(self.handler, App):  # an App kind's own backoff and attempt cap
            options = self.handler.options(begun.entry.kind)
            backoff = options.backoff or settings.backoff
            settings = replace(settings, backoff=backoff, max_attempts=options.max_attempts)
        attempt = _Attempt(self, begun.lease, settings)
        self._attempts.add(attempt)
        if self._abandoned:
            # Begun while shutdown gave up on running attempts: give it back (D44); `run` then
            # releases the claim and reports "lost".
            attempt.lose(WorkerStopped("the worker shut down; this attempt's claim was released"))
            with contextlib.suppress(StoreError):
                await attempt.finish(None)
        try:
            return await attempt.run(begun, run_id)  # logged there
        finally:
            self._attempts.discard(attempt)
            await attempt.stop_renewing()


__all__ = [
    "AsyncHandler",
    "AsyncRunContext",
    "AsyncWorker",
    "AttemptReport",
    "LostFlag",
    "Note",
    "RunContextBase",
    "WorkerSettings",
    "WorkerStopped",
    "closing_note",
    "describe",
    "exhausted_outcome",
    "failure_outcome",
    "invalid_output",
    "new_id",
    "next_commit",
    "output_effect_key",
    "recorded_output",
]
