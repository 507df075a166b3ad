"""PostgreSQL backend: a thin typed caller over the SQL functions of sql/ (see sql/README.md).

`config` (PostgresConfig), `calls` (one validated, decodable SQL function call per public
method, shared by every caller), `connection` (runs a call on a pooled connection, bounded in
time), `store` (the sync `PostgresCheckpointer` / `PostgresRunQueue`), `migrations` (schema).
"""

from durable_graph.postgres.config import PostgresConfig
from durable_graph.postgres.store import PostgresCheckpointer, PostgresRunQueue

__all__ = ["PostgresCheckpointer", "PostgresConfig", "PostgresRunQueue"]
