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
    "indexes": """
        SELECT indexname, indexdef FROM pg_indexes
         WHERE schemaname = %(ns)s AND tablename NOT LIKE '%%yoyo%%' ORDER BY 1""",
    "constraints": """
        SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid)
          FROM pg_constraint WHERE connamespace = %(ns)s::regnamespace
           AND conrelid::regclass::text NOT LIKE '%%yoyo%%' ORDER BY 1, 2""",
    "relations": """
        SELECT relname, relkind::text, relacl::text FROM pg_class
         WHERE relnamespace = %(ns)s::regnamespace AND relname NOT LIKE '%%yoyo%%'
         ORDER BY 1""",
    "functions": """
        SELECT p.proname, pg_get_function_identity_arguments(p.oid),
               pg_get_function_result(p.oid), p.provolatile::text, p.prosecdef,
               p.proconfig::text, p.proacl::text, p.prosrc
          FROM pg_proc p WHERE p.pronamespace = %(ns)s::regnamespace ORDER BY 1, 2""",
    "sequences": """
        SELECT sequencename, data_type::text, start_value, increment_by, cycle
          FROM pg_sequences WHERE schemaname = %(ns)s ORDER BY 1""",
    "schema": "SELECT nspacl::text FROM pg_namespace WHERE nspname = %(ns)s",
    "meta": "SELECT key, value FROM {schema}.schema_meta ORDER BY key",
}


def catalog(dsn: str, schema: str) -> dict[str, list[tuple[Any, ...]]]:
    """The schema as the catalog describes it, with its own name replaced by ``<schema>``."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name, query in _CATALOG.items():
            text = query.replace("{schema}", '"' + schema + '"')
            rows = conn.execute(text.encode(), {"ns": schema}).fetchall()
            out[name] = [
                tuple(str(v).replace(schema, "<schema>") if isinstance(v, str) else v for v in r)
                for r in rows
            ]
    return out


@pytest.fixture
def second_schema(pg_dsn: str, pg_schema: str) -> Any:
    other = pg_schema + "_b"
    yield other
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(other)))


def test_install_sql_with_psql_builds_what_migrate_builds(
    pg_dsn: str, pg_schema: str, second_schema: str
) -> None:
    install(pg_dsn, pg_schema)
    migrations.migrate(pg_dsn, second_schema)
    scripted, migrated = catalog(pg_dsn, pg_schema), catalog(pg_dsn, second_schema)
    assert scripted["functions"] and scripted["meta"]
    for part in _CATALOG:
        assert scripted[part] == migrated[part], part
    with psycopg.connect(pg_dsn) as conn:
        migrations.verify(conn, pg_schema)


def test_install_sql_applied_twice_changes_nothing(pg_dsn: str, pg_schema: str) -> None:
    install(pg_dsn, pg_schema)
    before = catalog(pg_dsn, pg_schema)
    install(pg_dsn, pg_schema)
    assert catalog(pg_dsn, pg_schema) == before
    # and migrate sees the script-installed schema as current
    assert migrations.migrate(pg_dsn, pg_schema) == migrations.required_version()
    assert catalog(pg_dsn, pg_schema) == before


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
    scripted, migrated = catalog(pg_dsn, pg_schema), catalog(pg_dsn, second_schema)
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
    assert catalog(pg_dsn, pg_schema) == catalog(pg_dsn, second_schema)


def test_install_sql_includes_every_migration_and_function_file_in_order() -> None:
    text = INSTALL.read_text(encoding="utf-8")
    included = re.findall(r"^\\ir (\S+)$", text, re.MULTILINE)
    expected = [f"../migrations/{f.name}" for f in migrations.migration_files()]
    expected += [f.name for f in migrations.function_files()]
    assert included == expected
    for number in range(1, migrations.required_version() + 1):
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
                assert meta == [("functions_digest",), ("version",)]
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    runtime.execute(sql.SQL("SELECT * FROM {}.threads").format(schema))
        finally:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(schema))
            conn.execute(sql.SQL("DROP OWNED BY {}").format(ident))
            conn.execute(sql.SQL("DROP ROLE {}").format(ident))


# The functions the previous version installed and this one removed (SPEC §22, D153), by their
# identity arguments: what a store installed before still holds until its upgrade.
_REMOVED = [
    "dg_entry_v2(bigint, text)",
    "dg_finish_attempt_v1(bigint, bigint, text, text, bigint, text)",
    "dg_put_writes_v1(text, bigint, text, text[], text[], text[])",
    "dg_put_writes_fenced_v1(text, bigint, text, text[], text[], text[], text, bigint)",
    "dg_put_writes_and_commit_v1(text, bigint, text, text[], text[], text[], text, text, text,"
    " text, text, text[], text[], text[], timestamptz[], timestamptz, text, text, bigint)",
    "dg_set_trace_context_v1(bigint, text, text)",
    "dg_trace_context_v1(bigint)",
]


@pytest.mark.parametrize("upgrade", ["migrate", "install.sql"])
def test_an_upgrade_drops_the_functions_this_version_removed(
    pg_dsn: str, pg_schema: str, upgrade: str
) -> None:
    migrations.migrate(pg_dsn, pg_schema)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(pg_schema)))
        for signature in _REMOVED:  # as the owner, as the previous version installed them
            conn.execute(
                f"CREATE FUNCTION {signature} RETURNS integer LANGUAGE sql SECURITY DEFINER"
                f" SET search_path = {pg_schema}, pg_temp AS 'SELECT 1'"
            )
            conn.execute(f"REVOKE ALL ON FUNCTION {signature} FROM PUBLIC")
        with pytest.raises(ProcessingError, match="dg_entry_v2 is not ours"):
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
            (pg_schema, [s.split("(")[0] for s in _REMOVED]),
        ).fetchall()
    assert left == []
