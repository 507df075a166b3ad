"""Plans: one body of code for the sync and the async store (sans I/O).

A plan is a generator that yields the store calls it needs (``methodcaller("commit", claim,
commit)``) and gets each call's result back at the ``yield``, or its exception raised there, as a
plain call would; psycopg drives one protocol from both kinds of connection the same way. A plan
yields `Guarded` for the part that holds a thread's guard, and may yield `CheckpointTuple`s to
hand out (LangGraph's ``list``). `Run` drives a plan: iterated, on a sync store under
`threading.Lock` guards; async-iterated, awaiting an async store under `asyncio.Lock` guards.
`api` and `listing` offer one plan as LangGraph's sync and async method.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Coroutine, Generator, Iterator
from dataclasses import dataclass
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar

from langgraph.checkpoint.base import CheckpointTuple

R = TypeVar("R")
P = ParamSpec("P")

Call = Callable[[Any], Any]
"""One store call, ``methodcaller(name, *args)``: made on a sync store, awaited on an async one."""


@dataclass(frozen=True, slots=True)
class Guarded:
    """Steps to run holding the guard of ``thread_id``; their result is the ``yield``'s."""

    thread_id: str
    steps: Steps[Any]


Steps = Generator[Call | Guarded | CheckpointTuple, Any, R]
"""A plan: store calls and guarded parts in, results out; `CheckpointTuple`s are handed out."""


class Run(Generic[R]):
    """A plan driven against ``store``; ``guard(thread_id)`` gives that thread's lock.

    Iterate it over a sync store, async-iterate it over an async store: it yields the tuples the
    plan hands out. `finish` / `afinish` run a plan that hands none out and return its result.
    """

    __slots__ = ("_error", "_guard", "_reply", "_result", "_steps", "_store")
    _result: R  # set at the plan's end

    def __init__(self, steps: Steps[R], store: Any, guard: Callable[[str], Any]) -> None:
        self._steps = steps
        self._store = store
        self._guard = guard
        self._reply: Any = None
        self._error: BaseException | None = None

    def _advance(self) -> Call | Guarded | CheckpointTuple | None:
        """The plan's next request, given the last one's outcome; None at its end."""
        reply, error = self._reply, self._error
        self._reply, self._error = None, None
        try:
            return self._steps.send(reply) if error is None else self._steps.throw(error)
        except StopIteration as end:
            self._result = end.value
            return None

    def __iter__(self) -> Iterator[CheckpointTuple]:
        return self

    def __next__(self) -> CheckpointTuple:
        while (op := self._advance()) is not None:
            if isinstance(op, CheckpointTuple):
                return op
            self._answer(op)
        raise StopIteration

    def finish(self) -> R:
        while (op := self._advance()) is not None:
            if not isinstance(op, CheckpointTuple):  # handed out to no one
                self._answer(op)
        return self._result

    def _answer(self, op: Call | Guarded) -> None:
        """Make ``op`` on the sync store; its outcome goes to the plan at the next advance."""
        try:
            if isinstance(op, Guarded):
                with self._guard(op.thread_id):
                    self._reply = Run(op.steps, self._store, self._guard).finish()
            else:
                self._reply = op(self._store)
        except BaseException as e:  # raised in the plan at its yield, as from a plain call
            self._error = e

    def __aiter__(self) -> AsyncIterator[CheckpointTuple]:
        return self

    async def __anext__(self) -> CheckpointTuple:
        while (op := self._advance()) is not None:
            if isinstance(op, CheckpointTuple):
                return op
            await self._aanswer(op)
        raise StopAsyncIteration

    async def afinish(self) -> R:
        while (op := self._advance()) is not None:
            if not isinstance(op, CheckpointTuple):
                await self._aanswer(op)
        return self._result

    async def _aanswer(self, op: Call | Guarded) -> None:
        """`_answer` on the async store."""
        try:
            if isinstance(op, Guarded):
                async with self._guard(op.thread_id):
                    run = Run(op.steps, self._store, self._guard)
                    self._reply = await run.afinish()
            else:
                self._reply = await op(self._store)
        except BaseException as e:
            self._error = e


class Runners(Protocol):
    """How a saver runs plans: `_run` and `_iterate` on a sync store, `_arun` and `_aiterate` on
    an async one (a saver offering only one API raises NotImplementedError from the others)."""

    def _run(self, steps: Steps[R]) -> R: ...

    async def _arun(self, steps: Steps[R]) -> R: ...

    def _iterate(self, steps: Steps[None]) -> Iterator[CheckpointTuple]: ...

    def _aiterate(self, steps: Steps[None]) -> AsyncIterator[CheckpointTuple]: ...


S = TypeVar("S", bound=Runners)
Method = Callable[Concatenate[S, P], R]


def api(
    plan: Method[S, P, Steps[R]],
) -> tuple[Method[S, P, R], Method[S, P, Coroutine[Any, Any, R]]]:
    """LangGraph's sync and async method for one operation: ``plan`` run by the saver's kind."""

    @functools.wraps(plan)  # so LangGraph sees the plan's parameters (it looks for task_path)
    def run_sync(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._run(plan(self, *args, **kwargs))

    @functools.wraps(plan)
    async def run_async(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self._arun(plan(self, *args, **kwargs))

    return run_sync, run_async


def listing(
    plan: Method[S, P, Steps[None]],
) -> tuple[Method[S, P, Iterator[CheckpointTuple]], Method[S, P, AsyncIterator[CheckpointTuple]]]:
    """`api` for a plan that hands out tuples: LangGraph's ``list`` and ``alist``."""

    @functools.wraps(plan)
    def list_sync(self: S, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[CheckpointTuple]:
        return self._iterate(plan(self, *args, **kwargs))

    @functools.wraps(plan)
    async def list_async(
        self: S, /, *args: P.args, **kwargs: P.kwargs
    ) -> AsyncIterator[CheckpointTuple]:
        async for item in self._aiterate(plan(self, *args, **kwargs)):
            yield item

    return list_sync, list_async
