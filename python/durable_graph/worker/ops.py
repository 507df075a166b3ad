"""The operations an attempt asks its worker to perform, and the loop that performs them.

The flows (`durable_graph.worker.flow.attempt_flow`, and here the keeper's `renewal` and
`finishing`) are generators without I/O: they yield an operation and are sent its result, or
thrown the `StoreError` it raised, driven by `durable_graph.core.ops` (`drive`, `drive_async`:
the one driver, shared with the LangGraph saver). A `StoreOp`'s ``on(store)`` makes the call on a
sync store (the result) or an async one (an awaitable), so the sync and async workers perform the
same operations with one line each: ``op.on(store)`` or ``await op.on(store)``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Generator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol, TypeAlias

from durable_graph.core.errors import (
    ClaimLost,
    EntryClosed,
    LeaseLost,
    ProcessingError,
    StoreError,
    ValidationError,
)
from durable_graph.core.model import (
    AttemptPlan,
    Checkpoint,
    Claim,
    Commit,
    EntryOutcome,
    Lease,
    QueueEntry,
)
from durable_graph.core.ops import StoreOp, store_op


@dataclass(frozen=True, slots=True)
class Deferred:
    """A failed attempt with attempts left: hold the entry ``delay`` (backoff), noting ``error``."""

    delay: timedelta
    error: str | None


Settlement: TypeAlias = EntryOutcome | Deferred | None
"""How an attempt gives its lease back: closed with an outcome, deferred for a retry, or released
(None)."""


@dataclass(frozen=True, slots=True)
class Pause:
    """Sleep ``seconds`` (a worker may wake early on stop) → None."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Finish:
    """Release the claim, then close the entry with ``outcome`` (None: release the lease), once;
    ``commit``: the handler's last checkpoint, committed with the close (SPEC §18.1; only with
    an `EntryOutcome`).

    → the closed entry, or None when nothing was closed.
    """

    outcome: Settlement
    commit: Commit | None = None


@dataclass(frozen=True, slots=True)
class RunHandler:
    """Call the user's handler with a context built from these → `HandlerResult`."""

    entry: QueueEntry
    plan: AttemptPlan
    run_id: str
    attempt: int
    head: Checkpoint | None
    claim: Claim


@dataclass(frozen=True, slots=True)
class HandlerResult:
    """How the handler ended: its output, or the exception it raised; ``head`` is its context's."""

    output: object = None
    error: BaseException | None = None
    head: Checkpoint | None = None
    last: Commit | None = None
    """The run's last checkpoint, held by ``commit_last`` for the close (SPEC §18.1)."""


Operation = StoreOp | Pause | Finish | RunHandler


class OpPerformer(Protocol):
    """An attempt's keeper in its role for `perform`: making the store calls, and the one finish."""

    def call(self, op: StoreOp) -> Any: ...

    def finish(self, outcome: Settlement, commit: Commit | None = None) -> Any: ...


class AttemptWorker(Protocol):
    """A worker as `perform` sees it: pausing, and calling the handler with a context."""

    def _pause(self, seconds: float) -> Any: ...

    def _run_handler(self, keeper: Any, op: RunHandler) -> Any: ...


def perform(op: Operation, keeper: OpPerformer, worker: AttemptWorker) -> Any:
    """What each operation of `attempt_flow` means, for both workers: the result of the keeper's
    or the worker's method for it (from the async worker, an awaitable of the result)."""
    if isinstance(op, StoreOp):
        return keeper.call(op)
    if isinstance(op, Pause):
        return worker._pause(op.seconds)
    if isinstance(op, Finish):
        return keeper.finish(op.outcome, op.commit)
    assert isinstance(op, RunHandler)
    return worker._run_handler(keeper, op)


# --- the keeper: renewing, then finishing, an attempt's lease and claim ----------------------


class LeaseHolder(Protocol):
    """An attempt's keeper in its role for `renewal` and `finishing`: holding the lease and the
    claim (all immediate, no I/O)."""

    lease: Lease

    @property
    def lost(self) -> StoreError | None: ...

    def lose(self, error: StoreError) -> None: ...

    def current_claim(self) -> Claim | None: ...

    def claim_renewed(self, old: Claim, new: Claim) -> None:
        """Keep ``new`` unless the claim was taken away (released) since ``old`` was read."""
        ...

    def take_claim(self) -> Claim | None:
        """The claim, forgotten by the keeper (it is about to be released)."""
        ...


def _give_back_claim(keeper: LeaseHolder) -> Generator[StoreOp, Any, None]:
    """Prompt cancel (SPEC §13): the entry is closed or re-leased, so give the claim back now,
    and the handler's next store call under it raises `ClaimLost` even when it bypasses its
    context."""
    claim = keeper.take_claim()
    if claim is not None:
        with contextlib.suppress(StoreError):  # gone already: the same for the handler
            yield store_op("release_claim", claim)


def renewal(keeper: LeaseHolder, log: logging.Logger) -> Generator[StoreOp, Any, bool]:
    """Renew the lease, and the claim if one is held (one call, SPEC §11); False once the
    attempt is lost."""
    claim = keeper.current_claim()
    if claim is not None:
        try:
            lease, both = yield store_op("renew_attempt", keeper.lease, claim)
        except ClaimLost as exc:
            keeper.lose(exc)
            return False
        except (LeaseLost, EntryClosed) as exc:
            keeper.lose(exc)
            yield from _give_back_claim(keeper)
            return False
        except StoreError as exc:  # transient: both stay current until taken by another
            log.warning("entry %d: renewal failed: %s", keeper.lease.entry.entry_id, exc)
            return True
        keeper.lease = lease
        keeper.claim_renewed(claim, both)
        return True
    try:
        keeper.lease = yield store_op("run_queue.renew", keeper.lease)
    except (LeaseLost, EntryClosed) as exc:
        keeper.lose(exc)
        yield from _give_back_claim(keeper)
        return False
    except StoreError as exc:  # transient: the lease stays current until re-leased
        log.warning("entry %d: lease renewal failed: %s", keeper.lease.entry.entry_id, exc)
    claim = keeper.current_claim()
    if claim is None:
        return True
    try:
        renewed: Claim = yield store_op("renew_claim", claim)
    except ClaimLost as exc:
        keeper.lose(exc)
        return False
    except StoreError as exc:
        log.warning("thread %s: claim renewal failed: %s", claim.thread_id, exc)
        return True
    keeper.claim_renewed(claim, renewed)
    return True


def finishing(
    keeper: LeaseHolder, outcome: Settlement, commit: Commit | None = None
) -> Generator[StoreOp, Any, QueueEntry | None]:
    """Release the claim and close the entry with ``outcome`` — one ``finish_attempt`` call when
    both are held (SPEC §11), with ``commit`` (the handler's last checkpoint) committed in it
    (SPEC §18.1) — or, with ``outcome`` None, release the claim then the lease, or, with a
    `Deferred` outcome (a retry after backoff, SPEC §13), release the claim then defer.

    The claim goes first: while the lease is live no other worker can lease the thread, so
    nobody meets a claim that is about to be released. → the closed entry, or None.

    A refused ``commit`` (the claim lost, or a stale parent, ...) writes nothing: the claim and
    the lease are given back, as after a crash, so a later attempt resumes the run.
    """
    claim = keeper.take_claim()
    if claim is not None and outcome is not None and not isinstance(outcome, Deferred):
        try:  # SPEC §11: close, and release the claim, in one call
            finished: QueueEntry = yield store_op(
                "finish_attempt", keeper.lease, outcome, claim, commit=commit
            )
            return finished
        except (LeaseLost, EntryClosed) as exc:
            keeper.lose(exc)
            with contextlib.suppress(StoreError):  # nothing was written: give the claim back
                yield store_op("release_claim", claim)
            return None
        except StoreError as exc:
            with contextlib.suppress(StoreError):  # if it fails, the claim expires with its ttl
                yield store_op("release_claim", claim)
            if commit is None or isinstance(exc, ProcessingError):
                raise
            keeper.lose(exc)  # the last commit was refused: nothing written
            with contextlib.suppress(StoreError):
                yield store_op("run_queue.release", keeper.lease)
            return None
    if claim is not None:
        with contextlib.suppress(StoreError):  # errors mean it is already gone
            yield store_op("release_claim", claim)
    try:
        if outcome is None:
            yield store_op("run_queue.release", keeper.lease)
            return None
        if isinstance(outcome, Deferred):
            try:
                yield store_op("run_queue.defer", keeper.lease, outcome.delay, outcome.error)
            except ValidationError:  # the store's value limit is below the error: keep the wait
                yield store_op("run_queue.defer", keeper.lease, outcome.delay, None)
            return None
        closed: QueueEntry = yield store_op("run_queue.close", keeper.lease, outcome)
    except (LeaseLost, EntryClosed) as exc:
        keeper.lose(exc)
        return None
    return closed


__all__ = [
    "AttemptWorker",
    "Deferred",
    "Finish",
    "HandlerResult",
    "LeaseHolder",
    "OpPerformer",
    "Operation",
    "Pause",
    "RunHandler",
    "Settlement",
    "finishing",
    "perform",
    "renewal",
]
