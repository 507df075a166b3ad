"""Pagination of the reads that can grow without bound (SPEC §10 rule 2): `children` and
`open_entries` take ``after`` and ``limit``, and paging through them lists every row once, in the
unpaged order. Mixed into `CheckpointerContract` / `RunQueueContract`, so every backend runs them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

import pytest

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import ValidationError
from durable_graph.core.model import ANY, Commit, Mode, Submission, TenantFilter
from durable_graph.core.run_queue import RunQueue


def _child(store: Checkpointer, parent: str, child: str) -> None:
    claim = store.claim(child, "worker")
    store.commit(claim, Commit(f"{child}-c1", None, "run-1", {}, parent_thread_id=parent))


R = TypeVar("R")


def _pages(fetch: Callable[[Any, int], list[R]], key: Callable[[R], Any]) -> list[R]:
    """Every row, fetched two at a time, each page continuing after the last key returned."""
    rows: list[R] = []
    after: Any = None
    while True:
        page = fetch(after, 2)
        assert len(page) <= 2
        if not page:
            return rows
        rows.extend(page)
        after = key(page[-1])


def _paged_entry_ids(queue: RunQueue, tenant: TenantFilter) -> list[int]:
    """The ids of ``tenant``'s open entries, paged through two at a time."""
    pages = _pages(
        lambda after, limit: queue.open_entries(tenant, None, after, limit), lambda e: e.entry_id
    )
    return [e.entry_id for e in pages]


class CheckpointerPaginationContract:
    """`children(thread_id, after=None, limit=1000)`."""

    def test_children_pages_list_every_child_once_in_first_commit_order(
        self, store: Checkpointer
    ) -> None:
        claim = store.claim("p", "worker")
        store.commit(claim, Commit("c1", None, "run-1", {}))
        for name in ("k3", "k1", "k5", "k2", "k4"):
            _child(store, "p", name)
        paged = _pages(lambda after, limit: store.children("p", after, limit), lambda r: r)
        assert paged == ["k3", "k1", "k5", "k2", "k4"] == store.children("p")

    def test_children_limit_caps_the_page(self, store: Checkpointer) -> None:
        claim = store.claim("p", "worker")
        store.commit(claim, Commit("c1", None, "run-1", {}))
        for name in ("a", "b", "c"):
            _child(store, "p", name)
        assert store.children("p", limit=1) == ["a"]
        assert store.children("p", after="a", limit=5) == ["b", "c"]

    def test_children_after_an_id_that_is_not_a_child_is_empty(self, store: Checkpointer) -> None:
        claim = store.claim("p", "worker")
        store.commit(claim, Commit("c1", None, "run-1", {}))
        _child(store, "p", "a")
        assert store.children("p", after="nobody") == []
        assert store.children("p", after="p") == []

    @pytest.mark.parametrize("limit", [0, -1])
    def test_children_limit_below_one_is_refused(self, store: Checkpointer, limit: int) -> None:
        with pytest.raises(ValidationError, match="limit"):
            store.children("p", limit=limit)


class RunQueuePaginationContract:
    """`open_entries(tenant=None, thread_id=None, after=None, limit=1000)`."""

    def test_open_entries_pages_list_every_entry_once_in_queue_order(self, queue: RunQueue) -> None:
        for thread in ("t1", "t2"):
            queue.submit(Submission(thread, "go"))
        # An INTERRUPT entry goes ahead of t1's first one: queue order is not submission order.
        queue.submit(Submission("t1", "go", mode=Mode.INTERRUPT))
        for thread in ("t3", "t2", "t1"):
            queue.submit(Submission(thread, "go"))
        whole = [e.entry_id for e in queue.open_entries(tenant=ANY)]
        assert _paged_entry_ids(queue, ANY) == whole
        assert len(whole) == 6

    def test_open_entries_limit_caps_the_page(self, queue: RunQueue) -> None:
        ids = [queue.submit(Submission(f"t{i}", "go")).entry_id for i in range(3)]
        assert [e.entry_id for e in queue.open_entries(limit=2)] == ids[:2]
        assert [e.entry_id for e in queue.open_entries(after=ids[1], limit=2)] == ids[2:]

    def test_open_entries_pages_of_one_tenant_skip_other_tenants(self, queue: RunQueue) -> None:
        mine = [queue.submit(Submission(f"t{i}", "go", tenant="a")).entry_id for i in range(3)]
        queue.submit(Submission("t9", "go", tenant="b"))
        assert _paged_entry_ids(queue, "a") == mine

    def test_open_entries_after_an_unknown_entry_is_empty(self, queue: RunQueue) -> None:
        queue.submit(Submission("t1", "go"))
        assert queue.open_entries(after=10_000) == []

    def test_open_entries_pages_go_on_after_the_first_page_closes(self, queue: RunQueue) -> None:
        # Thread A holds 1 and 3, B holds 2 and 4 (issue 26 item 1): closing 1 after page one
        # moves neither B's entries behind the cursor nor A's ahead of it.
        a1, b2, a3, b4 = (queue.submit(Submission(t, "go")).entry_id for t in "ABAB")
        first = [e.entry_id for e in queue.open_entries(limit=2)]
        assert first == [a1, a3]
        queue.cancel(a1)
        rest = [e.entry_id for e in queue.open_entries(after=first[-1], limit=2)]
        assert rest == [b2, b4]

    def test_open_entries_walk_lists_every_entry_open_throughout_once(
        self, queue: RunQueue
    ) -> None:
        # Entries close, get leased and attempted (changing their queue rank), and arrive
        # between pages; every entry open throughout the walk is listed, none twice.
        modes = [Mode.ENQUEUE, Mode.INTERRUPT, Mode.ENQUEUE]
        first_ids = {
            queue.submit(Submission(f"t{i % 5}", "go", mode=modes[i % 3])).entry_id
            for i in range(24)
        }
        listed: list[int] = []
        closed: set[int] = set()
        after: int | None = None
        step = 0
        while page := queue.open_entries(ANY, None, after, 3):
            listed.extend(e.entry_id for e in page)
            after = page[-1].entry_id
            step += 1
            heads = {e.thread_id: e for e in reversed(queue.open_entries(ANY))}
            victim = sorted(heads.values(), key=lambda e: e.entry_id)[step % len(heads)]
            queue.cancel(victim.entry_id)
            closed.add(victim.entry_id)
            lease = queue.lease("walker", timedelta(seconds=30))
            if lease is not None:
                queue.record_attempt(lease, f"run-{step}")
            queue.submit(Submission(f"t{step % 7}", "late", mode=modes[step % 3]))
        assert len(listed) == len(set(listed)), "an entry was listed twice"
        still_open = {e.entry_id for e in queue.open_entries(ANY)}
        throughout = (first_ids & still_open) - closed
        assert throughout <= set(listed), f"skipped {sorted(throughout - set(listed))}"

    @pytest.mark.parametrize("limit", [0, -1])
    def test_open_entries_limit_below_one_is_refused(self, queue: RunQueue, limit: int) -> None:
        with pytest.raises(ValidationError, match="limit"):
            queue.open_entries(limit=limit)


__all__ = ["CheckpointerPaginationContract", "RunQueuePaginationContract"]
