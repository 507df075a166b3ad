"""A closed store (rule 8) and racing callers on the queue."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import ProcessingError
from durable_graph.core.model import Lease, Submission
from durable_graph.core.run_queue import RunQueue
from durable_graph.testkit.contract.run_queue.support import _LEASE_CALLS, TTL, _lease, _submit

_CALLS_AFTER_STORE_CLOSE: dict[str, Callable[[RunQueue, Lease], object]] = {
    "submit": lambda queue, lease: queue.submit(Submission("thread-9", "x")),
    "lease": lambda queue, lease: queue.lease("worker-9", TTL),
    "renew": _LEASE_CALLS["renew"],
    "release": _LEASE_CALLS["release"],
    "record_attempt": _LEASE_CALLS["record_attempt"],
    "close": _LEASE_CALLS["close"],
    "cancel": lambda queue, lease: queue.cancel(lease.entry.entry_id),
    "entry": lambda queue, lease: queue.entry(lease.entry.entry_id),
    "open_entries": lambda queue, lease: queue.open_entries(),
    "await_closed": lambda queue, lease: queue.await_closed(lease.entry.entry_id, timedelta(0)),
    "reclaim": lambda queue, lease: queue.reclaim(timedelta(0)),
}


class QueueLifecycleTests:
    """A closed store (rule 8) and racing callers on the queue."""

    # --- rule 8: a closed store ---------------------------------------------------------------

    @pytest.mark.parametrize("call", sorted(_CALLS_AFTER_STORE_CLOSE))
    def test_queue_call_after_store_close_raises_processing_error(
        self, queue: RunQueue, store: Checkpointer, call: str
    ) -> None:
        _submit(queue)
        lease = _lease(queue)
        store.close()
        with pytest.raises(ProcessingError):
            _CALLS_AFTER_STORE_CLOSE[call](queue, lease)

    # --- concurrency ------------------------------------------------------------------------

    def test_racing_leases_on_one_head_have_one_winner(self, queue: RunQueue) -> None:
        _submit(queue, "thread-1")
        _submit(queue, "thread-1")
        results = _race(8, lambda n: queue.lease(f"worker-{n}", TTL))
        winners = [lease for lease in results if lease is not None]
        assert len(winners) == 1

    def test_racing_leases_on_many_threads_take_distinct_entries(self, queue: RunQueue) -> None:
        ids = {_submit(queue, f"thread-{n}") for n in range(8)}
        results = _race(8, lambda n: queue.lease(f"worker-{n}", TTL))
        taken = [lease.entry.entry_id for lease in results if lease is not None]
        assert len(taken) == len(set(taken))
        assert set(taken) <= ids

    def test_racing_identical_keyed_submits_make_one_entry(self, queue: RunQueue) -> None:
        tickets = _race(8, lambda n: queue.submit(Submission("thread-1", {"a": 1}, key="k")))
        assert len({t.entry_id for t in tickets}) == 1
        assert sorted(t.existing for t in tickets) == [False] + [True] * 7
        assert len(queue.open_entries()) == 1


def _race(count: int, call: Callable[[int], Any]) -> list[Any]:
    """Run ``call(n)`` in ``count`` Python threads released together; re-raise any failure."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count
    errors: list[BaseException] = []

    def run(n: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[n] = call(n)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    if errors:
        raise errors[0]
    return results
