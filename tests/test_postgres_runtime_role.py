"""Least privilege on PostgreSQL (SPEC §10.5, §10.6): the store run by a role holding only what
`durable-graph grant` gives, and the schema + role per tenant as a hard boundary.

Each schema here is owned by a LOGIN role of its own (not the superuser), which migrates it; the
store is then opened as a runtime role granted with `privileges.grant`: both contract suites pass
that way, with the test clock (installed by the owner) read inside the SECURITY DEFINER
functions. Roles are created per test class or test and dropped afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from durable_graph import ProcessingError, ValidationError
from durable_graph.cli import main
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig, privileges
from durable_graph.postgres.migrations import migrate, verify
from durable_graph.testkit import Harness
from durable_graph.testkit.contract.checkpointer.suite import CheckpointerContract
from durable_graph.testkit.contract.run_queue.suite import RunQueueContract
from durable_graph.testkit.postgres.clock import PgClock
from durable_graph.testkit.postgres.schema import reset_store


def as_role(dsn: str, role: str) -> str:
    params = {k: str(v) for k, v in psycopg.conninfo.conninfo_to_dict(dsn).items()}
    params["user"] = role
    params.pop("password", None)
    return psycopg.conninfo.make_conninfo(**params)


class Roles:
    """LOGIN roles created for a test, dropped (with what they own) at the end."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.names: list[str] = []

    def create(self, prefix: str) -> str:
        name = f"{prefix}_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
        self.names.append(name)
        return name

    def owned_schema(self, owner: str, schema: str) -> None:
        """``schema`` created by a DBA for ``owner`` (the owner needs no CREATE on the database)."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(
                    sql.Identifier(schema), sql.Identifier(owner)
                )
            )

    def drop(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            for name in reversed(self.names):
                ident = sql.Identifier(name)
                conn.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(ident))
                conn.execute(sql.SQL("DROP ROLE {}").format(ident))


@pytest.fixture
def roles(pg_dsn: str) -> Iterator[Roles]:
    made = Roles(pg_dsn)
    yield made
    made.drop()


@pytest.fixture(scope="class")
def runtime_schema(pg_dsn: str) -> Iterator[tuple[str, str, PgClock]]:
    """(schema, runtime role, clock): migrated by its owner role, runtime role granted."""
    made = Roles(pg_dsn)
    try:
        owner = made.create("dg_owner")
        runtime = made.create("dg_rt")
        schema = f"r_{uuid.uuid4().hex[:16]}"
        made.owned_schema(owner, schema)
        migrate(as_role(pg_dsn, owner), schema)
        clock = PgClock(pg_dsn, schema)  # installed by the superuser, for the owner
        with psycopg.connect(as_role(pg_dsn, owner), autocommit=True) as conn:
            privileges.grant(conn, schema, runtime)
        yield schema, runtime, clock
    finally:
        made.drop()  # DROP OWNED BY drops the schema with its owner


class _Reused:
    """One store per test class, reopened only after a test closed it: the suites' tests then
    cost their calls, not a pool's connections each (the budget of this module in make test)."""

    def __init__(self, pg_dsn: str, schema: str, runtime: str) -> None:
        self.admin = psycopg.connect(pg_dsn, autocommit=True)
        self.dsn = as_role(pg_dsn, runtime)
        self.schema = schema
        self.store: PostgresCheckpointer | None = None

    def fresh(self) -> PostgresCheckpointer:
        reset_store(self.admin, self.schema)
        if self.store is None or self.store._x.closed:
            # auto_migrate=True: opening a current schema needs nothing beyond the grant.
            self.store = PostgresCheckpointer.open(self.dsn, PostgresConfig(schema=self.schema))
        return self.store

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
        self.admin.close()


@pytest.fixture(scope="class")
def reused(pg_dsn: str, runtime_schema: tuple[str, str, PgClock]) -> Iterator[_Reused]:
    schema, runtime, _ = runtime_schema
    made = _Reused(pg_dsn, schema, runtime)
    yield made
    made.close()


class TestRuntimeRoleCheckpointerContract(CheckpointerContract):
    @pytest.fixture
    def harness(self, reused: _Reused, runtime_schema: tuple[str, str, PgClock]) -> Harness:
        return Harness(reused.fresh(), runtime_schema[2])


class TestRuntimeRoleRunQueueContract(RunQueueContract):
    @pytest.fixture
    def harness(self, reused: _Reused, runtime_schema: tuple[str, str, PgClock]) -> Harness:
        return Harness(reused.fresh(), runtime_schema[2])


# --- what a role can reach ------------------------------------------------------------------


def _functions(conn: psycopg.Connection[Any], schema: str) -> list[tuple[str, str]]:
    """(name, call with typed NULL arguments) of every callable function in ``schema``.

    The planner folds a STRICT function of a NULL constant without calling it (nor checking
    EXECUTE): those are called through a NULL the planner cannot see (a volatile subquery)."""
    rows = conn.execute(
        "SELECT p.proname, coalesce(pg_catalog.string_agg('(SELECT NULL::' ||"
        " pg_catalog.format_type(t, NULL) || ' WHERE random() < 2)', ', ' ORDER BY o), '')"
        " FROM pg_catalog.pg_proc p"
        " LEFT JOIN LATERAL pg_catalog.unnest(p.proargtypes::oid[]) WITH ORDINALITY AS a(t, o)"
        " ON true WHERE p.pronamespace = %s::regnamespace"
        # trigger functions cannot be called at all: only their tables' writes fire them
        " AND p.prorettype <> 'pg_catalog.trigger'::pg_catalog.regtype"
        " GROUP BY p.oid, p.proname ORDER BY 1",
        (schema,),
    ).fetchall()
    return [(str(name), f'SELECT * FROM "{schema}"."{name}"({args})') for name, args in rows]


def _relations(conn: psycopg.Connection[Any], schema: str) -> list[tuple[str, str]]:
    rows = conn.execute(
        "SELECT c.relname, c.relkind FROM pg_catalog.pg_class c"
        " WHERE c.relnamespace = %s::regnamespace AND c.relkind IN ('r', 'S') ORDER BY 1",
        (schema,),
    ).fetchall()
    return [
        (
            str(name),
            f'SELECT pg_catalog.nextval(\'"{schema}"."{name}"\')'
            if kind == "S"
            else f'SELECT * FROM "{schema}"."{name}"',
        )
        for name, kind in rows
    ]


def _denied(conn: psycopg.Connection[Any], statement: str) -> bool:
    try:
        with conn.transaction():
            conn.execute(statement.encode())
    except psycopg.errors.InsufficientPrivilege:
        return True
    return False


@pytest.fixture
def two_tenants(pg_dsn: str, roles: Roles) -> Iterator[dict[str, tuple[str, str]]]:
    """Two schemas, each with its owner and its granted runtime role: name -> (schema, role)."""
    tenants: dict[str, tuple[str, str]] = {}
    for name in ("a", "b"):
        owner, runtime = roles.create(f"dg_own_{name}"), roles.create(f"dg_rt_{name}")
        schema = f"ten_{name}_{uuid.uuid4().hex[:12]}"
        roles.owned_schema(owner, schema)
        migrate(as_role(pg_dsn, owner), schema)
        with psycopg.connect(as_role(pg_dsn, owner), autocommit=True) as conn:
            privileges.grant(conn, schema, runtime)
        tenants[name] = (schema, runtime)
    yield tenants


def test_a_runtime_role_is_denied_every_function_and_table_of_another_tenants_schema(
    pg_dsn: str, two_tenants: dict[str, tuple[str, str]]
) -> None:
    for mine, theirs in (("a", "b"), ("b", "a")):
        own_schema, role = two_tenants[mine]
        other_schema, _ = two_tenants[theirs]
        with psycopg.connect(as_role(pg_dsn, role), autocommit=True) as conn:
            functions = _functions(conn, other_schema)
            relations = _relations(conn, other_schema)
            assert len(functions) > 30 and len(relations) > 5
            allowed = [n for n, s in functions + relations if not _denied(conn, s)]
            assert allowed == [], f"{role} reached {allowed} in {other_schema}"
            # Its own schema works, through the dg_* functions only.
            conn.execute(
                sql.SQL("SELECT * FROM {}.dg_claim_v1('t', 'h', interval '1 minute')").format(
                    sql.Identifier(own_schema)
                )
            )


def test_a_runtime_role_reaches_only_the_dg_functions_of_its_own_schema(
    pg_dsn: str, two_tenants: dict[str, tuple[str, str]]
) -> None:
    schema, role = two_tenants["a"]
    with psycopg.connect(as_role(pg_dsn, role), autocommit=True) as conn:
        private = [
            (n, s)
            for n, s in _functions(conn, schema)
            if not n.startswith("dg_") or n.startswith("dg_admin_")
        ]
        # The owner's dg_admin_* functions (changing the schema's limits) are private too.
        assert {"_dg_close_entry", "_dg_lock_thread", "store_now", "dg_admin_set_limit_v1"} <= {
            n for n, _ in private
        }
        reached = [n for n, s in private + _relations(conn, schema) if not _denied(conn, s)]
        assert reached == [], f"{role} reached private objects {reached}"
        assert _denied(conn, f'CREATE TABLE "{schema}".planted (x int)')
        assert _denied(
            conn,
            f'CREATE FUNCTION "{schema}".nextval(text) RETURNS int AS $$ SELECT 1 $$ LANGUAGE sql',
        )


def test_public_can_execute_nothing_and_only_the_owner_can_create_in_the_schema(
    pg_dsn: str, two_tenants: dict[str, tuple[str, str]]
) -> None:
    schema, runtime = two_tenants["a"]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        grants = conn.execute(
            "SELECT p.proname, pg_catalog.pg_get_userbyid(a.grantee), p.prosecdef, p.proconfig"
            "  FROM pg_catalog.pg_proc p"
            "  LEFT JOIN LATERAL pg_catalog.aclexplode(p.proacl) a ON a.grantee <> p.proowner"
            " WHERE p.pronamespace = %s::regnamespace",
            (schema,),
        ).fetchall()
        schema_acl = conn.execute(
            "SELECT a.grantee = 0, pg_catalog.pg_get_userbyid(a.grantee), a.privilege_type"
            "  FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) a"
            " WHERE n.nspname = %s AND a.grantee <> n.nspowner",
            (schema,),
        ).fetchall()
    for name, grantee, definer, config in grants:
        if name.startswith("dg_admin_"):  # the owner's: caller's rights, granted to nobody
            assert grantee is None and not definer, (name, grantee)
        elif name.startswith("dg_"):
            assert grantee == runtime, (name, grantee)  # never PUBLIC ("-")
            assert definer and f"search_path={schema}, pg_temp" in config, name
        elif name.startswith("_dg_notify_"):  # trigger functions: fired by the owner's DML too
            assert grantee is None and not definer, (name, grantee)
            assert config == [f"search_path={schema}, pg_temp"], name
        elif name == "_dg_lease_pick":  # its plans pinned (D224), its search_path the caller's
            assert grantee is None and not definer, (name, grantee)
            assert config == ["plan_cache_mode=force_generic_plan", "jit=off"], name
        else:
            assert grantee is None, (name, grantee)
            assert not definer and not config, name  # helpers stay inlinable
    assert schema_acl == [(False, runtime, "USAGE")]


def test_revoke_takes_back_what_grant_gave(
    pg_dsn: str, two_tenants: dict[str, tuple[str, str]]
) -> None:
    schema, runtime = two_tenants["a"]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        privileges.revoke(conn, schema, runtime)
    with psycopg.connect(as_role(pg_dsn, runtime), autocommit=True) as conn:
        assert _denied(conn, f"SELECT * FROM \"{schema}\".dg_thread_v1('t')")
    with pytest.raises(ProcessingError, match="durable-graph migrate"):
        PostgresCheckpointer.open(as_role(pg_dsn, runtime), PostgresConfig(schema=schema))


def test_grant_sql_is_usage_and_execute_on_the_dg_functions_exactly() -> None:
    text = privileges.grant_sql("app", "worker")
    lines = text.splitlines()
    assert lines[0] == 'GRANT USAGE ON SCHEMA "app" TO "worker";'
    assert lines[1].startswith('GRANT EXECUTE ON FUNCTION "app"."dg_')
    assert lines[1].endswith(' TO "worker";') and "_dg_" not in lines[1]
    assert '"app"."dg_schema_meta_v1"' in lines[1] and '"app"."dg_commit_v1"' in lines[1]
    assert len(lines) == 2
    assert privileges.revoke_sql("app", 'we"ird').splitlines()[1] == (
        'REVOKE USAGE ON SCHEMA "app" FROM "we""ird";'
    )
    for bad in ("", "x" * 64, "public", "a\0b"):
        with pytest.raises(ValidationError, match="role"):
            privileges.grant_sql("app", bad)
    with pytest.raises(ValidationError, match="schema"):
        privileges.grant_sql("App", "worker")


# --- opening and migrating as the right role ------------------------------------------------


def test_a_runtime_role_opening_a_schema_that_is_behind_is_told_to_run_migrate(
    pg_dsn: str, two_tenants: dict[str, tuple[str, str]]
) -> None:
    schema, runtime = two_tenants["a"]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "ALTER TABLE {0}.schema_bookkeeping DISABLE TRIGGER schema_meta_guard;"
                " UPDATE {0}.schema_bookkeeping SET value = '0' WHERE key = 'version'"
            ).format(sql.Identifier(schema))
        )
    with pytest.raises(ProcessingError) as caught:
        PostgresCheckpointer.open(as_role(pg_dsn, runtime), PostgresConfig(schema=schema))
    message = str(caught.value)
    assert f"run durable-graph migrate --dsn ... --schema {schema}" in message
    assert f"role {runtime} cannot migrate it" in message and "is owned by role dg_own_a" in message


def test_migrate_refuses_a_schema_owned_by_another_role_and_creates_nothing(
    pg_dsn: str, pg_schema: str, roles: Roles
) -> None:
    mallory = roles.create("dg_mallory")
    roles.owned_schema(mallory, pg_schema)
    with psycopg.connect(as_role(pg_dsn, mallory), autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "CREATE FUNCTION {}.nextval(text) RETURNS bigint LANGUAGE sql AS $$ SELECT 1::bigint $$"
            ).format(sql.Identifier(pg_schema))
        )
    with pytest.raises(ProcessingError, match=f"is owned by role {mallory}"):
        migrate(pg_dsn, pg_schema)  # even a superuser: it would run mallory's code
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        objects = conn.execute(
            "SELECT count(*) FROM pg_catalog.pg_class WHERE relnamespace = %s::regnamespace",
            (pg_schema,),
        ).fetchone()
    assert objects == (0,)


def test_verify_checks_the_installed_function_bodies_not_only_the_digest(
    pg_dsn: str, two_tenants: dict[str, tuple[str, str]]
) -> None:
    schema, runtime = two_tenants["a"]
    with psycopg.connect(as_role(pg_dsn, runtime), autocommit=True) as conn:
        verify(conn, schema)  # a runtime role can verify a current schema
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "CREATE OR REPLACE FUNCTION {}._dg_iso(p_ts timestamptz) RETURNS text"
                " LANGUAGE sql STABLE STRICT AS $$ SELECT 'tampered' $$"
            ).format(sql.Identifier(schema))
        )
        with pytest.raises(ProcessingError, match="_dg_iso differs"):
            verify(conn, schema)
        conn.execute(
            sql.SQL("ALTER FUNCTION {}.dg_thread_v1(text) SECURITY INVOKER").format(
                sql.Identifier(schema)
            )
        )
        with pytest.raises(ProcessingError, match="dg_thread_v1 is not SECURITY DEFINER"):
            verify(conn, schema)
        conn.execute(
            sql.SQL("GRANT EXECUTE ON FUNCTION {}._dg_close_entry TO PUBLIC").format(
                sql.Identifier(schema)
            )
        )
        with pytest.raises(ProcessingError, match="_dg_close_entry is executable by PUBLIC"):
            verify(conn, schema)


def test_cli_grant_and_revoke_apply_or_print_exactly_that(
    pg_dsn: str, pg_schema: str, roles: Roles, capsys: pytest.CaptureFixture[str]
) -> None:
    owner, runtime = roles.create("dg_cli_owner"), roles.create("dg_cli_rt")
    roles.owned_schema(owner, pg_schema)
    owner_dsn = as_role(pg_dsn, owner)
    migrate(owner_dsn, pg_schema)
    args = ["--schema", pg_schema, "--role", runtime]
    assert main(["grant", *args, "--print"]) == 0
    assert capsys.readouterr().out == privileges.grant_sql(pg_schema, runtime)
    assert main(["revoke", *args, "--print"]) == 0
    assert capsys.readouterr().out == privileges.revoke_sql(pg_schema, runtime)

    assert main(["grant", "--dsn", owner_dsn, *args]) == 0
    store = PostgresCheckpointer.open(as_role(pg_dsn, runtime), PostgresConfig(schema=pg_schema))
    store.claim("t", "me")
    store.close()

    assert main(["revoke", "--dsn", owner_dsn, *args]) == 0
    with psycopg.connect(as_role(pg_dsn, runtime), autocommit=True) as conn:
        assert _denied(conn, f"SELECT * FROM \"{pg_schema}\".dg_thread_v1('t')")
    assert main(["grant", *args]) != 0  # no DSN, no --print
    assert "grant needs --dsn" in capsys.readouterr().err


def test_cli_grant_quotes_a_role_name_holding_a_line_break(
    pg_dsn: str, pg_schema: str, roles: Roles, capsys: pytest.CaptureFixture[str]
) -> None:
    """A role name is a quoted identifier whatever it holds: a line break (or a quote) in it
    neither splits a statement nor ends the name (issue #24)."""
    owner = roles.create("dg_nl_owner")
    runtime = f'dg_nl_{uuid.uuid4().hex[:8]}\nrt "x"'
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(runtime)))
    roles.names.append(runtime)
    roles.owned_schema(owner, pg_schema)
    owner_dsn = as_role(pg_dsn, owner)
    migrate(owner_dsn, pg_schema)
    assert main(["grant", "--schema", pg_schema, "--role", runtime, "--print"]) == 0
    assert capsys.readouterr().out == privileges.grant_sql(pg_schema, runtime)
    assert main(["grant", "--dsn", owner_dsn, "--schema", pg_schema, "--role", runtime]) == 0
    capsys.readouterr()
    with psycopg.connect(as_role(pg_dsn, runtime), autocommit=True) as conn:
        assert conn.execute("SELECT current_user").fetchone() == (runtime,)
        found = conn.execute(
            sql.SQL("SELECT * FROM {}.dg_thread_v1('t')").format(sql.Identifier(pg_schema))
        ).fetchall()
    assert found == []
    assert main(["revoke", "--dsn", owner_dsn, "--schema", pg_schema, "--role", runtime]) == 0
    with psycopg.connect(as_role(pg_dsn, runtime), autocommit=True) as conn:
        assert _denied(conn, f"SELECT * FROM \"{pg_schema}\".dg_thread_v1('t')")


def test_a_second_runtime_role_cannot_hide_or_rewrite_another_roles_worker(
    pg_dsn: str, roles: Roles
) -> None:
    # Issue 37 item 9: two runtime roles granted on one schema; B beats as A's live worker.
    from durable_graph.core.workers import WorkerBeat

    owner, role_a, role_b = (
        roles.create("dg_own_w"),
        roles.create("dg_rt_a"),
        roles.create("dg_rt_b"),
    )
    schema = f"wk_{uuid.uuid4().hex[:12]}"
    roles.owned_schema(owner, schema)
    migrate(as_role(pg_dsn, owner), schema)
    with psycopg.connect(as_role(pg_dsn, owner), autocommit=True) as conn:
        privileges.grant(conn, schema, role_a)
        privileges.grant(conn, schema, role_b)
    config = PostgresConfig(schema=schema)
    with (
        PostgresCheckpointer.open(as_role(pg_dsn, role_a), config) as a,
        PostgresCheckpointer.open(as_role(pg_dsn, role_b), config) as b,
    ):
        seen = a.run_queue.worker_heartbeat(WorkerBeat("w-a", "host-a", 1, None, "busy"))
        for state in ("stopped", "idle"):
            with pytest.raises(ValidationError, match="holder"):
                b.run_queue.worker_heartbeat(WorkerBeat("w-a", "evil", 2, None, state))
        assert a.run_queue.workers() == [seen]  # still listed, as A said
        assert b.run_queue.workers() == [seen]  # every role reads the whole registry
        b.run_queue.worker_heartbeat(WorkerBeat("w-b", "host-b", 3, None, "idle"))
        # A's own beats still work, and B's worker is B's.
        a.run_queue.worker_heartbeat(WorkerBeat("w-a", "host-a", 1, None, "stopped"))
        with pytest.raises(ValidationError, match="holder"):
            a.run_queue.worker_heartbeat(WorkerBeat("w-b", "host-b", 3, None, "stopped"))
        assert [w.holder for w in b.run_queue.workers()] == ["w-b"]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        rows = conn.execute(
            sql.SQL("SELECT holder, role FROM {}.workers ORDER BY holder").format(
                sql.Identifier(schema)
            )
        ).fetchall()
    assert rows == [("w-a", role_a), ("w-b", role_b)]
