"""Executable contracts of SPEC §4-§5, run by every backend's tests (SPEC §7).

A backend's test module subclasses `CheckpointerContract` and `RunQueueContract` and overrides the
``harness`` fixture to yield a `Harness` (a fresh store and its clock control). The tests live in
``checkpointer/`` and ``run_queue/``, one module per concern named like its SQL file;
``checkpointer_contract`` and ``run_queue_contract`` combine them (new concern modules go there).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from durable_graph.testkit.harness import ClockControl, Harness, ManualClock

if TYPE_CHECKING:
    from durable_graph.testkit.contract.checkpointer.suite import CheckpointerContract
    from durable_graph.testkit.contract.run_queue.suite import RunQueueContract

__all__ = ["CheckpointerContract", "ClockControl", "Harness", "ManualClock", "RunQueueContract"]


def __getattr__(name: str) -> Any:
    # The suites import pytest: load them only when a test suite asks for them.
    if name == "CheckpointerContract":
        from durable_graph.testkit.contract.checkpointer.suite import CheckpointerContract

        return CheckpointerContract
    if name == "RunQueueContract":
        from durable_graph.testkit.contract.run_queue.suite import RunQueueContract

        return RunQueueContract
    raise AttributeError(name)
