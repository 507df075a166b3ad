"""`AsyncSqliteCheckpointer`: the SQLite store behind the async API (SPEC §9).

Each call runs the sync `SqliteCheckpointer` method in a worker thread (`asyncio.to_thread`), so
SQLite's I/O and ``busy_timeout`` waits never block the event loop.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from ..sqlite import SqliteCheckpointer, SqliteConfig
from ._threaded import ThreadedCheckpointer, in_thread


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
        """Open (creating if needed) the SQLite database at ``path``."""
        sync = await in_thread(_open_sync, path, config, clock)
        return cls(sync)


def _open_sync(
    path: str | os.PathLike[str], config: SqliteConfig | None, clock: Callable[[], float]
) -> SqliteCheckpointer:
    if config is None:
        return SqliteCheckpointer.open(path, clock=clock)
    return SqliteCheckpointer.open(path, config=config, clock=clock)


__all__ = ["AsyncSqliteCheckpointer"]
