"""A sync `Checkpointer` over an async one, so the contract suites run against the async stores.

`SyncAdapter.open(factory)` starts one event loop in a background thread, builds the async store
on it (``factory`` is a coroutine function: an `AsyncConnectionPool` must be opened on the loop
that uses it) and returns a `Checkpointer` whose every method runs the async method on that loop
(`asyncio.run_coroutine_threadsafe`) and waits for its result. The one-call methods are written
out in `durable_graph.testkit.adapter_generated` (generated from the Protocols; each passes the
caller's arguments, the Protocol's defaults for those not given, which are the async stores' own:
``tests/test_api_surface.py`` checks). Many threads may call it at once: their calls run as
concurrent tasks on the one loop.

`close()` closes the async store and keeps the loop running, so calls after it raise the store's
own `ProcessingError`; `shutdown()` closes the store and stops the loop (tests call it at
teardown). Test and benchmark use only: production code should await the async store directly.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Generic, TypeVar, cast

from durable_graph.core.async_protocols import AsyncCheckpointer, AsyncRunQueue, AsyncTraceContexts
from durable_graph.core.checkpointer import ClosedOnExit
from durable_graph.core.model import Event, WatchPolicy
from durable_graph.testkit.adapter_generated import SyncCheckpointerCalls, SyncRunQueueCalls
from durable_graph.testkit.loop import LoopThread

T = TypeVar("T")
S = TypeVar("S", bound=AsyncCheckpointer)


class SyncRunQueueAdapter(SyncRunQueueCalls):
    """A sync `RunQueue` over an `AsyncRunQueue` (one that keeps trace contexts, as every
    store's does)."""

    def __init__(self, target: AsyncRunQueue, runner: LoopThread) -> None:
        self.target = target
        self._traces = cast(AsyncTraceContexts, target)
        self._runner = runner


class SyncAdapter(SyncCheckpointerCalls, ClosedOnExit, Generic[S]):
    """A sync `Checkpointer` over the async store ``target``, run on ``runner``'s loop."""

    target: S

    def __init__(self, target: S, runner: LoopThread) -> None:
        self.target = target
        self._runner = runner
        self._run = runner.run
        self._run_queue = SyncRunQueueAdapter(target.run_queue, runner)

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


__all__ = ["LoopThread", "SyncAdapter", "SyncRunQueueAdapter"]
