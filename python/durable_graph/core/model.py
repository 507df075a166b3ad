"""Values of the store (SPEC §2): frozen, slotted dataclasses with UTC-aware datetimes.

Policies check their own invariants on construction; arguments passed to a store (identifiers,
JSON values, timestamps) are checked by `durable_graph.core.validation` before anything is written.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final, Literal, TypeAlias

from durable_graph.core.errors import ValidationError
from durable_graph.core.scalars import check_duration

JSON: TypeAlias = bool | int | float | str | list[Any] | dict[str, Any] | None
"""A JSON value: round-trips exactly through ``json`` (SPEC §2)."""


class _AnyTenant(enum.Enum):
    ANY = "ANY"

    def __repr__(self) -> str:
        return "ANY"


ANY: Final = _AnyTenant.ANY
"""`lease(tenant=ANY)` and `open_entries(tenant=ANY)`: entries of every tenant (SPEC §8 rule 18)."""

AnyTenant: TypeAlias = Literal[_AnyTenant.ANY]
TenantFilter: TypeAlias = str | AnyTenant | None


# --- policies ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClaimPolicy:
    """How long a run claim lives, and how often its holder should renew it."""

    ttl: timedelta = timedelta(seconds=30)
    renew_every: timedelta = timedelta(seconds=10)

    def __post_init__(self) -> None:
        check_duration("ttl", self.ttl)
        check_duration("renew_every", self.renew_every)
        if self.renew_every >= self.ttl:
            raise ValidationError("renew_every must be shorter than ttl")


@dataclass(frozen=True, slots=True)
class WatchPolicy:
    """How often `await_events_after` and `subscribe` poll for new events."""

    poll_interval: timedelta = timedelta(milliseconds=250)

    def __post_init__(self) -> None:
        check_duration("poll_interval", self.poll_interval)


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """What `prune` may remove: see SPEC §2 and §8 rule 16."""

    keep_last: int | None = None
    max_age: timedelta | None = None

    def __post_init__(self) -> None:
        if self.keep_last is None and self.max_age is None:
            raise ValidationError("RetentionPolicy needs keep_last or max_age")
        if self.keep_last is not None and (
            not isinstance(self.keep_last, int)
            or isinstance(self.keep_last, bool)
            or self.keep_last < 1
        ):
            raise ValidationError(f"keep_last must be an int >= 1, got {self.keep_last!r}")
        if self.max_age is not None:
            check_duration("max_age", self.max_age)


# --- checkpointer values -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Claim:
    """A thread's run claim; ``token`` fences every write made under it."""

    thread_id: str
    holder: str
    token: int
    expires_at: datetime
    ttl: timedelta


@dataclass(frozen=True, slots=True)
class EventIn:
    """An event to append. Kinds starting ``store.`` are the store's own."""

    kind: str
    payload: JSON = None
    created_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Event:
    """An event of a thread's log, numbered by ``seq`` (1, 2, ... without gaps)."""

    thread_id: str
    seq: int
    kind: str
    payload: JSON
    run_id: str | None
    created_at: datetime
    committed_at: datetime


@dataclass(frozen=True, slots=True)
class PendingWrite:
    """A write a task made after a checkpoint, kept until the next checkpoint supersedes it."""

    task_id: str
    channel: str
    value: JSON
    task_path: str = ""
    """The path of the task that made the write (LangGraph's ``task_path``; ``""`` for none).

    A checkpoint's writes are read in LangGraph's ``writes_sort_key`` order: by task path, then
    task id, then index (the position in its `put_writes` call). Not part of the write's
    identity: the first value under ``(task_id, channel, index)`` wins, path included."""


@dataclass(frozen=True, slots=True)
class Commit:
    """What `Checkpointer.commit` writes: a checkpoint and the events that go with it."""

    checkpoint_id: str
    parent_id: str | None
    run_id: str
    state: JSON
    metadata: JSON = None
    next: tuple[str, ...] = ()
    events: tuple[EventIn, ...] = ()
    created_at: datetime | None = None
    parent_thread_id: str | None = None
    fence: Claim | None = None


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A committed checkpoint. ``next == ()`` means the run that produced it finished."""

    thread_id: str
    checkpoint_id: str
    parent_id: str | None
    run_id: str
    state: JSON
    metadata: JSON
    next: tuple[str, ...]
    created_at: datetime
    committed_at: datetime
    seq: int
    writes: tuple[PendingWrite, ...] = ()


@dataclass(frozen=True, slots=True)
class ThreadInfo:
    """A thread as `Checkpointer.thread` and `threads` describe it."""

    thread_id: str
    parent_thread_id: str | None
    head_id: str | None
    last_seq: int
    created_at: datetime
    updated_at: datetime
    claim_holder: str | None
    claim_expires_at: datetime | None


@dataclass(frozen=True, slots=True)
class EffectRecord:
    """The first value recorded under an effect key; ``existing`` when an earlier call wrote it."""

    thread_id: str
    key: str
    value: JSON
    run_id: str | None
    recorded_at: datetime
    existing: bool


@dataclass(frozen=True, slots=True)
class PruneResult:
    checkpoints_removed: int
    events_removed: int


THREAD_TTL_STRATEGIES: Final = ("delete", "keep_latest")
"""What a thread's TTL does once it expires (SPEC §24.1)."""
MAX_THREAD_TTL_MINUTES: Final = 5_256_000.0
"""A thread TTL's upper bound: ten years of minutes (more is a mistake, not a retention)."""


@dataclass(frozen=True, slots=True)
class ThreadTtl:
    """A thread's time-to-live (SPEC §24.1, D259): ``strategy`` runs once ``minutes`` have
    passed since the thread's last activity; ``expires_at`` is that moment as the store sees it
    now (its last commit, run submitted or closed, or the TTL's own setting, plus ``minutes``)."""

    thread_id: str
    minutes: float
    strategy: str
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class ThreadSweep:
    """One `sweep_threads` transaction: threads deleted, threads pruned to their head, and due
    threads looked at (those not yet expired, or busy, were put off to when they may be)."""

    deleted: int
    kept_latest: int
    checked: int


# --- run queue values ----------------------------------------------------------------------


class Mode(enum.Enum):
    """What a submission does to the thread's other open entries (SPEC §5)."""

    ENQUEUE = "enqueue"
    REJECT = "reject"
    INTERRUPT = "interrupt"


@dataclass(frozen=True, slots=True)
class Submission:
    thread_id: str
    input: JSON
    tenant: str | None = None
    key: str | None = None
    mode: Mode = Mode.ENQUEUE
    max_attempts: int = 3
    not_before: datetime | None = None
    """Delayed run (SPEC §13): no attempt before this instant of store time (tz-aware). Being
    its thread's head, it holds the thread's later entries back (only the head is leased)."""
    priority: int = 0
    """SPEC §15: heads of higher priority are leased first across threads (then by age); within
    a thread §5's order is unchanged. ``-(2**31 - 1)..2**31 - 1``."""
    kind: str = "default"
    """SPEC §15: the handler this run needs; only a lease serving this kind takes it."""


@dataclass(frozen=True, slots=True)
class Ticket:
    entry_id: int
    existing: bool


@dataclass(frozen=True, slots=True)
class Attempt:
    number: int
    run_id: str
    started_at: datetime
    error: str | None = None
    """Why the attempt failed (`RunQueue.defer` or a `Failed` close), else None."""


@dataclass(frozen=True, slots=True)
class Started:
    """The attempt was recorded under this number (1-based)."""

    number: int


@dataclass(frozen=True, slots=True)
class Exhausted:
    """``max_attempts`` were already recorded; nothing was recorded."""


@dataclass(frozen=True, slots=True)
class ThreadDeleted:
    """The entry's thread was deleted; the entry is now closed ``Cancelled("thread_deleted")``."""


AttemptStart: TypeAlias = Started | Exhausted | ThreadDeleted


@dataclass(frozen=True, slots=True)
class Completed:
    output: JSON = None


@dataclass(frozen=True, slots=True)
class Failed:
    error: str


CancelReason: TypeAlias = Literal["thread_deleted", "requested"]


@dataclass(frozen=True, slots=True)
class Cancelled:
    reason: CancelReason


@dataclass(frozen=True, slots=True)
class Interrupted:
    """Closed by the INTERRUPT submission whose entry id is ``by``."""

    by: int


EntryOutcome: TypeAlias = Completed | Failed | Cancelled | Interrupted


def outcome_name(outcome: EntryOutcome) -> str:
    """The closed entry's state name (SPEC §13), as stored in ``outcome_kind``."""
    if isinstance(outcome, Completed):
        return "completed"
    if isinstance(outcome, Failed):
        return "failed"
    if isinstance(outcome, Cancelled):
        return "cancelled"
    if isinstance(outcome, Interrupted):
        return "interrupted"
    raise AssertionError(f"unknown outcome {outcome!r}")


@dataclass(frozen=True, slots=True)
class QueueEntry:
    entry_id: int
    tenant: str | None
    thread_id: str
    key: str | None
    input: JSON
    mode: Mode
    max_attempts: int
    attempts: tuple[Attempt, ...]
    admitted: bool
    thread_deleted: bool
    submitted_at: datetime
    lease_holder: str | None
    lease_expires_at: datetime | None
    outcome: EntryOutcome | None
    closed_at: datetime | None
    closed_at_seq: int | None
    not_before: datetime | None = None
    """No lease before this store time: a delayed submission or a failed attempt's backoff."""
    retry_of: int | None = None
    """The closed entry whose input this one submitted again (`RunQueue.retry`)."""
    priority: int = 0
    """`Submission.priority` (SPEC §15)."""
    kind: str = "default"
    """`Submission.kind` (SPEC §15)."""

    @property
    def closed(self) -> bool:
        return self.outcome is not None


@dataclass(frozen=True, slots=True)
class Lease:
    """A worker's lease on a queue entry; ``token`` fences every call made under it."""

    entry: QueueEntry
    token: int
    holder: str
    expires_at: datetime
    ttl: timedelta
    attempt: AttemptStart | None = None


@dataclass(frozen=True, slots=True)
class QueueStats:
    """`RunQueue.stats`: entries by state (SPEC §13; the states of `durable_graph.core.listing`)."""

    open: int
    running: int
    completed: int
    failed: int
    cancelled: int
    interrupted: int
    oldest_waiting_age: timedelta | None
    """Store now minus the oldest ``open`` entry's ``submitted_at``; None when none waits."""
    waiting_by_kind: dict[str, int] = field(default_factory=dict)
    """``open`` entries by `QueueEntry.kind` (SPEC §15), kinds with none left out."""

    def counts(self) -> dict[str, int]:
        """The counts by state name, in the order of `durable_graph.core.listing.ENTRY_STATES`."""
        return {
            "open": self.open,
            "running": self.running,
            "completed": self.completed,
            "failed": self.failed,
            "cancelled": self.cancelled,
            "interrupted": self.interrupted,
        }


@dataclass(frozen=True, slots=True)
class BackoffPolicy:
    """How long a failed attempt's entry waits before its next attempt (SPEC §13).

    Attempt ``n`` (1-based) that failed waits ``min(cap, base * factor ** (n - 1))`` scaled by a
    uniform random factor in ``[1 - jitter, 1]`` ("equal jitter" when 0.5), so workers retrying
    many entries at once spread out. The default waits about 1 s, 2 s, 4 s ... up to 5 minutes.
    """

    base: timedelta = timedelta(seconds=1)
    factor: float = 2.0
    cap: timedelta = timedelta(minutes=5)
    jitter: float = 0.5

    def delay(self, attempt: int, rand: float) -> timedelta:
        """The wait after failed attempt number ``attempt``; ``rand`` uniform in [0, 1)."""
        raw = self.base.total_seconds() * self.factor ** max(attempt - 1, 0)
        capped = min(raw, self.cap.total_seconds())
        return timedelta(seconds=capped * (1.0 - self.jitter * rand))


# --- attempt planning ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Fresh:
    """Nothing of the entry was applied: apply its input."""


@dataclass(frozen=True, slots=True)
class Resume:
    """An earlier attempt committed but did not finish: continue from ``checkpoint``."""

    checkpoint: Checkpoint


@dataclass(frozen=True, slots=True)
class Finished:
    """The input was applied (``checkpoint`` is None when that turn was retracted): never again."""

    checkpoint: Checkpoint | None = field(default=None)


AttemptPlan: TypeAlias = Fresh | Resume | Finished


@dataclass(frozen=True, slots=True)
class AttemptBegun:
    """What `begin_attempt` did in one transaction (SPEC §11): the lease, the attempt it
    recorded (None when the run id was taken), and, when the attempt started and the thread's
    claim was free, the claim, the entry read under it, ``latest_of_runs`` over its attempts and
    the plan. ``claim`` and ``plan`` are None otherwise: the worker continues with
    `claim_attempt`, which answers the same, claimed (D231).

    ``head`` is the thread's head (``get(thread_id)``) read under the claim, in the same
    transaction — the checkpoint the handler's first commit chains onto — so the worker needs no
    read of its own (D73); None when unclaimed or the thread has no checkpoint."""

    lease: Lease
    attempt: AttemptStart | None
    claim: Claim | None
    entry: QueueEntry
    latest: Checkpoint | None
    plan: AttemptPlan | None
    head: Checkpoint | None


# --- trace contexts (SPEC §13) -----------------------------------------------------------

_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}")
_TRACESTATE = re.compile(r"[\x20-\x7e]{0,512}")


@dataclass(frozen=True, slots=True)
class TraceContext:
    """The W3C trace context a submission was made in (https://www.w3.org/TR/trace-context/).

    Stored beside the entry (PostgreSQL: ``dg_set_trace_context_v2``, so any language can set
    it) and read by the worker's tracing, which makes the attempts children of the submit.
    """

    traceparent: str
    tracestate: str | None = None

    def __post_init__(self) -> None:
        found = (
            _TRACEPARENT.fullmatch(self.traceparent) if isinstance(self.traceparent, str) else None
        )
        if found is None or found.group(1) == "0" * 32 or found.group(2) == "0" * 16:
            raise ValidationError("traceparent must be a W3C version 00 traceparent")
        if self.tracestate is not None and (
            not isinstance(self.tracestate, str) or not _TRACESTATE.fullmatch(self.tracestate)
        ):
            raise ValidationError("tracestate must be at most 512 printable ASCII characters")


__all__ = [
    "ANY",
    "JSON",
    "MAX_THREAD_TTL_MINUTES",
    "THREAD_TTL_STRATEGIES",
    "AnyTenant",
    "Attempt",
    "AttemptBegun",
    "AttemptPlan",
    "AttemptStart",
    "BackoffPolicy",
    "CancelReason",
    "Cancelled",
    "Checkpoint",
    "Claim",
    "ClaimPolicy",
    "Commit",
    "Completed",
    "EffectRecord",
    "EntryOutcome",
    "Event",
    "EventIn",
    "Exhausted",
    "Failed",
    "Finished",
    "Fresh",
    "Interrupted",
    "Lease",
    "Mode",
    "PendingWrite",
    "PruneResult",
    "QueueEntry",
    "QueueStats",
    "Resume",
    "RetentionPolicy",
    "Started",
    "Submission",
    "TenantFilter",
    "ThreadDeleted",
    "ThreadInfo",
    "ThreadSweep",
    "ThreadTtl",
    "Ticket",
    "TraceContext",
    "WatchPolicy",
    "outcome_name",
]
