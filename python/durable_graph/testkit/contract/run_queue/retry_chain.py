"""A retry is planned with its retry chain's runs, in the store (SPEC §19.3, §23.5;
sql/75_fast_path.sql ``dg_begin_attempt_v2``).

`begin_attempt` of an entry that records ``retry_of`` plans it with every run of every attempt of
every entry of its chain (``retry_of``, that entry's ``retry_of``, ...): it resumes from the
newest checkpoint those runs committed (`Resume`), is `Finished` when that checkpoint has no next
tasks or when the chain was admitted and its checkpoints retracted, and is `Fresh` only when no
entry of the chain was admitted. A caller of the store's API — our worker or any other — gets
the plan that applies an input at most once however many retries run. An entry of the chain
reclaimed since ends the walk (its runs are no longer known).
"""

from __future__ import annotations

from collections.abc import Sequence

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.model import (
    AttemptBegun,
    Cancelled,
    Claim,
    Commit,
    Failed,
    Finished,
    Fresh,
    Resume,
    Submission,
)
from durable_graph.core.run_queue import RunQueue
from durable_graph.testkit.contract.run_queue.support import PAST_TTL, TTL, _entry
from durable_graph.testkit.harness import ClockControl

THREAD = "thread-1"


def _begin(store: Checkpointer, run_id: str) -> AttemptBegun:
    """begin_attempt as worker-1 with ``run_id``: claimed (the thread is free) and planned."""
    begun = store.begin_attempt("worker-1", TTL, run_id=run_id)
    assert begun is not None and begun.claim is not None and begun.plan is not None
    return begun


def _claim(begun: AttemptBegun) -> Claim:
    assert begun.claim is not None
    return begun.claim


def _fail(store: Checkpointer, begun: AttemptBegun, *, commits: Sequence[Commit] = ()) -> None:
    """The attempt commits ``commits`` under its claim, then its worker closes it Failed."""
    for commit in commits:
        store.commit(_claim(begun), commit)
    store.finish_attempt(begun.lease, Failed("a tool failed"), _claim(begun))


def failed_entry(queue: RunQueue, store: Checkpointer, *commits: Commit) -> int:
    """An entry whose first attempt, run-1, commits ``commits`` and fails (its worker closes it
    Failed: the last attempt, or a final error): its id."""
    entry_id = queue.submit(Submission(THREAD, "go", max_attempts=3)).entry_id
    _fail(store, _begin(store, "run-1"), commits=commits)
    return entry_id


def step(checkpoint_id: str, parent_id: str | None, run_id: str, *, done: bool = False) -> Commit:
    """A checkpoint of ``run_id``; with next tasks to run unless ``done``."""
    state = {"at": checkpoint_id}
    return Commit(checkpoint_id, parent_id, run_id, state, next=() if done else ("more",))


class RetryChainTests:
    """SPEC §19.3 in begin_attempt, on every store."""

    def test_a_retry_of_an_admitted_failed_entry_begins_with_resume(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        failed = failed_entry(queue, store, step("cp-1", None, "run-1"))
        retry = queue.retry(failed).entry_id
        begun = _begin(store, "run-2")
        assert begun.entry.entry_id == retry
        assert isinstance(begun.plan, Resume) and begun.plan.checkpoint.checkpoint_id == "cp-1"
        assert begun.latest is not None and begun.latest.checkpoint_id == "cp-1"
        assert begun.head is not None and begun.head.checkpoint_id == "cp-1"

    def test_a_retry_of_a_chain_that_finished_begins_finished(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        failed = failed_entry(queue, store, step("cp-1", None, "run-1", done=True))
        queue.retry(failed)
        begun = _begin(store, "run-2")
        assert isinstance(begun.plan, Finished) and begun.plan.checkpoint is not None
        assert begun.plan.checkpoint.checkpoint_id == "cp-1"

    def test_a_retry_of_an_admitted_chain_whose_turn_was_retracted_begins_finished(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        """The input was applied, then its checkpoints taken away: the admission mark says so."""
        queue.submit(Submission(THREAD, "go", max_attempts=1))
        begun = _begin(store, "run-1")
        store.commit(_claim(begun), step("cp-1", None, "run-1"))
        store.retract_turn(_claim(begun))
        _fail(store, begun)
        queue.retry(begun.entry.entry_id)
        assert _begin(store, "run-2").plan == Finished(None)

    def test_a_retry_of_a_chain_never_admitted_begins_fresh(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        failed = failed_entry(queue, store)  # failed before any commit
        queue.retry(failed)
        begun = _begin(store, "run-2")
        assert begun.plan == Fresh() and begun.latest is None

    def test_a_retry_of_a_cancelled_admitted_entry_begins_with_resume(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        entry_id = queue.submit(Submission(THREAD, "go", max_attempts=1)).entry_id
        begun = _begin(store, "run-1")
        store.commit(_claim(begun), step("cp-1", None, "run-1"))
        assert queue.cancel(entry_id).outcome == Cancelled("requested")
        queue.retry(entry_id)
        plan = _begin(store, "run-2").plan
        assert isinstance(plan, Resume) and plan.checkpoint.checkpoint_id == "cp-1"

    def test_a_retry_of_a_retry_resumes_from_the_chains_newest_checkpoint(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        """The first retry fails before any commit of its own: the second still resumes from
        what the first entry committed, two links back."""
        failed = failed_entry(queue, store, step("cp-1", None, "run-1"))
        first_retry = queue.retry(failed).entry_id
        begun = _begin(store, "run-2")
        assert isinstance(begun.plan, Resume)
        _fail(store, begun)
        second_retry = queue.retry(first_retry).entry_id
        again = _begin(store, "run-3")
        assert again.entry.entry_id == second_retry and again.entry.retry_of == first_retry
        assert isinstance(again.plan, Resume) and again.plan.checkpoint.checkpoint_id == "cp-1"

    def test_a_retry_of_a_retry_resumes_from_the_newest_of_every_links_checkpoints(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        failed = failed_entry(queue, store, step("cp-1", None, "run-1"))
        first_retry = queue.retry(failed).entry_id
        _fail(store, _begin(store, "run-2"), commits=[step("cp-2", "cp-1", "run-2")])
        queue.retry(first_retry)
        plan = _begin(store, "run-3").plan
        assert isinstance(plan, Resume) and plan.checkpoint.checkpoint_id == "cp-2"

    def test_a_retry_of_a_retry_of_a_chain_never_admitted_begins_fresh(
        self, queue: RunQueue, store: Checkpointer
    ) -> None:
        failed = failed_entry(queue, store)
        first_retry = queue.retry(failed).entry_id
        _fail(store, _begin(store, "run-2"))
        queue.retry(first_retry)
        assert _begin(store, "run-3").plan == Fresh()

    def test_a_later_attempt_of_a_retry_is_planned_with_the_chain_too(
        self, queue: RunQueue, store: Checkpointer, clock: ClockControl
    ) -> None:
        """The retry's first attempt was lost before committing (its lease expired): its second
        attempt resumes from the chain's checkpoint as the first would have."""
        failed = failed_entry(queue, store, step("cp-1", None, "run-1"))
        queue.retry(failed)
        first = _begin(store, "run-2")
        store.release_claim(_claim(first))
        clock.advance(PAST_TTL)
        second = _begin(store, "run-3")
        assert second.attempt is not None and second.entry.entry_id == first.entry.entry_id
        assert [a.run_id for a in second.entry.attempts] == ["run-2", "run-3"]
        assert isinstance(second.plan, Resume) and second.plan.checkpoint.checkpoint_id == "cp-1"

    def test_a_retrys_own_commits_are_newer_than_its_chains(
        self, queue: RunQueue, store: Checkpointer, clock: ClockControl
    ) -> None:
        failed = failed_entry(queue, store, step("cp-1", None, "run-1"))
        queue.retry(failed)
        first = _begin(store, "run-2")
        store.commit(_claim(first), step("cp-2", "cp-1", "run-2"))
        store.release_claim(_claim(first))
        clock.advance(PAST_TTL)
        plan = _begin(store, "run-3").plan
        assert isinstance(plan, Resume) and plan.checkpoint.checkpoint_id == "cp-2"

    def test_a_reclaimed_link_ends_the_walk(
        self, queue: RunQueue, store: Checkpointer, clock: ClockControl
    ) -> None:
        """Retention removed the failed entry (and with it what its runs were): the retry is
        planned with the chain's runs still known — here none, so it applies its input."""
        failed = failed_entry(queue, store, step("cp-1", None, "run-1"))
        retry = queue.retry(failed).entry_id
        clock.advance(PAST_TTL * 2)
        assert queue.reclaim(PAST_TTL) == 1
        assert queue.entry(failed) is None
        begun = _begin(store, "run-2")
        assert begun.entry.entry_id == retry and begun.plan == Fresh()
        assert _entry(queue, retry).retry_of == failed
