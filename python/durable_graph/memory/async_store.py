"""`AsyncInMemoryCheckpointer`: the in-memory store behind the async API (SPEC §9).

Each call runs the sync `InMemoryCheckpointer` method in a worker thread (`asyncio.to_thread`):
its lock waits are bounded (5 s, D23) but may still be long for an event loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from durable_graph.core.validation import DEFAULT_MAX_VALUE_BYTES
from durable_graph.embedded.threaded import ThreadedCheckpointer
from durable_graph.memory.store import InMemoryCheckpointer


class AsyncInMemoryCheckpointer(ThreadedCheckpointer):
    """The in-memory store with coroutine methods; ``.run_queue`` is its `AsyncRunQueue`.

    ``clock`` is the store's clock (zero-argument callable returning POSIX seconds, rule 2).
    """

    def __init__(
        self,
        clock: Callable[[], float] = time.time,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
    ) -> None:
        super().__init__(InMemoryCheckpointer(clock=clock, max_value_bytes=max_value_bytes))


__all__ = ["AsyncInMemoryCheckpointer"]
