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

from durable_graph.core.model import (
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
    ThreadSweep,
    ThreadTtl,
    WatchPolicy,
)
from durable_graph.core.run_queue import RunQueue

JSONValue = object
"""A JSON value as an argument: checked by `durable_graph.core.validation` before anything is written."""


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
        kinds: Sequence[str] | None = None,
    ) -> AttemptBegun | None:
        """One transaction: lease with ``run_id``, then (attempt started) claim the thread as
        ``run_id``, read the entry, ``latest_of_runs`` over its attempts, plan. None when
        nothing is available."""
        ...

    def claim_attempt(
        self, lease: Lease, holder: str, claim_policy: ClaimPolicy = ClaimPolicy()
    ) -> AttemptBegun:
        """The rest of `begin_attempt` once the thread's claim is free, in one transaction:
        the lease checked (`EntryClosed`, then `LeaseLost`; nothing written), the thread claimed
        as ``holder`` (`ThreadBusy` while a claim is live), the entry read under the claim,
        ``latest_of_runs`` over the runs of its attempts and of its retry chain, the plan and
        the head — `begin_attempt`'s answer for a claimed attempt (``attempt``: ``Started`` of
        the attempt whose run is ``holder``, else ``Exhausted`` once ``max_attempts`` are
        recorded, else None)."""
        ...

    def renew_attempt(self, lease: Lease, claim: Claim) -> tuple[Lease, Claim]:
        """Renew the lease and the claim in one transaction (their errors; nothing on error)."""
        ...

    def finish_attempt(
        self,
        lease: Lease,
        outcome: EntryOutcome,
        claim: Claim,
        *,
        commit: Commit | None = None,
    ) -> QueueEntry:
        """One transaction: ``commit`` (when given) committed under ``claim`` exactly as
        `commit` would, then `close` (its errors), then release the claim if it is still
        current (left alone otherwise). Any error writes nothing (SPEC §11, §18.1)."""
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

    def set_thread_ttl(
        self, thread_id: str, minutes: float | None, strategy: str = "delete"
    ) -> ThreadTtl | None:
        """Give the thread a TTL (SPEC §24.1): ``strategy`` once ``minutes`` pass after its last
        activity, setting it counting as activity; ``minutes=None`` removes it. The thread's
        TTL as `thread_ttl` reads it, None when it has none or the thread does not exist."""
        ...

    def thread_ttl(self, thread_id: str) -> ThreadTtl | None:
        """The thread's TTL and when it expires; None without one (or without the thread)."""
        ...

    def sweep_threads(self, limit: int = 100) -> ThreadSweep:
        """One transaction of the TTL sweep: at most ``limit`` due threads, oldest due first,
        each expired one deleted (as `delete_thread`) or pruned to its head (``keep_latest``);
        never one with an open entry or a live claim (it is looked at again later)."""
        ...

    def put_writes_fenced(
        self, claim: Claim, checkpoint_id: str, writes: Sequence[PendingWrite], fence: Claim
    ) -> None:
        """`put_writes` under a second claim, ``fence`` (on another thread), checked in the same
        transaction: `ClaimLost` when it is not current, nothing written. A subgraph's writes
        fenced by the run's claim on its parent thread."""
        ...

    def put_writes_and_commit(
        self, claim: Claim, checkpoint_id: str, writes: Sequence[PendingWrite], commit: Commit
    ) -> Checkpoint:
        """`put_writes` to ``checkpoint_id``, then `commit`, in one transaction.

        The checks of both, put_writes' first; on any error nothing is written. The commit's
        fence covers the writes too. Lets a saver land a step's task writes with the step's
        checkpoint in one durable write.
        """
        ...

    def delete_runs(self, run_ids: Sequence[str]) -> int:
        """Remove every checkpoint of the given runs, with its writes, on every thread.

        Each thread that lost checkpoints gets the newest remaining one as head and a
        ``store.runs_deleted`` event (payload ``{"checkpoint_ids"}``). Returns the number removed.
        """
        ...

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> bool:
        """Copy a thread to a new thread id in one transaction; False when the source is unknown.

        Copied: every checkpoint (same ids, parents, run ids, states, metadata, writes; each
        with a new ``store.checkpoint`` event on the target), the head and the effects; each
        descendant named ``source + suffix`` becomes ``target + suffix`` (a child of the copy).
        Not copied: events, claims, queue entries. `ValidationError` when a target thread
        exists, `ThreadBusy` when one has a live claim.
        """
        ...

    # --- reads ----------------------------------------------------------------------------

    def get(self, thread_id: str, checkpoint_id: str | None = None) -> Checkpoint | None: ...

    def history(
        self, thread_id: str, before: str | None = None, limit: int = 100
    ) -> list[Checkpoint]: ...

    def latest_of_runs(self, thread_id: str, run_ids: Sequence[str]) -> Checkpoint | None: ...

    def search(
        self,
        thread_id: str,
        metadata: dict[str, object],
        before: str | None = None,
        limit: int = 100,
    ) -> list[Checkpoint]:
        """`history` filtered in the store: checkpoints whose metadata is an object holding
        every key of ``metadata`` with a JSON-equal value (numbers by value, booleans apart);
        ``{}`` matches every checkpoint."""
        ...

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

    def effects(
        self, thread_id: str, after: str | None = None, limit: int = 100
    ) -> list[EffectRecord]:
        """One page of the thread's effects in key byte order, after the key ``after``
        (exclusive), each with ``existing=True``; ``[]`` for an unknown thread. ``limit``
        1..100,000; a page may hold fewer (bytes bound it too): only an empty page means the end."""
        ...

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


class ClosedOnExit:
    """A store as its own context manager: leaving the ``with`` block closes it."""

    def close(self) -> None:
        raise NotImplementedError  # each store closes its own way

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def json_equal(a: object, b: object) -> bool:
    """Equal as JSON values: numbers by value (1 == 1.0), booleans apart from numbers."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def metadata_matches(metadata: object, wanted: dict[str, object]) -> bool:
    """`search`'s filter: ``metadata`` is an object with every key of ``wanted``, JSON-equal.

    An empty filter restricts nothing (it matches every checkpoint, whatever its metadata).
    """
    if not wanted:
        return True
    return isinstance(metadata, dict) and all(
        k in metadata and json_equal(metadata[k], v) for k, v in wanted.items()
    )


def copy_pairs(descendants: Sequence[str], source: str, target: str) -> list[tuple[str, str]]:
    """`copy_thread`'s (source thread, target thread) pairs: ``source + suffix`` -> ``target + suffix``."""
    return [(d, target + d[len(source) :]) for d in descendants if d.startswith(source)]


__all__ = ["Checkpointer", "ClosedOnExit", "copy_pairs", "json_equal", "metadata_matches"]
