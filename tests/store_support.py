"""Stores and store states that several test modules set up the same way."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from durable_graph.aio import AsyncCheckpointer, AsyncInMemoryCheckpointer
from durable_graph.postgres import PostgresConfig
from durable_graph.postgres.async_store import AsyncPostgresCheckpointer


@contextlib.contextmanager
def thread_row_locked(dsn: str, schema: str, thread_id: str) -> Iterator[psycopg.Connection[Any]]:
    """Another session holding the thread's row lock (an open transaction), until the block ends."""
    with psycopg.connect(dsn) as locker:
        query = sql.SQL("SELECT 1 FROM {}.threads WHERE thread_id = %s FOR UPDATE").format(
            sql.Identifier(schema)
        )
        assert locker.execute(query, (thread_id,)).fetchone() == (1,)
        try:
            yield locker
        finally:
            locker.rollback()


async def open_async_store(kind: str, request: pytest.FixtureRequest) -> AsyncCheckpointer:
    """An async store: in memory (``kind`` "memory"), else PostgreSQL on the test's schema."""
    if kind == "memory":
        return AsyncInMemoryCheckpointer()
    return await AsyncPostgresCheckpointer.open(
        request.getfixturevalue("pg_dsn"),
        PostgresConfig(schema=request.getfixturevalue("pg_schema")),
    )


CATALOG_QUERIES: dict[str, str] = {
    "indexes": """
        SELECT indexname, indexdef FROM pg_indexes
         WHERE schemaname = %(ns)s AND tablename NOT LIKE '%%yoyo%%' ORDER BY 1""",
    "constraints": """
        SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid)
          FROM pg_constraint WHERE connamespace = %(ns)s::regnamespace
           AND conrelid::regclass::text NOT LIKE '%%yoyo%%' ORDER BY 1, 2""",
    "sequences": """
        SELECT sequencename, data_type::text, start_value, increment_by, cycle
          FROM pg_sequences WHERE schemaname = %(ns)s ORDER BY 1""",
    "meta": "SELECT key, value FROM {schema}.dg_schema_meta_v1() ORDER BY key",
}
"""The `catalog` queries every comparison of two installed schemas makes (a module adds its own)."""


def catalog(queries: dict[str, str], dsn: str, schema: str) -> dict[str, list[tuple[Any, ...]]]:
    """What each of ``queries`` finds of ``schema`` in the catalog (``%(ns)s`` is the schema's
    name, ``{schema}`` its quoted name), with its own name replaced by ``<schema>`` (it appears
    in proconfig's search_path, say) so that two schemas compare."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name, query in queries.items():
            text = query.replace("{schema}", '"' + schema + '"')
            rows = conn.execute(text.encode(), {"ns": schema}).fetchall()
            out[name] = [
                tuple(str(v).replace(schema, "<schema>") if isinstance(v, str) else v for v in r)
                for r in rows
            ]
    return out
