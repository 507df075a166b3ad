"""The queue listing rules (SPEC §13): `RunQueue.entries` and `RunQueue.stats`, written once.

States are exclusive, so the counts of `stats` add up to every entry kept:

- ``open``: not closed and no live lease (waiting for a worker);
- ``running``: not closed, with a live lease (``store now < lease_expires_at``);
- ``completed``, ``failed``, ``cancelled``, ``interrupted``: closed with that outcome.

`entries` lists **newest first** (entry id descending); ``after`` is the last entry id of the
previous page, and the next page holds the entries with a smaller id. Newest first because the
ids only grow: a page cursor stays valid while new entries arrive, and the first page is what an
operator wants to see. The embedded stores apply them in `durable_graph.embedded.run_queue` (over
``Tx.entry_page`` / ``Tx.entry_counts``), PostgreSQL in ``sql/92_queue_listing.sql``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Final, Literal, TypeAlias, cast, get_args

from durable_graph.core.model import (
    QueueEntry,
    QueueStats,
    outcome_name,
)

EntryState: TypeAlias = Literal[
    "open", "running", "completed", "failed", "cancelled", "interrupted"
]
ENTRY_STATES: Final[tuple[str, ...]] = get_args(EntryState)
MAX_LIMIT: Final = 1000
"""The largest page `entries` returns: a page is read in one snapshot, kept small."""


def state_at(outcome_kind: str | None, lease_expires_at: datetime | None, now: datetime) -> str:
    """The state of a stored entry row (``outcome_kind`` is a closed outcome's name)."""
    if outcome_kind is not None:
        return outcome_kind
    return "running" if lease_expires_at is not None and now < lease_expires_at else "open"


def state_of(entry: QueueEntry, now: datetime) -> EntryState:
    kind = None if entry.outcome is None else outcome_name(entry.outcome)
    return cast(EntryState, state_at(kind, entry.lease_expires_at, now))


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


def age_text(age: timedelta, sep: str, width: int) -> str:
    """``age`` (e.g. `oldest_waiting_age`) in whole hours, minutes and seconds from its first
    non-zero unit: ``1h02m03s`` (``sep=""``, ``width=2``) or ``2m 3s`` (``sep=" "``, ``width=1``);
    every unit after the first is zero-padded to ``width`` digits."""
    hours, rest = divmod(int(age.total_seconds()), 3600)
    minutes, seconds = divmod(rest, 60)
    parts = [(hours, "h"), (minutes, "m"), (seconds, "s")]
    while len(parts) > 1 and parts[0][0] == 0:
        parts.pop(0)
    (first, unit), *rest_parts = parts
    return sep.join([f"{first}{unit}", *(f"{n:0{width}d}{u}" for n, u in rest_parts)])


__all__ = [
    "ENTRY_STATES",
    "MAX_LIMIT",
    "EntryState",
    "age_text",
    "make_stats",
    "state_at",
    "state_of",
]
