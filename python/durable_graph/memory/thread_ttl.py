"""The in-memory storage's thread TTLs (SPEC §24.1) — `ThreadTtlTx`, a part of
`durable_graph.memory.store.MemoryTx` (as `durable_graph.sqlite.thread_ttl` is of the SQLite one)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from durable_graph.embedded.rows import TtlRow
from durable_graph.memory.state import State


class ThreadTtlTx:
    """TTL rows over the store's dict (the `Tx` methods of SPEC §24.1)."""

    __slots__ = ()
    _s: State
    now: datetime

    def ttl_row(self, thread_id: str) -> TtlRow | None:
        row = self._s.thread_ttls.get(thread_id)
        return None if row is None else replace(row)

    def put_ttl_row(self, row: TtlRow) -> None:
        self._s.thread_ttls[row.thread_id] = replace(row)

    def drop_ttl_row(self, thread_id: str) -> None:
        self._s.thread_ttls.pop(thread_id, None)

    def due_ttl_rows(self, limit: int) -> list[TtlRow]:
        due = [r for r in self._s.thread_ttls.values() if r.due_at <= self.now]
        due.sort(key=lambda r: (r.due_at, r.thread_id.encode()))
        return [replace(r) for r in due[:limit]]

    def entry_activity(self, thread_id: str) -> datetime | None:
        # A scan of the kept entries: the memory store keeps no per-thread list of closed ones.
        times = [
            e.closed_at or e.submitted_at
            for e in self._s.entries.values()
            if e.thread_id == thread_id
        ]
        return max(times, default=None)


__all__ = ["ThreadTtlTx"]
