"""What a handler sees of its attempt: `RunContextBase` (the part of `RunContext` and
`AsyncRunContext` both workers share) and `LostFlag` (how it learns the attempt was lost)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Final, Generic, Protocol, Self, TypeVar

from durable_graph.core.errors import (
    StoreBusy,
    StoreError,
)
from durable_graph.core.model import (
    JSON,
    AttemptPlan,
    Checkpoint,
    Claim,
    Lease,
    QueueEntry,
)
from durable_graph.worker.ops import (
    RunHandler,
)

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


_MAX_ERROR_BYTES: Final = 64 * 1024
"""A traceback kept as an attempt's error is cut to its last 64 KiB (its end names the failure)."""


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

    @classmethod
    def starting(cls, store: StoreT, op: RunHandler, keeper: LostFlag) -> Self:
        """The context for the handler call ``op`` asks for."""
        return cls(
            store=store,
            entry=op.entry,
            plan=op.plan,
            run_id=op.run_id,
            attempt=op.attempt,
            head=op.head,
            keeper=keeper,
            claim=op.claim,
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

    def busy_wait(self, error: StoreBusy, started: float) -> float:
        """Issue 26 item 6: a write of the context met a busy store (`StoreBusy`: nothing was
        written). A busy store is not the handler's failure: the seconds to wait before the
        same call is made again, while the attempt lives (its lease is renewed meanwhile) and
        within one lease ttl of the call's start; past that, ``error`` is raised."""
        self.check()
        return busy_pause(error, started, self._keeper.lease, "a context write")


# --- the flow -------------------------------------------------------------------------------


__all__ = ["LostFlag", "RunContextBase", "StoreT"]
