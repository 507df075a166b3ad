"""The worker fast path's argument checks, shared by every backend (SPEC §11).

`begin_attempt`, `claim_attempt`, `renew_attempt`, `finish_attempt` and `submit_many` do §5's
steps in one transaction each; their arguments are checked here first (`ValidationError` naming
the argument, nothing written), so all six stores refuse alike. The embedded stores compose their
existing step methods under their store lock (`compose_begin`, `compose_claim`); PostgreSQL
composes the step functions in ``sql/75_fast_path.sql``.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import timedelta
from typing import Any, NamedTuple

from durable_graph.core.errors import ClaimLost, ThreadBusy
from durable_graph.core.model import (
    ANY,
    AttemptBegun,
    AttemptStart,
    Checkpoint,
    Claim,
    ClaimPolicy,
    Commit,
    EntryOutcome,
    Exhausted,
    Lease,
    QueueEntry,
    Started,
    Submission,
    TenantFilter,
    Ticket,
)
from durable_graph.core.run_queue import plan_attempt
from durable_graph.core.validation import (
    DEFAULT_MAX_VALUE_BYTES,
    MAX_SUBMISSIONS,
    BeginArgs,
    EncodedCommit,
    check_begin,
    check_claim_attempt,
    check_finish,
    check_pair,
    check_submissions,
)


class BeginSteps(NamedTuple):
    """A sync store's step methods, as `compose_begin` calls them (under the store's lock)."""

    lease: Callable[..., Lease | None]
    claim: Callable[[str, str, ClaimPolicy], Claim]
    latest_of_runs: Callable[[str, list[str]], Checkpoint | None]
    get: Callable[[str], Checkpoint | None]
    entry: Callable[[int, str | None], QueueEntry | None]


class ClaimSteps(NamedTuple):
    """A sync store's step methods, as `compose_claim` calls them (under the store's lock)."""

    current_lease: Callable[[Lease], Lease]
    """The lease as stored now (`EntryClosed`, then `LeaseLost`, as `renew` checks it)."""
    claim: Callable[[str, str, ClaimPolicy], Claim]
    latest_of_runs: Callable[[str, list[str]], Checkpoint | None]
    get: Callable[[str], Checkpoint | None]
    entry: Callable[[int, str | None], QueueEntry | None]


def chain_runs(
    entry: QueueEntry, read: Callable[[int, str | None], QueueEntry | None]
) -> tuple[list[str], bool]:
    """The runs a plan of ``entry`` is made with, and whether any of them was admitted: its
    attempts' and, for a retry, those of every entry it retries (its ``retry_of``, that one's,
    ...; SPEC §19.3); an entry reclaimed since ends the walk (its runs are not known). The same
    walk as ``_dg_retry_chain`` in SQL."""
    runs = [a.run_id for a in entry.attempts]
    admitted = entry.admitted
    earlier = entry.retry_of
    while earlier is not None:  # ids decrease along the chain: it ends
        before = read(earlier, entry.tenant)
        if before is None or before.thread_id != entry.thread_id:
            break
        runs += [a.run_id for a in before.attempts]
        admitted = admitted or before.admitted
        earlier = before.retry_of
    return runs, admitted


def holders_attempt(entry: QueueEntry, holder: str) -> AttemptStart | None:
    """`claim_attempt`'s ``attempt``: ``Started`` of the entry's attempt whose run is ``holder``
    (the worker claims as its run, SPEC §5), else ``Exhausted`` once ``max_attempts`` are
    recorded (the worker claims as itself, D42), else None."""
    for attempt in entry.attempts:
        if attempt.run_id == holder:
            return Started(attempt.number)
    return Exhausted() if len(entry.attempts) >= entry.max_attempts else None


def compose_claim(
    lease: Lease, holder: str, policy: ClaimPolicy, steps: ClaimSteps
) -> AttemptBegun:
    """`claim_attempt` as §5's steps (the lease's check, `claim`, `entry`, `latest_of_runs`
    over the retry chain's runs, the plan, `get`), for a store whose caller holds its write lock
    throughout, as `compose_begin`."""
    current = steps.current_lease(lease)
    thread_id = current.entry.thread_id
    claim = steps.claim(thread_id, holder, policy)
    entry = steps.entry(current.entry.entry_id, current.entry.tenant)
    assert entry is not None  # open and the tenant's: the lease's check, under the same lock
    runs, admitted = chain_runs(entry, steps.entry)
    latest = steps.latest_of_runs(thread_id, runs) if runs else None
    plan = plan_attempt(dataclasses.replace(entry, admitted=admitted), latest)
    attempt = holders_attempt(entry, holder)
    current = dataclasses.replace(current, entry=entry, attempt=attempt)
    return AttemptBegun(current, attempt, claim, entry, latest, plan, steps.get(thread_id))


def compose_begin(args: BeginArgs, steps: BeginSteps) -> AttemptBegun | None:
    """`begin_attempt` as §5's steps, for a store whose caller holds its write lock throughout
    (so nothing interleaves: the steps are one transaction, and the entry the lease returns is
    the entry after the claim, which writes no entry)."""
    lease = steps.lease(args.holder, args.ttl, args.tenant, args.run_id, args.kinds)
    if lease is None:
        return None
    entry = lease.entry
    if not isinstance(lease.attempt, Started):
        return AttemptBegun(lease, lease.attempt, None, entry, None, None, None)
    try:
        claim = steps.claim(entry.thread_id, args.run_id, args.claim_policy)
    except ThreadBusy:
        return AttemptBegun(lease, lease.attempt, None, entry, None, None, None)
    # A first attempt's only run id is its own, which the lease's verdict proved names no
    # checkpoint of the thread: latest_of_runs is read only for a later one, or for a retry,
    # which is planned with the runs of its whole retry chain (SPEC §19.3, §23.5; as in SQL).
    runs, admitted = chain_runs(entry, steps.entry)
    latest = (
        None
        if lease.attempt.number == 1 and entry.retry_of is None
        else steps.latest_of_runs(entry.thread_id, runs)
    )
    plan = plan_attempt(dataclasses.replace(entry, admitted=admitted), latest)
    return AttemptBegun(
        lease, lease.attempt, claim, entry, latest, plan, steps.get(entry.thread_id)
    )


class EmbeddedFastPath:
    """The three attempt calls on an embedded store, composed from its step methods inside one
    write transaction of its storage (`_atomic`: SQLite's ``BEGIN IMMEDIATE``, which the steps
    join; the memory store's lock). `_precheck` raises, before anything is written, what the
    steps would raise, for a storage that cannot roll back (the memory one)."""

    def _atomic(self) -> AbstractContextManager[None]:
        raise NotImplementedError

    def _max_bytes(self) -> int:
        return DEFAULT_MAX_VALUE_BYTES

    def _precheck(
        self, lease: Lease, claim: Claim | None, commit: EncodedCommit | None = None
    ) -> None:
        """Raise, when given, the commit's errors (under ``claim``); then the lease's (closed,
        then lost); then, without a commit, the claim's (lost), if any."""

    @property
    def _steps(self) -> Any:
        """The sync store whose step methods are composed (``self``)."""
        return self

    def begin_attempt(
        self,
        holder: str,
        ttl: timedelta,
        *,
        run_id: str,
        claim_policy: ClaimPolicy = ClaimPolicy(),
        tenant: TenantFilter = ANY,
        kinds: Sequence[str] | None = None,
    ) -> AttemptBegun | None:
        args = check_begin(holder, ttl, run_id, claim_policy, tenant, kinds)
        store = self._steps
        steps = BeginSteps(
            store.run_queue.lease,
            store.claim,
            store.latest_of_runs,
            store.get,
            store.run_queue.entry,
        )
        with self._atomic():
            return compose_begin(args, steps)

    def _current_lease(self, lease: Lease) -> Lease:
        """The lease as stored now, with its entry (`EntryClosed`, then `LeaseLost`)."""
        raise NotImplementedError

    def claim_attempt(
        self, lease: Lease, holder: str, claim_policy: ClaimPolicy = ClaimPolicy()
    ) -> AttemptBegun:
        ls, h, policy = check_claim_attempt(lease, holder, claim_policy)
        store = self._steps
        steps = ClaimSteps(
            self._current_lease,
            store.claim,
            store.latest_of_runs,
            store.get,
            store.run_queue.entry,
        )
        with self._atomic():
            return compose_claim(ls, h, policy, steps)

    def renew_attempt(self, lease: Lease, claim: Claim) -> tuple[Lease, Claim]:
        ls, c = check_pair(lease, claim)
        store = self._steps
        with self._atomic():
            self._precheck(ls, c)
            renewed = store.run_queue.renew(ls)
            return renewed, store.renew_claim(c)

    def _commit_checked(self, claim: Claim, commit: EncodedCommit) -> None:
        """`commit` of already checked arguments (inside `_atomic`)."""
        raise NotImplementedError

    def finish_attempt(
        self,
        lease: Lease,
        outcome: EntryOutcome,
        claim: Claim,
        *,
        commit: Commit | None = None,
    ) -> QueueEntry:
        ls, _, c, cm = check_finish(lease, outcome, claim, self._max_bytes(), commit)
        store = self._steps
        with self._atomic():
            # The commit's errors, then close's; nothing is written on any of them.
            self._precheck(ls, None if cm is None else c, cm)
            if cm is not None:
                self._commit_checked(c, cm)  # SPEC §18.1: under the claim, first
            closed: QueueEntry = store.run_queue.close(ls, outcome)
            with contextlib.suppress(ClaimLost):  # not current: left alone
                store.release_claim(c)
            return closed


def submit_each(
    submit: Callable[[Submission], Ticket],
    submissions: Sequence[Submission],
    atomic: AbstractContextManager[None],
    max_bytes: int,
) -> list[Ticket]:
    """`submit_many` on an embedded store: each as `submit` would, inside ``atomic`` (a write
    transaction that undoes everything on error)."""
    check_submissions(submissions, max_bytes)
    with atomic:
        return [submit(s) for s in submissions]


__all__ = [
    "MAX_SUBMISSIONS",
    "BeginArgs",
    "BeginSteps",
    "ClaimSteps",
    "EmbeddedFastPath",
    "chain_runs",
    "check_begin",
    "check_claim_attempt",
    "check_finish",
    "check_pair",
    "check_submissions",
    "compose_begin",
    "compose_claim",
    "holders_attempt",
    "submit_each",
]
