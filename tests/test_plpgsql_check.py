"""Lint every PL/pgSQL function of a migrated schema with plpgsql_check (issue #11).

plpgsql_check (Debian ``postgresql-15-plpgsql-check``; `make pg-deps` and .ci/run install it)
plans every statement of every function against the real tables, so a misspelt column, a wrong
type, an unused variable or a lossy assignment fails here rather than on the first call that
reaches it. All its warning classes are on (errors, warnings, extra warnings, performance);
the few findings left are listed in `JUSTIFIED` (by detail, or by message when a finding has no
detail), each with the reason it is harmless.
(SQL-language functions are checked by PostgreSQL itself when they are created.)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from durable_graph.postgres.migrations import migrate

JUSTIFIED: dict[tuple[str, str], str] = {
    # An untyped '{}' literal assigned to a text[] variable: the cast is the intent.
    ("dg_delete_thread_v1", 'cast "text" value to "text[]" type'): "'{}' is an empty text[]",
    ("_dg_lease", 'cast "text" value to "text[]" type'): "'{}' is an empty text[]",
    # Integer counters summed into bigint OUT columns: widening, never lossy.
    ("_dg_prune_thread", 'cast "integer" value to "bigint" type'): "widening",
    ("dg_prune_batch_v1", 'cast "integer" value to "bigint" type'): "widening",
    ("dg_prune_v1", 'cast "integer" value to "bigint" type'): "widening",
    ("dg_delete_runs_v1", 'cast "integer" value to "bigint" type'): "widening",
    # Argument sizes (pg_column_size, integer) summed into a bigint.
    ("_dg_commit_args", 'cast "integer" value to "bigint" type'): "widening",
    ("dg_put_writes_v2", 'cast "integer" value to "bigint" type'): "widening",
    # A call made for its checks or locks, in an assignment: an expression is no statement where
    # a PERFORM is one (SPEC §21, D210); the value itself is not needed.
    ("_dg_commit_args", 'never read variable "v_ok"'): "a check in an expression",
    ("dg_commit_v1", 'never read variable "v_ok"'): "a check in an expression",
    ("dg_finish_attempt_v2", 'never read variable "v_ok"'): "a check in an expression",
    ("dg_finish_attempt_v2", 'never read variable "c"'): "the commit, made for its writes",
    ("dg_put_writes_v2", 'never read variable "v_ok"'): "a check in an expression",
    ("dg_put_writes_v2", 'never read variable "t"'): "the claim's lock, taken for itself",
    # The leased (or locked) entry is one composite OUT column among others, read by field.
    ("_dg_lease", 'composite OUT variable "o_entry" is not single argument'): "by design",
    ("_dg_lock_lease", 'composite OUT variable "o_entry" is not single argument'): "by design",
    # A statement trigger's transition table, which the static check does not see.
    ("_dg_notify_events", 'relation "appended" does not exist'): "REFERENCING NEW TABLE",
}
"""(function, detail) pairs that are accepted, with why."""


@pytest.fixture(scope="module")
def linted(pg_dsn: str) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
    schema = "lint_h4"
    migrate(pg_dsn, schema)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS plpgsql_check SCHEMA public")
        # Internal helpers are not pinned: they run under their caller's search_path.
        conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))
        yield conn
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def test_every_plpgsql_function_passes_plpgsql_check(
    linted: psycopg.Connection[tuple[Any, ...]],
) -> None:
    schema = linted.execute("SELECT current_schema()").fetchone()
    assert schema is not None
    rows = linted.execute(
        """
        SELECT p.proname, r.level, r.message, coalesce(r.detail, ''), r.lineno
          FROM pg_proc p
          JOIN pg_namespace n ON n.oid = p.pronamespace
          JOIN pg_language l ON l.oid = p.prolang
         CROSS JOIN LATERAL public.plpgsql_check_function_tb(
                 p.oid,
                 -- a trigger function is checked against a table it fires on
                 relid => coalesce((SELECT t.tgrelid FROM pg_trigger t WHERE t.tgfoid = p.oid
                                     ORDER BY t.tgrelid LIMIT 1), 0),
                 fatal_errors => false, other_warnings => true,
                 extra_warnings => true, performance_warnings => true) r
         WHERE n.nspname = %s AND l.lanname = 'plpgsql'
         ORDER BY 1, 5
        """,
        (schema[0],),
    ).fetchall()
    checked = linted.execute(
        "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
        " JOIN pg_language l ON l.oid = p.prolang WHERE n.nspname = %s AND l.lanname = 'plpgsql'",
        (schema[0],),
    ).fetchone()
    assert checked is not None and checked[0] >= 40  # every dg_* and _dg_* PL/pgSQL function
    # Keyed by the detail, or by the message when a finding has none.
    findings = [r for r in rows if (str(r[0]), str(r[3]) or str(r[2])) not in JUSTIFIED]
    assert findings == [], "\n".join(
        f"{name} line {line}: {level}: {message} {detail}"
        for name, level, message, detail, line in findings
    )
