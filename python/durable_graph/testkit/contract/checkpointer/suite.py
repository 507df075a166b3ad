"""The executable contract of the Checkpointer (SPEC §4, with §2 values, §3 errors, §8 rules 1-17
and docs/decisions.md D1-D15 on time, tokens and threads, D22 fixed ThreadBusy texts, D23 bounded
lock waits; each cited with its gist in the module that tests it).

A backend's test module subclasses `CheckpointerContract` and overrides the ``harness`` fixture::

    class TestMemoryCheckpointer(CheckpointerContract):
        @pytest.fixture
        def harness(self) -> Iterator[Harness]:
            clock = ManualClock()
            store = InMemoryCheckpointer(clock=clock)
            yield Harness(store, clock)
            store.close()

The tests live in ``testkit/contract/checkpointer/``, one module per concern, named like the SQL file that
implements it (``claims`` ~ ``sql/10_claims.sql``); shared helpers and fixtures in ``support``.

Every test holds for both kinds of store clock: a `ManualClock` that moves only on ``advance`` and
a real clock plus an offset that ``advance`` raises (PostgreSQL). So tests move store time only
with ``clock.advance`` and compare store timestamps with each other, allowing `SLACK` for real time
passing; they never sleep to move store time. Short real sleeps (<= 0.3 s) appear only where a
wall-clock timeout is the behaviour under test.
"""

from __future__ import annotations

from durable_graph.testkit.contract.checkpointer.claims import ClaimsTests
from durable_graph.testkit.contract.checkpointer.commit import CommitTests
from durable_graph.testkit.contract.checkpointer.langgraph_support import LangGraphSupportTests
from durable_graph.testkit.contract.checkpointer.lifecycle import LifecycleTests
from durable_graph.testkit.contract.checkpointer.reads import ReadsTests
from durable_graph.testkit.contract.checkpointer.retract_prune_delete import RetractPruneDeleteTests
from durable_graph.testkit.contract.checkpointer.support import SLACK, CheckpointerFixtures
from durable_graph.testkit.contract.checkpointer.thread_ttl import ThreadTtlTests
from durable_graph.testkit.contract.checkpointer.validation import ValidationTests
from durable_graph.testkit.contract.checkpointer.write_order import WriteOrderTests
from durable_graph.testkit.contract.checkpointer.writes_events_effects import (
    WritesEventsEffectsTests,
)
from durable_graph.testkit.contract.run_queue.pagination import CheckpointerPaginationContract


class CheckpointerContract(
    # Add new concern modules here: a mixin class of tests in testkit/contract/checkpointer/<concern>.py.
    ClaimsTests,
    CommitTests,
    WritesEventsEffectsTests,
    WriteOrderTests,
    RetractPruneDeleteTests,
    ThreadTtlTests,
    ReadsTests,
    ValidationTests,
    LifecycleTests,
    CheckpointerPaginationContract,
    LangGraphSupportTests,
    CheckpointerFixtures,
):
    """SPEC §4 as tests. Subclass it and override ``harness`` to yield a fresh store."""


__all__ = ["SLACK", "CheckpointerContract"]
