"""The in-memory store: the contract suites (SPEC §7) plus a few direct checks of its own."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest

from durable_graph import (
    ClaimLost,
    ClaimPolicy,
    Commit,
    Completed,
    EntryClosed,
    EventIn,
    Exhausted,
    Finished,
    Fresh,
    Interrupted,
    LeaseLost,
    Mode,
    NotFound,
    PendingWrite,
    ProcessingError,
    RetentionPolicy,
    RunIdTaken,
    RunOfDeletedThread,
    StaleParent,
    Started,
    Submission,
    ThreadBusy,
    ThreadDeleted,
    ValidationError,
    plan_attempt,
)
from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.run_queue import RunQueue
from durable_graph.memory.store import InMemoryCheckpointer, MemoryStorage
from durable_graph.testkit import Harness, ManualClock
from durable_graph.testkit.contract.checkpointer.suite import CheckpointerContract
from durable_graph.testkit.contract.run_queue.suite import RunQueueContract


def _memory_harness() -> Iterator[Harness]:
    clock = ManualClock()
    store = InMemoryCheckpointer(clock=clock)
    yield Harness(store, clock)
    store.close()


class TestMemoryCheckpointer(CheckpointerContract):
    @pytest.fixture
    def harness(self) -> Iterator[Harness]:
        yield from _memory_harness()


class TestMemoryRunQueue(RunQueueContract):
    @pytest.fixture
    def harness(self) -> Iterator[Harness]:
        yield from _memory_harness()


# --- direct checks ---------------------------------------------------------------------------

SEC = timedelta(seconds=1)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(clock: ManualClock) -> Iterator[InMemoryCheckpointer]:
    s = InMemoryCheckpointer(clock=clock)
    yield s
    s.close()


def _commit(cid: str, parent: str | None, run: str = "r1", **kw: object) -> Commit:
    return Commit(checkpoint_id=cid, parent_id=parent, run_id=run, state={"n": cid}, **kw)  # type: ignore[arg-type]


def test_store_implements_both_protocols(store: InMemoryCheckpointer) -> None:
    typed: Checkpointer = store  # mypy checks the signatures structurally
    queue: RunQueue = store.run_queue
    assert isinstance(typed, Checkpointer)
    assert isinstance(queue, RunQueue)


def test_commit_numbers_caller_events_then_store_checkpoint(store: InMemoryCheckpointer) -> None:
    claim = store.claim("t", "h")
    cp = store.commit(claim, _commit("c1", None, events=(EventIn("a", {"x": 1}), EventIn("b"))))
    assert cp.seq == 3
    events = store.events_after("t", 0)
    assert [(e.seq, e.kind, e.run_id) for e in events] == [
        (1, "a", "r1"),
        (2, "b", "r1"),
        (3, "store.checkpoint", "r1"),
    ]
    assert events[2].payload == {"checkpoint_id": "c1", "run_id": "r1"}


def test_values_read_back_are_fresh_objects(store: InMemoryCheckpointer) -> None:
    claim = store.claim("t", "h")
    store.commit(claim, Commit("c1", None, "r1", state={"a": [1, "\u0000😀"]}))
    first = store.get("t")
    assert first is not None
    assert isinstance(first.state, dict)
    first.state["a"].append(2)
    again = store.get("t")
    assert again is not None and again.state == {"a": [1, "\u0000😀"]}


def test_claim_is_not_reentrant_and_expires_by_store_clock(
    store: InMemoryCheckpointer, clock: ManualClock
) -> None:
    claim = store.claim("t", "h", ClaimPolicy(ttl=10 * SEC, renew_every=SEC))
    with pytest.raises(ThreadBusy, match=r"^thread has a live claim$"):
        store.claim("t", "h")
    clock.advance(10 * SEC)
    second = store.claim("t", "other")
    assert second.token > claim.token
    with pytest.raises(ClaimLost):
        store.renew_claim(claim)


def test_commit_checks_parent_and_duplicate(store: InMemoryCheckpointer) -> None:
    claim = store.claim("t", "h")
    store.commit(claim, _commit("c1", None))
    with pytest.raises(StaleParent):
        store.commit(claim, _commit("c2", None))
    store.commit(claim, _commit("c2", "c1"))
    with pytest.raises(Exception) as err:
        store.commit(claim, _commit("c1", "c2"))
    assert type(err.value).__name__ == "DuplicateCheckpoint"


def test_put_writes_first_value_wins_and_orders_by_task_then_index(
    store: InMemoryCheckpointer,
) -> None:
    claim = store.claim("t", "h")
    store.commit(claim, _commit("c1", None))
    store.put_writes(claim, "c1", [PendingWrite("b", "x", 1), PendingWrite("a", "y", 2)])
    store.put_writes(claim, "c1", [PendingWrite("b", "x", 99)])
    cp = store.get("t")
    assert cp is not None
    assert [(w.task_id, w.value) for w in cp.writes] == [("a", 2), ("b", 1)]
    with pytest.raises(NotFound):
        store.put_writes(claim, "nope", [])


def test_writes_on_a_thread_without_commit_are_not_found(store: InMemoryCheckpointer) -> None:
    claim = store.claim("t", "h")
    with pytest.raises(NotFound):
        store.append_events(claim, [EventIn("a")])
    with pytest.raises(NotFound):
        store.record_effect(claim, "k", 1)
    with pytest.raises(NotFound):
        store.retract_turn(claim)


def test_record_effect_first_write_wins(store: InMemoryCheckpointer) -> None:
    claim = store.claim("t", "h")
    store.commit(claim, _commit("c1", None))
    first = store.record_effect(claim, "k", {"v": 1}, run_id="r1")
    second = store.record_effect(claim, "k", {"v": 2})
    assert not first.existing and second.existing and second.value == {"v": 1}
    got = store.get_effect("t", "k")
    assert got is not None and got.existing and got.run_id == "r1"


def test_retract_turn_removes_the_head_run(store: InMemoryCheckpointer) -> None:
    claim = store.claim("t", "h")
    store.commit(claim, _commit("c1", None, run="r1"))
    store.commit(claim, _commit("c2", "c1", run="r2"))
    store.commit(claim, _commit("c3", "c2", run="r2"))
    head = store.retract_turn(claim)
    assert head is not None and head.checkpoint_id == "c1"
    last = store.events_after("t", 0)[-1]
    assert last.kind == "store.retracted" and last.run_id is None
    assert last.payload == {"run_id": "r2", "checkpoint_ids": ["c3", "c2"]}
    assert store.retract_turn(claim) is None
    info = store.thread("t")
    assert info is not None and info.head_id is None
    assert store.retract_turn(claim) is None
    store.commit(claim, _commit("c4", None, run="r3"))


def test_delete_leaves_tombstone_numbering_and_tokens_keep_growing(
    store: InMemoryCheckpointer,
) -> None:
    claim = store.claim("p", "h")
    store.commit(claim, _commit("c1", None))
    child = store.claim("k", "h")
    store.commit(child, _commit("c1", None, parent_thread_id="p"))
    assert store.children("p") == ["k"]
    assert store.delete_thread("p") is True
    assert store.thread("p") is None and store.thread("k") is None
    assert store.delete_thread("p") is False
    again = store.claim("k", "h")
    assert again.token > child.token
    cp = store.commit(again, _commit("c9", None))
    assert cp.seq == 2


def test_prune_keeps_head_keep_last_and_evidence(
    store: InMemoryCheckpointer, clock: ManualClock
) -> None:
    q = store.run_queue
    q.submit(Submission("t", {"in": 1}))
    lease = q.lease("w", 60 * SEC, run_id="r1")
    assert lease is not None and lease.attempt == Started(1)
    claim = store.claim("t", "r1")
    store.commit(claim, _commit("c1", None, run="r1"))
    store.commit(claim, _commit("c2", "c1", run="r2"))
    store.commit(claim, _commit("c3", "c2", run="r3"))
    store.commit(claim, _commit("c4", "c3", run="r4"))
    clock.advance(100 * SEC)
    result = store.prune("t", RetentionPolicy(keep_last=1, max_age=SEC))
    assert result.checkpoints_removed == 2
    assert result.events_removed == 4
    assert [c.checkpoint_id for c in store.history("t")] == ["c4", "c1"]
    total = store.prune_all(RetentionPolicy(keep_last=1), batch=1)
    assert total.checkpoints_removed == 0


def test_threads_are_listed_in_utf8_byte_order(store: InMemoryCheckpointer) -> None:
    for tid in ["b", "\uff41", "a", "\U0001f600"]:
        claim = store.claim(tid, "h")
        store.commit(claim, _commit("c", None))
    ids = [t.thread_id for t in store.threads()]
    assert ids == sorted(ids, key=str.encode)
    assert [t.thread_id for t in store.threads(after="b", limit=1)] == ["\uff41"]


def test_validation_names_the_argument_and_writes_nothing(store: InMemoryCheckpointer) -> None:
    claim = store.claim("t", "h")
    with pytest.raises(ValidationError, match=r'commit.state\["a"\]\[0\]'):
        store.commit(claim, Commit("c1", None, "r1", state={"a": [float("nan")]}))
    with pytest.raises(ValidationError, match="thread_id"):
        store.thread("")
    assert store.thread("t") is None


def test_max_value_bytes_is_enforced() -> None:
    with InMemoryCheckpointer(max_value_bytes=10) as small:
        claim = small.claim("t", "h")
        with pytest.raises(ValidationError, match=r"commit\.state"):
            small.commit(claim, Commit("c1", None, "r1", state="x" * 20))
        small.commit(claim, Commit("c1", None, "r1", state="x"))


def test_closed_store_refuses_every_call_and_close_is_idempotent() -> None:
    store = InMemoryCheckpointer()
    store.close()
    store.close()
    with pytest.raises(ProcessingError):
        store.thread("t")
    with pytest.raises(ProcessingError):
        store.run_queue.submit(Submission("t", None))


def test_subscribe_yields_new_events_and_fails_after_close() -> None:
    store = InMemoryCheckpointer()
    claim = store.claim("t", "h")
    store.commit(claim, _commit("c1", None))
    it = store.subscribe("t", after_seq=0)
    assert next(it).seq == 1

    def later() -> None:
        time.sleep(0.05)
        store.append_events(claim, [EventIn("x")])

    threading.Thread(target=later).start()
    assert next(it).kind == "x"
    store.close()
    with pytest.raises(ProcessingError):
        next(it)


def test_await_events_after_returns_when_events_arrive(store: InMemoryCheckpointer) -> None:
    claim = store.claim("t", "h")
    store.commit(claim, _commit("c1", None))
    assert store.await_events_after("t", 1, timedelta(0)) == []
    timer = threading.Timer(0.05, lambda: store.append_events(claim, [EventIn("x")]))
    timer.start()
    started = time.monotonic()
    events = store.await_events_after("t", 1, timedelta(seconds=5))
    assert [e.seq for e in events] == [2]
    assert time.monotonic() - started < 2


def test_retract_after_prune_makes_the_newest_remaining_checkpoint_the_head(
    store: InMemoryCheckpointer,
) -> None:
    # D24 (retract after prune falls back to the newest remaining checkpoint): c2, the parent
    # of the retracted turn, was pruned; c1 was kept as evidence.
    q = store.run_queue
    q.submit(Submission("t", 1))
    assert q.lease("w", 60 * SEC, run_id="r1") is not None
    claim = store.claim("t", "r1")
    store.commit(claim, _commit("c1", None, run="r1"))
    store.commit(claim, _commit("c2", "c1", run="r2"))
    store.commit(claim, _commit("c3", "c2", run="r3"))
    assert store.prune("t", RetentionPolicy(keep_last=1)).checkpoints_removed == 1
    head = store.retract_turn(claim)
    assert head is not None and head.checkpoint_id == "c1"
    store.commit(claim, _commit("c4", "c1", run="r4"))


def test_lease_calls_on_a_reclaimed_entry_raise_entry_closed(
    store: InMemoryCheckpointer, clock: ManualClock
) -> None:
    # D25 (lease calls on a reclaimed entry raise EntryClosed): it was closed first.
    q = store.run_queue
    q.submit(Submission("t", 1))
    lease = q.lease("w", 60 * SEC)
    assert lease is not None
    q.close(lease, Completed())
    clock.advance(SEC)
    assert q.reclaim(timedelta(0)) == 1
    with pytest.raises(EntryClosed):
        q.renew(lease)
    with pytest.raises(EntryClosed):
        q.release(lease)
    with pytest.raises(EntryClosed):
        q.record_attempt(lease, "r9")
    with pytest.raises(EntryClosed):
        q.close(lease, Completed())


@pytest.mark.slow
def test_a_call_waiting_over_five_seconds_for_the_lock_raises_processing_error(
    store: InMemoryCheckpointer,
) -> None:
    # D23: the lock wait is bounded; the blocked call changes nothing.
    held = threading.Event()
    done = threading.Event()

    def hold() -> None:
        with store._storage._state.lock:  # type: ignore[attr-defined]
            held.set()
            done.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait()
    try:
        started = time.monotonic()
        with pytest.raises(ProcessingError):
            store.claim("t", "h")
        assert 4.5 < time.monotonic() - started < 8
    finally:
        done.set()
        holder.join()
    store.claim("t", "h")


# --- queue ------------------------------------------------------------------------------------


def test_worker_protocol_applies_input_once(store: InMemoryCheckpointer) -> None:
    q = store.run_queue
    ticket = q.submit(Submission("t", {"x": 1}, key="k"))
    assert q.submit(Submission("t", {"x": 1}, key="k")).existing
    lease = q.lease("w", 30 * SEC, run_id="run-1")
    assert lease is not None and lease.attempt == Started(1)
    claim = store.claim("t", "run-1")
    entry = q.entry(ticket.entry_id)
    assert entry is not None
    latest = store.latest_of_runs("t", [a.run_id for a in entry.attempts])
    assert plan_attempt(entry, latest) == Fresh()
    store.commit(claim, _commit("c1", None, run="run-1"))
    entry = q.entry(ticket.entry_id)
    assert entry is not None and entry.admitted
    latest = store.latest_of_runs("t", ["run-1"])
    assert isinstance(plan_attempt(entry, latest), Finished)
    closed = q.close(lease, Completed({"ok": True}))
    assert closed.closed and closed.closed_at_seq == 1 and closed.lease_holder is None
    with pytest.raises(EntryClosed):
        q.close(lease, Completed())


def test_only_the_head_is_leased_and_attempted_entries_come_first(
    store: InMemoryCheckpointer, clock: ManualClock
) -> None:
    q = store.run_queue
    a = q.submit(Submission("t", 1)).entry_id
    b = q.submit(Submission("t", 2)).entry_id
    lease = q.lease("w", SEC, run_id="ra")
    assert lease is not None and lease.entry.entry_id == a
    assert q.lease("w", SEC) is None
    clock.advance(SEC)
    i = q.submit(Submission("t", 3, mode=Mode.INTERRUPT)).entry_id
    assert [e.entry_id for e in q.open_entries()] == [a, i, b]
    again = q.lease("w", SEC)
    assert again is not None and again.entry.entry_id == a and again.token > lease.token
    with pytest.raises(LeaseLost):
        q.renew(lease)


def test_interrupt_closes_unattempted_interrupts(store: InMemoryCheckpointer) -> None:
    q = store.run_queue
    first = q.submit(Submission("t", 1, mode=Mode.INTERRUPT)).entry_id
    second = q.submit(Submission("t", 2, mode=Mode.INTERRUPT)).entry_id
    closed = q.entry(first)
    assert closed is not None and closed.outcome == Interrupted(by=second)
    with pytest.raises(ThreadBusy, match=r"^thread has an open entry$"):
        q.submit(Submission("t", 3, mode=Mode.REJECT))


def test_record_attempt_order_of_checks(store: InMemoryCheckpointer) -> None:
    q = store.run_queue
    q.submit(Submission("t", 1, max_attempts=1))
    lease = q.lease("w", 30 * SEC)
    assert lease is not None
    assert q.record_attempt(lease, "r1") == Started(1)
    assert q.record_attempt(lease, "r2") == Exhausted()
    q.submit(Submission("t", 2))
    q.close(lease, Completed())
    lease2 = q.lease("w", 30 * SEC)
    assert lease2 is not None
    with pytest.raises(RunIdTaken):
        q.record_attempt(lease2, "r1")
    store.delete_thread("t")
    assert q.record_attempt(lease2, "r3") == ThreadDeleted()
    with pytest.raises(EntryClosed):
        q.record_attempt(lease2, "r3")


def test_commit_of_a_deleted_threads_run_is_refused(store: InMemoryCheckpointer) -> None:
    q = store.run_queue
    q.submit(Submission("t", 1))
    lease = q.lease("w", 30 * SEC, run_id="r1")
    assert lease is not None
    store.delete_thread("t")
    claim = store.claim("t", "r1")
    with pytest.raises(RunOfDeletedThread):
        store.commit(claim, _commit("c1", None, run="r1"))


def test_reclaim_frees_keys_oldest_first(store: InMemoryCheckpointer, clock: ManualClock) -> None:
    q = store.run_queue
    e1 = q.submit(Submission("t", 1, key="k")).entry_id
    q.cancel(e1)
    clock.advance(10 * SEC)
    assert q.reclaim(timedelta(seconds=20)) == 0
    assert q.reclaim(timedelta(seconds=5)) == 1
    assert q.entry(e1) is None
    e2 = q.submit(Submission("t", 1, key="k")).entry_id
    assert e2 > e1


def test_tenants_do_not_see_each_other(store: InMemoryCheckpointer) -> None:
    q = store.run_queue
    e = q.submit(Submission("t", 1, tenant="a")).entry_id
    assert q.entry(e) is None and q.entry(e, tenant="b") is None
    with pytest.raises(NotFound):
        q.cancel(e)
    assert q.lease("w", SEC, tenant=None) is None
    assert q.lease("w", SEC, tenant="a") is not None


def test_await_closed_wakes_on_close(store: InMemoryCheckpointer) -> None:
    q = store.run_queue
    e = q.submit(Submission("t", 1)).entry_id
    assert q.await_closed(e, timedelta(0)) is None
    threading.Timer(0.05, lambda: q.cancel(e)).start()
    closed = q.await_closed(e, timedelta(seconds=5))
    assert closed is not None and closed.closed


@pytest.mark.slow
def test_a_waiter_whose_wait_ends_while_the_lock_is_held_gives_up_within_the_lock_bound(
    store: InMemoryCheckpointer,
) -> None:
    # #12 item 7: a wait never re-takes the store lock without D23's bound.
    storage = store._storage
    assert isinstance(storage, MemoryStorage)
    outcome: list[object] = []

    def wait() -> None:
        try:
            outcome.append(store.await_events_after("t", 0, timedelta(milliseconds=300)))
        except ProcessingError as exc:
            outcome.append(exc)

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.1)  # the waiter has read once and waits
    with storage._state.lock:
        started = time.monotonic()
        waiter.join(9)
        held_for = time.monotonic() - started
    waiter.join()
    assert held_for < 7  # it gave up while the lock was still held
    assert len(outcome) == 1 and isinstance(outcome[0], ProcessingError)
