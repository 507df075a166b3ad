"""Bad arguments to every queue call: ValidationError naming the argument, nothing written."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from durable_graph.core.errors import ValidationError
from durable_graph.core.model import ANY, Cancelled, Completed, Failed, Submission
from durable_graph.core.run_queue import RunQueue
from durable_graph.testkit.contract.run_queue.support import (
    _LEASE_CALLS,
    DAY,
    HOUR,
    TTL,
    _entry,
    _leased,
    _refused,
    _submit,
)
from durable_graph.testkit.harness import ClockControl

_BAD_SUBMISSIONS: dict[str, tuple[Any, str]] = {
    "empty_thread_id": (Submission("", 1), "thread_id"),
    "nul_in_thread_id": (Submission("a\x00b", 1), "thread_id"),
    "long_thread_id": (Submission("x" * 513, 1), "thread_id"),
    "surrogate_thread_id": (Submission("a\ud800", 1), "thread_id"),
    "int_thread_id": (Submission(7, 1), "thread_id"),  # type: ignore[arg-type]
    "nan_input": (Submission("thread-1", float("nan")), "input"),
    "int_key_in_input": (Submission("thread-1", {1: "a"}), "input"),  # type: ignore[dict-item]
    "tuple_input": (Submission("thread-1", (1, 2)), "input"),  # type: ignore[arg-type]
    "bytes_input": (Submission("thread-1", b"x"), "input"),  # type: ignore[arg-type]
    "nested_set_input": (Submission("thread-1", {"a": [set()]}), "input"),
    "empty_tenant": (Submission("thread-1", 1, tenant=""), "tenant"),
    "empty_key": (Submission("thread-1", 1, key=""), "key"),
    "zero_max_attempts": (Submission("thread-1", 1, max_attempts=0), "max_attempts"),
    "negative_max_attempts": (Submission("thread-1", 1, max_attempts=-1), "max_attempts"),
    "bool_max_attempts": (Submission("thread-1", 1, max_attempts=True), "max_attempts"),
    "huge_max_attempts": (Submission("thread-1", 1, max_attempts=2**31), "max_attempts"),
    "str_mode": (Submission("thread-1", 1, mode="enqueue"), "mode"),  # type: ignore[arg-type]
    "not_a_submission": ({"thread_id": "thread-1", "input": 1}, "submission"),
}

_BAD_LEASE_ARGS: dict[str, tuple[dict[str, Any], str]] = {
    "empty_holder": ({"holder": ""}, "holder"),
    "int_holder": ({"holder": 5}, "holder"),
    "int_ttl": ({"ttl": 30}, "ttl"),
    "float_ttl": ({"ttl": 30.0}, "ttl"),
    "negative_ttl": ({"ttl": timedelta(seconds=-1)}, "ttl"),
    "zero_ttl": ({"ttl": timedelta(0)}, "ttl"),
    "huge_ttl": ({"ttl": timedelta(days=36501)}, "ttl"),
    "empty_tenant": ({"tenant": ""}, "tenant"),
    "empty_run_id": ({"run_id": ""}, "run_id"),
    "nul_run_id": ({"run_id": "r\x00"}, "run_id"),
}

_BAD_OUTCOMES: dict[str, Any] = {
    "str": "done",
    "none": None,
    "nan_output": Completed(output=float("inf")),
    "int_error": Failed(error=5),  # type: ignore[arg-type]
    "unknown_reason": Cancelled(reason="bored"),  # type: ignore[arg-type]
    "completed_class": Completed,
}


class QueueValidationTests:
    """Every queue call refuses bad arguments by name, writing nothing."""

    # --- validation: nothing written on bad arguments ---------------------------------------

    @pytest.mark.parametrize("case", sorted(_BAD_SUBMISSIONS))
    def test_submit_with_bad_argument_raises_validation_error(
        self, queue: RunQueue, case: str
    ) -> None:
        _submit(queue, "thread-0", key="k")
        submission, name = _BAD_SUBMISSIONS[case]
        _refused(queue, lambda: queue.submit(submission), match=name)

    @pytest.mark.parametrize("case", sorted(_BAD_LEASE_ARGS))
    def test_lease_with_bad_argument_raises_validation_error(
        self, queue: RunQueue, case: str
    ) -> None:
        _submit(queue)
        overrides, name = _BAD_LEASE_ARGS[case]
        args: dict[str, Any] = {"holder": "worker-1", "ttl": TTL, "tenant": ANY, "run_id": "r-1"}
        args.update(overrides)
        _refused(queue, lambda: queue.lease(**args), match=name)

    @pytest.mark.parametrize("ttl", [timedelta(seconds=-1), timedelta(0), 30])
    def test_renew_with_bad_ttl_raises_validation_error(self, queue: RunQueue, ttl: Any) -> None:
        lease = _leased(queue)
        _refused(queue, lambda: queue.renew(lease, ttl=ttl), match="ttl")

    @pytest.mark.parametrize("call", sorted(_LEASE_CALLS))
    def test_lease_call_with_non_lease_raises_validation_error(
        self, queue: RunQueue, call: str
    ) -> None:
        not_a_lease: Any = _leased(queue).entry
        _refused(queue, lambda: _LEASE_CALLS[call](queue, not_a_lease), match="lease")

    @pytest.mark.parametrize("run_id", ["", "r\x00", 7, "x" * 513])
    def test_record_attempt_with_bad_run_id_raises_validation_error(
        self, queue: RunQueue, run_id: Any
    ) -> None:
        lease = _leased(queue)
        _refused(queue, lambda: queue.record_attempt(lease, run_id), match="run_id")
        assert _entry(queue, lease.entry.entry_id).attempts == ()

    @pytest.mark.parametrize("case", sorted(_BAD_OUTCOMES))
    def test_close_with_bad_outcome_raises_validation_error(
        self, queue: RunQueue, case: str
    ) -> None:
        lease = _leased(queue)
        _refused(queue, lambda: queue.close(lease, _BAD_OUTCOMES[case]), match="outcome")

    @pytest.mark.parametrize(
        ("args", "name"),
        [(("1",), "entry_id"), ((True,), "entry_id"), ((1, ""), "tenant")],
    )
    def test_cancel_with_bad_argument_raises_validation_error(
        self, queue: RunQueue, args: tuple[Any, ...], name: str
    ) -> None:
        _submit(queue)
        _refused(queue, lambda: queue.cancel(*args), match=name)

    @pytest.mark.parametrize(
        ("args", "name"), [(("1",), "entry_id"), ((1, ""), "tenant"), ((1, 5), "tenant")]
    )
    def test_entry_with_bad_argument_raises_validation_error(
        self, queue: RunQueue, args: tuple[Any, ...], name: str
    ) -> None:
        _submit(queue)
        with pytest.raises(ValidationError, match=name):
            queue.entry(*args)

    @pytest.mark.parametrize(
        ("kwargs", "name"),
        [
            ({"tenant": ""}, "tenant"),
            ({"thread_id": ""}, "thread_id"),
            ({"thread_id": 3}, "thread_id"),
        ],
    )
    def test_open_entries_with_bad_argument_raises_validation_error(
        self, queue: RunQueue, kwargs: dict[str, Any], name: str
    ) -> None:
        with pytest.raises(ValidationError, match=name):
            queue.open_entries(**kwargs)

    @pytest.mark.parametrize(
        ("timeout", "tenant"),
        [(1.0, None), (timedelta(seconds=-1), None), (timedelta(seconds=1), "")],
    )
    def test_await_closed_with_bad_argument_raises_validation_error(
        self, queue: RunQueue, timeout: Any, tenant: Any
    ) -> None:
        entry_id = _submit(queue)
        with pytest.raises(ValidationError):
            queue.await_closed(entry_id, timeout, tenant=tenant)

    @pytest.mark.parametrize(
        ("older_than", "batch", "name"),
        [
            (timedelta(seconds=-1), 10, "older_than"),
            (3600, 10, "older_than"),
            (HOUR, 0, "batch"),
            (HOUR, -1, "batch"),
            (HOUR, True, "batch"),
            (HOUR, 1.5, "batch"),
        ],
    )
    def test_reclaim_with_bad_argument_raises_validation_error(
        self,
        queue: RunQueue,
        clock: ClockControl,
        older_than: Any,
        batch: Any,
        name: str,
    ) -> None:
        entry_id = _submit(queue)
        queue.cancel(entry_id)
        clock.advance(DAY)
        with pytest.raises(ValidationError, match=name):
            queue.reclaim(older_than, batch=batch)
        assert queue.entry(entry_id) is not None
