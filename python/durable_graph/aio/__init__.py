"""The async API (SPEC §9): every method of §4-§5 as a coroutine, on all three backends.

- `AsyncInMemoryCheckpointer(clock=..., max_value_bytes=...)`
- ``await AsyncSqliteCheckpointer.open(path, config=..., clock=...)``
- ``await AsyncPostgresCheckpointer.open(dsn, config)`` / ``.create(async_pool, config)``: native
  asyncio on psycopg's `AsyncConnectionPool`, calling the same SQL functions as the sync store.

Each has ``.run_queue`` (an `AsyncRunQueue`), ``await close()`` and ``async with`` support.
`AsyncWorker` runs async handlers, many attempts concurrently on one event loop. See
docs/async.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .memory import AsyncInMemoryCheckpointer
from .protocols import AsyncCheckpointer, AsyncRunQueue

if TYPE_CHECKING:
    from .postgres import AsyncPostgresCheckpointer, AsyncPostgresRunQueue
    from .sqlite import AsyncSqliteCheckpointer
    from .worker import AsyncRunContext, AsyncWorker

__all__ = [
    "AsyncCheckpointer",
    "AsyncInMemoryCheckpointer",
    "AsyncPostgresCheckpointer",
    "AsyncPostgresRunQueue",
    "AsyncRunContext",
    "AsyncRunQueue",
    "AsyncSqliteCheckpointer",
    "AsyncWorker",
]


def __getattr__(name: str) -> Any:
    # Each backend is imported when first named: psycopg only by those who use PostgreSQL.
    if name == "AsyncSqliteCheckpointer":
        from .sqlite import AsyncSqliteCheckpointer

        return AsyncSqliteCheckpointer
    if name in ("AsyncPostgresCheckpointer", "AsyncPostgresRunQueue"):
        from . import postgres

        return getattr(postgres, name)
    if name in ("AsyncWorker", "AsyncRunContext"):
        from . import worker

        return getattr(worker, name)
    raise AttributeError(name)
