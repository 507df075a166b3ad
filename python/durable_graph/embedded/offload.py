"""Running one sync store call in a worker thread, for the async wrappers of the embedded stores.

Cancellation: a sync call cannot be interrupted once its thread runs it. A task cancelled while
its call runs waits for the call to settle (each sync call is atomic and its waits are bounded),
then raises `CancelledError`: when the task has ended, nothing of its call is still in flight.
A cancellation requested before a call starts is raised before the call is handed to a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


async def in_thread(fn: Callable[..., T], /, *args: object, **kwargs: object) -> T:
    """``fn(*args, **kwargs)`` in a worker thread; on cancellation, let it settle, then re-raise."""
    await asyncio.sleep(0)  # a cancellation requested before the call is raised here
    future = asyncio.ensure_future(asyncio.to_thread(fn, *args, **kwargs))
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        if not future.done():
            # Another cancellation may cut this wait short: the call still settles on its own.
            with contextlib.suppress(BaseException):
                await asyncio.wait({future})
        if future.done() and not future.cancelled():
            future.exception()  # retrieved: the caller gets CancelledError, as asked
        raise


__all__ = ["in_thread"]
