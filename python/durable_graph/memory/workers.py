"""The in-memory storage's worker registry — `WorkersTx`, a part of
`durable_graph.memory.store.MemoryTx` (as `durable_graph.sqlite.workers` is of the SQLite one)."""

from __future__ import annotations

from datetime import datetime

from durable_graph.core.workers import WorkerSeen
from durable_graph.memory.state import State


class WorkersTx:
    """The registry's rows in ``State.workers`` (holder -> row)."""

    __slots__ = ()
    _s: State

    def worker_row(self, holder: str) -> WorkerSeen | None:
        return self._s.workers.get(holder)

    def put_worker_row(self, row: WorkerSeen) -> None:
        self._s.workers[row.holder] = row

    def forget_workers(self, before: datetime) -> None:
        gone = [h for h, row in self._s.workers.items() if row.last_seen < before]
        for holder in gone:
            del self._s.workers[holder]

    def worker_rows(self, since: datetime, after: str | None, limit: int) -> list[WorkerSeen]:
        floor = None if after is None else after.encode()
        rows = [
            row
            for row in self._s.workers.values()
            if row.last_seen >= since
            and row.state != "stopped"
            and (floor is None or row.holder.encode() > floor)
        ]
        return sorted(rows, key=lambda row: row.holder.encode())[:limit]
