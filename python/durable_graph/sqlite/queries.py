"""How every part of `durable_graph.sqlite.storage.SqliteTx` (the storage's own tables,
`SchedulingTx`, `WorkersTx`) runs its SQL on the transaction's connection."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

Params = Sequence[Any] | dict[str, Any]
"""A statement's parameters: positional (``?``) or named (``:name``)."""


class Queries:
    """Run one statement on ``_conn``: the first row, every row, or the count of rows changed."""

    __slots__ = ()
    _conn: sqlite3.Connection

    def _one(self, sql: str, params: Params = ()) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self._conn.execute(sql, params).fetchone()
        return row

    def _all(self, sql: str, params: Params = ()) -> list[sqlite3.Row]:
        return self._conn.execute(sql, params).fetchall()

    def _run(self, sql: str, params: Params = ()) -> int:
        return self._conn.execute(sql, params).rowcount


__all__ = ["Params", "Queries"]
