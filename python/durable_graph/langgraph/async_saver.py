"""`AsyncDurableSaver`: LangGraph's checkpointer over any async store (SPEC §12, §14.1).

The same rules as `DurableSaver` (`core`'s, see there), run on an `AsyncCheckpointer` under
`asyncio.Lock` guards. Its sync methods run the async ones on the saver's event loop from another
thread, as LangGraph's async savers do (D88), and refuse from the loop's own thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, Self, TypeVar

from langgraph.checkpoint.base import CheckpointTuple

from durable_graph.core.async_protocols import AsyncCheckpointer
from durable_graph.core.model import Checkpoint
from durable_graph.langgraph.generated import SaverApi
from durable_graph.langgraph.plan import Performer, Plan

R = TypeVar("R")


class AsyncDurableSaver(SaverApi[AsyncCheckpointer]):
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

    def _inherit(self, parent: Self) -> None:
        self.loop = self.loop or parent.loop

    def _seen_loop(self) -> None:
        if self.loop is None:
            self.loop = asyncio.get_running_loop()

    async def _arun(self, plan: Plan[R]) -> R:
        self._seen_loop()
        return await Performer(self.store, self._guard).arun(plan)

    async def _aiterate(self, plan: Plan[None]) -> AsyncIterator[CheckpointTuple]:
        self._seen_loop()
        async for item in Performer(self.store, self._guard).aiterate(plan):
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

    def _run(self, plan: Plan[R]) -> R:
        return self._on_loop(self._arun(plan))

    def _iterate(self, plan: Plan[None]) -> Iterator[CheckpointTuple]:
        async def collect() -> list[CheckpointTuple]:
            return [item async for item in self._aiterate(plan)]

        return iter(self._on_loop(collect()))


__all__ = ["AsyncDurableSaver", "Checkpoint"]
