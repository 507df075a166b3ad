"""`RunQueueContract`: the executable form of SPEC §5 (and the queue parts of §2, §3 and §8).

A backend's tests subclass it and override the ``harness`` fixture to yield a fresh store and the
control of its clock. Every test holds for both kinds of clock: a `ManualClock` that moves only
on ``advance()`` (memory, SQLite) and real time plus an offset raised by ``advance()``
(PostgreSQL). So a test never sleeps to move store time, compares store timestamps with a small
slack (`SLACK`), and lets a lease of ``TTL`` expire by advancing `PAST_TTL`.

The tests live in ``testkit/contract/run_queue/``, one module per concern, named like the SQL file that
implements it (``submit`` ~ ``sql/60_submit.sql``); shared helpers and fixtures in ``support``.
Each test proves one sentence of the contract and is named for it; the decisions it relies on
where SPEC is silent are cited as ``Dn`` (docs/decisions.md).
"""

from __future__ import annotations

from durable_graph.testkit.contract.run_queue.attempts_close import AttemptsCloseTests
from durable_graph.testkit.contract.run_queue.claim_attempt import ClaimAttemptTests
from durable_graph.testkit.contract.run_queue.closed_runs import ClosedRunsTests
from durable_graph.testkit.contract.run_queue.fast_path import FastPathTests
from durable_graph.testkit.contract.run_queue.item_vectors import ItemVectorTests
from durable_graph.testkit.contract.run_queue.items import ItemStoreTests
from durable_graph.testkit.contract.run_queue.lease import LeaseTests
from durable_graph.testkit.contract.run_queue.lifecycle import QueueLifecycleTests
from durable_graph.testkit.contract.run_queue.listing import ListingTests
from durable_graph.testkit.contract.run_queue.marks import MarksTests
from durable_graph.testkit.contract.run_queue.operating import OperatingTests
from durable_graph.testkit.contract.run_queue.pagination import RunQueuePaginationContract
from durable_graph.testkit.contract.run_queue.queue_reads import QueueReadsTests
from durable_graph.testkit.contract.run_queue.retry_chain import RetryChainTests
from durable_graph.testkit.contract.run_queue.scheduling import SchedulingTests
from durable_graph.testkit.contract.run_queue.submit import SubmitTests
from durable_graph.testkit.contract.run_queue.support import (
    HOUR,
    PAST_TTL,
    SLACK,
    TTL,
    RunQueueFixtures,
)
from durable_graph.testkit.contract.run_queue.tenancy import (
    RunQueueIdentityContract,
    RunQueueTenancyContract,
)
from durable_graph.testkit.contract.run_queue.validation import QueueValidationTests
from durable_graph.testkit.contract.run_queue.worker_protocol import WorkerProtocolTests
from durable_graph.testkit.contract.run_queue.workers import WorkerRegistryTests


class RunQueueContract(
    # Add new concern modules here: a mixin class of tests in testkit/contract/run_queue/<concern>.py.
    SubmitTests,
    LeaseTests,
    AttemptsCloseTests,
    QueueReadsTests,
    MarksTests,
    ClosedRunsTests,
    WorkerProtocolTests,
    FastPathTests,
    RetryChainTests,
    ClaimAttemptTests,
    QueueValidationTests,
    QueueLifecycleTests,
    OperatingTests,
    RunQueuePaginationContract,
    RunQueueTenancyContract,
    RunQueueIdentityContract,
    ListingTests,
    SchedulingTests,
    WorkerRegistryTests,
    ItemStoreTests,
    ItemVectorTests,
    RunQueueFixtures,
):
    """SPEC §5 as tests. Subclass it and override ``harness`` (see module docstring)."""


__all__ = ["HOUR", "PAST_TTL", "SLACK", "TTL", "RunQueueContract"]
