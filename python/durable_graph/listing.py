"""The queue listing rules (SPEC §13): `RunQueue.entries` and `RunQueue.stats`, written once.

States are exclusive, so the counts of `stats` add up to every entry kept:

- ``open``: not closed and no live lease (waiting for a worker);
- ``running``: not closed, with a live lease (``store now < lease_expires_at``);
- ``completed``, ``failed``, ``cancelled``, ``interrupted``: closed with that outcome.

`entries` lists **newest first** (entry id descending); ``after`` is the last entry id of the
previous page, and the next page holds the entries with a smaller id. Newest first because the
ids only grow: a page cursor stays valid while new entries arrive, and the first page is what an
operator wants to see. PostgreSQL implements the same rules in ``sql/92_queue_listing.sql``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Final, Literal, TypeAlias, cast, get_args

from .errors import ValidationError
from .model import (
    AnyTenant,
    Cancelled,
    Completed,
    Failed,
    Interrupted,
    QueueEntry,
    QueueStats,
    TenantFilter,
)
from .validation import check_int, check_optional_identifier, check_tenant_filter

EntryState: TypeAlias = Literal[
    "open", "running", "completed", "failed", "cancelled", "interrupted"
]
ENTRY_STATES: Final[tuple[str, ...]] = get_args(EntryState)
MAX_LIMIT: Final = 1000
"""The largest page `entries` returns: a page is read in one snapshot, kept small."""


def check_state(value: object) -> EntryState | None:
    if value is None:
        return None
    if not isinstance(value, str) or value not in ENTRY_STATES:
        raise ValidationError(
            f"state must be None or one of {', '.join(ENTRY_STATES)}; got {value!r}"
        )
    return cast(EntryState, value)


def check_listing(
    state: object, tenant: object, thread_id: object, after: object, limit: object
) -> tuple[EntryState | None, TenantFilter, str | None, int | None, int]:
    """The arguments of `entries`, checked in signature order (ValidationError names one)."""
    checked_state = check_state(state)
    checked_tenant = check_tenant_filter("tenant", tenant, allow_any=True)
    checked_thread = check_optional_identifier("thread_id", thread_id)
    checked_after = None if after is None else check_int("after", after, minimum=1)
    checked_limit = check_int("limit", limit, minimum=1, maximum=MAX_LIMIT)
    return checked_state, checked_tenant, checked_thread, checked_after, checked_limit


def state_of(entry: QueueEntry, now: datetime) -> EntryState:
    outcome = entry.outcome
    if outcome is None:
        live = entry.lease_expires_at is not None and now < entry.lease_expires_at
        return "running" if live else "open"
    if isinstance(outcome, Completed):
        return "completed"
    if isinstance(outcome, Failed):
        return "failed"
    if isinstance(outcome, Cancelled):
        return "cancelled"
    if isinstance(outcome, Interrupted):
        return "interrupted"
    raise AssertionError(f"unknown outcome {outcome!r}")


def tenant_wanted(entry_tenant: str | None, wanted: TenantFilter | AnyTenant) -> bool:
    return not isinstance(wanted, str | None) or entry_tenant == wanted


def select_entries(
    entries: Iterable[QueueEntry],
    now: datetime,
    state: EntryState | None,
    tenant: TenantFilter,
    thread_id: str | None,
    after: int | None,
    limit: int,
) -> list[QueueEntry]:
    """One page of ``entries`` (any order) under the listing rules, for the embedded stores."""
    found = [
        e
        for e in entries
        if (state is None or state_of(e, now) == state)
        and tenant_wanted(e.tenant, tenant)
        and (thread_id is None or e.thread_id == thread_id)
        and (after is None or e.entry_id < after)
    ]
    found.sort(key=lambda e: e.entry_id, reverse=True)
    return found[:limit]


def stats_of(entries: Iterable[QueueEntry], now: datetime, tenant: TenantFilter) -> QueueStats:
    """Counts by state and the oldest waiting (``open``) entry's age at ``now``."""
    counts = dict.fromkeys(ENTRY_STATES, 0)
    oldest: datetime | None = None
    for e in entries:
        if not tenant_wanted(e.tenant, tenant):
            continue
        state = state_of(e, now)
        counts[state] += 1
        if state == "open" and (oldest is None or e.submitted_at < oldest):
            oldest = e.submitted_at
    age = None if oldest is None else max(now - oldest, timedelta(0))
    return make_stats(counts, age)


def make_stats(counts: Mapping[str, int], oldest_waiting_age: timedelta | None) -> QueueStats:
    """A `QueueStats` from counts by state name (a missing state counts 0)."""
    return QueueStats(
        open=counts.get("open", 0),
        running=counts.get("running", 0),
        completed=counts.get("completed", 0),
        failed=counts.get("failed", 0),
        cancelled=counts.get("cancelled", 0),
        interrupted=counts.get("interrupted", 0),
        oldest_waiting_age=oldest_waiting_age,
    )


__all__ = [
    "ENTRY_STATES",
    "MAX_LIMIT",
    "EntryState",
    "check_listing",
    "check_state",
    "make_stats",
    "select_entries",
    "state_of",
    "stats_of",
]
