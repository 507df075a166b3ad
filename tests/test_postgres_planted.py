"""Objects planted before install (issue #24, finding 1; SPEC §10.5).

A role that was given CREATE on a store's schema before its install (or PUBLIC, on a PostgreSQL
≤ 14 ``public`` schema) can plant a ``queue_trace_context`` table with a trigger, or an overload
``<schema>.pg_column_size(text)`` that an unqualified call would prefer to the builtin: the first
legitimate ``dg_submit_v1`` would then run the planted code as the owner. Both installers —
``sql/install.sql`` with the real psql, and ``durable-graph migrate`` — refuse such a schema before
creating anything: a schema holding objects owned by another role, or on which another role (or
PUBLIC) holds CREATE. Each case runs with a superuser owner (the test server's own role) and
with a dedicated non-superuser owner (the setup ``sql/README.md`` recommends); the attacker is a
real second role of the throwaway server.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from durable_graph import ProcessingError, Submission
from durable_graph.cli import main
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig, privileges
from durable_graph.postgres.migrations import foreign_objects, migrate, required_version
from test_postgres_install import INSTALL, psql
from test_postgres_runtime_role import Roles, as_role

PLANTS = {
    "trace_table": """
        CREATE TABLE {s}.queue_trace_context (entry_id bigint PRIMARY KEY, traceparent text,
                                              tracestate text);
        CREATE FUNCTION {s}.steal() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE NOTICE 'planted trigger ran as %', current_user; RETURN NEW; END $$;
        CREATE TRIGGER steal BEFORE INSERT ON {s}.queue_trace_context
            FOR EACH ROW EXECUTE FUNCTION {s}.steal();
    """,
    "pg_column_size": """
        CREATE FUNCTION {s}.pg_column_size(text) RETURNS integer LANGUAGE plpgsql AS $$
        BEGIN RAISE NOTICE 'planted function ran as %', current_user; RETURN 0; END $$;
    """,
}


@pytest.fixture
def roles(pg_dsn: str) -> Iterator[Roles]:
    made = Roles(pg_dsn)
    yield made
    made.drop()


@pytest.fixture(params=["superuser_owner", "dedicated_owner"])
def owner_dsn(request: pytest.FixtureRequest, pg_dsn: str, pg_schema: str, roles: Roles) -> str:
    """The DSN of the schema's owner (the schema exists, empty): the test server's superuser,
    or a LOGIN role of its own (not a superuser) for which a DBA created the schema."""
    if request.param == "superuser_owner":
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(pg_schema)))
        return pg_dsn
    owner = roles.create("dg_planted_owner")
    roles.owned_schema(owner, pg_schema)
    return as_role(pg_dsn, owner)


def _plant(pg_dsn: str, owner_dsn: str, schema: str, mallory: str, plant: str) -> None:
    """The owner gives ``mallory`` CREATE on the schema (as the issue's attacker had), and
    ``mallory`` plants ``plant`` there."""
    s, m = sql.Identifier(schema), sql.Identifier(mallory)
    with psycopg.connect(owner_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("GRANT USAGE, CREATE ON SCHEMA {} TO {}").format(s, m))
    with psycopg.connect(as_role(pg_dsn, mallory), autocommit=True) as conn:
        conn.execute(sql.SQL(PLANTS[plant]).format(s=s))


def _store_objects(pg_dsn: str, schema: str, mallory: str) -> list[str]:
    """What in ``schema`` is not ``mallory``'s: what an install created."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT c.relname FROM pg_catalog.pg_class c"
            " WHERE c.relnamespace = %s::regnamespace AND c.relowner <> %s::regrole"
            " UNION ALL SELECT p.proname FROM pg_catalog.pg_proc p"
            " WHERE p.pronamespace = %s::regnamespace AND p.proowner <> %s::regrole",
            (schema, mallory, schema, mallory),
        ).fetchall()
    return sorted(str(r[0]) for r in rows)


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_install_sql_refuses_a_schema_where_another_role_planted_objects(
    pg_dsn: str, pg_schema: str, owner_dsn: str, roles: Roles, plant: str
) -> None:
    mallory = roles.create("dg_mallory")
    _plant(pg_dsn, owner_dsn, pg_schema, mallory, plant)
    done = psql(owner_dsn, "-v", f"schema={pg_schema}", "-f", str(INSTALL))
    assert done.returncode != 0, done.stdout
    assert f"schema {pg_schema} is not safe to install into" in done.stderr
    assert f"of role {mallory}" in done.stderr and f"CREATE on the schema held by role {mallory}"
    assert "planted" not in done.stderr  # no planted code ran
    assert _store_objects(pg_dsn, pg_schema, mallory) == []


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_durable_graph_migrate_refuses_a_schema_where_another_role_planted_objects(
    pg_dsn: str,
    pg_schema: str,
    owner_dsn: str,
    roles: Roles,
    plant: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    mallory = roles.create("dg_mallory")
    _plant(pg_dsn, owner_dsn, pg_schema, mallory, plant)
    assert main(["migrate", "--dsn", owner_dsn, "--schema", pg_schema]) != 0
    err = capsys.readouterr().err
    assert f"schema {pg_schema} is not safe to install into" in err
    assert f"CREATE on the schema held by role {mallory}" in err
    with pytest.raises(ProcessingError, match="not safe to install into"):
        migrate(owner_dsn, pg_schema)
    assert _store_objects(pg_dsn, pg_schema, mallory) == []


def test_planted_objects_are_refused_after_their_create_was_revoked(
    pg_dsn: str, pg_schema: str, owner_dsn: str, roles: Roles
) -> None:
    """Taking CREATE back is not enough: what was planted stays, and is named."""
    mallory = roles.create("dg_mallory")
    _plant(pg_dsn, owner_dsn, pg_schema, mallory, "pg_column_size")
    with psycopg.connect(owner_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("REVOKE CREATE ON SCHEMA {} FROM {}").format(
                sql.Identifier(pg_schema), sql.Identifier(mallory)
            )
        )
        assert foreign_objects(conn, pg_schema) == [
            f"function pg_column_size(text) of role {mallory}"
        ]
    done = psql(owner_dsn, "-v", f"schema={pg_schema}", "-f", str(INSTALL))
    assert done.returncode != 0
    assert f"function pg_column_size(text) of role {mallory}" in done.stderr
    with pytest.raises(ProcessingError, match=r"function pg_column_size\(text\) of role"):
        migrate(owner_dsn, pg_schema)
    assert _store_objects(pg_dsn, pg_schema, mallory) == []


@pytest.mark.parametrize("grantee", ["PUBLIC", "role"])
def test_create_held_by_another_role_or_public_is_refused_with_nothing_planted(
    pg_dsn: str, pg_schema: str, owner_dsn: str, roles: Roles, grantee: str
) -> None:
    """It could plant while the install runs: refused before the install starts."""
    who = sql.SQL("PUBLIC") if grantee == "PUBLIC" else sql.Identifier(roles.create("dg_mallory"))
    with psycopg.connect(owner_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("GRANT CREATE ON SCHEMA {} TO {}").format(sql.Identifier(pg_schema), who)
        )
    expected = "CREATE on the schema held by " + ("PUBLIC" if grantee == "PUBLIC" else "role ")
    done = psql(owner_dsn, "-v", f"schema={pg_schema}", "-f", str(INSTALL))
    assert done.returncode != 0 and expected in done.stderr
    with pytest.raises(ProcessingError, match=expected):
        migrate(owner_dsn, pg_schema)
    with psycopg.connect(owner_dsn, autocommit=True) as conn:  # once revoked, both install
        conn.execute(
            sql.SQL("REVOKE CREATE ON SCHEMA {} FROM {}").format(sql.Identifier(pg_schema), who)
        )
    done = psql(owner_dsn, "-v", f"schema={pg_schema}", "-f", str(INSTALL))
    assert done.returncode == 0, done.stderr
    assert migrate(owner_dsn, pg_schema) == required_version()


def test_migration_0005_fails_on_an_existing_queue_trace_context_table(
    pg_dsn: str, pg_schema: str, roles: Roles
) -> None:
    """Never ``CREATE TABLE IF NOT EXISTS`` a store table: even a table the owner itself owns
    (here handed to it by a superuser, so the ownership check passes) fails the install."""
    owner = roles.create("dg_planted_owner")
    roles.owned_schema(owner, pg_schema)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL(PLANTS["trace_table"]).format(s=sql.Identifier(pg_schema)))
        for name in ("TABLE {}.queue_trace_context", "FUNCTION {}.steal()"):
            conn.execute(
                sql.SQL(f"ALTER {name} OWNER TO {{}}").format(
                    sql.Identifier(pg_schema), sql.Identifier(owner)
                )
            )
    done = psql(as_role(pg_dsn, owner), "-v", f"schema={pg_schema}", "-f", str(INSTALL))
    assert done.returncode != 0
    assert 'relation "queue_trace_context" already exists' in done.stderr
    with pytest.raises(ProcessingError, match='relation "queue_trace_context" already exists'):
        migrate(as_role(pg_dsn, owner), pg_schema)


def test_a_dedicated_non_superuser_owner_installs_with_psql_and_serves_a_runtime_role(
    pg_dsn: str, pg_schema: str, roles: Roles
) -> None:
    """The owner sql/README.md recommends: a LOGIN role that is not a superuser, for which a DBA
    created the schema; psql installs as it, `migrate` then finds the schema current, and a
    runtime role granted by it submits and reads its entries."""
    owner, runtime = roles.create("dg_planted_owner"), roles.create("dg_planted_rt")
    roles.owned_schema(owner, pg_schema)
    owner_dsn = as_role(pg_dsn, owner)
    with psycopg.connect(owner_dsn, autocommit=True) as conn:
        row = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        assert row.fetchone() == (False,)
    done = psql(owner_dsn, "-v", f"schema={pg_schema}", "-f", str(INSTALL))
    assert done.returncode == 0, done.stderr
    assert migrate(owner_dsn, pg_schema) == required_version()
    with psycopg.connect(owner_dsn, autocommit=True) as conn:
        privileges.grant(conn, pg_schema, runtime)
        assert foreign_objects(conn, pg_schema) == []
    store = PostgresCheckpointer.open(as_role(pg_dsn, runtime), PostgresConfig(schema=pg_schema))
    try:
        ticket = store.run_queue.submit(Submission(thread_id="t", input={"x": 1}))
        assert store.run_queue.entry(ticket.entry_id) is not None
    finally:
        store.close()
