"""No tenant oracle (SPEC §10 rule 6) and language-neutral submission identity (§10 rule 3).

Every call on another tenant's entry answers exactly as for an entry id that never existed, so
no call tells a tenant whether, or in what state, another tenant's entry exists. Keyed
submissions are identical when their inputs are equal as JSON values (``1 == 1.0``, key order
free). Mixed into `RunQueueContract`, so every backend runs them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from durable_graph.core.errors import SubmissionKeyReused, ValidationError
from durable_graph.core.model import Completed, Lease, QueueEntry, Submission
from durable_graph.core.run_queue import RunQueue
from durable_graph.observe.observer import TraceContext
from durable_graph.testkit.contract.run_queue.support import _LEASE_CALLS, TTL

UNKNOWN = 987_654
"""An entry id no test creates."""


def _outcome(call: Callable[..., Any], *args: Any) -> tuple[str, str]:
    """What ``call(*args)`` answers, with numbers masked: (result or exception type, text)."""
    try:
        result = call(*args)
    except Exception as exc:  # the answer under test may be any store error
        return type(exc).__name__, re.sub(r"\d+", "N", str(exc))
    return "returned", repr(result)


def _forged(lease: Lease, entry_id: int, tenant: str | None) -> Lease:
    """``lease`` aimed at ``entry_id`` by a caller of ``tenant`` (its token kept: the best
    guess there is)."""
    return dataclasses.replace(
        lease, entry=dataclasses.replace(lease.entry, entry_id=entry_id, tenant=tenant)
    )


_READS: dict[str, Callable[[RunQueue, int, str | None], Any]] = {
    "entry": lambda queue, i, t: queue.entry(i, tenant=t),
    "await_closed": lambda queue, i, t: queue.await_closed(i, timedelta(0), tenant=t),
    "cancel": lambda queue, i, t: queue.cancel(i, tenant=t),
    "open_entries": lambda queue, i, t: queue.open_entries(tenant=t, after=i),
}
"""The reads (and cancel) that take an entry id and a tenant."""


def _owned(queue: RunQueue, lease: Lease) -> QueueEntry:
    """Tenant a's own read of the entry ``lease`` is for."""
    entry = queue.entry(lease.entry.entry_id, tenant="a")
    assert entry is not None
    return entry


class RunQueueTenancyContract:
    """Another tenant's entry is as unknown as an id that never existed."""

    @pytest.fixture(params=[False, True], ids=["open", "closed"])
    def tenant_a_lease(self, queue: RunQueue, request: pytest.FixtureRequest) -> Lease:
        """Tenant a's entry and its lease; the entry open, or closed by its worker."""
        queue.submit(Submission("thread-a", "go", tenant="a"))
        lease = queue.lease("worker-a", TTL)
        assert lease is not None and lease.entry.tenant == "a"
        if request.param:
            queue.close(lease, Completed())
        return lease

    @pytest.mark.parametrize("call", sorted(_LEASE_CALLS))
    def test_lease_call_on_another_tenants_entry_answers_as_for_an_unknown_id(
        self, queue: RunQueue, tenant_a_lease: Lease, call: str
    ) -> None:
        lease, action = tenant_a_lease, _LEASE_CALLS[call]
        before = _owned(queue, lease)
        for other in ("b", None):  # another tenant, and the no-tenant namespace
            theirs = _outcome(action, queue, _forged(lease, lease.entry.entry_id, other))
            assert theirs == _outcome(action, queue, _forged(lease, UNKNOWN, other))
        # Nothing changed: the owner's lease still works (or the entry stays closed).
        assert _owned(queue, lease) == before and before.attempts == ()
        if not before.closed:
            assert queue.renew(lease).token == lease.token

    @pytest.mark.parametrize("call", sorted(_READS))
    def test_reads_and_cancel_of_another_tenants_entry_answer_as_for_an_unknown_id(
        self, queue: RunQueue, tenant_a_lease: Lease, call: str
    ) -> None:
        before = _owned(queue, tenant_a_lease)
        for other in ("b", None):
            mine = _outcome(_READS[call], queue, before.entry_id, other)
            assert mine == _outcome(_READS[call], queue, UNKNOWN, other)
        assert _owned(queue, tenant_a_lease) == before

    def test_trace_context_of_another_tenants_entry_answers_as_for_an_unknown_id(
        self, queue: RunQueue
    ) -> None:
        """Another tenant can neither learn the entry exists, read its traceparent, nor set it
        first (issue #24; PostgreSQL: dg_set_trace_context_v2 / dg_trace_context_v2)."""
        contexts: Any = queue  # every store's queue keeps trace contexts (core.surface)
        entry_id = queue.submit(Submission("thread-a", "go", tenant="a")).entry_id
        mine = TraceContext("00-" + "a" * 32 + "-" + "b" * 16 + "-01")
        theirs = TraceContext("00-" + "c" * 32 + "-" + "d" * 16 + "-01", "x=1")
        for other in ("b", None):
            for call, extra in (
                (contexts.set_trace_context, (theirs,)),
                (contexts.trace_context, ()),
            ):
                got = _outcome(call, entry_id, *extra, other)
                assert (
                    got
                    == _outcome(call, UNKNOWN, *extra, other)
                    == ("returned", repr(False if extra else None))
                )
        assert contexts.trace_context(entry_id, "a") is None  # nobody else set it
        assert contexts.set_trace_context(entry_id, mine, "a") is True
        for other in ("b", None):
            assert contexts.trace_context(entry_id, other) is None
            assert contexts.set_trace_context(entry_id, theirs, other) is False
        assert contexts.set_trace_context(entry_id, theirs, "a") is False  # the first stays
        assert contexts.trace_context(entry_id, "a") == mine
        untagged = queue.submit(Submission("thread-n", "go")).entry_id  # the no-tenant namespace
        assert contexts.set_trace_context(untagged, theirs) is True
        assert contexts.trace_context(untagged) == theirs
        assert contexts.trace_context(untagged, "a") is None


class RunQueueIdentityContract:
    """Keyed submissions are the same when their inputs are equal as JSON values."""

    @pytest.mark.parametrize(
        ("first", "again"),
        [
            ({"a": 1}, {"a": 1.0}),
            ([10**16], [1e16]),
            ({"a": {"y": [1, 2.5], "x": None}}, {"a": {"x": None, "y": [1.0, 2.5]}}),
            (0, -0.0),
        ],
        ids=["int-float", "big-int-exponent", "nested-key-order", "zero"],
    )
    def test_submit_key_identity_compares_inputs_as_json_values(
        self, queue: RunQueue, first: Any, again: Any
    ) -> None:
        ticket = queue.submit(Submission("thread-1", first, key="k"))
        retry = queue.submit(Submission("thread-1", again, key="k"))
        assert (retry.entry_id, retry.existing) == (ticket.entry_id, True)

    def test_submit_refuses_a_number_beyond_the_double_range(self, queue: RunQueue) -> None:
        # Most languages read it back as infinity (SPEC §10 rule 1): refused on every backend.
        with pytest.raises(ValidationError, match="double"):
            queue.submit(Submission("thread-1", {"n": 10**400}))
        assert queue.open_entries() == []
        queue.submit(Submission("thread-1", {"n": 10**300}))

    @pytest.mark.parametrize(
        ("first", "again"),
        [
            ({"a": 1}, {"a": True}),
            ([1, 2], [2, 1]),
            ({"a": 0.1}, {"a": 0.1000000000000001}),
            ("1", 1),
            ({"a": None}, {}),
        ],
        ids=["number-bool", "array-order", "no-double-rounding", "string-number", "null-missing"],
    )
    def test_submit_key_identity_tells_different_json_values_apart(
        self, queue: RunQueue, first: Any, again: Any
    ) -> None:
        queue.submit(Submission("thread-1", first, key="k"))
        with pytest.raises(SubmissionKeyReused):
            queue.submit(Submission("thread-1", again, key="k"))


__all__ = ["RunQueueIdentityContract", "RunQueueTenancyContract"]
