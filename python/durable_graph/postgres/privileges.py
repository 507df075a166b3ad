"""Runtime roles of a PostgreSQL store (SPEC §10.5): `grant` and `revoke`.

The schema's owner runs migrations and owns every table, sequence and function. The ``dg_*``
functions are ``SECURITY DEFINER`` (``sql/99_privileges.sql``), so a role that only calls them —
a worker, a web app, a service in another language — needs exactly USAGE on the schema and
EXECUTE on those functions: `grant_sql` is that, `revoke_sql` takes it back. Nothing else in the
schema (tables, sequences, internal ``_dg_*`` helpers) is reachable by such a role, and a role
granted on one schema gets ``permission denied`` on every function and table of another: a
schema and a runtime role per tenant is the hard boundary between tenants.

Run `grant` / `revoke` as the schema's owner (or a superuser), after `migrate`. Upgrades keep the
grants: the install gives every role holding USAGE on the schema EXECUTE on new ``dg_*``
functions too.
"""

from __future__ import annotations

from typing import Any

import psycopg

from durable_graph.core.errors import ProcessingError, ValidationError
from durable_graph.postgres.config import check_schema
from durable_graph.postgres.migrations import expected_functions

MAX_ROLE_BYTES = 63
"""PostgreSQL's identifier limit (NAMEDATALEN - 1)."""


def check_role(value: object, name: str = "role") -> str:
    """A role name: 1..63 UTF-8 bytes, no NUL; any other character is quoted when used."""
    if not isinstance(value, str):
        raise ValidationError(f"{name} must be a str, got {type(value).__name__}")
    size = len(value.encode("utf-8", "surrogatepass"))
    if not 1 <= size <= MAX_ROLE_BYTES or "\0" in value:
        raise ValidationError(
            f"{name} must be 1..{MAX_ROLE_BYTES} UTF-8 bytes without NUL, got {value!r}"
        )
    if value.lower() in ("public", "current_user", "session_user", "current_role"):
        raise ValidationError(f"{name} {value!r} is not a role of its own")
    return value


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def public_functions() -> list[str]:
    """The names of the ``dg_*`` functions this package installs, sorted (not the owner's
    ``dg_admin_*`` functions, which run with the caller's rights and are granted to nobody)."""
    return [
        name
        for name, _ in expected_functions()
        if name.startswith("dg_") and not name.startswith("dg_admin_")
    ]


def _functions(schema: str) -> str:
    # Names alone (no argument lists): each dg_* name is unique in its schema.
    return ", ".join(f"{_ident(schema)}.{_ident(f)}" for f in public_functions())


def _quoted(schema: str, role: str) -> tuple[str, str]:
    """``schema`` and ``role`` checked (in that order), as quoted identifiers."""
    return _ident(check_schema(schema)), _ident(check_role(role))


def _grant_statements(schema: str, role: str) -> list[str]:
    quoted_schema, quoted_role = _quoted(schema, role)
    return [
        f"GRANT USAGE ON SCHEMA {quoted_schema} TO {quoted_role}",
        f"GRANT EXECUTE ON FUNCTION {_functions(schema)} TO {quoted_role}",
    ]


def _revoke_statements(schema: str, role: str) -> list[str]:
    quoted_schema, quoted_role = _quoted(schema, role)
    return [
        f"REVOKE ALL ON ALL FUNCTIONS IN SCHEMA {quoted_schema} FROM {quoted_role}",
        f"REVOKE USAGE ON SCHEMA {quoted_schema} FROM {quoted_role}",
    ]


def _script(statements: list[str]) -> str:
    return "".join(f"{statement};\n" for statement in statements)


def grant_sql(schema: str, role: str) -> str:
    """The statements that let ``role`` call the store in ``schema``: USAGE on the schema and
    EXECUTE on its ``dg_*`` functions, nothing more. A role name is a quoted identifier, any
    character in it (a line break too) kept as it is."""
    return _script(_grant_statements(schema, role))


def revoke_sql(schema: str, role: str) -> str:
    """The statements that take back what `grant_sql` gave (and any other function grant)."""
    return _script(_revoke_statements(schema, role))


def _apply(conn: psycopg.Connection[Any], statements: list[str], what: str) -> None:
    """Each statement as one whole (never split on lines: a quoted name may hold one), all in
    one transaction."""
    try:
        with conn.transaction():
            for statement in statements:
                conn.execute(statement.encode("utf-8"))
    except psycopg.Error as exc:
        raise ProcessingError(f"could not {what}: {exc}") from exc


def grant(conn: psycopg.Connection[Any], schema: str, role: str) -> None:
    """Apply `grant_sql` in one transaction (as the schema's owner, after `migrate`)."""
    _apply(conn, _grant_statements(schema, role), f"grant {role!r} the use of schema {schema}")


def revoke(conn: psycopg.Connection[Any], schema: str, role: str) -> None:
    """Apply `revoke_sql` in one transaction."""
    _apply(conn, _revoke_statements(schema, role), f"revoke {role!r}'s use of schema {schema}")


__all__ = ["check_role", "grant", "grant_sql", "public_functions", "revoke", "revoke_sql"]
