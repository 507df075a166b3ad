"""The async interfaces (SPEC §9): every method of `Checkpointer` and `RunQueue` as a coroutine.

Arguments, results, errors and semantics are those of the sync Protocols
(`durable_graph.core.checkpointer`, `durable_graph.core.run_queue`); only the calling convention differs.
`subscribe` is a plain method returning an async iterator: its arguments are checked when it is
called, the store is read as it is iterated.

Cancellation: a task cancelled while a call is running gets `asyncio.CancelledError`; the write it
was making happened completely or not at all, and the store stays usable for every other task. A
cancellation requested before a call starts is raised before the call touches the store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import datetime, timedelta
from types import TracebackType
from typing import Protocol, Self, runtime_checkable

from durable_graph.core.listing import EntryState
from durable_graph.core.model import (
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
    TraceContext,
    WatchPolicy,
)
from durable_graph.core.scheduling import ConcurrencyLimit, LimitScope, Schedule, StoredSchedule
from durable_graph.core.workers import SEEN_WITHIN, WorkerBeat, WorkerSeen

JSONValue = object
"""A JSON value as an argument: checked by `durable_graph.core.validation` before anything is written."""


@runtime_checkable
class AsyncRunQueue(Protocol):
    """`durable_graph.core.run_queue.RunQueue` with coroutine methods."""

    async def submit(self, submission: Submission) -> Ticket: ...

    async def submit_many(self, submissions: Sequence[Submission]) -> list[Ticket]: ...

    async def lease(
        self,
        holder: str,
        ttl: timedelta,
        tenant: TenantFilter = ANY,
        run_id: str | None = None,
        kinds: Sequence[str] | None = None,
    ) -> Lease | None: ...

    async def renew(self, lease: Lease, ttl: timedelta | None = None) -> Lease: ...

    async def release(self, lease: Lease) -> None: ...

    async def record_attempt(self, lease: Lease, run_id: str) -> AttemptStart: ...

    async def close(self, lease: Lease, outcome: EntryOutcome) -> QueueEntry: ...

    async def cancel(self, entry_id: int, tenant: str | None = None) -> QueueEntry: ...

    async def defer(
        self, lease: Lease, delay: timedelta, error: str | None = None
    ) -> QueueEntry: ...

    async def retry(
        self, entry_id: int, tenant: str | None = None, again: bool = False
    ) -> Ticket: ...

    async def entry(self, entry_id: int, tenant: str | None = None) -> QueueEntry | None: ...

    async def open_entries(
        self,
        tenant: TenantFilter = None,
        thread_id: str | None = None,
        after: int | None = None,
        limit: int = 1000,
    ) -> list[QueueEntry]: ...

    async def entries(
        self,
        state: EntryState | None = None,
        tenant: TenantFilter = ANY,
        thread_id: str | None = None,
        after: int | None = None,
        limit: int = 100,
    ) -> list[QueueEntry]: ...

    async def stats(self, tenant: TenantFilter = ANY) -> QueueStats: ...

    async def await_closed(
        self, entry_id: int, timeout: timedelta, tenant: str | None = None
    ) -> QueueEntry | None: ...

    async def reclaim(self, older_than: timedelta, batch: int = 1000) -> int: ...

    # SPEC §15 (durable_graph.core.scheduling)
    async def set_limit(
        self, scope: LimitScope, name: str, max_leases: int
    ) -> ConcurrencyLimit: ...

    async def limits(self) -> list[ConcurrencyLimit]: ...

    async def remove_limit(self, scope: LimitScope, name: str) -> bool: ...

    async def put_schedule(self, schedule: Schedule) -> StoredSchedule: ...

    async def schedules(self) -> list[StoredSchedule]: ...

    async def remove_schedule(self, name: str) -> bool: ...

    async def pause_schedule(self, name: str, paused: bool = True) -> StoredSchedule: ...

    async def fire_schedule(self, name: str, slot: datetime) -> Ticket | None: ...

    # the worker registry (durable_graph.core.workers)
    async def worker_heartbeat(self, beat: WorkerBeat) -> WorkerSeen: ...

    async def workers(self, seen_within: timedelta = SEEN_WITHIN) -> list[WorkerSeen]: ...


class AsyncTraceContexts(Protocol):
    """`durable_graph.core.run_queue.TraceContexts` with coroutine methods."""

    async def set_trace_context(
        self, entry_id: int, context: TraceContext, tenant: str | None = None
    ) -> bool: ...

    async def trace_context(
        self, entry_id: int, tenant: str | None = None
    ) -> TraceContext | None: ...


@runtime_checkable
class AsyncCheckpointer(Protocol):
    """`durable_graph.core.checkpointer.Checkpointer` with coroutine methods."""

    @property
    def run_queue(self) -> AsyncRunQueue:
        """The store's run queue, in the same database."""
        ...

    # --- claims ---------------------------------------------------------------------------

    async def claim(
        self, thread_id: str, holder: str, policy: ClaimPolicy = ClaimPolicy()
    ) -> Claim: ...

    async def renew_claim(self, claim: Claim) -> Claim: ...

    async def release_claim(self, claim: Claim) -> None: ...

    # --- the worker fast path (SPEC §11) ------------------------------------------------------

    async def begin_attempt(
        self,
        holder: str,
        ttl: timedelta,
        *,
        run_id: str,
        claim_policy: ClaimPolicy = ClaimPolicy(),
        tenant: TenantFilter = ANY,
        kinds: Sequence[str] | None = None,
    ) -> AttemptBegun | None: ...

    async def renew_attempt(self, lease: Lease, claim: Claim) -> tuple[Lease, Claim]: ...

    async def finish_attempt(
        self,
        lease: Lease,
        outcome: EntryOutcome,
        claim: Claim,
        *,
        commit: Commit | None = None,
    ) -> QueueEntry: ...

    # --- writes ---------------------------------------------------------------------------

    async def commit(self, claim: Claim, commit: Commit) -> Checkpoint: ...

    async def put_writes(
        self, claim: Claim, checkpoint_id: str, writes: Sequence[PendingWrite]
    ) -> None: ...

    async def append_events(
        self, claim: Claim, events: Sequence[EventIn], run_id: str | None = None
    ) -> list[Event]: ...

    async def record_effect(
        self, claim: Claim, key: str, value: JSONValue, run_id: str | None = None
    ) -> EffectRecord: ...

    async def retract_turn(self, claim: Claim) -> Checkpoint | None: ...

    async def prune(self, thread_id: str, policy: RetentionPolicy) -> PruneResult: ...

    async def prune_all(self, policy: RetentionPolicy, batch: int = 1000) -> PruneResult: ...

    async def delete_thread(self, thread_id: str, fence: Claim | None = None) -> bool: ...

    async def put_writes_fenced(
        self, claim: Claim, checkpoint_id: str, writes: Sequence[PendingWrite], fence: Claim
    ) -> None: ...

    async def search(
        self,
        thread_id: str,
        metadata: dict[str, object],
        before: str | None = None,
        limit: int = 100,
    ) -> list[Checkpoint]: ...

    async def put_writes_and_commit(
        self, claim: Claim, checkpoint_id: str, writes: Sequence[PendingWrite], commit: Commit
    ) -> Checkpoint: ...

    async def delete_runs(self, run_ids: Sequence[str]) -> int: ...

    async def copy_thread(self, source_thread_id: str, target_thread_id: str) -> bool: ...

    # --- reads ----------------------------------------------------------------------------

    async def get(self, thread_id: str, checkpoint_id: str | None = None) -> Checkpoint | None: ...

    async def history(
        self, thread_id: str, before: str | None = None, limit: int = 100
    ) -> list[Checkpoint]: ...

    async def latest_of_runs(self, thread_id: str, run_ids: Sequence[str]) -> Checkpoint | None: ...

    async def thread(self, thread_id: str) -> ThreadInfo | None: ...

    async def threads(self, after: str | None = None, limit: int = 100) -> list[ThreadInfo]: ...

    async def children(
        self, thread_id: str, after: str | None = None, limit: int = 1000
    ) -> list[str]: ...

    async def events_after(
        self, thread_id: str, after_seq: int, limit: int = 1000
    ) -> list[Event]: ...

    async def await_events_after(
        self,
        thread_id: str,
        after_seq: int,
        timeout: timedelta,
        watch: WatchPolicy = WatchPolicy(),
    ) -> list[Event]: ...

    def subscribe(
        self, thread_id: str, after_seq: int = 0, watch: WatchPolicy = WatchPolicy()
    ) -> AsyncIterator[Event]: ...

    async def get_effect(self, thread_id: str, key: str) -> EffectRecord | None: ...

    async def effects(
        self, thread_id: str, after: str | None = None, limit: int = 100
    ) -> list[EffectRecord]: ...

    # --- lifecycle ------------------------------------------------------------------------

    async def close(self) -> None:
        """Release resources; afterwards every method raises `ProcessingError`. Idempotent."""
        ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class AsyncClosedOnExit:
    """An async store as its own async context manager: leaving ``async with`` closes it."""

    async def close(self) -> None:
        raise NotImplementedError  # each store closes its own way

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


__all__ = ["AsyncCheckpointer", "AsyncClosedOnExit", "AsyncRunQueue", "AsyncTraceContexts"]
