"""What the worker (``worker/aio.py``) waits with, on an event loop; ``_compat_sync.py`` has the
same names for the generated sync `Worker`'s threads (as psycopg_pool's ``_acompat``)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import signal
from collections.abc import Awaitable, Callable, Collection, Coroutine, Iterator
from typing import Any, TypeVar

from durable_graph.core.errors import ValidationError
from durable_graph.worker.signals import STOP_SIGNALS

T = TypeVar("T")

ASYNC = True  # ``if ASYNC:`` blocks are the async worker's own; the sync one keeps their else
SIGNALS_BY_DEFAULT = False  # the loop's signals are left alone unless asked
Interrupted = asyncio.CancelledError  # stopping `run` from outside: its task is cancelled
Unit = asyncio.Task[None]  # a concurrent unit of the worker


class Wake(asyncio.Event):
    """An `asyncio.Event` that any thread may set (`AsyncWorker.stop`); made on its loop."""

    def __init__(self) -> None:
        super().__init__()
        self._home = asyncio.get_running_loop()

    def set(self) -> None:
        try:
            here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if here is self._home or self._home.is_closed():
            super().set()
        else:
            self._home.call_soon_threadsafe(super().set)


def spawn(fn: Callable[[], Coroutine[Any, Any, None]], name: str) -> Unit:
    """Run ``fn()`` as a task of its own."""
    return asyncio.create_task(fn(), name=name)


async def wait_event(event: asyncio.Event, timeout: float | None) -> bool:
    """Wait up to ``timeout`` seconds (None: for ever) for ``event``; whether it is set."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), timeout)
    return event.is_set()


async def wait_units(units: Collection[Unit], timeout: float | None = None) -> None:
    """Wait up to ``timeout`` seconds for every one of ``units`` to end."""
    if units:
        await asyncio.wait(units, timeout=timeout)


async def resolved(value: T | Awaitable[T]) -> T:
    """``value``, awaited if it is awaitable (a sync or async ``record_effect`` function)."""
    if inspect.isawaitable(value):
        return await value
    return value


def check_handler(handler: object) -> None:
    """An `AsyncWorker`'s handler is an async function (or an object with an async call)."""
    call = getattr(handler, "__call__", None)  # noqa: B004 - an object with an async __call__
    if not (inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call)):
        raise ValidationError("handler must be an async function (async def handler(ctx))")


class Signals:
    """SIGTERM and SIGINT given to ``on_signal`` on the loop (where it may take locks) while inside."""

    def __init__(self, on_signal: Callable[[int], None], install: bool) -> None:
        self._on_signal = on_signal
        self._install = install

    @contextlib.contextmanager
    def installed(self) -> Iterator[Signals]:
        if not self._install:
            yield self
            return
        loop = asyncio.get_running_loop()
        previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
        for sig in previous:
            loop.add_signal_handler(sig, self._on_signal, sig)
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                loop.remove_signal_handler(sig)
                if handler is not None:
                    signal.signal(sig, handler)

    async def wait(self, event: asyncio.Event, timeout: float | None = None) -> bool:
        """`wait_event` (signals arrive on their own)."""
        return await wait_event(event, timeout)
