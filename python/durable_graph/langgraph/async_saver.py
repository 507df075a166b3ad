"""`AsyncDurableSaver`: LangGraph's checkpointer over any async store (SPEC §12).

The same rules as `DurableSaver` (`core`'s, see there), run on an `AsyncCheckpointer` under
`asyncio.Lock` guards. Its sync methods are not offered (they raise NotImplementedError):
LangGraph calls the async ones from async graphs (``ainvoke``, ``astream``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TypeVar

from langgraph.checkpoint.base import CheckpointTuple

from durable_graph.core.async_protocols import AsyncCheckpointer
from durable_graph.core.model import Checkpoint
from durable_graph.langgraph.generated import SaverApi
from durable_graph.langgraph.plan import Performer, Plan

R = TypeVar("R")


class AsyncDurableSaver(SaverApi[AsyncCheckpointer]):
    """A LangGraph `BaseCheckpointSaver` over an `AsyncCheckpointer`."""

    _lock_kind = asyncio.Lock

    async def _arun(self, plan: Plan[R]) -> R:
        return await Performer(self.store, self._guard).arun(plan)

    def _aiterate(self, plan: Plan[None]) -> AsyncIterator[CheckpointTuple]:
        return Performer(self.store, self._guard).aiterate(plan)


__all__ = ["AsyncDurableSaver", "Checkpoint"]
