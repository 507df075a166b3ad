"""A sync `Checkpointer` over an async one, so the contract suites run against the async stores.

`SyncAdapter.open(factory)` starts one event loop in a background thread, builds the async store
on it (``factory`` is a coroutine function: an `AsyncConnectionPool` must be opened on the loop
that uses it) and returns a `Checkpointer` whose every method runs the async method on that loop
(`asyncio.run_coroutine_threadsafe`) and waits for its result. Only the arguments the caller
gave are passed (`durable_graph.surface.forward`), so the contract suites exercise the async
stores' own default values. Many threads may call it at once:
their calls run as concurrent tasks on the one loop.

`close()` closes the async store and keeps the loop running, so calls after it raise the store's
own `ProcessingError`; `shutdown()` closes the store and stops the loop (tests call it at
teardown). Test and benchmark use only: production code should await the async store directly.
"""

# The forwarded methods are declarations: their bodies (``...``) never run.
# mypy: disable-error-code="empty-body"

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

from ..aio.protocols import AsyncCheckpointer, AsyncRunQueue, JSONValue
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
from ..surface import forward

T = TypeVar("T")
S = TypeVar("S", bound=AsyncCheckpointer)


class LoopThread:
    """One event loop running forever in a daemon thread."""

    def __init__(self, name: str = "durable-graph-async-adapter") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and wait for its result (or its exception)."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("SyncAdapter called from its own event loop: await the store")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()


class SyncRunQueueAdapter:
    """A sync `RunQueue` over an `AsyncRunQueue`."""

    def __init__(self, target: AsyncRunQueue, runner: LoopThread) -> None:
        self._q = target
        self._run = runner.run

    def _forward(self, name: str, given: dict[str, Any]) -> Any:
        return self._run(getattr(self._q, name)(**given))

    @forward
    def submit(self, submission: Submission) -> Ticket: ...

    @forward
    def submit_many(self, submissions: Sequence[Submission]) -> list[Ticket]: ...

    @forward
    def lease(
        self,
        holder: str,
        ttl: timedelta,
        tenant: TenantFilter = ANY,
        run_id: str | None = None,
    ) -> Lease | None: ...

    @forward
    def renew(self, lease: Lease, ttl: timedelta | None = None) -> Lease: ...

    @forward
    def release(self, lease: Lease) -> None: ...

    @forward
    def record_attempt(self, lease: Lease, run_id: str) -> AttemptStart: ...

    @forward
    def close(self, lease: Lease, outcome: EntryOutcome) -> QueueEntry: ...

    @forward
    def cancel(self, entry_id: int, tenant: str | None = None) -> QueueEntry: ...

    @forward
    def defer(self, lease: Lease, delay: timedelta, error: str | None = None) -> QueueEntry: ...

    @forward
    def retry(self, entry_id: int, tenant: str | None = None) -> Ticket: ...

    @forward
    def entry(self, entry_id: int, tenant: str | None = None) -> QueueEntry | None: ...

    @forward
    def open_entries(
        self,
        tenant: TenantFilter = None,
        thread_id: str | None = None,
        after: int | None = None,
        limit: int = 1000,
    ) -> list[QueueEntry]: ...

    @forward
    def entries(
        self,
        state: EntryState | None = None,
        tenant: TenantFilter = ANY,
        thread_id: str | None = None,
        after: int | None = None,
        limit: int = 100,
    ) -> list[QueueEntry]: ...

    @forward
    def stats(self, tenant: TenantFilter = ANY) -> QueueStats: ...

    @forward
    def await_closed(
        self, entry_id: int, timeout: timedelta, tenant: str | None = None
    ) -> QueueEntry | None: ...

    @forward
    def reclaim(self, older_than: timedelta, batch: int = 1000) -> int: ...


class SyncAdapter(Generic[S]):
    """A sync `Checkpointer` over the async store ``target``, run on ``runner``'s loop."""

    def __init__(self, target: S, runner: LoopThread) -> None:
        self.target = target
        self._runner = runner
        self._run = runner.run
        self._run_queue = SyncRunQueueAdapter(target.run_queue, runner)

    def _forward(self, name: str, given: dict[str, Any]) -> Any:
        return self._run(getattr(self.target, name)(**given))

    @classmethod
    def open(cls, factory: Callable[[], Awaitable[S]]) -> SyncAdapter[S]:
        """Start a loop thread and build the async store on it with ``factory()``."""
        runner = LoopThread()

        async def build() -> S:
            return await factory()

        try:
            target = runner.run(build())
        except BaseException:
            runner.stop()
            raise
        return cls(target, runner)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._runner.loop

    @property
    def run_queue(self) -> SyncRunQueueAdapter:
        return self._run_queue

    # --- claims ---------------------------------------------------------------------------

    @forward
    def claim(self, thread_id: str, holder: str, policy: ClaimPolicy = ClaimPolicy()) -> Claim: ...

    @forward
    def renew_claim(self, claim: Claim) -> Claim: ...

    @forward
    def release_claim(self, claim: Claim) -> None: ...

    # --- the worker fast path (SPEC §11) ------------------------------------------------------

    @forward
    def begin_attempt(
        self,
        holder: str,
        ttl: timedelta,
        *,
        run_id: str,
        claim_policy: ClaimPolicy = ClaimPolicy(),
        tenant: TenantFilter = ANY,
    ) -> AttemptBegun | None: ...

    @forward
    def renew_attempt(self, lease: Lease, claim: Claim) -> tuple[Lease, Claim]: ...

    @forward
    def finish_attempt(self, lease: Lease, outcome: EntryOutcome, claim: Claim) -> QueueEntry: ...

    # --- writes ---------------------------------------------------------------------------

    @forward
    def commit(self, claim: Claim, commit: Commit) -> Checkpoint: ...

    @forward
    def put_writes(
        self, claim: Claim, checkpoint_id: str, writes: Sequence[PendingWrite]
    ) -> None: ...

    @forward
    def append_events(
        self, claim: Claim, events: Sequence[EventIn], run_id: str | None = None
    ) -> list[Event]: ...

    @forward
    def record_effect(
        self, claim: Claim, key: str, value: JSONValue, run_id: str | None = None
    ) -> EffectRecord: ...

    @forward
    def retract_turn(self, claim: Claim) -> Checkpoint | None: ...

    @forward
    def prune(self, thread_id: str, policy: RetentionPolicy) -> PruneResult: ...

    @forward
    def prune_all(self, policy: RetentionPolicy, batch: int = 1000) -> PruneResult: ...

    @forward
    def delete_thread(self, thread_id: str, fence: Claim | None = None) -> bool: ...

    def put_writes_fenced(
        self, claim: Claim, checkpoint_id: str, writes: Sequence[PendingWrite], fence: Claim
    ) -> None:
        self._run(self.target.put_writes_fenced(claim, checkpoint_id, writes, fence))

    def search(
        self,
        thread_id: str,
        metadata: dict[str, object],
        before: str | None = None,
        limit: int = 100,
    ) -> list[Checkpoint]:
        return self._run(self.target.search(thread_id, metadata, before, limit))

    def put_writes_and_commit(
        self, claim: Claim, checkpoint_id: str, writes: Sequence[PendingWrite], commit: Commit
    ) -> Checkpoint:
        return self._run(self.target.put_writes_and_commit(claim, checkpoint_id, writes, commit))

    def delete_runs(self, run_ids: Sequence[str]) -> int:
        return self._run(self.target.delete_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> bool:
        return self._run(self.target.copy_thread(source_thread_id, target_thread_id))

    # --- reads ----------------------------------------------------------------------------

    @forward
    def get(self, thread_id: str, checkpoint_id: str | None = None) -> Checkpoint | None: ...

    @forward
    def history(
        self, thread_id: str, before: str | None = None, limit: int = 100
    ) -> list[Checkpoint]: ...

    @forward
    def latest_of_runs(self, thread_id: str, run_ids: Sequence[str]) -> Checkpoint | None: ...

    @forward
    def thread(self, thread_id: str) -> ThreadInfo | None: ...

    @forward
    def threads(self, after: str | None = None, limit: int = 100) -> list[ThreadInfo]: ...

    @forward
    def children(
        self, thread_id: str, after: str | None = None, limit: int = 1000
    ) -> list[str]: ...

    @forward
    def events_after(self, thread_id: str, after_seq: int, limit: int = 1000) -> list[Event]: ...

    @forward
    def await_events_after(
        self,
        thread_id: str,
        after_seq: int,
        timeout: timedelta,
        watch: WatchPolicy = WatchPolicy(),
    ) -> list[Event]: ...

    def subscribe(
        self, thread_id: str, after_seq: int = 0, watch: WatchPolicy = WatchPolicy()
    ) -> Iterator[Event]:
        # Checked now, as the async store checks at call time; read as it is iterated.
        return self._iterate(self.target.subscribe(thread_id, after_seq, watch))

    def _iterate(self, events: AsyncIterator[Event]) -> Iterator[Event]:
        async def step() -> tuple[bool, Event | None]:
            try:
                return True, await anext(events)
            except StopAsyncIteration:
                return False, None

        try:
            while True:
                more, event = self._run(step())
                if not more or event is None:
                    return
                yield event
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None and not self.loop.is_closed():
                with contextlib.suppress(Exception):
                    self._run(aclose())

    @forward
    def get_effect(self, thread_id: str, key: str) -> EffectRecord | None: ...

    # --- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        """Close the async store; the loop keeps running so later calls raise its errors."""
        self._run(self.target.close())

    def shutdown(self) -> None:
        """Close the async store and stop the loop thread."""
        if self.loop.is_closed():
            return
        try:
            self.close()
        finally:
            self._runner.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


__all__ = ["LoopThread", "SyncAdapter", "SyncRunQueueAdapter"]
