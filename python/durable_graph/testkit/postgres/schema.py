"""Empty a migrated PostgreSQL store between tests, without paying for a migration.

Tests that run many examples on one schema (the contract suites per test class, the
differential machine per example) call `reset_store` before each one: every table of the store is
truncated (not its bookkeeping: ``schema_meta``, yoyo's tables, the test clock), every sequence
restarted, and a `PgClock` offset put back to zero, so the next test sees a fresh store.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from durable_graph.postgres.config import check_schema

BOOKKEEPING = ("schema_meta", "schema_bookkeeping", "dg_test_clock", "limits")
"""Tables that describe the schema rather than hold store data (``limits`` is put back to its
defaults by `reset_store`)."""


def store_tables(conn: psycopg.Connection[Any], schema: str) -> list[str]:
    """The schema's data tables: everything but bookkeeping."""
    rows = conn.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY tablename", (schema,)
    ).fetchall()
    return [str(r[0]) for r in rows if r[0] not in BOOKKEEPING and "yoyo" not in str(r[0])]


def store_sequences(conn: psycopg.Connection[Any], schema: str) -> list[str]:
    """The sequences of the store's schema."""
    rows = conn.execute(
        "SELECT sequencename FROM pg_sequences WHERE schemaname = %s", (schema,)
    ).fetchall()
    return [str(r[0]) for r in rows]


def reset_store(conn: psycopg.Connection[Any], schema: str) -> None:
    """Truncate the store's tables, restart its sequences and reset its test clock (if any)."""
    check_schema(schema)
    tables = store_tables(conn, schema)
    sequences = store_sequences(conn, schema)
    has_clock = conn.execute(
        "SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = 'dg_test_clock'", (schema,)
    ).fetchone()
    with conn.transaction():
        if tables:
            conn.execute(
                sql.SQL("TRUNCATE {} RESTART IDENTITY").format(
                    sql.SQL(", ").join(sql.Identifier(schema, t) for t in tables)
                )
            )
        for seq in sequences:
            conn.execute(sql.SQL("ALTER SEQUENCE {} RESTART").format(sql.Identifier(schema, seq)))
        if "limits" in {
            str(r[0])
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
            ).fetchall()
        }:
            conn.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(schema, "limits")))
            conn.execute(
                sql.SQL("INSERT INTO {} DEFAULT VALUES").format(sql.Identifier(schema, "limits"))
            )
        if has_clock:
            conn.execute(
                sql.SQL("UPDATE {} SET clock_offset = interval '0'").format(
                    sql.Identifier(schema, "dg_test_clock")
                )
            )


__all__ = ["BOOKKEEPING", "reset_store", "store_sequences", "store_tables"]
