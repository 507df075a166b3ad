"""The async worker runtime: `AsyncWorker` runs ``async def`` handlers, many at once on one loop.

The attempt (SPEC §5, §11, D40-D44) is `durable_graph.worker.attempt_async.AsyncAttempt`, the
one source of both workers' decisions (the sync `Worker`'s is generated from it); this module says
only how an attempt runs on an event loop: `_Attempt` awaits its handler in a task of its own
(cancelled once the attempt is lost), renews from another task, and finishes once, shielded.

Concurrency (D52): up to ``concurrency`` attempts run as tasks on the calling event loop; one
dispatcher leases only while a slot is free, so an idle worker makes one lease call per poll
whatever its concurrency. Each attempt's lease and claim are renewed by a background task of its
own. No threads are started: with `AsyncPostgresCheckpointer` the worker is pure asyncio (the
in-memory and SQLite async stores run each call in a worker thread, as they always do).

Shutdown (D44, D52): `stop` (or SIGTERM / SIGINT with ``install_signal_handlers=True``) wakes the
dispatcher from its idle wait and stops leasing; running attempts get ``shutdown_deadline`` (a
second signal cuts it short); then each one still running is lost (``ctx.cancelled``, further
``ctx`` writes raise `WorkerStopped`), its handler task is cancelled, and its claim and lease are
released so another worker resumes it at once. Cancelling the task running `run` or `run_once`
does the same at once, then re-raises `CancelledError`. Releasing and closing are shielded: a
cancellation never leaves a lease half-closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import signal
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
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
from durable_graph.core.workers import WorkerState
from durable_graph.worker.attempt_async import AsyncAttempt, begin
from durable_graph.worker.context import RunContextBase, WorkerStopped, new_id, next_commit
from durable_graph.worker.flow import (
    AttemptReport,
    HandlerCall,
    HandlerResult,
    Settlement,
    log_beat_failure,
    log_failure,
    log_stop_signal,
    worker_beat,
)
from durable_graph.worker.settings import WorkerOptions, WorkerSettings

log = logging.getLogger("durable_graph.worker.aio")
T = TypeVar("T")

AsyncHandler = Callable[["AsyncRunContext"], Awaitable[Any]]
"""A user's run: ``async def handler(ctx: AsyncRunContext) -> JSON``."""

Events = Sequence[EventIn]  # keeps `commit`'s signature short
_ABANDON_GRACE = 5.0
"""Seconds an abandoned attempt gets to unwind after its handler task was cancelled."""


# --- an attempt on the event loop ----------------------------------------------------------


class _Attempt(AsyncAttempt):
    """An attempt whose handler runs in a task of its own; another task renews its lease and
    claim."""

    def __init__(self, worker: AsyncWorker, lease: Lease) -> None:
        super().__init__(worker.store, lease, worker.settings, log, lambda: worker.stopping)
        self._handler = worker.handler
        self.handler_task: asyncio.Task[Any] | None = None  # cancelled if the attempt is lost
        self._renewer: asyncio.Task[None] | None = None
        self._stop_renewing = asyncio.Event()
        self._finished: asyncio.Future[QueueEntry | None] | None = None

    def start(self) -> None:
        self._renewer = asyncio.create_task(
            self._renewing(), name=f"dg-renew-{self.lease.entry.entry_id}"
        )

    def lose(self, error: StoreError) -> None:
        first = self.lost is None
        super().lose(error)
        if first:
            # SPEC §13, issue 26 item 7: a lost attempt (its entry cancelled, re-leased, the
            # worker stopping) stops now: its handler's task is cancelled.
            self.cancel_handler()

    def cancel_handler(self) -> None:
        if self.handler_task is not None:
            self.handler_task.cancel()

    async def stop_renewing(self) -> None:
        """Stop the renewer, letting a renewal in flight finish (a cancelled PostgreSQL call
        would cost its connection); if we are cancelled meanwhile, cancel it too."""
        self._stop_renewing.set()
        renewer = self._renewer
        if renewer is None or renewer.done():
            return
        try:
            await asyncio.wait({renewer})
        except asyncio.CancelledError:
            renewer.cancel()
            raise

    async def _renewing(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop_renewing.wait(), self.settings.renew_every)
            if self._stop_renewing.is_set() or not await self.renew():
                return

    async def finish(self, outcome: Settlement, commit: Commit | None = None) -> QueueEntry | None:
        """Stop renewing, then `settle` — once.

        The first call decides; later calls (the attempt's own, or the worker's at shutdown) wait
        for it and get its answer. The work is shielded: cancelling a caller never interrupts a
        close half-way.
        """
        if self.start_finishing():
            self._finished = asyncio.ensure_future(self._stop_then_settle(outcome, commit))
            self._finished.add_done_callback(self._log_failure)
        if self._finished is None:  # finished without a call: the store closed the entry
            return None
        return await asyncio.shield(self._finished)

    async def _stop_then_settle(
        self, outcome: Settlement, commit: Commit | None
    ) -> QueueEntry | None:
        await self.stop_renewing()
        return await self.settle(outcome, commit)

    def _log_failure(self, finishing: asyncio.Future[QueueEntry | None]) -> None:
        if not finishing.cancelled() and finishing.exception() is not None:
            log.warning(
                "entry %d: releasing the lease failed (it will expire): %s",
                self.lease.entry.entry_id,
                finishing.exception(),
            )

    async def call_handler(self, call: HandlerCall) -> HandlerResult:
        """The handler awaited in a task of its own (cancelled if the attempt is lost)."""
        ctx = AsyncRunContext.starting(self.store, call, self)
        handler_task = asyncio.ensure_future(self._handler(ctx))
        self.handler_task = handler_task
        try:
            return HandlerResult(output=await handler_task, head=ctx.head, last=ctx.last)
        except BaseException as exc:  # D43: the attempt decides between retry and Failed
            this = asyncio.current_task()
            if isinstance(exc, asyncio.CancelledError) and this is not None and this.cancelling():
                raise  # our own task is being cancelled: `run` releases, then re-raises
            if not isinstance(exc, Exception | asyncio.CancelledError):
                raise  # KeyboardInterrupt, SystemExit
            return HandlerResult(error=exc, head=ctx.head, last=ctx.last)
        finally:
            self.handler_task = None


# --- what the handler sees ---------------------------------------------------------------


class AsyncRunContext(RunContextBase[AsyncCheckpointer]):
    """One attempt of one queue entry, as an async handler sees it.

    ``plan`` says what to do: `Fresh` (apply ``entry.input``) or `Resume` (continue from
    ``plan.checkpoint``). `commit` chains checkpoints under the attempt's claim; once the attempt
    has lost its lease or claim, ``cancelled`` is true and every write raises. Await the writes
    one at a time: each commit's parent is the head the previous one left.
    """

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
        """The value recorded under ``key``; ``fn`` (sync or async) runs only when none is yet.

        First write wins, as for `durable_graph.worker.sync.RunContext.record_effect`.
        """
        self.check_writable()
        recorded = await self.store.get_effect(self.thread_id, key)
        if recorded is not None:
            return recorded.value
        value = fn()
        if inspect.isawaitable(value):
            value = await value
        self.check()
        checked: JSON = value  # awaited above when awaitable
        record = await self._unless_busy(
            lambda: self.store.record_effect(self._claim, key, checked, run_id=self.run_id)
        )
        return record.value

    async def _unless_busy(self, call: Callable[[], Awaitable[T]]) -> T:
        """``call``, made again while the store is only busy (`busy_wait`)."""
        started = time.monotonic()
        while True:
            try:
                return await call()
            except StoreBusy as exc:
                await asyncio.sleep(self.busy_wait(exc, started))


# --- the worker ----------------------------------------------------------------------------


def _is_async_callable(handler: object) -> bool:
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        getattr(handler, "__call__", None)  # noqa: B004 - an object with an async __call__
    )


class AsyncWorker:
    """Leases entries from ``store.run_queue`` and awaits ``handler`` for each (SPEC §5)."""

    def __init__(
        self,
        store: AsyncCheckpointer,
        handler: AsyncHandler,
        *,
        install_signal_handlers: bool = False,
        **options: Unpack[WorkerOptions],
    ) -> None:
        """``options``: `WorkerOptions`, as for `durable_graph.worker.sync.Worker`."""
        if not _is_async_callable(handler):
            raise ValidationError("handler must be an async function (async def handler(ctx))")
        self.settings = WorkerSettings.check(**options)
        self.store = store
        self.handler = handler
        self.holder = self.settings.holder
        self.install_signal_handlers = bool(install_signal_handlers)
        self._stopping = False
        self._forced = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._force_event: asyncio.Event | None = None
        self._running: set[asyncio.Task[None]] = set()
        self._attempts: set[_Attempt] = set()
        self._abandoned = False

    # --- lifecycle --------------------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        return self._stopping

    @property
    def running_attempts(self) -> int:
        """How many attempts are running now."""
        return len(self._attempts)

    def stop(self, *, force: bool = False) -> None:
        """Stop leasing; `run` lets running attempts finish within ``shutdown_deadline``.

        ``force=True`` (or a second call from a signal) does not wait for them. Safe to call from
        any thread.
        """
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                current: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
            except RuntimeError:
                current = None
            if current is not loop:
                loop.call_soon_threadsafe(self._stop_now, force)
                return
        self._stop_now(force)

    def _stop_now(self, force: bool) -> None:
        self._stopping = True
        if self._stop_event is not None:
            self._stop_event.set()
        if force:
            self._forced = True
            if self._force_event is not None:
                self._force_event.set()

    async def run(self) -> None:
        """Run attempts, up to ``concurrency`` at once, until `stop`; then shut down (D44: late
        attempts are cancelled, their claim and lease released)."""
        self._loop = asyncio.get_running_loop()
        self._stop_event = asyncio.Event()
        self._force_event = asyncio.Event()
        if self._stopping:
            self._stop_event.set()
        if self._forced:
            self._force_event.set()
        with self._signals():
            log.info("worker %s started (%d slot(s))", self.holder, self.settings.concurrency)
            beats = asyncio.create_task(self._beats(), name=f"dg-heartbeat-{self.holder}")
            try:
                await self._dispatch()
                log.info("worker %s stopping", self.holder)
                await self._drain()
            except asyncio.CancelledError:
                log.info("worker %s cancelled: releasing running attempts", self.holder)
                self._stopping = True
                beats.cancel()
                await self._abandon_running()
                raise
            beats.cancel()
            await asyncio.wait([beats])  # so that no beat of before lands after "stopped"
            await self._abandon_running()
            await self._beat("stopped")
            log.info("worker %s stopped", self.holder)

    async def run_once(self) -> AttemptReport | None:
        """Lease and process at most one entry in the calling task; None if none was ready."""
        run_id = new_id()
        begun = await begin(self.store, self.settings, run_id)
        if begun is None:
            return None
        return await self._process(begun, run_id)

    # --- internals --------------------------------------------------------------------------

    async def _beats(self) -> None:
        """Issue 26 item 13: record in the store every ``heartbeat_every`` that this worker
        lives, idle or busy, so a worker holding no lease is seen too."""
        every = self.settings.heartbeat_every.total_seconds()
        while True:
            await self._beat("busy" if self._attempts else "idle")
            await asyncio.sleep(every)

    async def _beat(self, state: WorkerState) -> None:
        try:
            await self.store.run_queue.worker_heartbeat(worker_beat(self.settings, state))
        except Exception as exc:  # the registry is for people; a failed beat stops nothing
            log_beat_failure(log, self.holder, exc)

    @contextlib.contextmanager
    def _signals(self) -> Iterator[None]:
        if not self.install_signal_handlers:
            yield
            return
        loop = asyncio.get_running_loop()
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
        for sig in previous:
            loop.add_signal_handler(sig, self._on_signal, sig)
        try:
            yield
        finally:
            for sig, handler in previous.items():
                loop.remove_signal_handler(sig)
                if handler is not None:
                    signal.signal(sig, handler)

    def _on_signal(self, signum: int) -> None:
        again = self._stopping
        log_stop_signal(log, self.holder, signum, again)
        self._stop_now(force=again)

    async def _wait(self, timeout: float | None, *tasks: asyncio.Future[Any]) -> None:
        """Sleep up to ``timeout`` seconds, waking early on `stop` or when any of ``tasks`` ends."""
        assert self._stop_event is not None
        waiter = asyncio.ensure_future(self._stop_event.wait())
        try:
            await asyncio.wait(
                {waiter, *tasks}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            waiter.cancel()

    async def _dispatch(self) -> None:
        """Lease while a slot is free, start each lease as a task; idle when nothing is ready
        (woken by queue notifications where the store has them, SPEC §11)."""
        changes: AsyncChanges | None = getattr(self.store, "changes", None)
        async with contextlib.AsyncExitStack() as idle:
            watching = False  # registered for queue notifications: only while idle
            while not self._stopping:
                if len(self._running) >= self.settings.concurrency:
                    await self._wait(None, *self._running)
                    continue
                generation = changes.generation("queue") if changes is not None else 0
                run_id = new_id()
                try:
                    begun = await begin(self.store, self.settings, run_id)
                except Exception as exc:
                    log_failure(log, exc, "loop")
                    await self._wait(self.settings.idle_delay())
                    continue
                if begun is None:
                    if changes is None:
                        await self._wait(self.settings.idle_delay())
                    elif not watching:
                        # Register, then look again at once: a submit since the empty begin
                        # was not notified, one from now on is.
                        await idle.enter_async_context(changes.watching("queue"))
                        watching = True
                    else:
                        notified = asyncio.ensure_future(
                            changes.wait("queue", generation, self.settings.idle_delay())
                        )
                        try:
                            await self._wait(None, notified)
                        finally:
                            notified.cancel()
                    continue
                if watching:
                    await idle.aclose()  # busy again (the registration lingers a few seconds)
                    watching = False
                # A lease taken while stop() arrived still runs (within the shutdown deadline):
                # its attempt is recorded already, and giving it back would burn that attempt.
                task = asyncio.create_task(
                    self._slot(begun, run_id), name=f"dg-attempt-{begun.lease.entry.entry_id}"
                )
                self._running.add(task)
                task.add_done_callback(self._running.discard)

    async def _slot(self, begun: AttemptBegun, run_id: str) -> None:
        """One attempt as the dispatcher runs it: errors are logged, a busy thread backs off."""
        try:
            report = await self._process(begun, run_id)
        except Exception as exc:
            log_failure(log, exc, "attempt")
            await self._wait(self.settings.idle_delay())
            return
        if report.note == "busy":
            await self._wait(self.settings.idle_delay(2.0))  # this slot backs off (D41)

    async def _drain(self) -> None:
        """Give running attempts ``shutdown_deadline`` to finish (a forced stop cuts it short)."""
        assert self._force_event is not None
        deadline = time.monotonic() + self.settings.shutdown_deadline.total_seconds()
        force = asyncio.ensure_future(self._force_event.wait())
        try:
            while self._running and not force.done():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                await asyncio.wait(
                    {force, *self._running}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
                )
        finally:
            force.cancel()

    async def _abandon_running(self) -> None:
        """Cancel what still runs; release its claim and lease (D44); wait for it to unwind."""
        self._abandoned = True  # an attempt still beginning gives itself back (_process)
        attempts = list(self._attempts)
        for attempt in attempts:
            log.info("entry %d: shutdown; releasing claim and lease", attempt.lease.entry.entry_id)
            attempt.lose(WorkerStopped("the worker shut down; this attempt's claim was released"))
            attempt.cancel_handler()
        results = await asyncio.gather(
            *(attempt.finish(None) for attempt in attempts), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, StoreError):
                raise result
        tasks = set(self._running)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=_ABANDON_GRACE)
            for task in pending:
                log.warning("%s ignores cancellation; cancelling its attempt", task.get_name())
                task.cancel()

    async def _process(self, begun: AttemptBegun, run_id: str) -> AttemptReport:
        """Everything after `begin_attempt`, with the lease renewed meanwhile."""
        attempt = _Attempt(self, begun.lease)
        attempt.start()
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


__all__ = ["AsyncHandler", "AsyncRunContext", "AsyncWorker", "WorkerStopped"]
