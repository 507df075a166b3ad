"""The RunQueue interface (SPEC §5) and the pure planning rule every worker follows.

Order per thread: open entries that recorded an attempt first, then INTERRUPT entries, then the
rest, each by entry id. Only the head is ever leased, and only while no other entry of the thread
holds a live lease.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

from durable_graph.core.items import ScoredItem, StoredItem
from durable_graph.core.listing import EntryState
from durable_graph.core.model import (
    ANY,
    JSON,
    AttemptPlan,
    AttemptStart,
    Checkpoint,
    EntryOutcome,
    Finished,
    Fresh,
    Lease,
    QueueEntry,
    QueueStats,
    Resume,
    Submission,
    TenantFilter,
    Ticket,
    TraceContext,
)
from durable_graph.core.scheduling import ConcurrencyLimit, LimitScope, Schedule, StoredSchedule
from durable_graph.core.workers import SEEN_WITHIN, WorkerBeat, WorkerSeen


def plan_attempt(entry: QueueEntry, latest: Checkpoint | None) -> AttemptPlan:
    """What an attempt must do, given the newest checkpoint of the entry's recorded runs.

    ``latest`` must come from `Checkpointer.latest_of_runs` over ``entry.attempts``, with
    ``entry`` read *after* the thread's claim is held (SPEC §5, at most once).
    """
    if latest is None:
        # Admitted with no checkpoint left: the input was applied, then retracted.
        return Finished(None) if entry.admitted else Fresh()
    if latest.next == ():
        return Finished(latest)
    return Resume(latest)


@runtime_checkable
class RunQueue(Protocol):
    """Submitted runs, leased by workers on any machine, attempted and closed once."""

    def submit(self, submission: Submission) -> Ticket:
        """Enqueue, deduplicated by the tenant's key; REJECT and INTERRUPT per SPEC §5."""
        ...

    def submit_many(self, submissions: Sequence[Submission]) -> list[Ticket]:
        """One transaction: each submission as `submit` treats it, in order; any error writes
        nothing (SPEC §11)."""
        ...

    def lease(
        self,
        holder: str,
        ttl: timedelta,
        tenant: TenantFilter = ANY,
        run_id: str | None = None,
        kinds: Sequence[str] | None = None,
    ) -> Lease | None:
        """Lease the available thread head of highest priority, then oldest (SPEC §15), of a
        kind in ``kinds`` (None: any) whose tenant and kind are under their concurrency limits;
        with ``run_id`` record the attempt too."""
        ...

    def renew(self, lease: Lease, ttl: timedelta | None = None) -> Lease: ...

    def release(self, lease: Lease) -> None: ...

    def record_attempt(self, lease: Lease, run_id: str) -> AttemptStart:
        """Record an attempt durably before returning (SPEC §8 rule 20 for the check order)."""
        ...

    def close(self, lease: Lease, outcome: EntryOutcome) -> QueueEntry: ...

    def cancel(self, entry_id: int, tenant: str | None = None) -> QueueEntry: ...

    def defer(self, lease: Lease, delay: timedelta, error: str | None = None) -> QueueEntry:
        """End the lease and hold the entry (so its thread) until store-now + ``delay``; with
        ``error``, record it as the current attempt's failure reason (SPEC §13 backoff)."""
        ...

    def retry(self, entry_id: int, tenant: str | None = None, again: bool = False) -> Ticket:
        """Submit a failed or cancelled entry's input again as a new ENQUEUE entry recording
        ``retry_of``; `ValidationError` naming ``entry_id`` for an open, completed or
        interrupted entry, `NotFound` for an unknown or another tenant's (SPEC §13).
        Idempotent: while a retry of the entry is kept, another call returns that first
        retry's ticket with ``existing=True``; ``again=True`` submits one more (D66)."""
        ...

    def entry(self, entry_id: int, tenant: str | None = None) -> QueueEntry | None: ...

    def open_entries(
        self,
        tenant: TenantFilter = None,
        thread_id: str | None = None,
        after: int | None = None,
        limit: int = 1000,
    ) -> list[QueueEntry]:
        """One page of open entries in rule-24 order, after the entry ``after`` (placed at its
        thread's head now, its queue rank, its id; unknown or not ``tenant``'s: ``[]``). May
        hold fewer than ``limit`` rows (a byte-bounded page); only an empty page is the end."""
        ...

    def entries(
        self,
        state: EntryState | None = None,
        tenant: TenantFilter = ANY,
        thread_id: str | None = None,
        after: int | None = None,
        limit: int = 100,
    ) -> list[QueueEntry]:
        """One page of entries, newest first; ``after`` = the previous page's last entry id.

        ``state``: open (waiting), running (open with a live lease), or a closed outcome's name
        (`durable_graph.core.listing`).
        """
        ...

    def stats(self, tenant: TenantFilter = ANY) -> QueueStats:
        """Counts by state and the oldest waiting entry's age, by the store clock."""
        ...

    def await_closed(
        self, entry_id: int, timeout: timedelta, tenant: str | None = None
    ) -> QueueEntry | None: ...

    def reclaim(self, older_than: timedelta, batch: int = 1000) -> int: ...

    # --- SPEC §15: concurrency limits and schedules (durable_graph.core.scheduling) -----------

    def set_limit(self, scope: LimitScope, name: str, max_leases: int) -> ConcurrencyLimit:
        """At most ``max_leases`` live leases for the tenant or kind ``name`` (replacing its
        limit); enforced by every later lease."""
        ...

    def limits(self) -> list[ConcurrencyLimit]:
        """Every limit, by scope then name."""
        ...

    def remove_limit(self, scope: LimitScope, name: str) -> bool:
        """True when there was a limit."""
        ...

    def put_schedule(self, schedule: Schedule) -> StoredSchedule:
        """Add the schedule, or replace the one of its name (keeping whether it is paused, its
        creation time and its newest submitted slot)."""
        ...

    def schedules(self) -> list[StoredSchedule]:
        """Every schedule, by name."""
        ...

    def remove_schedule(self, name: str) -> bool: ...

    def pause_schedule(self, name: str, paused: bool = True) -> StoredSchedule:
        """Pause (or, ``paused=False``, resume) a schedule; `NotFound` when unknown."""
        ...

    def fire_schedule(self, name: str, slot: datetime) -> Ticket | None:
        """Atomically: when ``slot`` is due (the schedule is not paused; created before it;
        ``slot`` at or before store-now and after the newest submitted slot), submit the
        schedule's run under the key ``schedule:<name>:<slot>`` and record ``slot`` as the newest;
        else None. So each slot is submitted at most once, however many schedulers fire it."""
        ...

    # --- SPEC §20.3: the item store, LangGraph's long-term memory (durable_graph.core.items) -----

    def put_item(
        self,
        namespace: Sequence[str],
        key: str,
        value: Mapping[str, JSON],
        ttl: float | None = None,
        tenant: str | None = None,
    ) -> StoredItem:
        """Put the item (replacing the one at ``namespace`` / ``key`` of ``tenant``, keeping its
        ``created_at``); ``ttl`` minutes from store-now it expires (None: never)."""
        ...

    def get_item(
        self,
        namespace: Sequence[str],
        key: str,
        refresh_ttl: bool = False,
        tenant: str | None = None,
    ) -> StoredItem | None:
        """The live item, or None (missing, expired, another tenant's); ``refresh_ttl`` moves
        its expiry to store-now plus its ttl."""
        ...

    def delete_item(self, namespace: Sequence[str], key: str, tenant: str | None = None) -> bool:
        """True when there was an item (expired or not)."""
        ...

    def search_items(
        self,
        prefix: Sequence[str],
        filter: Mapping[str, JSON] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool = False,
        tenant: str | None = None,
    ) -> list[StoredItem]:
        """The live items under ``prefix`` (``()``: all) that pass ``filter``, newest first."""
        ...

    def put_indexed_item(
        self,
        namespace: Sequence[str],
        key: str,
        value: Mapping[str, JSON],
        vectors: Mapping[str, Sequence[float]],
        ttl: float | None = None,
        tenant: str | None = None,
    ) -> StoredItem:
        """`put_item`, and the item's vectors (field path to embedding) become ``vectors``
        (``{}``: none) in the same transaction (D296)."""
        ...

    def search_items_by_vector(
        self,
        prefix: Sequence[str],
        vector: Sequence[float],
        filter: Mapping[str, JSON] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool = False,
        tenant: str | None = None,
    ) -> list[ScoredItem]:
        """The live items under ``prefix`` that pass ``filter`` and have vectors of
        ``vector``'s length, by their best vector's cosine similarity to it, highest first."""
        ...

    def item_namespaces(
        self,
        prefix: Sequence[str] | None = None,
        suffix: Sequence[str] | None = None,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
        tenant: str | None = None,
    ) -> list[tuple[str, ...]]:
        """The distinct namespaces of live items, cut to ``max_depth`` labels, in label order."""
        ...

    def sweep_items(self, batch: int = 1000) -> int:
        """Delete up to ``batch`` expired items (every tenant's); how many."""
        ...

    # --- the worker registry (durable_graph.core.workers) -------------------------------------

    def worker_heartbeat(self, beat: WorkerBeat) -> WorkerSeen:
        """Record that the worker ``beat.holder`` lives, in ``beat.state``, at the store's clock
        (its first beat sets ``started_at``); drop holders not seen for a day."""
        ...

    def workers(
        self, seen_within: timedelta = SEEN_WITHIN, after: str | None = None, limit: int = 1000
    ) -> list[WorkerSeen]:
        """The workers whose latest beat is within ``seen_within`` of the store's now and is not
        ``stopped``, by holder (byte order): those after the holder ``after``, ``limit``
        (1..1000) at most — the next page starts after the last one's holder."""
        ...


class TraceContexts(Protocol):
    """A run queue that keeps each entry's submit trace context (SPEC §13): every store's queue
    does; `durable_graph.observe.tracing` keeps the contexts itself for one that does not."""

    def set_trace_context(
        self, entry_id: int, context: TraceContext, tenant: str | None = None
    ) -> bool:
        """Remember the trace ``context`` entry ``entry_id`` of ``tenant`` (None: the no-tenant
        namespace) was submitted in (the first one stays); False for an entry that has a
        context, and for one that is unknown or another tenant's alike (SPEC §10.6)."""
        ...

    def trace_context(self, entry_id: int, tenant: str | None = None) -> TraceContext | None:
        """The context set for entry ``entry_id`` of ``tenant``; None when none was set or the
        entry is unknown or another tenant's."""
        ...


__all__ = ["RunQueue", "TraceContexts", "plan_attempt"]
