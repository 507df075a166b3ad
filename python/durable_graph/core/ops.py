"""Store operations and their one driver, for code written once for sync and async stores.

A flow (the worker's attempt, renewal and finishing flows; the LangGraph saver's plans) is a
generator without I/O: it yields the operation it needs next — a `StoreOp`, ``store_op("commit",
claim, commit)``, or an operation of its own kind — and is sent that operation's result at the
``yield``, or thrown the exception it raised there, as a plain call would; psycopg 3 drives its
protocol generators the same way. `drive` runs a flow on a sync store (each operation performed
at once), `drive_async` on an async one (each operation's awaitable awaited). A flow may also yield
values to hand out to its caller (the saver's ``list``): `hand_out` and `hand_out_async` drive it
as an iterator of those.

``catch``: which exceptions of an operation are thrown into the flow (it decides); any other
propagates at once. The worker's flows take `StoreError`; the saver's plans take every exception
(``BaseException``), so their ``finally`` releases the claims they took.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from durable_graph.core.errors import StoreError

OpT = TypeVar("OpT")
OutT = TypeVar("OutT")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class StoreOp:
    """A call of the store's method ``method`` (``"run_queue.renew"``: its run queue's) with
    ``args`` and ``kwargs``. `on` returns its result from a sync store, an awaitable from an
    async one."""

    method: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    def on(self, store: Any) -> Any:
        target = store
        for name in self.method.split("."):
            target = getattr(target, name)
        return target(*self.args, **self.kwargs)


def store_op(method: str, *args: Any, **kwargs: Any) -> StoreOp:
    """The `StoreOp` calling ``method(*args, **kwargs)``."""
    return StoreOp(method, args, kwargs)


class Steps(Generic[OpT, R]):
    """A flow being driven: iterate for the next operation, then `send` its result or `throw`
    its error. ``result`` holds the flow's answer once iteration ends."""

    def __init__(self, flow: Generator[OpT, Any, R]) -> None:
        self._flow = flow
        self._sent: Any = None
        self._error: BaseException | None = None
        self.result: R | None = None

    def __iter__(self) -> Generator[OpT, None, None]:
        while True:
            try:
                if self._error is None:
                    op = self._flow.send(self._sent)
                else:
                    op = self._flow.throw(self._error)
            except StopIteration as done:
                self.result = done.value
                return
            self._sent, self._error = None, None
            yield op

    def send(self, result: Any) -> None:
        self._sent = result

    def throw(self, error: BaseException) -> None:
        self._error = error


Catch = type[BaseException] | tuple[type[BaseException], ...]


def _performing(
    steps: Steps[Any, Any], perform: Callable[[Any], Any], kind: type[OutT] | None, catch: Catch
) -> Iterator[OutT]:
    for op in steps:
        if kind is not None and isinstance(op, kind):
            yield op
            continue
        try:
            steps.send(perform(op))
        except catch as exc:
            steps.throw(exc)


async def _performing_async(
    steps: Steps[Any, Any],
    perform: Callable[[Any], Awaitable[Any]],
    kind: type[OutT] | None,
    catch: Catch,
) -> AsyncIterator[OutT]:
    for op in steps:
        if kind is not None and isinstance(op, kind):
            yield op
            continue
        try:
            steps.send(await perform(op))
        except catch as exc:
            steps.throw(exc)


def drive(
    flow: Generator[OpT, Any, R], perform: Callable[[OpT], Any], *, catch: Catch = StoreError
) -> R:
    """Run ``flow`` to its answer, performing each operation with ``perform`` (blocking)."""
    steps: Steps[OpT, R] = Steps(flow)
    for _ in _performing(steps, perform, None, catch):
        pass
    return steps.result  # type: ignore[return-value]  # set when the iteration ended


async def drive_async(
    flow: Generator[OpT, Any, R],
    perform: Callable[[OpT], Awaitable[Any]],
    *,
    catch: Catch = StoreError,
) -> R:
    """`drive` on an async store: each operation's awaitable is awaited."""
    steps: Steps[OpT, R] = Steps(flow)
    async for _ in _performing_async(steps, perform, None, catch):
        pass
    return steps.result  # type: ignore[return-value]  # set when the iteration ended


def hand_out(
    flow: Generator[Any, Any, None],
    perform: Callable[[Any], Any],
    kind: type[OutT],
    *,
    catch: Catch = StoreError,
) -> Iterator[OutT]:
    """`drive` as an iterator of the ``kind`` values the flow yields (performing the rest)."""
    return _performing(Steps(flow), perform, kind, catch)


def hand_out_async(
    flow: Generator[Any, Any, None],
    perform: Callable[[Any], Awaitable[Any]],
    kind: type[OutT],
    *,
    catch: Catch = StoreError,
) -> AsyncIterator[OutT]:
    """`hand_out` on an async store."""
    return _performing_async(Steps(flow), perform, kind, catch)


__all__ = [
    "Steps",
    "StoreOp",
    "drive",
    "drive_async",
    "hand_out",
    "hand_out_async",
    "store_op",
]
