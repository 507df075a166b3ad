"""The Checkpointer interface (SPEC §4), implemented by every backend.

Writes are atomic: each locks the thread, checks, then writes, or changes nothing. Reads are
snapshots and never wait for writers. Time (claim expiry, ``committed_at``, retention age) is the
store's clock, never the caller's.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Protocol, Self, runtime_checkable

from .model import (
    ANY,
    AttemptBegun,
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
    TenantFilter,
    ThreadInfo,
    WatchPolicy,
)
from .run_queue import RunQueue

JSONValue = object
"""A JSON value as an argument: checked by `durable_graph.validation` before anything is written."""


@runtime_checkable
class Checkpointer(Protocol):
    """Threads, their checkpoint histories, pending writes, event logs, effects and run claims."""

    @property
    def run_queue(self) -> RunQueue:
        """The store's run queue, in the same database."""
        ...

    # --- claims ---------------------------------------------------------------------------

    def claim(self, thread_id: str, holder: str, policy: ClaimPolicy = ClaimPolicy()) -> Claim:
        """Take the thread's run claim with a new fencing token; `ThreadBusy` while one is live."""
        ...

    def renew_claim(self, claim: Claim) -> Claim:
        """Push expiry to store-now + ttl; `ClaimLost` unless ``claim`` is current."""
        ...

    def release_claim(self, claim: Claim) -> None:
        """End the claim; `ClaimLost` unless it is current."""
        ...

    # --- the worker fast path (SPEC §11): §5's steps, fewer transactions ---------------------

    def begin_attempt(
        self,
        holder: str,
        ttl: timedelta,
        *,
        run_id: str,
        claim_policy: ClaimPolicy = ClaimPolicy(),
        tenant: TenantFilter = ANY,
    ) -> AttemptBegun | None:
        """One transaction: lease with ``run_id``, then (attempt started) claim the thread as
        ``run_id``, read the entry, ``latest_of_runs`` over its attempts, plan. None when
        nothing is available."""
        ...

    def renew_attempt(self, lease: Lease, claim: Claim) -> tuple[Lease, Claim]:
        """Renew the lease and the claim in one transaction (their errors; nothing on error)."""
        ...

    def finish_attempt(self, lease: Lease, outcome: EntryOutcome, claim: Claim) -> QueueEntry:
        """One transaction: `close` (its errors, nothing written on error), then release the
        claim if it is still current (left alone otherwise)."""
        ...

    # --- writes ---------------------------------------------------------------------------

    def commit(self, claim: Claim, commit: Commit) -> Checkpoint:
        """Append a checkpoint (and its events) under a current claim, fenced and parent-checked."""
        ...

    def put_writes(self, claim: Claim, checkpoint_id: str, writes: Sequence[PendingWrite]) -> None:
        """Attach pending writes to a checkpoint; first write per (task, channel, index) wins."""
        ...

    def append_events(
        self, claim: Claim, events: Sequence[EventIn], run_id: str | None = None
    ) -> list[Event]:
        """Append events to the thread's log without a checkpoint."""
        ...

    def record_effect(
        self, claim: Claim, key: str, value: JSONValue, run_id: str | None = None
    ) -> EffectRecord:
        """Record an effect's value; the first write of a key wins."""
        ...

    def retract_turn(self, claim: Claim) -> Checkpoint | None:
        """Remove the newest turn (head-back run of one run id); return the new head."""
        ...

    def prune(self, thread_id: str, policy: RetentionPolicy) -> PruneResult:
        """Apply retention to one thread."""
        ...

    def prune_all(self, policy: RetentionPolicy, batch: int = 1000) -> PruneResult:
        """Apply retention to every thread, ``batch`` threads per transaction."""
        ...

    def delete_thread(self, thread_id: str, fence: Claim | None = None) -> bool:
        """Delete the thread and its descendants, leaving tombstones; mark their open entries."""
        ...

    # --- reads ----------------------------------------------------------------------------

    def get(self, thread_id: str, checkpoint_id: str | None = None) -> Checkpoint | None: ...

    def history(
        self, thread_id: str, before: str | None = None, limit: int = 100
    ) -> list[Checkpoint]: ...

    def latest_of_runs(self, thread_id: str, run_ids: Sequence[str]) -> Checkpoint | None: ...

    def thread(self, thread_id: str) -> ThreadInfo | None: ...

    def threads(self, after: str | None = None, limit: int = 100) -> list[ThreadInfo]: ...

    def children(self, thread_id: str, after: str | None = None, limit: int = 1000) -> list[str]:
        """One page of the thread's children in first-commit order, after the child ``after``
        (an id that is not a child: ``[]``). Pages of history, events_after and children may
        hold fewer than ``limit`` rows (PostgreSQL bounds a page's bytes, SPEC §10 rule 2, and
        always returns at least one row); only an empty page means the end."""
        ...

    def events_after(self, thread_id: str, after_seq: int, limit: int = 1000) -> list[Event]: ...

    def await_events_after(
        self,
        thread_id: str,
        after_seq: int,
        timeout: timedelta,
        watch: WatchPolicy = WatchPolicy(),
    ) -> list[Event]: ...

    def subscribe(
        self, thread_id: str, after_seq: int = 0, watch: WatchPolicy = WatchPolicy()
    ) -> Iterator[Event]: ...

    def get_effect(self, thread_id: str, key: str) -> EffectRecord | None: ...

    # --- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        """Release resources; afterwards every method raises `ProcessingError`. Idempotent."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


__all__ = ["Checkpointer"]
