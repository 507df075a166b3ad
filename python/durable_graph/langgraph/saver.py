"""`DurableSaver`: LangGraph's checkpointer over any sync store (SPEC §12).

Its rules (claims, fencing, write-behind, held writes, parents) are `core`'s, shared with
`AsyncDurableSaver`; this module runs them on a sync `Checkpointer` under `threading.Lock` guards,
and offers LangGraph's async API by running the same in a worker thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from typing import TypeVar

from langgraph.checkpoint.base import CheckpointTuple

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.langgraph.generated import SaverApi
from durable_graph.langgraph.plan import Performer, Plan

R = TypeVar("R")


class DurableSaver(SaverApi[Checkpointer]):
    """A LangGraph `BaseCheckpointSaver` over a sync `Checkpointer` (memory, SQLite, PostgreSQL)."""

    _lock_kind = threading.Lock

    def _run(self, plan: Plan[R]) -> R:
        return Performer(self.store, self._guard).run(plan)

    def _iterate(self, plan: Plan[None]) -> Iterator[CheckpointTuple]:
        return Performer(self.store, self._guard).iterate(plan)

    # LangGraph's async graphs (and the conformance suite) on a sync store: the same plans, each
    # run in a worker thread so the event loop never waits on the store.

    async def _arun(self, plan: Plan[R]) -> R:
        return await asyncio.to_thread(self._run, plan)

    async def _aiterate(self, plan: Plan[None]) -> AsyncIterator[CheckpointTuple]:
        for item in await asyncio.to_thread(lambda: [*self._iterate(plan)]):
            yield item
