"""Error classes of the store (SPEC §3, §8 rules 6-8).

Every error a store raises is a `StoreError`. In PostgreSQL each class below is raised by the SQL
functions with its own SQLSTATE (class ``DG``) and mapped back by `error_for_sqlstate`; any other
database failure becomes a `ProcessingError` whose ``__cause__`` is the driver's exception.
"""

from __future__ import annotations

_BY_SQLSTATE: dict[str, type[StoreError]] = {}
"""Each ``DG`` SQLSTATE's error class, filled as the classes below are declared."""


class StoreError(Exception):
    """Base class of every error the store raises.

    A class with a SQLSTATE names it in its header, ``class X(Base, sqlstate="DG..."):``; that
    one place sets ``X.sqlstate`` and enters ``X`` in the map `error_for_sqlstate` reads.
    """

    sqlstate: str | None = None

    def __init_subclass__(cls, sqlstate: str | None = None, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if sqlstate is None:  # no SQLSTATE of its own: it keeps its base's, if any
            return
        if sqlstate in _BY_SQLSTATE:
            raise TypeError(f"SQLSTATE {sqlstate} is already {_BY_SQLSTATE[sqlstate].__name__}'s")
        cls.sqlstate = sqlstate
        _BY_SQLSTATE[sqlstate] = cls


class ProcessingError(StoreError):
    """The database failed or timed out, or the store is closed. Retrying may help."""


class StoreBusy(ProcessingError):
    """The store's write lock was not free within its bound (SQLite's busy timeout, the
    in-memory store's lock): nothing was done, and the same call may simply be made again."""


class ValidationError(StoreError, ValueError, sqlstate="DG000"):
    """A bad argument or configuration. Nothing was changed."""


class GraphError(StoreError):
    """A checkpointer call was refused by the thread's state."""


class ThreadBusy(GraphError, sqlstate="DG001"):
    """A live claim is held by another token, or a REJECT submission met an open entry.

    The message is one of two fixed texts, never naming a holder, an entry, a tenant or a
    token (SPEC §8 rule 7): `THREAD_BUSY_CLAIM` or `THREAD_BUSY_ENTRY`. The SQL functions raise
    the same texts (``tests/test_api_surface.py`` checks).
    """


THREAD_BUSY_CLAIM = "thread has a live claim"
"""`ThreadBusy`'s message when another claim is live (`claim`)."""
THREAD_BUSY_ENTRY = "thread has an open entry"
"""`ThreadBusy`'s message when a REJECT submission meets an open entry (`submit`)."""


class ClaimLost(GraphError, sqlstate="DG002"):
    """The claim's token is not the thread's current claim."""


class StaleParent(GraphError, sqlstate="DG003"):
    """The commit's ``parent_id`` is not the thread's head."""


class RunIdTaken(GraphError, sqlstate="DG004"):
    """The run id already names a checkpoint or an attempt on the thread."""


class RunOfDeletedThread(GraphError, sqlstate="DG005"):
    """The run is an attempt of a delete-marked queue entry of the thread."""


class DuplicateCheckpoint(GraphError, sqlstate="DG006"):
    """The checkpoint id already names a checkpoint of the thread."""


class QueueError(StoreError):
    """A run-queue call was refused by the entry's state."""


class SubmissionKeyReused(QueueError, sqlstate="DG101"):
    """The tenant's submission key names a different submission."""


class LeaseLost(QueueError, sqlstate="DG102"):
    """The lease's token is not the entry's current lease."""


class EntryClosed(QueueError, sqlstate="DG103"):
    """The entry is closed; nothing more can be done with its lease."""


class NotFound(StoreError, sqlstate="DG404"):
    """The thing named does not exist or is not visible to the caller."""


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
