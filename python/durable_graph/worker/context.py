"""What a handler sees of its attempt: `RunContextBase` (what both run contexts share) and
`LostFlag` (how it learns the attempt was lost)."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Final, Generic, Protocol, TypeVar

from durable_graph.core.errors import ClaimLost, StoreBusy, StoreError, ValidationError
from durable_graph.core.model import JSON, Checkpoint, Claim, Commit, EventIn, Lease
from durable_graph.core.validation import DEFAULT_MAX_VALUE_BYTES, check_commit
from durable_graph.worker.flow import HandlerCall

BUSY_RETRY_SECONDS: Final = 0.05  # an attempt's store call waits this after a `StoreBusy`
# One DEBUG record per wait on a busy store (``tests/bench/sqlite_writers.py`` counts them).
busy_log = logging.getLogger("durable_graph.worker.busy")


def busy_pause(error: StoreBusy, started: float, lease: Lease, call: str) -> float:
    """D69: the seconds to wait before a store call ``call`` that met a busy store (nothing done)
    is made again, within one lease ttl of its start (the lease renewed meanwhile); then raise."""
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
    """What a context asks its attempt: the error that ended it, if any, and the event then set."""

    lost: StoreError | None
    lost_event: threading.Event
    lease: Lease


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
    """What the sync and async run contexts share: the attempt's identity and its state (the
    writes are the subclasses' own, sync or awaited)."""

    def __init__(self, store: StoreT, call: HandlerCall, keeper: LostFlag) -> None:
        """The context of the handler ``call``; ``keeper`` says whether the attempt was lost."""
        self.store = store
        self.entry = call.entry
        self.plan = call.plan
        self.run_id = call.run_id
        self.attempt = call.attempt
        self._head = call.head
        self._keeper = keeper
        self._claim = call.claim
        self._last: Commit | None = None

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
        """`check`, then refuse a write after `commit_last`."""
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
        """The run's last checkpoint (``next=()``), committed with the entry's close (SPEC §18.1);
        checked now, and no write may follow it. Should the handler raise, or its output need
        recording, it is committed on its own first, as if `commit` had been called here."""
        self.check_writable()
        last = next_commit(self.run_id, self._head, state, (), metadata, events)
        check_commit(last, DEFAULT_MAX_VALUE_BYTES)
        self._last = last


__all__ = ["LostFlag", "RunContextBase", "StoreT", "WorkerStopped", "new_id", "next_commit"]
