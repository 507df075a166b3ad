"""A sync `Checkpointer` over an async one, so the contract suites run against the async stores.

`SyncAdapter.open(factory)` starts one event loop in a background thread, builds the async store
on it (``factory`` is a coroutine function: an `AsyncConnectionPool` must be opened on the loop
that uses it) and returns a `Checkpointer` whose every method runs the async method on that loop
(`asyncio.run_coroutine_threadsafe`) and waits for its result. The methods are
`durable_graph.core.surface`'s sync method sets (each derived from the sync Protocol's method: no
signature is written again here) and pass only the arguments the caller gave, so the contract
suites exercise the async stores' own default values. Many threads may call it at once: their
calls run as concurrent tasks on the one loop.

`close()` closes the async store and keeps the loop running, so calls after it raise the store's
own `ProcessingError`; `shutdown()` closes the store and stops the loop (tests call it at
teardown). Test and benchmark use only: production code should await the async store directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from typing import Any, Generic, TypeVar

from durable_graph.core.async_protocols import AsyncCheckpointer, AsyncRunQueue
from durable_graph.core.model import Event, WatchPolicy
from durable_graph.core.surface import CheckpointerCalls, RunQueueCalls

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


def _on_loop(
    run: Callable[[Coroutine[Any, Any, T]], T],
    target: object,
    name: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> T:
    """The async target's method ``name`` called with the caller's arguments, on the loop."""
    return run(getattr(target, name)(*args, **kwargs))


class SyncRunQueueAdapter(RunQueueCalls):
    """A sync `RunQueue` over an `AsyncRunQueue`."""

    def __init__(self, target: AsyncRunQueue, runner: LoopThread) -> None:
        self.target = target
        self._run = runner.run

    def _forward(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return _on_loop(self._run, self.target, name, args, kwargs)


class SyncAdapter(CheckpointerCalls, Generic[S]):
    """A sync `Checkpointer` over the async store ``target``, run on ``runner``'s loop."""

    def __init__(self, target: S, runner: LoopThread) -> None:
        self.target = target
        self._runner = runner
        self._run = runner.run
        self._run_queue = SyncRunQueueAdapter(target.run_queue, runner)

    def _forward(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return _on_loop(self._run, self.target, name, args, kwargs)

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
