"""The SQLite backend: `SqliteCheckpointer` (sync, `store`) and `AsyncSqliteCheckpointer`."""

from durable_graph.sqlite.async_store import AsyncSqliteCheckpointer
from durable_graph.sqlite.connection import SCHEMA_VERSION, SqliteConfig
from durable_graph.sqlite.store import SqliteCheckpointer, SqliteRunQueue

__all__ = [
    "SCHEMA_VERSION",
    "AsyncSqliteCheckpointer",
    "SqliteCheckpointer",
    "SqliteConfig",
    "SqliteRunQueue",
]
