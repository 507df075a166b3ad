"""Thread TTLs (SPEC §24.1, sql/48_thread_ttl.sql, D259-D261): set_thread_ttl, thread_ttl and
sweep_threads — a thread expires its TTL after its last activity (a commit, a run submitted or
closed, the TTL's setting; never a read), and the sweep deletes it or prunes it to its head,
never while it has an open entry or a live claim.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import ValidationError
from durable_graph.core.model import (
    ClaimPolicy,
    Completed,
    PendingWrite,
    Submission,
    ThreadSweep,
)
from durable_graph.testkit.contract.checkpointer.support import (
    SLACK,
    T,
    _chain,
    _commit,
    _new_thread,
    _released_claim,
    _snapshot,
)
from durable_graph.testkit.harness import ClockControl

MINUTE = timedelta(minutes=1)
CHILD = f"{T}\x1fns"


def _swept(store: Checkpointer) -> tuple[int, int]:
    result = store.sweep_threads(limit=100)
    assert isinstance(result, ThreadSweep)
    return result.deleted, result.kept_latest


class ThreadTtlTests:
    """set_thread_ttl, thread_ttl and sweep_threads."""

    # --- set and read --------------------------------------------------------------------

    def test_a_ttl_is_set_and_read_with_its_expiry(self, store: Checkpointer) -> None:
        _released_claim(store, ids=("c1",))
        info = store.thread(T)
        assert info is not None
        ttl = store.set_thread_ttl(T, 60, "keep_latest")
        assert ttl is not None and ttl == store.thread_ttl(T)
        assert (ttl.thread_id, ttl.minutes, ttl.strategy) == (T, 60.0, "keep_latest")
        # Setting it is activity: it expires an hour after it was set.
        assert (
            info.updated_at + 60 * MINUTE <= ttl.expires_at <= info.updated_at + 60 * MINUTE + SLACK
        )

    def test_the_default_strategy_is_delete(self, store: Checkpointer) -> None:
        _released_claim(store, ids=("c1",))
        ttl = store.set_thread_ttl(T, 1.5)
        assert ttl is not None and (ttl.minutes, ttl.strategy) == (1.5, "delete")

    def test_setting_it_again_replaces_it(self, store: Checkpointer) -> None:
        _released_claim(store, ids=("c1",))
        store.set_thread_ttl(T, 5)
        ttl = store.set_thread_ttl(T, 7, "keep_latest")
        assert ttl is not None and (ttl.minutes, ttl.strategy) == (7.0, "keep_latest")

    def test_none_removes_it(self, store: Checkpointer) -> None:
        _released_claim(store, ids=("c1",))
        store.set_thread_ttl(T, 5)
        assert store.set_thread_ttl(T, None) is None
        assert store.thread_ttl(T) is None

    def test_a_thread_without_a_commit_gets_none_and_nothing_is_written(
        self, store: Checkpointer
    ) -> None:
        assert store.set_thread_ttl("nobody", 5) is None
        assert store.thread_ttl("nobody") is None
        assert store.thread("nobody") is None

    def test_a_thread_without_a_ttl_reads_none(self, store: Checkpointer) -> None:
        _released_claim(store, ids=("c1",))
        assert store.thread_ttl(T) is None

    @pytest.mark.parametrize(
        ("minutes", "strategy", "name"),
        [
            (-1, "delete", "ttl"),
            (0, "delete", "ttl"),
            (5_256_001, "delete", "ttl"),
            (float("nan"), "delete", "ttl"),
            (float("inf"), "delete", "ttl"),
            (True, "delete", "ttl"),
            ("5", "delete", "ttl"),
            (5, "purge", "strategy"),
            (5, None, "strategy"),
        ],
    )
    def test_bad_ttls_are_refused_naming_the_argument_writing_nothing(
        self, store: Checkpointer, minutes: object, strategy: object, name: str
    ) -> None:
        _released_claim(store, ids=("c1",))
        store.set_thread_ttl(T, 5)
        before = (_snapshot(store), store.thread_ttl(T))
        with pytest.raises(ValidationError, match=name):
            store.set_thread_ttl(T, minutes, strategy)  # type: ignore[arg-type]
        assert (_snapshot(store), store.thread_ttl(T)) == before

    @pytest.mark.parametrize("limit", [0, -1, 10_001, True, 1.5, None])
    def test_a_bad_sweep_limit_is_refused_naming_it(
        self, store: Checkpointer, clock: ClockControl, limit: object
    ) -> None:
        _released_claim(store, ids=("c1",))
        store.set_thread_ttl(T, 1)
        clock.advance(2 * MINUTE)
        with pytest.raises(ValidationError, match="limit"):
            store.sweep_threads(limit)  # type: ignore[arg-type]
        assert store.thread(T) is not None

    # --- expiry and the sweep --------------------------------------------------------------

    def test_an_expired_thread_is_deleted_with_its_descendants(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        # The child named root U+001F suffix, so it lives with its root on a proxy (§16.2).
        fence = _new_thread(store, T, ids=("r1",))
        child = store.claim(CHILD, "h")
        _commit(store, child, "k1", None, parent_thread_id=T, fence=fence)
        store.release_claim(child)
        store.release_claim(fence)
        store.set_thread_ttl(T, 10)
        clock.advance(9 * MINUTE)
        assert _swept(store) == (0, 0)
        assert store.thread(T) is not None
        clock.advance(2 * MINUTE)
        assert _swept(store) == (1, 0)
        assert store.thread(T) is None and store.thread(CHILD) is None
        assert store.thread_ttl(T) is None
        assert _swept(store) == (0, 0)

    def test_a_commit_is_activity(self, store: Checkpointer, clock: ClockControl) -> None:
        claim = _new_thread(store)
        store.release_claim(claim)
        store.set_thread_ttl(T, 10)
        clock.advance(6 * MINUTE)
        claim = store.claim(T, "writer")
        _commit(store, claim, "c2", "c1")
        store.release_claim(claim)
        before = store.thread_ttl(T)
        clock.advance(6 * MINUTE)
        assert _swept(store) == (0, 0)
        assert store.thread_ttl(T) == before  # read again: reads are not activity
        clock.advance(5 * MINUTE)
        assert _swept(store) == (1, 0)

    def test_a_read_is_not_activity(self, store: Checkpointer, clock: ClockControl) -> None:
        _released_claim(store, ids=("c1",))
        store.set_thread_ttl(T, 10)
        clock.advance(6 * MINUTE)
        store.get(T)
        store.history(T)
        store.thread(T)
        clock.advance(5 * MINUTE)
        assert _swept(store) == (1, 0)

    def test_a_run_is_never_swept_while_open_and_its_close_is_activity(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        _released_claim(store, ids=("c1",))
        store.set_thread_ttl(T, 10)
        queue = store.run_queue
        queue.submit(Submission(thread_id=T, input={"q": 1}))
        clock.advance(30 * MINUTE)
        assert _swept(store) == (0, 0)
        assert store.thread(T) is not None
        lease = queue.lease("w", timedelta(minutes=5))
        assert lease is not None
        queue.close(lease, Completed())
        clock.advance(9 * MINUTE)
        assert _swept(store) == (0, 0)
        clock.advance(2 * MINUTE)
        assert _swept(store) == (1, 0)

    def test_a_live_claim_puts_the_sweep_off(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        _released_claim(store, ids=("c1",))
        store.set_thread_ttl(T, 10)
        store.claim(T, "long", ClaimPolicy(ttl=timedelta(minutes=30)))
        clock.advance(11 * MINUTE)
        assert _swept(store) == (0, 0)
        assert store.thread(T) is not None
        clock.advance(20 * MINUTE)  # the claim expired without a write
        assert _swept(store) == (1, 0)

    def test_keep_latest_keeps_the_head_with_its_writes_and_the_thread(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        claim = store.claim(T, "worker")
        _chain(store, claim, ["c1", "c2", "c3"])
        store.put_writes(claim, "c3", [PendingWrite("task", "ch", {"v": 1})])
        store.release_claim(claim)
        store.set_thread_ttl(T, 10, "keep_latest")
        clock.advance(11 * MINUTE)
        assert _swept(store) == (0, 1)
        assert [c.checkpoint_id for c in store.history(T)] == ["c3"]
        head = store.get(T)
        assert head is not None and head.writes == (PendingWrite("task", "ch", {"v": 1}),)
        assert store.events_after(T, 0) == []  # the log goes too; its numbering continues
        info = store.thread(T)
        assert info is not None and info.last_seq == 3
        ttl = store.thread_ttl(T)
        assert ttl is not None and ttl.strategy == "keep_latest"
        # Nothing happened since: the next sweeps leave it alone.
        clock.advance(11 * MINUTE)
        assert _swept(store) == (0, 0)
        # New activity expires again.
        claim = store.claim(T, "worker")
        _chain(store, claim, ["c4", "c5"], parent_id="c3")
        store.release_claim(claim)
        clock.advance(11 * MINUTE)
        assert _swept(store) == (0, 1)
        assert [c.checkpoint_id for c in store.history(T)] == ["c5"]

    def test_a_deleted_and_remade_thread_does_not_inherit_the_ttl(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        _released_claim(store, ids=("c1",))
        store.set_thread_ttl(T, 10)
        store.delete_thread(T)
        _released_claim(store, ids=("c1",))
        assert store.thread_ttl(T) is None
        clock.advance(11 * MINUTE)
        assert _swept(store) == (0, 0)
        assert store.thread(T) is not None

    def test_one_sweep_takes_at_most_limit_threads(
        self, store: Checkpointer, clock: ClockControl
    ) -> None:
        # Ids that share a partition on a proxy, where the limit holds per partition (each
        # partition's sweep its own transaction).
        ids = [f"p\x1f{n}" for n in range(3)]
        for thread_id in ids:
            _released_claim(store, thread_id, ids=("c1",))
            store.set_thread_ttl(thread_id, 1)
        clock.advance(2 * MINUTE)
        first = store.sweep_threads(2)
        assert (first.deleted, first.checked) == (2, 2)
        second = store.sweep_threads(2)
        assert (second.deleted, second.checked) == (1, 1)
        assert [store.thread(t) for t in ids] == [None, None, None]


__all__ = ["ThreadTtlTests"]
