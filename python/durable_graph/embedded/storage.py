"""The storage interface the embedded rules run over (as River writes its rules over drivers).

A `Storage` opens transactions; a `Tx` is one of them, with store-now read once after the
transaction holds its lock (D4: store time is read once a call, after its locks). Each `Tx`
method is one read or one write of the tables of ``migrations/0001.tables.sql``; the order of
checks, the errors and every decision live in `durable_graph.embedded.checkpointer` and
`durable_graph.embedded.run_queue`, never here.

Storages raise nothing but `ProcessingError` (a failed or refused transaction), and a write
transaction that raises leaves nothing written. The rules make every check before their first
write, so the in-memory storage needs no undo log.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Protocol

from durable_graph.core.items import StoredItem
from durable_graph.core.model import Attempt, Event, PendingWrite, TenantFilter
from durable_graph.core.validation import EncodedEvent, EncodedSubmission, EncodedWrite
from durable_graph.core.workers import WorkerSeen
from durable_graph.embedded.rows import (
    CheckpointRow,
    ClaimRow,
    EffectRow,
    EntryQuery,
    EntryRow,
    HeadPick,
    Place,
    ScheduleRow,
    ThreadRow,
    TtlRow,
)


class Signal(Protocol):
    """Something to wait on for a change made in this process (SPEC §11: waits wake at once)."""

    def wait(self, timeout: float) -> object: ...


class Tx(Protocol):
    """One transaction. ``now`` is store time, read once when the lock is held (D4)."""

    @property
    def now(self) -> datetime: ...

    def issue_token(self) -> int:
        """A fencing token greater than every token issued before, claims and leases alike (D3)."""
        ...

    # --- threads and claims --------------------------------------------------------------

    def claim_of(self, thread_id: str) -> ClaimRow | None: ...
    def put_claim(self, thread_id: str, claim: ClaimRow) -> None: ...
    def set_claim_expiry(self, thread_id: str, expires_at: datetime) -> None: ...
    def drop_claim(self, thread_id: str) -> None: ...

    def thread(self, thread_id: str) -> ThreadRow | None:
        """The live thread (has a commit, not deleted since), else None."""
        ...

    def create_thread(self, thread_id: str, parent_thread_id: str | None) -> None:
        """Make the thread live: ``last_seq`` continues a deleted thread's numbering."""
        ...

    def last_seq_of(self, thread_id: str) -> int:
        """The thread's last event number, kept over a delete; 0 if none (rule 26)."""
        ...

    def set_head(self, thread_id: str, head_id: str | None) -> None: ...

    def remove_thread(self, thread_id: str) -> None:
        """Delete the thread's data and claim; keep its ``last_seq`` (rule 26); a live thread's
        deletion time (``now``) is kept too (D241)."""
        ...

    def deleted_at_of(self, thread_id: str) -> datetime | None:
        """When a live thread of this id was last deleted; None if never (D241)."""
        ...

    def descendants(self, thread_id: str) -> list[str]:
        """``thread_id`` and every live thread whose first commit named one of them (D14: delete
        cascades to descendants)."""
        ...

    def children_of(self, thread_id: str) -> list[str]:
        """Live threads naming ``thread_id`` as parent, in first-commit order."""
        ...

    def thread_page(self, after: str | None, limit: int) -> list[ThreadRow]:
        """Live threads after ``after`` in UTF-8 byte order (rule 15)."""
        ...

    # --- checkpoints, writes, events, effects --------------------------------------------

    def checkpoint(self, thread_id: str, checkpoint_id: str) -> CheckpointRow | None: ...
    def insert_checkpoint(self, row: CheckpointRow) -> None: ...

    def remove_checkpoint(self, thread_id: str, checkpoint_id: str) -> None:
        """A checkpoint goes with its pending writes."""
        ...

    def orphan(self, thread_id: str, removed: Sequence[str]) -> None:
        """The thread's checkpoints whose parent is in ``removed`` now have none (prune)."""
        ...

    def checkpoints_newest_first(self, thread_id: str) -> list[CheckpointRow]: ...

    def checkpoints_before(
        self, thread_id: str, below_seq: int | None, limit: int
    ) -> list[CheckpointRow]:
        """Newest first, ``seq < below_seq`` (every one when None)."""
        ...

    def latest_of_runs(self, thread_id: str, run_ids: Sequence[str]) -> CheckpointRow | None: ...

    def run_in_history(self, thread_id: str, run_id: str) -> bool:
        """A checkpoint of ``run_id`` is now in the thread's history."""
        ...

    def add_writes(
        self, thread_id: str, checkpoint_id: str, writes: Sequence[EncodedWrite]
    ) -> None:
        """Rule 12: the first value stored under (task_id, channel, idx) wins."""
        ...

    def writes_of(self, thread_id: str, checkpoint_id: str) -> list[PendingWrite]:
        """By (task_path, task_id, idx), LangGraph's ``writes_sort_key``; ties in the order
        written."""
        ...

    def append_event(self, thread_id: str, event: EncodedEvent, run_id: str | None) -> Event:
        """Take the next number from the thread row and append the event (D7: a created_at of
        None means the commit time)."""
        ...

    def events_after(self, thread_id: str, after_seq: int, limit: int) -> list[Event]: ...

    def drop_events_before(self, thread_id: str, cutoff: datetime) -> int:
        """Delete the events committed before ``cutoff``; how many."""
        ...

    def effect(self, thread_id: str, key: str) -> EffectRow | None: ...
    def insert_effect(self, row: EffectRow) -> None: ...

    def effects_of(self, thread_id: str) -> list[EffectRow]:
        """Every effect of the thread (copy_thread), in key order."""
        ...

    def effect_page(self, thread_id: str, after: str | None, limit: int) -> list[EffectRow]:
        """At most ``limit`` effects of the thread with keys after ``after`` (None: from the
        first), in UTF-8 byte order of the keys."""
        ...

    # --- queue entries --------------------------------------------------------------------

    def entry(self, entry_id: int) -> EntryRow | None: ...
    def entry_by_key(self, tenant: str | None, key: str) -> EntryRow | None: ...

    def insert_entry(self, sub: EncodedSubmission) -> int:
        """A new open entry submitted now (with its ``not_before`` and ``retry_of``); its id,
        greater than every id before (never reused)."""
        ...

    def has_open_entry(self, thread_id: str) -> bool: ...

    def unattempted_interrupts(self, thread_id: str) -> list[EntryRow]:
        """The thread's open INTERRUPT entries with no attempt."""
        ...

    def leasable_head(self, pick: HeadPick) -> EntryRow | None:
        """The first thread head in lease order — priority, highest first, then entry id (SPEC
        §15; heads are over every tenant, rule 18) — of ``pick.tenant``, of a kind in
        ``pick.kinds`` (None: any), of no tenant and no kind ``pick`` excludes (at their
        concurrency limit), whose thread holds no live lease (D1: live while now < expires_at)
        and whose ``not_before`` has come (SPEC §13: a delayed head holds its thread back)."""
        ...

    # --- SPEC §15: concurrency limits and schedules (durable_graph.embedded.scheduling) ---------

    def limit_of(self, scope: str, name: str) -> int | None:
        """The ``max_leases`` of the tenant or kind ``name``; None when it has no limit."""
        ...

    def live_leases(self, scope: str, name: str, at_most: int) -> int:
        """Open entries of the tenant or kind holding a live lease now (counted up to at_most)."""
        ...

    def put_limit(self, scope: str, name: str, max_leases: int) -> None: ...
    def drop_limit(self, scope: str, name: str) -> bool: ...
    def all_limits(self) -> list[tuple[str, str, int]]:
        """(scope, name, max_leases), by scope then name (UTF-8 byte order)."""
        ...

    def schedule_row(self, name: str) -> ScheduleRow | None: ...
    def put_schedule_row(self, row: ScheduleRow) -> None:
        """Insert or replace the row of ``row.name``."""
        ...

    def drop_schedule(self, name: str) -> bool: ...
    def schedule_rows(self) -> list[ScheduleRow]:
        """Every schedule, by name (UTF-8 byte order)."""
        ...

    # --- SPEC §20.3: the item store (durable_graph.embedded.items) -----------------------------

    def item_row(
        self, tenant: str | None, namespace: tuple[str, ...], key: str
    ) -> StoredItem | None:
        """The item of ``tenant`` (None: no tenant) at ``namespace`` / ``key``, expired or not."""
        ...

    def put_item_row(self, tenant: str | None, item: StoredItem) -> None:
        """Insert or replace the item of ``tenant`` at its namespace and key."""
        ...

    def drop_item(self, tenant: str | None, namespace: tuple[str, ...], key: str) -> bool:
        """Delete the item and its vectors; whether there was one."""
        ...

    def item_rows(self, tenant: str | None, prefix: tuple[str, ...]) -> Generator[StoredItem]:
        """Every item of ``tenant`` whose namespace starts with ``prefix``, expired or not,
        newest ``updated_at`` first (items of one ``updated_at`` in any order), read as they
        are taken."""
        ...

    def sweep_item_rows(self, batch: int) -> int:
        """Delete up to ``batch`` items (of any tenant) expired at ``now``, and their vectors;
        how many."""
        ...

    def put_item_vectors(
        self,
        tenant: str | None,
        namespace: tuple[str, ...],
        key: str,
        updated_at: datetime,
        vectors: Mapping[str, tuple[float, ...]],
    ) -> None:
        """Replace the item's vectors with ``vectors`` (field to embedding), written with the
        item's ``updated_at`` (a later plain put makes them stale, D296)."""
        ...

    def item_vectors(
        self, tenant: str | None, namespace: tuple[str, ...], key: str
    ) -> tuple[datetime, dict[str, tuple[float, ...]]] | None:
        """The item's vectors and the ``updated_at`` they were written with; None: none."""
        ...

    # --- SPEC §24.1: thread TTLs (durable_graph.embedded.thread_ttl) ----------------------------

    def ttl_row(self, thread_id: str) -> TtlRow | None: ...
    def put_ttl_row(self, row: TtlRow) -> None:
        """Insert or replace the row of ``row.thread_id``."""
        ...

    def drop_ttl_row(self, thread_id: str) -> None: ...
    def due_ttl_rows(self, limit: int) -> list[TtlRow]:
        """Up to ``limit`` rows due at ``now``, by ``due_at`` then thread id."""
        ...

    def entry_activity(self, thread_id: str) -> datetime | None:
        """The latest time one of the thread's kept entries was submitted or closed."""
        ...

    # --- the worker registry (durable_graph.embedded.workers) ---------------------------------

    def worker_row(self, holder: str) -> WorkerSeen | None: ...
    def put_worker_row(self, row: WorkerSeen) -> None:
        """Insert or replace the row of ``row.holder``."""
        ...

    def forget_workers(self, before: datetime) -> None:
        """Drop the rows last seen before ``before``."""
        ...

    def worker_rows(self, since: datetime, after: str | None, limit: int) -> list[WorkerSeen]:
        """The rows last seen at or after ``since`` and not ``stopped``, by holder (UTF-8 byte
        order), after the holder ``after``, ``limit`` at most."""
        ...

    def waiting_by_kind(self, tenant: TenantFilter) -> dict[str, int]:
        """Open entries of ``tenant`` with no live lease now, by kind (kinds with none left out)."""
        ...

    def leased_entry(self, thread_id: str) -> EntryRow | None:
        """The open entry of the thread holding a lease token (live or expired), if any."""
        ...

    def end_leases_of_thread(self, thread_id: str) -> None: ...

    def set_lease(
        self, entry: EntryRow, token: int, holder: str, expires_at: datetime, ttl: timedelta
    ) -> None: ...

    def set_lease_expiry(self, entry: EntryRow, expires_at: datetime) -> None: ...
    def end_lease(self, entry: EntryRow) -> None: ...

    def close_entry(self, entry: EntryRow, outcome: tuple[str, str], closed_at_seq: int) -> None:
        """Stamp the outcome, ``closed_at`` (now) and ``closed_at_seq``; end the lease."""
        ...

    def add_attempt(self, entry: EntryRow, run_id: str) -> int:
        """Record the next attempt, started now; its number."""
        ...

    def attempts_of(self, entry_id: int) -> list[Attempt]: ...

    def set_attempt_error(self, entry: EntryRow, number: int, error: str) -> None:
        """Record why attempt ``number`` of the entry failed (SPEC §13)."""
        ...

    def defer_entry(self, entry: EntryRow, not_before: datetime) -> None:
        """End the entry's lease and hold it (and so its thread) until ``not_before``."""
        ...

    def attempt_run_taken(self, thread_id: str, run_id: str) -> bool:
        """``run_id`` is an attempt of a kept entry of the thread."""
        ...

    def run_of_deleted_thread(self, thread_id: str, run_id: str) -> bool:
        """``run_id`` is an attempt of a delete-marked kept entry of the thread."""
        ...

    def run_of_closed_entry(self, thread_id: str, run_id: str) -> bool:
        """``run_id`` is an attempt of a closed kept entry of the thread that is not
        delete-marked (SPEC §19.1: its writes are refused)."""
        ...

    def open_attempt_runs(self, thread_id: str) -> set[str]:
        """Run ids of attempts of the thread's open entries."""
        ...

    def admit(self, thread_id: str, run_id: str) -> None:
        """Mark the thread's open entries with an attempt of ``run_id`` admitted (rule 10)."""
        ...

    def mark_thread_deleted(self, thread_id: str) -> None:
        """Mark every open entry of the thread ``thread_deleted``."""
        ...

    def first_retry_of(self, entry_id: int) -> int | None:
        """The lowest kept entry id whose ``retry_of`` is ``entry_id``, if any."""
        ...

    def open_page(
        self,
        tenant: TenantFilter,
        thread_id: str | None,
        after: Place | None,
        limit: int,
    ) -> list[EntryRow]:
        """At most ``limit`` open entries of ``tenant`` (and ``thread_id``) by
        `EntryRow.list_place`, after the place ``after`` (None: from the first); bounded by an
        index, never reading the whole backlog (issue 26 items 1 and 2)."""
        ...

    def closed_before(self, cutoff: datetime, limit: int) -> list[int]:
        """Ids of closed entries closed before ``cutoff``, oldest first, ties by id."""
        ...

    def entry_page(self, query: EntryQuery) -> list[EntryRow]:
        """The page ``query`` names, newest first."""
        ...

    def entry_counts(self, tenant: TenantFilter) -> tuple[dict[str, int], datetime | None]:
        """Kept entries of ``tenant`` counted by state at now; the oldest open one's
        ``submitted_at`` (None when none is open)."""
        ...

    def remove_entry(self, entry: EntryRow) -> None: ...

    def trace_context(self, entry_id: int) -> tuple[str, str | None] | None:
        """The (traceparent, tracestate) stored for ``entry_id``, or None."""
        ...

    def set_trace_context(self, entry_id: int, traceparent: str, tracestate: str | None) -> None:
        """Store the context of an existing entry that has none yet."""
        ...


class Storage(Protocol):
    """Where an embedded store keeps its rows: transactions, waits and the closed state."""

    @property
    def max_value_bytes(self) -> int: ...

    @property
    def rolls_back(self) -> bool:
        """True when a `composed` transaction undoes all its steps on an error (SQLite): the
        composed calls then need no checks of their own before the steps' first write."""
        ...

    def write(self) -> AbstractContextManager[Tx]:
        """One write transaction: the lock taken within its bound (D23), then store-now."""
        ...

    def read(self) -> AbstractContextManager[Tx]:
        """One consistent read."""
        ...

    def composed(self, undo: bool = False) -> AbstractContextManager[None]:
        """One write transaction that this thread's `write` and `read` calls join until it ends
        (SPEC §11's composed calls); ``undo``: roll back everything on an error, also where the
        storage otherwise relies on checks-before-writes (the memory storage)."""
        ...

    def change_signal(self) -> Signal:
        """Taken before a read: its `wait` returns early once a later write commits."""
        ...

    def check_open(self) -> None:
        """`ProcessingError` once the store is closed (rule 8)."""
        ...

    def close(self) -> None: ...


__all__ = ["Signal", "Storage", "Tx"]
