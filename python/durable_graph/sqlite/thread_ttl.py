"""The SQLite storage's thread TTLs (``migrate_v10.sql``; SPEC §24.1) — `ThreadTtlTx`, a part of
`durable_graph.sqlite.storage.SqliteTx`."""

from __future__ import annotations

import sqlite3
from datetime import datetime

from durable_graph.core.scalars import to_micros
from durable_graph.embedded.rows import TtlRow
from durable_graph.sqlite.queries import Queries
from durable_graph.sqlite.rows import at, ts


def _row_of(row: sqlite3.Row) -> TtlRow:
    return TtlRow(
        row["thread_id"], float(row["minutes"]), row["strategy"], row["first_commit_order"],
        at(row["set_at"]), at(row["due_at"]), ts(row["swept_at"]),
    )  # fmt: skip


class ThreadTtlTx(Queries):
    """TTL rows over the transaction's connection (the `Tx` methods of SPEC §24.1)."""

    __slots__ = ()
    _now_us: int

    def ttl_row(self, thread_id: str) -> TtlRow | None:
        row = self._one("SELECT * FROM thread_ttls WHERE thread_id = ?", (thread_id,))
        return None if row is None else _row_of(row)

    def put_ttl_row(self, row: TtlRow) -> None:
        self._run(
            "INSERT OR REPLACE INTO thread_ttls (thread_id, minutes, strategy,"
            " first_commit_order, set_at, due_at, swept_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                row.thread_id, row.minutes, row.strategy, row.first_commit_order,
                to_micros(row.set_at), to_micros(row.due_at),
                None if row.swept_at is None else to_micros(row.swept_at),
            ),
        )  # fmt: skip

    def drop_ttl_row(self, thread_id: str) -> None:
        self._run("DELETE FROM thread_ttls WHERE thread_id = ?", (thread_id,))

    def due_ttl_rows(self, limit: int) -> list[TtlRow]:
        rows = self._all(
            "SELECT * FROM thread_ttls WHERE due_at <= ? ORDER BY due_at, thread_id LIMIT ?",
            (self._now_us, limit),
        )
        return [_row_of(r) for r in rows]

    def entry_activity(self, thread_id: str) -> datetime | None:
        row = self._one(
            "SELECT max(coalesce(closed_at, submitted_at)) FROM queue_entries WHERE thread_id = ?",
            (thread_id,),
        )
        return None if row is None else ts(row[0])


__all__ = ["ThreadTtlTx"]
