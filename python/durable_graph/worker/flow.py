"""One attempt of SPEC §5, written once for `Worker` and `AsyncWorker` (sans-I/O).

`attempt_flow` is a generator holding every decision of an attempt — take the attempt, claim or
wait, read and plan, run, record the output, settle an exhausted entry, finish — and no I/O: it
yields the operation to perform next (a `StoreOp` such as ``record_attempt``, `Finish`, ...) and is
sent its result, or thrown the `StoreError` it raised, the way psycopg 3 drives its protocol
generators. The sync and async workers are loops that perform those operations, blocking or
awaited; so both decide alike by construction.

One attempt, in order (the at-most-once protocol):

1. The lease (taken by the worker with ``run_id=new``) records the attempt. ``Exhausted`` → settle
   the entry (``Completed`` if an earlier attempt finished, else ``Failed("exhausted")``);
   ``ThreadDeleted`` → the store already closed the entry; no attempt (the run id was taken) →
   `record_attempt` with fresh run ids.
2. ``claim(thread, holder=run_id)``; while another claim is live the worker keeps its lease
   (renewed) and retries for one claim ttl, then releases the lease and backs off (D41). A wait
   ended by a lost lease reports "lost"; a claim taken after the attempt was abandoned (shutdown)
   is given back at once.
3. The entry is read **after** the claim is held, then ``latest_of_runs`` over its attempts, then
   `plan_attempt`. ``Finished`` → close ``Completed`` with the recorded output, without calling
   the handler. ``Fresh`` / ``Resume`` → unless the attempt was lost meanwhile, run the handler.
4. The handler returns → its output is recorded (effect `output_effect_key`) under the claim, the
   claim is released and the entry closed ``Completed(output)``. It raises → if attempts remain,
   claim and lease are released (the entry is retried, resuming from its last checkpoint), else
   the entry is closed ``Failed(traceback)`` (its last line ``Type: message``).

Worker decisions (docs/decisions.md D40-D44): the output is recorded as an effect so a later
attempt that finds the run ``Finished`` closes with the same output (D40); a busy thread is waited
for while holding the lease, so a crashed worker's live claim does not burn attempts (D41); the
exhausted path still plans, so a run that finished before its worker crashed closes
``Completed`` (D42); a raise retries while attempts remain, an invalid output fails (D43); at
shutdown an attempt past the deadline is stopped and its claim and lease released (D44).
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import random
import signal
import socket
import time
import traceback
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

from durable_graph.core.errors import (
    ClaimLost,
    EntryClosed,
    NotFound,
    RunIdTaken,
    StoreError,
    ThreadBusy,
    ValidationError,
)
from durable_graph.core.model import (
    JSON,
    AttemptBegun,
    AttemptPlan,
    AttemptStart,
    Cancelled,
    Checkpoint,
    Claim,
    Completed,
    EffectRecord,
    EntryOutcome,
    Exhausted,
    Failed,
    Finished,
    Lease,
    QueueEntry,
    Started,
    ThreadDeleted,
)
from durable_graph.core.ops import store_op
from durable_graph.core.run_queue import plan_attempt
from durable_graph.core.validation import (
    DEFAULT_MAX_VALUE_BYTES,
    encode_json,
    fit_error_text,
)
from durable_graph.core.workers import WorkerBeat, WorkerState
from durable_graph.worker.context import LostFlag, new_id, next_commit
from durable_graph.worker.ops import (
    Deferred,
    Finish,
    HandlerResult,
    Operation,
    Pause,
    RunHandler,
)
from durable_graph.worker.settings import WorkerOptions, WorkerSettings

_MAX_ERROR_BYTES: Final = 64 * 1024
"""A traceback kept as an attempt's error is cut to its last 64 KiB (its end names the failure)."""

Note = Literal[
    "completed",  # closed Completed (handler ran, or the run had already finished)
    "failed",  # closed Failed (last attempt raised, or exhausted)
    "retry",  # the handler raised with attempts left: lease released
    "thread_deleted",  # the store closed the entry Cancelled("thread_deleted")
    "busy",  # the thread's claim stayed taken: lease released, backing off
    "closed",  # the entry was closed by someone else (cancel, interrupt) after the lease
    "lost",  # the lease or claim was lost mid-attempt (renewal failed, re-leased, shutdown)
    "cancelled",  # the entry was cancelled (queue cancel, thread deleted) while its handler ran
]

_RECORD_ATTEMPT_TRIES = 5


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


# --- the protocol's decisions (pure; shared with durable_graph.worker.aio.AsyncWorker) -------


def recorded_output(record: EffectRecord | None) -> JSON:
    """The output recorded under `output_effect_key` (D40); None when none was recorded."""
    return None if record is None else record.value


def exhausted_outcome(plan: AttemptPlan, output: JSON) -> EntryOutcome:
    """D42: every attempt was used; ``Completed`` if the run finished anyway, else ``Failed``."""
    return Completed(output) if isinstance(plan, Finished) else Failed("exhausted")


class FinalFailure(Exception):
    """Raised by a handler for a failure that another attempt would only repeat (a graph's own
    error, as LangGraph's server ends such a run): the entry closes ``Failed`` at once."""


def failure_outcome(entry: QueueEntry, exc: BaseException, cap: int | None = None) -> Failed | None:
    """D43: the handler raised. None → retry (attempts remain); else the entry closes ``Failed``.

    ``entry`` is the entry read after the claim was held (its attempts include this one);
    ``cap``: the worker's own limit on attempts (an `App` kind's ``max_attempts``, SPEC §15). A
    `FinalFailure` is never retried.
    """
    allowed = entry.max_attempts if cap is None else min(entry.max_attempts, cap)
    if len(entry.attempts) < allowed and not isinstance(exc, FinalFailure):
        return None
    # The traceback, as a retried attempt keeps it (issue 26 item 9): its last line names the
    # exception's type and message; the store records it as the closing attempt's error too.
    text = "".join(traceback.format_exception(exc)).rstrip()
    return Failed(fit_error_text(text, _MAX_ERROR_BYTES))


def retry_later(settings: WorkerSettings, number: int, exc: BaseException) -> Deferred:
    """SPEC §13: attempt ``number`` raised with attempts left: its backoff, and its traceback
    as the attempt's failure reason (the end kept when it is over the value limit)."""
    text = "".join(traceback.format_exception(exc)).rstrip()
    delay = settings.backoff.delay(number, random.random())
    return Deferred(delay, fit_error_text(text, _MAX_ERROR_BYTES))


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


def log_stop_signal(log: logging.Logger, holder: str, signum: int, again: bool) -> None:
    """Log a SIGTERM / SIGINT: the first finishes running attempts, a second stops waiting."""
    name = signal.Signals(signum).name
    if again:
        log.info("worker %s: %s again: not waiting for running attempts", holder, name)
    else:
        log.info("worker %s: %s received: finishing running attempts", holder, name)


def log_failure(log: logging.Logger, exc: Exception, where: str) -> None:
    """A failure a worker survives (then waits and goes on): a `StoreError` as a warning (the
    store may come back), anything else with its traceback."""
    if isinstance(exc, StoreError):
        log.warning("store error: %s", exc)
    else:
        log.error("unexpected error in worker %s", where, exc_info=exc)


def worker_beat(settings: WorkerSettings, state: WorkerState) -> WorkerBeat:
    """The heartbeat a worker of ``settings`` sends in ``state`` (issue 26 item 13): its holder,
    host, process id and the kinds it serves."""
    return WorkerBeat(settings.holder, socket.gethostname(), os.getpid(), settings.kinds, state)


def log_beat_failure(log: logging.Logger, holder: str, exc: Exception) -> None:
    """A heartbeat that failed: the worker goes on (the registry only shows it less fresh)."""
    log.warning("worker %s: heartbeat not recorded: %s", holder, exc)


def describe(report: AttemptReport) -> str:
    """One log line for an attempt."""
    attempt = report.attempt if report.attempt is not None else "-"
    plan = "" if report.plan is None else f" (plan {type(report.plan).__name__.lower()})"
    return (
        f"entry {report.entry_id} thread {report.thread_id} attempt {attempt}: {report.note}{plan}"
    )


# --- what the handler sees ---------------------------------------------------------------


Flow = Generator[Operation, Any, AttemptReport]


class AttemptKeeper(LostFlag, Protocol):
    """What the flow asks of its attempt's keeper (all immediate, no I/O)."""

    @property
    def lease(self) -> Lease: ...

    def lose(self, error: StoreError) -> None: ...

    def abandon(self) -> None: ...

    def adopt_claim(self, claim: Claim) -> bool:
        """Renew ``claim`` from now on; False once the attempt is finishing (shutdown)."""
        ...


def attempt_flow(
    settings: WorkerSettings,
    keeper: AttemptKeeper,
    run_id: str,
    stopping: Callable[[], bool],
    log: logging.Logger,
    begun: AttemptBegun | None = None,
) -> Flow:
    """Everything after the lease (held by ``keeper``, taken with ``run_id``), as operations,
    logged here once for both workers: the handler's start, and the attempt's end with its
    duration (from the lease) and, when the handler raised, its traceback — WARNING for a
    retry, ERROR for the final failure.

    ``begun``: the lease came from `begin_attempt` (SPEC §11); when it holds the claim and the
    plan, steps 1-3 are done already and the flow goes straight to the handler; otherwise it
    continues with §5's steps from where `begin_attempt` stopped.

    A `StoreError` thrown in that the flow does not expect propagates: the worker then gives
    the lease back.
    """
    started = time.monotonic()
    steps = _attempt_steps(settings, keeper, run_id, stopping, begun)
    error: BaseException | None = None
    sent: Any = None
    thrown: BaseException | None = None
    while True:  # `yield from`, but seeing what the handler call returned
        try:
            op = steps.send(sent) if thrown is None else steps.throw(thrown)
        except StopIteration as stop:
            report: AttemptReport = stop.value
            break
        sent, thrown = None, None
        if isinstance(op, RunHandler):
            log.info(
                "entry %d thread %s attempt %d: started (plan %s)",
                op.entry.entry_id,
                op.entry.thread_id,
                op.attempt,
                type(op.plan).__name__.lower(),
                extra=_log_fields(op.entry.entry_id, op.entry.thread_id, op.attempt, op.run_id),
            )
        try:
            sent = yield op
        except GeneratorExit:
            steps.close()
            raise
        except BaseException as exc:  # the driver throws the operation's error in: pass it on
            thrown = exc
        if isinstance(op, RunHandler) and isinstance(sent, HandlerResult):
            error = sent.error
    log_attempt_end(log, report, time.monotonic() - started, error)
    return report


def _log_fields(
    entry_id: int, thread_id: str, attempt: int | None, run_id: str | None
) -> dict[str, Any]:
    return {"entry_id": entry_id, "thread_id": thread_id, "attempt": attempt, "run_id": run_id}


def log_attempt_end(
    log: logging.Logger, report: AttemptReport, seconds: float, error: BaseException | None
) -> None:
    """The attempt's last log line; a handler's exception rides along with its traceback."""
    level = {"failed": logging.ERROR, "retry": logging.WARNING}.get(report.note, logging.INFO)
    raised = error is not None and report.note in ("failed", "retry")
    reason = f": {type(error).__name__}: {error}" if raised else ""
    if isinstance(report.outcome, Cancelled) and report.note == "cancelled":
        reason = f" ({report.outcome.reason})"
    log.log(
        level,
        "%s in %.3fs%s",
        describe(report),
        seconds,
        reason,
        exc_info=(type(error), error, error.__traceback__) if raised and error else None,
        extra={
            **_log_fields(report.entry_id, report.thread_id, report.attempt, report.run_id),
            "outcome": report.note,
            "duration_s": round(seconds, 6),
        },
    )


def _attempt_steps(
    settings: WorkerSettings,
    keeper: AttemptKeeper,
    run_id: str,
    stopping: Callable[[], bool],
    begun: AttemptBegun | None,
) -> Flow:
    """The attempt's decisions (see `attempt_flow`)."""
    entry = keeper.lease.entry

    def report(
        note: Note,
        outcome: EntryOutcome | None = None,
        *,
        run: str | None = None,
        number: int | None = None,
        plan: AttemptPlan | None = None,
    ) -> AttemptReport:
        return AttemptReport(entry.entry_id, entry.thread_id, run, number, plan, outcome, note)

    if begun is not None and begun.claim is not None and begun.plan is not None:
        return (yield from _run_begun(settings, keeper, run_id, begun, stopping, report))
    try:
        run_id, start = yield from _take_attempt(keeper.lease, run_id)
    except EntryClosed:
        keeper.abandon()  # closed under us: nothing left to release
        return report("closed")
    if isinstance(start, ThreadDeleted):
        keeper.abandon()  # the store closed the entry: nothing left to release
        return report("thread_deleted", Cancelled("thread_deleted"), run=run_id)
    if isinstance(start, Exhausted):
        return (yield from _settle_exhausted(settings, keeper, stopping, report))
    assert isinstance(start, Started)
    number = start.number

    claim = yield from _claim_or_wait(settings, keeper, run_id, stopping)
    if claim is None:
        yield Finish(None)
        return report("lost" if keeper.lost else "busy", run=run_id, number=number)
    read = yield from _read_and_plan(entry)
    if read is None:
        keeper.lose(EntryClosed(f"entry {entry.entry_id} was closed"))
        yield Finish(None)
        return report("closed", run=run_id, number=number)
    current, plan = read
    return (yield from _run_planned(settings, keeper, run_id, number, claim, current, plan, report))


class _Unread(enum.Enum):
    """A value not read yet (distinct from None, "read: there is none")."""

    UNREAD = "unread"


UNREAD = _Unread.UNREAD


def _run_begun(
    settings: WorkerSettings,
    keeper: AttemptKeeper,
    run_id: str,
    begun: AttemptBegun,
    stopping: Callable[[], bool],
    report: Callable[..., AttemptReport],
) -> Flow:
    """Steps 1-3 done by `begin_attempt` (claim held, plan made): adopt the claim, go on.

    A stop requested while `begin_attempt` ran gives the attempt back before its handler starts,
    as a claim taken after shutdown is given back on the step-by-step path."""
    assert isinstance(begun.attempt, Started) and begun.claim is not None
    assert begun.plan is not None
    number = begun.attempt.number
    if stopping() or not keeper.adopt_claim(begun.claim):  # shutting down: give it back
        with contextlib.suppress(StoreError):
            yield store_op("release_claim", begun.claim)
        yield Finish(None)
        return report("lost", run=run_id, number=number)
    return (
        yield from _run_planned(
            settings,
            keeper,
            run_id,
            number,
            begun.claim,
            begun.entry,
            begun.plan,
            report,
            head=begun.head,
        )
    )


def _run_planned(
    settings: WorkerSettings,
    keeper: AttemptKeeper,
    run_id: str,
    number: int,
    claim: Claim,
    current: QueueEntry,
    plan: AttemptPlan,
    report: Callable[..., AttemptReport],
    *,
    head: Checkpoint | _Unread | None = UNREAD,
) -> Flow:
    """Step 3's end and step 4: finish a finished run, else run the handler and close.

    ``head``: the thread's head when `begin_attempt` already read it under the claim (D73);
    read here otherwise."""
    entry = current
    if isinstance(plan, Finished):
        done = Completed(
            recorded_output((yield store_op("get_effect", entry.thread_id, _key(entry))))
        )
        closed = yield Finish(done)
        return report(closing_note(done, closed), done, run=run_id, number=number, plan=plan)
    known: Checkpoint | None = (
        (yield store_op("get", entry.thread_id)) if isinstance(head, _Unread) else head
    )
    if keeper.lost is not None:  # lost while claiming or reading: the handler must not start
        yield Finish(None)
        return report("lost", run=run_id, number=number, plan=plan)
    result: HandlerResult = yield RunHandler(current, plan, run_id, number, known, claim)
    if keeper.lost is not None:
        yield Finish(None)
        why = yield from _why_lost(keeper, entry)
        if why is not None:  # issue 26 item 7: say it was cancelled, and why
            return report("cancelled", why, run=run_id, number=number, plan=plan)
        return report("lost", run=run_id, number=number, plan=plan)
    last = result.last  # SPEC §18.1: the held last checkpoint rides with the close
    head = result.head
    output_needs_record = result.error is None and (result.output is not None or number > 1)
    if last is not None and (result.error is not None or output_needs_record):
        # The close does not follow at once (a retry, a failure, the output's record first):
        # commit the held checkpoint on its own, where commit_last stood.
        try:
            head = yield store_op("commit", claim, last)
        except StoreError as exc:
            keeper.lose(exc)
            yield Finish(None)
            return report("lost", run=run_id, number=number, plan=plan)
        last = None
    outcome: EntryOutcome | None
    if result.error is not None:  # D43: a raise retries, or closes Failed on the last attempt
        outcome = failure_outcome(current, result.error, settings.max_attempts)
        if outcome is None:  # logged by attempt_flow, with the traceback
            later = retry_later(settings, number, result.error)
            # The backoff lives in the entry, so whichever worker leases it next waits too.
            yield Finish(later)
            return report("retry", run=run_id, number=number, plan=plan)
    else:
        outcome = invalid_output(result.output)
        if outcome is None:
            output: JSON = result.output  # type: ignore[assignment]  # checked just above
            # Nothing committed: no thread to record it on. A first attempt's None needs no
            # record either: no other attempt wrote the key, and no record reads as None (D40)
            # — so a job is submit, begin, its commits, finish (SPEC §11).
            if head is not None and output_needs_record:
                try:
                    record = yield store_op(
                        "record_effect", claim, _key(entry), output, run_id=run_id
                    )
                    output = record.value
                except NotFound:
                    pass
            outcome = Completed(output)
    closed = yield Finish(outcome, last)
    return report(closing_note(outcome, closed), outcome, run=run_id, number=number, plan=plan)


def _key(entry: QueueEntry) -> str:
    return output_effect_key(entry.entry_id)


def _why_lost(
    keeper: AttemptKeeper, entry: QueueEntry
) -> Generator[Operation, Any, Cancelled | None]:
    """The entry's `Cancelled` outcome when the attempt was lost because the entry was closed
    cancelled (a `queue cancel`, a deleted thread), else None (re-leased, shut down, gone)."""
    if not isinstance(keeper.lost, EntryClosed):
        return None
    try:
        now: QueueEntry | None = yield store_op("run_queue.entry", entry.entry_id, entry.tenant)
    except StoreError:
        return None
    outcome = None if now is None else now.outcome
    return outcome if isinstance(outcome, Cancelled) else None


def _take_attempt(lease: Lease, run_id: str) -> Generator[Operation, Any, tuple[str, AttemptStart]]:
    """The lease's attempt, recording one with fresh run ids if the first was taken."""
    if lease.attempt is not None:
        return run_id, lease.attempt
    for _ in range(_RECORD_ATTEMPT_TRIES):
        run_id = new_id()
        try:
            start: AttemptStart = yield store_op("run_queue.record_attempt", lease, run_id)
        except RunIdTaken:
            continue
        return run_id, start
    raise RunIdTaken(f"could not find a free run id in {_RECORD_ATTEMPT_TRIES} tries")


def _claim_or_wait(
    settings: WorkerSettings, keeper: AttemptKeeper, holder: str, stopping: Callable[[], bool]
) -> Generator[Operation, Any, Claim | None]:
    """The thread's claim, waiting (lease held) up to one claim ttl while another is live (D41).

    None when the wait ended (timed out, lease lost, worker stopping), or when the claim came
    after the attempt was abandoned — it is then given back at once.
    """
    thread_id = keeper.lease.entry.thread_id
    deadline = time.monotonic() + settings.claim_wait
    while True:
        try:
            claim: Claim = yield store_op("claim", thread_id, holder, settings.claim_policy)
        except ThreadBusy:
            if time.monotonic() >= deadline or keeper.lost is not None or stopping():
                return None
            yield Pause(settings.claim_retry_delay)
            continue
        if keeper.adopt_claim(claim):
            return claim
        with contextlib.suppress(StoreError):  # if it fails, the claim expires with its ttl
            yield store_op("release_claim", claim)
        return None


def _read_and_plan(
    entry: QueueEntry,
) -> Generator[Operation, Any, tuple[QueueEntry, AttemptPlan] | None]:
    """The entry read now that the claim is held (its attempts include every attempt another
    worker recorded before ours, SPEC §5), and its plan; None when it is closed."""
    current: QueueEntry | None = yield store_op(
        "run_queue.entry", entry.entry_id, tenant=entry.tenant
    )
    if current is None or current.closed:
        return None
    latest = yield store_op("latest_of_runs", entry.thread_id, [a.run_id for a in current.attempts])
    return current, plan_attempt(current, latest)


def _settle_exhausted(
    settings: WorkerSettings,
    keeper: AttemptKeeper,
    stopping: Callable[[], bool],
    report: Callable[..., AttemptReport],
) -> Flow:
    """Every attempt was used: close Completed if the run finished anyway, else Failed (D42)."""
    entry = keeper.lease.entry
    claim = yield from _claim_or_wait(settings, keeper, settings.holder, stopping)
    if claim is None:
        yield Finish(None)
        return report("lost" if keeper.lost else "busy")
    read = yield from _read_and_plan(entry)
    if read is None:
        yield Finish(None)
        return report("closed")
    _, plan = read
    outcome = exhausted_outcome(
        plan, recorded_output((yield store_op("get_effect", entry.thread_id, _key(entry))))
    )
    closed = yield Finish(outcome)
    return report(closing_note(outcome, closed), outcome, plan=plan)


__all__ = [
    "AttemptKeeper",
    "AttemptReport",
    "Flow",
    "Note",
    "WorkerOptions",
    "WorkerSettings",
    "WorkerStopped",
    "attempt_flow",
    "closing_note",
    "describe",
    "exhausted_outcome",
    "failure_outcome",
    "invalid_output",
    "log_failure",
    "log_stop_signal",
    "new_id",
    "next_commit",
    "output_effect_key",
    "recorded_output",
]
