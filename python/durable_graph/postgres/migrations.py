"""Schema migrations of a PostgreSQL store (SPEC §6, §8 rules 27-28).

A store's schema holds the tables of ``migrations/`` (yoyo SQL migrations: DDL only, versioned,
forward-only, written with unqualified names) and the functions of ``sql/`` (each
``CREATE OR REPLACE``, pinned to the schema with ``SET search_path FROM CURRENT``). Both are
found at runtime through the package's ``_migrations`` and ``_sql`` links.

- `migrate` applies what is missing, under a PostgreSQL advisory lock of the schema (racing
  processes are safe): ``CREATE SCHEMA IF NOT EXISTS``, yoyo with ``search_path`` set to the
  schema (yoyo's bookkeeping tables live there too), then every ``sql/*.sql`` in one transaction,
  and records the version (the number of migrations) and the digest of the function sources in
  ``schema_meta``. When the schema is already current it changes nothing.
- `verify` raises the rule-28 `ProcessingError` when the schema is not current.
- `install_script` is the whole install as one SQL script for a DBA (``durable-graph sql``). It
  writes ``schema_meta`` but not yoyo's tables: a later `migrate` recognises a script-installed
  schema by ``schema_meta`` and marks yoyo's migrations applied then.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any
from urllib.parse import urlencode

import psycopg
from psycopg import sql

from ..errors import ProcessingError
from .config import check_schema

_LOCK_NAMESPACE = "durable_graph.migrate:"


@dataclass(frozen=True, slots=True)
class SqlFile:
    """A migration or function file: its name and text."""

    name: str
    text: str


def _files(folder: str) -> list[SqlFile]:
    root: Traversable = resources.files("durable_graph") / folder
    found = [
        SqlFile(entry.name, entry.read_text(encoding="utf-8"))
        for entry in root.iterdir()
        if entry.is_file()
        and entry.name.endswith(".sql")
        and not entry.name.endswith(".rollback.sql")
    ]
    return sorted(found, key=lambda f: f.name)


def migration_files() -> list[SqlFile]:
    """The yoyo migrations, in order (``migrations/NNNN.name.sql``)."""
    return _files("_migrations")


def function_files() -> list[SqlFile]:
    """The function definitions, in install order (``sql/NN_name.sql``)."""
    return _files("_sql")


def required_version() -> int:
    """The schema version this package needs: the number of its migrations."""
    return len(migration_files())


def functions_digest() -> str:
    """sha256 of the function sources, concatenated in file-name order (names included)."""
    digest = hashlib.sha256()
    for f in function_files():
        digest.update(f.name.encode("utf-8") + b"\0" + f.text.encode("utf-8") + b"\0")
    return digest.hexdigest()


def lock_key(schema: str) -> int:
    """The advisory-lock key `migrate` holds for ``schema`` (a signed 64-bit int)."""
    raw = hashlib.sha256((_LOCK_NAMESPACE + schema).encode("utf-8")).digest()[:8]
    return int.from_bytes(raw, "big", signed=True)


def not_current_message(schema: str, version: int, needed: int, functions_differ: bool) -> str:
    """The rule-28 message."""
    message = (
        f"schema {schema} is at version {version}, needs {needed}: "
        f"run durable-graph migrate --dsn ... --schema {schema}"
    )
    if functions_differ and version == needed:
        message += " (its SQL functions differ from this package's)"
    return message


def check_meta(schema: str, meta: dict[str, str]) -> None:
    """Raise the rule-28 `ProcessingError` unless ``meta`` (schema_meta rows) is current."""
    try:
        version = int(meta.get("version", "0"))
    except ValueError:
        version = 0
    needed = required_version()
    differ = meta.get("functions_digest") != functions_digest()
    if version != needed or differ:
        raise ProcessingError(not_current_message(schema, version, needed, differ))


def _read_meta(conn: psycopg.Connection[Any], schema: str) -> dict[str, str]:
    table = f"{schema}.schema_meta"
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()
    if row is None or not row[0]:
        return {}
    query = sql.SQL("SELECT key, value FROM {}.schema_meta").format(sql.Identifier(schema))
    return {str(k): str(v) for k, v in conn.execute(query).fetchall()}


def verify(conn: psycopg.Connection[Any], schema: str) -> None:
    """Raise `ProcessingError` (rule 28) unless ``schema`` is at this package's version."""
    check_schema(schema)
    with conn.transaction():
        meta = _read_meta(conn, schema)
    check_meta(schema, meta)


def _yoyo_uri(dsn: str, schema: str) -> str:
    params = {k: str(v) for k, v in psycopg.conninfo.conninfo_to_dict(dsn).items()}
    params["schema"] = schema
    return "postgresql+psycopg:///?" + urlencode(params)


def _install_functions(conn: psycopg.Connection[Any], schema: str) -> None:
    """Every ``sql/*.sql`` and the schema_meta rows, in one transaction."""
    with conn.transaction():
        conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(schema)))
        for f in function_files():
            conn.execute(f.text.encode("utf-8"))
        conn.execute(_meta_upsert(required_version(), functions_digest()).encode("utf-8"))


def _meta_upsert(version: int, digest: str) -> str:
    return (
        "INSERT INTO schema_meta (key, value) VALUES "
        f"('version', '{version}'), ('functions_digest', '{digest}') "
        "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value;\n"
    )


def migrate(dsn: str, schema: str) -> int:
    """Bring ``schema`` to this package's version; return that version.

    Safe to run from many processes at once (an advisory lock of the schema serialises them) and
    a no-op when the schema is current.
    """
    from yoyo import get_backend, read_migrations

    check_schema(schema)
    needed = required_version()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (lock_key(schema),))
        try:
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
            meta = _read_meta(conn, schema)
            backend = get_backend(_yoyo_uri(dsn, schema))
            try:
                # Our advisory lock already serialises migrate; a yoyo lock row left by a
                # crashed process must not block us.
                backend.break_lock()
                with backend.lock():
                    migrations = read_migrations(
                        str(resources.files("durable_graph") / "_migrations")
                    )
                    pending = backend.to_apply(migrations)
                    installed = int(meta.get("version", "0") or 0)
                    if installed and len(pending) == len(migrations):
                        # Installed from install_script: record yoyo's view of it.
                        backend.mark_migrations(migrations[:installed])
                        pending = backend.to_apply(migrations)
                    backend.apply_migrations(pending)
            finally:
                backend.connection.close()
            try:
                check_meta(schema, _read_meta(conn, schema))
            except ProcessingError:
                _install_functions(conn, schema)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (lock_key(schema),))
    return needed


def install_script(schema: str) -> str:
    """The complete install script of ``schema`` for a DBA to review and run with psql.

    Creates the schema, applies every migration's DDL and every function in one transaction,
    and writes ``schema_meta`` so that the store (and a later `migrate`) sees it as current.
    """
    check_schema(schema)
    quoted = '"' + schema + '"'  # rule 27 names need no escaping
    parts = [
        f"-- durable_graph install script for schema {schema}: version {required_version()}, "
        f"functions {functions_digest()}\n",
        "-- Generated by `durable-graph sql`; apply with: psql -v ON_ERROR_STOP=1 -f FILE\n",
        "BEGIN;\n",
        f"CREATE SCHEMA IF NOT EXISTS {quoted};\n",
        f"SET LOCAL search_path TO {quoted};\n",
    ]
    for f in migration_files():
        parts.append(f"\n-- migration {f.name}\n{f.text.rstrip()}\n")
    for f in function_files():
        parts.append(f"\n-- functions {f.name}\n{f.text.rstrip()}\n")
    parts.append("\n-- bookkeeping: the version and digest `verify` checks\n")
    parts.append(_meta_upsert(required_version(), functions_digest()))
    parts.append("COMMIT;\n")
    return "".join(parts)


__all__ = [
    "SqlFile",
    "check_meta",
    "function_files",
    "functions_digest",
    "install_script",
    "lock_key",
    "migrate",
    "migration_files",
    "not_current_message",
    "required_version",
    "verify",
]
