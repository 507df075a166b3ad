"""`AsyncDurableSaver`: LangGraph's checkpointer over any async store (SPEC §12).

The same rules as `DurableSaver` (`core`'s, see there), run on an `AsyncCheckpointer` under
`asyncio.Lock` guards. Its sync methods are not offered (they raise NotImplementedError):
LangGraph calls the async ones from async graphs (``ainvoke``, ``astream``).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from typing import TypeVar

from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.serde.base import SerializerProtocol

from ..aio.protocols import AsyncCheckpointer
from ..model import Checkpoint, Claim, ClaimPolicy
from .core import SaverCore
from .plan import Run, Steps

R = TypeVar("R")


class AsyncDurableSaver(SaverCore):
    """A LangGraph `BaseCheckpointSaver` over an `AsyncCheckpointer`."""

    def __init__(
        self,
        store: AsyncCheckpointer,
        *,
        serde: SerializerProtocol | None = None,
        claim_policy: ClaimPolicy = ClaimPolicy(),
        bound: tuple[Claim, str] | None = None,
    ) -> None:
        super().__init__(serde=serde, claim_policy=claim_policy, bound=bound)
        self.store = store
        self._guards: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    def for_run(self, claim: Claim, run_id: str) -> AsyncDurableSaver:
        """A saver whose writes are fenced by ``claim`` and committed under ``run_id``."""
        return AsyncDurableSaver(
            self.store, serde=self.serde, claim_policy=self.claim_policy, bound=(claim, run_id)
        )

    def _guard(self, thread_id: str) -> asyncio.Lock:
        lock = self._guards.get(thread_id)
        if lock is None:
            lock = asyncio.Lock()
            self._guards[thread_id] = lock
        return lock

    async def _arun(self, steps: Steps[R]) -> R:
        return await Run(steps, self.store, self._guard).afinish()

    def _aiterate(self, steps: Steps[None]) -> AsyncIterator[CheckpointTuple]:
        return Run(steps, self.store, self._guard)


__all__ = ["AsyncDurableSaver", "Checkpoint"]
