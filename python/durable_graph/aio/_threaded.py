"""Async stores over a sync store, one worker thread per call (the in-memory and SQLite stores).

Every method runs the sync store's method with `asyncio.to_thread`, so lock waits (bounded, D23)
never block the event loop; it passes only the arguments its caller gave
(`durable_graph.surface.forward_async`), and the sync store checks them and supplies the
defaults, as it always does. Polling
(`await_events_after`, `subscribe`, `await_closed`) runs on the loop with `asyncio.sleep`.

Cancellation: a sync call cannot be interrupted once its thread runs it. A task cancelled while
its call runs waits for the call to settle (each sync call is atomic and its waits are bounded),
then raises `CancelledError`: when the task has ended, nothing of its call is still in flight.
A cancellation requested before a call starts is raised before the call is handed to a thread.
"""

# The forwarded methods are declarations: their bodies (``...``) never run.
# mypy: disable-error-code="empty-body"

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any, Self, TypeVar

from ..checkpointer import Checkpointer
from ..errors import ProcessingError
from ..listing import EntryState
from ..model import (
    ANY,
    AttemptBegun,
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
    QueueStats,
    RetentionPolicy,
    Submission,
    TenantFilter,
    ThreadInfo,
    Ticket,
    WatchPolicy,
)
from ..observe import TraceContext
from ..run_queue import RunQueue
from ..surface import forward_async
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

    def _forward(self, name: str, given: dict[str, Any]) -> Awaitable[Any]:
        return in_thread(functools.partial(getattr(self._sync, name), **given))

    @forward_async
    async def submit(self, submission: Submission) -> Ticket: ...

    @forward_async
    async def submit_many(self, submissions: Sequence[Submission]) -> list[Ticket]: ...

    @forward_async
    async def lease(
        self,
        holder: str,
        ttl: timedelta,
        tenant: TenantFilter = ANY,
        run_id: str | None = None,
    ) -> Lease | None: ...

    @forward_async
    async def renew(self, lease: Lease, ttl: timedelta | None = None) -> Lease: ...

    @forward_async
    async def release(self, lease: Lease) -> None: ...

    @forward_async
    async def record_attempt(self, lease: Lease, run_id: str) -> AttemptStart: ...

    @forward_async
    async def close(self, lease: Lease, outcome: EntryOutcome) -> QueueEntry: ...

    @forward_async
    async def cancel(self, entry_id: int, tenant: str | None = None) -> QueueEntry: ...

    @forward_async
    async def defer(
        self, lease: Lease, delay: timedelta, error: str | None = None
    ) -> QueueEntry: ...

    @forward_async
    async def retry(self, entry_id: int, tenant: str | None = None) -> Ticket: ...

    @forward_async
    async def entry(self, entry_id: int, tenant: str | None = None) -> QueueEntry | None: ...

    @forward_async
    async def set_trace_context(self, entry_id: int, context: TraceContext) -> bool: ...

    @forward_async
    async def trace_context(self, entry_id: int) -> TraceContext | None: ...

    @forward_async
    async def open_entries(
        self,
        tenant: TenantFilter = None,
        thread_id: str | None = None,
        after: int | None = None,
        limit: int = 1000,
    ) -> list[QueueEntry]: ...

    @forward_async
    async def entries(
        self,
        state: EntryState | None = None,
        tenant: TenantFilter = ANY,
        thread_id: str | None = None,
        after: int | None = None,
        limit: int = 100,
    ) -> list[QueueEntry]: ...

    @forward_async
    async def stats(self, tenant: TenantFilter = ANY) -> QueueStats: ...

    async def await_closed(
        self, entry_id: int, timeout: timedelta, tenant: str | None = None
    ) -> QueueEntry | None:
        return await await_entry_closed(self.entry, entry_id, timeout, tenant, self._poll)

    @forward_async
    async def reclaim(self, older_than: timedelta, batch: int = 1000) -> int: ...

    _poll = timedelta(milliseconds=20)
    """Local stores are cheap to read: `await_closed` polls them often."""


class ThreadedCheckpointer:
    """An `AsyncCheckpointer` over a sync `Checkpointer` (which it owns and closes)."""

    def __init__(self, sync: Checkpointer) -> None:
        self._sync = sync
        self._run_queue = ThreadedRunQueue(sync.run_queue)
        self._closed = False

    def _forward(self, name: str, given: dict[str, Any]) -> Awaitable[Any]:
        return in_thread(functools.partial(getattr(self._sync, name), **given))

    def _check_open(self) -> None:
        if self._closed:
            raise ProcessingError("the store is closed")

    @property
    def run_queue(self) -> ThreadedRunQueue:
        return self._run_queue

    # --- claims ---------------------------------------------------------------------------

    @forward_async
    async def claim(
        self, thread_id: str, holder: str, policy: ClaimPolicy = ClaimPolicy()
    ) -> Claim: ...

    @forward_async
    async def renew_claim(self, claim: Claim) -> Claim: ...

    @forward_async
    async def release_claim(self, claim: Claim) -> None: ...

    # --- the worker fast path (SPEC §11) ------------------------------------------------------

    @forward_async
    async def begin_attempt(
        self,
        holder: str,
        ttl: timedelta,
        *,
        run_id: str,
        claim_policy: ClaimPolicy = ClaimPolicy(),
        tenant: TenantFilter = ANY,
    ) -> AttemptBegun | None: ...

    @forward_async
    async def renew_attempt(self, lease: Lease, claim: Claim) -> tuple[Lease, Claim]: ...

    @forward_async
    async def finish_attempt(
        self, lease: Lease, outcome: EntryOutcome, claim: Claim
    ) -> QueueEntry: ...

    # --- writes ---------------------------------------------------------------------------

    @forward_async
    async def commit(self, claim: Claim, commit: Commit) -> Checkpoint: ...

    @forward_async
    async def put_writes(
        self, claim: Claim, checkpoint_id: str, writes: Sequence[PendingWrite]
    ) -> None: ...

    @forward_async
    async def append_events(
        self, claim: Claim, events: Sequence[EventIn], run_id: str | None = None
    ) -> list[Event]: ...

    @forward_async
    async def record_effect(
        self, claim: Claim, key: str, value: JSONValue, run_id: str | None = None
    ) -> EffectRecord: ...

    @forward_async
    async def retract_turn(self, claim: Claim) -> Checkpoint | None: ...

    @forward_async
    async def prune(self, thread_id: str, policy: RetentionPolicy) -> PruneResult: ...

    @forward_async
    async def prune_all(self, policy: RetentionPolicy, batch: int = 1000) -> PruneResult: ...

    @forward_async
    async def delete_thread(self, thread_id: str, fence: Claim | None = None) -> bool: ...

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

    @forward_async
    async def get(self, thread_id: str, checkpoint_id: str | None = None) -> Checkpoint | None: ...

    @forward_async
    async def history(
        self, thread_id: str, before: str | None = None, limit: int = 100
    ) -> list[Checkpoint]: ...

    @forward_async
    async def latest_of_runs(self, thread_id: str, run_ids: Sequence[str]) -> Checkpoint | None: ...

    @forward_async
    async def thread(self, thread_id: str) -> ThreadInfo | None: ...

    @forward_async
    async def threads(self, after: str | None = None, limit: int = 100) -> list[ThreadInfo]: ...

    @forward_async
    async def children(
        self, thread_id: str, after: str | None = None, limit: int = 1000
    ) -> list[str]: ...

    @forward_async
    async def events_after(
        self, thread_id: str, after_seq: int, limit: int = 1000
    ) -> list[Event]: ...

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

    @forward_async
    async def get_effect(self, thread_id: str, key: str) -> EffectRecord | None: ...

    @forward_async
    async def effects(
        self, thread_id: str, after: str | None = None, limit: int = 100
    ) -> list[EffectRecord]: ...

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
