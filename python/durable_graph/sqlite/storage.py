"""`SqliteTx`: the `Tx` operations of the embedded rules, one SQL statement (or two) each, over
the tables of ``schema.sql``. Timestamps and durations are integer microseconds in the file and
`datetime` / `timedelta` at this boundary, so ordering and equality are exact.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from durable_graph.core.model import ANY, Attempt, Event, PendingWrite, TenantFilter
from durable_graph.core.validation import (
    INT64_MAX,
    EncodedEvent,
    EncodedSubmission,
    EncodedWrite,
    decode_json,
    encode_json,
    from_micros,
    to_micros,
)
from durable_graph.embedded.rows import (
    CheckpointRow,
    ClaimRow,
    EffectRow,
    EntryQuery,
    EntryRow,
    HeadPick,
    Place,
    ThreadRow,
)
from durable_graph.sqlite.items import ItemsTx
from durable_graph.sqlite.rows import at, checkpoint_of, effect_of, entry_of, event_of, thread_of
from durable_graph.sqlite.scheduling import SchedulingTx
from durable_graph.sqlite.thread_ttl import ThreadTtlTx
from durable_graph.sqlite.workers import WorkersTx

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")
_OPEN = "outcome_kind IS NULL"
_PLACE = (
    "coalesce(open_since, entry_id),"
    " CASE WHEN list_after IS NULL AND mode = 'interrupt' THEN 1 ELSE 2 END,"
    " coalesce(list_after, entry_id), list_after IS NOT NULL, entry_id"
)
"""`EntryRow.list_place` in SQL: the key of ``queue_entries_listing_idx`` (schema version 6)."""
_PLACE_NAMES = ("since", "rank", "anchor", "behind", "id")


def _us(value: timedelta) -> int:
    return value // timedelta(microseconds=1)


class SqliteTx(SchedulingTx, WorkersTx, ItemsTx, ThreadTtlTx):
    """One transaction on one connection; ``now`` is store time read once (D4)."""

    __slots__ = ("_conn", "_now_us", "now")

    def __init__(self, conn: sqlite3.Connection, now_us: int) -> None:
        self._conn = conn
        self._now_us = now_us
        self.now = from_micros(now_us)

    def _next(self, counter: str) -> int:
        row = self._one(
            "UPDATE counters SET value = value + 1 WHERE name = ? RETURNING value", (counter,)
        )
        assert row is not None
        return int(row[0])

    def issue_token(self) -> int:
        return self._next("fencing_token_seq")

    # --- threads and claims --------------------------------------------------------------

    def claim_of(self, thread_id: str) -> ClaimRow | None:
        row = self._one(
            "SELECT claim_token, claim_holder, claim_expires_at, claim_ttl FROM threads"
            " WHERE thread_id = ? AND claim_token IS NOT NULL",
            (thread_id,),
        )
        if row is None:
            return None
        return ClaimRow(row[0], row[1], at(row[2]), timedelta(microseconds=row[3]))

    def put_claim(self, thread_id: str, claim: ClaimRow) -> None:
        self._run(
            "INSERT INTO threads (thread_id, claim_token, claim_holder, claim_expires_at,"
            " claim_ttl) VALUES (:t, :token, :holder, :expires, :ttl) ON CONFLICT (thread_id)"
            " DO UPDATE SET claim_token = :token, claim_holder = :holder,"
            " claim_expires_at = :expires, claim_ttl = :ttl",
            {
                "t": thread_id,
                "token": claim.token,
                "holder": claim.holder,
                "expires": to_micros(claim.expires_at),
                "ttl": _us(claim.ttl),
            },
        )

    def set_claim_expiry(self, thread_id: str, expires_at: datetime) -> None:
        self._run(
            "UPDATE threads SET claim_expires_at = ? WHERE thread_id = ?",
            (to_micros(expires_at), thread_id),
        )

    def drop_claim(self, thread_id: str) -> None:
        self._run(
            "UPDATE threads SET claim_token = NULL, claim_holder = NULL, claim_expires_at = NULL,"
            " claim_ttl = NULL WHERE thread_id = ?",
            (thread_id,),
        )

    def thread(self, thread_id: str) -> ThreadRow | None:
        row = self._one("SELECT * FROM threads WHERE thread_id = ? AND live", (thread_id,))
        return None if row is None else thread_of(row)

    def create_thread(self, thread_id: str, parent_thread_id: str | None) -> None:
        self._run(
            "INSERT INTO threads (thread_id, live, parent_thread_id, created_at, updated_at,"
            " first_commit_order) VALUES (:t, 1, :p, :now, :now, :order)"
            " ON CONFLICT (thread_id) DO UPDATE SET live = 1, parent_thread_id = :p,"
            " created_at = :now, updated_at = :now, first_commit_order = :order, head_id = NULL",
            {
                "t": thread_id,
                "p": parent_thread_id,
                "now": self._now_us,
                "order": self._next("thread_first_commit_seq"),
            },
        )

    def last_seq_of(self, thread_id: str) -> int:
        row = self._one("SELECT last_seq FROM threads WHERE thread_id = ?", (thread_id,))
        return 0 if row is None else int(row[0])

    def set_head(self, thread_id: str, head_id: str | None) -> None:
        self._run("UPDATE threads SET head_id = ? WHERE thread_id = ?", (head_id, thread_id))

    def remove_thread(self, thread_id: str) -> None:
        for table in ("pending_writes", "checkpoints", "events", "effects"):
            self._run(f"DELETE FROM {table} WHERE thread_id = ?", (thread_id,))
        self._run(
            "UPDATE threads SET live = 0, parent_thread_id = NULL, head_id = NULL,"
            " created_at = NULL, updated_at = NULL, first_commit_order = NULL,"
            " claim_token = NULL, claim_holder = NULL, claim_expires_at = NULL, claim_ttl = NULL,"
            " deleted_at = CASE WHEN live THEN :now ELSE deleted_at END"
            " WHERE thread_id = :t",
            {"t": thread_id, "now": self._now_us},
        )

    def deleted_at_of(self, thread_id: str) -> datetime | None:
        row = self._one("SELECT deleted_at FROM threads WHERE thread_id = ?", (thread_id,))
        return None if row is None or row[0] is None else at(int(row[0]))

    def descendants(self, thread_id: str) -> list[str]:
        rows = self._all(
            "WITH RECURSIVE tree (thread_id) AS ("
            "  SELECT :t"
            "  UNION"
            "  SELECT t.thread_id FROM threads t JOIN tree ON t.parent_thread_id = tree.thread_id"
            "  WHERE t.live"
            ") SELECT thread_id FROM tree",
            {"t": thread_id},
        )
        return [r[0] for r in rows]

    def children_of(self, thread_id: str) -> list[str]:
        rows = self._all(
            "SELECT thread_id FROM threads WHERE parent_thread_id = ? AND live"
            " ORDER BY first_commit_order",
            (thread_id,),
        )
        return [r[0] for r in rows]

    def thread_page(self, after: str | None, limit: int) -> list[ThreadRow]:
        # SQLite's BINARY collation is UTF-8 byte order (rule 15).
        rows = self._all(
            "SELECT * FROM threads WHERE live AND (? IS NULL OR thread_id > ?)"
            " ORDER BY thread_id LIMIT ?",
            (after, after, limit),
        )
        return [thread_of(r) for r in rows]

    # --- checkpoints, writes, events, effects --------------------------------------------

    def checkpoint(self, thread_id: str, checkpoint_id: str) -> CheckpointRow | None:
        row = self._one(
            "SELECT * FROM checkpoints WHERE thread_id = ? AND checkpoint_id = ?",
            (thread_id, checkpoint_id),
        )
        return None if row is None else checkpoint_of(row)

    def insert_checkpoint(self, row: CheckpointRow) -> None:
        self._run(
            "INSERT INTO checkpoints (thread_id, checkpoint_id, seq, parent_id, run_id, state,"
            " metadata, next, created_at, committed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row.thread_id,
                row.checkpoint_id,
                row.seq,
                row.parent_id,
                row.run_id,
                row.state,
                row.metadata,
                encode_json("next", list(row.next), INT64_MAX),
                to_micros(row.created_at),
                to_micros(row.committed_at),
            ),
        )

    def remove_checkpoint(self, thread_id: str, checkpoint_id: str) -> None:
        for table in ("pending_writes", "checkpoints"):
            self._run(
                f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_id = ?",
                (thread_id, checkpoint_id),
            )

    def orphan(self, thread_id: str, removed: Sequence[str]) -> None:
        self._run(
            "UPDATE checkpoints SET parent_id = NULL WHERE thread_id = ?"
            " AND parent_id IN (SELECT value FROM json_each(?))",
            (thread_id, encode_json("removed", list(removed), INT64_MAX)),
        )

    def checkpoints_newest_first(self, thread_id: str) -> list[CheckpointRow]:
        return self.checkpoints_before(thread_id, None, -1)

    def checkpoints_before(
        self, thread_id: str, below_seq: int | None, limit: int
    ) -> list[CheckpointRow]:
        rows = self._all(
            "SELECT * FROM checkpoints WHERE thread_id = ? AND (? IS NULL OR seq < ?)"
            " ORDER BY seq DESC LIMIT ?",
            (thread_id, below_seq, below_seq, limit),
        )
        return [checkpoint_of(r) for r in rows]

    def latest_of_runs(self, thread_id: str, run_ids: Sequence[str]) -> CheckpointRow | None:
        row = self._one(
            "SELECT * FROM checkpoints WHERE thread_id = ?"
            " AND run_id IN (SELECT value FROM json_each(?)) ORDER BY seq DESC LIMIT 1",
            (thread_id, encode_json("run_ids", list(run_ids), INT64_MAX)),
        )
        return None if row is None else checkpoint_of(row)

    def run_in_history(self, thread_id: str, run_id: str) -> bool:
        row = self._one(
            "SELECT 1 FROM checkpoints WHERE thread_id = ? AND run_id = ? LIMIT 1",
            (thread_id, run_id),
        )
        return row is not None

    def add_writes(
        self, thread_id: str, checkpoint_id: str, writes: Sequence[EncodedWrite]
    ) -> None:
        self._conn.executemany(
            "INSERT INTO pending_writes"
            " (thread_id, checkpoint_id, task_id, channel, idx, value, task_path)"
            " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            [
                (thread_id, checkpoint_id, w.task_id, w.channel, w.index, w.value, w.task_path)
                for w in writes
            ],
        )

    def writes_of(self, thread_id: str, checkpoint_id: str) -> list[PendingWrite]:
        rows = self._all(
            "SELECT task_id, channel, value, task_path FROM pending_writes"
            " WHERE thread_id = ? AND checkpoint_id = ?"
            " ORDER BY task_path, task_id, idx, written_order",
            (thread_id, checkpoint_id),
        )
        return [PendingWrite(r[0], r[1], decode_json(r[2]), r[3]) for r in rows]

    def append_event(self, thread_id: str, event: EncodedEvent, run_id: str | None) -> Event:
        row = self._one(
            "UPDATE threads SET last_seq = last_seq + 1, updated_at = ? WHERE thread_id = ?"
            " RETURNING last_seq",
            (self._now_us, thread_id),
        )
        assert row is not None
        seq = int(row[0])
        created = self._now_us if event.created_at is None else to_micros(event.created_at)
        self._run(
            "INSERT INTO events (thread_id, seq, kind, payload, run_id, created_at, committed_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (thread_id, seq, event.kind, event.payload, run_id, created, self._now_us),
        )
        payload = decode_json(event.payload)
        return Event(thread_id, seq, event.kind, payload, run_id, at(created), self.now)

    def events_after(self, thread_id: str, after_seq: int, limit: int) -> list[Event]:
        rows = self._all(
            "SELECT * FROM events WHERE thread_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (thread_id, after_seq, limit),
        )
        return [event_of(r) for r in rows]

    def drop_events_before(self, thread_id: str, cutoff: datetime) -> int:
        return self._run(
            "DELETE FROM events WHERE thread_id = ? AND committed_at < ?",
            (thread_id, to_micros(cutoff)),
        )

    def effect(self, thread_id: str, key: str) -> EffectRow | None:
        row = self._one("SELECT * FROM effects WHERE thread_id = ? AND key = ?", (thread_id, key))
        if row is None:
            return None
        return effect_of(row)

    def insert_effect(self, row: EffectRow) -> None:
        self._run(
            "INSERT INTO effects (thread_id, key, value, run_id, recorded_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (row.thread_id, row.key, row.value, row.run_id, to_micros(row.recorded_at)),
        )

    def effects_of(self, thread_id: str) -> list[EffectRow]:
        rows = self._all("SELECT * FROM effects WHERE thread_id = ? ORDER BY key", (thread_id,))
        return [effect_of(r) for r in rows]

    def effect_page(self, thread_id: str, after: str | None, limit: int) -> list[EffectRow]:
        # The key column's BINARY collation compares UTF-8 bytes, as PostgreSQL's COLLATE "C".
        rows = self._all(
            "SELECT * FROM effects WHERE thread_id = ? AND (? IS NULL OR key > ?)"
            " ORDER BY key LIMIT ?",
            (thread_id, after, after, limit),
        )
        return [effect_of(r) for r in rows]

    # --- queue entries --------------------------------------------------------------------

    def entry(self, entry_id: int) -> EntryRow | None:
        row = self._one("SELECT * FROM queue_entries WHERE entry_id = ?", (entry_id,))
        return None if row is None else entry_of(row)

    def entry_by_key(self, tenant: str | None, key: str) -> EntryRow | None:
        row = self._one("SELECT * FROM queue_entries WHERE key = ? AND tenant IS ?", (key, tenant))
        return None if row is None else entry_of(row)

    def insert_entry(self, sub: EncodedSubmission) -> int:
        # The thread's stretch of open entries goes on behind its head (D65).
        head = self._one(
            f"SELECT * FROM queue_entries WHERE thread_id = ? AND {_OPEN}"
            " ORDER BY queue_rank, entry_id LIMIT 1",
            (sub.thread_id,),
        )
        place = (None, None) if head is None else entry_of(head).place_for_next(sub.mode)
        row = self._one(
            "INSERT INTO queue_entries (tenant, thread_id, key, input, mode, max_attempts,"
            " submitted_at, not_before, retry_of, open_since, list_after, priority, kind)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING entry_id",
            (
                sub.tenant,
                sub.thread_id,
                sub.key,
                sub.input,
                sub.mode.value,
                sub.max_attempts,
                self._now_us,
                None if sub.not_before is None else to_micros(sub.not_before),
                sub.retry_of,
                *place,
                sub.priority,
                sub.kind,
            ),
        )
        assert row is not None
        self._refresh_head(sub.thread_id)
        return int(row[0])

    def has_open_entry(self, thread_id: str) -> bool:
        row = self._one("SELECT head_entry_id FROM queue_threads WHERE thread_id = ?", (thread_id,))
        return row is not None and row[0] is not None

    def unattempted_interrupts(self, thread_id: str) -> list[EntryRow]:
        rows = self._all(
            f"SELECT * FROM queue_entries WHERE thread_id = ? AND {_OPEN} AND queue_rank = 1"
            " ORDER BY entry_id",
            (thread_id,),
        )
        return [entry_of(r) for r in rows]

    def leasable_head(self, pick: HeadPick) -> EntryRow | None:
        # Heads only, in lease order (priority, highest first, then entry id: SPEC §15); a
        # thread holding a live lease (D1), and a head the pick does not admit, are passed over.
        params: dict[str, Any] = {"now": self._now_us}
        where = "q.head_entry_id IS NOT NULL"
        if pick.tenant is not ANY:
            where += " AND q.head_tenant IS :tenant"
            params["tenant"] = pick.tenant
        for name, values in (("k", pick.kinds), ("fk", pick.full_kinds), ("ft", pick.full_tenants)):
            if values:
                params.update({f"{name}{i}": v for i, v in enumerate(values)})
                names = ", ".join(f":{name}{i}" for i in range(len(values)))
                column = "q.head_tenant" if name == "ft" else "q.head_kind"
                # NULL tenant: never a full tenant (limits name tenants).
                op = "IN" if name == "k" else "NOT IN"
                where += f" AND coalesce({column} {op} ({names}), 1)"
        row = self._one(
            "SELECT e.* FROM queue_threads q JOIN queue_entries e ON e.entry_id = q.head_entry_id"
            f" WHERE {where} AND (q.lease_expires_at IS NULL OR q.lease_expires_at <= :now)"
            " AND (e.not_before IS NULL OR e.not_before <= :now)"
            " ORDER BY q.head_priority_key, q.head_entry_id LIMIT 1",
            params,
        )
        return None if row is None else entry_of(row)

    def leased_entry(self, thread_id: str) -> EntryRow | None:
        row = self._one(
            "SELECT * FROM queue_entries WHERE thread_id = ? AND lease_token IS NOT NULL"
            f" AND {_OPEN} LIMIT 1",
            (thread_id,),
        )
        return None if row is None else entry_of(row)

    def end_leases_of_thread(self, thread_id: str) -> None:
        self._run(
            "UPDATE queue_entries SET lease_token = NULL, lease_holder = NULL,"
            " lease_expires_at = NULL, lease_ttl = NULL"
            " WHERE thread_id = ? AND lease_token IS NOT NULL",
            (thread_id,),
        )
        self._set_thread_lease(thread_id, None)

    def set_lease(
        self, entry: EntryRow, token: int, holder: str, expires_at: datetime, ttl: timedelta
    ) -> None:
        self._run(
            "UPDATE queue_entries SET lease_token = ?, lease_holder = ?, lease_expires_at = ?,"
            " lease_ttl = ? WHERE entry_id = ?",
            (token, holder, to_micros(expires_at), _us(ttl), entry.entry_id),
        )
        self._set_thread_lease(entry.thread_id, expires_at)

    def set_lease_expiry(self, entry: EntryRow, expires_at: datetime) -> None:
        self._run(
            "UPDATE queue_entries SET lease_expires_at = ? WHERE entry_id = ?",
            (to_micros(expires_at), entry.entry_id),
        )
        self._set_thread_lease(entry.thread_id, expires_at)

    def end_lease(self, entry: EntryRow) -> None:
        self._run(
            "UPDATE queue_entries SET lease_token = NULL, lease_holder = NULL,"
            " lease_expires_at = NULL, lease_ttl = NULL WHERE entry_id = ?",
            (entry.entry_id,),
        )
        # The thread's lease is gone when no entry of it holds one (lease ends the others).
        self._run(
            "UPDATE queue_threads SET lease_expires_at = NULL WHERE thread_id = :t"
            " AND NOT EXISTS (SELECT 1 FROM queue_entries"
            "                 WHERE thread_id = :t AND lease_token IS NOT NULL)",
            {"t": entry.thread_id},
        )

    def _set_thread_lease(self, thread_id: str, expires_at: datetime | None) -> None:
        self._run(
            "UPDATE queue_threads SET lease_expires_at = ? WHERE thread_id = ?",
            (None if expires_at is None else to_micros(expires_at), thread_id),
        )

    def close_entry(self, entry: EntryRow, outcome: tuple[str, str], closed_at_seq: int) -> None:
        self._run(
            "UPDATE queue_entries SET outcome_kind = ?, outcome_detail = ?, closed_at = ?,"
            " closed_at_seq = ? WHERE entry_id = ?",
            (*outcome, self._now_us, closed_at_seq, entry.entry_id),
        )
        self.end_lease(entry)
        self._refresh_head(entry.thread_id)

    def add_attempt(self, entry: EntryRow, run_id: str) -> int:
        row = self._one(
            "UPDATE queue_entries SET attempt_count = attempt_count + 1 WHERE entry_id = ?"
            " RETURNING attempt_count",
            (entry.entry_id,),
        )
        assert row is not None
        number = int(row[0])
        self._run(
            "INSERT INTO queue_attempts (entry_id, number, thread_id, run_id, started_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (entry.entry_id, number, entry.thread_id, run_id, self._now_us),
        )
        self._refresh_head(entry.thread_id)  # the rank changed
        return number

    def attempts_of(self, entry_id: int) -> list[Attempt]:
        rows = self._all(
            "SELECT number, run_id, started_at, error FROM queue_attempts WHERE entry_id = ?"
            " ORDER BY number",
            (entry_id,),
        )
        return [Attempt(number=r[0], run_id=r[1], started_at=at(r[2]), error=r[3]) for r in rows]

    def set_attempt_error(self, entry: EntryRow, number: int, error: str) -> None:
        self._run(
            "UPDATE queue_attempts SET error = ? WHERE entry_id = ? AND number = ?",
            (error, entry.entry_id, number),
        )

    def defer_entry(self, entry: EntryRow, not_before: datetime) -> None:
        self._run(
            "UPDATE queue_entries SET not_before = ? WHERE entry_id = ?",
            (to_micros(not_before), entry.entry_id),
        )
        self.end_lease(entry)

    def attempt_run_taken(self, thread_id: str, run_id: str) -> bool:
        row = self._one(
            "SELECT 1 FROM queue_attempts WHERE thread_id = ? AND run_id = ? LIMIT 1",
            (thread_id, run_id),
        )
        return row is not None

    def run_of_deleted_thread(self, thread_id: str, run_id: str) -> bool:
        row = self._one(
            "SELECT 1 FROM queue_attempts a JOIN queue_entries e ON e.entry_id = a.entry_id"
            " WHERE a.thread_id = ? AND a.run_id = ? AND e.thread_deleted LIMIT 1",
            (thread_id, run_id),
        )
        return row is not None

    def run_of_closed_entry(self, thread_id: str, run_id: str) -> bool:
        row = self._one(
            "SELECT 1 FROM queue_attempts a JOIN queue_entries e ON e.entry_id = a.entry_id"
            " WHERE a.thread_id = ? AND a.run_id = ? AND e.outcome_kind IS NOT NULL"
            " AND NOT e.thread_deleted LIMIT 1",
            (thread_id, run_id),
        )
        return row is not None

    def open_attempt_runs(self, thread_id: str) -> set[str]:
        rows = self._all(
            "SELECT a.run_id FROM queue_attempts a JOIN queue_entries e"
            f" ON e.entry_id = a.entry_id WHERE a.thread_id = ? AND e.{_OPEN}",
            (thread_id,),
        )
        return {r[0] for r in rows}

    def admit(self, thread_id: str, run_id: str) -> None:
        self._run(
            f"UPDATE queue_entries SET admitted = 1 WHERE thread_id = :t AND {_OPEN}"
            " AND entry_id IN (SELECT entry_id FROM queue_attempts WHERE thread_id = :t"
            " AND run_id = :r)",
            {"t": thread_id, "r": run_id},
        )

    def mark_thread_deleted(self, thread_id: str) -> None:
        self._run(
            f"UPDATE queue_entries SET thread_deleted = 1 WHERE thread_id = ? AND {_OPEN}",
            (thread_id,),
        )

    def first_retry_of(self, entry_id: int) -> int | None:
        row = self._one(
            "SELECT min(entry_id) FROM queue_entries WHERE retry_of = ?",  # retry_of index
            (entry_id,),
        )
        return None if row is None or row[0] is None else int(row[0])

    def open_page(
        self,
        tenant: TenantFilter,
        thread_id: str | None,
        after: Place | None,
        limit: int,
    ) -> list[EntryRow]:
        # Down queue_entries_listing_idx from the place `after` (a search on its first key):
        # LIMIT rows read, not the queue. One thread's: its own open entries, sorted.
        where = [_OPEN, "(:any OR tenant IS :tenant)"]
        if thread_id is not None:
            where.append("thread_id = :thread")
        if after is not None:
            where.append("coalesce(open_since, entry_id) >= :since")
            where.append(f"({_PLACE}) > (:since, :rank, :anchor, :behind, :id)")
        rows = self._all(
            f"SELECT * FROM queue_entries WHERE {' AND '.join(where)}"
            f" ORDER BY {_PLACE} LIMIT :limit",
            {
                "thread": thread_id,
                "any": tenant is ANY,
                "tenant": None if tenant is ANY else tenant,
                **dict(zip(_PLACE_NAMES, after or (None,) * 5, strict=True)),
                "limit": limit,
            },
        )
        return [entry_of(r) for r in rows]

    def closed_before(self, cutoff: datetime, limit: int) -> list[int]:
        rows = self._all(
            "SELECT entry_id FROM queue_entries WHERE outcome_kind IS NOT NULL"
            " AND closed_at < ? ORDER BY closed_at, entry_id LIMIT ?",
            (to_micros(cutoff), limit),
        )
        return [r[0] for r in rows]

    def entry_page(self, query: EntryQuery) -> list[EntryRow]:
        rows = self._all(
            "SELECT * FROM queue_entries"
            " WHERE (:state IS NULL"
            f"        OR (:state = 'open' AND {_OPEN}"
            "            AND (lease_expires_at IS NULL OR lease_expires_at <= :now))"
            f"        OR (:state = 'running' AND {_OPEN} AND lease_expires_at > :now)"
            "        OR outcome_kind = :state)"
            "   AND (:any OR tenant IS :tenant)"
            "   AND (:thread IS NULL OR thread_id = :thread)"
            "   AND (:after IS NULL OR entry_id < :after)"
            " ORDER BY entry_id DESC LIMIT :limit",
            {
                "state": query.state,
                "now": self._now_us,
                "any": query.tenant is ANY,
                "tenant": None if query.tenant is ANY else query.tenant,
                "thread": query.thread_id,
                "after": query.after,
                "limit": query.limit,
            },
        )
        return [entry_of(r) for r in rows]

    def entry_counts(self, tenant: TenantFilter) -> tuple[dict[str, int], datetime | None]:
        rows = self._all(
            "SELECT coalesce(outcome_kind, CASE WHEN lease_expires_at > :now"
            "                              THEN 'running' ELSE 'open' END),"
            "       count(*), min(submitted_at)"
            "  FROM queue_entries WHERE :any OR tenant IS :tenant GROUP BY 1",
            {
                "now": self._now_us,
                "any": tenant is ANY,
                "tenant": None if tenant is ANY else tenant,
            },
        )
        oldest = next((r[2] for r in rows if r[0] == "open"), None)
        return {r[0]: r[1] for r in rows}, None if oldest is None else from_micros(oldest)

    def trace_context(self, entry_id: int) -> tuple[str, str | None] | None:
        row = self._one(
            "SELECT traceparent, tracestate FROM queue_trace_context WHERE entry_id = ?",
            (entry_id,),
        )
        return None if row is None else (row[0], row[1])

    def set_trace_context(self, entry_id: int, traceparent: str, tracestate: str | None) -> None:
        self._run(
            "INSERT INTO queue_trace_context (entry_id, traceparent, tracestate) VALUES (?, ?, ?)",
            (entry_id, traceparent, tracestate),
        )

    def remove_entry(self, entry: EntryRow) -> None:
        self._run("DELETE FROM queue_attempts WHERE entry_id = ?", (entry.entry_id,))
        self._run("DELETE FROM queue_trace_context WHERE entry_id = ?", (entry.entry_id,))
        self._run("DELETE FROM queue_entries WHERE entry_id = ?", (entry.entry_id,))

    def _refresh_head(self, thread_id: str) -> None:
        """Set the thread's ``queue_threads`` head: one step down ``queue_entries_open_idx``."""
        head = self._one(
            f"SELECT entry_id, tenant, priority, kind FROM queue_entries WHERE thread_id = ?"
            f" AND {_OPEN} ORDER BY queue_rank, entry_id LIMIT 1",
            (thread_id,),
        )
        self._run(
            "INSERT INTO queue_threads (thread_id, head_entry_id, head_tenant, head_priority_key,"
            " head_kind) VALUES (:t, :h, :n, :p, :k) ON CONFLICT (thread_id) DO UPDATE"
            " SET head_entry_id = :h, head_tenant = :n, head_priority_key = :p, head_kind = :k",
            {
                "t": thread_id,
                "h": None if head is None else head[0],
                "n": None if head is None else head[1],
                "p": None if head is None else -head[2],  # minus the priority: lease order
                "k": None if head is None else head[3],
            },
        )


__all__ = ["SqliteTx"]
