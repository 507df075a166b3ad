"""The SQLite storage's worker registry (``migrate_v7.sql``'s ``workers`` table) — `WorkersTx`,
a part of `durable_graph.sqlite.storage.SqliteTx`."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime

from durable_graph.core.validation import from_micros, to_micros
from durable_graph.core.workers import WorkerSeen, check_worker_state
from durable_graph.sqlite.queries import Queries


def _seen_of(row: sqlite3.Row) -> WorkerSeen:
    kinds = None if row["kinds"] is None else tuple(json.loads(row["kinds"]))
    return WorkerSeen(
        row["holder"], row["host"], int(row["pid"]), kinds, check_worker_state(row["state"]),
        from_micros(row["started_at"]), from_micros(row["last_seen"]),
    )  # fmt: skip


class WorkersTx(Queries):
    """The registry's rows over the transaction's connection."""

    __slots__ = ()

    def worker_row(self, holder: str) -> WorkerSeen | None:
        row = self._one("SELECT * FROM workers WHERE holder = ?", (holder,))
        return None if row is None else _seen_of(row)

    def put_worker_row(self, row: WorkerSeen) -> None:
        kinds = None if row.kinds is None else json.dumps(list(row.kinds))
        self._run(
            "INSERT OR REPLACE INTO workers (holder, host, pid, kinds, state, started_at,"
            " last_seen) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                row.holder, row.host, row.pid, kinds, row.state, to_micros(row.started_at),
                to_micros(row.last_seen),
            ),
        )  # fmt: skip

    def forget_workers(self, before: datetime) -> None:
        self._run("DELETE FROM workers WHERE last_seen < ?", (to_micros(before),))

    def worker_rows(self, since: datetime, after: str | None, limit: int) -> list[WorkerSeen]:
        rows = self._all(
            "SELECT * FROM workers WHERE last_seen >= ? AND state <> 'stopped'"
            " AND (? IS NULL OR holder > ?) ORDER BY holder LIMIT ?",
            (to_micros(since), after, after, limit),
        )
        return [_seen_of(r) for r in rows]
