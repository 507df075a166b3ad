"""What the server did over a window of operations, counted (SPEC §18.2, §21).

One implementation for the job profile (`tests.bench.job_profile`) and the budget test
(``tests/test_budgets_pg.py``). The server runs with `SETTINGS` (``pg_stat_statements`` preloaded,
``track = all``; ``autovacuum`` off and checkpoints an hour apart, so that only the operations
write WAL in a window and no checkpoint's full-page images fall in it) and `prepare` creates the
two extensions. A window is opened by `start_window` and closed by `end_window`, both on an admin
connection (autocommit) to a database of its own: its statements are the harness's and are not
counted. Over the window:

- statements: every statement executed in the other databases, nested ones (inside PL/pgSQL)
  included, from ``pg_stat_statements`` (its ``calls``), each kept with its text for the listing;
  server time: the execution time of the top-level ones (``toplevel``);
- the WAL: its bytes (the distance between the window's two LSNs, as ``pg_wal_lsn_diff`` gives
  it), and from its records (``pg_get_wal_stats``) the commit records (durable transactions:
  a read-only transaction writes none, subtransactions fold into their top-level commit), index
  entries (B-tree leaf inserts, splits included), heap row versions (insert, update, HOT update)
  and row-lock records (``Heap/LOCK``, ``Heap2/LOCK_UPDATED``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

SETTINGS = {
    "shared_preload_libraries": "pg_stat_statements",
    "pg_stat_statements.track": "all",
    "autovacuum": "off",
    "checkpoint_timeout": "1h",
}
"""The server settings a window needs (for `durable_graph.testkit.postgres.server.start`)."""

_INDEX = ("INSERT_LEAF", "INSERT_POST", "SPLIT_L", "SPLIT_R")
_HEAP = ("INSERT", "INSERT+INIT", "UPDATE", "UPDATE+INIT", "HOT_UPDATE", "HOT_UPDATE+INIT")
_HOT = ("HOT_UPDATE", "HOT_UPDATE+INIT")


def prepare(admin: psycopg.Connection[Any]) -> None:
    """Create the two extensions a window reads (in the admin's database)."""
    admin.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    admin.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")


@dataclass(frozen=True)
class Statement:
    """One ``pg_stat_statements`` entry of a window: a statement's text and its totals."""

    query: str
    toplevel: bool
    calls: int
    exec_ms: float


@dataclass(frozen=True)
class Inventory:
    """A window of ``ops`` operations: its totals, and its figures per operation."""

    ops: int
    statements: tuple[Statement, ...]
    wal_bytes_total: int
    wal_records: dict[str, int]
    """{"Rmgr/TYPE": records}, as ``pg_get_wal_stats`` names them."""

    def _records(self, rmgr: str, types: tuple[str, ...]) -> float:
        return sum(self.wal_records.get(f"{rmgr}/{t}", 0) for t in types) / self.ops

    @property
    def statement_count(self) -> float:
        """Statements executed per operation, nested included."""
        return sum(s.calls for s in self.statements) / self.ops

    @property
    def server_ms(self) -> float:
        """The top-level statements' execution time per operation."""
        return sum(s.exec_ms for s in self.statements if s.toplevel) / self.ops

    @property
    def wal_bytes(self) -> float:
        return self.wal_bytes_total / self.ops

    @property
    def commits(self) -> float:
        """Durable transactions (commit records) per operation."""
        return self._records("Transaction", ("COMMIT",))

    @property
    def index_entries(self) -> float:
        return self._records("Btree", _INDEX)

    @property
    def heap_versions(self) -> float:
        return self._records("Heap", _HEAP)

    @property
    def hot_updates(self) -> float:
        return self._records("Heap", _HOT)

    @property
    def lock_records(self) -> float:
        return self._records("Heap", ("LOCK",)) + self._records("Heap2", ("LOCK_UPDATED",))

    def top(self, n: int) -> list[tuple[float, str]]:
        """The ``n`` costliest top-level statements: (ms per operation, the start of its text)."""
        ranked = sorted((s for s in self.statements if s.toplevel), key=lambda s: -s.exec_ms)
        return [(s.exec_ms / self.ops, s.query[:60]) for s in ranked[:n]]

    def listing(self) -> list[str]:
        """Every statement of the window, most called first: calls per operation, top-level or
        nested, and its text."""
        ranked = sorted(self.statements, key=lambda s: (-s.calls, s.query))
        return [
            f"{s.calls / self.ops:6.2f}  {'top   ' if s.toplevel else 'nested'}  {s.query[:160]}"
            for s in ranked
        ]


def lsn(admin: psycopg.Connection[Any]) -> str:
    """The server's current WAL insert position."""
    row = admin.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
    assert row is not None
    return str(row[0])


def pg_lsn_diff(start: str, end: str) -> int:
    """The bytes from ``start`` to ``end`` (two LSNs), as PostgreSQL's ``pg_wal_lsn_diff``."""

    def value(position: str) -> int:
        hi, lo = position.split("/")
        return (int(hi, 16) << 32) + int(lo, 16)

    return value(end) - value(start)


def start_window(admin: psycopg.Connection[Any]) -> str:
    """Open a window: statement counts from zero; returns its start LSN."""
    admin.execute("SELECT pg_stat_statements_reset()")
    return lsn(admin)


def end_window(admin: psycopg.Connection[Any], start: str, ops: int) -> Inventory:
    """Close the window opened at ``start`` over ``ops`` operations and count it."""
    end = lsn(admin)
    rows = admin.execute(
        "SELECT regexp_replace(query, '\\s+', ' ', 'g'), toplevel, calls, total_exec_time"
        "  FROM pg_stat_statements"
        " WHERE dbid <> (SELECT oid FROM pg_database WHERE datname = current_database())"
    ).fetchall()
    records: list[tuple[Any, ...]] = []
    if end != start:  # a window of reads may write no WAL: walinspect refuses an empty range
        admin.execute("SELECT pg_switch_wal()")  # the window's WAL flushed: walinspect reads it
        records = admin.execute(
            'SELECT "resource_manager/record_type", count'
            " FROM pg_get_wal_stats(%s::pg_lsn, %s::pg_lsn, true)",
            (start, end),
        ).fetchall()
    return Inventory(
        ops=ops,
        statements=tuple(Statement(str(q), bool(t), int(c), float(ms)) for q, t, c, ms in rows),
        wal_bytes_total=pg_lsn_diff(start, end),
        wal_records={str(r[0]): int(r[1]) for r in records},
    )


__all__ = [
    "SETTINGS",
    "Inventory",
    "Statement",
    "end_window",
    "lsn",
    "pg_lsn_diff",
    "prepare",
    "start_window",
]
