"""The in-memory store: the reference algorithm of SPEC §4-§5.

`InMemoryCheckpointer` and its `.run_queue` (`InMemoryRunQueue`) share one `_State` guarded by one
`threading.Condition` (over an `RLock`). Every public method is written as the same steps, in the
same order, as the SQLite mirror (`durable_graph.sqlite`) and the PL/pgSQL functions:

    validate (durable_graph.validation) -> lock (bounded, D23) -> now (store clock, once, D4)
    -> checks in the documented order -> writes -> notify waiters

Values are kept as JSON text (encoded by `durable_graph.validation`) and decoded on every read, so
callers always get fresh objects. Names of rows and helpers follow the SQL tables: ``threads``,
``checkpoints``, ``writes``, ``events``, ``effects``, ``claims``, ``tombstones``, ``entries``.
"""

from __future__ import annotations

import bisect
import copy
import itertools
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import TracebackType
from typing import Self

from .errors import (
    ClaimLost,
    DuplicateCheckpoint,
    EntryClosed,
    LeaseLost,
    NotFound,
    ProcessingError,
    RunIdTaken,
    RunOfDeletedThread,
    StaleParent,
    SubmissionKeyReused,
    ThreadBusy,
)
from .fast_path import EmbeddedFastPath
from .model import (
    ANY,
    Attempt,
    AttemptStart,
    Cancelled,
    Checkpoint,
    Claim,
    ClaimPolicy,
    Commit,
    EffectRecord,
    EntryOutcome,
    Event,
    EventIn,
    Exhausted,
    Interrupted,
    Lease,
    Mode,
    PendingWrite,
    PruneResult,
    QueueEntry,
    RetentionPolicy,
    Started,
    Submission,
    TenantFilter,
    ThreadDeleted,
    ThreadInfo,
    Ticket,
    WatchPolicy,
)
from .validation import (
    DEFAULT_MAX_VALUE_BYTES,
    EncodedEvent,
    check_claim,
    check_claim_policy,
    check_clock,
    check_commit,
    check_duration,
    check_events,
    check_identifier,
    check_int,
    check_lease,
    check_max_value_bytes,
    check_optional_identifier,
    check_retention,
    check_run_ids,
    check_submission,
    check_tenant_filter,
    check_watch,
    check_writes,
    decode_json,
    decode_outcome,
    encode_json,
    encode_outcome,
    from_posix,
)

LOCK_TIMEOUT_SECONDS = 5.0
"""D23: the longest a call waits for the store lock before it raises `ProcessingError`."""

_STORE_PAYLOAD_LIMIT = sys.maxsize
"""The store's own event payloads (ids only) are not subject to ``max_value_bytes``."""

THREAD_BUSY_CLAIM = "thread has a live claim"
THREAD_BUSY_ENTRY = "thread has an open entry"


# --- rows ------------------------------------------------------------------------------------


@dataclass(slots=True)
class _ClaimRow:
    """The thread's current claim (live or expired); absent when none (released, deleted)."""

    token: int
    holder: str
    expires_at: datetime
    ttl: timedelta


@dataclass(slots=True)
class _CheckpointRow:
    checkpoint_id: str
    parent_id: str | None
    run_id: str
    state: str
    metadata: str
    next: tuple[str, ...]
    created_at: datetime
    committed_at: datetime
    seq: int
    writes: dict[tuple[str, str, int], str] = field(default_factory=dict)
    """``(task_id, channel, index) -> value``: the first value stored wins (rule 12)."""


@dataclass(slots=True)
class _EventRow:
    seq: int
    kind: str
    payload: str
    run_id: str | None
    created_at: datetime
    committed_at: datetime


@dataclass(slots=True)
class _EffectRow:
    value: str
    run_id: str | None
    recorded_at: datetime


@dataclass(slots=True)
class _ThreadRow:
    thread_id: str
    parent_thread_id: str | None
    created_at: datetime
    updated_at: datetime
    last_seq: int
    first_commit_order: int
    """Where this thread's first commit landed among all first commits (orders `children`)."""
    head_id: str | None = None
    checkpoints: dict[str, _CheckpointRow] = field(default_factory=dict)
    """In commit order, i.e. by ``seq`` (insertion order of the dict)."""
    events: list[_EventRow] = field(default_factory=list)
    """By ``seq``, without gaps except where `prune` removed old events."""
    effects: dict[str, _EffectRow] = field(default_factory=dict)


@dataclass(slots=True)
class _EntryRow:
    entry_id: int
    tenant: str | None
    thread_id: str
    key: str | None
    input: str
    """Canonical JSON (sorted keys): compared byte for byte by `submit` (rule 19)."""
    mode: Mode
    max_attempts: int
    submitted_at: datetime
    attempts: list[Attempt] = field(default_factory=list)
    admitted: bool = False
    thread_deleted: bool = False
    lease_token: int | None = None
    """The entry's current lease (live or expired); None when none (released, closed, ended)."""
    lease_holder: str | None = None
    lease_expires_at: datetime | None = None
    lease_ttl: timedelta | None = None
    outcome_kind: str | None = None
    outcome_detail: str | None = None
    closed_at: datetime | None = None
    closed_at_seq: int | None = None

    @property
    def closed(self) -> bool:
        return self.outcome_kind is not None


# --- the shared state ----------------------------------------------------------------------


class _State:
    """Everything the store holds, and the small helpers both facades share.

    Every helper assumes the caller holds the lock (`_State.locked`).
    """

    def __init__(self, clock: Callable[[], float], max_value_bytes: int) -> None:
        self.clock = clock
        self.max_value_bytes = max_value_bytes
        self.cond = threading.Condition(threading.RLock())
        self.closed = False
        # checkpointer
        self.threads: dict[str, _ThreadRow] = {}
        self.claims: dict[str, _ClaimRow] = {}
        self.tombstones: dict[str, int] = {}
        """``thread_id -> last seq`` of a deleted thread: a new thread of the id continues it."""
        self.first_commits = itertools.count(1)
        # run queue
        self.entries: dict[int, _EntryRow] = {}
        """Kept entries (open or closed, not reclaimed), by entry id."""
        self.entries_of_thread: dict[str, list[int]] = {}
        """Kept entry ids of each thread, ascending."""
        self.keys: dict[tuple[str | None, str], int] = {}
        """``(tenant, key) -> entry id`` of kept entries."""
        self.next_entry_id = 1
        # one counter for claims and leases (D3)
        self.next_token = 1

    # --- lock and time ----------------------------------------------------------------

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Take the lock within D23's bound, and refuse work after `close()` (rule 8)."""
        if not self.cond.acquire(timeout=LOCK_TIMEOUT_SECONDS):
            raise ProcessingError(
                f"the in-memory store's lock was not free within {LOCK_TIMEOUT_SECONDS:g} s"
            )
        try:
            self.check_open()
            yield
        finally:
            self.cond.release()

    def check_open(self) -> None:
        if self.closed:
            raise ProcessingError("the store is closed")

    def now(self) -> datetime:
        """The store clock, read once per call after the lock is held (D4)."""
        return from_posix(self.clock())

    def issue_token(self) -> int:
        token = self.next_token
        self.next_token += 1
        return token

    # --- claims -----------------------------------------------------------------------

    def current_claim(self, claim: Claim) -> _ClaimRow:
        """The claim's row if ``claim`` is current (D2: the latest token), else `ClaimLost`."""
        row = self.claims.get(claim.thread_id)
        if row is None or row.token != claim.token:
            raise ClaimLost(f"claim {claim.token} is not the current claim of the thread")
        return row

    # --- threads ----------------------------------------------------------------------

    def existing_thread(self, thread_id: str) -> _ThreadRow:
        """The thread, or `NotFound` when it has no commit (rule 6; D10: claim first)."""
        thread = self.threads.get(thread_id)
        if thread is None:
            raise NotFound(f"thread {thread_id!r} has no commit")
        return thread

    def last_seq_of(self, thread_id: str) -> int:
        """The thread's last event number; a tombstone's after a delete; 0 if none (rule 26)."""
        thread = self.threads.get(thread_id)
        if thread is not None:
            return thread.last_seq
        return self.tombstones.get(thread_id, 0)

    def append_event(
        self,
        thread: _ThreadRow,
        kind: str,
        payload: str,
        run_id: str | None,
        created_at: datetime | None,
        now: datetime,
    ) -> _EventRow:
        """Number the event from the thread row, append it (D7: None created_at = commit time)."""
        thread.last_seq += 1
        row = _EventRow(
            seq=thread.last_seq,
            kind=kind,
            payload=payload,
            run_id=run_id,
            created_at=now if created_at is None else created_at,
            committed_at=now,
        )
        thread.events.append(row)
        thread.updated_at = now
        return row

    def append_events(
        self,
        thread: _ThreadRow,
        events: Iterable[EncodedEvent],
        run_id: str | None,
        now: datetime,
    ) -> list[_EventRow]:
        return [
            self.append_event(thread, e.kind, e.payload, run_id, e.created_at, now) for e in events
        ]

    def descendants(self, thread_id: str) -> list[str]:
        """``thread_id`` and every thread whose first commit named one of them as parent (D14)."""
        found = [thread_id]
        frontier = [thread_id]
        while frontier:
            parents = set(frontier)
            frontier = sorted(
                t.thread_id
                for t in self.threads.values()
                if t.parent_thread_id in parents and t.thread_id not in found
            )
            found.extend(frontier)
        return found

    # --- queue order ------------------------------------------------------------------

    def kept_entries_of(self, thread_id: str) -> list[_EntryRow]:
        return [self.entries[i] for i in self.entries_of_thread.get(thread_id, ())]

    def open_entries_of(self, thread_id: str) -> list[_EntryRow]:
        """The thread's open entries in queue order (SPEC §5 Order)."""
        return sorted(
            (e for e in self.kept_entries_of(thread_id) if not e.closed), key=queue_order_key
        )

    def threads_with_open_entries(self) -> list[str]:
        return [
            t for t in self.entries_of_thread if any(not e.closed for e in self.kept_entries_of(t))
        ]

    def leasable_head(self, thread_id: str, now: datetime) -> _EntryRow | None:
        """The thread's head (first in queue order, over every tenant: rule 18) when no entry of
        the thread holds a live lease, else None."""
        entries = self.open_entries_of(thread_id)
        if not entries or any(lease_is_live(e, now) for e in entries):
            return None
        return entries[0]

    def run_id_taken(self, thread_id: str, run_id: str) -> bool:
        """A checkpoint now in the thread's history, or an attempt of a kept entry (rule 20)."""
        thread = self.threads.get(thread_id)
        if thread is not None and any(c.run_id == run_id for c in thread.checkpoints.values()):
            return True
        return any(a.run_id == run_id for e in self.kept_entries_of(thread_id) for a in e.attempts)

    def run_of_deleted_thread(self, thread_id: str, run_id: str) -> bool:
        """``run_id`` is an attempt of a delete-marked kept entry of this thread (rule 10)."""
        return any(
            e.thread_deleted and any(a.run_id == run_id for a in e.attempts)
            for e in self.kept_entries_of(thread_id)
        )

    def close_entry(self, entry: _EntryRow, outcome: tuple[str, str], now: datetime) -> None:
        """Close once: stamp `closed_at` and `closed_at_seq`, end the lease (D19, D20)."""
        entry.outcome_kind, entry.outcome_detail = outcome
        entry.closed_at = now
        entry.closed_at_seq = self.last_seq_of(entry.thread_id)
        end_lease(entry)

    def current_lease(self, lease: Lease) -> _EntryRow:
        """The entry of a current lease: `EntryClosed` first, then `LeaseLost` (rule 21)."""
        entry = self.entries.get(lease.entry.entry_id)
        if entry is None or entry.closed:
            # D25 (a reclaimed entry answers EntryClosed): it was closed before it was reclaimed.
            raise EntryClosed(f"entry {lease.entry.entry_id} is closed")
        if entry.lease_token is None or entry.lease_token != lease.token:
            raise LeaseLost(f"lease {lease.token} is not the current lease of the entry")
        return entry

    def record_attempt(self, entry: _EntryRow, run_id: str, now: datetime) -> AttemptStart:
        """Rule 20 after the lease checks: deleted, exhausted, run id taken, then record."""
        if entry.thread_deleted:
            self.close_entry(entry, store_outcome(Cancelled("thread_deleted")), now)
            return ThreadDeleted()
        if len(entry.attempts) >= entry.max_attempts:
            return Exhausted()
        if self.run_id_taken(entry.thread_id, run_id):
            raise RunIdTaken(f"run id {run_id!r} already names a run of the thread")
        number = len(entry.attempts) + 1
        entry.attempts.append(Attempt(number=number, run_id=run_id, started_at=now))
        return Started(number)

    def visible_entry(self, entry_id: int, tenant: str | None) -> _EntryRow | None:
        """The kept entry when its tenant is ``tenant`` (D16), else None."""
        entry = self.entries.get(entry_id)
        if entry is None or entry.tenant != tenant:
            return None
        return entry

    # --- snapshots (fresh objects every read) -----------------------------------------

    def checkpoint_of(self, thread_id: str, row: _CheckpointRow) -> Checkpoint:
        writes = sorted(row.writes.items(), key=lambda kv: (kv[0][0], kv[0][2]))
        return Checkpoint(
            thread_id=thread_id,
            checkpoint_id=row.checkpoint_id,
            parent_id=row.parent_id,
            run_id=row.run_id,
            state=decode_json(row.state),
            metadata=decode_json(row.metadata),
            next=row.next,
            created_at=row.created_at,
            committed_at=row.committed_at,
            seq=row.seq,
            writes=tuple(
                PendingWrite(task_id=task_id, channel=channel, value=decode_json(value))
                for (task_id, channel, _index), value in writes
            ),
        )

    def thread_info_of(self, thread: _ThreadRow) -> ThreadInfo:
        claim = self.claims.get(thread.thread_id)
        return ThreadInfo(
            thread_id=thread.thread_id,
            parent_thread_id=thread.parent_thread_id,
            head_id=thread.head_id,
            last_seq=thread.last_seq,
            created_at=thread.created_at,
            updated_at=thread.updated_at,
            claim_holder=None if claim is None else claim.holder,
            claim_expires_at=None if claim is None else claim.expires_at,
        )

    def entry_of(self, entry: _EntryRow) -> QueueEntry:
        return QueueEntry(
            entry_id=entry.entry_id,
            tenant=entry.tenant,
            thread_id=entry.thread_id,
            key=entry.key,
            input=decode_json(entry.input),
            mode=entry.mode,
            max_attempts=entry.max_attempts,
            attempts=tuple(entry.attempts),
            admitted=entry.admitted,
            thread_deleted=entry.thread_deleted,
            submitted_at=entry.submitted_at,
            lease_holder=entry.lease_holder,
            lease_expires_at=entry.lease_expires_at,
            outcome=decode_outcome(entry.outcome_kind, entry.outcome_detail),
            closed_at=entry.closed_at,
            closed_at_seq=entry.closed_at_seq,
        )


def queue_order_key(entry: _EntryRow) -> tuple[int, int]:
    """Per-thread order: entries that recorded an attempt, then INTERRUPT, then the rest."""
    if entry.attempts:
        rank = 0
    elif entry.mode is Mode.INTERRUPT:
        rank = 1
    else:
        rank = 2
    return rank, entry.entry_id


def lease_is_live(entry: _EntryRow, now: datetime) -> bool:
    """D1: live while store-now < expires_at."""
    return (
        entry.lease_token is not None
        and entry.lease_expires_at is not None
        and (now < entry.lease_expires_at)
    )


def end_lease(entry: _EntryRow) -> None:
    entry.lease_token = None
    entry.lease_holder = None
    entry.lease_expires_at = None
    entry.lease_ttl = None


def tenant_matches(entry: _EntryRow, tenant: TenantFilter) -> bool:
    return tenant is ANY or entry.tenant == tenant


def event_of(thread_id: str, row: _EventRow) -> Event:
    return Event(
        thread_id=thread_id,
        seq=row.seq,
        kind=row.kind,
        payload=decode_json(row.payload),
        run_id=row.run_id,
        created_at=row.created_at,
        committed_at=row.committed_at,
    )


def effect_of(thread_id: str, key: str, row: _EffectRow, existing: bool) -> EffectRecord:
    return EffectRecord(
        thread_id=thread_id,
        key=key,
        value=decode_json(row.value),
        run_id=row.run_id,
        recorded_at=row.recorded_at,
        existing=existing,
    )


def store_payload(value: object) -> str:
    return encode_json("payload", value, _STORE_PAYLOAD_LIMIT)


def store_outcome(outcome: EntryOutcome) -> tuple[str, str]:
    """An outcome the store decides itself (cancellations, interruptions), encoded."""
    return encode_outcome(outcome, _STORE_PAYLOAD_LIMIT)


def _wait(cond: threading.Condition, deadline: float, step: float) -> bool:
    """Wait on the condition until notified, ``step`` passes or the deadline; False at deadline."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return False
    cond.wait(min(remaining, step))
    return True


# --- the checkpointer ----------------------------------------------------------------------


class InMemoryCheckpointer(EmbeddedFastPath):
    """The reference store: every method of SPEC §4, safe from many threads of one process."""

    def __init__(
        self,
        clock: Callable[[], float] = time.time,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
    ) -> None:
        check_clock(clock)
        self._state = _State(clock, check_max_value_bytes(max_value_bytes))
        self._run_queue = InMemoryRunQueue(self._state, self)

    @property
    def run_queue(self) -> InMemoryRunQueue:
        return self._run_queue

    # --- the fast path (SPEC §11): the steps under the lock (durable_graph.fast_path) --------

    @contextmanager
    def _atomic(self, undo: bool = False) -> Iterator[None]:
        s = self._state
        with s.locked():
            if not undo:
                yield
                return
            # Only submit_many asks: its steps touch the queue alone.
            saved = copy.deepcopy((s.entries, s.entries_of_thread, s.keys, s.next_entry_id))
            try:
                yield
            except BaseException:
                s.entries, s.entries_of_thread, s.keys, s.next_entry_id = saved
                raise

    def _max_bytes(self) -> int:
        return self._state.max_value_bytes

    def _precheck(self, lease: Lease, claim: Claim | None) -> None:
        self._state.current_lease(lease)
        if claim is not None:
            self._state.current_claim(claim)

    # --- claims -----------------------------------------------------------------------

    def claim(self, thread_id: str, holder: str, policy: ClaimPolicy = ClaimPolicy()) -> Claim:
        check_identifier("thread_id", thread_id)
        check_identifier("holder", holder)
        check_claim_policy(policy)
        s = self._state
        with s.locked():
            now = s.now()
            # 1. rule 9: not re-entrant; any live claim refuses (D1).
            row = s.claims.get(thread_id)
            if row is not None and now < row.expires_at:
                raise ThreadBusy(THREAD_BUSY_CLAIM)
            # 2. a new token; the claim creates nothing visible (D6).
            row = _ClaimRow(s.issue_token(), holder, now + policy.ttl, policy.ttl)
            s.claims[thread_id] = row
            return Claim(thread_id, holder, row.token, row.expires_at, row.ttl)

    def renew_claim(self, claim: Claim) -> Claim:
        check_claim("claim", claim)
        s = self._state
        with s.locked():
            now = s.now()
            row = s.current_claim(claim)
            row.expires_at = now + row.ttl
            return Claim(claim.thread_id, row.holder, row.token, row.expires_at, row.ttl)

    def release_claim(self, claim: Claim) -> None:
        check_claim("claim", claim)
        s = self._state
        with s.locked():
            s.current_claim(claim)
            del s.claims[claim.thread_id]

    # --- writes -----------------------------------------------------------------------

    def commit(self, claim: Claim, commit: Commit) -> Checkpoint:
        check_claim("claim", claim)
        c = check_commit(commit, self._state.max_value_bytes)
        s = self._state
        thread_id = claim.thread_id
        with s.locked():
            now = s.now()
            # D9 check order: claim, fence, parent, deleted run, duplicate id.
            s.current_claim(claim)
            if c.fence is not None:
                s.current_claim(c.fence)
            thread = s.threads.get(thread_id)
            head_id = None if thread is None else thread.head_id
            if c.parent_id != head_id:
                raise StaleParent(f"parent_id {c.parent_id!r} is not the head of the thread")
            if s.run_of_deleted_thread(thread_id, c.run_id):
                raise RunOfDeletedThread(
                    f"run {c.run_id!r} is an attempt of an entry of a deleted thread"
                )
            if thread is not None and c.checkpoint_id in thread.checkpoints:
                raise DuplicateCheckpoint(
                    f"checkpoint {c.checkpoint_id!r} already exists on the thread"
                )
            # Writes. A new thread continues its tombstone's numbering; parent_thread_id is
            # taken from the first commit only (D9).
            if thread is None:
                thread = _ThreadRow(
                    thread_id=thread_id,
                    parent_thread_id=c.parent_thread_id,
                    created_at=now,
                    updated_at=now,
                    last_seq=s.tombstones.pop(thread_id, 0),
                    first_commit_order=next(s.first_commits),
                )
                s.threads[thread_id] = thread
            # D8: the caller's events first, then store.checkpoint (rule 11: all carry run_id).
            s.append_events(thread, c.events, c.run_id, now)
            s.append_event(
                thread,
                "store.checkpoint",
                store_payload({"checkpoint_id": c.checkpoint_id, "run_id": c.run_id}),
                c.run_id,
                None,
                now,
            )
            row = _CheckpointRow(
                checkpoint_id=c.checkpoint_id,
                parent_id=c.parent_id,
                run_id=c.run_id,
                state=c.state,
                metadata=c.metadata,
                next=c.next,
                created_at=now if c.created_at is None else c.created_at,
                committed_at=now,
                seq=thread.last_seq,
            )
            thread.checkpoints[row.checkpoint_id] = row
            thread.head_id = row.checkpoint_id
            # Rule 10: admissions touch only this thread's open entries.
            for entry in s.kept_entries_of(thread_id):
                if not entry.closed and any(a.run_id == c.run_id for a in entry.attempts):
                    entry.admitted = True
            s.cond.notify_all()
            return s.checkpoint_of(thread_id, row)

    def put_writes(self, claim: Claim, checkpoint_id: str, writes: Sequence[PendingWrite]) -> None:
        check_claim("claim", claim)
        check_identifier("checkpoint_id", checkpoint_id)
        encoded = check_writes("writes", writes, self._state.max_value_bytes)
        s = self._state
        with s.locked():
            # D10: claim, thread has a commit, then the checkpoint is the thread's.
            s.current_claim(claim)
            thread = s.existing_thread(claim.thread_id)
            row = thread.checkpoints.get(checkpoint_id)
            if row is None:
                raise NotFound(f"checkpoint {checkpoint_id!r} is not a checkpoint of the thread")
            # Rule 12: the first value under (task_id, channel, index) wins.
            for w in encoded:
                row.writes.setdefault((w.task_id, w.channel, w.index), w.value)

    def append_events(
        self, claim: Claim, events: Sequence[EventIn], run_id: str | None = None
    ) -> list[Event]:
        check_claim("claim", claim)
        encoded = check_events("events", events, self._state.max_value_bytes)
        check_optional_identifier("run_id", run_id)
        s = self._state
        with s.locked():
            now = s.now()
            s.current_claim(claim)
            thread = s.existing_thread(claim.thread_id)
            rows = s.append_events(thread, encoded, run_id, now)
            if rows:
                s.cond.notify_all()
            return [event_of(thread.thread_id, r) for r in rows]

    def record_effect(
        self, claim: Claim, key: str, value: object, run_id: str | None = None
    ) -> EffectRecord:
        check_claim("claim", claim)
        check_identifier("key", key)
        encoded = encode_json("value", value, self._state.max_value_bytes)
        check_optional_identifier("run_id", run_id)
        s = self._state
        with s.locked():
            now = s.now()
            s.current_claim(claim)
            thread = s.existing_thread(claim.thread_id)
            # First write wins.
            row = thread.effects.get(key)
            if row is not None:
                return effect_of(thread.thread_id, key, row, existing=True)
            row = _EffectRow(value=encoded, run_id=run_id, recorded_at=now)
            thread.effects[key] = row
            return effect_of(thread.thread_id, key, row, existing=False)

    def retract_turn(self, claim: Claim) -> Checkpoint | None:
        check_claim("claim", claim)
        s = self._state
        with s.locked():
            now = s.now()
            s.current_claim(claim)
            thread = s.existing_thread(claim.thread_id)
            if thread.head_id is None:
                return None  # D11: no head, nothing to retract
            # The turn: from the head back, the checkpoints sharing the head's run id.
            newest_first = sorted(thread.checkpoints.values(), key=lambda r: r.seq, reverse=True)
            run_id = newest_first[0].run_id
            turn = list(itertools.takewhile(lambda r: r.run_id == run_id, newest_first))
            for row in turn:
                del thread.checkpoints[row.checkpoint_id]
            # D24: the new head is the newest remaining checkpoint (the parent of the oldest
            # removed, unless prune removed that one).
            remaining = newest_first[len(turn) :]
            head = remaining[0] if remaining else None
            thread.head_id = None if head is None else head.checkpoint_id
            s.append_event(
                thread,
                "store.retracted",
                store_payload(
                    {"run_id": run_id, "checkpoint_ids": [r.checkpoint_id for r in turn]}
                ),
                None,
                None,
                now,
            )
            s.cond.notify_all()
            return None if head is None else s.checkpoint_of(thread.thread_id, head)

    def prune(self, thread_id: str, policy: RetentionPolicy) -> PruneResult:
        check_identifier("thread_id", thread_id)
        check_retention(policy)
        s = self._state
        with s.locked():
            now = s.now()
            return self._prune_thread(thread_id, policy, now)

    def prune_all(self, policy: RetentionPolicy, batch: int = 1000) -> PruneResult:
        check_retention(policy)
        check_int("batch", batch, minimum=1)
        s = self._state
        checkpoints = events = 0
        after: bytes | None = None
        while True:
            # One lock hold (one "transaction") per batch of threads, in thread-id order.
            with s.locked():
                now = s.now()
                ids = sorted(
                    (t for t in s.threads if after is None or t.encode() > after),
                    key=str.encode,
                )[:batch]
                for thread_id in ids:
                    result = self._prune_thread(thread_id, policy, now)
                    checkpoints += result.checkpoints_removed
                    events += result.events_removed
            if len(ids) < batch:
                return PruneResult(checkpoints, events)
            after = ids[-1].encode()

    def _prune_thread(self, thread_id: str, policy: RetentionPolicy, now: datetime) -> PruneResult:
        """D13 (prune keeps the head, evidence, keep_last and the young) on one thread, locked."""
        s = self._state
        thread = s.threads.get(thread_id)
        if thread is None:
            return PruneResult(0, 0)
        cutoff = None if policy.max_age is None else now - policy.max_age
        newest_first = sorted(thread.checkpoints.values(), key=lambda r: r.seq, reverse=True)
        keep = {thread.head_id}
        if policy.keep_last is not None:
            keep.update(r.checkpoint_id for r in newest_first[: policy.keep_last])
        keep.update(self._evidence(thread, newest_first))
        removed = [
            r
            for r in newest_first
            if r.checkpoint_id not in keep and (cutoff is None or r.committed_at < cutoff)
        ]
        for row in removed:
            del thread.checkpoints[row.checkpoint_id]
        events_removed = 0
        if cutoff is not None:
            kept_events = [e for e in thread.events if not e.committed_at < cutoff]
            events_removed = len(thread.events) - len(kept_events)
            thread.events = kept_events
        return PruneResult(len(removed), events_removed)

    def _evidence(self, thread: _ThreadRow, newest_first: list[_CheckpointRow]) -> set[str]:
        """For each run id an open entry of the thread recorded, that run's newest checkpoint."""
        runs = {
            a.run_id
            for e in self._state.kept_entries_of(thread.thread_id)
            if not e.closed
            for a in e.attempts
        }
        evidence: dict[str, str] = {}
        for row in newest_first:
            if row.run_id in runs and row.run_id not in evidence:
                evidence[row.run_id] = row.checkpoint_id
        return set(evidence.values())

    def delete_thread(self, thread_id: str, fence: Claim | None = None) -> bool:
        check_identifier("thread_id", thread_id)
        if fence is not None:
            check_claim("fence", fence)
        s = self._state
        with s.locked():
            # D14: the fence first.
            if fence is not None:
                s.current_claim(fence)
            existed = thread_id in s.threads
            for victim in s.descendants(thread_id):
                thread = s.threads.pop(victim, None)
                if thread is not None:
                    s.tombstones[victim] = thread.last_seq
                s.claims.pop(victim, None)
                # Mark every entry open now; entries submitted later are not marked.
                for entry in s.kept_entries_of(victim):
                    if not entry.closed:
                        entry.thread_deleted = True
            s.cond.notify_all()
            return existed

    # --- reads ------------------------------------------------------------------------

    def get(self, thread_id: str, checkpoint_id: str | None = None) -> Checkpoint | None:
        check_identifier("thread_id", thread_id)
        check_optional_identifier("checkpoint_id", checkpoint_id)
        s = self._state
        with s.locked():
            thread = s.threads.get(thread_id)
            if thread is None:
                return None
            wanted = thread.head_id if checkpoint_id is None else checkpoint_id
            row = None if wanted is None else thread.checkpoints.get(wanted)
            return None if row is None else s.checkpoint_of(thread_id, row)

    def history(
        self, thread_id: str, before: str | None = None, limit: int = 100
    ) -> list[Checkpoint]:
        check_identifier("thread_id", thread_id)
        check_optional_identifier("before", before)
        check_int("limit", limit, minimum=1)
        s = self._state
        with s.locked():
            thread = s.threads.get(thread_id)
            if thread is None:
                return []
            rows = sorted(thread.checkpoints.values(), key=lambda r: r.seq, reverse=True)
            if before is not None:
                # Rule 14: exclusive; an unknown `before` gives [].
                start = thread.checkpoints.get(before)
                if start is None:
                    return []
                rows = [r for r in rows if r.seq < start.seq]
            return [s.checkpoint_of(thread_id, r) for r in rows[:limit]]

    def latest_of_runs(self, thread_id: str, run_ids: Sequence[str]) -> Checkpoint | None:
        check_identifier("thread_id", thread_id)
        runs = set(check_run_ids(run_ids))
        s = self._state
        with s.locked():
            thread = s.threads.get(thread_id)
            if thread is None:
                return None
            rows = [r for r in thread.checkpoints.values() if r.run_id in runs]
            if not rows:
                return None
            return s.checkpoint_of(thread_id, max(rows, key=lambda r: r.seq))

    def thread(self, thread_id: str) -> ThreadInfo | None:
        check_identifier("thread_id", thread_id)
        s = self._state
        with s.locked():
            thread = s.threads.get(thread_id)
            return None if thread is None else s.thread_info_of(thread)

    def threads(self, after: str | None = None, limit: int = 100) -> list[ThreadInfo]:
        check_optional_identifier("after", after)
        check_int("limit", limit, minimum=1)
        s = self._state
        with s.locked():
            # Rule 15: UTF-8 byte order, after the id `after`.
            start = None if after is None else after.encode()
            ids = sorted(
                (t for t in s.threads if start is None or t.encode() > start), key=str.encode
            )
            return [s.thread_info_of(s.threads[t]) for t in ids[:limit]]

    def children(self, thread_id: str) -> list[str]:
        check_identifier("thread_id", thread_id)
        s = self._state
        with s.locked():
            if thread_id not in s.threads:
                return []  # D15: an unknown thread reads as empty
            kids = [t for t in s.threads.values() if t.parent_thread_id == thread_id]
            return [t.thread_id for t in sorted(kids, key=lambda t: t.first_commit_order)]

    def events_after(self, thread_id: str, after_seq: int, limit: int = 1000) -> list[Event]:
        check_identifier("thread_id", thread_id)
        check_int("after_seq", after_seq, minimum=0)
        check_int("limit", limit, minimum=1)
        s = self._state
        with s.locked():
            return self._events_after(thread_id, after_seq, limit)

    def _events_after(self, thread_id: str, after_seq: int, limit: int) -> list[Event]:
        thread = self._state.threads.get(thread_id)
        if thread is None:
            return []
        start = bisect.bisect_right(thread.events, after_seq, key=lambda e: e.seq)
        rows = thread.events[start : start + limit]
        return [event_of(thread_id, r) for r in rows]

    def await_events_after(
        self,
        thread_id: str,
        after_seq: int,
        timeout: timedelta,
        watch: WatchPolicy = WatchPolicy(),
    ) -> list[Event]:
        check_identifier("thread_id", thread_id)
        check_int("after_seq", after_seq, minimum=0)
        check_duration("timeout", timeout, allow_zero=True)
        check_watch(watch)
        s = self._state
        deadline = time.monotonic() + timeout.total_seconds()  # D21: wall-clock
        with s.locked():
            while True:
                events = self._events_after(thread_id, after_seq, 1000)
                if events or not _wait(s.cond, deadline, watch.poll_interval.total_seconds()):
                    return events
                s.check_open()

    def subscribe(
        self, thread_id: str, after_seq: int = 0, watch: WatchPolicy = WatchPolicy()
    ) -> Iterator[Event]:
        check_identifier("thread_id", thread_id)
        check_int("after_seq", after_seq, minimum=0)
        check_watch(watch)
        self._state.check_open()
        return self._subscribe(thread_id, after_seq, watch.poll_interval.total_seconds())

    def _subscribe(self, thread_id: str, after_seq: int, poll: float) -> Iterator[Event]:
        s = self._state
        last = after_seq
        while True:
            with s.locked():
                events = self._events_after(thread_id, last, 1000)
                if not events:
                    s.cond.wait(poll)
                    continue
            for event in events:
                s.check_open()  # rule 8: a live iterator fails on its next step after close()
                last = event.seq
                yield event

    def get_effect(self, thread_id: str, key: str) -> EffectRecord | None:
        check_identifier("thread_id", thread_id)
        check_identifier("key", key)
        s = self._state
        with s.locked():
            thread = s.threads.get(thread_id)
            row = None if thread is None else thread.effects.get(key)
            return None if row is None else effect_of(thread_id, key, row, existing=True)  # D12

    # --- lifecycle --------------------------------------------------------------------

    def close(self) -> None:
        s = self._state
        if not s.cond.acquire(timeout=LOCK_TIMEOUT_SECONDS):
            raise ProcessingError("the in-memory store's lock was not free to close it")
        try:
            s.closed = True
            s.cond.notify_all()
        finally:
            s.cond.release()

    def __enter__(self) -> Self:
        self._state.check_open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


# --- the run queue -------------------------------------------------------------------------


class InMemoryRunQueue:
    """The store's run queue (SPEC §5), sharing the checkpointer's state and lock."""

    def __init__(self, state: _State, store: InMemoryCheckpointer) -> None:
        self._state = state
        self._store = store

    def submit_many(self, submissions: Sequence[Submission]) -> list[Ticket]:
        """SPEC §11: in order, all or nothing (`durable_graph.fast_path`)."""
        return EmbeddedFastPath.submit_many(self._store, submissions)

    def submit(self, submission: Submission) -> Ticket:
        sub = check_submission(submission, self._state.max_value_bytes)
        s = self._state
        with s.locked():
            now = s.now()
            # Rule 19 order: key, REJECT, INTERRUPT closing, insert.
            if sub.key is not None:
                kept_id = s.keys.get((sub.tenant, sub.key))
                if kept_id is not None:
                    kept = s.entries[kept_id]
                    if (kept.thread_id, kept.mode, kept.max_attempts, kept.input) != (
                        sub.thread_id,
                        sub.mode,
                        sub.max_attempts,
                        sub.input,
                    ):
                        raise SubmissionKeyReused(
                            f"submission key {sub.key!r} names a different submission"
                        )
                    return Ticket(kept_id, existing=True)
            open_entries = s.open_entries_of(sub.thread_id)
            if sub.mode is Mode.REJECT and open_entries:
                raise ThreadBusy(THREAD_BUSY_ENTRY)
            entry_id = s.next_entry_id
            s.next_entry_id += 1
            if sub.mode is Mode.INTERRUPT:
                interrupted = store_outcome(Interrupted(entry_id))
                for other in open_entries:
                    if other.mode is Mode.INTERRUPT and not other.attempts:
                        s.close_entry(other, interrupted, now)
            entry = _EntryRow(
                entry_id=entry_id,
                tenant=sub.tenant,
                thread_id=sub.thread_id,
                key=sub.key,
                input=sub.input,
                mode=sub.mode,
                max_attempts=sub.max_attempts,
                submitted_at=now,
            )
            s.entries[entry_id] = entry
            s.entries_of_thread.setdefault(sub.thread_id, []).append(entry_id)
            if sub.key is not None:
                s.keys[(sub.tenant, sub.key)] = entry_id
            s.cond.notify_all()
            return Ticket(entry_id, existing=False)

    def lease(
        self,
        holder: str,
        ttl: timedelta,
        tenant: TenantFilter = ANY,
        run_id: str | None = None,
    ) -> Lease | None:
        check_identifier("holder", holder)
        check_duration("ttl", ttl)
        wanted = check_tenant_filter("tenant", tenant, allow_any=True)
        check_optional_identifier("run_id", run_id)
        s = self._state
        with s.locked():
            now = s.now()
            # The oldest leasable thread head (by entry id) of the wanted tenant.
            heads = [s.leasable_head(t, now) for t in s.threads_with_open_entries()]
            candidates = [h for h in heads if h is not None and tenant_matches(h, wanted)]
            if not candidates:
                return None
            entry = min(candidates, key=lambda e: e.entry_id)
            # End the expired lease of every other entry of the thread.
            for other in s.open_entries_of(entry.thread_id):
                if other is not entry:
                    end_lease(other)
            entry.lease_token = s.issue_token()
            entry.lease_holder = holder
            entry.lease_expires_at = now + ttl
            entry.lease_ttl = ttl
            token = entry.lease_token
            attempt: AttemptStart | None = None
            if run_id is not None:
                try:
                    attempt = s.record_attempt(entry, run_id, now)
                except RunIdTaken:
                    attempt = None  # the lease is still taken
            s.cond.notify_all()
            return Lease(s.entry_of(entry), token, holder, now + ttl, ttl, attempt)

    def renew(self, lease: Lease, ttl: timedelta | None = None) -> Lease:
        check_lease("lease", lease)
        if ttl is not None:
            check_duration("ttl", ttl)
        s = self._state
        with s.locked():
            now = s.now()
            entry = s.current_lease(lease)
            assert entry.lease_ttl is not None and entry.lease_holder is not None
            # D18: push expiry to now + (ttl or the ttl the lease was taken with).
            entry.lease_expires_at = now + (entry.lease_ttl if ttl is None else ttl)
            return Lease(
                s.entry_of(entry),
                lease.token,
                entry.lease_holder,
                entry.lease_expires_at,
                entry.lease_ttl,
            )

    def release(self, lease: Lease) -> None:
        check_lease("lease", lease)
        s = self._state
        with s.locked():
            entry = s.current_lease(lease)
            end_lease(entry)  # D19: release clears the lease
            s.cond.notify_all()

    def record_attempt(self, lease: Lease, run_id: str) -> AttemptStart:
        check_lease("lease", lease)
        check_identifier("run_id", run_id)
        s = self._state
        with s.locked():
            now = s.now()
            entry = s.current_lease(lease)
            result = s.record_attempt(entry, run_id, now)
            s.cond.notify_all()
            return result

    def close(self, lease: Lease, outcome: EntryOutcome) -> QueueEntry:
        check_lease("lease", lease)
        encoded = encode_outcome(outcome, self._state.max_value_bytes)
        s = self._state
        with s.locked():
            now = s.now()
            entry = s.current_lease(lease)
            s.close_entry(entry, encoded, now)
            s.cond.notify_all()
            return s.entry_of(entry)

    def cancel(self, entry_id: int, tenant: str | None = None) -> QueueEntry:
        check_int("entry_id", entry_id, minimum=0)
        check_optional_identifier("tenant", tenant)
        s = self._state
        with s.locked():
            now = s.now()
            # D16: visibility first, then closed (rule 22).
            entry = s.visible_entry(entry_id, tenant)
            if entry is None:
                raise NotFound(f"entry {entry_id} not found")
            if entry.closed:
                raise EntryClosed(f"entry {entry_id} is closed")
            s.close_entry(entry, store_outcome(Cancelled("requested")), now)
            s.cond.notify_all()
            return s.entry_of(entry)

    def entry(self, entry_id: int, tenant: str | None = None) -> QueueEntry | None:
        check_int("entry_id", entry_id, minimum=0)
        check_optional_identifier("tenant", tenant)
        s = self._state
        with s.locked():
            entry = s.visible_entry(entry_id, tenant)
            return None if entry is None else s.entry_of(entry)

    def open_entries(
        self, tenant: TenantFilter = None, thread_id: str | None = None
    ) -> list[QueueEntry]:
        wanted = check_tenant_filter("tenant", tenant, allow_any=True)
        check_optional_identifier("thread_id", thread_id)
        s = self._state
        with s.locked():
            # Rule 24: threads by their head's entry id (over every tenant), each in queue order.
            thread_ids = s.threads_with_open_entries() if thread_id is None else [thread_id]
            queues = [s.open_entries_of(t) for t in thread_ids]
            queues = sorted((q for q in queues if q), key=lambda q: q[0].entry_id)
            return [s.entry_of(e) for q in queues for e in q if tenant_matches(e, wanted)]

    def await_closed(
        self, entry_id: int, timeout: timedelta, tenant: str | None = None
    ) -> QueueEntry | None:
        check_int("entry_id", entry_id, minimum=0)
        check_duration("timeout", timeout, allow_zero=True)
        check_optional_identifier("tenant", tenant)
        s = self._state
        deadline = time.monotonic() + timeout.total_seconds()  # rule 23: wall-clock
        with s.locked():
            while True:
                entry = s.visible_entry(entry_id, tenant)
                if entry is None:
                    return None
                if entry.closed:
                    return s.entry_of(entry)
                if not _wait(s.cond, deadline, 0.25):
                    return None
                s.check_open()

    def reclaim(self, older_than: timedelta, batch: int = 1000) -> int:
        check_duration("older_than", older_than, allow_zero=True)
        check_int("batch", batch, minimum=1)
        s = self._state
        with s.locked():
            now = s.now()
            cutoff = now - older_than
            # Rule 25: oldest closed first, ties by entry id; never an open entry.
            victims = sorted(
                (e for e in s.entries.values() if e.closed_at is not None and e.closed_at < cutoff),
                key=lambda e: (e.closed_at, e.entry_id),
            )[:batch]
            for entry in victims:
                del s.entries[entry.entry_id]
                s.entries_of_thread[entry.thread_id].remove(entry.entry_id)
                if not s.entries_of_thread[entry.thread_id]:
                    del s.entries_of_thread[entry.thread_id]
                if entry.key is not None:
                    s.keys.pop((entry.tenant, entry.key), None)
            if victims:
                s.cond.notify_all()
            return len(victims)


__all__ = ["InMemoryCheckpointer", "InMemoryRunQueue"]
