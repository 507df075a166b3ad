"""Whether a partition proxy and the partitions behind it are current (SPEC §16.3), as a store
opening on the proxy, `durable_graph.postgres.migrations.verify` and ``partitions verify``
check it.

The proxy itself must be generated for this package's version and unchanged since; each
partition, asked through the proxy, must be at this version with this package's functions and
carry its own number. A partition that cannot be reached is not a wrong one (SPEC §16.3: a
partition that is down fails its own threads' calls, the others' go on), so `check` keeps the
two apart: a store opened during an outage opens, serves the live partitions and logs the
missing ones (`unavailable_message`); one whose partitions are all unreachable does not open,
as a store whose server is down does not; `verify` counts a missing partition as a problem (it
says "current" only of what it checked).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

from durable_graph.postgres.connection import failure_message

log = logging.getLogger("durable_graph.postgres.partitions")


@dataclass(frozen=True, slots=True)
class ProxyCheck:
    """What `check` found: ``problem`` (why the proxy or a reachable partition is not current,
    or None) and ``unavailable`` (each partition that could not be asked, by number: why)."""

    schema: str
    partitions: int
    problem: str | None = None
    unavailable: dict[int, str] = field(default_factory=dict)

    def unavailable_message(self) -> str:
        """The partitions that are down, named, with what reaching each said."""
        numbers = ", ".join(str(p) for p in sorted(self.unavailable))
        why = "; ".join(f"partition {p}: {e}" for p, e in sorted(self.unavailable.items()))
        return (
            f"partition(s) {numbers} of {self.partitions} of proxy schema {self.schema} are "
            f"unavailable ({why})"
        )

    def strict_problem(self) -> str | None:
        """``problem``, else the unavailable partitions as one (for `verify`)."""
        if self.problem is None and self.unavailable:
            return f"{self.unavailable_message()}: they could not be checked"
        return self.problem

    def opening_problem(self) -> str | None:
        """What stops a store from opening on the proxy: ``problem``, or every partition down.
        Some partitions down is logged (a warning naming them), not a problem."""
        if self.problem is not None:
            return self.problem
        if self.unavailable and len(self.unavailable) == self.partitions:
            return f"no partition can be reached: {self.unavailable_message()}"
        if self.unavailable:
            _warn(
                f"{self.unavailable_message()}; the store serves the other partitions, and "
                "calls on the threads and entries of these fail until they are back"
            )
        return None


_WARNED: dict[str, float] = {}
_WARN_AGAIN_AFTER = 60.0
"""A store opened twice in a row (a CLI command checks, then opens) warns once a minute."""


def _warn(message: str) -> None:
    now = time.monotonic()
    if now - _WARNED.get(message, -_WARN_AGAIN_AFTER) >= _WARN_AGAIN_AFTER:
        _WARNED.clear()  # only the latest outage's message is kept
        _WARNED[message] = now
        log.warning("%s", message)


def remedy(schema: str) -> str:
    """The command that regenerates a proxy and migrates its partitions."""
    return f"run durable-graph partitions migrate --dsn PROXY_DSN --schema {schema}"


@dataclass(frozen=True, slots=True)
class Expected:
    """What the proxy and its partitions must match, as `durable_graph.postgres.migrations`
    (which calls `check`, so this module does not import it) computes it: this package's
    schema ``version`` and ``functions_digest``, and ``routing_digest``, the digest of the
    functions installed in the proxy's schema now."""

    version: int
    functions_digest: str
    routing_digest: str


def check(
    conn: psycopg.Connection[Any], schema: str, meta: dict[str, str], expected: Expected
) -> ProxyCheck:
    """The proxy in ``schema`` (its ``schema_meta`` read as ``meta``) and its partitions: the
    proxy generated for this package's version and partition digest and its routing functions
    unchanged since; each partition that answers current and numbered right."""
    n = int(meta.get("partitions", "0"))
    fix = remedy(schema)
    if (
        meta.get("version") != str(expected.version)
        or meta.get("functions_digest") != expected.functions_digest
    ):
        return ProxyCheck(
            schema,
            n,
            f"proxy schema {schema} was generated for version {meta.get('version')} with other "
            f"SQL functions than this package's (version {expected.version}): {fix}",
        )
    if expected.routing_digest != meta.get("proxy_digest"):
        return ProxyCheck(
            schema,
            n,
            f"proxy schema {schema}: its routing functions were changed since generated: {fix}",
        )
    try:  # every partition at once (RUN ON ALL); each answers its own rows
        with conn.transaction():
            rows = _meta_rows(conn, schema, None)
    except psycopg.Error:
        pass  # one or more cannot be asked: each in turn, below
    else:
        return ProxyCheck(schema, n, _partitions_problem(schema, n, rows, list(range(n)), expected))
    down: dict[int, str] = {}
    for part in range(n):
        try:
            with conn.transaction():
                rows = _meta_rows(conn, schema, part)
        except psycopg.Error as exc:
            if not _unreachable(exc):
                return ProxyCheck(
                    schema,
                    n,
                    f"partition {part} of proxy schema {schema} could not be checked: "
                    f"{_one_line(exc)}",
                )
            down[part] = _one_line(exc)
            continue
        problem = _partitions_problem(schema, n, rows, [part], expected)
        if problem is not None:
            return ProxyCheck(schema, n, problem, down)
    return ProxyCheck(schema, n, None, down)


def _meta_rows(
    conn: psycopg.Connection[Any], schema: str, part: int | None
) -> list[tuple[str, str]]:
    """``schema_meta`` of partition ``part`` through the proxy (None: of every partition)."""
    ident = sql.Identifier(schema)
    if part is None:
        query = sql.SQL("SELECT key, value FROM {}._dg_all_schema_meta_v1()").format(ident)
        found = conn.execute(query).fetchall()
    else:
        query = sql.SQL("SELECT key, value FROM {}._dg_on_schema_meta_v1(%s)").format(ident)
        found = conn.execute(query, (part,)).fetchall()
    return [(str(k), str(v)) for k, v in found]


def _unreachable(exc: psycopg.Error) -> bool:
    """Whether the proxy could not reach the partition (PL/Proxy's own connection error, a
    connection failure, or the call's timeout while connecting), rather than the partition
    answering with an error (PL/Proxy passes those on as ``REMOTE ERROR``)."""
    state = exc.sqlstate or ""
    remote = "REMOTE ERROR" in str(exc)
    return (state == "XX000" and not remote) or state.startswith("08") or state == "57014"


def _one_line(exc: psycopg.Error) -> str:
    return " ".join(failure_message(exc).split())


def _partitions_problem(
    schema: str, n: int, rows: list[tuple[str, str]], parts: list[int], expected: Expected
) -> str | None:
    """Why the ``schema_meta`` ``rows`` of partitions ``parts`` (of ``n``) are not current and
    numbered ``parts``, or None."""
    values: dict[str, list[str]] = {}
    for key, value in rows:
        values.setdefault(key, []).append(value)
    k = len(parts)
    if (
        values.get("version") != [str(expected.version)] * k
        or values.get("functions_digest") != [expected.functions_digest] * k
    ):
        which = "a partition" if k > 1 else f"partition {parts[0]}"
        return (
            f"{which} of proxy schema {schema} is at another version or has other SQL "
            f"functions than this package's: {remedy(schema)}"
        )
    numbers = sorted(int(v) if v.isdigit() else -1 for v in values.get("partition", []))
    if numbers != parts or values.get("partitions") != [str(n)] * k:
        return (
            f"the partitions of proxy schema {schema} are numbered {numbers}, expected "
            f"{', '.join(map(str, parts)) if k < n else f'0..{n - 1}'} of {n}: the cluster's "
            "DSNs are wrong"
        )
    return None


__all__ = ["Expected", "ProxyCheck", "check", "log", "remedy"]
