"""Opening our stores inside a benchmark process: one connection (or one SQLite file handle)."""

from __future__ import annotations

from typing import Any

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.postgres import PostgresCheckpointer
from durable_graph.postgres.config import PostgresConfig
from durable_graph.sqlite import SqliteCheckpointer


def open_store(params: dict[str, Any], *, migrate: bool = False) -> Checkpointer:
    """The store named by ``params``: ``backend`` "postgres" (``dsn``, ``schema``) or "sqlite"
    (``path``). PostgreSQL stores get a pool of ``pool`` connections, one unless given."""
    if params["backend"] == "postgres":
        pool = params.get("pool", 1)
        config = PostgresConfig(schema=params["schema"], max_pool_size=pool, auto_migrate=migrate)
        return PostgresCheckpointer.open(params["dsn"], config)
    return SqliteCheckpointer.open(params["path"])
