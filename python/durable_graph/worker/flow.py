"""What an attempt decides without the store (docs/decisions.md D40-D44, D46), written once for
both workers' attempt (`attempt_async.AsyncAttempt`): the outcome of a raise or of an exhausted
entry, the backoff of a retry, the report and the log lines of an attempt.
"""

from __future__ import annotations

import random
import traceback
from dataclasses import dataclass
from datetime import timedelta
from typing import Final, Literal, TypeAlias

from durable_graph.core.errors import ValidationError
from durable_graph.core.model import (
    JSON,
    AttemptPlan,
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
from durable_graph.core.validation import DEFAULT_MAX_VALUE_BYTES, encode_json, fit_error_text
from durable_graph.worker.settings import WorkerSettings

_MAX_ERROR_BYTES: Final = 64 * 1024  # a traceback kept as an error: its end names the failure

Note = Literal[
    "completed",  # closed Completed (handler ran, or the run had already finished)
    "failed",  # closed Failed (last attempt raised, or exhausted)
    "retry",  # the handler raised with attempts left: lease released
    "thread_deleted",  # the store closed the entry Cancelled("thread_deleted")
    "busy",  # no attempt could start (the claim stayed taken, the run id was): lease released
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
    """D43: the handler raised. None → retry (attempts remain; never for a `FinalFailure`), else
    ``Failed``. ``entry`` is read under the claim; ``cap``: an `App` kind's ``max_attempts``."""
    allowed = entry.max_attempts if cap is None else min(entry.max_attempts, cap)
    if len(entry.attempts) < allowed and not isinstance(exc, FinalFailure):
        return None
    # The traceback, as a retried attempt keeps it (issue 26 item 9): its last line names the
    # exception's type and message; the store records it as the closing attempt's error too.
    return Failed(_kept_error_text(exc))


def retry_later(settings: WorkerSettings, number: int, exc: BaseException) -> Deferred:
    """SPEC §13: attempt ``number`` raised with attempts left: its backoff, and its traceback."""
    return Deferred(settings.backoff.delay(number, random.random()), _kept_error_text(exc))


def error_text(exc: BaseException) -> str:
    """The traceback an attempt records. Its last block is exactly ``Type: message``, what clients
    are shown (SPEC §19.4); its notes (LangGraph's "During task with name ...") go under its
    first line, indented as frames are, where operators still read them."""
    shown = traceback.TracebackException.from_exception(exc)
    notes = shown.__notes__ or []
    shown.__notes__ = None
    lines = "".join(shown.format()).rstrip().split("\n")
    if notes and lines[0].startswith("Traceback"):
        lines[1:1] = [f"  Note: {line}" for n in notes for line in str(n).splitlines()]
    return "\n".join(lines)


def _kept_error_text(exc: BaseException) -> str:
    return fit_error_text(error_text(exc), _MAX_ERROR_BYTES)


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


@dataclass(frozen=True, slots=True)
class Deferred:
    """A failed attempt with attempts left: hold the entry ``delay`` (backoff), noting ``error``."""

    delay: timedelta
    error: str | None


Settlement: TypeAlias = EntryOutcome | Deferred | None  # closed, deferred, or released (None)


@dataclass(frozen=True, slots=True)
class HandlerCall:
    """What the handler's context is made of (the entry read under the claim)."""

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
    last: Commit | None = None  # the last checkpoint ``commit_last`` holds for the close (§18.1)
