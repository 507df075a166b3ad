"""`AsyncSqliteCheckpointer`: the SQLite store behind the async API (SPEC §9).

Each call runs the sync `SqliteCheckpointer` method in a worker thread (`asyncio.to_thread`), so
SQLite's I/O and ``busy_timeout`` waits never block the event loop.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable

from durable_graph.embedded.threaded import ThreadedCheckpointer
from durable_graph.sqlite.connection import SqliteConfig
from durable_graph.sqlite.store import SqliteCheckpointer


class AsyncSqliteCheckpointer(ThreadedCheckpointer):
    """The SQLite store with coroutine methods; ``.run_queue`` is its `AsyncRunQueue`.

    Open it with ``await AsyncSqliteCheckpointer.open(path)`` (a coroutine: opening creates or
    migrates the file, in a worker thread).
    """

    @classmethod
    async def open(
        cls,
        path: str | os.PathLike[str],
        config: SqliteConfig | None = None,
        clock: Callable[[], float] = time.time,
    ) -> AsyncSqliteCheckpointer:
        """Open (creating if needed) the SQLite database at ``path``.

        A task cancelled while the file is being opened gets `CancelledError`; the store opened
        meanwhile is closed, not leaked.
        """
        await asyncio.sleep(0)  # a cancellation requested before opening is raised here
        opening = asyncio.ensure_future(asyncio.to_thread(_open_sync, path, config, clock))
        try:
            sync = await asyncio.shield(opening)
        except asyncio.CancelledError:
            opening.add_done_callback(_close_unwanted)
            raise
        return cls(sync)


def _close_unwanted(opening: asyncio.Future[SqliteCheckpointer]) -> None:
    if not opening.cancelled() and opening.exception() is None:
        opening.result().close()


def _open_sync(
    path: str | os.PathLike[str], config: SqliteConfig | None, clock: Callable[[], float]
) -> SqliteCheckpointer:
    if config is None:
        return SqliteCheckpointer.open(path, clock=clock)
    return SqliteCheckpointer.open(path, config=config, clock=clock)


__all__ = ["AsyncSqliteCheckpointer"]
