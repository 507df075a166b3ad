"""One event loop running forever in a daemon thread: where the testkit's `SyncAdapter` runs an
async store's calls."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """One event loop running forever in a daemon thread."""

    def __init__(self, name: str = "durable-graph-async-adapter") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and wait for its result (or its exception)."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("SyncAdapter called from its own event loop: await the store")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()


__all__ = ["LoopThread"]
