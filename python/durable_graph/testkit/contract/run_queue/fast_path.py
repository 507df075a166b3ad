"""The worker fast path (SPEC §11, sql/75_fast_path.sql): begin_attempt, renew_attempt,
finish_attempt and submit_many answer exactly as §5's steps would, each in one transaction, and
write nothing when they refuse.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import (
    ClaimLost,
    DuplicateCheckpoint,
    EntryClosed,
    LeaseLost,
    RunOfDeletedThread,
    StaleParent,
    SubmissionKeyReused,
    ThreadBusy,
    ValidationError,
)
from durable_graph.core.model import (
    AttemptBegun,
    Cancelled,
    Claim,
    ClaimPolicy,
    Commit,
    Completed,
    EventIn,
    Exhausted,
    Failed,
    Finished,
    Fresh,
    Interrupted,
    Mode,
    Resume,
    Started,
    Submission,
    ThreadDeleted,
    Ticket,
)
from durable_graph.core.run_queue import RunQueue, plan_attempt
from durable_graph.testkit.contract.run_queue.support import (
    PAST_TTL,
    TTL,
    _commit,
    _delete_marked,
    _entry,
    _lease,
    _near,
    _open,
    _refused,
    _submit,
)
from durable_graph.testkit.harness import ClockControl


def _begin(
    store: Checkpointer, run_id: str = "run-1", holder: str = "worker-1", **kw: object
) -> AttemptBegun:
    begun = store.begin_attempt(holder, TTL, run_id=run_id, **kw)  # type: ignore[arg-type]
    assert begun is not None, "expected an entry to begin"
    return begun


def _claimed(begun: AttemptBegun) -> Claim:
    assert begun.claim is not None, "expected the attempt to hold the thread's claim"
    return begun.claim


def _begun(store: Checkpointer, queue: RunQueue, max_attempts: int = 3) -> tuple[int, AttemptBegun]:
    """Submit one entry on thread-1 and begin an attempt on it (worker-1, run-1): its id and
    what begin_attempt answered."""
    entry_id = _submit(queue, max_attempts=max_attempts)
    begun = _begin(store)
    assert begun.lease.entry.entry_id == entry_id
    return entry_id, begun


def _begun_and_taken_over(
    store: Checkpointer, queue: RunQueue, clock: ClockControl
) -> tuple[int, AttemptBegun]:
    """As `_begun`, then the lease expired and worker-2 leased the entry (the claim is left)."""
    entry_id, begun = _begun(store, queue)
    clock.advance(PAST_TTL)
    _lease(queue, "worker-2")
    return entry_id, begun


def _begun_and_claim_taken(
    store: Checkpointer, queue: RunQueue, clock: ClockControl
) -> tuple[int, AttemptBegun, Claim]:
    """As `_begun`, then the claim expired and "thief" claimed the thread while the lease was
    kept (renewed): the entry's id, the attempt and the thief's claim."""
    entry_id, begun = _begun(store, queue)
    clock.advance(PAST_TTL)
    thief = store.claim("thread-1", "thief")
    queue.renew(begun.lease)
    return entry_id, begun, thief


_UNDER_ATTEMPT: dict[str, Callable[[Checkpointer, AttemptBegun], object]] = {
    "renew_attempt": lambda store, begun: store.renew_attempt(begun.lease, _claimed(begun)),
    "finish_attempt": lambda store, begun: store.finish_attempt(
        begun.lease, Completed(), _claimed(begun)
    ),
}
"""The fast-path calls made under a begun attempt's lease and claim."""


class FastPathTests:
    """SPEC §11's four calls against §5's steps."""

    # --- begin_attempt --------------------------------------------------------------------

    def test_begin_attempt_leases_records_claims_and_plans_fresh(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        entry_id, begun = _begun(store, queue)
        assert begun.lease.entry.entry_id == entry_id
        assert begun.lease.holder == "worker-1"
        assert begun.attempt == Started(1)
        assert begun.lease.attempt == Started(1)
        claim = _claimed(begun)
        assert (claim.thread_id, claim.holder) == ("thread-1", "run-1")
        assert claim.ttl == ClaimPolicy().ttl
        assert begun.latest is None
        assert begun.plan == Fresh()
        # The entry is the one read under the claim: it lists this attempt.
        assert [a.run_id for a in begun.entry.attempts] == ["run-1"]
        assert begun.entry == _entry(queue, entry_id)

    def test_begin_attempt_holds_lease_and_claim_like_the_steps(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        _, begun = _begun(store, queue)
        assert queue.lease("worker-2", TTL) is None
        with pytest.raises(ThreadBusy):
            store.claim("thread-1", "someone")
        assert store.renew_claim(_claimed(begun)).token == _claimed(begun).token
        assert queue.renew(begun.lease).token == begun.lease.token

    def test_begin_attempt_issues_greater_tokens_for_claim_than_lease(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        _, begun = _begun(store, queue)
        assert _claimed(begun).token > begun.lease.token

    def test_begin_attempt_returns_none_when_nothing_is_available(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        assert store.begin_attempt("worker-1", TTL, run_id="run-1") is None
        _submit(queue)
        _begin(store)
        assert store.begin_attempt("worker-2", TTL, run_id="run-2") is None

    def test_begin_attempt_uses_the_claim_policy_ttl(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        _submit(queue)
        policy = ClaimPolicy(ttl=timedelta(seconds=90), renew_every=timedelta(seconds=5))
        begun = _begin(store, claim_policy=policy)
        claim = _claimed(begun)
        assert claim.ttl == timedelta(seconds=90)
        _near(claim.expires_at, begun.lease.expires_at - TTL + timedelta(seconds=90))

    def test_begin_attempt_filters_by_tenant_as_lease_does(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        _submit(queue, "thread-a", tenant="a")
        b_id = _submit(queue, "thread-b", tenant="b")
        assert _begin(store, tenant="b").lease.entry.entry_id == b_id
        assert store.begin_attempt("w", TTL, run_id="r", tenant=None) is None

    def test_begin_attempt_on_busy_claim_keeps_lease_and_attempt_without_claim(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        entry_id = _submit(queue)
        other = store.claim("thread-1", "someone-else")
        begun = _begin(store)
        assert begun.attempt == Started(1)
        assert begun.claim is None and begun.plan is None and begun.latest is None
        assert _entry(queue, entry_id).lease_holder == "worker-1"
        assert [a.run_id for a in _entry(queue, entry_id).attempts] == ["run-1"]
        store.renew_claim(other)  # the live claim is untouched
        # The worker goes on step by step once the claim is free.
        store.release_claim(other)
        claim = store.claim("thread-1", "run-1")
        assert claim.holder == "run-1"

    def test_begin_attempt_on_exhausted_entry_records_nothing_and_claims_nothing(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        entry_id, first = _begun(store, queue, max_attempts=1)
        store.release_claim(_claimed(first))
        queue.release(first.lease)
        begun = _begin(store, run_id="run-2")
        assert begun.attempt == Exhausted()
        assert begun.claim is None and begun.plan is None
        entry = _entry(queue, entry_id)
        assert not entry.closed
        assert [a.run_id for a in entry.attempts] == ["run-1"]
        store.claim("thread-1", "x")  # the thread's claim was left free

    def test_begin_attempt_on_delete_marked_entry_closes_it(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        entry_id = _submit(queue)
        store.delete_thread("thread-1")
        begun = _begin(store)
        assert begun.attempt == ThreadDeleted()
        assert begun.claim is None and begun.plan is None
        assert _entry(queue, entry_id).outcome == Cancelled("thread_deleted")
        store.claim("thread-1", "x")

    def test_begin_attempt_with_taken_run_id_leases_without_attempt(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        _commit(store, "thread-1", "run-old", "cp-1")
        entry_id = _submit(queue)
        begun = _begin(store, run_id="run-old")
        assert begun.attempt is None and begun.lease.attempt is None
        assert begun.claim is None and begun.plan is None
        assert _entry(queue, entry_id).attempts == ()
        # As after lease(run_id=taken): the worker records a fresh run id under the lease.
        assert queue.record_attempt(begun.lease, "run-new") == Started(1)

    def test_begin_attempt_plans_resume_from_the_entry_runs_latest(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        entry_id, first = _begun(store, queue)
        claim = _claimed(first)
        store.commit(claim, _step("cp-1", None, "run-1", ("next",)))
        store.release_claim(claim)
        queue.release(first.lease)
        begun = _begin(store, run_id="run-2")
        assert begun.attempt == Started(2)
        latest = store.latest_of_runs("thread-1", ["run-1", "run-2"])
        assert latest is not None and latest.checkpoint_id == "cp-1"
        assert begun.latest == latest
        assert begun.plan == Resume(latest)
        assert begun.entry == _entry(queue, entry_id)
        assert begun.plan == plan_attempt(begun.entry, latest)

    def test_begin_attempt_plans_finished_when_the_run_finished(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        _, first = _begun(store, queue)
        store.commit(_claimed(first), _step("cp-1", None, "run-1", ()))
        store.release_claim(_claimed(first))
        queue.release(first.lease)
        begun = _begin(store, run_id="run-2")
        assert isinstance(begun.plan, Finished)
        assert begun.plan.checkpoint is not None
        assert begun.plan.checkpoint.checkpoint_id == "cp-1"

    def test_begin_attempt_ignores_checkpoints_of_other_runs(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        _commit(store, "thread-1", "run-api", "cp-api", next_nodes=("x",))
        _, begun = _begun(store, queue)
        assert begun.latest is None and begun.plan == Fresh()

    # --- the head, read under the claim (D73) -------------------------------------------------

    def test_begin_attempt_returns_the_threads_head_as_get_reads_it(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        _commit(store, "thread-1", "run-api", "cp-api", next_nodes=("x",))
        _submit(queue)
        begun = _begin(store)
        assert begun.head is not None and begun.head.checkpoint_id == "cp-api"
        assert begun.head == store.get("thread-1")
        # The worker's first commit chains onto it with no read of its own.
        store.commit(_claimed(begun), _step("cp-1", begun.head.checkpoint_id, "run-1", ()))

    def test_begin_attempt_head_is_none_on_a_thread_without_checkpoints(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        _submit(queue)
        assert _begin(store).head is None

    def test_begin_attempt_head_is_the_resumed_runs_own_last_commit(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        _submit(queue)
        first = _begin(store)
        store.commit(_claimed(first), _step("cp-1", None, "run-1", ("next",)))
        store.release_claim(_claimed(first))
        queue.release(first.lease)
        begun = _begin(store, run_id="run-2")
        assert begun.head == store.get("thread-1") == begun.latest

    def test_begin_attempt_reads_no_head_without_the_claim(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        _commit(store, "thread-1", "run-api", "cp-api")
        _submit(queue)
        store.claim("thread-1", "someone-else")
        begun = _begin(store)
        assert begun.claim is None and begun.head is None

    @pytest.mark.parametrize(
        "kwargs",
        [
            {"holder": ""},
            {"holder": None},
            {"ttl": 30},
            {"ttl": timedelta(0)},
            {"run_id": ""},
            {"run_id": None},
            {"claim_policy": "30s"},
            {"tenant": 3},
        ],
        ids=lambda kw: next(iter(kw)) + "=" + repr(next(iter(kw.values()))),
    )
    def test_begin_attempt_refuses_bad_arguments_writing_nothing(
        self, store: Checkpointer, queue: RunQueue, kwargs: dict[str, object]
    ) -> None:
        _submit(queue)
        args: dict[str, Any] = {"holder": "w", "ttl": TTL, "run_id": "r", **kwargs}
        _refused(queue, lambda: store.begin_attempt(**args), match=next(iter(kwargs)))

    # --- renew_attempt --------------------------------------------------------------------

    def test_renew_attempt_pushes_both_expiries_keeping_tokens(
        self, store: Checkpointer, queue: RunQueue, clock: ClockControl
    ) -> None:
        _, begun = _begun(store, queue)
        claim = _claimed(begun)
        clock.advance(timedelta(seconds=10))
        lease, renewed = store.renew_attempt(begun.lease, claim)
        assert (lease.token, renewed.token) == (begun.lease.token, claim.token)
        assert renewed.holder == "run-1" and renewed.thread_id == "thread-1"
        _near(lease.expires_at, begun.lease.expires_at + timedelta(seconds=10))
        _near(renewed.expires_at, claim.expires_at + timedelta(seconds=10))
        assert lease.entry.entry_id == begun.entry.entry_id

    def test_renew_attempt_with_lost_lease_raises_and_leaves_claim(
        self, store: Checkpointer, queue: RunQueue, clock: ClockControl
    ) -> None:
        _, begun = _begun_and_taken_over(store, queue, clock)
        with pytest.raises(LeaseLost):
            store.renew_attempt(begun.lease, _claimed(begun))
        # Nothing written: the claim kept its (expired) expiry, so another can claim.
        store.claim("thread-1", "x")

    def test_renew_attempt_with_lost_claim_raises_and_leaves_lease(
        self, store: Checkpointer, queue: RunQueue, clock: ClockControl
    ) -> None:
        entry_id, begun = _begun(store, queue)
        clock.advance(PAST_TTL)
        store.claim("thread-1", "thief")
        with pytest.raises(ClaimLost):
            store.renew_attempt(begun.lease, _claimed(begun))
        # Nothing written: the lease is still expired, so another worker may take it.
        assert _entry(queue, entry_id).lease_expires_at == begun.lease.expires_at

    def test_renew_attempt_refuses_a_claim_of_another_thread(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        _, begun = _begun(store, queue)
        stray = store.claim("thread-2", "x")
        with pytest.raises(ValidationError, match="claim"):
            store.renew_attempt(begun.lease, stray)

    # --- finish_attempt -------------------------------------------------------------------

    def test_finish_attempt_closes_and_releases_the_claim(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        entry_id, begun = _begun(store, queue)
        closed = store.finish_attempt(begun.lease, Completed({"ok": 1}), _claimed(begun))
        assert closed.outcome == Completed({"ok": 1})
        assert closed.closed_at is not None and closed.lease_holder is None
        assert closed == _entry(queue, entry_id)
        store.claim("thread-1", "next-run")  # released
        with pytest.raises(ClaimLost):
            store.release_claim(_claimed(begun))

    def test_finish_attempt_answers_as_close(self, store: Checkpointer, queue: RunQueue) -> None:
        _submit(queue, "thread-1")
        _submit(queue, "thread-2")
        fast = _begin(store, run_id="run-a")
        slow = _begin(store, run_id="run-b", holder="worker-2")
        a = store.finish_attempt(fast.lease, Failed("boom"), _claimed(fast))
        store.release_claim(_claimed(slow))
        b = queue.close(slow.lease, Failed("boom"))
        assert (a.outcome, a.lease_holder, a.closed_at_seq) == (
            b.outcome,
            b.lease_holder,
            b.closed_at_seq,
        )

    def test_finish_attempt_with_lost_lease_writes_nothing(
        self, store: Checkpointer, queue: RunQueue, clock: ClockControl
    ) -> None:
        entry_id, begun = _begun_and_taken_over(store, queue, clock)
        with pytest.raises(LeaseLost):
            store.finish_attempt(begun.lease, Completed(), _claimed(begun))
        assert not _entry(queue, entry_id).closed
        store.renew_claim(_claimed(begun))  # the claim was not released

    @pytest.mark.parametrize("call", sorted(_UNDER_ATTEMPT))
    def test_attempt_call_on_closed_entry_raises_entry_closed_writing_nothing(
        self, store: Checkpointer, queue: RunQueue, call: str
    ) -> None:
        entry_id, begun = _begun(store, queue)
        queue.cancel(entry_id)
        with pytest.raises(EntryClosed):
            _UNDER_ATTEMPT[call](store, begun)
        assert _entry(queue, entry_id).outcome == Cancelled("requested")
        with pytest.raises(ClaimLost):  # SPEC §19.2: the cancel ended the attempt's claim
            store.renew_claim(_claimed(begun))

    def test_finish_attempt_leaves_a_claim_that_is_no_longer_current(
        self, store: Checkpointer, queue: RunQueue, clock: ClockControl
    ) -> None:
        entry_id, begun, thief = _begun_and_claim_taken(store, queue, clock)
        closed = store.finish_attempt(begun.lease, Completed(), _claimed(begun))
        assert closed.outcome == Completed()
        assert _entry(queue, entry_id).closed
        store.renew_claim(thief)  # still current

    def test_finish_attempt_refuses_bad_outcome_writing_nothing(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        entry_id, begun = _begun(store, queue)
        with pytest.raises(ValidationError, match="outcome"):
            store.finish_attempt(begun.lease, "done", _claimed(begun))  # type: ignore[arg-type]
        assert not _entry(queue, entry_id).closed
        store.renew_claim(_claimed(begun))

    # --- finish_attempt with the last commit (SPEC §18.1) --------------------------------------

    def test_finish_attempt_with_commit_commits_closes_and_releases(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        entry_id, begun = _begun(store, queue)
        closed = store.finish_attempt(
            begun.lease,
            Completed({"ok": 1}),
            _claimed(begun),
            commit=_step("cp-1", None, "run-1", ()),
        )
        assert closed.outcome == Completed({"ok": 1}) and closed.lease_holder is None
        assert closed == _entry(queue, entry_id)
        head = store.get("thread-1")
        assert head is not None and (head.checkpoint_id, head.run_id) == ("cp-1", "run-1")
        assert head.state == {"n": "cp-1"} and head.next == ()
        assert closed.admitted  # the commit's admission mark (rule 10)
        assert closed.closed_at_seq == head.seq  # closed after the commit
        store.claim("thread-1", "next-run")  # released
        with pytest.raises(ClaimLost):
            store.release_claim(_claimed(begun))

    def test_finish_attempt_with_commit_answers_as_commit_then_finish(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        _commit(store, "thread-1", "run-api", "cp-0")
        _commit(store, "thread-2", "run-api", "cp-0")
        _submit(queue, "thread-1")
        _submit(queue, "thread-2")
        fused = _begin(store, run_id="run-a")
        steps = _begin(store, run_id="run-b", holder="worker-2")
        events = (EventIn("token", {"t": 1}), EventIn("token", {"t": 2}))
        a = store.finish_attempt(
            fused.lease,
            Completed(7),
            _claimed(fused),
            commit=Commit("cp-1", "cp-0", "run-a", {"s": 1}, metadata={"m": 1}, events=events),
        )
        store.commit(
            _claimed(steps),
            Commit("cp-1", "cp-0", "run-b", {"s": 1}, metadata={"m": 1}, events=events),
        )
        b = store.finish_attempt(steps.lease, Completed(7), _claimed(steps))
        assert (a.outcome, a.admitted, a.closed_at_seq, a.lease_holder) == (
            b.outcome,
            b.admitted,
            b.closed_at_seq,
            b.lease_holder,
        )
        ha, hb = store.get("thread-1"), store.get("thread-2")
        assert ha is not None and hb is not None
        assert (ha.parent_id, ha.state, ha.metadata, ha.next, ha.seq) == (
            hb.parent_id,
            hb.state,
            hb.metadata,
            hb.next,
            hb.seq,
        )
        ea, eb = store.events_after("thread-1", 0), store.events_after("thread-2", 0)
        assert [(e.seq, e.kind) for e in ea] == [(e.seq, e.kind) for e in eb]
        assert [e.payload for e in ea if e.kind == "token"] == [{"t": 1}, {"t": 2}]
        assert {e.run_id for e in ea[1:]} == {"run-a"}
        info_a, info_b = store.thread("thread-1"), store.thread("thread-2")
        assert info_a is not None and info_b is not None
        assert (info_a.head_id, info_a.last_seq) == (info_b.head_id, info_b.last_seq)

    def test_finish_attempt_with_commit_on_a_stale_claim_writes_nothing(
        self, store: Checkpointer, queue: RunQueue, clock: ClockControl
    ) -> None:
        entry_id, begun, thief = _begun_and_claim_taken(store, queue, clock)
        with pytest.raises(ClaimLost):
            store.finish_attempt(
                begun.lease, Completed(), _claimed(begun), commit=_step("cp-1", None, "run-1", ())
            )
        assert store.get("thread-1") is None
        assert not _entry(queue, entry_id).closed
        store.renew_claim(thief)  # still current
        queue.renew(begun.lease)  # still current

    def test_finish_attempt_with_commit_of_a_delete_marked_run_writes_nothing(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        lease = _delete_marked(queue, store)
        claim = store.claim("thread-1", "run-1")
        with pytest.raises(RunOfDeletedThread):
            store.finish_attempt(lease, Completed(), claim, commit=_step("cp-1", None, "run-1", ()))
        assert store.get("thread-1") is None
        assert not _entry(queue, lease.entry.entry_id).closed
        store.renew_claim(claim)  # not released

    def test_finish_attempt_with_commit_and_a_lost_lease_writes_nothing(
        self, store: Checkpointer, queue: RunQueue, clock: ClockControl
    ) -> None:
        entry_id, begun = _begun_and_taken_over(store, queue, clock)
        with pytest.raises(LeaseLost):
            store.finish_attempt(
                begun.lease, Completed(), _claimed(begun), commit=_step("cp-1", None, "run-1", ())
            )
        assert store.get("thread-1") is None  # the commit was rolled back with the close
        assert store.events_after("thread-1", 0) == []
        assert not _entry(queue, entry_id).closed
        store.renew_claim(_claimed(begun))  # not released

    def test_finish_attempt_with_commit_on_a_closed_entry_writes_nothing(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        entry_id, begun = _begun(store, queue)
        queue.cancel(entry_id)
        with pytest.raises(EntryClosed):
            store.finish_attempt(
                begun.lease, Completed(), _claimed(begun), commit=_step("cp-1", None, "run-1", ())
            )
        assert store.get("thread-1") is None
        assert _entry(queue, entry_id).outcome == Cancelled("requested")
        with pytest.raises(ClaimLost):  # SPEC §19.2: the cancel ended the attempt's claim
            store.renew_claim(_claimed(begun))

    def test_finish_attempt_with_commit_on_a_bad_parent_writes_nothing(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        entry_id, begun = _begun(store, queue)
        with pytest.raises(StaleParent):
            store.finish_attempt(
                begun.lease, Completed(), _claimed(begun), commit=_step("cp-1", "nope", "run-1", ())
            )
        assert store.get("thread-1") is None
        assert not _entry(queue, entry_id).closed
        store.renew_claim(_claimed(begun))
        queue.renew(begun.lease)

    def test_finish_attempt_with_commit_of_a_taken_checkpoint_id_writes_nothing(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        entry_id, begun = _begun(store, queue)
        first = store.commit(_claimed(begun), _step("cp-1", None, "run-1", ("next",)))
        with pytest.raises(DuplicateCheckpoint):
            store.finish_attempt(
                begun.lease,
                Completed(),
                _claimed(begun),
                commit=_step("cp-1", first.checkpoint_id, "run-1", ()),
            )
        assert store.get("thread-1") == first
        assert not _entry(queue, entry_id).closed

    def test_finish_attempt_commit_errors_come_before_the_lease_errors(
        self, store: Checkpointer, queue: RunQueue, clock: ClockControl
    ) -> None:
        entry_id, begun = _begun_and_taken_over(store, queue, clock)
        with pytest.raises(StaleParent):  # as commit (first) would raise before finish
            store.finish_attempt(
                begun.lease, Completed(), _claimed(begun), commit=_step("cp-1", "nope", "run-1", ())
            )
        assert not _entry(queue, entry_id).closed

    def test_finish_attempt_refuses_a_bad_commit_writing_nothing(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        entry_id, begun = _begun(store, queue)
        with pytest.raises(ValidationError, match="commit"):
            store.finish_attempt(begun.lease, Completed(), _claimed(begun), commit="cp")  # type: ignore[arg-type]
        with pytest.raises(ValidationError, match="state"):
            store.finish_attempt(
                begun.lease,
                Completed(),
                _claimed(begun),
                commit=Commit("cp-1", None, "run-1", {"x": float("nan")}),
            )
        assert store.get("thread-1") is None
        assert not _entry(queue, entry_id).closed
        store.renew_claim(_claimed(begun))

    # --- submit_many ----------------------------------------------------------------------

    def test_submit_many_submits_each_in_order(self, queue: RunQueue) -> None:
        tickets = queue.submit_many(
            [Submission("thread-1", 1), Submission("thread-2", 2), Submission("thread-1", 3)]
        )
        assert [t.existing for t in tickets] == [False, False, False]
        ids = [t.entry_id for t in tickets]
        assert ids == sorted(ids) and len(set(ids)) == 3
        assert [_entry(queue, i).input for i in ids] == [1, 2, 3]

    def test_submit_many_of_nothing_is_nothing(self, queue: RunQueue) -> None:
        assert queue.submit_many([]) == []

    def test_submit_many_dedups_by_key_as_submit_does(self, queue: RunQueue) -> None:
        first = queue.submit(Submission("thread-1", "go", key="k"))
        tickets = queue.submit_many(
            [
                Submission("thread-1", "go", key="k"),
                Submission("thread-2", 1, key="j"),
                Submission("thread-2", 1, key="j"),
            ]
        )
        assert tickets[0].entry_id == first.entry_id and tickets[0].existing
        assert tickets[2] == Ticket(tickets[1].entry_id, True)

    def test_submit_many_interrupts_as_submit_does(self, queue: RunQueue) -> None:
        tickets = queue.submit_many(
            [
                Submission("thread-1", 1, mode=Mode.INTERRUPT),
                Submission("thread-1", 2, mode=Mode.INTERRUPT),
            ]
        )
        assert _entry(queue, tickets[0].entry_id).outcome == Interrupted(tickets[1].entry_id)

    def test_submit_many_with_a_refused_submission_writes_nothing(self, queue: RunQueue) -> None:
        _submit(queue, "thread-9")
        before = _open(queue)
        with pytest.raises(ThreadBusy):
            queue.submit_many(
                [Submission("thread-1", 1), Submission("thread-9", 2, mode=Mode.REJECT)]
            )
        assert _open(queue) == before
        with pytest.raises(SubmissionKeyReused):
            queue.submit_many(
                [Submission("thread-1", 1, key="k"), Submission("thread-2", 1, key="k")]
            )
        assert _open(queue) == before
        later = queue.submit(Submission("thread-1", 1, key="k"))
        assert later.existing is False and later.entry_id > before[-1].entry_id

    def test_submit_many_refused_after_an_interrupt_reopens_what_it_closed(
        self, queue: RunQueue
    ) -> None:
        queued = queue.submit(Submission("thread-1", 1, mode=Mode.INTERRUPT)).entry_id
        queue.submit(Submission("thread-9", 1))
        before = _open(queue)
        with pytest.raises(ThreadBusy):
            queue.submit_many(
                [
                    Submission("thread-1", 2, mode=Mode.INTERRUPT),  # closes `queued`
                    Submission("thread-9", 2, mode=Mode.REJECT),
                ]
            )
        assert _open(queue) == before
        assert _entry(queue, queued).outcome is None
        lease = queue.lease("w", timedelta(seconds=30))
        assert lease is not None and lease.entry.entry_id == queued
        later = queue.submit(Submission("thread-1", 3))
        assert [e.entry_id for e in queue.open_entries(thread_id="thread-1")] == [
            queued,
            later.entry_id,
        ]

    def test_submit_many_refuses_bad_submission_naming_its_index(self, queue: RunQueue) -> None:
        with pytest.raises(ValidationError, match=r"submissions\[1\]"):
            queue.submit_many([Submission("thread-1", 1), Submission("", 1)])
        assert _open(queue) == []


def _step(checkpoint_id: str, parent_id: str | None, run_id: str, next: tuple[str, ...]) -> Commit:
    return Commit(checkpoint_id, parent_id, run_id, {"n": checkpoint_id}, next=next)


__all__ = ["FastPathTests"]
