"""What a handler sees of its attempt: `RunContextBase` (the part of `RunContext` and
`AsyncRunContext` both workers share) and `LostFlag` (how it learns the attempt was lost)."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Final, Generic, Protocol, Self, TypeVar

from durable_graph.core.errors import (
    ClaimLost,
    StoreBusy,
    StoreError,
    ValidationError,
)
from durable_graph.core.model import (
    JSON,
    AttemptPlan,
    Checkpoint,
    Claim,
    Commit,
    EventIn,
    Lease,
    QueueEntry,
)
from durable_graph.core.validation import DEFAULT_MAX_VALUE_BYTES, check_commit
from durable_graph.worker.flow import HandlerCall

BUSY_RETRY_SECONDS: Final = 0.05
"""How long an attempt's store call waits after a `StoreBusy` before it tries again."""

busy_log = logging.getLogger("durable_graph.worker.busy")
"""One DEBUG record per wait on a busy store (``tests/bench/sqlite_writers.py`` counts them)."""


def busy_pause(error: StoreBusy, started: float, lease: Lease, call: str) -> float:
    """Issue 26 item 6 (D69): an attempt's store call ``call`` met a busy store (`StoreBusy`:
    nothing was done). A busy store is not the attempt's failure: the seconds to wait before the
    same call is made again, within one lease ttl of the call's start (the lease is renewed
    meanwhile); past that, ``error`` is raised."""
    if time.monotonic() - started >= lease.ttl.total_seconds():
        raise error
    busy_log.debug(
        "entry %d: %s met a busy store; the same call again in %.0f ms, same attempt",
        lease.entry.entry_id,
        call,
        BUSY_RETRY_SECONDS * 1000,
    )
    return BUSY_RETRY_SECONDS


class WorkerStopped(ClaimLost):
    """The worker shut down past its deadline and released this attempt's claim and lease."""


class LostFlag(Protocol):
    """What a context asks its attempt's keeper: the error that ended the attempt, if any, and
    the event set when it did."""

    @property
    def lost(self) -> StoreError | None: ...

    @property
    def lost_event(self) -> threading.Event: ...

    @property
    def lease(self) -> Lease: ...


StoreT = TypeVar("StoreT")


def new_id() -> str:
    """A fresh run or checkpoint id."""
    return uuid.uuid4().hex


def next_commit(
    run_id: str,
    head: Checkpoint | None,
    state: JSON,
    next: Sequence[str] = (),
    metadata: JSON = None,
    events: Sequence[EventIn] = (),
) -> Commit:
    """The attempt's next checkpoint: a fresh id, chained onto ``head`` (the thread's head)."""
    return Commit(
        checkpoint_id=new_id(),
        parent_id=None if head is None else head.checkpoint_id,
        run_id=run_id,
        state=state,
        metadata=metadata,
        next=tuple(next),
        events=tuple(events),
    )


class RunContextBase(Generic[StoreT]):
    """What the sync and async run contexts share: the attempt's identity and its state.

    The writes (`commit`, `append_events`, `record_effect`) are the subclasses' own, sync or
    awaited.
    """

    def __init__(
        self,
        *,
        store: StoreT,
        entry: QueueEntry,
        plan: AttemptPlan,
        run_id: str,
        attempt: int,
        head: Checkpoint | None,
        keeper: LostFlag,
        claim: Claim,
    ) -> None:
        self.store = store
        self.entry = entry
        self.plan = plan
        self.run_id = run_id
        self.attempt = attempt
        self._head = head
        self._keeper = keeper
        self._claim = claim
        self._last: Commit | None = None

    @classmethod
    def starting(cls, store: StoreT, call: HandlerCall, keeper: LostFlag) -> Self:
        """The context for the handler ``call``."""
        return cls(
            store=store,
            entry=call.entry,
            plan=call.plan,
            run_id=call.run_id,
            attempt=call.attempt,
            head=call.head,
            keeper=keeper,
            claim=call.claim,
        )

    @property
    def thread_id(self) -> str:
        return self.entry.thread_id

    @property
    def input(self) -> JSON:
        return self.entry.input

    @property
    def head(self) -> Checkpoint | None:
        """The thread's head: read after the claim was taken, then each commit of this attempt."""
        return self._head

    @property
    def claim(self) -> Claim:
        return self._claim

    @property
    def cancelled(self) -> bool:
        """True once the attempt lost its lease or claim: stop working and return."""
        return self._keeper.lost is not None

    def check(self) -> None:
        """Raise the error that ended the attempt, if it ended (cooperative cancellation)."""
        lost = self._keeper.lost
        if lost is not None:
            raise type(lost)(str(lost))

    def check_writable(self) -> None:
        """`check`, then refuse a write after `commit_last` (the run's last checkpoint is held:
        nothing may come after it)."""
        self.check()
        if self._last is not None:
            raise ValidationError(
                "the run's last checkpoint is held (commit_last): no write may follow"
            )

    @property
    def last(self) -> Commit | None:
        """The checkpoint `commit_last` holds for the close, if any."""
        return self._last

    def commit_last(
        self, state: JSON, metadata: JSON = None, events: Sequence[EventIn] = ()
    ) -> None:
        """The run's last checkpoint (``next=()``), committed with the entry's close in one
        transaction when the handler returns (SPEC §18.1: a one-step job is then three durable
        transactions: submit, begin, finish). Checked now (`ValidationError`, as `commit`
        would); no write may follow it. Should the handler raise afterwards, or its output need
        recording (a non-None output, or a later attempt), it is committed on its own first, so
        the thread ends as if `commit` had been called here."""
        self.check_writable()
        last = next_commit(self.run_id, self._head, state, (), metadata, events)
        check_commit(last, DEFAULT_MAX_VALUE_BYTES)
        self._last = last

    def busy_wait(self, error: StoreBusy, started: float) -> float:
        """Issue 26 item 6: a write of the context met a busy store (`StoreBusy`: nothing was
        written). A busy store is not the handler's failure: the seconds to wait before the
        same call is made again, while the attempt lives (its lease is renewed meanwhile) and
        within one lease ttl of the call's start; past that, ``error`` is raised."""
        self.check()
        return busy_pause(error, started, self._keeper.lease, "a context write")


__all__ = ["LostFlag", "RunContextBase", "StoreT", "WorkerStopped", "new_id", "next_commit"]
