"""Error classes of the store (SPEC §3, §8 rules 6-8).

Every error a store raises is a `StoreError`. In PostgreSQL each class below is raised by the SQL
functions with its own SQLSTATE (class ``DG``) and mapped back by `error_for_sqlstate`; any other
database failure becomes a `ProcessingError` whose ``__cause__`` is the driver's exception.
"""

from __future__ import annotations


class StoreError(Exception):
    """Base class of every error the store raises."""

    sqlstate: str | None = None


class ProcessingError(StoreError):
    """The database failed or timed out, or the store is closed. Retrying may help."""


class StoreBusy(ProcessingError):
    """The store's write lock was not free within its bound (SQLite's busy timeout, the
    in-memory store's lock): nothing was done, and the same call may simply be made again."""


class ValidationError(StoreError, ValueError):
    """A bad argument or configuration. Nothing was changed."""

    sqlstate = "DG000"


class GraphError(StoreError):
    """A checkpointer call was refused by the thread's state."""


class ThreadBusy(GraphError):
    """A live claim is held by another token, or a REJECT submission met an open entry.

    The message is one of two fixed texts, never naming a holder, an entry, a tenant or a
    token (SPEC §8 rule 7): `THREAD_BUSY_CLAIM` or `THREAD_BUSY_ENTRY`. The SQL functions raise
    the same texts (``tests/test_api_surface.py`` checks).
    """

    sqlstate = "DG001"


THREAD_BUSY_CLAIM = "thread has a live claim"
"""`ThreadBusy`'s message when another claim is live (`claim`)."""
THREAD_BUSY_ENTRY = "thread has an open entry"
"""`ThreadBusy`'s message when a REJECT submission meets an open entry (`submit`)."""


class ClaimLost(GraphError):
    """The claim's token is not the thread's current claim."""

    sqlstate = "DG002"


class StaleParent(GraphError):
    """The commit's ``parent_id`` is not the thread's head."""

    sqlstate = "DG003"


class RunIdTaken(GraphError):
    """The run id already names a checkpoint or an attempt on the thread."""

    sqlstate = "DG004"


class RunOfDeletedThread(GraphError):
    """The run is an attempt of a delete-marked queue entry of the thread."""

    sqlstate = "DG005"


class DuplicateCheckpoint(GraphError):
    """The checkpoint id already names a checkpoint of the thread."""

    sqlstate = "DG006"


class QueueError(StoreError):
    """A run-queue call was refused by the entry's state."""


class SubmissionKeyReused(QueueError):
    """The tenant's submission key names a different submission."""

    sqlstate = "DG101"


class LeaseLost(QueueError):
    """The lease's token is not the entry's current lease."""

    sqlstate = "DG102"


class EntryClosed(QueueError):
    """The entry is closed; nothing more can be done with its lease."""

    sqlstate = "DG103"


class NotFound(StoreError):
    """The thing named does not exist or is not visible to the caller."""

    sqlstate = "DG404"


_BY_SQLSTATE: dict[str, type[StoreError]] = {
    cls.sqlstate: cls
    for cls in (
        ValidationError,
        ThreadBusy,
        ClaimLost,
        StaleParent,
        RunIdTaken,
        RunOfDeletedThread,
        DuplicateCheckpoint,
        SubmissionKeyReused,
        LeaseLost,
        EntryClosed,
        NotFound,
    )
    if cls.sqlstate is not None
}


def error_for_sqlstate(sqlstate: str | None) -> type[StoreError] | None:
    """The store error class raised under ``sqlstate``, or None for any other SQLSTATE."""
    if sqlstate is None:
        return None
    return _BY_SQLSTATE.get(sqlstate)


def sqlstates() -> dict[str, type[StoreError]]:
    """Every ``DG`` SQLSTATE with its store error class (a copy: the map lives here only)."""
    return dict(_BY_SQLSTATE)


__all__ = [
    "THREAD_BUSY_CLAIM",
    "THREAD_BUSY_ENTRY",
    "ClaimLost",
    "DuplicateCheckpoint",
    "EntryClosed",
    "GraphError",
    "LeaseLost",
    "NotFound",
    "ProcessingError",
    "QueueError",
    "RunIdTaken",
    "RunOfDeletedThread",
    "StaleParent",
    "StoreBusy",
    "StoreError",
    "SubmissionKeyReused",
    "ThreadBusy",
    "ValidationError",
    "error_for_sqlstate",
    "sqlstates",
]
