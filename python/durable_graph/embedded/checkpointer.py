"""The Checkpointer rules of SPEC §4 for the embedded stores, written once over a `Storage`.

Every method is the same steps in the same order as the PL/pgSQL functions of ``sql/``:

    validate (durable_graph.core.validation) -> transaction (lock bounded, D23; now read once, D4)
    -> checks in the documented order -> writes

All checks come before the first write, so a refused call has changed nothing on any storage.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import timedelta
from typing import Self

from durable_graph.core.checkpointer import ClosedOnExit, copy_pairs, metadata_matches
from durable_graph.core.errors import (
    DuplicateCheckpoint,
    NotFound,
    RunOfDeletedThread,
    StaleParent,
    ThreadBusy,
    ValidationError,
)
from durable_graph.core.fast_path import EmbeddedFastPath
from durable_graph.core.model import (
    Checkpoint,
    Claim,
    ClaimPolicy,
    Commit,
    EffectRecord,
    Event,
    EventIn,
    Lease,
    PendingWrite,
    PruneResult,
    RetentionPolicy,
    ThreadInfo,
    ThreadSweep,
    ThreadTtl,
    WatchPolicy,
)
from durable_graph.core.validation import (
    MAX_PAGE_ROWS,
    EncodedCommit,
    EncodedWrite,
    check_claim,
    check_claim_policy,
    check_commit,
    check_duration,
    check_events,
    check_identifier,
    check_int,
    check_metadata_filter,
    check_optional_identifier,
    check_retention,
    check_run_ids,
    check_sweep_limit,
    check_thread_ttl,
    check_watch,
    check_writes,
    decode_json,
    encode_json,
)
from durable_graph.embedded import thread_ttl
from durable_graph.embedded.common import (
    THREAD_BUSY_CLAIM,
    checkpoint_of,
    current_claim,
    current_lease,
    entry_of,
    refuse_closed_run,
    store_event,
    thread_info_of,
    value_of,
    wait_until,
    write_run,
)
from durable_graph.embedded.retention import prune_thread
from durable_graph.embedded.rows import CheckpointRow, ClaimRow, EffectRow, ThreadRow
from durable_graph.embedded.run_queue import EmbeddedRunQueue
from durable_graph.embedded.storage import Signal, Storage, Tx

_EVENT_BATCH = 1000
"""Events one read of `await_events_after` / `subscribe` returns at most."""


class EmbeddedCheckpointer(EmbeddedFastPath, ClosedOnExit):
    """SPEC §4 over a `Storage`; ``.run_queue`` is the `EmbeddedRunQueue` of the same storage.

    SPEC §11's ``begin_attempt`` / ``renew_attempt`` / ``finish_attempt`` are these rules
    composed in one transaction of the storage (`durable_graph.core.fast_path.EmbeddedFastPath`)."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage
        self._max = storage.max_value_bytes
        self._run_queue = EmbeddedRunQueue(storage)

    @property
    def run_queue(self) -> EmbeddedRunQueue:
        return self._run_queue

    # --- the fast path's hooks (SPEC §11) ---------------------------------------------

    def _atomic(self) -> AbstractContextManager[None]:
        return self._storage.composed()

    def _max_bytes(self) -> int:
        return self._max

    def _precheck(
        self, lease: Lease, claim: Claim | None, commit: EncodedCommit | None = None
    ) -> None:
        if self._storage.rolls_back:
            # The steps raise the same errors in the same order (commit's, then the lease's,
            # then the claim's) and the transaction undoes what came before: no reads needed.
            return
        with self._storage.read() as tx:
            if commit is not None and claim is not None:
                _commit_checks(tx, claim, commit)  # the commit's errors come first
            current_lease(tx, lease)
            if claim is not None and commit is None:
                current_claim(tx, claim)

    def _current_lease(self, lease: Lease) -> Lease:
        with self._storage.read() as tx:
            row = current_lease(tx, lease)
            assert row.lease_holder is not None and row.lease_expires_at is not None
            assert row.lease_ttl is not None  # a current lease has all three
            return Lease(
                entry_of(tx, row),
                lease.token,
                row.lease_holder,
                row.lease_expires_at,
                row.lease_ttl,
            )

    def _commit_checked(self, claim: Claim, commit: EncodedCommit) -> None:
        self._commit_encoded(claim, commit)

    # --- claims -----------------------------------------------------------------------

    def claim(self, thread_id: str, holder: str, policy: ClaimPolicy = ClaimPolicy()) -> Claim:
        check_identifier("thread_id", thread_id)
        check_identifier("holder", holder)
        check_claim_policy(policy)
        with self._storage.write() as tx:
            # 1. rule 9: not re-entrant; any live claim refuses (D1: live while now < expires_at).
            row = tx.claim_of(thread_id)
            if row is not None and tx.now < row.expires_at:
                raise ThreadBusy(THREAD_BUSY_CLAIM)
            # 2. a new token; the claim creates nothing visible (D6).
            row = ClaimRow(tx.issue_token(), holder, tx.now + policy.ttl, policy.ttl)
            tx.put_claim(thread_id, row)
            return Claim(thread_id, holder, row.token, row.expires_at, row.ttl)

    def renew_claim(self, claim: Claim) -> Claim:
        check_claim("claim", claim)
        with self._storage.write() as tx:
            row = current_claim(tx, claim)
            expires_at = tx.now + row.ttl
            tx.set_claim_expiry(claim.thread_id, expires_at)
            return Claim(claim.thread_id, row.holder, row.token, expires_at, row.ttl)

    def release_claim(self, claim: Claim) -> None:
        check_claim("claim", claim)
        with self._storage.write() as tx:
            current_claim(tx, claim)
            tx.drop_claim(claim.thread_id)

    # --- writes -----------------------------------------------------------------------

    def commit(self, claim: Claim, commit: Commit) -> Checkpoint:
        return self._commit(claim, commit, None)

    def _commit(
        self,
        claim: Claim,
        commit: Commit,
        writes: tuple[str, tuple[EncodedWrite, ...]] | None,
    ) -> Checkpoint:
        check_claim("claim", claim)
        return self._commit_encoded(claim, check_commit(commit, self._max), writes)

    def _commit_encoded(
        self,
        claim: Claim,
        c: EncodedCommit,
        writes: tuple[str, tuple[EncodedWrite, ...]] | None = None,
    ) -> Checkpoint:
        """`commit` of checked arguments: its checks, then its writes, in one transaction."""
        thread_id = claim.thread_id
        with self._storage.write() as tx:
            if writes is not None:  # put_writes_and_commit: put_writes' checks first
                _check_writes_target(tx, claim, writes[0])
            thread = _commit_checks(tx, claim, c)
            # Writes. A new thread continues a deleted one's numbering; parent_thread_id is
            # taken from the first commit only (D9).
            if thread is None:
                tx.create_thread(thread_id, c.parent_thread_id)
            # D8: the caller's events first, then store.checkpoint (rule 11: all carry run_id).
            for e in c.events:
                tx.append_event(thread_id, e, c.run_id)
            payload = {"checkpoint_id": c.checkpoint_id, "run_id": c.run_id}
            seq = tx.append_event(thread_id, store_event("store.checkpoint", payload), c.run_id).seq
            created_at = tx.now if c.created_at is None else c.created_at
            row = value_of(
                CheckpointRow,
                c,
                thread_id=thread_id,
                seq=seq,
                created_at=created_at,
                committed_at=tx.now,
            )
            tx.insert_checkpoint(row)
            tx.set_head(thread_id, c.checkpoint_id)
            if writes is not None:
                tx.add_writes(thread_id, writes[0], writes[1])
            # Rule 10: admissions touch only this thread's open entries.
            tx.admit(thread_id, c.run_id)
            return checkpoint_of(tx, row)

    def put_writes(self, claim: Claim, checkpoint_id: str, writes: Sequence[PendingWrite]) -> None:
        encoded = self._checked_writes(claim, checkpoint_id, writes)
        with self._storage.write() as tx:
            _put_writes_in(tx, claim, checkpoint_id, encoded)

    def _checked_writes(
        self, claim: Claim, checkpoint_id: str, writes: Sequence[PendingWrite]
    ) -> tuple[EncodedWrite, ...]:
        """put_writes' arguments, checked in signature order; the writes encoded."""
        check_claim("claim", claim)
        check_identifier("checkpoint_id", checkpoint_id)
        return check_writes("writes", writes, self._max)

    def append_events(
        self, claim: Claim, events: Sequence[EventIn], run_id: str | None = None
    ) -> list[Event]:
        check_claim("claim", claim)
        encoded = check_events("events", events, self._max)
        check_optional_identifier("run_id", run_id)
        with self._storage.write() as tx:
            refuse_closed_run(tx, claim.thread_id, write_run(tx, claim, run_id))
            _claimed_thread(tx, claim)
            return [tx.append_event(claim.thread_id, e, run_id) for e in encoded]

    def record_effect(
        self, claim: Claim, key: str, value: object, run_id: str | None = None
    ) -> EffectRecord:
        check_claim("claim", claim)
        check_identifier("key", key)
        encoded = encode_json("value", value, self._max)
        check_optional_identifier("run_id", run_id)
        with self._storage.write() as tx:
            refuse_closed_run(tx, claim.thread_id, write_run(tx, claim, run_id))
            _claimed_thread(tx, claim)
            # First write wins.
            row = tx.effect(claim.thread_id, key)
            if row is not None:
                return _effect_of(row, existing=True)
            row = EffectRow(claim.thread_id, key, encoded, run_id, tx.now)
            tx.insert_effect(row)
            return _effect_of(row, existing=False)

    def retract_turn(self, claim: Claim) -> Checkpoint | None:
        check_claim("claim", claim)
        with self._storage.write() as tx:
            thread = _claimed_thread(tx, claim)
            # D230: it names no run; it is under its claim's holder (SPEC §19.1, §23.5).
            refuse_closed_run(tx, claim.thread_id, write_run(tx, claim, None))
            thread_id = claim.thread_id
            if thread.head_id is None:
                return None  # D11: no head, nothing retracted or appended
            # The turn: from the head back, the checkpoints sharing the head's run id.
            newest_first = tx.checkpoints_newest_first(thread_id)
            run_id = newest_first[0].run_id
            turn = list(itertools.takewhile(lambda r: r.run_id == run_id, newest_first))
            for row in turn:
                tx.remove_checkpoint(thread_id, row.checkpoint_id)
            # D24: the new head is the newest remaining checkpoint (the parent of the oldest
            # removed, unless prune removed that one).
            remaining = newest_first[len(turn) :]
            head = remaining[0] if remaining else None
            tx.set_head(thread_id, None if head is None else head.checkpoint_id)
            removed = {"run_id": run_id, "checkpoint_ids": [r.checkpoint_id for r in turn]}
            tx.append_event(thread_id, store_event("store.retracted", removed), None)
            return None if head is None else checkpoint_of(tx, head)

    def prune(self, thread_id: str, policy: RetentionPolicy) -> PruneResult:
        check_identifier("thread_id", thread_id)
        check_retention(policy)
        with self._storage.write() as tx:
            return prune_thread(tx, thread_id, policy)

    def prune_all(self, policy: RetentionPolicy, batch: int = 1000) -> PruneResult:
        check_retention(policy)
        check_int("batch", batch, minimum=1)
        checkpoints = events = 0
        after: str | None = None
        while True:
            # One transaction per batch of threads, in thread-id order.
            with self._storage.write() as tx:
                ids = [t.thread_id for t in tx.thread_page(after, batch)]
                for thread_id in ids:
                    result = prune_thread(tx, thread_id, policy)
                    checkpoints += result.checkpoints_removed
                    events += result.events_removed
            if len(ids) < batch:
                return PruneResult(checkpoints, events)
            after = ids[-1]

    def delete_thread(self, thread_id: str, fence: Claim | None = None) -> bool:
        check_identifier("thread_id", thread_id)
        if fence is not None:
            check_claim("fence", fence)
        with self._storage.write() as tx:
            # D14: the fence first.
            if fence is not None:
                current_claim(tx, fence)
            existed = tx.thread(thread_id) is not None
            for victim in tx.descendants(thread_id):
                tx.remove_thread(victim)
                # Mark every entry open now; entries submitted later are not marked.
                tx.mark_thread_deleted(victim)
            return existed

    # --- thread TTLs (SPEC §24.1; sql/48_thread_ttl.sql, embedded/thread_ttl.py) -----------

    def set_thread_ttl(
        self, thread_id: str, minutes: float | None, strategy: str = "delete"
    ) -> ThreadTtl | None:
        check_identifier("thread_id", thread_id)
        ttl, how = check_thread_ttl(minutes, strategy)
        with self._storage.write() as tx:
            return thread_ttl.set_ttl(tx, thread_id, ttl, how)

    def thread_ttl(self, thread_id: str) -> ThreadTtl | None:
        check_identifier("thread_id", thread_id)
        with self._storage.read() as tx:
            return thread_ttl.ttl_of(tx, thread_id)

    def sweep_threads(self, limit: int = 100) -> ThreadSweep:
        size = check_sweep_limit(limit)
        with self._storage.write() as tx:
            return thread_ttl.sweep(tx, size, prune_thread)

    # --- for LangGraph's savers (SPEC §12; sql/47_runs_copy.sql) -----------------------

    def put_writes_fenced(
        self, claim: Claim, checkpoint_id: str, writes: Sequence[PendingWrite], fence: Claim
    ) -> None:
        encoded = self._checked_writes(claim, checkpoint_id, writes)
        check_claim("fence", fence)
        with self._storage.write() as tx:
            current_claim(tx, claim)
            current_claim(tx, fence)
            _put_writes_in(tx, claim, checkpoint_id, encoded)

    def put_writes_and_commit(
        self, claim: Claim, checkpoint_id: str, writes: Sequence[PendingWrite], commit: Commit
    ) -> Checkpoint:
        """put_writes' checks, then commit's, then both writes: one transaction."""
        encoded = self._checked_writes(claim, checkpoint_id, writes)
        return self._commit(claim, commit, (checkpoint_id, encoded))

    def delete_runs(self, run_ids: Sequence[str]) -> int:
        wanted = set(check_run_ids(run_ids))
        removed = 0
        with self._storage.write() as tx:
            # A scan of every thread: the embedded stores have no index on run ids alone.
            after: str | None = None
            while page := tx.thread_page(after, 1000):
                for thread in page:
                    rows = tx.checkpoints_newest_first(thread.thread_id)
                    victims = [r for r in rows if r.run_id in wanted]
                    if not victims:
                        continue
                    for row in victims:
                        tx.remove_checkpoint(thread.thread_id, row.checkpoint_id)
                    removed += len(victims)
                    # As retract_turn (D24): the head is the newest remaining checkpoint.
                    left = [r for r in rows if r.run_id not in wanted]
                    tx.set_head(thread.thread_id, left[0].checkpoint_id if left else None)
                    ids = [r.checkpoint_id for r in reversed(victims)]
                    tx.append_event(
                        thread.thread_id,
                        store_event("store.runs_deleted", {"checkpoint_ids": ids}),
                        None,
                    )
                after = page[-1].thread_id
        return removed

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> bool:
        check_identifier("source_thread_id", source_thread_id)
        check_identifier("target_thread_id", target_thread_id)
        with self._storage.write() as tx:
            if tx.thread(source_thread_id) is None:
                return False
            pairs = copy_pairs(tx.descendants(source_thread_id), source_thread_id, target_thread_id)
            for _, target in pairs:
                check_identifier("target_thread_id", target)
                if tx.thread(target) is not None:
                    raise ValidationError(f"target_thread_id: thread {target!r} already exists")
                claim = tx.claim_of(target)
                if claim is not None and tx.now < claim.expires_at:
                    raise ThreadBusy(THREAD_BUSY_CLAIM)
            for source, target in pairs:
                src = tx.thread(source)
                assert src is not None
                parent = src.parent_thread_id
                if source == source_thread_id:
                    parent = None
                elif parent is not None and parent.startswith(source_thread_id):
                    parent = target_thread_id + parent[len(source_thread_id) :]
                tx.create_thread(target, parent)
                for row in reversed(tx.checkpoints_newest_first(source)):
                    payload = {"checkpoint_id": row.checkpoint_id, "run_id": row.run_id}
                    event = store_event("store.checkpoint", payload)
                    seq = tx.append_event(target, event, row.run_id).seq
                    tx.insert_checkpoint(
                        replace(row, thread_id=target, seq=seq, committed_at=tx.now)
                    )
                    copied = _encoded_writes(tx.writes_of(source, row.checkpoint_id))
                    if copied:
                        tx.add_writes(target, row.checkpoint_id, copied)
                tx.set_head(target, src.head_id)
                for effect in tx.effects_of(source):
                    tx.insert_effect(replace(effect, thread_id=target))
            return True

    def search(
        self,
        thread_id: str,
        metadata: dict[str, object],
        before: str | None = None,
        limit: int = 100,
    ) -> list[Checkpoint]:
        check_identifier("thread_id", thread_id)
        wanted = check_metadata_filter(metadata, self._max)
        check_optional_identifier("before", before)
        check_int("limit", limit, minimum=1)
        with self._storage.read() as tx:
            found: list[Checkpoint] = []
            # Paged, so a match near the head reads little.
            for rows in _pages_before(tx, thread_id, before, 100):
                for row in rows:
                    if metadata_matches(decode_json(row.metadata), wanted):
                        found.append(checkpoint_of(tx, row))
                        if len(found) == limit:
                            return found
            return found

    # --- reads ------------------------------------------------------------------------

    def get(self, thread_id: str, checkpoint_id: str | None = None) -> Checkpoint | None:
        check_identifier("thread_id", thread_id)
        check_optional_identifier("checkpoint_id", checkpoint_id)
        with self._storage.read() as tx:
            thread = tx.thread(thread_id)
            if thread is None:
                return None
            wanted = thread.head_id if checkpoint_id is None else checkpoint_id
            row = None if wanted is None else tx.checkpoint(thread_id, wanted)
            return None if row is None else checkpoint_of(tx, row)

    def history(
        self, thread_id: str, before: str | None = None, limit: int = 100
    ) -> list[Checkpoint]:
        check_identifier("thread_id", thread_id)
        check_optional_identifier("before", before)
        check_int("limit", limit, minimum=1)
        with self._storage.read() as tx:
            rows = next(_pages_before(tx, thread_id, before, limit), [])
            return [checkpoint_of(tx, r) for r in rows]

    def latest_of_runs(self, thread_id: str, run_ids: Sequence[str]) -> Checkpoint | None:
        check_identifier("thread_id", thread_id)
        runs = sorted(set(check_run_ids(run_ids)))
        with self._storage.read() as tx:
            row = tx.latest_of_runs(thread_id, runs)
            return None if row is None else checkpoint_of(tx, row)

    def thread(self, thread_id: str) -> ThreadInfo | None:
        check_identifier("thread_id", thread_id)
        with self._storage.read() as tx:
            thread = tx.thread(thread_id)
            return None if thread is None else thread_info_of(tx, thread)

    def threads(self, after: str | None = None, limit: int = 100) -> list[ThreadInfo]:
        check_optional_identifier("after", after)
        check_int("limit", limit, minimum=1)
        with self._storage.read() as tx:
            # Rule 15: UTF-8 byte order, after the id `after`.
            return [thread_info_of(tx, t) for t in tx.thread_page(after, limit)]

    def children(self, thread_id: str, after: str | None = None, limit: int = 1000) -> list[str]:
        check_identifier("thread_id", thread_id)
        check_optional_identifier("after", after)
        check_int("limit", limit, minimum=1)
        with self._storage.read() as tx:
            if tx.thread(thread_id) is None:
                return []  # D15: an unknown thread reads as empty
            ids = tx.children_of(thread_id)
        if after is not None:  # a page after the child `after`; not a child: []
            if after not in ids:
                return []
            ids = ids[ids.index(after) + 1 :]
        return ids[: min(limit, MAX_PAGE_ROWS)]

    def events_after(self, thread_id: str, after_seq: int, limit: int = 1000) -> list[Event]:
        check_identifier("thread_id", thread_id)
        check_int("after_seq", after_seq, minimum=0)
        check_int("limit", limit, minimum=1)
        return self._events_after(thread_id, after_seq, limit)

    def _events_after(self, thread_id: str, after_seq: int, limit: int) -> list[Event]:
        with self._storage.read() as tx:
            return tx.events_after(thread_id, after_seq, limit)

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
        return wait_until(
            self._storage,
            lambda: self._events_after(thread_id, after_seq, _EVENT_BATCH),
            bool,
            timeout.total_seconds(),  # D21: wall-clock
            watch.poll_interval.total_seconds(),
        )

    def subscribe(
        self, thread_id: str, after_seq: int = 0, watch: WatchPolicy = WatchPolicy()
    ) -> Iterator[Event]:
        check_identifier("thread_id", thread_id)
        check_int("after_seq", after_seq, minimum=0)
        check_watch(watch)
        self._storage.check_open()
        return self._subscribe(thread_id, after_seq, watch.poll_interval.total_seconds())

    def change_signal(self) -> Signal:
        """Taken before a read, set by the next write of this store object: what the async
        wrapper's waits relay to its event loop (SPEC §11: in-process waits wake at once)."""
        return self._storage.change_signal()

    def _subscribe(self, thread_id: str, after_seq: int, poll: float) -> Iterator[Event]:
        last = after_seq
        while True:
            signal = self._storage.change_signal()
            events = self._events_after(thread_id, last, _EVENT_BATCH)
            for event in events:
                self._storage.check_open()  # rule 8: a live iterator fails after close()
                last = event.seq
                yield event
            if not events:
                signal.wait(poll)

    def get_effect(self, thread_id: str, key: str) -> EffectRecord | None:
        check_identifier("thread_id", thread_id)
        check_identifier("key", key)
        with self._storage.read() as tx:
            row = tx.effect(thread_id, key)
            return None if row is None else _effect_of(row, existing=True)  # D12: existing=True

    def effects(
        self, thread_id: str, after: str | None = None, limit: int = 100
    ) -> list[EffectRecord]:
        check_identifier("thread_id", thread_id)
        check_optional_identifier("after", after)
        check_int("limit", limit, minimum=1, maximum=MAX_PAGE_ROWS)
        with self._storage.read() as tx:
            # UTF-8 byte order of the keys, as PostgreSQL's COLLATE "C"; an unknown thread: [].
            rows = tx.effect_page(thread_id, after, limit)
            return [_effect_of(row, existing=True) for row in rows]

    # --- lifecycle --------------------------------------------------------------------

    def close(self) -> None:
        self._storage.close()

    def __enter__(self) -> Self:
        self._storage.check_open()
        return self


def _pages_before(
    tx: Tx, thread_id: str, before: str | None, size: int
) -> Iterator[list[CheckpointRow]]:
    """The thread's checkpoints older than ``before``, newest first, ``size`` a read (rule 14:
    ``before`` is exclusive; an unknown one gives none)."""
    below = None
    if before is not None:
        start = tx.checkpoint(thread_id, before)
        if start is None:
            return
        below = start.seq
    while rows := tx.checkpoints_before(thread_id, below, size):
        yield rows
        below = rows[-1].seq


def _claimed_thread(tx: Tx, claim: Claim) -> ThreadRow:
    """The claim's thread: `ClaimLost` unless the claim is current, then `NotFound` when the
    thread has no commit (rule 6; D10: claim checks come before existence checks)."""
    current_claim(tx, claim)
    thread = tx.thread(claim.thread_id)
    if thread is None:
        raise NotFound(f"thread {claim.thread_id!r} has no commit")
    return thread


def _effect_of(row: EffectRow, existing: bool) -> EffectRecord:
    return value_of(EffectRecord, row, value=decode_json(row.value), existing=existing)


__all__ = ["EmbeddedCheckpointer"]


def _put_writes_in(
    tx: Tx, claim: Claim, checkpoint_id: str, encoded: Sequence[EncodedWrite]
) -> None:
    """put_writes inside a write transaction: its checks (D10), then the writes (rule 12)."""
    _check_writes_target(tx, claim, checkpoint_id)
    tx.add_writes(claim.thread_id, checkpoint_id, encoded)


def _commit_checks(tx: Tx, claim: Claim, c: EncodedCommit) -> ThreadRow | None:
    """`commit`'s checks — closed run (SPEC §19.1), then D9's order: claim, fence, parent,
    deleted run, duplicate id — writing nothing; the thread's row (None for a first commit)."""
    thread_id = claim.thread_id
    refuse_closed_run(tx, thread_id, c.run_id)
    current_claim(tx, claim)
    if c.fence is not None:
        current_claim(tx, c.fence)
    thread = tx.thread(thread_id)
    head_id = None if thread is None else thread.head_id
    if c.parent_id != head_id:
        raise StaleParent(f"parent_id {c.parent_id!r} is not the head of the thread")
    if tx.run_of_deleted_thread(thread_id, c.run_id):
        raise RunOfDeletedThread(f"run {c.run_id!r} is an attempt of an entry of a deleted thread")
    if thread is not None and tx.checkpoint(thread_id, c.checkpoint_id) is not None:
        raise DuplicateCheckpoint(f"checkpoint {c.checkpoint_id!r} already exists on the thread")
    return thread


def _check_writes_target(tx: Tx, claim: Claim, checkpoint_id: str) -> None:
    """put_writes' checks (D10): claim, thread has a commit, the claim's holder is no run of a
    closed entry (SPEC §19.1, §23.5: put_writes names no run; a worker claims as its run), then
    the checkpoint is the thread's."""
    _claimed_thread(tx, claim)
    refuse_closed_run(tx, claim.thread_id, write_run(tx, claim, None))
    if tx.checkpoint(claim.thread_id, checkpoint_id) is None:
        raise NotFound(f"checkpoint {checkpoint_id!r} is not a checkpoint of the thread")


def _encoded_writes(writes: Sequence[PendingWrite]) -> list[EncodedWrite]:
    """Stored writes again as `add_writes` takes them (copy_thread): indexes per task, in order."""
    out: list[EncodedWrite] = []
    per_task: dict[str, int] = {}
    for w in writes:
        index = per_task.get(w.task_id, 0)
        per_task[w.task_id] = index + 1
        value = encode_json("value", w.value, 2**62)
        out.append(EncodedWrite(w.task_id, w.channel, index, value, w.task_path))
    return out
