"""The rows the embedded rules read, named after the tables of ``migrations/0001.tables.sql``.

A storage hands these out as plain values: the rules read them and change the store only through
the storage's methods, never by assigning to a row.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from durable_graph.core.listing import state_at
from durable_graph.core.model import ANY, Mode, TenantFilter
from durable_graph.core.scheduling import EncodedSchedule, schedule_fields

Place = tuple[int, int, int, int, int]
"""`EntryRow.list_place`: ``(open_since, rank, anchor, behind, entry_id)``."""


@dataclass(slots=True)
class TtlRow:
    """A ``thread_ttls`` row (migration 0021, D260): a thread's TTL, for the incarnation of the
    thread whose first commit was ``first_commit_order`` (a deleted and re-made thread has another,
    so its old TTL is void without the delete touching it); ``due_at`` is when the sweep looks at
    it next, never later than it can expire."""

    thread_id: str
    minutes: float
    strategy: str
    first_commit_order: int
    set_at: datetime
    due_at: datetime
    swept_at: datetime | None


@dataclass(slots=True)
class ClaimRow:
    """The ``claim_*`` columns of a ``threads`` row: the current claim, live or expired."""

    token: int
    holder: str
    expires_at: datetime
    ttl: timedelta


@dataclass(slots=True)
class ThreadRow:
    """A live ``threads`` row: the thread has a commit and was not deleted since."""

    thread_id: str
    parent_thread_id: str | None
    head_id: str | None
    last_seq: int
    created_at: datetime
    updated_at: datetime
    first_commit_order: int


@dataclass(slots=True)
class CheckpointRow:
    thread_id: str
    checkpoint_id: str
    seq: int
    parent_id: str | None
    run_id: str
    state: str
    """JSON text, as every stored value."""
    metadata: str
    next: tuple[str, ...]
    created_at: datetime
    committed_at: datetime


@dataclass(slots=True)
class EffectRow:
    thread_id: str
    key: str
    value: str
    run_id: str | None
    recorded_at: datetime


@dataclass(slots=True)
class EntryRow:
    """A kept ``queue_entries`` row (open or closed, not reclaimed)."""

    entry_id: int
    tenant: str | None
    thread_id: str
    key: str | None
    input: str
    """Canonical JSON (sorted keys): compared byte for byte by `submit` (rule 19)."""
    mode: Mode
    max_attempts: int
    attempt_count: int
    admitted: bool
    thread_deleted: bool
    submitted_at: datetime
    lease_token: int | None
    """The entry's current lease (live or expired); None when none (released, closed, ended)."""
    lease_holder: str | None
    lease_expires_at: datetime | None
    lease_ttl: timedelta | None
    outcome_kind: str | None
    outcome_detail: str | None
    closed_at: datetime | None
    closed_at_seq: int | None
    not_before: datetime | None = None
    """No lease before this store time (a delayed submission or a backoff; SPEC §13)."""
    retry_of: int | None = None
    priority: int = 0
    kind: str = "default"
    open_since: int | None = None
    """The id of the entry that opened its thread's current stretch of open entries (None: its
    own id); every open entry of a thread holds the same, so listing pages stay put (D65)."""
    list_after: int | None = None
    """An INTERRUPT submitted while a non-INTERRUPT entry of its thread had recorded an attempt
    is listed right behind that entry: the anchor of that entry's place (else None)."""

    @property
    def list_place(self) -> Place:
        """Where `open_entries` lists it, fixed for the entry's life (issue 26 item 1, D65):
        its thread's stretch, then its queue rank as it was when submitted (INTERRUPT 1, the rest
        2, behind an attempted entry: that entry's), then its entry id. Queue order whenever the
        entries of a thread are listed, without ever moving an entry."""
        since = self.entry_id if self.open_since is None else self.open_since
        if self.list_after is not None:
            return since, 2, self.list_after, 1, self.entry_id
        return since, 1 if self.mode is Mode.INTERRUPT else 2, self.entry_id, 0, self.entry_id

    def place_for_next(self, mode: Mode) -> tuple[int, int | None]:
        """``(open_since, list_after)`` of an entry of ``mode`` submitted while this entry is
        its thread's head (D65)."""
        since, rank, anchor, _, _ = self.list_place
        behind = mode is Mode.INTERRUPT and self.attempt_count > 0 and rank == 2
        return since, anchor if behind else None

    @property
    def closed(self) -> bool:
        return self.outcome_kind is not None

    @property
    def queue_rank(self) -> int:
        """Order inside a thread: attempted first, then INTERRUPT, then the rest (SPEC §5)."""
        if self.attempt_count > 0:
            return 0
        return 1 if self.mode is Mode.INTERRUPT else 2


@dataclass(frozen=True, slots=True)
class EntryQuery:
    """One page of `RunQueue.entries` as the storage reads it (``Tx.entry_page``), checked.

    The kept entries in ``state`` at store now (`durable_graph.core.listing.state_at`; None = any),
    of ``tenant`` and ``thread_id`` (None = any), with ids below ``after``: the ``limit`` newest.
    """

    state: str | None
    tenant: TenantFilter
    thread_id: str | None
    after: int | None
    limit: int

    def admits(self, entry: EntryRow, now: datetime) -> bool:
        """Whether ``entry`` is on the page, ``limit`` aside (the SQL storage's WHERE)."""
        return (
            (
                self.state is None
                or state_at(entry.outcome_kind, entry.lease_expires_at, now) == self.state
            )
            and (self.tenant is ANY or entry.tenant == self.tenant)
            and (self.thread_id is None or entry.thread_id == self.thread_id)
            and (self.after is None or entry.entry_id < self.after)
        )


@dataclass(frozen=True, slots=True)
class HeadPick:
    """Which thread heads a lease may take (``Tx.leasable_head``; SPEC §5, §15)."""

    tenant: TenantFilter
    kinds: tuple[str, ...] | None = None
    """The kinds the worker serves; None: every kind."""
    full_tenants: frozenset[str] = frozenset()
    """Tenants at their concurrency limit: their heads wait."""
    full_kinds: frozenset[str] = frozenset()

    def admits(self, tenant: str | None, kind: str) -> bool:
        return (
            (self.tenant is ANY or tenant == self.tenant)
            and (self.kinds is None or kind in self.kinds)
            and (tenant is None or tenant not in self.full_tenants)
            and kind not in self.full_kinds
        )


@dataclass(frozen=True, slots=True)
class ScheduleRow(EncodedSchedule):
    """A ``schedules`` row (SPEC §15): the schedule as checked, and the store's part of it."""

    paused: bool
    created_at: datetime
    last_slot: datetime | None

    @classmethod
    def of(
        cls, schedule: EncodedSchedule, paused: bool, created_at: datetime, last: datetime | None
    ) -> ScheduleRow:
        """The row keeping ``schedule``, with the store's fields ``paused``, ``created_at`` and
        ``last_slot`` (``last``)."""
        return cls(
            **schedule_fields(schedule), paused=paused, created_at=created_at, last_slot=last
        )


__all__ = [
    "CheckpointRow",
    "ClaimRow",
    "EffectRow",
    "EntryQuery",
    "EntryRow",
    "HeadPick",
    "Place",
    "ScheduleRow",
    "ThreadRow",
]
