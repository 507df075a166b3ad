"""The async interfaces (SPEC §9): every method of `Checkpointer` and `RunQueue` as a coroutine.

Arguments, results, errors and semantics are those of the sync Protocols
(`durable_graph.core.checkpointer`, `durable_graph.core.run_queue`); only the calling convention differs.
The methods are generated from those Protocols' signatures
(`durable_graph.core.async_generated`, ``make generate``); this module adds the rest.
`subscribe` is a plain method returning an async iterator: its arguments are checked when it is
called, the store is read as it is iterated.

Cancellation: a task cancelled while a call is running gets `asyncio.CancelledError`; the write it
was making happened completely or not at all, and the store stays usable for every other task. A
cancellation requested before a call starts is raised before the call touches the store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import TracebackType
from typing import Protocol, Self, runtime_checkable

from durable_graph.core.async_generated import (
    AsyncCheckpointerMethods,
    AsyncRunQueueMethods,
    AsyncTraceContextsMethods,
)
from durable_graph.core.model import Event, WatchPolicy


@runtime_checkable
class AsyncRunQueue(AsyncRunQueueMethods, Protocol):
    """`durable_graph.core.run_queue.RunQueue` with coroutine methods."""


class AsyncTraceContexts(AsyncTraceContextsMethods, Protocol):
    """`durable_graph.core.run_queue.TraceContexts` with coroutine methods."""


@runtime_checkable
class AsyncCheckpointer(AsyncCheckpointerMethods, Protocol):
    """`durable_graph.core.checkpointer.Checkpointer` with coroutine methods: those of
    `AsyncCheckpointerMethods`, and these, which are not one awaited call."""

    @property
    def run_queue(self) -> AsyncRunQueue:
        """The store's run queue, in the same database."""
        ...

    def subscribe(
        self, thread_id: str, after_seq: int = 0, watch: WatchPolicy = WatchPolicy()
    ) -> AsyncIterator[Event]: ...

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
