"""Listing the queue (SPEC §13, sql/92_queue_listing.sql, durable_graph/core/listing.py): `entries`
by state, tenant and thread, newest first, paged by entry id; `stats` counts by state and the
oldest waiting entry's age by the store clock.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from durable_graph.core.errors import ValidationError
from durable_graph.core.model import ANY, Cancelled, Completed, Failed, Mode
from durable_graph.core.run_queue import RunQueue
from durable_graph.testkit.contract.run_queue.support import HOUR, PAST_TTL, SLACK, _lease, _submit
from durable_graph.testkit.harness import ClockControl


def _ids(queue: RunQueue, **kwargs: Any) -> list[int]:
    return [e.entry_id for e in queue.entries(**kwargs)]


class ListingTests:
    """entries and stats."""

    # --- entries ----------------------------------------------------------------------------

    def test_entries_lists_every_state_newest_first(self, queue: RunQueue) -> None:
        first = _submit(queue, "thread-1")
        second = _submit(queue, "thread-2")
        queue.cancel(first)
        assert _ids(queue) == [second, first]

    def test_entries_pages_by_entry_id_cursor(self, queue: RunQueue) -> None:
        ids = [_submit(queue, f"thread-{n}") for n in range(5)]
        page = _ids(queue, limit=2)
        assert page == [ids[4], ids[3]]
        page = _ids(queue, after=page[-1], limit=2)
        assert page == [ids[2], ids[1]]
        assert _ids(queue, after=page[-1], limit=2) == [ids[0]]
        assert _ids(queue, after=ids[0]) == []

    def test_entries_by_state_separates_open_and_running(self, queue: RunQueue) -> None:
        running = _submit(queue, "thread-1")
        _lease(queue)
        waiting = _submit(queue, "thread-2")
        assert _ids(queue, state="running") == [running]
        assert _ids(queue, state="open") == [waiting]

    def test_entries_running_is_open_again_when_its_lease_expires(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        entry_id = _submit(queue)
        _lease(queue)
        clock.advance(PAST_TTL)
        assert _ids(queue, state="running") == []
        assert _ids(queue, state="open") == [entry_id]

    def test_entries_by_closed_outcome(self, queue: RunQueue) -> None:
        done = _submit(queue, "thread-1")
        queue.close(_lease(queue), Completed({"ok": True}))
        broken = _submit(queue, "thread-2")
        queue.close(_lease(queue), Failed("boom"))
        cancelled = _submit(queue, "thread-3")
        queue.cancel(cancelled)
        interrupted = _submit(queue, "thread-4", mode=Mode.INTERRUPT)
        by = _submit(queue, "thread-4", mode=Mode.INTERRUPT)
        assert _ids(queue, state="completed") == [done]
        assert _ids(queue, state="failed") == [broken]
        assert queue.entries(state="failed")[0].outcome == Failed("boom")
        assert _ids(queue, state="cancelled") == [cancelled]
        assert _ids(queue, state="interrupted") == [interrupted]
        assert _ids(queue, state="open") == [by]

    def test_entries_default_lists_every_tenant(self, queue: RunQueue) -> None:
        mine = _submit(queue, "thread-1")
        theirs = _submit(queue, "thread-2", tenant="acme")
        assert _ids(queue) == [theirs, mine]
        assert _ids(queue, tenant=ANY) == [theirs, mine]

    def test_entries_of_a_tenant_or_of_no_tenant(self, queue: RunQueue) -> None:
        mine = _submit(queue, "thread-1")
        theirs = _submit(queue, "thread-2", tenant="acme")
        assert _ids(queue, tenant="acme") == [theirs]
        assert _ids(queue, tenant=None) == [mine]

    def test_entries_of_a_thread(self, queue: RunQueue) -> None:
        first = _submit(queue, "thread-1")
        _submit(queue, "thread-2")
        second = _submit(queue, "thread-1")
        assert _ids(queue, thread_id="thread-1") == [second, first]

    @pytest.mark.parametrize(
        ("kwargs", "named"),
        [
            ({"state": "waiting"}, "state"),
            ({"state": 3}, "state"),
            ({"tenant": ""}, "tenant"),
            ({"thread_id": ""}, "thread_id"),
            ({"after": 0}, "after"),
            ({"after": "5"}, "after"),
            ({"limit": 0}, "limit"),
            ({"limit": 1001}, "limit"),
            ({"limit": True}, "limit"),
        ],
    )
    def test_entries_with_bad_argument_raises_validation_error_naming_it(
        self, queue: RunQueue, kwargs: dict[str, Any], named: str
    ) -> None:
        with pytest.raises(ValidationError, match=named):
            queue.entries(**kwargs)

    # --- stats ------------------------------------------------------------------------------

    def test_stats_counts_entries_by_state(self, queue: RunQueue) -> None:
        _submit(queue, "thread-1")
        queue.close(_lease(queue), Failed("boom"))
        _submit(queue, "thread-2")
        _lease(queue)
        _submit(queue, "thread-3")
        _submit(queue, "thread-4")
        queue.cancel(_submit(queue, "thread-5"))
        stats = queue.stats()
        assert stats.counts() == {
            "open": 2,
            "running": 1,
            "completed": 0,
            "failed": 1,
            "cancelled": 1,
            "interrupted": 0,
        }

    def test_stats_oldest_waiting_age_by_store_clock(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        _submit(queue, "thread-1")
        clock.advance(HOUR)
        _submit(queue, "thread-2")
        age = queue.stats().oldest_waiting_age
        assert age is not None
        assert HOUR <= age <= HOUR + SLACK

    def test_stats_without_waiting_entries_has_no_age(self, queue: RunQueue) -> None:
        assert queue.stats().oldest_waiting_age is None
        _submit(queue)
        _lease(queue)
        stats = queue.stats()
        assert stats.running == 1
        assert stats.oldest_waiting_age is None

    def test_stats_of_a_tenant_counts_only_its_entries(self, queue: RunQueue) -> None:
        _submit(queue, "thread-1")
        _submit(queue, "thread-2", tenant="acme")
        _submit(queue, "thread-3", tenant="acme")
        assert queue.stats(tenant="acme").open == 2
        assert queue.stats(tenant=None).open == 1
        assert queue.stats().open == 3

    def test_stats_with_bad_tenant_raises_validation_error(self, queue: RunQueue) -> None:
        with pytest.raises(ValidationError, match="tenant"):
            queue.stats(tenant="")

    def test_stats_counts_a_cancelled_entry_once(self, queue: RunQueue) -> None:
        queue.cancel(_submit(queue))
        stats = queue.stats()
        assert (stats.open, stats.cancelled) == (0, 1)
        assert queue.entries(state="cancelled")[0].outcome == Cancelled("requested")
        assert timedelta(0) <= (stats.oldest_waiting_age or timedelta(0))
