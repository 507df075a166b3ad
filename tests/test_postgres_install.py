"""Installing and upgrading a PostgreSQL store with psql alone (SPEC §10.5, §10.7).

``sql/install.sql`` is applied with the real ``psql`` (``-v schema=S -f sql/install.sql``), as a
DBA without Python would; its result is compared with `migrate`'s, catalog against catalog
(tables, columns, indexes, constraints, sequences, function bodies and attributes, privileges,
bookkeeping). Version 1 is the last released schema: ``tests/data/pg_install_v1.sql`` is its
install script, as ``durable-graph sql`` printed it then.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from durable_graph.core.errors import ProcessingError
from durable_graph.postgres import migrations
from store_support import CATALOG_QUERIES, catalog

PSQL = "/usr/bin/psql"
ROOT = Path(__file__).resolve().parent.parent
INSTALL = ROOT / "sql" / "install.sql"
V1_SCRIPT = Path(__file__).resolve().parent / "data" / "pg_install_v1.sql"
V1_SCHEMA = "dg_v1_schema"


def psql(dsn: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run psql (stop on the first error) with ``args``; the completed process."""
    return subprocess.run(
        [PSQL, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", dsn, *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        cwd="/",  # install.sql includes its files relative to itself, not to the cwd
    )


def install(dsn: str, schema: str) -> None:
    done = psql(dsn, "-v", f"schema={schema}", "-f", str(INSTALL))
    assert done.returncode == 0, done.stderr


def install_v1(dsn: str, schema: str) -> None:
    script = V1_SCRIPT.read_text(encoding="utf-8").replace(V1_SCHEMA, schema)
    done = psql(dsn, stdin=script)
    assert done.returncode == 0, done.stderr


_CATALOG = {
    "columns": """
        SELECT table_name, column_name, data_type, is_nullable, column_default,
               collation_name, is_generated, generation_expression
          FROM information_schema.columns
         WHERE table_schema = %(ns)s AND table_name NOT LIKE '%%yoyo%%'
         ORDER BY table_name, ordinal_position""",
    "relations": """
        SELECT relname, relkind::text, relacl::text FROM pg_class
         WHERE relnamespace = %(ns)s::regnamespace AND relname NOT LIKE '%%yoyo%%'
         ORDER BY 1""",
    "functions": """
        SELECT p.proname, pg_get_function_identity_arguments(p.oid),
               pg_get_function_result(p.oid), p.provolatile::text, p.prosecdef,
               p.proconfig::text, p.proacl::text, p.prosrc
          FROM pg_proc p WHERE p.pronamespace = %(ns)s::regnamespace ORDER BY 1, 2""",
    "schema": "SELECT nspacl::text FROM pg_namespace WHERE nspname = %(ns)s",
    **CATALOG_QUERIES,
}


def test_install_sql_with_psql_builds_what_migrate_builds(
    pg_dsn: str, pg_schema: str, second_schema: str
) -> None:
    install(pg_dsn, pg_schema)
    migrations.migrate(pg_dsn, second_schema)
    scripted, migrated = (
        catalog(_CATALOG, pg_dsn, pg_schema),
        catalog(_CATALOG, pg_dsn, second_schema),
    )
    assert scripted["functions"] and scripted["meta"]
    for part in _CATALOG:
        assert scripted[part] == migrated[part], part
    with psycopg.connect(pg_dsn) as conn:
        migrations.verify(conn, pg_schema)


def test_install_sql_applied_twice_changes_nothing(pg_dsn: str, pg_schema: str) -> None:
    install(pg_dsn, pg_schema)
    before = catalog(_CATALOG, pg_dsn, pg_schema)
    install(pg_dsn, pg_schema)
    assert catalog(_CATALOG, pg_dsn, pg_schema) == before
    # and migrate sees the script-installed schema as current
    assert migrations.migrate(pg_dsn, pg_schema) == migrations.required_version()
    assert catalog(_CATALOG, pg_dsn, pg_schema) == before


def test_install_sql_upgrades_version_1_exactly_as_migrate(
    pg_dsn: str, pg_schema: str, second_schema: str
) -> None:
    install_v1(pg_dsn, pg_schema)
    install_v1(pg_dsn, second_schema)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for schema in (pg_schema, second_schema):  # data survives the upgrade
            conn.execute(
                sql.SQL("SELECT * FROM {}.dg_claim_v1('t', 'h', interval '1 minute')").format(
                    sql.Identifier(schema)
                )
            )
    install(pg_dsn, pg_schema)
    migrations.migrate(pg_dsn, second_schema)
    scripted, migrated = (
        catalog(_CATALOG, pg_dsn, pg_schema),
        catalog(_CATALOG, pg_dsn, second_schema),
    )
    for part in _CATALOG:
        assert scripted[part] == migrated[part], part
    with psycopg.connect(pg_dsn) as conn:
        migrations.verify(conn, pg_schema)
        migrations.verify(conn, second_schema)
        claimed = conn.execute(
            sql.SQL("SELECT claim_holder FROM {}.threads").format(sql.Identifier(pg_schema))
        ).fetchall()
    assert claimed == [("h",)]


def test_the_printed_install_script_is_install_sql_with_its_files_inlined(
    pg_dsn: str, pg_schema: str, second_schema: str
) -> None:
    script = migrations.install_script(pg_schema)
    assert "\\ir " not in script
    assert f"\\set schema {pg_schema}\n" in script
    for _ in range(2):  # version 1's printed script failed the second time
        done = psql(pg_dsn, stdin=script)
        assert done.returncode == 0, done.stderr
    install(pg_dsn, second_schema)
    assert catalog(_CATALOG, pg_dsn, pg_schema) == catalog(_CATALOG, pg_dsn, second_schema)


def test_install_sql_includes_every_migration_and_function_file_in_order() -> None:
    text = INSTALL.read_text(encoding="utf-8")
    included = re.findall(r"^\\ir (\S+)$", text, re.MULTILINE)
    expected = [f"../migrations/{f.name}" for f in migrations.migration_files()]
    expected += [f.name for f in migrations.function_files()]
    assert included == expected
    for migration in migrations.migration_files():
        # Each by its own number (a branch may hold 0021 before 0020 lands).
        number = int(migration.name[:4])
        assert f"SELECT :dg_version >= {number} AS dg_has_{number:04d} \\gset" in text
    assert f"\\set dg_required_version {migrations.required_version()}\n" in text


def test_install_sql_refuses_a_schema_owned_by_another_role(pg_dsn: str, pg_schema: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS dg_install_mallory")
        conn.execute("CREATE ROLE dg_install_mallory")
        try:
            conn.execute(
                sql.SQL("CREATE SCHEMA {} AUTHORIZATION dg_install_mallory").format(
                    sql.Identifier(pg_schema)
                )
            )
            done = psql(pg_dsn, "-v", f"schema={pg_schema}", "-f", str(INSTALL))
            assert done.returncode != 0
            assert "is owned by role dg_install_mallory" in done.stderr
            objects = conn.execute(
                "SELECT count(*) FROM pg_class WHERE relnamespace = %s::regnamespace",
                (pg_schema,),
            ).fetchone()
            assert objects == (0,)
        finally:
            conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(pg_schema))
            )
            conn.execute("DROP ROLE dg_install_mallory")


@pytest.mark.parametrize("args", [[], ["-v", "schema=Bad-Name"], ["-v", "schema=pg_x"]])
def test_install_sql_refuses_a_missing_or_bad_schema_name(pg_dsn: str, args: list[str]) -> None:
    done = psql(pg_dsn, *args, "-f", str(INSTALL))
    assert done.returncode != 0
    assert "must match ^[a-z_][a-z0-9_]{0,62}$" in done.stderr


def test_expected_function_bodies_are_what_the_server_stores(pg_dsn: str, pg_schema: str) -> None:
    migrations.migrate(pg_dsn, pg_schema)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT proname, prosrc FROM pg_proc WHERE pronamespace = %s::regnamespace",
            (pg_schema,),
        ).fetchall()
    assert sorted((str(n), str(b)) for n, b in rows) == migrations.expected_functions()


def test_an_upgrade_keeps_a_runtime_roles_grant_and_extends_it_to_new_functions(
    pg_dsn: str, pg_schema: str
) -> None:
    role = "dg_install_rt_" + pg_schema[-8:]
    ident, schema = sql.Identifier(role), sql.Identifier(pg_schema)
    install_v1(pg_dsn, pg_schema)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(ident))
        try:
            # Version 1's runtime roles needed USAGE (EXECUTE was PUBLIC's) and table rights.
            conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(schema, ident))
            conn.execute(
                sql.SQL("GRANT ALL ON ALL TABLES IN SCHEMA {} TO {}").format(schema, ident)
            )
            install(pg_dsn, pg_schema)
            params = psycopg.conninfo.conninfo_to_dict(pg_dsn)
            params["user"] = role
            dsn = psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in params.items()})
            with psycopg.connect(dsn, autocommit=True) as runtime:
                meta = runtime.execute(
                    sql.SQL("SELECT key FROM {}.dg_schema_meta_v1()").format(schema)
                ).fetchall()  # a function version 1 did not have
                assert meta == [("functions_digest",), ("release",), ("version",)]
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    runtime.execute(sql.SQL("SELECT * FROM {}.threads").format(schema))
        finally:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(schema))
            conn.execute(sql.SQL("DROP OWNED BY {}").format(ident))
            conn.execute(sql.SQL("DROP ROLE {}").format(ident))


# Functions a pre-release state held that 0.2.0 does not define (SPEC §23, D228): what a store
# installed before 0.2.0 still holds until its upgrade, by their identity arguments.
_STALE = ["dg_gone_v1(bigint, text)", "_dg_gone(text)"]


def _as_before_the_release(conn: psycopg.Connection[Any], schema: str) -> None:
    """Make a current schema read as the last pre-release state (version 18, no release row),
    holding `_STALE` functions as the owner installed them."""
    conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
    conn.execute("ALTER TABLE schema_bookkeeping DISABLE TRIGGER schema_meta_guard")
    conn.execute("UPDATE schema_bookkeeping SET value = '18' WHERE key = 'version'")
    conn.execute("DELETE FROM schema_bookkeeping WHERE key = 'release'")
    conn.execute("ALTER TABLE schema_bookkeeping ENABLE TRIGGER schema_meta_guard")
    if conn.execute("SELECT to_regclass('_yoyo_migration')").fetchone() != (None,):
        # 0019 and every later migration: the pre-release state had none of them.
        conn.execute("DELETE FROM _yoyo_migration WHERE migration_id >= '0019'")
    for signature in _STALE:
        conn.execute(
            f"CREATE FUNCTION {signature} RETURNS integer LANGUAGE sql SECURITY DEFINER"
            f" SET search_path = {schema}, pg_temp AS 'SELECT 1'"
        )
        conn.execute(f"REVOKE ALL ON FUNCTION {signature} FROM PUBLIC")


@pytest.mark.parametrize("upgrade", ["migrate", "install.sql"])
def test_the_release_upgrade_drops_the_functions_earlier_states_left(
    pg_dsn: str, pg_schema: str, upgrade: str
) -> None:
    migrations.migrate(pg_dsn, pg_schema)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        _as_before_the_release(conn, pg_schema)
        with pytest.raises(
            ProcessingError, match=f"at version 18, needs {migrations.required_version()}"
        ):
            migrations.verify(conn, pg_schema)
    if upgrade == "migrate":
        assert migrations.migrate(pg_dsn, pg_schema) == migrations.required_version()
    else:
        install(pg_dsn, pg_schema)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        migrations.verify(conn, pg_schema)
        left = conn.execute(
            "SELECT proname FROM pg_proc WHERE pronamespace = %s::regnamespace"
            " AND proname = ANY (%s)",
            (pg_schema, [s.split("(")[0] for s in _STALE]),
        ).fetchall()
    assert left == []


# --- SPEC §23: row versions, never backwards, the plan ------------------------------------------

_ROW_VERSIONS = """
SELECT x FROM (
    SELECT 'proc ' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ') '
           || p.xmin AS x FROM pg_proc p WHERE p.pronamespace = %(s)s::text::regnamespace
    UNION ALL SELECT 'class ' || c.relname || ' ' || c.xmin FROM pg_class c
     WHERE c.relnamespace = %(s)s::text::regnamespace
    UNION ALL SELECT 'attribute ' || c.relname || '.' || a.attname || ' ' || a.xmin
      FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
     WHERE c.relnamespace = %(s)s::text::regnamespace
    UNION ALL SELECT 'trigger ' || g.tgname || ' ' || g.xmin FROM pg_trigger g
      JOIN pg_class c ON c.oid = g.tgrelid WHERE c.relnamespace = %(s)s::text::regnamespace
    UNION ALL SELECT 'index ' || i.indexrelid::regclass || ' ' || i.xmin FROM pg_index i
      JOIN pg_class c ON c.oid = i.indrelid WHERE c.relnamespace = %(s)s::text::regnamespace
    UNION ALL SELECT 'namespace ' || n.nspname || ' ' || n.xmin FROM pg_namespace n
     WHERE n.nspname = %(s)s::text
) rows ORDER BY x
"""


def row_versions(dsn: str, schema: str) -> list[str]:
    """Every catalog row of ``schema`` with its row version (xmin): equal lists mean nothing
    was rewritten, not only that the definitions read the same."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return [str(r[0]) for r in conn.execute(_ROW_VERSIONS, {"s": schema}).fetchall()]


@pytest.mark.parametrize("second", ["migrate", "install.sql"])
def test_a_second_install_rewrites_no_catalog_row(pg_dsn: str, pg_schema: str, second: str) -> None:
    install(pg_dsn, pg_schema)
    migrations.migrate(pg_dsn, pg_schema)  # yoyo's bookkeeping of a script-installed schema
    before = row_versions(pg_dsn, pg_schema)
    if second == "migrate":
        migrations.migrate(pg_dsn, pg_schema)
    else:
        install(pg_dsn, pg_schema)
    assert row_versions(pg_dsn, pg_schema) == before


LATER = migrations.required_version() + 1
"""The schema version of a later release."""


def _as_a_later_release(dsn: str, schema: str) -> None:
    """Make a current schema read as one a later release installed (a version past this
    code's, 0.3.0)."""
    with psycopg.connect(dsn) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        conn.execute("SET LOCAL durable_graph.release = '0.3.0'")
        conn.execute(
            "UPDATE schema_bookkeeping SET value = %s WHERE key = 'version'",
            (str(migrations.required_version() + 1),),
        )
        conn.execute("UPDATE schema_bookkeeping SET value = '0.3.0' WHERE key = 'release'")


def test_code_older_than_the_schema_refuses_to_migrate_plan_or_open_it(
    pg_dsn: str, pg_schema: str
) -> None:
    from durable_graph.postgres import PostgresCheckpointer, PostgresConfig

    migrations.migrate(pg_dsn, pg_schema)
    _as_a_later_release(pg_dsn, pg_schema)
    before = row_versions(pg_dsn, pg_schema)
    ours = migrations.required_version()
    both = (
        rf"schema {pg_schema} is at version {ours + 1} \(durable-graph 0\.3\.0\), newer than "
        rf"this durable-graph 0\.2\.0 \(schema version {ours}\)"
    )
    with pytest.raises(ProcessingError, match=both):
        migrations.migrate(pg_dsn, pg_schema)
    with pytest.raises(ProcessingError, match=both):
        migrations.plan(pg_dsn, pg_schema)
    for auto_migrate in (True, False):
        with pytest.raises(ProcessingError, match=both):
            PostgresCheckpointer.open(
                pg_dsn, PostgresConfig(schema=pg_schema, auto_migrate=auto_migrate)
            )
    with psycopg.connect(pg_dsn) as conn, pytest.raises(ProcessingError, match=both):
        migrations.verify(conn, pg_schema)
    done = psql(pg_dsn, "-v", f"schema={pg_schema}", "-f", str(INSTALL))
    assert done.returncode != 0
    assert (
        f"schema {pg_schema} is at version {ours + 1} (durable-graph 0.3.0), newer than this "
        f"install script of durable-graph 0.2.0 (schema version {ours})" in done.stderr
    )
    assert row_versions(pg_dsn, pg_schema) == before


def test_the_guard_refuses_bookkeeping_written_by_code_released_before_it(
    pg_dsn: str, pg_schema: str
) -> None:
    # What the last pre-release code's migrate and install.sql write when they meet a newer
    # schema (they set no installing release): refused, so their function bodies roll back too.
    migrations.migrate(pg_dsn, pg_schema)
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(pg_schema)))
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState) as caught:
            conn.execute(
                "INSERT INTO schema_bookkeeping (key, value) VALUES ('version', '18')"
                " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
            )
    message = str(caught.value)
    version = migrations.required_version()
    assert f"schema {pg_schema} is at version {version} (durable-graph 0.2.0)" in message
    assert "set version to 18" in message and "code released before 0.2.0" in message
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(pg_schema)))
        conn.execute("SET LOCAL durable_graph.release = '0.1.9'")
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match=r"0\.1\.9"):
            conn.execute("UPDATE schema_bookkeeping SET value = 'x' WHERE key = 'functions_digest'")
    with psycopg.connect(pg_dsn) as conn:
        migrations.verify(conn, pg_schema)  # unchanged


def test_migrate_plan_says_what_it_would_apply_and_changes_nothing(
    pg_dsn: str, pg_schema: str
) -> None:
    missing = migrations.plan(pg_dsn, pg_schema)
    assert not missing.exists and not missing.current
    assert missing.migrations == [f.name for f in migrations.migration_files()]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        found = conn.execute("SELECT to_regnamespace(%s)", (pg_schema,)).fetchone()
    assert found == (None,)  # the plan created nothing
    migrations.migrate(pg_dsn, pg_schema)
    current = migrations.plan(pg_dsn, pg_schema)
    assert current.current and current.lines() == [
        f"schema {pg_schema} is current at version {migrations.required_version()} "
        f"(durable-graph {migrations.release()}): nothing to apply"
    ]


def test_a_failing_upgrade_changes_nothing_and_says_what_to_do(pg_dsn: str, pg_schema: str) -> None:
    # A schema of the last pre-release state whose upgrade fails half-way (a view of the DBA's
    # depends on a function the release's migration drops): everything is rolled back.
    migrations.migrate(pg_dsn, pg_schema)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        _as_before_the_release(conn, pg_schema)
        conn.execute("CREATE VIEW blocker AS SELECT * FROM dg_schema_meta_v1()")
    before = row_versions(pg_dsn, pg_schema)
    with pytest.raises(ProcessingError, match=r"Nothing was changed.*run durable-graph migrate"):
        migrations.migrate(pg_dsn, pg_schema)
    assert row_versions(pg_dsn, pg_schema) == before
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP VIEW {}.blocker").format(sql.Identifier(pg_schema)))
    assert migrations.migrate(pg_dsn, pg_schema) == migrations.required_version()  # a rerun
    with psycopg.connect(pg_dsn) as conn:
        migrations.verify(conn, pg_schema)
