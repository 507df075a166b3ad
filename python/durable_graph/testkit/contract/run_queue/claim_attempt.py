"""`claim_attempt`: the rest of `begin_attempt` once the thread's claim is free (SPEC §11,
§19.3, §23.5; sql/75_fast_path.sql ``dg_claim_attempt_v1``; D231).

An attempt begun while another claim was live holds its lease and its recorded attempt but no
claim and no plan. `claim_attempt` finishes it in one transaction: the lease checked as `renew`
checks it, the thread claimed as the given holder (`ThreadBusy` while a claim is live), and the
entry, ``latest`` over the runs of the entry's attempts and of its retry chain, the plan and the
head — what `begin_attempt` answers when the claim is free. So a retry begun on a busy thread is
planned by the store too, for our worker and for any caller of the SQL API.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import EntryClosed, LeaseLost, ThreadBusy
from durable_graph.core.model import (
    AttemptBegun,
    Claim,
    ClaimPolicy,
    Exhausted,
    Finished,
    Fresh,
    Lease,
    Resume,
    Started,
    Submission,
)
from durable_graph.core.run_queue import RunQueue
from durable_graph.testkit.contract.run_queue.retry_chain import THREAD, failed_entry, step
from durable_graph.testkit.contract.run_queue.support import (
    PAST_TTL,
    TTL,
    _entry,
    _lease,
    _open,
    _refused,
)
from durable_graph.testkit.harness import ClockControl

UNKNOWN = 987_654
"""An entry id no test creates."""


def _busy_begin(
    store: Checkpointer, run_id: str, holder: str = "worker-1"
) -> tuple[AttemptBegun, Claim]:
    """begin_attempt as ``holder`` with ``run_id`` while "someone-else" holds the thread's claim:
    the attempt (started, unclaimed) and that claim."""
    other = store.claim(THREAD, "someone-else")
    begun = store.begin_attempt(holder, TTL, run_id=run_id)
    assert begun is not None and begun.claim is None and begun.plan is None
    return begun, other


def _claim_after_busy(store: Checkpointer, run_id: str) -> AttemptBegun:
    """An attempt begun with ``run_id`` on a busy thread, claimed once the claim is released."""
    begun, other = _busy_begin(store, run_id)
    store.release_claim(other)
    return store.claim_attempt(begun.lease, run_id)


def _forged(lease: Lease, entry_id: int, tenant: str | None) -> Lease:
    """``lease`` aimed at ``entry_id`` by a caller of ``tenant`` (its token kept)."""
    return dataclasses.replace(
        lease, entry=dataclasses.replace(lease.entry, entry_id=entry_id, tenant=tenant)
    )


def _answer(store: Checkpointer, lease: Lease) -> str:
    """What ``claim_attempt(lease, "run-1")`` answers: "returned", or its error's type."""
    try:
        store.claim_attempt(lease, "run-1")
    except Exception as exc:  # the answer under test may be any store error
        return type(exc).__name__
    return "returned"


class ClaimAttemptTests:
    """SPEC §11's claim_attempt against begin_attempt's claimed answer, on every store."""

    def test_claim_attempt_after_a_busy_begin_claims_as_the_run_and_plans_fresh(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        entry_id = queue.submit(Submission(THREAD, "go")).entry_id
        claimed = _claim_after_busy(store, "run-1")
        assert claimed.claim is not None
        assert (claimed.claim.thread_id, claimed.claim.holder) == (THREAD, "run-1")
        assert claimed.claim.ttl == ClaimPolicy().ttl
        assert claimed.attempt == Started(1) and claimed.lease.attempt == Started(1)
        assert claimed.plan == Fresh() and claimed.latest is None and claimed.head is None
        # The entry is the one read under the claim, and the lease is the one held.
        assert claimed.entry == _entry(queue, entry_id)
        assert [a.run_id for a in claimed.entry.attempts] == ["run-1"]
        assert claimed.lease.entry == claimed.entry and claimed.lease.holder == "worker-1"
        assert queue.renew(claimed.lease).token == claimed.lease.token
        store.renew_claim(claimed.claim)  # the claim is the thread's current one

    def test_claim_attempt_uses_the_claim_policy_ttl(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        queue.submit(Submission(THREAD, "go"))
        begun, other = _busy_begin(store, "run-1")
        store.release_claim(other)
        policy = ClaimPolicy(ttl=TTL * 2)
        claimed = store.claim_attempt(begun.lease, "run-1", policy)
        assert claimed.claim is not None and claimed.claim.ttl == TTL * 2

    def test_claim_attempt_plans_a_retry_of_an_admitted_entry_resume(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        failed = failed_entry(queue, store, step("cp-1", None, "run-1"))
        retry = queue.retry(failed).entry_id
        claimed = _claim_after_busy(store, "run-2")
        assert claimed.entry.entry_id == retry
        assert isinstance(claimed.plan, Resume)
        assert claimed.plan.checkpoint.checkpoint_id == "cp-1"
        assert claimed.latest is not None and claimed.latest.checkpoint_id == "cp-1"
        assert claimed.head is not None and claimed.head.checkpoint_id == "cp-1"

    def test_claim_attempt_plans_a_retry_of_a_chain_that_finished_finished(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        failed = failed_entry(queue, store, step("cp-1", None, "run-1", done=True))
        queue.retry(failed)
        plan = _claim_after_busy(store, "run-2").plan
        assert isinstance(plan, Finished) and plan.checkpoint is not None
        assert plan.checkpoint.checkpoint_id == "cp-1"

    def test_claim_attempt_plans_a_retry_of_a_chain_never_admitted_fresh(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        failed = failed_entry(queue, store)  # failed before any commit
        queue.retry(failed)
        claimed = _claim_after_busy(store, "run-2")
        assert claimed.plan == Fresh() and claimed.latest is None

    def test_claim_attempt_on_an_exhausted_entry_claims_as_the_given_holder(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        """The worker claims an exhausted entry as itself (D42) to close it: the plan says
        whether its last run finished anyway."""
        queue.submit(Submission(THREAD, "go", max_attempts=1))
        first = store.begin_attempt("worker-1", TTL, run_id="run-1")
        assert first is not None and first.claim is not None
        store.commit(first.claim, step("cp-1", None, "run-1", done=True))
        store.release_claim(first.claim)
        queue.release(first.lease)
        begun, other = _busy_begin(store, "run-2")
        assert begun.attempt == Exhausted()
        store.release_claim(other)
        claimed = store.claim_attempt(begun.lease, "worker-1")
        assert claimed.attempt == Exhausted()
        assert claimed.claim is not None and claimed.claim.holder == "worker-1"
        assert isinstance(claimed.plan, Finished) and claimed.plan.checkpoint is not None
        assert claimed.plan.checkpoint.checkpoint_id == "cp-1"

    def test_claim_attempt_while_the_claim_is_held_raises_thread_busy_writing_nothing(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        queue.submit(Submission(THREAD, "go"))
        begun, other = _busy_begin(store, "run-1")
        _refused(queue, lambda: store.claim_attempt(begun.lease, "run-1"), ThreadBusy)
        store.renew_claim(other)  # the live claim is untouched
        assert queue.renew(begun.lease).token == begun.lease.token  # so is the lease

    def test_claim_attempt_with_a_lost_lease_raises_lease_lost_claiming_nothing(
        self, store: Checkpointer, queue: RunQueue, clock: ClockControl
    ) -> None:
        queue.submit(Submission(THREAD, "go"))
        begun, other = _busy_begin(store, "run-1")
        store.release_claim(other)
        clock.advance(PAST_TTL)
        _lease(queue, "worker-2")  # the entry is leased again
        _refused(queue, lambda: store.claim_attempt(begun.lease, "run-1"), LeaseLost)
        store.claim(THREAD, "x")  # the thread's claim was left free

    def test_claim_attempt_on_a_closed_entry_raises_entry_closed_claiming_nothing(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        entry_id = queue.submit(Submission(THREAD, "go")).entry_id
        begun, other = _busy_begin(store, "run-1")
        store.release_claim(other)
        queue.cancel(entry_id)
        _refused(queue, lambda: store.claim_attempt(begun.lease, "run-1"), EntryClosed)
        store.claim(THREAD, "x")

    def test_claim_attempt_on_another_tenants_entry_answers_as_for_an_unknown_id(
        self, store: Checkpointer, queue: RunQueue
    ) -> None:
        queue.submit(Submission(THREAD, "go", tenant="a"))
        begun, other = _busy_begin(store, "run-1")
        store.release_claim(other)
        lease = begun.lease
        for tenant in ("b", None):  # another tenant, and the no-tenant namespace
            theirs = _answer(store, _forged(lease, lease.entry.entry_id, tenant))
            assert theirs == _answer(store, _forged(lease, UNKNOWN, tenant)) == "EntryClosed"
        store.claim(THREAD, "x")  # nothing was claimed
        assert _open(queue)[0].lease_holder == "worker-1"

    @pytest.mark.parametrize(
        "kwargs",
        [{"lease": None}, {"holder": ""}, {"holder": None}, {"claim_policy": "30s"}],
        ids=lambda kw: next(iter(kw)) + "=" + repr(next(iter(kw.values()))),
    )
    def test_claim_attempt_refuses_bad_arguments_writing_nothing(
        self, store: Checkpointer, queue: RunQueue, kwargs: dict[str, object]
    ) -> None:
        queue.submit(Submission(THREAD, "go"))
        begun, other = _busy_begin(store, "run-1")
        store.release_claim(other)
        args: dict[str, Any] = {"lease": begun.lease, "holder": "run-1", **kwargs}
        _refused(queue, lambda: store.claim_attempt(**args), match=next(iter(kwargs)))
        store.claim(THREAD, "x")
