"""Plans: one body of code for the sync and the async store (sans I/O).

A plan is a generator driven by `durable_graph.core.ops` (the worker's driver too): it yields the
store calls it needs (`StoreOp`: ``store_op("commit", claim, commit)``) and gets each call's
result back at the ``yield``, or its exception raised there, as a plain call would. A plan yields
`Guarded` for the part that holds a thread's guard, and may yield `CheckpointTuple`s to hand out
(LangGraph's ``list``). `Performer` performs a plan's operations: on a sync store under
`threading.Lock` guards (`run`, `iterate`), on an async store awaited under `asyncio.Lock` guards
(`arun`, `aiterate`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from langgraph.checkpoint.base import CheckpointTuple

from durable_graph.core.ops import StoreOp, drive, drive_async, hand_out, hand_out_async

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Guarded:
    """Steps to run holding the guard of ``thread_id``; their result is the ``yield``'s."""

    thread_id: str
    steps: Plan[Any]


Plan = Generator[StoreOp | Guarded | CheckpointTuple, Any, R]
"""A plan: store calls and guarded parts in, results out; `CheckpointTuple`s are handed out."""

EVERY = BaseException
"""A plan is thrown every exception of its operations: its ``finally`` releases its claims."""


@dataclass(frozen=True, slots=True)
class Performer:
    """Performs plans' operations on ``store``; ``guard(thread_id)`` gives that thread's lock."""

    store: Any
    guard: Callable[[str], Any]

    def perform(self, op: StoreOp | Guarded | CheckpointTuple) -> Any:
        if isinstance(op, CheckpointTuple):  # handed out to no one (a plan run to its result)
            return None
        if isinstance(op, Guarded):
            with self.guard(op.thread_id):
                return drive(op.steps, self.perform, catch=EVERY)
        return op.on(self.store)

    async def aperform(self, op: StoreOp | Guarded | CheckpointTuple) -> Any:
        if isinstance(op, CheckpointTuple):
            return None
        if isinstance(op, Guarded):
            async with self.guard(op.thread_id):
                return await drive_async(op.steps, self.aperform, catch=EVERY)
        return await op.on(self.store)

    def run(self, plan: Plan[R]) -> R:
        return drive(plan, self.perform, catch=EVERY)

    def iterate(self, plan: Plan[None]) -> Iterator[CheckpointTuple]:
        return hand_out(plan, self.perform, CheckpointTuple, catch=EVERY)

    async def arun(self, plan: Plan[R]) -> R:
        return await drive_async(plan, self.aperform, catch=EVERY)

    def aiterate(self, plan: Plan[None]) -> AsyncIterator[CheckpointTuple]:
        return hand_out_async(plan, self.aperform, CheckpointTuple, catch=EVERY)


__all__ = ["Guarded", "Performer", "Plan"]
