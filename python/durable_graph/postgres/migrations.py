"""Schema migrations of a PostgreSQL store (SPEC §6, §8 rules 27-28, §10.5, §10.7, §23).

A store's schema holds the tables of ``migrations/`` (yoyo SQL migrations: DDL only, versioned,
forward-only, written with unqualified names) and the functions of ``sql/NN_*.sql`` (each
``CREATE OR REPLACE``; ``sql/99_privileges.sql`` runs last and makes every ``dg_*`` function
``SECURITY DEFINER`` with a pinned ``search_path`` and everything else private to the owner).
Both are found at runtime through the package's ``_migrations`` and ``_sql`` links.

- `migrate` first looks: a current schema is left alone without taking a lock or creating
  anything, so a runtime role holding only the `grant`ed privileges can open it. Otherwise it
  must run as the schema's owner and refuses, before creating anything, a schema another role
  owns, holds an object of, or may CREATE in (`foreign_objects`: that role could have planted a
  table with a trigger or a function that shadows a builtin, run as the installer), takes the
  schema's advisory lock (bounded: a `ProcessingError` after ``lock_wait``), and in ONE
  transaction creates the schema if missing, applies the pending migrations, every
  ``sql/NN_*.sql``, and records the release, the version (the number of migrations) and the
  digest of the installed function bodies in ``schema_meta`` (SPEC §23.3): a failed or killed
  upgrade leaves the previous version whole, and a rerun completes it. yoyo's own tables are
  bookkeeping, marked after the commit; a migration counts as applied when ``schema_meta``'s
  version or yoyo's table says so (a schema left by an earlier, non-atomic migrate recovers).
- Never backwards (SPEC §23.4): a schema at a higher version or a later release than this
  package is refused by `migrate`, `verify` and `prepare`, naming both versions; the
  ``schema_meta_guard`` trigger (``sql/98_meta.sql``) refuses the bookkeeping write of older code
  (which cannot be changed now), so its whole transaction rolls back.
- `plan` says what `migrate` would do (``durable-graph migrate --plan``).
- `verify` raises the rule-28 `ProcessingError` unless the schema is current: version, stored
  digest, the installed bodies (``pg_proc.prosrc``) equal to this package's, and the ``dg_*``
  functions ``SECURITY DEFINER`` with the pinned ``search_path``.
- ``sql/install.sql`` does the same with psql alone; `install_script` prints it with every
  included file inlined (``durable-graph sql``). It writes ``schema_meta`` but not yoyo's tables:
  a later `migrate` recognises a script-installed schema by ``schema_meta`` and marks yoyo's
  migrations applied then.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import re
import time
from dataclasses import dataclass
from datetime import timedelta
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import psycopg
from psycopg import sql

from durable_graph.core.errors import ProcessingError, StoreError
from durable_graph.postgres.config import PostgresConfig, check_schema
from durable_graph.postgres.sql_files import (
    INSTALL_FILE,
    SqlFile,
    expected_functions,
    function_files,
    functions_digest,
    install_file,
    install_script,
    migration_files,
    release,
    release_order,
    required_version,
)

if TYPE_CHECKING:
    from durable_graph.postgres.partitions.checks import ProxyCheck

_LOCK_NAMESPACE = "durable_graph.migrate:"
TEST_CLOCK_TABLE = "dg_test_clock"
"""A schema holding this table runs the testkit's `PgClock`, which replaces ``store_now()``."""
_SECOND = timedelta(seconds=1)
_log = logging.getLogger("durable_graph.migrate")
LOCK_POLL = 0.05
"""Seconds between two tries of the migration lock."""

# The digest of the functions installed in a schema; the same expression is in sql/install.sql.
_DIGEST_SQL = """
SELECT pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(coalesce(
           pg_catalog.string_agg(p.proname || E'\\x1f' || p.prosrc, E'\\x1e'
                                 ORDER BY p.proname COLLATE "C", p.prosrc COLLATE "C"),
           ''), 'UTF8')), 'hex')
  FROM pg_catalog.pg_proc p
 WHERE p.pronamespace = (SELECT n.oid FROM pg_catalog.pg_namespace n WHERE n.nspname = %s)
"""


_FOREIGN_MARK = re.compile(r"-- dg:foreign-objects\n(.*?)\n\s*-- end dg:foreign-objects", re.DOTALL)


@functools.cache
def _foreign_sql() -> str:
    """The query of ``sql/install.sql`` that lists what other roles own in, or may create in, a
    schema: taken from there (one text for both installers), as a psycopg query of ``schema``."""
    found = _FOREIGN_MARK.search(install_file())
    if found is None:
        raise ProcessingError("sql/install.sql lacks its dg:foreign-objects query")
    owner = "(SELECT n0.nspowner FROM pg_catalog.pg_namespace n0 WHERE n0.nspname = %(schema)s)"
    query = found.group(1).replace("%", "%%").replace(" INTO v_foreign", "")
    query = re.sub(r"\bv_owner\b", owner, re.sub(r"\bv_schema\b", "%(schema)s", query))
    return query.strip().rstrip(";")


def foreign_objects(conn: psycopg.Connection[Any], schema: str) -> list[str]:
    """What in ``schema`` another role than its owner owns (relations, functions, types,
    operators, collations, conversions, triggers calling their functions), and who else holds
    CREATE on it (PUBLIC too): each would let that role run code as whoever installs there."""
    row = conn.execute(_foreign_sql(), {"schema": schema}).fetchone()
    return [str(v) for v in (row[0] if row and row[0] else [])]


def lock_key(schema: str) -> int:
    """The advisory-lock key `migrate` holds for ``schema`` (a signed 64-bit int)."""
    raw = hashlib.sha256((_LOCK_NAMESPACE + schema).encode("utf-8")).digest()[:8]
    return int.from_bytes(raw, "big", signed=True)


# --- verify ------------------------------------------------------------------------------------


def not_current_message(
    schema: str, version: int, needed: int, functions_differ: bool, detail: str = ""
) -> str:
    """The rule-28 message."""
    message = (
        f"schema {schema} is at version {version}, needs {needed}: "
        f"run durable-graph migrate --dsn ... --schema {schema}"
    )
    if functions_differ and version == needed:
        message += f" (its SQL functions differ from this package's{detail})"
    return message


@dataclass(frozen=True, slots=True)
class _Installed:
    """What a schema holds, as far as the connected role can see."""

    exists: bool
    owner: str | None
    user: str
    meta: dict[str, str]
    meta_readable: bool
    # name, body, SECURITY DEFINER, SET clauses, executable by PUBLIC
    functions: list[tuple[str, str, bool, list[str] | None, bool]]
    test_clock: bool
    foreign: list[str]
    """`foreign_objects`: what other roles own in the schema, or CREATE held by them."""


def _inspect(conn: psycopg.Connection[Any], schema: str) -> _Installed:
    """Read the schema's state in one snapshot; needs no privilege beyond catalog access."""
    with conn.transaction():
        row = conn.execute(
            "SELECT (SELECT pg_catalog.pg_get_userbyid(n.nspowner) FROM pg_catalog.pg_namespace n"
            "         WHERE n.nspname = %s), current_user",
            (schema,),
        ).fetchone()
        assert row is not None
        owner, user = row[0], str(row[1])
        if owner is None:
            return _Installed(False, None, user, {}, True, [], False, [])
        meta, readable = _read_meta(conn, schema)
        rows = conn.execute(
            "SELECT p.proname, p.prosrc, p.prosecdef, p.proconfig,"
            "       p.proacl IS NULL OR 0::oid IN (SELECT a.grantee FROM"
            "                                      pg_catalog.aclexplode(p.proacl) a)"
            "  FROM pg_catalog.pg_proc p"
            " WHERE p.pronamespace = (SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = %s)"
            " ORDER BY 1, 2",
            (schema,),
        ).fetchall()
        clock = conn.execute(  # the catalog, not to_regclass: that needs USAGE on the schema
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.relname = %s"
            " AND c.relnamespace = (SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = %s))",
            (TEST_CLOCK_TABLE, schema),
        ).fetchone()
        foreign = foreign_objects(conn, schema)
    functions = [(str(r[0]), str(r[1]), bool(r[2]), r[3], bool(r[4])) for r in rows]
    return _Installed(
        True, str(owner), user, meta, readable, functions, bool(clock and clock[0]), foreign
    )


def name_release(conn: psycopg.Connection[Any]) -> None:
    """Name this package's release in ``durable_graph.release`` for the transaction ``conn`` is
    in: the ``schema_meta`` view answers only such a reader (migration 0019: code released
    before 0.2.0 is told the schema is newer than it), and the ``schema_meta_guard`` trigger
    lets it write the bookkeeping when it is at least the schema's release."""
    conn.execute("SELECT pg_catalog.set_config('durable_graph.release', %s, true)", (release(),))


def _read_meta(conn: psycopg.Connection[Any], schema: str) -> tuple[dict[str, str], bool]:
    """schema_meta's rows, and whether they could be read (a runtime role reads them through
    ``dg_schema_meta_v1()``; a schema older than that function hides them from it). Runs inside
    `_inspect`'s transaction."""
    usage = conn.execute("SELECT pg_catalog.has_schema_privilege(%s, 'USAGE')", (schema,))
    if not (usage.fetchone() or (False,))[0]:
        return {}, False
    row = conn.execute(
        "SELECT c.oid IS NOT NULL, coalesce(pg_catalog.has_table_privilege(c.oid, 'SELECT'), false),"
        "       pg_catalog.to_regprocedure(pg_catalog.format('%%I.dg_schema_meta_v1()', %s::text))"
        "         IS NOT NULL"
        "  FROM (SELECT pg_catalog.to_regclass(pg_catalog.format('%%I.schema_meta', %s::text))"
        "        AS oid) c",
        (schema, schema),
    ).fetchone()
    assert row is not None
    exists, can_select, has_function = bool(row[0]), bool(row[1]), bool(row[2])
    if not exists:
        return {}, True
    ident = sql.Identifier(schema)
    if can_select:
        name_release(conn)  # for this transaction, which `_inspect` opened
        query = sql.SQL("SELECT key, value FROM {}.schema_meta").format(ident)
    elif has_function:
        query = sql.SQL("SELECT key, value FROM {}.dg_schema_meta_v1()").format(ident)
    else:
        return {}, False
    try:
        with conn.transaction():
            rows = conn.execute(query).fetchall()
    except psycopg.errors.InsufficientPrivilege:
        return {}, False
    return {str(k): str(v) for k, v in rows}, True


def _stored_version(meta: dict[str, str]) -> int:
    try:
        return int(meta.get("version", "0"))
    except ValueError:
        return 0


def _newer(schema: str, state: _Installed) -> str | None:
    """Why ``state`` is newer than this package (SPEC §23.4: never backwards), or None."""
    version, stored = _stored_version(state.meta), state.meta.get("release")
    ours, theirs = release_order(release()), release_order(stored)
    if version <= required_version() and (theirs is None or ours is None or theirs <= ours):
        return None
    return (
        f"schema {schema} is at version {version} (durable-graph {stored or 'unknown'}), newer "
        f"than this durable-graph {release()} (schema version {required_version()}): older code "
        f"never opens or migrates a newer schema; run durable-graph {stored or 'of that schema'} "
        "or later (nothing was changed)"
    )


def _refuse_newer(schema: str, state: _Installed) -> None:
    """`_newer`'s refusal, before anything is planned, locked or written."""
    newer = _newer(schema, state)
    if newer is not None:
        raise ProcessingError(newer)


def _problem(schema: str, state: _Installed) -> str | None:
    """Why ``state`` is not current (the rule-28 message, or `_newer`'s), or None."""
    needed = required_version()
    if not state.meta_readable:
        return (
            f"schema {schema} cannot be checked by role {state.user} (it predates "
            f"dg_schema_meta_v1 or the role has no grant on it): "
            f"run durable-graph migrate --dsn ... --schema {schema} as its owner, "
            f"then durable-graph grant --schema {schema} --role {state.user}"
        )
    newer = _newer(schema, state)
    if newer is not None:
        return newer
    version = _stored_version(state.meta)
    if version != needed:
        return not_current_message(schema, version, needed, False)
    differ = _function_differences(schema, state)
    if differ:
        return not_current_message(schema, version, needed, True, ": " + "; ".join(differ[:5]))
    return None


def _function_differences(schema: str, state: _Installed) -> list[str]:
    """How the installed functions (and the release that recorded them) differ from this
    package's: empty when they are current."""
    if state.meta.get("release") != release():
        return [f"recorded by release {state.meta.get('release')}"]
    expected = dict(expected_functions())
    installed: dict[str, list[str]] = {}
    differ: list[str] = []
    for name, body, definer, config, public in state.functions:
        installed.setdefault(name, []).append(body)
        if public:
            differ.append(f"{name} is executable by PUBLIC")
        paths = [c for c in config or [] if c.startswith("search_path=")]
        api = name.startswith("dg_") and not name.startswith("dg_admin_")
        if api and (not definer or paths != [f"search_path={schema}, pg_temp"]):
            differ.append(f"{name} is not SECURITY DEFINER with its search_path pinned")
    for name in sorted(set(expected) | set(installed)):
        if name == "store_now" and state.test_clock:
            continue  # the testkit's clock replaced it on purpose
        if installed.get(name) != ([expected[name]] if name in expected else None):
            if name not in expected:
                differ.append(f"{name} is not ours")
            else:
                differ.append(f"{name} differs" if name in installed else f"{name} is missing")
    if state.meta.get("functions_digest") != functions_digest() and not differ:
        differ.append("the recorded digest differs")
    return differ


def verify(conn: psycopg.Connection[Any], schema: str) -> None:
    """Raise `ProcessingError` (rule 28) unless ``schema`` is at this package's version, with
    this package's function bodies installed as they should be. On a partition proxy: unless
    the proxy and every partition that answers are current, or none answers (SPEC §16.3; the
    ones that are down are logged, `durable_graph.postgres.partitions.checks`)."""
    check_schema(schema)
    state = _inspect(conn, schema)
    if is_proxy(state):  # as a store opens on it: partitions that are down are logged
        problem = proxy_check(conn, schema, state.meta).opening_problem()
    else:
        problem = _problem(schema, state)
    if problem is not None:
        raise ProcessingError(problem)


def is_proxy(state: _Installed) -> bool:
    """Whether the schema is a generated partition proxy (SPEC §16.3: never migrated in place)."""
    return state.meta.get("kind") == "proxy"


def proxy_check(conn: psycopg.Connection[Any], schema: str, meta: dict[str, str]) -> ProxyCheck:
    """`durable_graph.postgres.partitions.checks.check` of the proxy in ``schema`` (its
    ``schema_meta`` read as ``meta``) against this package's version and functions."""
    from durable_graph.postgres.partitions import checks

    expected = checks.Expected(required_version(), functions_digest(), proxy_digest(conn, schema))
    return checks.check(conn, schema, meta, expected)


def proxy_digest(conn: psycopg.Connection[Any], schema: str) -> str:
    """The digest of the functions installed in ``schema`` (a proxy records its own)."""
    row = conn.execute(_DIGEST_SQL, (schema,)).fetchone()
    assert row is not None
    return str(row[0])


def kind(conn: psycopg.Connection[Any], schema: str) -> str:
    """``"proxy"`` for a partition proxy's schema, else ``"store"``."""
    return "proxy" if is_proxy(_inspect(conn, schema)) else "store"


# --- migrate -----------------------------------------------------------------------------------


def _yoyo_uri(dsn: str, schema: str, connect_timeout: int) -> str:
    params = {k: str(v) for k, v in psycopg.conninfo.conninfo_to_dict(dsn).items()}
    params["schema"] = schema
    params.setdefault("connect_timeout", str(connect_timeout))
    return "postgresql+psycopg:///?" + urlencode(params)


def _applied(conn: psycopg.Connection[Any], schema: str, state: _Installed) -> int:
    """How many of this package's migrations the schema holds: ``schema_meta``'s version, or
    the run of them yoyo's table records if longer (an earlier, non-atomic `migrate` committed
    its migrations before failing on the functions: they are not applied twice)."""
    version = _stored_version(state.meta) if state.exists else 0
    found = conn.execute(
        "SELECT pg_catalog.to_regclass(pg_catalog.format('%%I._yoyo_migration', %s::text))",
        (schema,),
    ).fetchone()
    if not state.exists or found is None or found[0] is None:
        return version
    ids = {
        str(r[0])
        for r in conn.execute(
            sql.SQL("SELECT migration_id FROM {}._yoyo_migration").format(sql.Identifier(schema))
        ).fetchall()
    }
    recorded = 0
    for f in migration_files():
        if f.name.removesuffix(".sql") not in ids:
            break
        recorded += 1
    return max(version, recorded)


@dataclass(frozen=True, slots=True)
class Plan:
    """What `migrate` would do to a schema (``durable-graph migrate --plan``)."""

    schema: str
    exists: bool
    version: int
    release: str | None
    migrations: list[str]
    """The migration files to apply, in order."""
    functions: str | None
    """Why every function file is installed again (None: they are current)."""

    @property
    def current(self) -> bool:
        return self.exists and not self.migrations and self.functions is None

    def lines(self) -> list[str]:
        """The plan as a DBA reads it."""
        target = f"version {required_version()} (durable-graph {release()})"
        if self.current:
            return [f"schema {self.schema} is current at {target}: nothing to apply"]
        was = (
            f"at version {self.version} (durable-graph {self.release or 'before 0.2.0'})"
            if self.exists
            else "missing: create it"
        )
        lines = [
            f"schema {self.schema} is {was}; migrate brings it to {target}, in one transaction:"
        ]
        lines += [f"  apply migrations/{name}" for name in self.migrations]
        lines.append(
            f"  install the {len(function_files())} function files of sql/ ({self.functions})"
        )
        lines.append("  record release, version and functions digest in schema_meta")
        return lines


def _plan(conn: psycopg.Connection[Any], schema: str, state: _Installed) -> Plan:
    pending = [f.name for f in migration_files()[_applied(conn, schema, state) :]]
    if _problem(schema, state) is None:
        reason = None
    elif pending:
        reason = "every upgrade installs them with its migrations"
    else:  # the same version: the bodies, their privileges or the recorded release differ
        reason = "they differ: " + "; ".join(_function_differences(schema, state)[:5])
    return Plan(
        schema,
        state.exists,
        _stored_version(state.meta),
        state.meta.get("release"),
        pending,
        reason,
    )


def plan(dsn: str, schema: str, config: PostgresConfig | None = None) -> Plan:
    """What `migrate` would apply to ``schema``, changing nothing; `ProcessingError` for a schema
    newer than this package (never backwards) or a partition proxy (never migrated in place)."""
    check_schema(schema)
    config = PostgresConfig(schema=schema) if config is None else config
    with _connect(dsn, config) as conn:
        state = _inspect(conn, schema)
        if is_proxy(state):
            raise ProcessingError(
                f"schema {schema} is a partition proxy: it is never migrated in place "
                "(durable-graph partitions migrate)"
            )
        _refuse_newer(schema, state)
        return _plan(conn, schema, state)


def _refuse_foreign(schema: str, state: _Installed, problem: str) -> None:
    """Refuse to install into a schema another role owns, holds objects of, or may create in
    (SPEC §10.5): before anything is created or run there."""
    if state.exists and state.owner != state.user:
        raise ProcessingError(
            f"{problem}; role {state.user} cannot migrate it: schema {schema} is owned by role "
            f"{state.owner}, and durable-graph migrate runs only as a schema's owner"
        )
    if state.foreign:
        raise ProcessingError(
            f"{problem}; schema {schema} is not safe to install into: "
            + "; ".join(state.foreign[:10])
            + (f"; and {len(state.foreign) - 10} more" if len(state.foreign) > 10 else "")
            + ". Drop the objects other roles own there (or migrate a new schema) and REVOKE "
            "CREATE ON SCHEMA from every role but its owner; nothing was created"
        )


def _lock(conn: psycopg.Connection[Any], schema: str, wait: float) -> None:
    """Take the schema's migration lock, trying until ``wait`` seconds have passed."""
    deadline = time.monotonic() + wait
    while True:
        row = conn.execute("SELECT pg_catalog.pg_try_advisory_lock(%s)", (lock_key(schema),))
        got = row.fetchone()
        if got is not None and got[0]:
            return
        if time.monotonic() >= deadline:
            raise ProcessingError(
                f"another process is migrating schema {schema}: its migration lock was not free "
                f"within {wait:.1f}s; retry durable-graph migrate --dsn ... --schema {schema} "
                "when it is done"
            )
        time.sleep(min(LOCK_POLL, max(0.0, deadline - time.monotonic())))


def _connect(dsn: str, config: PostgresConfig) -> psycopg.Connection[Any]:
    kwargs = config.connection_kwargs()
    kwargs["options"] = config.session_options()  # no statement_timeout: DDL may take long
    try:
        return psycopg.connect(dsn, **kwargs)
    except psycopg.Error as exc:
        raise ProcessingError(
            f"could not connect to migrate schema {config.schema}: {exc}"
        ) from exc


def migrate(dsn: str, schema: str, config: PostgresConfig | None = None) -> int:
    """Bring ``schema`` to this package's version; return that version.

    A no-op that creates nothing and takes no lock when the schema is current. Otherwise one
    transaction (SPEC §23.3), safe to run from many processes at once: an advisory lock of the
    schema serialises them, waited for at most ``connection_timeout + call_timeout`` of
    ``config`` (then `ProcessingError`), and the connection is bounded by
    ``connection_timeout`` (at least 2 s: libpq's minimum). A schema newer than this package is
    refused, naming both versions. Any failure is a `ProcessingError`, and changes nothing.
    """
    return _migrate(dsn, schema, config)[0]


def prepare(dsn: str, config: PostgresConfig) -> bool:
    """What a store does before it opens (SPEC §8 rule 28, §16.3, §23.4): migrate
    (``auto_migrate``, forward only) or verify ``config.schema``; True when it is a partition
    proxy (checked, never installed into)."""
    if config.auto_migrate:
        return _migrate(dsn, config.schema, config)[1]
    try:
        conn = psycopg.connect(dsn, **config.connection_kwargs())
    except psycopg.OperationalError as exc:  # unreachable, refused login, bad password
        raise ProcessingError(f"could not connect to PostgreSQL: {exc}") from exc
    with conn:
        state = _inspect(conn, config.schema)
        proxy = is_proxy(state)
        if proxy:  # partitions that are down are logged; their threads' calls fail
            problem = proxy_check(conn, config.schema, state.meta).opening_problem()
        else:
            problem = _problem(config.schema, state)
    if problem is not None:
        raise ProcessingError(problem)
    return proxy


def _migrate(dsn: str, schema: str, config: PostgresConfig | None) -> tuple[int, bool]:
    """`migrate`, and whether the schema is a partition proxy."""
    check_schema(schema)
    config = PostgresConfig(schema=schema) if config is None else config
    needed = required_version()
    with _connect(dsn, config) as conn:
        try:
            state = _inspect(conn, schema)
            if is_proxy(state):  # a partition proxy: checked, never installed into
                check = proxy_check(conn, schema, state.meta)
                if check.problem is not None:  # why auto_migrate did not fix it
                    raise ProcessingError(
                        f"{check.problem} (a partition proxy is never migrated in place)"
                    )
                problem = check.opening_problem()  # an outage: nothing to migrate
                if problem is not None:
                    raise ProcessingError(problem)
                return needed, True
            _refuse_newer(schema, state)
            problem = _problem(schema, state)
            if problem is None:
                return needed, False
            _refuse_foreign(schema, state, problem)
            _lock(conn, schema, (config.connection_timeout + config.call_timeout) / _SECOND)
            try:
                migrated = _migrate_locked(conn, schema)
            finally:
                with contextlib.suppress(psycopg.Error):
                    conn.execute("SELECT pg_catalog.pg_advisory_unlock(%s)", (lock_key(schema),))
        except StoreError:
            raise
        except Exception as exc:
            raise ProcessingError(
                f"could not migrate schema {schema}: {exc}. Nothing was changed: the schema is "
                f"as it was before; fix the cause and run durable-graph migrate again"
            ) from exc
    if migrated:
        _mark_yoyo(dsn, schema, config)
    return needed, False


def _migrate_locked(conn: psycopg.Connection[Any], schema: str) -> bool:
    """`migrate`'s work, under the migration lock, in one transaction; whether it migrated
    (another migrator may have done it meanwhile)."""
    state = _inspect(conn, schema)  # another migrator may have finished meanwhile
    _refuse_newer(schema, state)
    problem = _problem(schema, state)
    if problem is None:
        return False
    _refuse_foreign(schema, state, problem)
    pending = migration_files()[_applied(conn, schema, state) :]
    with conn.transaction():
        if not state.exists:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        conn.execute(sql.SQL("SET LOCAL search_path TO {}, pg_temp").format(sql.Identifier(schema)))
        name_release(conn)  # the release this install records (the guard checks it)
        for f in pending:
            conn.execute(f.text.encode("utf-8"))
        for f in function_files():
            conn.execute(f.text.encode("utf-8"))
        row = conn.execute(_DIGEST_SQL, (schema,)).fetchone()
        assert row is not None
        conn.execute(
            "INSERT INTO schema_bookkeeping (key, value)"
            " VALUES ('release', %s), ('version', %s), ('functions_digest', %s)"
            " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
            " WHERE schema_bookkeeping.value IS DISTINCT FROM EXCLUDED.value",
            (release(), str(required_version()), str(row[0])),
        )
    return True


def _mark_yoyo(dsn: str, schema: str, config: PostgresConfig) -> None:
    """Record in yoyo's tables the migrations the schema now holds (every one of this
    package's, once it migrated), so `yoyo list` agrees.
    Bookkeeping only: `_applied` trusts ``schema_meta`` first, so a failure here (or a kill
    between the commit and this) loses nothing; it is logged and the next upgrade marks them."""
    from yoyo import get_backend, read_migrations

    try:
        backend = get_backend(_yoyo_uri(dsn, schema, config.connect_timeout_s))
        try:
            backend.break_lock()  # ours serialised migrate; a crashed process's row must not block
            with backend.lock():
                known = read_migrations(str(resources.files("durable_graph") / "_migrations"))
                backend.mark_migrations(backend.to_apply(known))
        finally:
            backend.connection.close()
    except Exception as exc:  # bookkeeping: the upgrade itself committed
        _log.warning("schema %s migrated; yoyo's bookkeeping not updated: %s", schema, exc)


__all__ = [
    "INSTALL_FILE",
    "Plan",
    "SqlFile",
    "expected_functions",
    "foreign_objects",
    "function_files",
    "functions_digest",
    "install_file",
    "install_script",
    "is_proxy",
    "kind",
    "lock_key",
    "migrate",
    "migration_files",
    "name_release",
    "not_current_message",
    "plan",
    "prepare",
    "proxy_digest",
    "release",
    "release_order",
    "required_version",
    "verify",
]
