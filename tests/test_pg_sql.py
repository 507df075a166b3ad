"""The SQL side of the PostgreSQL store: the functions as an API of their own, and migrations.

Everything here runs against a real PostgreSQL (the session's throwaway server): the full cycle
goes through ``psql`` alone, with no Python caller, as another language would call it.
"""

from __future__ import annotations

import multiprocessing
import subprocess

import psycopg
import pytest
from psycopg import sql

from durable_graph.core.errors import ProcessingError
from durable_graph.postgres import migrations
from store_support import CATALOG_QUERIES, catalog

PSQL = "/usr/bin/psql"


def psql(dsn: str, script: str) -> str:
    """Run ``script`` with psql (stop on the first error); return its unaligned output."""
    result = subprocess.run(
        [PSQL, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", dsn],
        input=script,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise AssertionError(f"psql failed ({result.returncode}): {result.stderr}")
    return result.stdout


def psql_error(dsn: str, script: str) -> str:
    """Run ``script`` expecting psql to fail; return the SQLSTATE of the error."""
    result = subprocess.run(
        [
            PSQL,
            "-X",
            "-q",
            "-A",
            "-t",
            "-v",
            "ON_ERROR_STOP=1",
            "-v",
            "VERBOSITY=verbose",
            "-d",
            dsn,
        ],
        input="\\set VERBOSITY verbose\n" + script,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0, result.stdout
    first = result.stderr.strip().splitlines()[0]
    # "ERROR:  DG001: thread has a live claim"
    return first.split(":")[1].strip()


def _migrate_in_process(dsn: str, schema: str) -> int:
    return migrations.migrate(dsn, schema)


# --- the API through psql alone ------------------------------------------------------------


def test_full_cycle_through_psql_alone(pg_dsn: str, pg_schema: str) -> None:
    migrations.migrate(pg_dsn, pg_schema)
    s = pg_schema
    out = psql(
        pg_dsn,
        f"""
        SELECT entry_id, existing FROM {s}.dg_submit_v1('t-1', '{{"q":"hi"}}', NULL, 'k-1',
                                                          'enqueue', 3);
        SELECT entry_id, token, holder, attempt_kind, attempt_number
          FROM {s}.dg_lease_v1('worker-1', interval '30 seconds', true, NULL, NULL);
        SELECT attempt_kind, attempt_number FROM {s}.dg_record_attempt_v1(1, 1, 'run-1');
        SELECT token, holder FROM {s}.dg_claim_v1('t-1', 'run-1', interval '30 seconds');
        SELECT checkpoint_id, seq, writes
          FROM {s}.dg_commit_v1('t-1', 2, 'c-1', NULL, 'run-1', '{{"answer":42}}', NULL,
                                ARRAY[]::text[], ARRAY['said'], ARRAY['"hello"'],
                                ARRAY[NULL]::timestamptz[], NULL, NULL, NULL, NULL);
        SELECT admitted, outcome_kind, outcome_detail, closed_at_seq
          FROM {s}.dg_close_v1(1, 1, 'completed', '{{"ok":true}}');
        SELECT seq, kind, payload, run_id FROM {s}.dg_events_after_v1('t-1', 0, 100);
        """,
    )
    assert out.splitlines() == [
        "1|f",
        "1|1|worker-1||",
        "started|1",
        "2|run-1",
        "c-1|2|[]",
        't|completed|{"ok":true}|2',
        '1|said|"hello"|run-1',
        '2|store.checkpoint|{"checkpoint_id":"c-1","run_id":"run-1"}|run-1',
    ]


def test_errors_carry_their_sqlstate_through_psql(pg_dsn: str, pg_schema: str) -> None:
    migrations.migrate(pg_dsn, pg_schema)
    s = pg_schema
    psql(pg_dsn, f"SELECT * FROM {s}.dg_claim_v1('t', 'a', interval '1 minute');")
    assert (
        psql_error(pg_dsn, f"SELECT * FROM {s}.dg_claim_v1('t', 'b', interval '1 minute');")
        == "DG001"
    )
    assert psql_error(pg_dsn, f"SELECT * FROM {s}.dg_renew_claim_v1('t', 999);") == "DG002"
    assert (
        psql_error(pg_dsn, f"SELECT * FROM {s}.dg_record_effect_v1('t', 1, 'k', '1', NULL);")
        == "DG404"
    )
    assert psql_error(pg_dsn, f"SELECT * FROM {s}.dg_cancel_v1(12345, NULL);") == "DG404"
    assert psql_error(pg_dsn, f"SELECT * FROM {s}.dg_release_v1(12345, 1);") == "DG103"
    assert (
        psql_error(pg_dsn, f"SELECT * FROM {s}.dg_submit_v1('t', '1', NULL, NULL, 'x', 1);")
        == "DG000"
    )


def test_lease_skips_a_thread_another_lease_is_taking(pg_dsn: str, pg_schema: str) -> None:
    # Workers never queue behind one another: a lease in flight on t-a (its transaction still
    # open) makes a second lease take t-b at once. (A commit or a submit in flight on a thread is
    # waited for instead: D224, test_pg_races.)
    migrations.migrate(pg_dsn, pg_schema)
    s = sql.Identifier(pg_schema)
    lease = sql.SQL(
        "SELECT thread_id FROM {}.dg_lease_v1('w', interval '1 minute', true, NULL, NULL)"
    ).format(s)
    with psycopg.connect(pg_dsn, autocommit=True) as a, psycopg.connect(pg_dsn) as b:
        for thread in ("t-a", "t-b"):
            a.execute(
                sql.SQL("SELECT * FROM {}.dg_submit_v1(%s, '1', NULL, NULL, 'enqueue', 3)").format(
                    s
                ),
                (thread,),
            )
        assert b.execute(lease).fetchone() == ("t-a",)  # not committed yet
        a.execute("SET lock_timeout = '1s'")
        assert a.execute(lease).fetchone() == ("t-b",)
        b.rollback()


def test_two_workers_never_hold_one_thread(pg_dsn: str, pg_schema: str) -> None:
    migrations.migrate(pg_dsn, pg_schema)
    s = sql.Identifier(pg_schema)
    lease = sql.SQL(
        "SELECT entry_id FROM {}.dg_lease_v1(%s, interval '1 minute', true, NULL, NULL)"
    ).format(s)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for _ in range(2):
            conn.execute(
                sql.SQL("SELECT * FROM {}.dg_submit_v1('t', '1', NULL, NULL, 'enqueue', 3)").format(
                    s
                )
            )
        assert conn.execute(lease, ("w1",)).fetchone() == (1,)
        assert conn.execute(lease, ("w2",)).fetchone() is None


# --- migrations ----------------------------------------------------------------------------


_CATALOG: dict[str, str] = {
    "tables": """
        SELECT c.relname, c.relkind::text FROM pg_class c
         WHERE c.relnamespace = %(ns)s::regnamespace AND c.relkind IN ('r', 'S', 'v', 'p')
           AND c.relname NOT LIKE '%%yoyo%%'
         ORDER BY 1""",
    "columns": """
        SELECT table_name, column_name, data_type, collation_name, is_nullable,
               column_default, is_generated, generation_expression, is_identity
          FROM information_schema.columns
         WHERE table_schema = %(ns)s AND table_name NOT LIKE '%%yoyo%%'
         ORDER BY table_name, ordinal_position""",
    "functions": """
        SELECT p.proname, pg_get_function_identity_arguments(p.oid),
               pg_get_function_result(p.oid), p.provolatile::text, p.proconfig::text,
               p.prosrc
          FROM pg_proc p WHERE p.pronamespace = %(ns)s::regnamespace ORDER BY 1, 2""",
    **CATALOG_QUERIES,
}


def test_install_script_builds_the_same_catalog_as_migrate(
    pg_dsn: str, pg_schema: str, second_schema: str
) -> None:
    migrations.migrate(pg_dsn, pg_schema)
    psql(pg_dsn, migrations.install_script(second_schema))
    migrated = catalog(_CATALOG, pg_dsn, pg_schema)
    scripted = catalog(_CATALOG, pg_dsn, second_schema)
    assert migrated["functions"], "no functions were installed"
    for part in _CATALOG:
        assert scripted[part] == migrated[part], part


def test_migrate_sees_a_script_installed_schema_as_current(pg_dsn: str, pg_schema: str) -> None:
    psql(pg_dsn, migrations.install_script(pg_schema))
    with psycopg.connect(pg_dsn) as conn:
        migrations.verify(conn, pg_schema)
    before = catalog(_CATALOG, pg_dsn, pg_schema)
    assert migrations.migrate(pg_dsn, pg_schema) == migrations.required_version()
    assert catalog(_CATALOG, pg_dsn, pg_schema) == before


def test_migrate_twice_changes_nothing(pg_dsn: str, pg_schema: str) -> None:
    assert migrations.migrate(pg_dsn, pg_schema) == migrations.required_version()
    before = catalog(_CATALOG, pg_dsn, pg_schema)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        xmin = conn.execute(
            "SELECT xmin::text FROM pg_proc WHERE proname = 'dg_claim_v1' "
            "AND pronamespace = %s::regnamespace",
            (pg_schema,),
        ).fetchone()
    assert migrations.migrate(pg_dsn, pg_schema) == migrations.required_version()
    assert catalog(_CATALOG, pg_dsn, pg_schema) == before
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        again = conn.execute(
            "SELECT xmin::text FROM pg_proc WHERE proname = 'dg_claim_v1' "
            "AND pronamespace = %s::regnamespace",
            (pg_schema,),
        ).fetchone()
    assert again == xmin, "the functions were reinstalled"


def test_racing_migrations_on_an_empty_schema_all_succeed(pg_dsn: str, pg_schema: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        versions = pool.starmap(_migrate_in_process, [(pg_dsn, pg_schema)] * 4)
    assert versions == [migrations.required_version()] * 4
    with psycopg.connect(pg_dsn) as conn:
        migrations.verify(conn, pg_schema)
        applied = conn.execute(
            sql.SQL("SELECT count(*) FROM {}._yoyo_migration").format(sql.Identifier(pg_schema))
        ).fetchone()
    assert applied == (migrations.required_version(),)


def test_verify_names_the_command_on_an_empty_schema(pg_dsn: str, pg_schema: str) -> None:
    with psycopg.connect(pg_dsn) as conn, pytest.raises(ProcessingError) as caught:
        migrations.verify(conn, pg_schema)
    needed = migrations.required_version()
    assert str(caught.value) == (
        f"schema {pg_schema} is at version 0, needs {needed}: "
        f"run durable-graph migrate --dsn ... --schema {pg_schema}"
    )


def test_verify_refuses_an_old_version(pg_dsn: str, pg_schema: str) -> None:
    migrations.migrate(pg_dsn, pg_schema)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "ALTER TABLE {0}.schema_bookkeeping DISABLE TRIGGER schema_meta_guard;"
                " UPDATE {0}.schema_bookkeeping SET value = '0' WHERE key = 'version'"
            ).format(sql.Identifier(pg_schema))
        )
        with pytest.raises(ProcessingError, match=rf"schema {pg_schema} is at version 0, needs"):
            migrations.verify(conn, pg_schema)


def test_verify_refuses_functions_of_another_build(pg_dsn: str, pg_schema: str) -> None:
    migrations.migrate(pg_dsn, pg_schema)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "ALTER TABLE {0}.schema_bookkeeping DISABLE TRIGGER schema_meta_guard;"
                " UPDATE {0}.schema_bookkeeping SET value = 'x' WHERE key = 'functions_digest'"
            ).format(sql.Identifier(pg_schema))
        )
        with pytest.raises(ProcessingError, match="durable-graph migrate"):
            migrations.verify(conn, pg_schema)
    # migrate repairs it.
    migrations.migrate(pg_dsn, pg_schema)
    with psycopg.connect(pg_dsn) as conn:
        migrations.verify(conn, pg_schema)
