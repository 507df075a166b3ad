"""The in-memory store: the embedded rules (`durable_graph.embedded`) over dicts in one process.

`InMemoryCheckpointer` and its ``.run_queue`` share one `MemoryStorage` guarded by one lock, taken
within D23's bound by every call. Values are kept as JSON text and decoded on every read, so
callers always get fresh objects. The dicts (`durable_graph.memory.state`) follow the tables of
``migrations/0001.tables.sql``; ``QueueThread`` is a ``queue_threads`` row (the thread's open
entries by rank, its head and its leased entry), and the heads are kept sorted so `lease` never
walks the backlog.
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timedelta

from durable_graph.core.errors import ProcessingError, StoreBusy
from durable_graph.core.listing import state_at
from durable_graph.core.model import ANY, Attempt, Event, PendingWrite, TenantFilter
from durable_graph.core.validation import (
    DEFAULT_MAX_VALUE_BYTES,
    EncodedEvent,
    EncodedSubmission,
    EncodedWrite,
    check_clock,
    check_max_value_bytes,
    decode_json,
    from_posix,
)
from durable_graph.embedded.checkpointer import EmbeddedCheckpointer
from durable_graph.embedded.rows import (
    CheckpointRow,
    ClaimRow,
    EffectRow,
    EntryQuery,
    EntryRow,
    HeadPick,
    Place,
    ThreadRow,
)
from durable_graph.embedded.run_queue import EmbeddedRunQueue
from durable_graph.memory.items import ItemsTx
from durable_graph.memory.scheduling import SchedulingTx
from durable_graph.memory.state import EventRow, QueueThread, State, ThreadData
from durable_graph.memory.thread_ttl import ThreadTtlTx
from durable_graph.memory.workers import WorkersTx

LOCK_TIMEOUT_SECONDS = 5.0
"""D23: the longest a call waits for the store lock before it raises `ProcessingError`."""


class MemoryStorage:
    """The `Storage` of the in-memory store: one lock; waiters wait on an event, not the lock."""

    def __init__(self, clock: Callable[[], float], max_value_bytes: int) -> None:
        self._state = State(clock)
        self._max = max_value_bytes

    @property
    def max_value_bytes(self) -> int:
        return self._max

    @property
    def rolls_back(self) -> bool:
        return False  # checks come before writes (composed(undo=True) restores the queue only)

    @contextmanager
    def _locked(self) -> Iterator[State]:
        s = self._state
        if not s.lock.acquire(timeout=LOCK_TIMEOUT_SECONDS):
            raise StoreBusy(
                f"the in-memory store's lock was not free within {LOCK_TIMEOUT_SECONDS:g} s"
            )
        try:
            yield s
        finally:
            s.lock.release()

    @contextmanager
    def write(self) -> Iterator[MemoryTx]:
        with self._locked() as s:
            self.check_open()
            try:
                yield MemoryTx(s, from_posix(s.clock()))  # D4: read once, lock held
            finally:
                self._notify(s)

    @contextmanager
    def read(self) -> Iterator[MemoryTx]:
        with self._locked() as s:
            self.check_open()
            yield MemoryTx(s, from_posix(s.clock()))

    @contextmanager
    def composed(self, undo: bool = False) -> Iterator[None]:
        """The steps' own writes and reads re-enter the lock (an RLock): nothing interleaves.
        ``undo`` snapshots the queue (only submit_many asks: its steps touch the queue alone)."""
        with self._locked() as s:
            self.check_open()
            if not undo:
                yield
                return
            # A journal of the queue writes, taken back newest first: the cost is the size of
            # the batch, never of the queue (issue 26 item 4).
            s.journal = []
            try:
                yield
            except BaseException:
                for undo_step in reversed(s.journal):
                    undo_step()
                raise
            finally:
                s.journal = None

    def change_signal(self) -> threading.Event:
        return self._state.changed

    def _notify(self, s: State) -> None:
        # A fresh event per change: a waiter holds the one it took before its read (no lost
        # wake-up) and never waits on the store lock (#12 item 7: every wait is bounded).
        changed, s.changed = s.changed, threading.Event()
        changed.set()

    def check_open(self) -> None:
        if self._state.closed:
            raise ProcessingError("the store is closed")

    def close(self) -> None:
        with self._locked() as s:
            s.closed = True
            self._notify(s)


class MemoryTx(SchedulingTx, WorkersTx, ItemsTx, ThreadTtlTx):
    """A transaction of `MemoryStorage`: the `Tx` operations over the dicts of `State` (the
    SPEC §15 ones in `durable_graph.memory.scheduling`)."""

    __slots__ = ("_s", "now")

    def __init__(self, state: State, now: datetime) -> None:
        self._s = state
        self.now = now

    def issue_token(self) -> int:
        return next(self._s.tokens)

    # --- threads and claims --------------------------------------------------------------

    def claim_of(self, thread_id: str) -> ClaimRow | None:
        return self._s.claims.get(thread_id)

    def put_claim(self, thread_id: str, claim: ClaimRow) -> None:
        self._s.claims[thread_id] = claim

    def set_claim_expiry(self, thread_id: str, expires_at: datetime) -> None:
        self._s.claims[thread_id].expires_at = expires_at

    def drop_claim(self, thread_id: str) -> None:
        self._s.claims.pop(thread_id, None)

    def thread(self, thread_id: str) -> ThreadRow | None:
        thread = self._s.threads.get(thread_id)
        return None if thread is None else thread.row

    def create_thread(self, thread_id: str, parent_thread_id: str | None) -> None:
        s = self._s
        last_seq = s.tombstones.pop(thread_id, 0)
        row = ThreadRow(
            thread_id, parent_thread_id, None, last_seq, self.now, self.now, next(s.first_commits)
        )
        s.threads[thread_id] = ThreadData(row)

    def last_seq_of(self, thread_id: str) -> int:
        thread = self._s.threads.get(thread_id)
        if thread is not None:
            return thread.row.last_seq
        return self._s.tombstones.get(thread_id, 0)

    def set_head(self, thread_id: str, head_id: str | None) -> None:
        self._s.threads[thread_id].row.head_id = head_id

    def remove_thread(self, thread_id: str) -> None:
        thread = self._s.threads.pop(thread_id, None)
        if thread is not None:
            self._s.tombstones[thread_id] = thread.row.last_seq
            self._s.deleted_at[thread_id] = self.now
        self._s.claims.pop(thread_id, None)

    def deleted_at_of(self, thread_id: str) -> datetime | None:
        return self._s.deleted_at.get(thread_id)

    def descendants(self, thread_id: str) -> list[str]:
        found = [thread_id]
        frontier = [thread_id]
        while frontier:
            parents = set(frontier)
            frontier = sorted(
                t
                for t, d in self._s.threads.items()
                if d.row.parent_thread_id in parents and t not in found
            )
            found.extend(frontier)
        return found

    def children_of(self, thread_id: str) -> list[str]:
        kids = [d.row for d in self._s.threads.values() if d.row.parent_thread_id == thread_id]
        return [t.thread_id for t in sorted(kids, key=lambda t: t.first_commit_order)]

    def thread_page(self, after: str | None, limit: int) -> list[ThreadRow]:
        start = None if after is None else after.encode()
        ids = sorted(
            (t for t in self._s.threads if start is None or t.encode() > start), key=str.encode
        )
        return [self._s.threads[t].row for t in ids[:limit]]

    # --- checkpoints, writes, events, effects --------------------------------------------

    def checkpoint(self, thread_id: str, checkpoint_id: str) -> CheckpointRow | None:
        thread = self._s.threads.get(thread_id)
        return None if thread is None else thread.checkpoints.get(checkpoint_id)

    def insert_checkpoint(self, row: CheckpointRow) -> None:
        self._s.threads[row.thread_id].checkpoints[row.checkpoint_id] = row

    def remove_checkpoint(self, thread_id: str, checkpoint_id: str) -> None:
        thread = self._s.threads[thread_id]
        del thread.checkpoints[checkpoint_id]
        thread.writes.pop(checkpoint_id, None)

    def orphan(self, thread_id: str, removed: Sequence[str]) -> None:
        gone = set(removed)
        for row in self._s.threads[thread_id].checkpoints.values():
            if row.parent_id in gone:
                row.parent_id = None

    def checkpoints_newest_first(self, thread_id: str) -> list[CheckpointRow]:
        thread = self._s.threads.get(thread_id)
        return [] if thread is None else list(reversed(thread.checkpoints.values()))

    def checkpoints_before(
        self, thread_id: str, below_seq: int | None, limit: int
    ) -> list[CheckpointRow]:
        rows = self.checkpoints_newest_first(thread_id)
        if below_seq is not None:
            rows = [r for r in rows if r.seq < below_seq]
        return rows[:limit]

    def latest_of_runs(self, thread_id: str, run_ids: Sequence[str]) -> CheckpointRow | None:
        runs = set(run_ids)
        rows = self.checkpoints_newest_first(thread_id)
        return next((r for r in rows if r.run_id in runs), None)

    def run_in_history(self, thread_id: str, run_id: str) -> bool:
        thread = self._s.threads.get(thread_id)
        return thread is not None and any(c.run_id == run_id for c in thread.checkpoints.values())

    def add_writes(
        self, thread_id: str, checkpoint_id: str, writes: Sequence[EncodedWrite]
    ) -> None:
        stored = self._s.threads[thread_id].writes.setdefault(checkpoint_id, {})
        for w in writes:
            stored.setdefault((w.task_id, w.channel, w.index), (w.value, w.task_path))

    def writes_of(self, thread_id: str, checkpoint_id: str) -> list[PendingWrite]:
        thread = self._s.threads.get(thread_id)
        stored = {} if thread is None else thread.writes.get(checkpoint_id, {})
        # By (task_path, task_id, idx), ties in the order written (dicts keep insertion order
        # and sorted is stable).
        ordered = sorted(stored.items(), key=lambda kv: (kv[1][1], kv[0][0], kv[0][2]))
        return [
            PendingWrite(t, channel, decode_json(v), path) for (t, channel, _), (v, path) in ordered
        ]

    def append_event(self, thread_id: str, event: EncodedEvent, run_id: str | None) -> Event:
        thread = self._s.threads[thread_id]
        thread.row.last_seq += 1
        thread.row.updated_at = self.now
        created = self.now if event.created_at is None else event.created_at
        row = EventRow(thread.row.last_seq, event.kind, event.payload, run_id, created, self.now)
        thread.events.append(row)
        return _event_of(thread_id, row)

    def events_after(self, thread_id: str, after_seq: int, limit: int) -> list[Event]:
        thread = self._s.threads.get(thread_id)
        if thread is None:
            return []
        start = bisect.bisect_right(thread.events, after_seq, key=lambda e: e.seq)
        return [_event_of(thread_id, r) for r in thread.events[start : start + limit]]

    def drop_events_before(self, thread_id: str, cutoff: datetime) -> int:
        thread = self._s.threads[thread_id]
        kept = [e for e in thread.events if not e.committed_at < cutoff]
        removed = len(thread.events) - len(kept)
        thread.events = kept
        return removed

    def effect(self, thread_id: str, key: str) -> EffectRow | None:
        thread = self._s.threads.get(thread_id)
        return None if thread is None else thread.effects.get(key)

    def insert_effect(self, row: EffectRow) -> None:
        self._s.threads[row.thread_id].effects[row.key] = row

    def effects_of(self, thread_id: str) -> list[EffectRow]:
        thread = self._s.threads.get(thread_id)
        return [] if thread is None else [thread.effects[k] for k in sorted(thread.effects)]

    def effect_page(self, thread_id: str, after: str | None, limit: int) -> list[EffectRow]:
        thread = self._s.threads.get(thread_id)
        if thread is None:
            return []
        # str order is code point order, which is UTF-8 byte order.
        keys = sorted(k for k in thread.effects if after is None or k > after)
        return [thread.effects[k] for k in keys[:limit]]

    # --- queue entries --------------------------------------------------------------------

    def entry(self, entry_id: int) -> EntryRow | None:
        return self._s.entries.get(entry_id)

    def entry_by_key(self, tenant: str | None, key: str) -> EntryRow | None:
        entry_id = self._s.keys.get((tenant, key))
        return None if entry_id is None else self._s.entries[entry_id]

    def insert_entry(self, sub: EncodedSubmission) -> int:
        s = self._s
        entry_id = next(s.entry_ids)
        entry = EntryRow(
            entry_id, sub.tenant, sub.thread_id, sub.key, sub.input, sub.mode, sub.max_attempts,
            0, False, False, self.now, None, None, None, None, None, None, None, None,
            sub.not_before, sub.retry_of, sub.priority, sub.kind,
        )  # fmt: skip
        s.entries[entry_id] = entry
        s.attempts[entry_id] = []
        if sub.key is not None:
            s.keys[(sub.tenant, sub.key)] = entry_id
        queue = s.queues.setdefault(sub.thread_id, QueueThread())
        if queue.head is not None:  # the thread's stretch of open entries goes on
            entry.open_since, entry.list_after = queue.head.place_for_next(sub.mode)
        queue.ranks[entry.queue_rank][entry_id] = entry
        self._list(entry)
        self._refresh_head(queue)
        if s.journal is not None:
            s.journal.append(lambda: self._uninsert(entry))
        return entry_id

    def _uninsert(self, entry: EntryRow) -> None:
        """Take back `insert_entry` (the entry is open and has no attempt: same batch)."""
        s = self._s
        del s.entries[entry.entry_id]
        del s.attempts[entry.entry_id]
        s.trace_contexts.pop(entry.entry_id, None)
        if entry.key is not None:
            s.keys.pop((entry.tenant, entry.key), None)
        queue = s.queues[entry.thread_id]
        queue.ranks[entry.queue_rank].pop(entry.entry_id, None)
        self._unlist(entry)
        self._refresh_head(queue)

    def _list(self, entry: EntryRow) -> None:
        place = entry.list_place
        bisect.insort(self._s.listing, place)
        bisect.insort(self._s.listing_of_tenant.setdefault(entry.tenant, []), place)

    def _unlist(self, entry: EntryRow) -> None:
        place = entry.list_place
        for listing in (self._s.listing, self._s.listing_of_tenant[entry.tenant]):
            at = bisect.bisect_left(listing, place)
            if at < len(listing) and listing[at] == place:
                del listing[at]

    def has_open_entry(self, thread_id: str) -> bool:
        queue = self._s.queues.get(thread_id)
        return queue is not None and queue.head is not None

    def unattempted_interrupts(self, thread_id: str) -> list[EntryRow]:
        queue = self._s.queues.get(thread_id)
        return [] if queue is None else list(queue.ranks[1].values())

    def leasable_head(self, pick: HeadPick) -> EntryRow | None:
        s = self._s
        tenant = pick.tenant
        heads = s.lease_heads if tenant is ANY else s.lease_heads_of_tenant.get(tenant, [])
        # Threads holding a live lease, and heads the pick does not admit, are passed over.
        for _, _, thread_id in heads:
            queue = s.queues[thread_id]
            expires_at = None if queue.leased is None else queue.leased.lease_expires_at
            if expires_at is not None and self.now < expires_at:  # D1: a live lease
                continue
            head = queue.head
            if head is None or not pick.admits(head.tenant, head.kind):
                continue
            if head.not_before is not None and self.now < head.not_before:
                continue  # a delayed head holds its thread back (SPEC §13)
            return head
        return None

    def leased_entry(self, thread_id: str) -> EntryRow | None:
        queue = self._s.queues.get(thread_id)
        return None if queue is None else queue.leased

    def end_leases_of_thread(self, thread_id: str) -> None:
        leased = self._s.queues[thread_id].leased
        if leased is not None:
            self.end_lease(leased)

    def set_lease(
        self, entry: EntryRow, token: int, holder: str, expires_at: datetime, ttl: timedelta
    ) -> None:
        entry.lease_token, entry.lease_holder = token, holder
        entry.lease_expires_at, entry.lease_ttl = expires_at, ttl
        self._s.queues[entry.thread_id].leased = entry

    def set_lease_expiry(self, entry: EntryRow, expires_at: datetime) -> None:
        entry.lease_expires_at = expires_at

    def end_lease(self, entry: EntryRow) -> None:
        entry.lease_token = entry.lease_holder = entry.lease_expires_at = entry.lease_ttl = None
        queue = self._s.queues[entry.thread_id]
        if queue.leased is entry:
            queue.leased = None

    def close_entry(self, entry: EntryRow, outcome: tuple[str, str], closed_at_seq: int) -> None:
        if self._s.journal is not None:
            self._s.journal.append(self._reopener(entry))
        entry.outcome_kind, entry.outcome_detail = outcome
        entry.closed_at, entry.closed_at_seq = self.now, closed_at_seq
        self.end_lease(entry)
        queue = self._s.queues[entry.thread_id]
        for rank in queue.ranks:
            rank.pop(entry.entry_id, None)
        self._unlist(entry)
        self._refresh_head(queue)

    def _reopener(self, entry: EntryRow) -> Callable[[], None]:
        """How to take back `close_entry` of the open ``entry`` (its fields as they are now)."""
        before = replace(entry)
        queue = self._s.queues[entry.thread_id]
        was_leased = queue.leased is entry

        def reopen() -> None:
            for f in dataclasses.fields(EntryRow):
                setattr(entry, f.name, getattr(before, f.name))
            queue.ranks[entry.queue_rank][entry.entry_id] = entry
            if was_leased:
                queue.leased = entry
            self._list(entry)
            self._refresh_head(queue)

        return reopen

    def add_attempt(self, entry: EntryRow, run_id: str) -> int:
        queue = self._s.queues[entry.thread_id]
        del queue.ranks[entry.queue_rank][entry.entry_id]
        entry.attempt_count += 1
        queue.ranks[0][entry.entry_id] = entry
        self._s.attempts[entry.entry_id].append(Attempt(entry.attempt_count, run_id, self.now))
        queue.runs.setdefault(run_id, set()).add(entry.entry_id)
        self._refresh_head(queue)
        return entry.attempt_count

    def attempts_of(self, entry_id: int) -> list[Attempt]:
        return list(self._s.attempts.get(entry_id, ()))

    def set_attempt_error(self, entry: EntryRow, number: int, error: str) -> None:
        attempts = self._s.attempts[entry.entry_id]
        attempts[number - 1] = replace(attempts[number - 1], error=error)

    def defer_entry(self, entry: EntryRow, not_before: datetime) -> None:
        self.end_lease(entry)
        entry.not_before = not_before

    def _runs(self, thread_id: str, run_id: str) -> list[EntryRow]:
        queue = self._s.queues.get(thread_id)
        ids = () if queue is None else queue.runs.get(run_id, ())
        return [self._s.entries[i] for i in ids]

    def attempt_run_taken(self, thread_id: str, run_id: str) -> bool:
        return bool(self._runs(thread_id, run_id))

    def run_of_deleted_thread(self, thread_id: str, run_id: str) -> bool:
        return any(e.thread_deleted for e in self._runs(thread_id, run_id))

    def run_of_closed_entry(self, thread_id: str, run_id: str) -> bool:
        return any(e.closed and not e.thread_deleted for e in self._runs(thread_id, run_id))

    def open_attempt_runs(self, thread_id: str) -> set[str]:
        queue = self._s.queues.get(thread_id)
        attempted = () if queue is None else queue.ranks[0]  # open entries with an attempt
        return {a.run_id for i in attempted for a in self._s.attempts[i]}

    def admit(self, thread_id: str, run_id: str) -> None:
        for entry in self._runs(thread_id, run_id):
            if not entry.closed:
                entry.admitted = True

    def mark_thread_deleted(self, thread_id: str) -> None:
        queue = self._s.queues.get(thread_id)
        for rank in () if queue is None else queue.ranks:
            for entry in rank.values():
                entry.thread_deleted = True

    def first_retry_of(self, entry_id: int) -> int | None:
        found = (e.entry_id for e in self._s.entries.values() if e.retry_of == entry_id)
        return min(found, default=None)

    def open_page(
        self,
        tenant: TenantFilter,
        thread_id: str | None,
        after: Place | None,
        limit: int,
    ) -> list[EntryRow]:
        s = self._s
        if thread_id is not None:
            queue = s.queues.get(thread_id)
            rows = [] if queue is None else sorted(queue.in_order(), key=lambda e: e.list_place)
            rows = [e for e in rows if tenant is ANY or e.tenant == tenant]
            return [e for e in rows if after is None or e.list_place > after][:limit]
        listing = s.listing if tenant is ANY else s.listing_of_tenant.get(tenant, [])
        start = 0 if after is None else bisect.bisect_right(listing, after)
        return [s.entries[place[4]] for place in listing[start : start + limit]]

    def closed_before(self, cutoff: datetime, limit: int) -> list[int]:
        closed = (
            (e.closed_at, e.entry_id)
            for e in self._s.entries.values()
            if e.closed_at is not None and e.closed_at < cutoff
        )
        return [entry_id for _, entry_id in heapq.nsmallest(limit, closed)]

    def entry_page(self, query: EntryQuery) -> list[EntryRow]:
        found = (e for e in self._s.entries.values() if query.admits(e, self.now))
        return heapq.nlargest(query.limit, found, key=lambda e: e.entry_id)

    def entry_counts(self, tenant: TenantFilter) -> tuple[dict[str, int], datetime | None]:
        counts: dict[str, int] = {}
        oldest: datetime | None = None
        for e in self._s.entries.values():
            if tenant is not ANY and e.tenant != tenant:
                continue
            state = state_at(e.outcome_kind, e.lease_expires_at, self.now)
            counts[state] = counts.get(state, 0) + 1
            if state == "open" and (oldest is None or e.submitted_at < oldest):
                oldest = e.submitted_at
        return counts, oldest

    def trace_context(self, entry_id: int) -> tuple[str, str | None] | None:
        return self._s.trace_contexts.get(entry_id)

    def set_trace_context(self, entry_id: int, traceparent: str, tracestate: str | None) -> None:
        self._s.trace_contexts[entry_id] = (traceparent, tracestate)

    def remove_entry(self, entry: EntryRow) -> None:
        s = self._s
        del s.entries[entry.entry_id]
        s.trace_contexts.pop(entry.entry_id, None)
        for attempt in s.attempts.pop(entry.entry_id):
            runs = s.queues[entry.thread_id].runs
            runs[attempt.run_id].discard(entry.entry_id)
            if not runs[attempt.run_id]:
                del runs[attempt.run_id]
        if entry.key is not None:
            s.keys.pop((entry.tenant, entry.key), None)

    def _refresh_head(self, queue: QueueThread) -> None:
        """Recompute the thread's head and move it in the sorted head lists."""
        attempted, interrupts, rest = queue.ranks
        head: EntryRow | None = None
        if attempted:
            head = attempted[min(attempted)]
        elif interrupts or rest:
            head = next(iter(interrupts.values() if interrupts else rest.values()))
        old = queue.head
        if old is head:
            return
        s = self._s
        if old is not None:
            for heads in (s.heads, s.heads_of_tenant[old.tenant]):
                del heads[bisect.bisect_left(heads, (old.entry_id, old.thread_id))]
            at = (-old.priority, old.entry_id, old.thread_id)
            for by_priority in (s.lease_heads, s.lease_heads_of_tenant[old.tenant]):
                del by_priority[bisect.bisect_left(by_priority, at)]
        if head is not None:
            bisect.insort(s.heads, (head.entry_id, head.thread_id))
            bisect.insort(
                s.heads_of_tenant.setdefault(head.tenant, []), (head.entry_id, head.thread_id)
            )
            at = (-head.priority, head.entry_id, head.thread_id)
            bisect.insort(s.lease_heads, at)
            bisect.insort(s.lease_heads_of_tenant.setdefault(head.tenant, []), at)
        queue.head = head


def _event_of(thread_id: str, row: EventRow) -> Event:
    return Event(
        thread_id=thread_id,
        seq=row.seq,
        kind=row.kind,
        payload=decode_json(row.payload),
        run_id=row.run_id,
        created_at=row.created_at,
        committed_at=row.committed_at,
    )


class InMemoryCheckpointer(EmbeddedCheckpointer):
    """The embedded rules over dicts: every method of SPEC §4, safe from many threads of one
    process; ``.run_queue`` is its `InMemoryRunQueue` (SPEC §5)."""

    def __init__(
        self,
        clock: Callable[[], float] = time.time,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
    ) -> None:
        check_clock(clock)
        super().__init__(MemoryStorage(clock, check_max_value_bytes(max_value_bytes)))


InMemoryRunQueue = EmbeddedRunQueue
"""The in-memory store's run queue: the embedded queue rules (kept for its import path)."""


__all__ = ["InMemoryCheckpointer", "InMemoryRunQueue", "MemoryStorage"]
