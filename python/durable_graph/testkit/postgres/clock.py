"""`PgClock`: moves a PostgreSQL store's clock forward, for tests only (SPEC §4 "Time").

Every SQL function of the store reads the time through ``store_now()`` (``sql/00_clock.sql``:
``clock_timestamp()``). `PgClock` creates a test-only table ``dg_test_clock`` in the store's schema
and replaces that schema's ``store_now()`` with ``clock_timestamp() + offset`` read from it;
`advance` grows the offset, and `durable_graph.testkit.postgres.schema.reset_store` puts it back to
zero. Nothing in the package's normal configuration can switch this on: it happens only when a
test constructs a `PgClock`. Install it after the store is migrated; `migrate` leaves a current
schema alone, so the clock survives reopening the store, but migrating an out-of-date schema
reinstalls the real ``store_now()``.
"""

from __future__ import annotations

from datetime import timedelta

import psycopg
from psycopg import sql

from durable_graph.postgres.config import check_schema

_INSTALL = """
CREATE TABLE IF NOT EXISTS {schema}.dg_test_clock (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    clock_offset interval NOT NULL DEFAULT interval '0'
);
INSERT INTO {schema}.dg_test_clock (only_row) VALUES (true) ON CONFLICT DO NOTHING;
CREATE OR REPLACE FUNCTION {schema}.store_now() RETURNS timestamptz
LANGUAGE sql VOLATILE
AS $$ SELECT clock_timestamp() + (SELECT clock_offset FROM {qualified_table}) $$;
"""


class PgClock:
    """The `ClockControl` of a PostgreSQL store in ``schema`` (test-only)."""

    def __init__(self, dsn: str, schema: str) -> None:
        self._dsn = dsn
        self._schema = check_schema(schema)
        ident = sql.Identifier(schema)
        self._table = sql.SQL("{}.dg_test_clock").format(ident)
        install = sql.SQL(_INSTALL).format(schema=ident, qualified_table=self._table)
        with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
            conn.execute(install)
            # store_now() runs inside the SECURITY DEFINER dg_* functions, as the schema's
            # owner: the clock table must be the owner's too, whoever installs the clock.
            owner = conn.execute(
                "SELECT pg_catalog.pg_get_userbyid(nspowner) FROM pg_catalog.pg_namespace"
                " WHERE nspname = %s",
                (schema,),
            ).fetchone()
            if owner is not None:
                conn.execute(
                    sql.SQL("ALTER TABLE {} OWNER TO {}").format(
                        self._table, sql.Identifier(str(owner[0]))
                    )
                )

    def advance(self, delta: timedelta) -> None:
        """Move the store's clock forward by ``delta``."""
        if not isinstance(delta, timedelta):
            raise TypeError("delta must be a timedelta")
        query = sql.SQL("UPDATE {} SET clock_offset = clock_offset + %s").format(self._table)
        with psycopg.connect(self._dsn, autocommit=True) as conn:
            conn.execute(query, (delta,))


__all__ = ["PgClock"]
