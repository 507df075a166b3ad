"""What an attempt decides without the store, written once for `Worker` and `AsyncWorker`.

The attempt itself — `begin_attempt`'s answer, the handler, the close — is plain code calling the
store: `durable_graph.worker.attempt_async.AsyncAttempt` (the async source) and its generated
sync twin, `attempt_generated.Attempt`. What they decide without asking the store is here, pure:
the outcome of a raise or of an exhausted entry, the backoff of a retry, the report and the log
lines of an attempt.

Worker decisions (docs/decisions.md D40-D44): the output is recorded as an effect so a later
attempt that finds the run ``Finished`` closes with the same output (D40); a busy thread is waited
for while holding the lease, so a crashed worker's live claim does not burn attempts (D41); the
exhausted path still plans, so a run that finished before its worker crashed closes
``Completed`` (D42); a raise retries while attempts remain, an invalid output fails (D43); at
shutdown an attempt past the deadline is stopped and its claim and lease released (D44).
"""

from __future__ import annotations

import logging
import os
import random
import signal
import socket
import traceback
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final, Literal, TypeAlias

from durable_graph.core.errors import StoreError, ValidationError
from durable_graph.core.model import (
    JSON,
    AttemptPlan,
    Cancelled,
    Checkpoint,
    Claim,
    Commit,
    Completed,
    EffectRecord,
    EntryOutcome,
    Failed,
    Finished,
    QueueEntry,
)
from durable_graph.core.validation import (
    DEFAULT_MAX_VALUE_BYTES,
    encode_json,
    fit_error_text,
)
from durable_graph.core.workers import WorkerBeat, WorkerState
from durable_graph.worker.settings import WorkerSettings

_MAX_ERROR_BYTES: Final = 64 * 1024
"""A traceback kept as an attempt's error is cut to its last 64 KiB (its end names the failure)."""

Note = Literal[
    "completed",  # closed Completed (handler ran, or the run had already finished)
    "failed",  # closed Failed (last attempt raised, or exhausted)
    "retry",  # the handler raised with attempts left: lease released
    "thread_deleted",  # the store closed the entry Cancelled("thread_deleted")
    "busy",  # no attempt could start now (the thread's claim stayed taken, or the run id was
    # taken): lease released, backing off
    "closed",  # the entry was closed by someone else (cancel, interrupt) after the lease
    "lost",  # the lease or claim was lost mid-attempt (renewal failed, re-leased, shutdown)
    "cancelled",  # the entry was cancelled (queue cancel, thread deleted) while its handler ran
]


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


# --- the decisions (pure) -------------------------------------------------------------


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
    return Failed(fit_error_text(error_text(exc), _MAX_ERROR_BYTES))


def retry_later(settings: WorkerSettings, number: int, exc: BaseException) -> Deferred:
    """SPEC §13: attempt ``number`` raised with attempts left: its backoff, and its traceback
    as the attempt's failure reason (the end kept when it is over the value limit)."""
    delay = settings.backoff.delay(number, random.random())
    return Deferred(delay, fit_error_text(error_text(exc), _MAX_ERROR_BYTES))


def error_text(exc: BaseException) -> str:
    """The traceback an attempt records. Its last block is exactly the exception's ``Type:
    message``, every line of the message, which is what clients are shown (SPEC §19.4); the
    notes on it (LangGraph's "During task with name ...") go under the traceback's first line,
    indented as frames are, where operators still read them."""
    shown = traceback.TracebackException.from_exception(exc)
    notes = shown.__notes__ or []
    shown.__notes__ = None
    lines = "".join(shown.format()).rstrip().split("\n")
    if notes and lines[0].startswith("Traceback"):
        lines[1:1] = [f"  Note: {line}" for n in notes for line in str(n).splitlines()]
    return "\n".join(lines)


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


@dataclass(frozen=True, slots=True)
class Deferred:
    """A failed attempt with attempts left: hold the entry ``delay`` (backoff), noting ``error``."""

    delay: timedelta
    error: str | None


Settlement: TypeAlias = EntryOutcome | Deferred | None
"""How an attempt gives its lease back: closed with an outcome, deferred for a retry, or released
(None)."""


@dataclass(frozen=True, slots=True)
class HandlerCall:
    """What the handler's context is made of: the entry (read under the claim), its plan, the
    attempt's run id and number, the thread's head and the claim."""

    entry: QueueEntry
    plan: AttemptPlan
    run_id: str
    attempt: int
    head: Checkpoint | None
    claim: Claim


@dataclass(frozen=True, slots=True)
class HandlerResult:
    """How the handler ended: its output, or the exception it raised; ``head`` is its context's."""

    output: object = None
    error: BaseException | None = None
    head: Checkpoint | None = None
    last: Commit | None = None
    """The run's last checkpoint, held by ``commit_last`` for the close (SPEC §18.1)."""


def log_fields(
    entry_id: int, thread_id: str, attempt: int | None, run_id: str | None
) -> dict[str, Any]:
    """An attempt's fields on its log records (for ``--log-format json``, D46)."""
    return {"entry_id": entry_id, "thread_id": thread_id, "attempt": attempt, "run_id": run_id}


def log_attempt_start(
    log: logging.Logger, entry: QueueEntry, number: int, run_id: str, plan: AttemptPlan
) -> None:
    """The line logged as the handler starts (D46)."""
    log.info(
        "entry %d thread %s attempt %d: started (plan %s)",
        entry.entry_id,
        entry.thread_id,
        number,
        type(plan).__name__.lower(),
        extra=log_fields(entry.entry_id, entry.thread_id, number, run_id),
    )


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
            **log_fields(report.entry_id, report.thread_id, report.attempt, report.run_id),
            "outcome": report.note,
            "duration_s": round(seconds, 6),
        },
    )


__all__ = [
    "AttemptReport",
    "Deferred",
    "FinalFailure",
    "HandlerCall",
    "HandlerResult",
    "Note",
    "Settlement",
    "closing_note",
    "describe",
    "exhausted_outcome",
    "failure_outcome",
    "invalid_output",
    "log_attempt_end",
    "log_attempt_start",
    "log_beat_failure",
    "log_failure",
    "log_fields",
    "log_stop_signal",
    "output_effect_key",
    "recorded_output",
    "retry_later",
    "worker_beat",
]
