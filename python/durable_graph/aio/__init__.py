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

from durable_graph.core.async_protocols import AsyncCheckpointer, AsyncRunQueue
from durable_graph.memory.async_store import AsyncInMemoryCheckpointer

if TYPE_CHECKING:
    from durable_graph.postgres.async_store import AsyncPostgresCheckpointer, AsyncPostgresRunQueue
    from durable_graph.sqlite.async_store import AsyncSqliteCheckpointer
    from durable_graph.worker.aio import AsyncRunContext, AsyncWorker

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
        from durable_graph.sqlite.async_store import AsyncSqliteCheckpointer

        return AsyncSqliteCheckpointer
    if name in ("AsyncPostgresCheckpointer", "AsyncPostgresRunQueue"):
        from durable_graph.postgres import async_store as postgres

        return getattr(postgres, name)
    if name in ("AsyncWorker", "AsyncRunContext"):
        from durable_graph.worker import aio as worker

        return getattr(worker, name)
    raise AttributeError(name)
