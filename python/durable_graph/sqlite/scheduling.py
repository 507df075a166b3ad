"""The SQLite storage's SPEC §15 tables (``migrate_v4.sql``): concurrency limits, schedules, and
the queue's counts by kind — `SchedulingTx`, a part of `durable_graph.sqlite.storage.SqliteTx`."""

from __future__ import annotations

import sqlite3
from datetime import datetime

from durable_graph.core.model import ANY, TenantFilter
from durable_graph.core.scheduling import encoded_schedule
from durable_graph.core.validation import to_micros
from durable_graph.embedded.rows import ScheduleRow
from durable_graph.sqlite.queries import Queries
from durable_graph.sqlite.rows import at, ts

_SCOPE_COLUMN = {"tenant": "tenant", "kind": "kind"}


class SchedulingTx(Queries):
    """Limits and schedules over the transaction's connection (the `Tx` methods of SPEC §15)."""

    __slots__ = ()
    _now_us: int

    def limit_of(self, scope: str, name: str) -> int | None:
        row = self._one(
            "SELECT max_leases FROM queue_limits WHERE scope = ? AND name = ?", (scope, name)
        )
        return None if row is None else int(row[0])

    def live_leases(self, scope: str, name: str, at_most: int) -> int:
        # queue_entries_leased_{tenant,kind}_idx: only the leased entries of that tenant/kind.
        column = _SCOPE_COLUMN[scope]
        row = self._one(
            f"SELECT count(*) FROM (SELECT 1 FROM queue_entries WHERE {column} = ?"
            " AND lease_token IS NOT NULL AND lease_expires_at > ? LIMIT ?)",
            (name, self._now_us, at_most),
        )
        return 0 if row is None else int(row[0])

    def put_limit(self, scope: str, name: str, max_leases: int) -> None:
        self._run(
            "INSERT INTO queue_limits (scope, name, max_leases) VALUES (?, ?, ?)"
            " ON CONFLICT (scope, name) DO UPDATE SET max_leases = excluded.max_leases",
            (scope, name, max_leases),
        )

    def drop_limit(self, scope: str, name: str) -> bool:
        return self._run("DELETE FROM queue_limits WHERE scope = ? AND name = ?", (scope, name)) > 0

    def all_limits(self) -> list[tuple[str, str, int]]:
        rows = self._all("SELECT scope, name, max_leases FROM queue_limits ORDER BY scope, name")
        return [(r[0], r[1], int(r[2])) for r in rows]

    def schedule_row(self, name: str) -> ScheduleRow | None:
        row = self._one("SELECT * FROM schedules WHERE name = ?", (name,))
        return None if row is None else _schedule_of(row)

    def put_schedule_row(self, row: ScheduleRow) -> None:
        self._run(
            "INSERT OR REPLACE INTO schedules (name, cron, timezone, thread_id, input, kind,"
            " tenant, priority, max_attempts, catch_up, paused, created_at, last_slot)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row.name, row.cron, row.timezone, row.thread_id, row.input, row.kind, row.tenant,
                row.priority, row.max_attempts, int(row.catch_up), int(row.paused),
                to_micros(row.created_at), _micros(row.last_slot),
            ),
        )  # fmt: skip

    def drop_schedule(self, name: str) -> bool:
        return self._run("DELETE FROM schedules WHERE name = ?", (name,)) > 0

    def schedule_rows(self) -> list[ScheduleRow]:
        return [_schedule_of(r) for r in self._all("SELECT * FROM schedules ORDER BY name")]

    def waiting_by_kind(self, tenant: TenantFilter) -> dict[str, int]:
        rows = self._all(
            "SELECT kind, count(*) FROM queue_entries WHERE outcome_kind IS NULL"
            " AND (lease_expires_at IS NULL OR lease_expires_at <= :now)"
            " AND (:any OR tenant IS :tenant) GROUP BY kind ORDER BY kind",
            {
                "now": self._now_us,
                "any": tenant is ANY,
                "tenant": None if tenant is ANY else tenant,
            },
        )
        return {r[0]: int(r[1]) for r in rows}


def _micros(value: datetime | None) -> int | None:
    return None if value is None else to_micros(value)


def _schedule_of(row: sqlite3.Row) -> ScheduleRow:
    return ScheduleRow.of(
        encoded_schedule(row), bool(row["paused"]), at(row["created_at"]), ts(row["last_slot"])
    )


__all__ = ["SchedulingTx"]
