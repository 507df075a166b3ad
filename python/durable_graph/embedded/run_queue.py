"""The RunQueue rules of SPEC §5 for the embedded stores, written once over a `Storage`.

Same steps as the checkpointer rules: validate, one transaction (now read once), checks in the
documented order, then writes. The storage keeps each thread's head and lease expiry (the
``queue_threads`` table), so `lease` and `submit` cost the same whatever the backlog.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Final

from durable_graph.core.errors import (
    EntryClosed,
    NotFound,
    RunIdTaken,
    SubmissionKeyReused,
    ThreadBusy,
    ValidationError,
)
from durable_graph.core.fast_path import submit_each
from durable_graph.core.listing import EntryState, make_stats
from durable_graph.core.model import (
    ANY,
    AttemptStart,
    Cancelled,
    EntryOutcome,
    Exhausted,
    Interrupted,
    Lease,
    Mode,
    QueueEntry,
    QueueStats,
    Started,
    Submission,
    TenantFilter,
    ThreadDeleted,
    Ticket,
    TraceContext,
    WatchPolicy,
)
from durable_graph.core.scheduling import check_kinds
from durable_graph.core.validation import (
    MAX_PAGE_ROWS,
    check_bool,
    check_duration,
    check_error_text,
    check_identifier,
    check_int,
    check_lease,
    check_listing,
    check_optional_identifier,
    check_submission,
    check_tenant_filter,
    check_trace_context,
    encode_outcome,
    same_json,
)
from durable_graph.embedded.common import (
    THREAD_BUSY_ENTRY,
    current_lease,
    entry_of,
    store_outcome,
    submitted_again,
    wait_until,
)
from durable_graph.embedded.items import EmbeddedItems
from durable_graph.embedded.rows import EntryQuery, EntryRow, Place
from durable_graph.embedded.scheduling import EmbeddedScheduling, pick_head
from durable_graph.embedded.storage import Storage, Tx
from durable_graph.embedded.workers import EmbeddedWorkers

_AWAIT_CLOSED_POLL: Final = WatchPolicy().poll_interval.total_seconds()
"""How often `await_closed` reads again for other processes (it takes no `WatchPolicy`; D21:
timeouts are wall-clock)."""


class EmbeddedRunQueue(EmbeddedScheduling, EmbeddedWorkers, EmbeddedItems):
    """SPEC §5 over a `Storage`, in the same storage as its checkpointer (and SPEC §15's
    limits and schedules, `EmbeddedScheduling`; the worker registry, `EmbeddedWorkers`)."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage
        self._max = storage.max_value_bytes

    def submit_many(self, submissions: Sequence[Submission]) -> list[Ticket]:
        """SPEC §11: each as `submit`, in order, in one transaction; any error writes nothing."""
        return submit_each(self.submit, submissions, self._storage.composed(undo=True), self._max)

    def submit(self, submission: Submission) -> Ticket:
        sub = check_submission(submission, self._max)
        with self._storage.write() as tx:
            # Rule 19 order: key, REJECT, INTERRUPT closing, insert.
            if sub.key is not None:
                kept = tx.entry_by_key(sub.tenant, sub.key)
                if kept is not None:
                    if (kept.thread_id, kept.mode, kept.max_attempts) != (
                        sub.thread_id,
                        sub.mode,
                        sub.max_attempts,
                    ) or not same_json(kept.input, sub.input):  # SPEC §10 rule 3
                        raise SubmissionKeyReused(
                            f"submission key {sub.key!r} names a different submission"
                        )
                    return Ticket(kept.entry_id, existing=True)
            if sub.mode is Mode.REJECT and tx.has_open_entry(sub.thread_id):
                raise ThreadBusy(THREAD_BUSY_ENTRY)
            queued = tx.unattempted_interrupts(sub.thread_id) if sub.mode is Mode.INTERRUPT else []
            entry_id = tx.insert_entry(sub)
            interrupted = store_outcome(Interrupted(entry_id))
            for other in queued:
                _close_entry(tx, other, interrupted)
            return Ticket(entry_id, existing=False)

    def lease(
        self,
        holder: str,
        ttl: timedelta,
        tenant: TenantFilter = ANY,
        run_id: str | None = None,
        kinds: Sequence[str] | None = None,
    ) -> Lease | None:
        check_identifier("holder", holder)
        check_duration("ttl", ttl)
        wanted = check_tenant_filter("tenant", tenant, allow_any=True)
        check_optional_identifier("run_id", run_id)
        served = check_kinds("kinds", kinds)
        with self._storage.write() as tx:
            # The first leasable thread head (by priority, then entry id) of the wanted tenant
            # and kinds, under the concurrency limits (SPEC §15).
            entry = pick_head(tx, wanted, served)
            if entry is None:
                return None
            # The attempt of an expired lease ended without a word: say why (issue 26 item 9).
            stale = tx.leased_entry(entry.thread_id)
            if stale is not None and stale.attempt_count > 0:
                last = tx.attempts_of(stale.entry_id)[-1]
                if last.error is None:
                    why = f"lease expired: worker {stale.lease_holder} stopped renewing"
                    tx.set_attempt_error(stale, last.number, why)
            # End the expired lease of any other entry of the thread.
            tx.end_leases_of_thread(entry.thread_id)
            token = tx.issue_token()
            expires_at = tx.now + ttl
            tx.set_lease(entry, token, holder, expires_at, ttl)
            attempt: AttemptStart | None = None
            if run_id is not None:
                try:
                    attempt = _record_attempt(tx, _entry(tx, entry.entry_id), run_id)
                except RunIdTaken:
                    attempt = None  # the lease is still taken
            leased = entry_of(tx, _entry(tx, entry.entry_id))
            return Lease(leased, token, holder, expires_at, ttl, attempt)

    def renew(self, lease: Lease, ttl: timedelta | None = None) -> Lease:
        check_lease("lease", lease)
        if ttl is not None:
            check_duration("ttl", ttl)
        with self._storage.write() as tx:
            entry = current_lease(tx, lease)
            assert entry.lease_ttl is not None and entry.lease_holder is not None
            # D18: push expiry to now + (ttl or the ttl the lease was taken with).
            expires_at = tx.now + (entry.lease_ttl if ttl is None else ttl)
            tx.set_lease_expiry(entry, expires_at)
            return Lease(
                entry_of(tx, _entry(tx, entry.entry_id)),
                lease.token,
                entry.lease_holder,
                expires_at,
                entry.lease_ttl,
            )

    def release(self, lease: Lease) -> None:
        check_lease("lease", lease)
        with self._storage.write() as tx:
            tx.end_lease(current_lease(tx, lease))  # D19: release clears the lease

    def record_attempt(self, lease: Lease, run_id: str) -> AttemptStart:
        check_lease("lease", lease)
        check_identifier("run_id", run_id)
        with self._storage.write() as tx:
            return _record_attempt(tx, current_lease(tx, lease), run_id)

    def close(self, lease: Lease, outcome: EntryOutcome) -> QueueEntry:
        check_lease("lease", lease)
        encoded = encode_outcome(outcome, self._max)
        with self._storage.write() as tx:
            entry = current_lease(tx, lease)
            if encoded[0] == "failed" and entry.attempt_count > 0:
                # The last attempt's failure reason (SPEC §13), unless `defer` gave one.
                last = tx.attempts_of(entry.entry_id)[-1]
                if last.error is None:
                    tx.set_attempt_error(entry, last.number, json.loads(encoded[1]))
            _close_entry(tx, entry, encoded)
            return entry_of(tx, _entry(tx, entry.entry_id))

    def defer(self, lease: Lease, delay: timedelta, error: str | None = None) -> QueueEntry:
        check_lease("lease", lease)
        check_duration("delay", delay, allow_zero=True)
        if error is not None:
            check_error_text("error", error, self._max)
        with self._storage.write() as tx:
            entry = current_lease(tx, lease)
            if error is not None and entry.attempt_count > 0:
                tx.set_attempt_error(entry, entry.attempt_count, error)
            tx.defer_entry(entry, tx.now + delay)
            return entry_of(tx, _entry(tx, entry.entry_id))

    def retry(self, entry_id: int, tenant: str | None = None, again: bool = False) -> Ticket:
        _check_entry_ref(entry_id, tenant)
        check_bool("again", again)
        with self._storage.write() as tx:
            entry = _found_entry(tx, entry_id, tenant)
            if entry.outcome_kind not in ("failed", "cancelled"):
                raise ValidationError(_not_retryable(entry_id, entry.outcome_kind))
            first = None if again else tx.first_retry_of(entry_id)
            if first is not None:  # D66: a second retry is the first one's ticket
                return Ticket(first, existing=True)
            # Its input again as a new ENQUEUE entry, with no key (a key names one submission).
            new_id = tx.insert_entry(submitted_again(entry, None, retry_of=entry.entry_id))
            return Ticket(new_id, existing=False)

    def cancel(self, entry_id: int, tenant: str | None = None) -> QueueEntry:
        _check_entry_ref(entry_id, tenant)
        with self._storage.write() as tx:
            # D16: visibility first, then closed (rule 22).
            entry = _found_entry(tx, entry_id, tenant)
            if entry.closed:
                raise EntryClosed(f"entry {entry_id} is closed")
            _close_entry(tx, entry, store_outcome(Cancelled("requested")))
            # SPEC §19.2: the thread is free at once: the claim held under one of the entry's
            # attempts' run ids ends with the close.
            claim = tx.claim_of(entry.thread_id)
            runs = {a.run_id for a in tx.attempts_of(entry_id)}
            if claim is not None and claim.holder in runs:
                tx.drop_claim(entry.thread_id)
            return entry_of(tx, _entry(tx, entry_id))

    def set_trace_context(
        self, entry_id: int, context: TraceContext, tenant: str | None = None
    ) -> bool:
        """Remember the trace ``context`` entry ``entry_id`` of ``tenant`` was submitted in (the
        first one stays), as PostgreSQL's queue does; False for an entry that has a context, or
        is unknown or another tenant's (D16: no oracle)."""
        _check_entry_ref(entry_id, tenant)
        check_trace_context(context)
        with self._storage.write() as tx:
            if _visible_entry(tx, entry_id, tenant) is None:
                return False
            if tx.trace_context(entry_id) is not None:
                return False
            tx.set_trace_context(entry_id, context.traceparent, context.tracestate)
            return True

    def trace_context(self, entry_id: int, tenant: str | None = None) -> TraceContext | None:
        _check_entry_ref(entry_id, tenant)
        with self._storage.read() as tx:
            if _visible_entry(tx, entry_id, tenant) is None:
                return None
            stored = tx.trace_context(entry_id)
        return None if stored is None else TraceContext(stored[0], stored[1])

    def entry(self, entry_id: int, tenant: str | None = None) -> QueueEntry | None:
        _check_entry_ref(entry_id, tenant)
        return self._read_entry(entry_id, tenant)

    def _read_entry(self, entry_id: int, tenant: str | None) -> QueueEntry | None:
        with self._storage.read() as tx:
            entry = _visible_entry(tx, entry_id, tenant)
            return None if entry is None else entry_of(tx, entry)

    def open_entries(
        self,
        tenant: TenantFilter = None,
        thread_id: str | None = None,
        after: int | None = None,
        limit: int = 1000,
    ) -> list[QueueEntry]:
        wanted = check_tenant_filter("tenant", tenant, allow_any=True)
        check_optional_identifier("thread_id", thread_id)
        if after is not None:
            check_int("after", after, minimum=0)
        check_int("limit", limit, minimum=1)
        limit = min(limit, MAX_PAGE_ROWS)
        with self._storage.read() as tx:
            # D65: by the fixed place of each entry (its thread's stretch of open entries,
            # INTERRUPT first, entry id), so a page after ``after`` neither skips an entry
            # open throughout the walk nor repeats one while entries close (issue 26 item 1).
            start: Place | None = None
            if after is not None:
                mark = tx.entry(after)
                # Unknown, reclaimed or not the wanted tenant's: [] (sql/README.md).
                if mark is None or not (wanted is ANY or mark.tenant == wanted):
                    return []
                start = mark.list_place
            return [entry_of(tx, e) for e in tx.open_page(wanted, thread_id, start, limit)]

    def entries(
        self,
        state: EntryState | None = None,
        tenant: TenantFilter = ANY,
        thread_id: str | None = None,
        after: int | None = None,
        limit: int = 100,
    ) -> list[QueueEntry]:
        query = EntryQuery(*check_listing(state, tenant, thread_id, after, limit))
        with self._storage.read() as tx:
            # SPEC §13, durable_graph.core.listing: newest first, paged by entry id.
            return [entry_of(tx, e) for e in tx.entry_page(query)]

    def stats(self, tenant: TenantFilter = ANY) -> QueueStats:
        wanted = check_tenant_filter("tenant", tenant, allow_any=True)
        with self._storage.read() as tx:
            counts, oldest = tx.entry_counts(wanted)
            # A producer clock ahead of the store's never shows a negative age.
            age = None if oldest is None else max(tx.now - oldest, timedelta(0))
            by_kind = tx.waiting_by_kind(wanted)
        return replace(make_stats(counts, age), waiting_by_kind=by_kind)

    def await_closed(
        self, entry_id: int, timeout: timedelta, tenant: str | None = None
    ) -> QueueEntry | None:
        check_int("entry_id", entry_id, minimum=0)
        check_duration("timeout", timeout, allow_zero=True)
        check_optional_identifier("tenant", tenant)
        entry = wait_until(
            self._storage,
            lambda: self._read_entry(entry_id, tenant),
            lambda e: e is None or e.closed,
            timeout.total_seconds(),  # rule 23: wall-clock
            _AWAIT_CLOSED_POLL,
        )
        return entry if entry is not None and entry.closed else None

    def reclaim(self, older_than: timedelta, batch: int = 1000) -> int:
        check_duration("older_than", older_than, allow_zero=True)
        check_int("batch", batch, minimum=1)
        with self._storage.write() as tx:
            # Rule 25: oldest closed first, ties by entry id; never an open entry.
            victims = tx.closed_before(tx.now - older_than, batch)
            for entry_id in victims:
                tx.remove_entry(_entry(tx, entry_id))
            return len(victims)


def _not_retryable(entry_id: int, outcome_kind: str | None) -> str:
    """Why `retry` refuses (SPEC §13: only a failed or cancelled entry is retried)."""
    state = "open" if outcome_kind is None else outcome_kind
    return f"entry_id: entry {entry_id} is {state}; only a failed or cancelled entry can be retried"


def _entry(tx: Tx, entry_id: int) -> EntryRow:
    """An entry this transaction knows is kept."""
    entry = tx.entry(entry_id)
    assert entry is not None
    return entry


def _check_entry_ref(entry_id: int, tenant: str | None) -> None:
    """The arguments naming one entry of one tenant (`entry`, `cancel`, `retry`)."""
    check_int("entry_id", entry_id, minimum=0)
    check_optional_identifier("tenant", tenant)


def _visible_entry(tx: Tx, entry_id: int, tenant: str | None) -> EntryRow | None:
    """The kept entry when its tenant is ``tenant`` (D16), else None."""
    entry = tx.entry(entry_id)
    return entry if entry is not None and entry.tenant == tenant else None


def _found_entry(tx: Tx, entry_id: int, tenant: str | None) -> EntryRow:
    """The visible entry (D16: another tenant's answers as unknown), else `NotFound`."""
    entry = _visible_entry(tx, entry_id, tenant)
    if entry is None:
        raise NotFound(f"entry {entry_id} not found")
    return entry


def _close_entry(tx: Tx, entry: EntryRow, outcome: tuple[str, str]) -> None:
    """Close once: stamp `closed_at` and `closed_at_seq`, end the lease (D19, D20)."""
    tx.close_entry(entry, outcome, tx.last_seq_of(entry.thread_id))


def _record_attempt(tx: Tx, entry: EntryRow, run_id: str) -> AttemptStart:
    """Rule 20 after the lease checks: deleted, exhausted, run id taken, then record."""
    if entry.thread_deleted:
        _close_entry(tx, entry, store_outcome(Cancelled("thread_deleted")))
        return ThreadDeleted()
    if entry.attempt_count >= entry.max_attempts:
        return Exhausted()
    # A checkpoint now in the thread's history, or an attempt of a kept entry.
    if tx.run_in_history(entry.thread_id, run_id) or tx.attempt_run_taken(entry.thread_id, run_id):
        raise RunIdTaken(f"run id {run_id!r} already names a run of the thread")
    return Started(tx.add_attempt(entry, run_id))


__all__ = ["EmbeddedRunQueue"]
