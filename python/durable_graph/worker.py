"""The worker runtime: runs a user's handler for queued entries, following SPEC §5 to the letter.

One attempt, in order (the at-most-once protocol):

1. ``lease(holder, ttl, tenant, run_id=new)`` — the lease records the attempt in the same call.
   ``Exhausted`` → settle the entry (``Completed`` if an earlier attempt finished, else
   ``Failed("exhausted")``); ``ThreadDeleted`` → the store already closed the entry; no attempt
   (the run id was taken) → `record_attempt` with fresh run ids.
2. ``claim(thread, holder=run_id)``; while another claim is live the worker keeps its lease
   (renewed) and retries for one claim ttl, then releases the lease and backs off (D41).
3. The entry is read **after** the claim is held, then ``latest_of_runs`` over its attempts, then
   `plan_attempt`. ``Finished`` → close ``Completed`` with the recorded output, without calling
   the handler. ``Fresh`` / ``Resume`` → call ``handler(ctx)``.
4. The handler returns → its output is recorded (effect `output_effect_key`) under the claim, the
   claim is released and the entry closed ``Completed(output)``. It raises → if attempts remain,
   claim and lease are released (the entry is retried, resuming from its last checkpoint), else
   the entry is closed ``Failed(str(exc))``.

A background thread renews the lease and the claim every ``min(claim_policy.renew_every,
lease_ttl / 3)``. When a renewal learns the attempt lost its lease or claim (`LeaseLost`,
`ClaimLost`, `EntryClosed` e.g. after `RunQueue.cancel`), the attempt is stopped cooperatively:
``ctx.cancelled`` turns true and every further ``ctx`` write raises that error.

Worker decisions (docs/decisions.md D40-D44): the output is recorded as an effect so a later
attempt that finds the run ``Finished`` closes with the same output (D40); a busy thread is waited
for while holding the lease, so a crashed worker's live claim does not burn attempts (D41); the
exhausted path still plans, so a run that finished before its worker crashed closes
``Completed`` (D42).
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from types import FrameType
from typing import Any, Generic, Literal, Protocol, TypeVar

from .checkpointer import Checkpointer
from .errors import (
    ClaimLost,
    EntryClosed,
    LeaseLost,
    NotFound,
    RunIdTaken,
    StoreError,
    ThreadBusy,
    ValidationError,
)
from .model import (
    ANY,
    JSON,
    AttemptPlan,
    AttemptStart,
    Cancelled,
    Checkpoint,
    Claim,
    ClaimPolicy,
    Commit,
    Completed,
    EffectRecord,
    EntryOutcome,
    Event,
    EventIn,
    Exhausted,
    Failed,
    Finished,
    Lease,
    QueueEntry,
    Started,
    TenantFilter,
    ThreadDeleted,
)
from .run_queue import RunQueue, plan_attempt
from .validation import (
    DEFAULT_MAX_VALUE_BYTES,
    check_duration,
    check_identifier,
    check_int,
    check_tenant_filter,
    encode_json,
)

log = logging.getLogger("durable_graph.worker")

Handler = Callable[["RunContext"], Any]
"""A user's run: receives a `RunContext`, returns the run's output (a JSON value)."""

Note = Literal[
    "completed",  # closed Completed (handler ran, or the run had already finished)
    "failed",  # closed Failed (last attempt raised, or exhausted)
    "retry",  # the handler raised with attempts left: lease released
    "thread_deleted",  # the store closed the entry Cancelled("thread_deleted")
    "busy",  # the thread's claim stayed taken: lease released, backing off
    "closed",  # the entry was closed by someone else (cancel, interrupt) after the lease
    "lost",  # the lease or claim was lost mid-attempt (renewal failed, cancelled, shutdown)
]

_RECORD_ATTEMPT_TRIES = 5
_CLAIM_RETRY_DELAY = 0.2


def new_id() -> str:
    """A fresh run or checkpoint id."""
    return uuid.uuid4().hex


def output_effect_key(entry_id: int) -> str:
    """The effect key under which the worker records an entry's output (D40)."""
    return f"durable_graph.output/{entry_id}"


@dataclass(frozen=True, slots=True)
class AttemptReport:
    """What one attempt did (returned by `Worker.run_once`, logged by `Worker.run`)."""

    entry_id: int
    thread_id: str
    run_id: str | None
    attempt: int | None
    plan: AttemptPlan | None
    outcome: EntryOutcome | None
    note: Note


class WorkerStopped(ClaimLost):
    """The worker shut down past its deadline and released this attempt's claim and lease."""


# --- the protocol's decisions (pure; shared with durable_graph.aio.worker.AsyncWorker) -------


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    """A worker's checked configuration, with the timings derived from it (sync and async)."""

    holder: str
    concurrency: int
    lease_ttl: timedelta
    claim_policy: ClaimPolicy
    tenant: TenantFilter
    poll_interval: timedelta
    shutdown_deadline: timedelta

    @classmethod
    def check(
        cls,
        *,
        holder: str | None,
        concurrency: int,
        lease_ttl: timedelta,
        claim_policy: ClaimPolicy,
        tenant: TenantFilter,
        poll_interval: timedelta,
        shutdown_deadline: timedelta,
    ) -> WorkerSettings:
        """Check every argument (`ValidationError` naming it); ``holder=None`` → host:pid:id."""
        if not isinstance(claim_policy, ClaimPolicy):
            raise ValidationError("claim_policy must be a ClaimPolicy")
        return cls(
            holder=check_identifier(
                "holder",
                holder
                if holder is not None
                else f"{socket.gethostname()}:{os.getpid()}:{new_id()[:8]}",
            ),
            concurrency=check_int("concurrency", concurrency, minimum=1, maximum=1024),
            lease_ttl=check_duration("lease_ttl", lease_ttl),
            claim_policy=claim_policy,
            tenant=check_tenant_filter("tenant", tenant, allow_any=True),
            poll_interval=check_duration("poll_interval", poll_interval),
            shutdown_deadline=check_duration("shutdown_deadline", shutdown_deadline),
        )

    @property
    def renew_every(self) -> float:
        """Seconds between renewals of the lease and the claim: ``min(renew_every, ttl / 3)``."""
        return min(self.claim_policy.renew_every, self.lease_ttl / 3).total_seconds()

    @property
    def claim_wait(self) -> float:
        """How long a busy thread's claim is waited for, lease held: one ttl + one renewal (D41)."""
        return self.claim_policy.ttl.total_seconds() + self.renew_every

    @property
    def claim_retry_delay(self) -> float:
        """Seconds between claim tries while the thread is busy (D41)."""
        return min(_CLAIM_RETRY_DELAY, self.poll_interval.total_seconds())

    def idle_delay(self, scale: float = 1.0) -> float:
        """Seconds to wait after an empty poll (``scale=2`` after a busy thread, D41), jittered."""
        return self.poll_interval.total_seconds() * scale * random.uniform(0.5, 1.5)


def next_commit(
    run_id: str,
    head: Checkpoint | None,
    state: JSON,
    next: Sequence[str] = (),
    metadata: JSON = None,
    events: Sequence[EventIn] = (),
) -> Commit:
    """The attempt's next checkpoint: a fresh id, chained onto ``head`` (the thread's head)."""
    return Commit(
        checkpoint_id=new_id(),
        parent_id=None if head is None else head.checkpoint_id,
        run_id=run_id,
        state=state,
        metadata=metadata,
        next=tuple(next),
        events=tuple(events),
    )


def recorded_output(record: EffectRecord | None) -> JSON:
    """The output recorded under `output_effect_key` (D40); None when none was recorded."""
    return None if record is None else record.value


def exhausted_outcome(plan: AttemptPlan, output: JSON) -> EntryOutcome:
    """D42: every attempt was used; ``Completed`` if the run finished anyway, else ``Failed``."""
    return Completed(output) if isinstance(plan, Finished) else Failed("exhausted")


def failure_outcome(entry: QueueEntry, exc: BaseException) -> Failed | None:
    """D43: the handler raised. None → retry (attempts remain); else the entry closes ``Failed``.

    ``entry`` is the entry read after the claim was held (its attempts include this one).
    """
    if len(entry.attempts) < entry.max_attempts:
        return None
    return Failed(str(exc) or type(exc).__name__)


def invalid_output(output: object) -> Failed | None:
    """D43: an output that is not a JSON value closes ``Failed`` (no retry); None when valid."""
    try:
        encode_json("output", output, DEFAULT_MAX_VALUE_BYTES)
    except ValidationError as exc:
        return Failed(f"the handler returned an invalid output: {exc}")
    return None


def closing_note(outcome: EntryOutcome, closed: QueueEntry | None) -> Note:
    """The report's note once the worker tried to close with ``outcome``."""
    if closed is None:
        return "lost"  # the lease was gone by the time the worker closed
    return "completed" if isinstance(outcome, Completed) else "failed"


def describe(report: AttemptReport) -> str:
    """One log line for an attempt."""
    attempt = report.attempt if report.attempt is not None else "-"
    plan = "" if report.plan is None else f" (plan {type(report.plan).__name__.lower()})"
    return (
        f"entry {report.entry_id} thread {report.thread_id} attempt {attempt}: {report.note}{plan}"
    )


# --- keeping the lease and the claim alive -------------------------------------------------


class _Keeper:
    """Renews one attempt's lease (and claim, once taken) in a background thread."""

    def __init__(self, store: Checkpointer, lease: Lease, interval: float) -> None:
        self._store = store
        self._queue: RunQueue = store.run_queue
        self.lease = lease
        self.claim: Claim | None = None
        self._interval = interval
        self._lock = threading.Lock()
        self._lost: StoreError | None = None
        self._stop = threading.Event()
        self._released = False
        self._thread = threading.Thread(
            target=self._run, name=f"dg-renew-{lease.entry.entry_id}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    @property
    def lost(self) -> StoreError | None:
        with self._lock:
            return self._lost

    def lose(self, error: StoreError) -> None:
        with self._lock:
            if self._lost is None:
                self._lost = error

    def set_claim(self, claim: Claim) -> None:
        with self._lock:
            self.claim = claim

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.lease = self._queue.renew(self.lease)
            except (LeaseLost, EntryClosed) as exc:
                self.lose(exc)
                return
            except StoreError as exc:  # transient: the lease stays current until re-leased
                log.warning("entry %d: lease renewal failed: %s", self.lease.entry.entry_id, exc)
            with self._lock:
                claim = self.claim
            if claim is None:
                continue
            try:
                renewed = self._store.renew_claim(claim)
            except ClaimLost as exc:
                self.lose(exc)
                return
            except StoreError as exc:
                log.warning("thread %s: claim renewal failed: %s", claim.thread_id, exc)
                continue
            with self._lock:
                if self.claim is claim:
                    self.claim = renewed

    def release_claim(self) -> None:
        """Release the claim if one is held (once; errors mean it is already gone)."""
        with self._lock:
            claim, self.claim = self.claim, None
        if claim is not None:
            with contextlib.suppress(StoreError):
                self._store.release_claim(claim)

    def abandon(self) -> None:
        """Stop renewing without touching the store (the entry is already closed)."""
        with self._lock:
            self._released = True
        self.stop()

    def finish(self, outcome: EntryOutcome | None) -> QueueEntry | None:
        """Stop renewing, release the claim, then close (or release) the lease, once.

        The claim goes first: while the lease is live no other worker can lease the thread, so
        nobody meets a claim that is about to be released. Returns the closed entry, or None.
        """
        with self._lock:
            if self._released:
                return None
            self._released = True
        self.stop()
        self.release_claim()
        try:
            if outcome is None:
                self._queue.release(self.lease)
                return None
            return self._queue.close(self.lease, outcome)
        except (LeaseLost, EntryClosed) as exc:
            self.lose(exc)
            return None


# --- what the handler sees ---------------------------------------------------------------


class LostFlag(Protocol):
    """What a context asks its attempt's keeper: the error that ended the attempt, if any."""

    @property
    def lost(self) -> StoreError | None: ...


StoreT = TypeVar("StoreT")


class RunContextBase(Generic[StoreT]):
    """What the sync and async run contexts share: the attempt's identity and its state.

    The writes (`commit`, `append_events`, `record_effect`) are the subclasses' own, sync or
    awaited.
    """

    def __init__(
        self,
        *,
        store: StoreT,
        entry: QueueEntry,
        plan: AttemptPlan,
        run_id: str,
        attempt: int,
        head: Checkpoint | None,
        keeper: LostFlag,
        claim: Claim,
    ) -> None:
        self.store = store
        self.entry = entry
        self.plan = plan
        self.run_id = run_id
        self.attempt = attempt
        self._head = head
        self._keeper = keeper
        self._claim = claim

    @property
    def thread_id(self) -> str:
        return self.entry.thread_id

    @property
    def input(self) -> JSON:
        return self.entry.input

    @property
    def head(self) -> Checkpoint | None:
        """The thread's head: read after the claim was taken, then each commit of this attempt."""
        return self._head

    @property
    def claim(self) -> Claim:
        return self._claim

    @property
    def cancelled(self) -> bool:
        """True once the attempt lost its lease or claim: stop working and return."""
        return self._keeper.lost is not None

    def check(self) -> None:
        """Raise the error that ended the attempt, if it ended (cooperative cancellation)."""
        lost = self._keeper.lost
        if lost is not None:
            raise type(lost)(str(lost))


class RunContext(RunContextBase[Checkpointer]):
    """One attempt of one queue entry, as the handler sees it.

    ``plan`` says what to do: `Fresh` (apply ``entry.input``) or `Resume` (continue from
    ``plan.checkpoint``). `commit` chains checkpoints under the attempt's claim; once the
    attempt has lost its lease or claim, ``cancelled`` is true and every write raises.
    """

    def commit(
        self,
        state: JSON,
        next: Sequence[str] = (),
        metadata: JSON = None,
        events: Sequence[EventIn] = (),
    ) -> Checkpoint:
        """Commit a checkpoint whose parent is the current head; ``next=()`` ends the run."""
        self.check()
        checkpoint = self.store.commit(
            self._claim, next_commit(self.run_id, self._head, state, next, metadata, events)
        )
        self._head = checkpoint
        return checkpoint

    def append_events(self, events: Sequence[EventIn]) -> list[Event]:
        """Append events to the thread's log (tagged with this run id), without a checkpoint."""
        self.check()
        return self.store.append_events(self._claim, events, run_id=self.run_id)

    def record_effect(self, key: str, fn: Callable[[], JSON]) -> JSON:
        """The value recorded under ``key``; ``fn`` runs only when none is recorded yet.

        First write wins: if two attempts race, both return the first recorded value. The
        thread needs a commit first (`NotFound` otherwise). ``fn`` may run more than once if an
        attempt crashes between running it and recording its value.
        """
        self.check()
        recorded = self.store.get_effect(self.thread_id, key)
        if recorded is not None:
            return recorded.value
        value = fn()
        self.check()
        return self.store.record_effect(self._claim, key, value, run_id=self.run_id).value


# --- the worker ----------------------------------------------------------------------------


@dataclass
class _Slot:
    keeper: _Keeper | None = None


class Worker:
    """Leases entries from ``store.run_queue`` and runs ``handler`` for each (SPEC §5)."""

    def __init__(
        self,
        store: Checkpointer,
        handler: Handler,
        *,
        holder: str | None = None,
        concurrency: int = 1,
        lease_ttl: timedelta = timedelta(seconds=30),
        claim_policy: ClaimPolicy = ClaimPolicy(),
        tenant: TenantFilter = ANY,
        poll_interval: timedelta = timedelta(seconds=1),
        shutdown_deadline: timedelta = timedelta(seconds=30),
    ) -> None:
        if not callable(handler):
            raise ValidationError("handler must be callable")
        self.settings = settings = WorkerSettings.check(
            holder=holder,
            concurrency=concurrency,
            lease_ttl=lease_ttl,
            claim_policy=claim_policy,
            tenant=tenant,
            poll_interval=poll_interval,
            shutdown_deadline=shutdown_deadline,
        )
        self.store = store
        self.handler = handler
        self.holder = settings.holder
        self.concurrency = settings.concurrency
        self.lease_ttl = settings.lease_ttl
        self.claim_policy = settings.claim_policy
        self.tenant = settings.tenant
        self.poll_interval = settings.poll_interval
        self.shutdown_deadline = settings.shutdown_deadline
        self._renew_every = settings.renew_every
        self._stop = threading.Event()
        self._force = threading.Event()
        self._lock = threading.Lock()
        self._slots: list[_Slot] = []

    # --- lifecycle --------------------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def stop(self) -> None:
        """Stop leasing; `run` lets running attempts finish within ``shutdown_deadline``."""
        self._stop.set()

    def run(self) -> None:
        """Run ``concurrency`` attempt loops until `stop` (or SIGTERM/SIGINT), then shut down.

        Shutdown: no new leases; running attempts get ``shutdown_deadline`` to finish (a second
        signal cuts the wait short); the rest are cancelled (their ``ctx`` raises `WorkerStopped`) and their claims and leases
        released, so another worker resumes them at once.
        """
        with self._signals():
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
            while not self._stop.wait(0.5):
                pass
            log.info("worker %s stopping", self.holder)
            deadline = time.monotonic() + self.shutdown_deadline.total_seconds()
            while (
                any(t.is_alive() for t in threads)
                and time.monotonic() < deadline
                and not self._force.is_set()
            ):
                for thread in threads:
                    thread.join(0.1)
            self._abandon_running()
            log.info("worker %s stopped", self.holder)

    def run_once(self) -> AttemptReport | None:
        """Lease and process at most one entry in the calling thread; None if none was ready."""
        return self._attempt(_Slot())

    # --- internals --------------------------------------------------------------------------

    @contextlib.contextmanager
    def _signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def on_signal(signum: int, frame: FrameType | None) -> None:
            name = signal.Signals(signum).name
            if self._stop.is_set():
                log.info("worker %s: %s again: not waiting for running attempts", self.holder, name)
                self._force.set()
                return
            log.info("worker %s: %s received: finishing running attempts", self.holder, name)
            self.stop()

        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _abandon_running(self) -> None:
        """Past the shutdown deadline: cancel what still runs, release its claim and lease (D44)."""
        with self._lock:
            keepers = [slot.keeper for slot in self._slots if slot.keeper is not None]
        for keeper in keepers:
            entry_id = keeper.lease.entry.entry_id
            log.info("entry %d: shutdown deadline passed; releasing claim and lease", entry_id)
            keeper.lose(WorkerStopped("the worker shut down; this attempt's claim was released"))
            keeper.finish(None)

    def _idle(self, scale: float = 1.0) -> None:
        self._stop.wait(self.settings.idle_delay(scale))

    def _loop(self, slot: _Slot) -> None:
        while not self._stop.is_set():
            try:
                report = self._attempt(slot)
            except StoreError as exc:
                log.warning("store error: %s", exc)
                self._idle()
                continue
            except Exception:
                log.exception("unexpected error in worker loop")
                self._idle()
                continue
            if report is None:
                self._idle()
            elif report.note == "busy":
                self._idle(2.0)

    def _attempt(self, slot: _Slot) -> AttemptReport | None:
        queue = self.store.run_queue
        run_id = new_id()
        lease = queue.lease(self.holder, self.lease_ttl, tenant=self.tenant, run_id=run_id)
        if lease is None:
            return None
        keeper = _Keeper(self.store, lease, self._renew_every)
        keeper.start()
        slot.keeper = keeper
        try:
            report = self._run_lease(keeper, run_id)
        except BaseException:
            # A store failure mid-protocol: give the entry back at once rather than let it
            # wait out its lease (a later attempt resumes it); if that fails too, the lease
            # simply expires.
            with contextlib.suppress(StoreError):
                keeper.finish(None)
            raise
        finally:
            slot.keeper = None
            keeper.stop()
        log.info("%s", describe(report))
        return report

    def _record_attempt(self, keeper: _Keeper, run_id: str) -> tuple[str, AttemptStart]:
        """The lease's attempt, recording one with fresh run ids if the first was taken."""
        if keeper.lease.attempt is not None:
            return run_id, keeper.lease.attempt
        queue = self.store.run_queue
        for _ in range(_RECORD_ATTEMPT_TRIES):
            run_id = new_id()
            try:
                return run_id, queue.record_attempt(keeper.lease, run_id)
            except RunIdTaken:
                continue
        raise RunIdTaken(f"could not find a free run id in {_RECORD_ATTEMPT_TRIES} tries")

    def _take_claim(self, keeper: _Keeper, holder: str) -> Claim | None:
        """The thread's claim, waiting (lease held) up to one claim ttl while another is live."""
        thread_id = keeper.lease.entry.thread_id
        deadline = time.monotonic() + self.settings.claim_wait
        while True:
            try:
                claim = self.store.claim(thread_id, holder, self.claim_policy)
            except ThreadBusy:
                if time.monotonic() >= deadline or keeper.lost is not None or self.stopping:
                    return None
                time.sleep(self.settings.claim_retry_delay)
                continue
            keeper.set_claim(claim)
            return claim

    def _recorded_output(self, thread_id: str, entry_id: int) -> JSON:
        return recorded_output(self.store.get_effect(thread_id, output_effect_key(entry_id)))

    def _run_lease(self, keeper: _Keeper, run_id: str) -> AttemptReport:
        entry = keeper.lease.entry
        queue = self.store.run_queue

        def report(
            note: Note,
            outcome: EntryOutcome | None = None,
            *,
            run: str | None = None,
            number: int | None = None,
            plan: AttemptPlan | None = None,
        ) -> AttemptReport:
            return AttemptReport(entry.entry_id, entry.thread_id, run, number, plan, outcome, note)

        try:
            run_id, start = self._record_attempt(keeper, run_id)
        except EntryClosed:
            return report("closed")
        if isinstance(start, ThreadDeleted):
            keeper.abandon()  # the store closed the entry: nothing left to release
            return report("thread_deleted", Cancelled("thread_deleted"), run=run_id)
        if isinstance(start, Exhausted):
            return self._settle_exhausted(keeper, report)
        assert isinstance(start, Started)
        number = start.number

        claim = self._take_claim(keeper, run_id)
        if claim is None:
            keeper.finish(None)
            return report("busy", run=run_id, number=number)

        # Read the entry only now that the claim is held (SPEC §5): its attempts include every
        # attempt another worker recorded before ours.
        current = queue.entry(entry.entry_id, tenant=entry.tenant)
        if current is None or current.closed:
            keeper.lose(EntryClosed(f"entry {entry.entry_id} was closed"))
            keeper.finish(None)
            return report("closed", run=run_id, number=number)
        latest = self.store.latest_of_runs(entry.thread_id, [a.run_id for a in current.attempts])
        plan = plan_attempt(current, latest)
        if isinstance(plan, Finished):
            done = Completed(self._recorded_output(entry.thread_id, entry.entry_id))
            closed = keeper.finish(done)
            return report(closing_note(done, closed), done, run=run_id, number=number, plan=plan)

        ctx = RunContext(
            store=self.store,
            entry=current,
            plan=plan,
            run_id=run_id,
            attempt=number,
            head=self.store.get(entry.thread_id),
            keeper=keeper,
            claim=claim,
        )
        try:
            output = self.handler(ctx)
        except Exception as exc:  # D43: retried, or Failed on the last attempt
            if keeper.lost is not None:
                keeper.finish(None)
                return report("lost", run=run_id, number=number, plan=plan)
            failed = failure_outcome(current, exc)
            if failed is None:
                log.warning(
                    "entry %d attempt %d raised %s: %s (will retry)",
                    entry.entry_id,
                    number,
                    type(exc).__name__,
                    exc,
                )
                keeper.finish(None)
                return report("retry", run=run_id, number=number, plan=plan)
            closed = keeper.finish(failed)
            return report(
                closing_note(failed, closed), failed, run=run_id, number=number, plan=plan
            )

        if keeper.lost is not None:
            keeper.finish(None)
            return report("lost", run=run_id, number=number, plan=plan)
        outcome: EntryOutcome | None = invalid_output(output)
        if outcome is None:
            outcome = Completed(self._record_output(ctx, output))
        closed = keeper.finish(outcome)
        return report(closing_note(outcome, closed), outcome, run=run_id, number=number, plan=plan)

    def _record_output(self, ctx: RunContext, output: JSON) -> JSON:
        """Record the output under the claim (first write wins) so a later attempt finds it."""
        if ctx.head is None:
            return output  # nothing committed: there is no thread to record it on
        try:
            record = self.store.record_effect(
                ctx.claim, output_effect_key(ctx.entry.entry_id), output, run_id=ctx.run_id
            )
        except NotFound:
            return output
        return record.value

    def _settle_exhausted(
        self, keeper: _Keeper, report: Callable[..., AttemptReport]
    ) -> AttemptReport:
        """Every attempt was used: close Completed if the run finished anyway, else Failed."""
        entry = keeper.lease.entry
        claim = self._take_claim(keeper, self.holder)
        if claim is None:
            keeper.finish(None)
            return report("busy")
        current = self.store.run_queue.entry(entry.entry_id, tenant=entry.tenant)
        if current is None or current.closed:
            keeper.finish(None)
            return report("closed")
        latest = self.store.latest_of_runs(entry.thread_id, [a.run_id for a in current.attempts])
        plan = plan_attempt(current, latest)
        output = self._recorded_output(entry.thread_id, entry.entry_id)
        outcome = exhausted_outcome(plan, output)
        closed = keeper.finish(outcome)
        return report(closing_note(outcome, closed), outcome, plan=plan)


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
