"""Thread TTLs (SPEC §24.1, D259-D261) for the embedded stores: the rules of
``sql/48_thread_ttl.sql`` over a storage's `Tx`, each in the caller's write transaction.

A TTL row is a lower bound: ``due_at`` is never later than the thread can expire, so the sweep
reads only due rows and works out the thread's real expiry then (its last activity plus the
TTL); a thread active since is put off to that time. Nothing on the hot path (commit, submit,
close) writes the row.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from durable_graph.core.model import RetentionPolicy, ThreadSweep, ThreadTtl
from durable_graph.embedded.rows import ThreadRow, TtlRow
from durable_graph.embedded.storage import Tx

KEEP_LATEST = RetentionPolicy(keep_last=1, max_age=timedelta(microseconds=1))
"""The head with its pending writes; older checkpoints and every event go (SPEC §24.2)."""


def _minutes(row: TtlRow) -> timedelta:
    return timedelta(minutes=row.minutes)


def _current(tx: Tx, thread_id: str) -> tuple[ThreadRow, TtlRow] | None:
    """The thread and its TTL row, when both exist and the row is this incarnation's."""
    row = tx.ttl_row(thread_id)
    thread = tx.thread(thread_id)
    if row is None or thread is None or thread.first_commit_order != row.first_commit_order:
        return None
    return thread, row


def last_activity(tx: Tx, thread: ThreadRow, row: TtlRow) -> datetime:
    """D259: the latest of the thread's last event (a commit, an update of its state), a run of
    it submitted or closed, and the TTL's own setting. Reads are not activity."""
    times = [thread.updated_at, row.set_at]
    entries = tx.entry_activity(thread.thread_id)
    if entries is not None:
        times.append(entries)
    return max(times)


def set_ttl(tx: Tx, thread_id: str, minutes: float | None, strategy: str) -> ThreadTtl | None:
    thread = tx.thread(thread_id)
    if thread is None or minutes is None:
        tx.drop_ttl_row(thread_id)
        return None
    now = tx.now
    row = TtlRow(
        thread_id, minutes, strategy, thread.first_commit_order, now,
        now + timedelta(minutes=minutes), None,
    )  # fmt: skip
    tx.put_ttl_row(row)
    return ttl_of(tx, thread_id)


def ttl_of(tx: Tx, thread_id: str) -> ThreadTtl | None:
    found = _current(tx, thread_id)
    if found is None:
        return None
    thread, row = found
    expires = last_activity(tx, thread, row) + _minutes(row)
    return ThreadTtl(thread_id, row.minutes, row.strategy, expires)


def _busy_until(tx: Tx, tree: list[str], ttl: timedelta) -> datetime | None:
    """D261: when the tree may next be swept if one of its threads has an open entry or a live
    claim (None: neither). An open entry's close is activity, so the earliest is now + the TTL;
    a live claim stops counting when it expires."""
    now = tx.now
    until: datetime | None = None
    for thread_id in tree:
        if tx.has_open_entry(thread_id):
            return now + ttl
        claim = tx.claim_of(thread_id)
        if claim is not None and claim.expires_at > now:
            until = claim.expires_at if until is None else max(until, claim.expires_at)
    return until


def sweep(tx: Tx, limit: int, prune: Callable[[Tx, str, RetentionPolicy], object]) -> ThreadSweep:
    """One sweep transaction. ``prune(tx, thread_id, policy)`` is the checkpointer's retention
    on one thread (D13), run on the thread and each descendant for ``keep_latest``."""
    now = tx.now
    deleted = kept = 0
    rows = tx.due_ttl_rows(limit)
    # Each thread's work in thread-id order, as every call that locks several threads.
    for row in sorted(rows, key=lambda r: r.thread_id.encode()):
        found = _current(tx, row.thread_id)
        if found is None:  # deleted, or deleted and made again: this TTL was the old thread's
            tx.drop_ttl_row(row.thread_id)
            continue
        thread, row = found
        activity = last_activity(tx, thread, row)
        expires = activity + _minutes(row)
        if expires > now:
            tx.put_ttl_row(_due(row, expires))
            continue
        if row.swept_at is not None and activity <= row.swept_at:
            # Pruned already and nothing happened since: due again one TTL from now at the
            # earliest (any activity is later than now).
            tx.put_ttl_row(_due(row, now + _minutes(row)))
            continue
        tree = tx.descendants(row.thread_id)
        busy = _busy_until(tx, tree, _minutes(row))
        if busy is not None:
            tx.put_ttl_row(_due(row, busy))
            continue
        if row.strategy == "delete":
            for victim in tree:
                tx.remove_thread(victim)
                tx.mark_thread_deleted(victim)
            tx.drop_ttl_row(row.thread_id)
            deleted += 1
        else:
            for member in tree:
                prune(tx, member, KEEP_LATEST)
            tx.put_ttl_row(_due(row, now + _minutes(row), swept_at=now))
            kept += 1
    return ThreadSweep(deleted, kept, len(rows))


def _due(row: TtlRow, due_at: datetime, swept_at: datetime | None = None) -> TtlRow:
    return TtlRow(
        row.thread_id, row.minutes, row.strategy, row.first_commit_order, row.set_at, due_at,
        swept_at if swept_at is not None else row.swept_at,
    )  # fmt: skip


__all__ = ["last_activity", "set_ttl", "sweep", "ttl_of"]
