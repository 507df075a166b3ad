"""The worker runtime: runs a user's handler for queued entries, following SPEC §5 to the letter.

`Worker` runs ``concurrency`` attempt loops in threads, each beginning and running one attempt at
a time. The attempt itself — `begin_attempt` (SPEC §11), the handler, `finish_attempt` — is
`durable_graph.worker.attempt_generated.Attempt`, generated from the async worker's
``attempt_async.py`` (one source for both workers' decisions); this module says only how a
thread runs it: `_Attempt`, renewed by its loop's `_Renewer` thread, finished once.

The renewing thread renews the lease and the claim every ``min(claim_policy.renew_every,
lease_ttl / 3)``. When a renewal learns the attempt lost its lease or claim (`LeaseLost`,
`ClaimLost`, `EntryClosed` e.g. after `RunQueue.cancel`), the attempt is stopped cooperatively:
``ctx.cancelled`` turns true and every further ``ctx`` write raises that error.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar, Unpack

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import StoreBusy, StoreError, ValidationError
from durable_graph.core.model import (
    JSON,
    Checkpoint,
    Commit,
    Event,
    EventIn,
    Lease,
    QueueEntry,
)
from durable_graph.core.polling import Changes
from durable_graph.core.workers import WorkerState
from durable_graph.worker.app import App
from durable_graph.worker.attempt_generated import Attempt, begin
from durable_graph.worker.context import (
    LostFlag,
    RunContextBase,
    WorkerStopped,
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
    log_beat_failure,
    log_failure,
    log_stop_signal,
    output_effect_key,
    recorded_output,
    worker_beat,
)
from durable_graph.worker.settings import WorkerOptions, WorkerSettings
from durable_graph.worker.signals import POLL, StopSignals

log = logging.getLogger("durable_graph.worker")

T = TypeVar("T")

Handler = Callable[["RunContext"], Any]
"""A user's run: receives a `RunContext`, returns the run's output (a JSON value)."""


# --- an attempt in a thread ----------------------------------------------------------------


class _Renewer:
    """Renews the attempts of one attempt loop, one at a time, each every ``renew_every``, from a
    thread it keeps while attempts follow one another: a thread started and joined for every
    attempt cost ~0.3 ms of a job (issue 38). The thread ends after `IDLE` seconds without an
    attempt, and the next attempt starts another."""

    IDLE = 5.0

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._attempt: _Attempt | None = None
        self._renewing: _Attempt | None = None  # the attempt whose renewal is in flight
        self._thread: threading.Thread | None = None

    def watch(self, attempt: _Attempt) -> None:
        """Renew ``attempt`` from now on (one renewal interval from now first)."""
        with self._cond:
            self._attempt = attempt
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="dg-renew", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def unwatch(self, attempt: _Attempt) -> None:
        """Stop renewing ``attempt``, after its renewal in flight, if any (unless called from
        that renewal)."""
        with self._cond:
            if self._attempt is attempt:
                self._attempt = None
                self._cond.notify_all()
            if threading.current_thread() is not self._thread:
                while self._renewing is attempt:
                    self._cond.wait()

    def _run(self) -> None:
        with self._cond:
            while True:
                attempt = self._attempt
                if attempt is None:
                    if not self._cond.wait(self.IDLE) and self._attempt is None:
                        self._thread = None
                        return
                    continue
                due = time.monotonic() + attempt.settings.renew_every
                while self._attempt is attempt and (left := due - time.monotonic()) > 0:
                    self._cond.wait(left)
                if self._attempt is not attempt:
                    continue
                self._renewing = attempt
                self._cond.release()
                try:
                    renewed = attempt.renew()
                finally:
                    self._cond.acquire()
                    self._renewing = None
                    self._cond.notify_all()
                if not renewed and self._attempt is attempt:
                    self._attempt = None  # lost: nothing more to renew


class _Attempt(Attempt):
    """An attempt run in its worker's thread; its loop's `_Renewer` renews its lease and claim."""

    def __init__(
        self, worker: Worker, lease: Lease, settings: WorkerSettings, renewer: _Renewer
    ) -> None:
        super().__init__(worker.store, lease, settings, log, worker._stop.is_set)
        self._handler = worker.handler
        self._renewer = renewer

    def start(self) -> None:
        self._renewer.watch(self)

    def stop(self) -> None:
        """Stop renewing (after the renewal in flight, if any)."""
        self._renewer.unwatch(self)

    def finish(self, outcome: Settlement, commit: Commit | None = None) -> QueueEntry | None:
        """Stop renewing, then `settle` — once: a later call (shutdown's, or the attempt's own
        after shutdown gave it back) does nothing and gets None."""
        if not self.start_finishing():
            return None
        self.stop()
        return self.settle(outcome, commit)

    def call_handler(self, call: HandlerCall) -> HandlerResult:
        """The handler, called in this thread."""
        ctx = RunContext.starting(self.store, call, self)
        try:
            return HandlerResult(output=self._handler(ctx), head=ctx.head, last=ctx.last)
        except Exception as exc:  # D43: the attempt decides between retry and Failed
            return HandlerResult(error=exc, head=ctx.head, last=ctx.last)


# --- what the handler sees ---------------------------------------------------------------


class RunContext(RunContextBase[Checkpointer]):
    """One attempt of one queue entry, as the handler sees it.

    ``plan`` says what to do: `Fresh` (apply ``entry.input``) or `Resume` (continue from
    ``plan.checkpoint``). `commit` chains checkpoints under the attempt's claim; once the
    attempt has lost its lease or claim (e.g. its entry was cancelled), ``cancelled`` is true,
    `cancel_event` is set and every write raises. A handler that waits (on I/O, a sleep) waits
    on the event instead, `wait_cancelled(timeout)`, to stop promptly (SPEC §13).
    """

    @property
    def cancel_event(self) -> threading.Event:
        """Set when the attempt is lost; wait on it rather than `time.sleep`."""
        return self._keeper.lost_event

    def wait_cancelled(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` seconds (None: for ever) for the attempt to be lost; True when
        it was (stop and return), False when the time ran out first."""
        return self.cancel_event.wait(timeout)

    def commit(
        self,
        state: JSON,
        next: Sequence[str] = (),
        metadata: JSON = None,
        events: Sequence[EventIn] = (),
    ) -> Checkpoint:
        """Commit a checkpoint whose parent is the current head; ``next=()`` ends the run."""
        self.check_writable()
        commit = next_commit(self.run_id, self._head, state, next, metadata, events)
        checkpoint = self._unless_busy(lambda: self.store.commit(self._claim, commit))
        self._head = checkpoint
        return checkpoint

    def append_events(self, events: Sequence[EventIn]) -> list[Event]:
        """Append events to the thread's log (tagged with this run id), without a checkpoint."""
        self.check_writable()
        return self._unless_busy(
            lambda: self.store.append_events(self._claim, events, run_id=self.run_id)
        )

    def record_effect(self, key: str, fn: Callable[[], JSON]) -> JSON:
        """The value recorded under ``key``; ``fn`` runs only when none is recorded yet.

        First write wins: if two attempts race, both return the first recorded value. The
        thread needs a commit first (`NotFound` otherwise). ``fn`` may run more than once if an
        attempt crashes between running it and recording its value.
        """
        self.check_writable()
        recorded = self.store.get_effect(self.thread_id, key)
        if recorded is not None:
            return recorded.value
        value = fn()
        self.check()
        return self._unless_busy(
            lambda: self.store.record_effect(self._claim, key, value, run_id=self.run_id)
        ).value

    def _unless_busy(self, call: Callable[[], T]) -> T:
        """``call``, made again while the store is only busy (`busy_wait`)."""
        started = time.monotonic()
        while True:
            try:
                return call()
            except StoreBusy as exc:
                self.cancel_event.wait(self.busy_wait(exc, started))


# --- the worker ----------------------------------------------------------------------------


@dataclass
class _Slot:
    attempt: _Attempt | None = None
    renewer: _Renewer = field(default_factory=_Renewer)


class Worker:
    """Leases entries from ``store.run_queue`` and runs ``handler`` for each (SPEC §5)."""

    def __init__(
        self,
        store: Checkpointer,
        handler: Handler,
        **options: Unpack[WorkerOptions],
    ) -> None:
        """``options``: `WorkerOptions` (holder, concurrency, lease_ttl, claim_policy, tenant,
        poll_interval, shutdown_deadline), each checked (`ValidationError` naming it)."""
        if not callable(handler):
            raise ValidationError("handler must be callable")
        if isinstance(handler, App):  # SPEC §15: several handlers by kind; only those leased
            if not handler.kinds:
                raise ValidationError("handler: the App registers no handler")
            options.setdefault("kinds", handler.kinds)
        self.settings = settings = WorkerSettings.check(**options)
        self.store = store
        self.handler = handler
        self.holder = settings.holder
        self.concurrency = settings.concurrency
        self.lease_ttl = settings.lease_ttl
        self.claim_policy = settings.claim_policy
        self.tenant = settings.tenant
        self.poll_interval = settings.poll_interval
        self.shutdown_deadline = settings.shutdown_deadline
        self._stop = threading.Event()
        self._force = threading.Event()
        self._abandoned = threading.Event()
        self._wakes: set[threading.Event] = set()
        self._lock = threading.Lock()
        self._slots: list[_Slot] = []
        self._once = threading.local()  # run_once's slot, one per calling thread

    # --- lifecycle --------------------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def stop(self) -> None:
        """Stop leasing; `run` lets running attempts finish within ``shutdown_deadline``."""
        self._stop.set()
        self._wake_idle()

    def _wake_idle(self) -> None:
        with self._lock:
            for wake in self._wakes:
                wake.set()

    def run(self) -> None:
        """Run ``concurrency`` attempt loops until `stop` (or SIGTERM/SIGINT), then shut down.

        Shutdown: no new leases; running attempts get ``shutdown_deadline`` to finish (a second
        signal cuts the wait short); the rest are cancelled (their ``ctx`` raises `WorkerStopped`) and their claims and leases
        released, so another worker resumes them at once.
        """
        with StopSignals().installed() as signals:
            threads = []
            for index in range(self.concurrency):
                slot = _Slot()
                with self._lock:
                    self._slots.append(slot)
                thread = threading.Thread(
                    target=self._loop, args=(slot,), name=f"dg-worker-{index}", daemon=True
                )
                thread.start()
                threads.append(thread)
            log.info("worker %s started (%d slot(s))", self.holder, self.concurrency)
            every = self.settings.heartbeat_every.total_seconds()
            next_beat = time.monotonic()
            while not self._stop.is_set():
                if time.monotonic() >= next_beat:  # issue 26 item 13: idle workers are seen
                    self._beat("busy" if self._busy() else "idle")
                    next_beat = time.monotonic() + every
                self._stop.wait(min(POLL, max(0.0, next_beat - time.monotonic())))
                self._on_signals(signals.take())
            log.info("worker %s stopping", self.holder)
            deadline = time.monotonic() + self.shutdown_deadline.total_seconds()
            while (
                any(t.is_alive() for t in threads)
                and time.monotonic() < deadline
                and not self._force.is_set()
            ):
                for thread in threads:
                    thread.join(POLL)
                self._on_signals(signals.take())
            self._abandon_running()
            self._beat("stopped")
            log.info("worker %s stopped", self.holder)

    def run_once(self) -> AttemptReport | None:
        """Lease and process at most one entry in the calling thread; None if none was ready."""
        slot: _Slot | None = getattr(self._once, "slot", None)
        if slot is None:  # one per calling thread, so that its renewer outlives one attempt
            slot = self._once.slot = _Slot()
        return self._attempt(slot)

    # --- internals --------------------------------------------------------------------------

    def _busy(self) -> bool:
        with self._lock:
            return any(slot.attempt is not None for slot in self._slots)

    def _beat(self, state: WorkerState) -> None:
        try:
            self.store.run_queue.worker_heartbeat(worker_beat(self.settings, state))
        except Exception as exc:  # the registry is for people; a failed beat stops nothing
            log_beat_failure(log, self.holder, exc)

    def _on_signals(self, received: list[int]) -> None:
        """SIGTERM / SIGINT, taken by the main thread: the first stops leasing, a second stops
        waiting for running attempts."""
        for signum in received:
            again = self._stop.is_set()
            log_stop_signal(log, self.holder, signum, again)
            (self._force if again else self._stop).set()
            self._wake_idle()

    def _abandon_running(self) -> None:
        """Past the shutdown deadline: cancel what still runs, release its claim and lease (D44)."""
        with self._lock:
            self._abandoned.set()  # an attempt still beginning gives itself back (_attempt)
            attempts = [slot.attempt for slot in self._slots if slot.attempt is not None]
        for attempt in attempts:
            entry_id = attempt.lease.entry.entry_id
            log.info("entry %d: shutdown deadline passed; releasing claim and lease", entry_id)
            attempt.lose(WorkerStopped("the worker shut down; this attempt's claim was released"))
            attempt.finish(None)

    def _idle(self, scale: float = 1.0) -> None:
        self._stop.wait(self.settings.idle_delay(scale))

    def _wait_for_work(self, changes: Changes, generation: int) -> None:
        """Idle until the queue is notified (SPEC §11), `stop`, or one poll interval."""
        wake = threading.Event()
        with self._lock:
            if self._stop.is_set():
                return
            self._wakes.add(wake)
        try:
            changes.wait("queue", generation, self.settings.idle_delay(), wake)
        finally:
            with self._lock:
                self._wakes.discard(wake)

    def _loop(self, slot: _Slot) -> None:
        changes: Changes | None = getattr(self.store, "changes", None)
        with contextlib.ExitStack() as idle:
            watching = False  # registered for queue notifications: only while idle
            while not self._stop.is_set():
                generation = changes.generation("queue") if changes is not None else 0
                try:
                    report = self._attempt(slot)
                except Exception as exc:
                    log_failure(log, exc, "loop")
                    self._idle()
                    continue
                if report is not None and watching:
                    idle.close()  # busy again (the registration lingers a few seconds)
                    watching = False
                if report is None:
                    if changes is None:
                        self._idle()
                    elif not watching:
                        # Register, then look again at once: a submit since the empty begin
                        # was not notified, one from now on is.
                        idle.enter_context(changes.watching("queue"))
                        watching = True
                    else:
                        self._wait_for_work(changes, generation)
                elif report.note == "busy":
                    self._idle(2.0)

    def _attempt(self, slot: _Slot) -> AttemptReport | None:
        run_id = new_id()
        begun = begin(self.store, self.settings, run_id)
        if begun is None:
            return None
        attempt = _Attempt(self, begun.lease, self._settings_of(begun.entry.kind), slot.renewer)
        attempt.start()
        with self._lock:
            slot.attempt = attempt
        if self._abandoned.is_set():
            # Begun while shutdown gave up on running attempts: give it back (D44); `run` then
            # releases the claim and reports "lost".
            attempt.lose(WorkerStopped("the worker shut down; this attempt's claim was released"))
            with contextlib.suppress(StoreError):
                attempt.finish(None)
        try:
            return attempt.run(begun, run_id)  # logged there
        finally:
            slot.attempt = None
            attempt.stop()

    def _settings_of(self, kind: str) -> WorkerSettings:
        """The settings of an attempt of ``kind``: an `App` kind's backoff and attempt cap."""
        if not isinstance(self.handler, App):
            return self.settings
        options = self.handler.options(kind)
        return replace(
            self.settings,
            backoff=options.backoff or self.settings.backoff,
            max_attempts=options.max_attempts,
        )


__all__ = [
    "AttemptReport",
    "Handler",
    "LostFlag",
    "Note",
    "RunContext",
    "RunContextBase",
    "Worker",
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
