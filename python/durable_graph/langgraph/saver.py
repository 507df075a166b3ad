"""`DurableSaver`: LangGraph's checkpointer over any sync store (SPEC §12).

Its rules (claims, fencing, write-behind, held writes, parents) are `core`'s, shared with
`AsyncDurableSaver`; this module runs them on a sync `Checkpointer` under `threading.Lock` guards,
and offers LangGraph's async API by running the same in a worker thread.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import AsyncIterator, Iterator
from typing import TypeVar

from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.serde.base import SerializerProtocol

from ..checkpointer import Checkpointer
from ..model import Claim, ClaimPolicy
from .core import SaverCore
from .plan import Run, Steps

R = TypeVar("R")


class DurableSaver(SaverCore):
    """A LangGraph `BaseCheckpointSaver` over a sync `Checkpointer` (memory, SQLite, PostgreSQL)."""

    def __init__(
        self,
        store: Checkpointer,
        *,
        serde: SerializerProtocol | None = None,
        claim_policy: ClaimPolicy = ClaimPolicy(),
        bound: tuple[Claim, str] | None = None,
        _guards: weakref.WeakValueDictionary[str, threading.Lock] | None = None,
    ) -> None:
        super().__init__(serde=serde, claim_policy=claim_policy, bound=bound)
        self.store = store
        self._guards: weakref.WeakValueDictionary[str, threading.Lock] = (
            _guards if _guards is not None else weakref.WeakValueDictionary()
        )
        self._guards_lock = threading.Lock()

    def for_run(self, claim: Claim, run_id: str) -> DurableSaver:
        """A saver whose writes are fenced by ``claim`` and committed under ``run_id``."""
        return DurableSaver(
            self.store,
            serde=self.serde,
            claim_policy=self.claim_policy,
            bound=(claim, run_id),
        )

    def _guard(self, thread_id: str) -> threading.Lock:
        with self._guards_lock:
            lock = self._guards.get(thread_id)
            if lock is None:
                lock = threading.Lock()
                self._guards[thread_id] = lock
            return lock

    def _run(self, steps: Steps[R]) -> R:
        return Run(steps, self.store, self._guard).finish()

    def _iterate(self, steps: Steps[None]) -> Iterator[CheckpointTuple]:
        return Run(steps, self.store, self._guard)

    # LangGraph's async graphs (and the conformance suite) on a sync store: the same plans, each
    # run in a worker thread so the event loop never waits on the store.

    async def _arun(self, steps: Steps[R]) -> R:
        return await asyncio.to_thread(self._run, steps)

    async def _aiterate(self, steps: Steps[None]) -> AsyncIterator[CheckpointTuple]:
        for item in await asyncio.to_thread(lambda: [*self._iterate(steps)]):
            yield item
