"""The in-memory storage's SPEC §15 state: concurrency limits, schedules, and the queue's counts by
kind — `SchedulingTx`, a part of `durable_graph.memory.store.MemoryTx` (as
`durable_graph.sqlite.scheduling` is of the SQLite one)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from durable_graph.core.listing import state_at
from durable_graph.core.model import ANY, TenantFilter
from durable_graph.embedded.rows import ScheduleRow
from durable_graph.memory.state import State


class SchedulingTx:
    """Limits and schedules over the store's dicts (the `Tx` methods of SPEC §15)."""

    __slots__ = ()
    _s: State
    now: datetime

    def limit_of(self, scope: str, name: str) -> int | None:
        return self._s.limits.get((scope, name))

    def live_leases(self, scope: str, name: str, at_most: int) -> int:
        count = 0
        for queue in self._s.queues.values():
            e = queue.leased
            if e is None or e.lease_expires_at is None or not self.now < e.lease_expires_at:
                continue
            if (e.tenant if scope == "tenant" else e.kind) == name:
                count += 1
                if count >= at_most:
                    break
        return count

    def put_limit(self, scope: str, name: str, max_leases: int) -> None:
        self._s.limits[(scope, name)] = max_leases

    def drop_limit(self, scope: str, name: str) -> bool:
        return self._s.limits.pop((scope, name), None) is not None

    def all_limits(self) -> list[tuple[str, str, int]]:
        items = sorted(self._s.limits.items(), key=lambda i: (i[0][0], i[0][1].encode()))
        return [(scope, name, m) for (scope, name), m in items]

    def schedule_row(self, name: str) -> ScheduleRow | None:
        row = self._s.schedules.get(name)
        return None if row is None else replace(row)

    def put_schedule_row(self, row: ScheduleRow) -> None:
        self._s.schedules[row.name] = replace(row)

    def drop_schedule(self, name: str) -> bool:
        return self._s.schedules.pop(name, None) is not None

    def schedule_rows(self) -> list[ScheduleRow]:
        return [replace(self._s.schedules[n]) for n in sorted(self._s.schedules, key=str.encode)]

    def waiting_by_kind(self, tenant: TenantFilter) -> dict[str, int]:
        counts: dict[str, int] = {}
        for queue in self._s.queues.values():
            for rank in queue.ranks:
                for e in rank.values():
                    if (tenant is ANY or e.tenant == tenant) and state_at(
                        e.outcome_kind, e.lease_expires_at, self.now
                    ) == "open":
                        counts[e.kind] = counts.get(e.kind, 0) + 1
        return dict(sorted(counts.items()))


__all__ = ["SchedulingTx"]
