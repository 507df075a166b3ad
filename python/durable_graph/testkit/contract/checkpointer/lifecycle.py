"""A closed store (rule 8) and many threads at once (§4: every method is thread-safe)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import timedelta

import pytest

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import ProcessingError, StaleParent, StoreError, ThreadBusy
from durable_graph.core.model import Checkpoint, Claim, EffectRecord, EventIn, RetentionPolicy
from durable_graph.testkit.contract.checkpointer.support import (
    FAST,
    T,
    _commit,
    _new_thread,
    _run_threads,
)


class LifecycleTests:
    """close (rule 8) and racing threads."""

    # --- close (rule 8) -------------------------------------------------------------------

    def test_close_is_idempotent(self, store: Checkpointer) -> None:
        store.close()
        store.close()

    def test_store_is_a_context_manager_that_closes(self, store: Checkpointer) -> None:
        with store as entered:
            assert entered is store
            _new_thread(store)
        with pytest.raises(ProcessingError):
            store.thread(T)

    @pytest.mark.parametrize(
        "call",
        [
            pytest.param(lambda s, c: s.claim("other", "h"), id="claim"),
            pytest.param(lambda s, c: s.renew_claim(c), id="renew_claim"),
            pytest.param(lambda s, c: s.release_claim(c), id="release_claim"),
            pytest.param(lambda s, c: _commit(s, c, "c2", "c1"), id="commit"),
            pytest.param(lambda s, c: s.put_writes(c, "c1", []), id="put_writes"),
            pytest.param(lambda s, c: s.append_events(c, [EventIn("e")]), id="append_events"),
            pytest.param(lambda s, c: s.record_effect(c, "k2", 1), id="record_effect"),
            pytest.param(lambda s, c: s.retract_turn(c), id="retract_turn"),
            pytest.param(lambda s, c: s.prune(T, RetentionPolicy(keep_last=1)), id="prune"),
            pytest.param(lambda s, c: s.prune_all(RetentionPolicy(keep_last=1)), id="prune_all"),
            pytest.param(lambda s, c: s.delete_thread(T), id="delete_thread"),
            pytest.param(lambda s, c: s.get(T), id="get"),
            pytest.param(lambda s, c: s.history(T), id="history"),
            pytest.param(lambda s, c: s.latest_of_runs(T, ["run-1"]), id="latest_of_runs"),
            pytest.param(lambda s, c: s.thread(T), id="thread"),
            pytest.param(lambda s, c: s.threads(), id="threads"),
            pytest.param(lambda s, c: s.children(T), id="children"),
            pytest.param(lambda s, c: s.events_after(T, 0), id="events_after"),
            pytest.param(
                lambda s, c: s.await_events_after(T, 0, timedelta(seconds=1), FAST),
                id="await_events_after",
            ),
            pytest.param(lambda s, c: next(s.subscribe(T, 0, FAST)), id="subscribe"),
            pytest.param(lambda s, c: s.get_effect(T, "k"), id="get_effect"),
            pytest.param(lambda s, c: s.effects(T), id="effects"),
        ],
    )
    def test_every_method_raises_processing_error_after_close(
        self, store: Checkpointer, seeded: Claim, call: Callable[[Checkpointer, Claim], object]
    ) -> None:
        store.close()
        with pytest.raises(ProcessingError):
            call(store, seeded)

    def test_subscribe_iterator_raises_processing_error_after_close(
        self, store: Checkpointer
    ) -> None:
        _new_thread(store)
        iterator = store.subscribe(T, 0, FAST)
        assert next(iterator).seq == 1
        store.close()
        with pytest.raises(ProcessingError):
            next(iterator)

    def test_waiting_subscribe_iterator_raises_processing_error_on_close(
        self, store: Checkpointer
    ) -> None:
        _new_thread(store)
        iterator = store.subscribe(T, 1, FAST)
        outcome: list[object] = []

        def wait() -> None:
            try:
                outcome.append(next(iterator))
            except BaseException as exc:  # asserted below
                outcome.append(exc)

        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(0.2)
        store.close()
        waiter.join(timeout=10)
        assert not waiter.is_alive()
        assert len(outcome) == 1 and isinstance(outcome[0], ProcessingError)

    def test_processing_error_is_a_store_error(self, store: Checkpointer) -> None:
        store.close()
        with pytest.raises(StoreError):
            store.threads()

    # --- concurrency (§4: every method is safe from many threads) -------------------------

    def test_racing_claims_exactly_one_wins(self, store: Checkpointer) -> None:
        results = _run_threads(8, lambda i: store.claim(T, f"racer-{i}"))
        winners = [r for r in results if isinstance(r, Claim)]
        assert len(winners) == 1
        assert all(isinstance(r, ThreadBusy) for r in results if not isinstance(r, Claim))
        info = store.renew_claim(winners[0])
        assert info.holder == winners[0].holder

    def test_racing_commits_on_one_parent_exactly_one_succeeds(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        results = _run_threads(2, lambda i: _commit(store, claim, f"c2-{i}", "c1"))
        winners = [r for r in results if isinstance(r, Checkpoint)]
        assert len(winners) == 1
        assert [type(r) for r in results if not isinstance(r, Checkpoint)] == [StaleParent]
        head = store.get(T)
        assert head is not None and head.checkpoint_id == winners[0].checkpoint_id
        assert [e.seq for e in store.events_after(T, 0)] == [1, 2]

    def test_racing_appends_get_distinct_gapless_numbers(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        results = _run_threads(
            4, lambda i: store.append_events(claim, [EventIn(f"e{i}"), EventIn(f"e{i}")])
        )
        batches = [r for r in results if isinstance(r, list)]
        assert len(batches) == 4
        assert sorted(e.seq for batch in batches for e in batch) == list(range(2, 10))
        for first, second in batches:  # each call's events are numbered together
            assert second.seq == first.seq + 1

    def test_racing_effects_first_write_wins_once(self, store: Checkpointer) -> None:
        claim = _new_thread(store)
        results = _run_threads(6, lambda i: store.record_effect(claim, "k", i))
        records = [r for r in results if isinstance(r, EffectRecord)]
        assert len(records) == 6
        assert sum(not r.existing for r in records) == 1
        assert len({json.dumps(r.value) for r in records}) == 1
