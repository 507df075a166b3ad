"""`RunQueueContract`: the executable form of SPEC §5 (and the queue parts of §2, §3 and §8).

A backend's tests subclass it and override the ``harness`` fixture to yield a fresh store and the
control of its clock. Every test holds for both kinds of clock: a `ManualClock` that moves only
on ``advance()`` (memory, SQLite) and real time plus an offset raised by ``advance()``
(PostgreSQL). So a test never sleeps to move store time, compares store timestamps with a small
slack (`SLACK`), and lets a lease of ``TTL`` expire by advancing `PAST_TTL`.

The tests live in ``testkit/run_queue/``, one module per concern, named like the SQL file that
implements it (``submit`` ~ ``sql/60_submit.sql``); shared helpers and fixtures in ``support``.
Each test proves one sentence of the contract and is named for it; the decisions it relies on
where SPEC is silent are cited as ``Dn`` (docs/decisions.md).
"""

from __future__ import annotations

from .pagination_contract import RunQueuePaginationContract
from .run_queue.attempts_close import AttemptsCloseTests
from .run_queue.fast_path import FastPathTests
from .run_queue.lease import LeaseTests
from .run_queue.lifecycle import QueueLifecycleTests
from .run_queue.listing import ListingTests
from .run_queue.marks import MarksTests
from .run_queue.operating import OperatingTests
from .run_queue.queue_reads import QueueReadsTests
from .run_queue.submit import SubmitTests
from .run_queue.support import HOUR, PAST_TTL, SLACK, TTL, RunQueueFixtures
from .run_queue.validation import QueueValidationTests
from .run_queue.worker_protocol import WorkerProtocolTests
from .tenancy_contract import RunQueueIdentityContract, RunQueueTenancyContract


class RunQueueContract(
    # Add new concern modules here: a mixin class of tests in testkit/run_queue/<concern>.py.
    SubmitTests,
    LeaseTests,
    AttemptsCloseTests,
    QueueReadsTests,
    MarksTests,
    WorkerProtocolTests,
    FastPathTests,
    QueueValidationTests,
    QueueLifecycleTests,
    OperatingTests,
    RunQueuePaginationContract,
    RunQueueTenancyContract,
    RunQueueIdentityContract,
    ListingTests,
    RunQueueFixtures,
):
    """SPEC §5 as tests. Subclass it and override ``harness`` (see module docstring)."""


__all__ = ["HOUR", "PAST_TTL", "SLACK", "TTL", "RunQueueContract"]
