"""The worker registry (issue 26 item 13, sql/86_workers.sql): heartbeats at the store's clock,
the live workers listed idle or busy, stopped and silent ones left out, on every backend."""

from __future__ import annotations

from datetime import timedelta

import pytest

from durable_graph.core.run_queue import RunQueue
from durable_graph.core.workers import FORGET_AFTER, SEEN_WITHIN, WorkerBeat
from durable_graph.testkit.contract.run_queue.support import SLACK, _refused
from durable_graph.testkit.harness import ClockControl


def _beat(holder: str, state: str = "idle", kinds: tuple[str, ...] | None = None) -> WorkerBeat:
    return WorkerBeat(holder, "host-1", 4242, kinds, state)  # type: ignore[arg-type]


class WorkerRegistryTests:
    """`worker_heartbeat` and `workers`."""

    def test_a_worker_that_beats_is_listed_idle_with_what_it_said(self, queue: RunQueue) -> None:
        seen = queue.worker_heartbeat(_beat("w-1", kinds=("a", "b")))
        assert (seen.holder, seen.host, seen.pid, seen.kinds, seen.state) == (
            "w-1",
            "host-1",
            4242,
            ("a", "b"),
            "idle",
        )
        assert seen.started_at == seen.last_seen
        assert queue.workers() == [seen]

    def test_a_later_beat_keeps_started_at_and_moves_last_seen(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        first = queue.worker_heartbeat(_beat("w-1"))
        clock.advance(timedelta(seconds=10))
        later = queue.worker_heartbeat(_beat("w-1", "busy"))
        assert later.started_at == first.started_at
        assert later.last_seen - first.last_seen >= timedelta(seconds=10) - SLACK
        assert [(w.holder, w.state) for w in queue.workers()] == [("w-1", "busy")]

    def test_workers_are_listed_by_holder_every_kind_as_none(self, queue: RunQueue) -> None:
        for holder in ("w-b", "w-a", "w-c"):
            queue.worker_heartbeat(_beat(holder))
        listed = queue.workers()
        assert [w.holder for w in listed] == ["w-a", "w-b", "w-c"]
        assert all(w.kinds is None for w in listed)

    def test_a_silent_worker_leaves_the_list_after_seen_within(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        queue.worker_heartbeat(_beat("w-old"))
        clock.advance(SEEN_WITHIN + timedelta(seconds=1))
        queue.worker_heartbeat(_beat("w-new"))
        assert [w.holder for w in queue.workers()] == ["w-new"]
        assert [w.holder for w in queue.workers(timedelta(minutes=5))] == ["w-new", "w-old"]

    def test_a_stopped_worker_leaves_the_list_at_once(self, queue: RunQueue) -> None:
        queue.worker_heartbeat(_beat("w-1"))
        queue.worker_heartbeat(_beat("w-2"))
        stopped = queue.worker_heartbeat(_beat("w-1", "stopped"))
        assert stopped.state == "stopped"
        assert [w.holder for w in queue.workers()] == ["w-2"]

    def test_a_beat_drops_workers_not_seen_for_a_day(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        queue.worker_heartbeat(_beat("w-gone"))
        clock.advance(FORGET_AFTER + timedelta(minutes=1))
        queue.worker_heartbeat(_beat("w-here"))
        assert [w.holder for w in queue.workers(FORGET_AFTER * 3)] == ["w-here"]

    def test_no_worker_no_rows(self, queue: RunQueue) -> None:
        assert queue.workers() == []

    @pytest.mark.parametrize(
        ("beat", "match"),
        [
            (WorkerBeat("", "h", 1, None, "idle"), "holder"),
            (WorkerBeat("w", "", 1, None, "idle"), "host"),
            (WorkerBeat("w", "h", -1, None, "idle"), "pid"),
            (WorkerBeat("w", "h", 2**31, None, "idle"), "pid"),
            (WorkerBeat("w", "h", 1, (), "idle"), "kinds"),
            (WorkerBeat("w", "h", 1, ("a", "a"), "idle"), "kinds"),
            (WorkerBeat("w", "h", 1, None, "asleep"), "state"),  # type: ignore[arg-type]
            ("w", "beat"),
        ],
    )
    def test_heartbeat_refuses_a_bad_beat(self, queue: RunQueue, beat: object, match: str) -> None:
        _refused(queue, lambda: queue.worker_heartbeat(beat), match=match)  # type: ignore[arg-type]

    @pytest.mark.parametrize("bad", [timedelta(0), timedelta(seconds=-1), 30, None])
    def test_workers_refuses_a_bad_bound(self, queue: RunQueue, bad: object) -> None:
        _refused(queue, lambda: queue.workers(bad), match="seen_within")  # type: ignore[arg-type]

    def test_workers_are_read_page_by_page(self, queue: RunQueue) -> None:
        # Issue 37 item 9: however many holders beat, one read returns a page at most.
        holders = [f"w-{i:04d}" for i in range(1, 1206)]
        for holder in holders:
            queue.worker_heartbeat(_beat(holder))
        assert len(queue.workers()) == 1000  # the default page
        pages: list[list[str]] = []
        after: str | None = None
        while True:
            page = [w.holder for w in queue.workers(after=after, limit=500)]
            if not page:
                break
            pages.append(page)
            after = page[-1]
        assert [len(p) for p in pages] == [500, 500, 205]
        assert [h for p in pages for h in p] == holders
        assert [w.holder for w in queue.workers(after="w-0003", limit=2)] == ["w-0004", "w-0005"]

    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [
            ({"limit": 0}, "limit"),
            ({"limit": 1001}, "limit"),
            ({"limit": "5"}, "limit"),
            ({"after": ""}, "after"),
            ({"after": 5}, "after"),
        ],
    )
    def test_workers_refuses_a_bad_page(
        self, queue: RunQueue, kwargs: dict[str, object], match: str
    ) -> None:
        _refused(queue, lambda: queue.workers(**kwargs), match=match)  # type: ignore[arg-type]
