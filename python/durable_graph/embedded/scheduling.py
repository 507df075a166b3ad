"""SPEC §15 for the embedded stores, over a `Storage`: the lease's head pick under concurrency
limits, the limits' calls, and the schedules' calls (as ``sql/72_scheduling.sql`` on PostgreSQL).

A lease runs in the storage's write transaction (SQLite ``BEGIN IMMEDIATE``, the memory store's
lock), so counting a tenant's or kind's live leases and taking one more is race-free: no other
lease runs between the count and the write.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from durable_graph.core.errors import NotFound, ValidationError
from durable_graph.core.model import TenantFilter, Ticket
from durable_graph.core.scheduling import (
    ConcurrencyLimit,
    LimitScope,
    Schedule,
    StoredSchedule,
    check_limit_args,
    check_schedule,
    check_schedule_name,
    check_scope,
    check_slot,
    other_tenants_name,
    schedule_fields,
    slot_key,
    stored_of,
)
from durable_graph.core.validation import check_identifier
from durable_graph.embedded.common import submitted_again
from durable_graph.embedded.rows import EntryRow, HeadPick, ScheduleRow
from durable_graph.embedded.storage import Storage, Tx


def pick_head(tx: Tx, tenant: TenantFilter, kinds: tuple[str, ...] | None) -> EntryRow | None:
    """The head a lease takes (SPEC §5, §15): the first leasable head in priority order whose
    tenant and kind are under their concurrency limits. A head whose tenant (or kind) is at its
    limit waits; its tenant (kind) is passed over for the rest of this pick, so a pick reads at
    most one head per full tenant or kind."""
    full_tenants: set[str] = set()
    full_kinds: set[str] = set()
    while True:
        head = tx.leasable_head(
            HeadPick(tenant, kinds, frozenset(full_tenants), frozenset(full_kinds))
        )
        if head is None:
            return None
        if head.tenant is not None and _full(tx, "tenant", head.tenant):
            full_tenants.add(head.tenant)
        elif _full(tx, "kind", head.kind):
            full_kinds.add(head.kind)
        else:
            return head


def _full(tx: Tx, scope: str, name: str) -> bool:
    limit = tx.limit_of(scope, name)
    return limit is not None and tx.live_leases(scope, name, limit) >= limit


def _stored(row: ScheduleRow) -> StoredSchedule:
    return stored_of(row, row.paused, row.created_at, row.last_slot)


class EmbeddedScheduling:
    """The limits' and schedules' calls of `EmbeddedRunQueue` (SPEC §15)."""

    _storage: Storage
    _max: int

    def set_limit(self, scope: LimitScope, name: str, max_leases: int) -> ConcurrencyLimit:
        limit = check_limit_args(scope, name, max_leases)
        with self._storage.write() as tx:
            tx.put_limit(limit.scope, limit.name, limit.max_leases)
        return limit

    def limits(self) -> list[ConcurrencyLimit]:
        with self._storage.read() as tx:
            rows = tx.all_limits()
        return [ConcurrencyLimit(check_scope(s), n, m) for s, n, m in rows]

    def remove_limit(self, scope: LimitScope, name: str) -> bool:
        checked = check_scope(scope)
        check_identifier("name", name)
        with self._storage.write() as tx:
            return tx.drop_limit(checked, name)

    def put_schedule(self, schedule: Schedule) -> StoredSchedule:
        s = check_schedule(schedule, self._max)
        with self._storage.write() as tx:
            old = tx.schedule_row(s.name)
            if old is not None and old.tenant != s.tenant:
                raise ValidationError(other_tenants_name(s.name))
            # A schedule put again keeps its store fields (paused, created, the newest slot).
            if old is None:
                row = ScheduleRow.of(s, False, tx.now, None)
            else:
                row = replace(old, **schedule_fields(s))
            tx.put_schedule_row(row)
            return _stored(row)

    def schedules(self) -> list[StoredSchedule]:
        with self._storage.read() as tx:
            return [_stored(r) for r in tx.schedule_rows()]

    def remove_schedule(self, name: str) -> bool:
        checked = check_schedule_name(name)
        with self._storage.write() as tx:
            return tx.drop_schedule(checked)

    def pause_schedule(self, name: str, paused: bool = True) -> StoredSchedule:
        checked = check_schedule_name(name)
        if not isinstance(paused, bool):
            raise ValidationError("paused must be a bool")
        with self._storage.write() as tx:
            row = tx.schedule_row(checked)
            if row is None:
                raise NotFound(f"schedule {checked!r} not found")
            row = replace(row, paused=paused)
            tx.put_schedule_row(row)
            return _stored(row)

    def fire_schedule(self, name: str, slot: datetime) -> Ticket | None:
        checked = check_schedule_name(name)
        at = check_slot("slot", slot)
        with self._storage.write() as tx:
            row = tx.schedule_row(checked)
            if row is None:
                raise NotFound(f"schedule {checked!r} not found")
            # Not due (paused, in the future, at or before creation), or already submitted (at
            # or before the newest slot): nothing. Else submit under the slot's key, once.
            if (
                row.paused
                or at > tx.now
                or at <= row.created_at
                or (row.last_slot is not None and at <= row.last_slot)
            ):
                return None
            # A schedule belongs to its thread's incarnation (D241): once that thread is
            # deleted, the slot is spent and nothing submitted (no re-created thread, no run in
            # the next thread of that id).
            deleted = tx.deleted_at_of(row.thread_id)
            if deleted is not None and deleted >= row.created_at:
                tx.put_schedule_row(replace(row, last_slot=at))
                return None
            key = slot_key(row.name, at)
            kept = tx.entry_by_key(row.tenant, key)
            if kept is None:
                ticket = Ticket(tx.insert_entry(submitted_again(row, key)), existing=False)
            else:
                ticket = Ticket(kept.entry_id, existing=True)
            tx.put_schedule_row(replace(row, last_slot=at))
            return ticket


__all__ = ["EmbeddedScheduling", "pick_head"]
