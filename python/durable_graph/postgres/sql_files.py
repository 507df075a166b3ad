"""The SQL a store installs, as this package ships it (SPEC §6, §10.7, §23.1): the migration and
function files, the function bodies they define and their digest, the release and schema version
they make, and the install script a DBA runs with psql. `durable_graph.postgres.migrations`
installs and checks them against a schema; this module only reads the package's files.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable

from durable_graph.core.errors import ProcessingError
from durable_graph.postgres.config import check_schema

_FUNCTION_FILE = re.compile(r"\d\d_[a-z0-9_]+\.sql")
INSTALL_FILE = "install.sql"


@dataclass(frozen=True, slots=True)
class SqlFile:
    """A migration or function file: its name and text."""

    name: str
    text: str


def _files(folder: str, pattern: re.Pattern[str] | None = None) -> list[SqlFile]:
    root: Traversable = resources.files("durable_graph") / folder
    found = [
        SqlFile(entry.name, entry.read_text(encoding="utf-8"))
        for entry in root.iterdir()
        if entry.is_file()
        and entry.name.endswith(".sql")
        and not entry.name.endswith(".rollback.sql")
        and (pattern is None or pattern.fullmatch(entry.name) is not None)
    ]
    return sorted(found, key=lambda f: f.name)


def migration_files() -> list[SqlFile]:
    """The yoyo migrations, in order (``migrations/NNNN.name.sql``)."""
    return _files("_migrations")


def function_files() -> list[SqlFile]:
    """The function definitions, in install order (``sql/NN_name.sql``; not install.sql)."""
    return _files("_sql", _FUNCTION_FILE)


def install_file() -> str:
    """The text of ``sql/install.sql``."""
    root: Traversable = resources.files("durable_graph") / "_sql" / INSTALL_FILE
    return root.read_text(encoding="utf-8")


def required_version() -> int:
    """The schema version this package needs: the number of its migrations."""
    return len(migration_files())


def release() -> str:
    """This package's release: one version for the package, the schema and the SQL API."""
    from durable_graph._version import __version__

    return __version__


def release_order(value: str | None) -> tuple[int, ...] | None:
    """A release ('0.2.0') as a tuple that sorts as releases do; None when absent or malformed
    (the schema_meta guard's rule, ``sql/98_meta.sql``)."""
    if value is None or re.fullmatch(r"\d{1,6}(\.\d{1,6}){0,3}", value) is None:
        return None
    return tuple(int(part) for part in value.split("."))


# --- the expected function bodies ------------------------------------------------------------

_CREATE_FUNCTION = re.compile(
    r"CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(", re.IGNORECASE
)
_DOLLAR_TAG = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")


def function_bodies(text: str) -> list[tuple[str, str]]:
    """(name, body) of every ``CREATE FUNCTION`` of an SQL file, body as ``pg_proc.prosrc``.

    A small lexer: skips ``--`` and ``/* */`` comments and quoted strings, so a name in a comment
    counts for nothing; the first dollar-quoted string after a ``CREATE FUNCTION`` is its body
    (other dollar-quoted strings, as in ``DO`` blocks, are skipped).
    """
    found: list[tuple[str, str]] = []
    pending: str | None = None
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif c in "'\"":
            end = i + 1
            while end < n:
                if text[end] == c and text.startswith(c * 2, end):
                    end += 2
                elif text[end] == c:
                    break
                else:
                    end += 1
            i = end + 1
        elif (
            c == "$"
            and (tag := _DOLLAR_TAG.match(text, i)) is not None
            and not (i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_"))
        ):
            start = tag.end()
            end = text.find(tag.group(0), start)
            if end < 0:
                raise ValueError(f"unterminated {tag.group(0)} string")
            if pending is not None:
                found.append((pending, text[start:end]))
                pending = None
            i = end + len(tag.group(0))
        elif c in "cC" and (create := _CREATE_FUNCTION.match(text, i)) is not None:
            pending = create.group(1)
            i = create.end()
        else:
            i += 1
    return found


@functools.cache
def _expected() -> tuple[tuple[str, str], ...]:
    bodies: dict[str, str] = {}
    for f in function_files():
        for name, body in function_bodies(f.text):
            bodies[name] = body  # a later CREATE OR REPLACE wins, as in the database
    return tuple(sorted(bodies.items()))


def expected_functions() -> list[tuple[str, str]]:
    """Every function this package installs: (name, body), sorted (the digest's order)."""
    return list(_expected())


def _digest(functions: list[tuple[str, str]]) -> str:
    joined = "\x1e".join(f"{name}\x1f{body}" for name, body in sorted(functions))
    return hashlib.sha256(joined.encode("utf-8")).hexdigest()


@functools.cache
def functions_digest() -> str:
    """sha256 of this package's function bodies, as ``_DIGEST_SQL`` computes it when installed."""
    return _digest(expected_functions())


# --- the install script --------------------------------------------------------------------

_INCLUDE = re.compile(r"^\\ir\s+(\S+)\s*$", re.MULTILINE)


def install_script(schema: str) -> str:
    """The complete install script of ``schema`` for a DBA to review and run with psql.

    ``sql/install.sql`` with the schema set and every file it includes inlined: idempotent,
    it installs or upgrades exactly as `migrate` does, in one transaction.
    """
    check_schema(schema)
    sources = {f"../migrations/{f.name}": f for f in migration_files()}
    sources.update({f.name: f for f in function_files()})

    def inline(match: re.Match[str]) -> str:
        f = sources.get(match.group(1))
        if f is None:
            raise ProcessingError(f"install.sql includes {match.group(1)}, which is not packaged")
        return f"-- {match.group(1)}\n{f.text.rstrip()}\n-- end of {match.group(1)}"

    header = (
        f"-- durable_graph {release()} install script for schema {schema}: version "
        f"{required_version()}, functions {functions_digest()}\n"
        "-- Generated by `durable-graph sql` from sql/install.sql; apply with: psql -f FILE\n"
        f"\\set schema {schema}\n"
    )
    return header + _INCLUDE.sub(lambda m: inline(m), install_file())


__all__ = [
    "INSTALL_FILE",
    "SqlFile",
    "expected_functions",
    "function_bodies",
    "function_files",
    "functions_digest",
    "install_file",
    "install_script",
    "migration_files",
    "release",
    "release_order",
    "required_version",
]
