"""`AsyncDurableSaver`: LangGraph's checkpointer over any async store (SPEC §12, §14.1).

The same rules as `DurableSaver` (`core`'s, see there), run on an `AsyncCheckpointer` under
`asyncio.Lock` guards. Its sync methods are offered as LangGraph's async savers offer theirs
(``AsyncPostgresSaver``, ``AsyncSqliteSaver``): each runs the async method on the saver's event
loop (the loop it was made in, or else the one of its first async call) and waits for it, so
sync code in another thread — a sync node, a tool, ``graph.get_state`` — can use a saver that an
async application owns. Called from the loop's own thread it would wait on itself: it raises
`asyncio.InvalidStateError` instead, as LangGraph's savers do.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, Self, TypeVar

from langgraph.checkpoint.base import CheckpointTuple

from durable_graph.core.async_protocols import AsyncCheckpointer
from durable_graph.core.model import Checkpoint, Claim
from durable_graph.langgraph.core import SaverCore
from durable_graph.langgraph.plan import Run, Steps

R = TypeVar("R")


class AsyncDurableSaver(SaverCore[AsyncCheckpointer]):
    """A LangGraph `BaseCheckpointSaver` over an `AsyncCheckpointer`."""

    _lock_kind = asyncio.Lock

    def __init__(self, store: AsyncCheckpointer, **kwargs: Any) -> None:
        super().__init__(store, **kwargs)
        self.loop: asyncio.AbstractEventLoop | None
        """The loop the sync methods run on (None until the saver meets one)."""
        try:
            self.loop = asyncio.get_running_loop()
        except RuntimeError:
            self.loop = None

    def for_run(self, claim: Claim, run_id: str) -> Self:
        bound = super().for_run(claim, run_id)
        bound.loop = bound.loop or self.loop
        return bound

    def _seen_loop(self) -> None:
        if self.loop is None:
            self.loop = asyncio.get_running_loop()

    async def _arun(self, steps: Steps[R]) -> R:
        self._seen_loop()
        return await Run(steps, self.store, self._guard).afinish()

    async def _aiterate(self, steps: Steps[None]) -> AsyncIterator[CheckpointTuple]:
        self._seen_loop()
        async for item in Run(steps, self.store, self._guard):
            yield item

    # --- LangGraph's sync API: the async one on the saver's loop, from another thread -------

    def _on_loop(self, work: Coroutine[Any, Any, R]) -> R:
        loop = self.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or loop.is_closed() or running is loop:
            work.close()
            if loop is None or loop.is_closed():
                raise asyncio.InvalidStateError(
                    "AsyncDurableSaver's sync methods run on its event loop, and it has none "
                    "running: make the saver inside the loop, or use the async methods"
                )
            raise asyncio.InvalidStateError(
                "Synchronous calls to AsyncDurableSaver are only allowed from a different "
                "thread than its event loop's. From the loop's thread, use the async interface, "
                "e.g. `await checkpointer.aget_tuple(...)` or `await graph.ainvoke(...)`."
            )
        return asyncio.run_coroutine_threadsafe(work, loop).result()

    def _run(self, steps: Steps[R]) -> R:
        return self._on_loop(self._arun(steps))

    def _iterate(self, steps: Steps[None]) -> Iterator[CheckpointTuple]:
        async def collect() -> list[CheckpointTuple]:
            return [item async for item in self._aiterate(steps)]

        return iter(self._on_loop(collect()))


__all__ = ["AsyncDurableSaver", "Checkpoint"]
