"""Scheduling (SPEC §15, sql/72_scheduling.sql and sql/70_lease.sql): priorities, kinds,
concurrency limits and schedules, on every backend."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import NotFound, ValidationError
from durable_graph.core.model import ANY, ClaimPolicy, Completed, Submission
from durable_graph.core.run_queue import RunQueue
from durable_graph.core.scheduling import ConcurrencyLimit, Schedule, slot_key
from durable_graph.testkit.contract.run_queue.support import (
    PAST_TTL,
    TTL,
    _commit,
    _entry,
    _refused,
)
from durable_graph.testkit.harness import ClockControl


def _put(
    queue: RunQueue,
    thread_id: str,
    *,
    priority: int = 0,
    kind: str = "default",
    tenant: str | None = None,
) -> int:
    sub = Submission(thread_id, "go", tenant=tenant, priority=priority, kind=kind)
    return queue.submit(sub).entry_id


def _leased_ids(queue: RunQueue, n: int, **kwargs: object) -> list[int]:
    ids = []
    for i in range(n):
        lease = queue.lease(f"w-{i}", TTL, **kwargs)  # type: ignore[arg-type]
        assert lease is not None
        ids.append(lease.entry.entry_id)
    return ids


def _whole_second(store_now: datetime) -> datetime:
    return store_now.replace(microsecond=0)


class SchedulingTests:
    """Priority, kinds, concurrency limits and schedules."""

    # --- priority (SPEC §15.1) ---------------------------------------------------------------

    def test_lease_takes_higher_priority_heads_first_then_oldest(self, queue: RunQueue) -> None:
        low = _put(queue, "t-low", priority=-5)
        plain = _put(queue, "t-plain")
        high = _put(queue, "t-high", priority=10)
        high2 = _put(queue, "t-high2", priority=10)
        assert _leased_ids(queue, 4) == [high, high2, plain, low]

    def test_priority_never_overtakes_its_own_threads_head(self, queue: RunQueue) -> None:
        head = _put(queue, "t-1", priority=0)
        _put(queue, "t-1", priority=100)
        other = _put(queue, "t-2", priority=1)
        # thread t-1 is ordered by its head (priority 0): t-2 goes first, then t-1's head.
        assert _leased_ids(queue, 2) == [other, head]

    def test_entry_reports_priority_and_kind(self, queue: RunQueue) -> None:
        entry_id = _put(queue, "t-1", priority=7, kind="summarize")
        entry = _entry(queue, entry_id)
        assert (entry.priority, entry.kind) == (7, "summarize")
        lease = queue.lease("w", TTL)
        assert lease is not None and (lease.entry.priority, lease.entry.kind) == (7, "summarize")

    def test_retry_keeps_priority_and_kind(self, queue: RunQueue) -> None:
        entry_id = _put(queue, "t-1", priority=3, kind="k")
        queue.cancel(entry_id)
        again = queue.retry(entry_id)
        assert (_entry(queue, again.entry_id).priority, _entry(queue, again.entry_id).kind) == (
            3,
            "k",
        )

    def test_expired_lease_is_taken_in_priority_order(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        expired = _put(queue, "t-1", priority=5)
        assert _leased_ids(queue, 1) == [expired]
        clock.advance(PAST_TTL)
        plain = _put(queue, "t-2")
        assert _leased_ids(queue, 2) == [expired, plain]

    @pytest.mark.parametrize("bad", [2**31, -(2**31), 1.5, True, "1"])
    def test_submit_refuses_a_bad_priority(self, queue: RunQueue, bad: object) -> None:
        sub = Submission("t-1", "go", priority=bad)  # type: ignore[arg-type]
        _refused(queue, lambda: queue.submit(sub), match="priority")

    # --- kinds (SPEC §15.2) ------------------------------------------------------------------

    def test_lease_serves_only_the_given_kinds(self, queue: RunQueue) -> None:
        a = _put(queue, "t-a", kind="a")
        b = _put(queue, "t-b", kind="b")
        plain = _put(queue, "t-c")
        assert _leased_ids(queue, 1, kinds=["b"]) == [b]
        assert queue.lease("w", TTL, kinds=["b"]) is None
        assert _leased_ids(queue, 2, kinds=["default", "a"]) == [a, plain]

    def test_entry_of_an_unserved_kind_waits(self, queue: RunQueue) -> None:
        waiting = _put(queue, "t-1", kind="rare")
        assert queue.lease("w", TTL, kinds=["default"]) is None
        assert _entry(queue, waiting).lease_holder is None
        assert queue.stats().waiting_by_kind == {"rare": 1}

    def test_kinds_filter_by_the_threads_head(self, queue: RunQueue) -> None:
        _put(queue, "t-1", kind="a")
        _put(queue, "t-1", kind="b")
        assert queue.lease("w", TTL, kinds=["b"]) is None

    def test_kinds_and_priority_together(self, queue: RunQueue) -> None:
        _put(queue, "t-1", kind="a", priority=9)
        b_low = _put(queue, "t-2", kind="b", priority=1)
        b_high = _put(queue, "t-3", kind="b", priority=2)
        c = _put(queue, "t-4", kind="c", priority=5)
        assert _leased_ids(queue, 3, kinds=["b", "c"]) == [c, b_high, b_low]

    def test_stats_count_waiting_by_kind(self, queue: RunQueue) -> None:
        _put(queue, "t-1", kind="a")
        _put(queue, "t-2", kind="a")
        _put(queue, "t-3", kind="b", tenant="x")
        queue.lease("w", TTL, kinds=["b"])
        assert queue.stats().waiting_by_kind == {"a": 2}
        assert queue.stats(tenant="x").waiting_by_kind == {}

    def test_begin_attempt_serves_only_the_given_kinds(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        _put(queue, "t-a", kind="a")
        b = _put(queue, "t-b", kind="b")
        begun = store.begin_attempt("w", TTL, run_id="r-1", kinds=["b"])
        assert begun is not None and begun.entry.entry_id == b
        assert store.begin_attempt("w", TTL, run_id="r-2", kinds=["b"]) is None

    @pytest.mark.parametrize("bad", ["", "x" * 513, "a\x00b", 5])
    def test_submit_refuses_a_bad_kind(self, queue: RunQueue, bad: object) -> None:
        sub = Submission("t-1", "go", kind=bad)  # type: ignore[arg-type]
        _refused(queue, lambda: queue.submit(sub), match="kind")

    @pytest.mark.parametrize("bad", [[], "a", ["a", "a"], [""], [1], ["k"] * 101])
    def test_lease_refuses_bad_kinds(self, queue: RunQueue, bad: object) -> None:
        _put(queue, "t-1")
        _refused(queue, lambda: queue.lease("w", TTL, kinds=bad), match="kinds")  # type: ignore[arg-type]

    def test_begin_attempt_refuses_bad_kinds(self, queue: RunQueue, store: Checkpointer) -> None:
        _put(queue, "t-1")
        _refused(
            queue,
            lambda: store.begin_attempt("w", TTL, run_id="r", kinds=[]),
            match="kinds",
        )

    # --- concurrency limits (SPEC §15.3) -----------------------------------------------------

    def test_tenant_limit_caps_live_leases(self, queue: RunQueue) -> None:
        assert queue.set_limit("tenant", "acme", 2) == ConcurrencyLimit("tenant", "acme", 2)
        ids = [_put(queue, f"t-{i}", tenant="acme") for i in range(3)]
        other = _put(queue, "t-other", tenant="zeta")
        assert _leased_ids(queue, 3) == [ids[0], ids[1], other]
        assert queue.lease("w", TTL) is None

    def test_kind_limit_caps_live_leases(self, queue: RunQueue) -> None:
        queue.set_limit("kind", "gpu", 1)
        first = _put(queue, "t-1", kind="gpu")
        _put(queue, "t-2", kind="gpu")
        plain = _put(queue, "t-3")
        assert _leased_ids(queue, 2) == [first, plain]
        assert queue.lease("w", TTL) is None

    def test_a_closed_or_expired_lease_frees_its_place(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        queue.set_limit("tenant", "acme", 1)
        first, second, third = (_put(queue, f"t-{i}", tenant="acme") for i in range(3))
        lease = queue.lease("w", TTL)
        assert lease is not None and lease.entry.entry_id == first
        assert queue.lease("w", TTL) is None
        queue.close(lease, Completed())
        assert _leased_ids(queue, 1) == [second]
        clock.advance(PAST_TTL)
        # second's lease expired: it holds no place; the next lease takes second (older) again.
        assert _leased_ids(queue, 1) == [second]
        assert queue.lease("w", TTL) is None
        assert _entry(queue, third, tenant="acme").lease_holder is None

    def test_zero_limit_holds_every_entry(self, queue: RunQueue) -> None:
        queue.set_limit("kind", "paused-kind", 0)
        _put(queue, "t-1", kind="paused-kind")
        assert queue.lease("w", TTL) is None
        assert queue.remove_limit("kind", "paused-kind") is True
        assert queue.lease("w", TTL) is not None

    def test_limits_are_listed_replaced_and_removed(self, queue: RunQueue) -> None:
        queue.set_limit("tenant", "b", 5)
        queue.set_limit("tenant", "a", 1)
        queue.set_limit("kind", "z", 2)
        queue.set_limit("tenant", "a", 3)
        assert queue.limits() == [
            ConcurrencyLimit("kind", "z", 2),
            ConcurrencyLimit("tenant", "a", 3),
            ConcurrencyLimit("tenant", "b", 5),
        ]
        assert queue.remove_limit("tenant", "a") is True
        assert queue.remove_limit("tenant", "a") is False
        assert [lim.name for lim in queue.limits()] == ["z", "b"]

    def test_begin_attempt_respects_limits(self, queue: RunQueue, store: Checkpointer) -> None:
        queue.set_limit("tenant", "acme", 1)
        _put(queue, "t-1", tenant="acme")
        _put(queue, "t-2", tenant="acme")
        policy = ClaimPolicy()
        assert store.begin_attempt("w", TTL, run_id="r-1", claim_policy=policy) is not None
        assert store.begin_attempt("w", TTL, run_id="r-2", claim_policy=policy) is None

    @pytest.mark.parametrize(
        ("scope", "name", "max_leases", "match"),
        [("team", "a", 1, "scope"), ("tenant", "", 1, "name"), ("kind", "a", -1, "max_leases")],
    )
    def test_set_limit_refuses_bad_arguments(
        self, queue: RunQueue, scope: str, name: str, max_leases: int, match: str
    ) -> None:
        with pytest.raises(ValidationError, match=match):
            queue.set_limit(scope, name, max_leases)  # type: ignore[arg-type]
        assert queue.limits() == []

    # --- schedules (SPEC §15.4) ----------------------------------------------------------------

    def _schedule(self, queue: RunQueue, **kwargs: object) -> Schedule:
        fields: dict[str, object] = {
            "name": "nightly",
            "cron": "0 3 * * *",
            "thread_id": "report",
            "input": {"n": 1},
        }
        fields.update(kwargs)
        schedule = Schedule(**fields)  # type: ignore[arg-type]
        stored = queue.put_schedule(schedule)
        assert stored.schedule == schedule and stored.paused is False
        assert stored.last_slot is None
        return schedule

    def test_fire_schedule_submits_each_slot_once(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        self._schedule(queue, kind="report", priority=4, tenant="acme")
        created = queue.schedules()[0].created_at
        clock.advance(timedelta(seconds=10))
        slot = _whole_second(created) + timedelta(seconds=5)
        ticket = queue.fire_schedule("nightly", slot)
        assert ticket is not None and ticket.existing is False
        entry = _entry(queue, ticket.entry_id, tenant="acme")
        assert (entry.thread_id, entry.input, entry.kind, entry.priority) == (
            "report",
            {"n": 1},
            "report",
            4,
        )
        assert entry.key == slot_key("nightly", slot)
        assert queue.fire_schedule("nightly", slot) is None
        assert queue.fire_schedule("nightly", slot - timedelta(seconds=1)) is None
        assert queue.schedules()[0].last_slot == slot

    def test_a_schedule_never_fires_into_its_deleted_thread_nor_the_next_of_that_id(
        self, queue: RunQueue, store: Checkpointer, clock: ClockControl
    ) -> None:
        """D241 (issue 46 item 1): a schedule belongs to its thread's incarnation. Once the
        thread it was made for is deleted, each slot is spent and nothing is submitted: the
        schedule neither re-creates the thread nor runs in a thread made again with its id
        (another tenant's, possibly). A schedule made after a delete fires as any."""
        _commit(store, "report", "r1", "c1")
        self._schedule(queue, tenant="acme")
        created = queue.schedules()[0].created_at
        clock.advance(timedelta(seconds=10))
        first = _whole_second(created) + timedelta(seconds=2)
        assert queue.fire_schedule("nightly", first) is not None
        for entry in queue.open_entries(tenant=ANY):
            queue.cancel(entry.entry_id, tenant=entry.tenant)
        assert store.delete_thread("report") is True
        clock.advance(timedelta(seconds=1))
        gone = first + timedelta(seconds=1)
        assert queue.fire_schedule("nightly", gone) is None  # deleted: nothing re-creates it
        assert queue.schedules()[0].last_slot == gone  # the slot is spent, not retried
        _commit(store, "report", "r2", "c2")  # the id made again (by anyone)
        clock.advance(timedelta(seconds=1))
        assert queue.fire_schedule("nightly", gone + timedelta(seconds=1)) is None
        assert queue.open_entries(tenant=ANY) == []
        # A schedule made for the new thread (after the delete) fires into it.
        self._schedule(queue, name="fresh", tenant="acme")
        clock.advance(timedelta(seconds=2))
        fresh = _whole_second(queue.schedules()[0].created_at) + timedelta(seconds=1)
        ticket = queue.fire_schedule("fresh", fresh)
        assert ticket is not None
        assert _entry(queue, ticket.entry_id, tenant="acme").thread_id == "report"

    def test_fire_schedule_refuses_future_and_paused_slots(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        self._schedule(queue)
        created = queue.schedules()[0].created_at
        future = _whole_second(created) + timedelta(hours=1)
        assert queue.fire_schedule("nightly", future) is None
        assert queue.fire_schedule("nightly", _whole_second(created)) is None  # not after it
        queue.pause_schedule("nightly")
        clock.advance(timedelta(hours=2))
        assert queue.fire_schedule("nightly", future) is None
        assert queue.pause_schedule("nightly", paused=False).paused is False
        assert queue.fire_schedule("nightly", future) is not None

    def test_schedules_are_listed_replaced_and_removed(self, queue: RunQueue) -> None:
        self._schedule(queue, name="b")
        self._schedule(queue, name="a", timezone="Europe/Paris", catch_up=True)
        assert [s.schedule.name for s in queue.schedules()] == ["a", "b"]
        queue.pause_schedule("a")
        replaced = queue.put_schedule(Schedule("a", "*/5 * * * *", "other"))
        assert replaced.paused is True and replaced.schedule.cron == "*/5 * * * *"
        assert queue.remove_schedule("a") is True
        assert queue.remove_schedule("a") is False
        with pytest.raises(NotFound):
            queue.pause_schedule("a")
        with pytest.raises(NotFound):
            queue.fire_schedule("a", datetime(2026, 1, 1, tzinfo=UTC))

    @pytest.mark.parametrize(
        ("field", "value"),
        [
            ("cron", "not a cron"),
            ("cron", ""),
            ("timezone", "Mars/Olympus"),
            ("name", ""),
            ("name", "n" * 201),
            ("thread_id", ""),
            ("kind", ""),
            ("priority", 2**31),
            ("max_attempts", 0),
        ],
    )
    def test_put_schedule_refuses_bad_fields(
        self, queue: RunQueue, field: str, value: object
    ) -> None:
        fields: dict[str, object] = {"name": "s", "cron": "* * * * *", "thread_id": "t"}
        fields[field] = value
        with pytest.raises(ValidationError, match=field if field != "name" else "name"):
            queue.put_schedule(Schedule(**fields))  # type: ignore[arg-type]
        assert queue.schedules() == []

    def test_fire_schedule_refuses_a_fractional_slot(self, queue: RunQueue) -> None:
        self._schedule(queue)
        with pytest.raises(ValidationError, match="slot"):
            queue.fire_schedule("nightly", datetime(2026, 1, 1, 0, 0, 0, 5, tzinfo=UTC))
        with pytest.raises(ValidationError, match="slot"):
            queue.fire_schedule("nightly", datetime(2026, 1, 1))  # naive
        assert queue.open_entries(tenant=ANY) == []

    # --- slots across daylight-saving changes (issue 37 item 7) ------------------------------

    def test_slots_across_dst(self, queue: RunQueue, clock: ClockControl) -> None:
        # Europe/Paris sets its clocks back at 2026-10-25 01:00Z (03:00 CEST -> 02:00 CET): the
        # wall times 02:00-02:59 occur twice. Slots are the UTC instants whose wall time
        # matches, so "15 1-3" is 23:15Z, 00:15Z, 01:15Z and 02:15Z, "30 2" 00:30Z and 01:30Z.
        from durable_graph.worker.scheduler import Scheduler

        queue.put_schedule(Schedule("probe", "0 0 1 1 *", "probe"))
        (probe,) = queue.schedules()
        queue.remove_schedule("probe")
        at = datetime(2026, 10, 24, 20, 0, tzinfo=UTC)
        clock.advance(at - probe.created_at)
        paris = {"timezone": "Europe/Paris"}
        queue.put_schedule(Schedule("hours", "15 1-3 * * *", "h", **paris))  # type: ignore[arg-type]
        queue.put_schedule(Schedule("half", "30 2 * * *", "m", **paris))  # type: ignore[arg-type]

        def tick_at(hour: int, minute: int) -> list[tuple[str, str]]:
            nonlocal at
            target = datetime(2026, 10, 25, hour, minute, tzinfo=UTC)
            clock.advance(target - at)
            at = target
            fired = Scheduler(queue, clock=target.timestamp).tick()
            return [(f.name, f.slot.strftime("%H:%M")) for f in fired]

        # Back after downtime across the first 02:xx: only the latest missed slot of each.
        assert sorted(tick_at(1, 5)) == [("half", "00:30"), ("hours", "00:15")]
        assert tick_at(1, 20) == [("hours", "01:15")]  # 02:15 CET, the repeated hour
        assert tick_at(1, 35) == [("half", "01:30")]
        assert tick_at(2, 20) == [("hours", "02:15")]  # 03:15 CET
        assert tick_at(23, 0) == []
        keys = sorted(e.key or "" for e in queue.open_entries(tenant=None, limit=100))
        assert keys == sorted(
            slot_key(name, datetime(2026, 10, 25, h, m, tzinfo=UTC))
            for name, h, m in [("hours", 0, 15), ("half", 0, 30), ("hours", 1, 15),
                               ("half", 1, 30), ("hours", 2, 15)]
        )  # fmt: skip

    # --- tenants (issue 37 item 8) --------------------------------------------------------------

    def test_a_put_never_replaces_another_tenants_schedule(self, queue: RunQueue) -> None:
        # Schedule names are schema-wide (docs/decisions.md): tenant B reusing A's name is
        # refused, nothing changes, and A's slots still go to A.
        mine = queue.put_schedule(
            Schedule("nightly", "0 3 * * *", "a-report", {"a": 1}, tenant="a")
        )
        for tenant in ("b", None):
            with pytest.raises(ValidationError, match="name"):
                queue.put_schedule(
                    Schedule("nightly", "* * * * *", "b-thread", {"b": 1}, tenant=tenant)
                )
        assert queue.schedules() == [mine]
        again = queue.put_schedule(Schedule("nightly", "0 4 * * *", "a-report", tenant="a"))
        assert again.schedule.cron == "0 4 * * *"  # its own tenant replaces it
