"""Async stores over a sync store, one worker thread per call (the in-memory and SQLite stores).

Every method runs the sync store's method with `asyncio.to_thread`, so lock waits (bounded, D23)
never block the event loop; the sync store validates the arguments, as it always does. Polling
(`await_events_after`, `subscribe`, `await_closed`) runs on the loop with `asyncio.sleep`.

Cancellation: a sync call cannot be interrupted once its thread runs it. A task cancelled while
its call runs waits for the call to settle (each sync call is atomic and its waits are bounded),
then raises `CancelledError`: when the task has ended, nothing of its call is still in flight.
A cancellation requested before a call starts is raised before the call is handed to a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Self, TypeVar

from ..checkpointer import Checkpointer
from ..errors import ProcessingError
from ..model import (
    ANY,
    AttemptStart,
    Checkpoint,
    Claim,
    ClaimPolicy,
    Commit,
    EffectRecord,
    EntryOutcome,
    Event,
    EventIn,
    Lease,
    PendingWrite,
    PruneResult,
    QueueEntry,
    RetentionPolicy,
    Submission,
    TenantFilter,
    ThreadInfo,
    Ticket,
    WatchPolicy,
)
from ..run_queue import RunQueue
from ._watch import await_entry_closed, await_events, subscribe_events
from .protocols import JSONValue

T = TypeVar("T")


async def in_thread(fn: Callable[..., T], /, *args: object) -> T:
    """``fn(*args)`` in a worker thread; on cancellation, let it settle, then re-raise."""
    await asyncio.sleep(0)  # a cancellation requested before the call is raised here
    future = asyncio.ensure_future(asyncio.to_thread(fn, *args))
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        if not future.done():
            # Another cancellation may cut this wait short: the call still settles on its own.
            with contextlib.suppress(BaseException):
                await asyncio.wait({future})
        if future.done() and not future.cancelled():
            future.exception()  # retrieved: the caller gets CancelledError, as asked
        raise


class ThreadedRunQueue:
    """An `AsyncRunQueue` over a sync `RunQueue`."""

    def __init__(self, sync: RunQueue) -> None:
        self._sync = sync

    async def submit(self, submission: Submission) -> Ticket:
        return await in_thread(self._sync.submit, submission)

    async def lease(
        self,
        holder: str,
        ttl: timedelta,
        tenant: TenantFilter = ANY,
        run_id: str | None = None,
    ) -> Lease | None:
        return await in_thread(self._sync.lease, holder, ttl, tenant, run_id)

    async def renew(self, lease: Lease, ttl: timedelta | None = None) -> Lease:
        return await in_thread(self._sync.renew, lease, ttl)

    async def release(self, lease: Lease) -> None:
        await in_thread(self._sync.release, lease)

    async def record_attempt(self, lease: Lease, run_id: str) -> AttemptStart:
        return await in_thread(self._sync.record_attempt, lease, run_id)

    async def close(self, lease: Lease, outcome: EntryOutcome) -> QueueEntry:
        return await in_thread(self._sync.close, lease, outcome)

    async def cancel(self, entry_id: int, tenant: str | None = None) -> QueueEntry:
        return await in_thread(self._sync.cancel, entry_id, tenant)

    async def entry(self, entry_id: int, tenant: str | None = None) -> QueueEntry | None:
        return await in_thread(self._sync.entry, entry_id, tenant)

    async def open_entries(
        self, tenant: TenantFilter = None, thread_id: str | None = None
    ) -> list[QueueEntry]:
        return await in_thread(self._sync.open_entries, tenant, thread_id)

    async def await_closed(
        self, entry_id: int, timeout: timedelta, tenant: str | None = None
    ) -> QueueEntry | None:
        return await await_entry_closed(self.entry, entry_id, timeout, tenant, self._poll)

    async def reclaim(self, older_than: timedelta, batch: int = 1000) -> int:
        return await in_thread(self._sync.reclaim, older_than, batch)

    _poll = timedelta(milliseconds=20)
    """Local stores are cheap to read: `await_closed` polls them often."""


class ThreadedCheckpointer:
    """An `AsyncCheckpointer` over a sync `Checkpointer` (which it owns and closes)."""

    def __init__(self, sync: Checkpointer) -> None:
        self._sync = sync
        self._run_queue = ThreadedRunQueue(sync.run_queue)
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise ProcessingError("the store is closed")

    @property
    def run_queue(self) -> ThreadedRunQueue:
        return self._run_queue

    # --- claims ---------------------------------------------------------------------------

    async def claim(
        self, thread_id: str, holder: str, policy: ClaimPolicy = ClaimPolicy()
    ) -> Claim:
        return await in_thread(self._sync.claim, thread_id, holder, policy)

    async def renew_claim(self, claim: Claim) -> Claim:
        return await in_thread(self._sync.renew_claim, claim)

    async def release_claim(self, claim: Claim) -> None:
        await in_thread(self._sync.release_claim, claim)

    # --- writes ---------------------------------------------------------------------------

    async def commit(self, claim: Claim, commit: Commit) -> Checkpoint:
        return await in_thread(self._sync.commit, claim, commit)

    async def put_writes(
        self, claim: Claim, checkpoint_id: str, writes: Sequence[PendingWrite]
    ) -> None:
        await in_thread(self._sync.put_writes, claim, checkpoint_id, writes)

    async def append_events(
        self, claim: Claim, events: Sequence[EventIn], run_id: str | None = None
    ) -> list[Event]:
        return await in_thread(self._sync.append_events, claim, events, run_id)

    async def record_effect(
        self, claim: Claim, key: str, value: JSONValue, run_id: str | None = None
    ) -> EffectRecord:
        return await in_thread(self._sync.record_effect, claim, key, value, run_id)

    async def retract_turn(self, claim: Claim) -> Checkpoint | None:
        return await in_thread(self._sync.retract_turn, claim)

    async def prune(self, thread_id: str, policy: RetentionPolicy) -> PruneResult:
        return await in_thread(self._sync.prune, thread_id, policy)

    async def prune_all(self, policy: RetentionPolicy, batch: int = 1000) -> PruneResult:
        return await in_thread(self._sync.prune_all, policy, batch)

    async def delete_thread(self, thread_id: str, fence: Claim | None = None) -> bool:
        return await in_thread(self._sync.delete_thread, thread_id, fence)

    async def put_writes_fenced(
        self, claim: Claim, checkpoint_id: str, writes: Sequence[PendingWrite], fence: Claim
    ) -> None:
        await in_thread(self._sync.put_writes_fenced, claim, checkpoint_id, writes, fence)

    async def search(
        self,
        thread_id: str,
        metadata: dict[str, object],
        before: str | None = None,
        limit: int = 100,
    ) -> list[Checkpoint]:
        return await in_thread(self._sync.search, thread_id, metadata, before, limit)

    async def put_writes_and_commit(
        self, claim: Claim, checkpoint_id: str, writes: Sequence[PendingWrite], commit: Commit
    ) -> Checkpoint:
        return await in_thread(
            self._sync.put_writes_and_commit, claim, checkpoint_id, writes, commit
        )

    async def delete_runs(self, run_ids: Sequence[str]) -> int:
        return await in_thread(self._sync.delete_runs, run_ids)

    async def copy_thread(self, source_thread_id: str, target_thread_id: str) -> bool:
        return await in_thread(self._sync.copy_thread, source_thread_id, target_thread_id)

    # --- reads ----------------------------------------------------------------------------

    async def get(self, thread_id: str, checkpoint_id: str | None = None) -> Checkpoint | None:
        return await in_thread(self._sync.get, thread_id, checkpoint_id)

    async def history(
        self, thread_id: str, before: str | None = None, limit: int = 100
    ) -> list[Checkpoint]:
        return await in_thread(self._sync.history, thread_id, before, limit)

    async def latest_of_runs(self, thread_id: str, run_ids: Sequence[str]) -> Checkpoint | None:
        return await in_thread(self._sync.latest_of_runs, thread_id, run_ids)

    async def thread(self, thread_id: str) -> ThreadInfo | None:
        return await in_thread(self._sync.thread, thread_id)

    async def threads(self, after: str | None = None, limit: int = 100) -> list[ThreadInfo]:
        return await in_thread(self._sync.threads, after, limit)

    async def children(self, thread_id: str) -> list[str]:
        return await in_thread(self._sync.children, thread_id)

    async def events_after(self, thread_id: str, after_seq: int, limit: int = 1000) -> list[Event]:
        return await in_thread(self._sync.events_after, thread_id, after_seq, limit)

    async def await_events_after(
        self,
        thread_id: str,
        after_seq: int,
        timeout: timedelta,
        watch: WatchPolicy = WatchPolicy(),
    ) -> list[Event]:
        return await await_events(self.events_after, thread_id, after_seq, timeout, watch)

    def subscribe(
        self, thread_id: str, after_seq: int = 0, watch: WatchPolicy = WatchPolicy()
    ) -> AsyncIterator[Event]:
        return subscribe_events(self.events_after, self._check_open, thread_id, after_seq, watch)

    async def get_effect(self, thread_id: str, key: str) -> EffectRecord | None:
        return await in_thread(self._sync.get_effect, thread_id, key)

    # --- lifecycle ------------------------------------------------------------------------

    async def close(self) -> None:
        await in_thread(self._sync.close)
        self._closed = True

    async def __aenter__(self) -> Self:
        self._check_open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
