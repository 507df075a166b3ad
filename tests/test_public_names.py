"""Every public name of the package is importable where it was before the move (SPEC §17).

`BEFORE` is each public module's ``__all__`` at cc9b93e, the commit before the tree was
reorganised (``git show cc9b93e:python/durable_graph/__init__.py`` and the others): each name
must still be in that module's ``__all__`` and importable from it (a module may export more: the
move added the async stores beside their sync ones in ``memory`` and ``sqlite``).
``durable_graph.model`` and ``durable_graph.errors``, which docs/spec.md names, moved to ``core/``
and stay as aliases; the test below also checks they are the same objects as ``core``'s.
"""

from __future__ import annotations

import importlib

import pytest

BEFORE: dict[str, list[str]] = {
    "durable_graph": [
        "ANY",
        "Attempt",
        "AttemptBegun",
        "AttemptPlan",
        "AttemptStart",
        "BackoffPolicy",
        "Cancelled",
        "Checkpoint",
        "Checkpointer",
        "Claim",
        "ClaimLost",
        "ClaimPolicy",
        "Commit",
        "Completed",
        "DuplicateCheckpoint",
        "EffectRecord",
        "EntryClosed",
        "EntryOutcome",
        "Event",
        "EventIn",
        "Exhausted",
        "Failed",
        "Finished",
        "Fresh",
        "GraphError",
        "Interrupted",
        "Lease",
        "LeaseLost",
        "Mode",
        "NotFound",
        "PendingWrite",
        "ProcessingError",
        "PruneResult",
        "QueueEntry",
        "QueueError",
        "QueueStats",
        "Resume",
        "RetentionPolicy",
        "RunIdTaken",
        "RunOfDeletedThread",
        "RunQueue",
        "StaleParent",
        "Started",
        "StoreError",
        "Submission",
        "SubmissionKeyReused",
        "ThreadBusy",
        "ThreadDeleted",
        "ThreadInfo",
        "Ticket",
        "ValidationError",
        "WatchPolicy",
        "__version__",
        "plan_attempt",
    ],
    "durable_graph.model": [
        "ANY",
        "AnyTenant",
        "Attempt",
        "AttemptBegun",
        "AttemptPlan",
        "AttemptStart",
        "BackoffPolicy",
        "CancelReason",
        "Cancelled",
        "Checkpoint",
        "Claim",
        "ClaimPolicy",
        "Commit",
        "Completed",
        "EffectRecord",
        "EntryOutcome",
        "Event",
        "EventIn",
        "Exhausted",
        "Failed",
        "Finished",
        "Fresh",
        "Interrupted",
        "JSON",
        "Lease",
        "Mode",
        "PendingWrite",
        "PruneResult",
        "QueueEntry",
        "QueueStats",
        "Resume",
        "RetentionPolicy",
        "Started",
        "Submission",
        "TenantFilter",
        "ThreadDeleted",
        "ThreadInfo",
        "Ticket",
        "WatchPolicy",
        "outcome_name",
    ],
    "durable_graph.errors": [
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
        "StoreError",
        "SubmissionKeyReused",
        "THREAD_BUSY_CLAIM",
        "THREAD_BUSY_ENTRY",
        "ThreadBusy",
        "ValidationError",
        "error_for_sqlstate",
        "sqlstates",
    ],
    "durable_graph.aio": [
        "AsyncCheckpointer",
        "AsyncInMemoryCheckpointer",
        "AsyncPostgresCheckpointer",
        "AsyncPostgresRunQueue",
        "AsyncRunContext",
        "AsyncRunQueue",
        "AsyncSqliteCheckpointer",
        "AsyncWorker",
    ],
    "durable_graph.memory": [
        "InMemoryCheckpointer",
        "InMemoryRunQueue",
        "MemoryStorage",
    ],
    "durable_graph.sqlite": [
        "SCHEMA_VERSION",
        "SqliteCheckpointer",
        "SqliteConfig",
        "SqliteRunQueue",
    ],
    "durable_graph.postgres": [
        "PostgresCheckpointer",
        "PostgresConfig",
        "PostgresRunQueue",
    ],
    "durable_graph.worker": [
        "AttemptReport",
        "Handler",
        "LostFlag",
        "Note",
        "RunContext",
        "RunContextBase",
        "Worker",
        "WorkerSettings",
        "WorkerStopped",
        "closing_note",
        "describe",
        "exhausted_outcome",
        "failure_outcome",
        "invalid_output",
        "new_id",
        "next_commit",
        "output_effect_key",
        "recorded_output",
    ],
    "durable_graph.observe": [
        "CallInfo",
        "Observer",
        "Observers",
        "TraceContext",
        "call_info",
        "observed",
        "outcome_name",
    ],
    "durable_graph.langgraph": [
        "AsyncDurableSaver",
        "DurableSaver",
        "async_graph_handler",
        "graph_handler",
        "output_of",
        "safe_serializer",
    ],
    "durable_graph.testkit": [
        "CheckpointerContract",
        "ClockControl",
        "Harness",
        "ManualClock",
        "RunQueueContract",
    ],
}


@pytest.mark.parametrize("module", sorted(BEFORE))
def test_every_public_name_before_the_move_is_importable_where_it_was(module: str) -> None:
    found = importlib.import_module(module)
    assert set(BEFORE[module]) <= set(found.__all__)  # more may come; none may go
    for name in BEFORE[module]:
        assert getattr(found, name) is not None, f"{module}.{name}"
        exec(f"from {module} import {name}", {})  # the spelling users write


@pytest.mark.parametrize("module", ["model", "errors"])
def test_the_moved_modules_old_paths_are_aliases_of_core(module: str) -> None:
    alias = importlib.import_module(f"durable_graph.{module}")
    home = importlib.import_module(f"durable_graph.core.{module}")
    assert alias.__all__ == home.__all__
    for name in home.__all__:
        assert getattr(alias, name) is getattr(home, name), name
