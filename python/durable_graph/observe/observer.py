"""Watching a store being used: one observer interface, one store wrapper (SPEC §13).

`observed(store, observer)` returns the store wrapped so that every call of a `Checkpointer` or
`RunQueue` method — sync or async — goes through ``observer.call`` (metrics time it, tracing
wraps it in a span), and the worker protocol's milestones are recognised from the calls
themselves: an attempt starts when ``lease(run_id=...)`` or ``record_attempt`` returns
``Started``, and ends when its lease is closed (by outcome) or released; ``renew`` succeeding or
raising ``LeaseLost`` / ``EntryClosed`` is a renewal or a loss; ``claim`` raising ``ThreadBusy``
is a claim wait. So `Worker` and `AsyncWorker` (and any hand-written loop) are observed alike,
without a hook in either: give them the wrapped store.
"""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from durable_graph.core.errors import EntryClosed, LeaseLost, ThreadBusy
from durable_graph.core.model import (
    AttemptBegun,
    Claim,
    Commit,
    Lease,
    QueueEntry,
    Started,
    Submission,
    TraceContext,
    outcome_name,
)

S = TypeVar("S")


@dataclass(frozen=True, slots=True)
class CallInfo:
    """What a store call is about, as far as its arguments tell (for span attributes)."""

    method: str
    entry_id: int | None = None
    thread_id: str | None = None
    run_id: str | None = None


class Observer:
    """Receives what a wrapped store sees. Every method does nothing here; override some."""

    def call(self, info: CallInfo) -> contextlib.AbstractContextManager[None]:
        """Around one store call (the context is exited with the call's exception, if any)."""
        return contextlib.nullcontext()

    def submitted(self, submission: Submission, entry_id: int) -> Awaitable[None] | None:
        """A submission was queued (``entry_id``), or found already queued. Called inside the
        submit's `call` context; on an async store it may return an awaitable, awaited before
        the submit returns (so may `attempt_started`)."""
        return None

    def attempt_started(
        self, entry: QueueEntry, number: int, run_id: str
    ) -> Awaitable[None] | None:
        """An attempt was recorded."""
        return None

    def attempt_finished(self, entry: QueueEntry, number: int, result: str, seconds: float) -> None:
        """An attempt ended: ``result`` is an outcome name, ``released`` (retried later) or
        ``lost`` (its lease was gone when it ended); ``seconds`` since it started."""

    def lease_renewed(self, entry: QueueEntry) -> None: ...

    def lease_lost(self, entry: QueueEntry) -> None: ...

    def claim_busy(self, thread_id: str) -> None:
        """A claim was refused because another holder's claim is live (the worker waits)."""


class Observers(Observer):
    """Several observers as one, called in order."""

    def __init__(self, *observers: Observer) -> None:
        self.observers = observers

    @contextlib.contextmanager
    def call(self, info: CallInfo) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for o in self.observers:
                stack.enter_context(o.call(info))
            yield

    def submitted(self, submission: Submission, entry_id: int) -> Awaitable[None] | None:
        return _all([o.submitted(submission, entry_id) for o in self.observers])

    def attempt_started(
        self, entry: QueueEntry, number: int, run_id: str
    ) -> Awaitable[None] | None:
        return _all([o.attempt_started(entry, number, run_id) for o in self.observers])

    def attempt_finished(self, entry: QueueEntry, number: int, result: str, seconds: float) -> None:
        for o in self.observers:
            o.attempt_finished(entry, number, result, seconds)

    def lease_renewed(self, entry: QueueEntry) -> None:
        for o in self.observers:
            o.lease_renewed(entry)

    def lease_lost(self, entry: QueueEntry) -> None:
        for o in self.observers:
            o.lease_lost(entry)

    def claim_busy(self, thread_id: str) -> None:
        for o in self.observers:
            o.claim_busy(thread_id)


def _all(results: list[Awaitable[None] | None]) -> Awaitable[None] | None:
    pending = [r for r in results if r is not None]
    if not pending:
        return None

    async def wait() -> None:
        for p in pending:
            await p

    return wait()


def call_info(method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> CallInfo:
    """Entry id, thread id and run id from a call's arguments, where they carry them."""
    entry_id: int | None = None
    thread_id: str | None = None
    run_id: str | None = None
    values = [*args, *kwargs.values()]
    for value in values:
        if isinstance(value, Lease):
            entry_id, thread_id = value.entry.entry_id, value.entry.thread_id
        elif isinstance(value, Claim):
            thread_id = value.thread_id
        elif isinstance(value, Commit):
            run_id = value.run_id
        elif isinstance(value, Submission):
            thread_id = value.thread_id
    first = args[0] if args else None
    if method in _BY_ENTRY_ID and isinstance(first, int):
        entry_id = first
    elif (
        thread_id is None
        and isinstance(first, str)
        and method not in ("run_queue.lease", "begin_attempt")  # their first is the holder
    ):
        thread_id = first  # the checkpointer's calls take the thread id first (lease: holder)
    if method == "run_queue.record_attempt":
        given = kwargs.get("run_id", args[1] if len(args) > 1 else None)
        run_id = given if isinstance(given, str) else None
    elif method == "run_queue.lease":
        given = kwargs.get("run_id", args[3] if len(args) > 3 else None)
        run_id = given if isinstance(given, str) else None
    elif method == "begin_attempt":
        given = kwargs.get("run_id")
        run_id = given if isinstance(given, str) else None
    return CallInfo(method, entry_id, thread_id, run_id)


_TRACKED = frozenset({"claim", "begin_attempt", "claim_attempt", "renew_attempt", "finish_attempt"})
"""The checkpointer's calls that start, renew or end attempts (SPEC §11's fast path)."""

_BY_ENTRY_ID = frozenset({"run_queue.entry", "run_queue.cancel", "run_queue.await_closed"})


class _Attempts:
    """The attempts a wrapped store saw start and not yet end, by entry id."""

    def __init__(self, observer: Observer) -> None:
        self.observer = observer
        self.running: dict[int, tuple[int, float]] = {}

    def after(
        self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any
    ) -> Awaitable[None] | None:
        """Report what the call did; an awaitable when an observer needs the (async) store."""
        o = self.observer
        if method == "lease" and isinstance(result, Lease):
            run_id = kwargs.get("run_id", args[3] if len(args) > 3 else None)
            if isinstance(result.attempt, Started) and isinstance(run_id, str):
                return self.start(result.entry, result.attempt.number, run_id)
        elif method == "record_attempt" and isinstance(result, Started):
            lease = args[0] if args else kwargs["lease"]
            run_id = args[1] if len(args) > 1 else kwargs["run_id"]
            return self.start(lease.entry, result.number, run_id)
        elif method == "close" and isinstance(result, QueueEntry) and result.outcome is not None:
            self.end(result, outcome_name(result.outcome))
        elif method in ("release", "defer"):  # defer: released to retry after its backoff
            self.end((args[0] if args else kwargs["lease"]).entry, "released")
        elif method == "renew" and isinstance(result, Lease):
            o.lease_renewed(result.entry)
        elif method == "submit":
            submission = args[0] if args else kwargs["submission"]
            return o.submitted(submission, result.entry_id)
        # SPEC §11's fast path: the same events as the steps it does in one call.
        elif method == "begin_attempt" and isinstance(result, AttemptBegun):
            run_id = kwargs.get("run_id")
            if isinstance(result.attempt, Started) and isinstance(run_id, str):
                return self.start(result.lease.entry, result.attempt.number, run_id)
        elif method == "finish_attempt" and isinstance(result, QueueEntry) and result.outcome:
            self.end(result, outcome_name(result.outcome))
        elif method == "renew_attempt" and isinstance(result, tuple):
            o.lease_renewed(result[0].entry)
        elif method == "submit_many":
            submissions = args[0] if args else kwargs["submissions"]
            return _all(
                [
                    o.submitted(sub, ticket.entry_id)
                    for sub, ticket in zip(submissions, result, strict=True)
                ]
            )
        return None

    def failed(
        self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any], exc: Exception
    ) -> None:
        if method in ("claim", "claim_attempt") and isinstance(exc, ThreadBusy):
            if method == "claim_attempt":  # the lease's thread
                thread_id = (args[0] if args else kwargs["lease"]).entry.thread_id
            else:
                thread_id = args[0] if args else kwargs.get("thread_id")
            if isinstance(thread_id, str):
                self.observer.claim_busy(thread_id)
        elif method in (
            "renew",
            "close",
            "release",
            "defer",
            "renew_attempt",
            "finish_attempt",
        ) and (isinstance(exc, LeaseLost | EntryClosed)):
            lease = args[0] if args else kwargs["lease"]
            if method in ("renew", "renew_attempt"):
                self.observer.lease_lost(lease.entry)
            else:
                self.end(lease.entry, "lost")

    def start(self, entry: QueueEntry, number: int, run_id: str) -> Awaitable[None] | None:
        self.running[entry.entry_id] = (number, time.monotonic())
        return self.observer.attempt_started(entry, number, run_id)

    def end(self, entry: QueueEntry, result: str) -> None:
        started = self.running.pop(entry.entry_id, None)
        if started is not None:
            number, at = started
            self.observer.attempt_finished(entry, number, result, time.monotonic() - at)


class _Observed:
    """A store or run queue whose method calls are reported to an observer."""

    def __init__(self, target: Any, observer: Observer, prefix: str, attempts: _Attempts) -> None:
        self._target = target
        self._observer = observer
        self._prefix = prefix
        self._attempts = attempts

    @property
    def run_queue(self) -> Any:
        return _Observed(self._target.run_queue, self._observer, "run_queue.", self._attempts)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if name.startswith("_") or not callable(value):
            return value
        return self._wrap(name, value)

    def _wrap(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        full = self._prefix + name
        track = self._prefix == "run_queue." or name in _TRACKED

        def raised(
            exc: BaseException,
            args: tuple[Any, ...],
            kwargs: dict[str, Any],
            context: contextlib.AbstractContextManager[None],
        ) -> None:
            # A cancellation or an interrupt (not an Exception) is no failure of the call.
            if track and isinstance(exc, Exception):
                self._attempts.failed(name, args, kwargs, exc)
            context.__exit__(type(exc), exc, exc.__traceback__)

        def call(*args: Any, **kwargs: Any) -> Any:
            info = call_info(full, args, kwargs)
            context = self._observer.call(info)
            context.__enter__()
            try:
                result = method(*args, **kwargs)
            except BaseException as exc:
                raised(exc, args, kwargs, context)
                raise
            if inspect.isawaitable(result):
                return finish_async(result, args, kwargs, context)
            try:
                if track:
                    self._attempts.after(name, args, kwargs, result)
            finally:
                context.__exit__(None, None, None)
            return result

        async def finish_async(
            pending: Any,
            args: tuple[Any, ...],
            kwargs: dict[str, Any],
            context: contextlib.AbstractContextManager[None],
        ) -> Any:
            try:
                result = await pending
            except BaseException as exc:
                raised(exc, args, kwargs, context)
                raise
            try:
                if track:
                    pending = self._attempts.after(name, args, kwargs, result)
                    if pending is not None:
                        await pending
            finally:
                context.__exit__(None, None, None)
            return result

        return call

    def __enter__(self) -> Any:
        self._target.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self._target.__exit__(*exc)

    async def __aenter__(self) -> Any:
        await self._target.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._target.__aexit__(*exc)


def observed(store: S, observer: Observer) -> S:
    """``store`` (a sync or async Checkpointer) with its calls reported to ``observer``."""
    return cast(S, _Observed(store, observer, "", _Attempts(observer)))


__all__ = [
    "CallInfo",
    "Observer",
    "Observers",
    "TraceContext",
    "call_info",
    "observed",
    "outcome_name",
]
