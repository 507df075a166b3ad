"""What both halves of the embedded rules share: the checks that find the current claim or lease,
the encodings of the store's own values, snapshots (fresh objects every read), and the wait loop.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

from durable_graph.core.errors import ClaimLost, EntryClosed, LeaseLost
from durable_graph.core.model import (
    Checkpoint,
    Claim,
    EntryOutcome,
    Lease,
    Mode,
    QueueEntry,
    ThreadInfo,
)
from durable_graph.core.validation import (
    EncodedEvent,
    EncodedSubmission,
    decode_json,
    decode_outcome,
    encode_json,
    encode_outcome,
)
from durable_graph.embedded.rows import CheckpointRow, ClaimRow, EntryRow, ScheduleRow, ThreadRow
from durable_graph.embedded.storage import Storage, Tx

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T")
V = TypeVar("V", bound="DataclassInstance")

THREAD_BUSY_CLAIM: Final = "thread has a live claim"
THREAD_BUSY_ENTRY: Final = "thread has an open entry"

_STORE_PAYLOAD_LIMIT: Final = sys.maxsize
"""The store's own payloads (ids only) are not subject to ``max_value_bytes``."""


def store_event(kind: str, payload: object) -> EncodedEvent:
    """An event the store writes itself (``store.checkpoint``, ``store.retracted``)."""
    return EncodedEvent(kind, encode_json("payload", payload, _STORE_PAYLOAD_LIMIT), None)


def store_outcome(outcome: EntryOutcome) -> tuple[str, str]:
    """An outcome the store decides itself (cancellations, interruptions), encoded."""
    return encode_outcome(outcome, _STORE_PAYLOAD_LIMIT)


def current_claim(tx: Tx, claim: Claim) -> ClaimRow:
    """The claim's row when ``claim`` is the thread's current claim (D2: the latest token, not
    released), else `ClaimLost`."""
    row = tx.claim_of(claim.thread_id)
    if row is None or row.token != claim.token:
        raise ClaimLost(f"claim {claim.token} is not the current claim of the thread")
    return row


def refuse_closed_run(tx: Tx, thread_id: str, run_id: str | None) -> None:
    """SPEC §19.1: `EntryClosed` for a write under the run id of an attempt of a closed entry
    of the thread (a delete-marked entry's runs get `RunOfDeletedThread` later, D9); checked
    first, whatever became of the run's claim (cancel ended it)."""
    if run_id is not None and tx.run_of_closed_entry(thread_id, run_id):
        raise EntryClosed(f"run {run_id!r} is an attempt of a closed entry")


def write_run(tx: Tx, claim: Claim, run_id: str | None) -> str | None:
    """The run a claim-fenced write is under (SPEC §19.1, §23.5): its own ``run_id``, else the
    holder of ``claim`` when it is the thread's current claim (a worker claims as its run, SPEC
    §5); None when neither (the claim check that follows refuses a claim that is not current)."""
    if run_id is not None:
        return run_id
    row = tx.claim_of(claim.thread_id)
    return row.holder if row is not None and row.token == claim.token else None


def current_lease(tx: Tx, lease: Lease) -> EntryRow:
    """The entry of a current lease: `EntryClosed` first, then `LeaseLost` (rule 21)."""
    entry = tx.entry(lease.entry.entry_id)
    if entry is None or entry.closed or entry.tenant != lease.entry.tenant:
        # D25: a reclaimed entry was closed before it was reclaimed. Another tenant's entry
        # answers as one that never existed (SPEC §10 rule 6).
        raise EntryClosed(f"entry {lease.entry.entry_id} is closed")
    if entry.lease_token is None or entry.lease_token != lease.token:
        raise LeaseLost(f"lease {lease.token} is not the current lease of the entry")
    return entry


def value_of(cls: type[V], row: object, **decoded: Any) -> V:
    """The ``cls`` value of a row (a storage row, a checked argument): each field is the row's
    attribute of the same name (rows, values and tables share their names), unless ``decoded``
    gives it."""
    names = (f.name for f in dataclasses.fields(cls))
    return cls(**{n: decoded[n] if n in decoded else getattr(row, n) for n in names})


def submitted_again(
    row: EntryRow | ScheduleRow, key: str | None, retry_of: int | None = None
) -> EncodedSubmission:
    """A stored input submitted again as a new ENQUEUE entry (a retry of the entry ``retry_of``,
    a schedule's slot): the row's thread, input, tenant, kind, priority and attempts, under
    ``key``."""
    return value_of(
        EncodedSubmission, row, key=key, mode=Mode.ENQUEUE, not_before=None, retry_of=retry_of
    )


def checkpoint_of(tx: Tx, row: CheckpointRow) -> Checkpoint:
    return value_of(
        Checkpoint,
        row,
        state=decode_json(row.state),
        metadata=decode_json(row.metadata),
        writes=tuple(tx.writes_of(row.thread_id, row.checkpoint_id)),
    )


def thread_info_of(tx: Tx, thread: ThreadRow) -> ThreadInfo:
    claim = tx.claim_of(thread.thread_id)
    return value_of(
        ThreadInfo,
        thread,
        claim_holder=None if claim is None else claim.holder,
        claim_expires_at=None if claim is None else claim.expires_at,
    )


def entry_of(tx: Tx, entry: EntryRow) -> QueueEntry:
    return value_of(
        QueueEntry,
        entry,
        input=decode_json(entry.input),
        attempts=tuple(tx.attempts_of(entry.entry_id)),
        outcome=decode_outcome(entry.outcome_kind, entry.outcome_detail),
    )


def wait_until(
    storage: Storage, fetch: Callable[[], T], done: Callable[[T], bool], timeout: float, step: float
) -> T:
    """Read with ``fetch`` until ``done`` or ``timeout`` seconds pass (D21: monotonic wall-clock
    time); wake at once on a write in this process, and read again every ``step`` s for other
    processes.

    The signal is taken before the read, so a write landing between the read and the wait is
    never missed. Returns the last value read.
    """
    deadline = time.monotonic() + timeout
    while True:
        signal = storage.change_signal()
        value = fetch()
        remaining = deadline - time.monotonic()
        if done(value) or remaining <= 0:
            return value
        signal.wait(min(step, remaining))


__all__ = [
    "THREAD_BUSY_CLAIM",
    "THREAD_BUSY_ENTRY",
    "checkpoint_of",
    "current_claim",
    "current_lease",
    "entry_of",
    "store_event",
    "store_outcome",
    "thread_info_of",
    "value_of",
    "wait_until",
    "write_run",
]
