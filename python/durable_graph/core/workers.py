"""The worker registry (issue 26 item 13): each running worker says, every few seconds, that it
lives and whether it runs an attempt, so an idle worker (one holding no lease) can be seen.

A beat is written at the store's clock: ``started_at`` is the time of the holder's first beat,
``last_seen`` of its latest. `RunQueue.workers` lists the holders seen within a bound that have
not said ``stopped``. A beat also drops the rows of holders not seen for `FORGET_AFTER`, so the
registry holds about the workers of the last day, whatever their number over time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final, Literal

from durable_graph.core.errors import ValidationError
from durable_graph.core.scalars import (
    check_duration,
    check_identifier,
    check_int,
    check_optional_identifier,
)
from durable_graph.core.scheduling import check_kinds

WorkerState = Literal["idle", "busy", "stopped"]
"""``idle``: running, no attempt in hand; ``busy``: running at least one; ``stopped``: its last
beat, sent on a clean stop (it leaves `RunQueue.workers` at once)."""

WORKER_STATES: Final[tuple[WorkerState, ...]] = ("idle", "busy", "stopped")

SEEN_WITHIN: Final = timedelta(seconds=30)
"""`RunQueue.workers`'s default bound: a worker beats every 5 s (`WorkerOptions`), so one silent
for 30 s has missed six beats: it died or cannot reach the store."""

FORGET_AFTER: Final = timedelta(days=1)
"""A holder not seen for this long is dropped by the next beat of any worker."""

INT32_MAX: Final = 2**31 - 1

MAX_WORKERS_PAGE: Final = 1000
"""The most workers one `RunQueue.workers` call returns (issue 37 item 9: the registry is read
page by page, ``after`` the last holder of the previous page)."""


@dataclass(frozen=True, slots=True)
class WorkerBeat:
    """What a worker says of itself: its lease holder id, host, process id, the kinds it serves
    (None: every kind) and its state."""

    holder: str
    host: str
    pid: int
    kinds: tuple[str, ...] | None
    state: WorkerState


@dataclass(frozen=True, slots=True)
class WorkerSeen:
    """A worker as the store last heard of it (times at the store's clock, UTC)."""

    holder: str
    host: str
    pid: int
    kinds: tuple[str, ...] | None
    state: WorkerState
    started_at: datetime
    last_seen: datetime


def check_worker_state(value: object) -> WorkerState:
    for state in WORKER_STATES:
        if value == state:
            return state
    raise ValidationError(f"state must be one of {', '.join(WORKER_STATES)}, got {value!r}")


def check_beat(value: object) -> WorkerBeat:
    if not isinstance(value, WorkerBeat):
        raise ValidationError(f"beat must be a WorkerBeat, got {type(value).__name__}")
    return WorkerBeat(
        check_identifier("holder", value.holder),
        check_identifier("host", value.host),
        check_int("pid", value.pid, minimum=0, maximum=INT32_MAX),
        check_kinds("kinds", value.kinds),
        check_worker_state(value.state),
    )


def check_seen_within(value: object) -> timedelta:
    return check_duration("seen_within", value)


def check_workers_page(after: object, limit: object) -> tuple[str | None, int]:
    """`RunQueue.workers`'s page: after a holder (None: from the first), 1..`MAX_WORKERS_PAGE`."""
    return (
        check_optional_identifier("after", after),
        check_int("limit", limit, minimum=1, maximum=MAX_WORKERS_PAGE),
    )


__all__ = [
    "FORGET_AFTER",
    "MAX_WORKERS_PAGE",
    "SEEN_WITHIN",
    "WORKER_STATES",
    "WorkerBeat",
    "WorkerSeen",
    "WorkerState",
    "check_beat",
    "check_seen_within",
    "check_worker_state",
    "check_workers_page",
]
