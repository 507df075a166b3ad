"""The API surface, declared once: the Protocols are the source, the other spellings derive.

The methods of `Checkpointer` and `RunQueue` (`durable_graph.core.checkpointer`,
`durable_graph.core.run_queue`, plus `TraceContexts`, a queue's trace-context storage) are the one
place each signature is written. Every spelling that only passes a call on inherits its methods
from one of four method sets here, each method derived from the Protocol's and handing the
call to the class's ``_forward(name, args, kwargs)``:

- `RunQueueCalls`, `CheckpointerCalls` (sync): the PostgreSQL stores (``_forward`` builds the
  method's SQL call, `durable_graph.postgres.store.SqlCalls`) and the testkit's sync adapter
  over an async store (``_forward`` runs the async method on the adapter's loop);
- `AsyncRunQueueCalls`, `AsyncCheckpointerCalls`: the async PostgreSQL store and the
  thread-offloading wrappers of the embedded stores (`durable_graph.embedded.threaded`: ``_forward``
  runs the sync store's method in a worker thread).

A class writes out only what is not one forwarded call (a PostgreSQL ``prune_all``, the waits,
``close``), overriding the derived method; the checkpointer sets also give the context manager
(leaving it closes the store). A derived method presents its source's name, docstring and
signature (`derived`), is typed from it (mypy checks the call sites and that the class
satisfies the Protocol) and is a coroutine function in the async sets. The spellings written out
by hand — the async Protocols (`durable_graph.core.async_protocols`), the embedded stores, the
overrides — are checked against the sync Protocols by `mismatches` (``tests/test_api_surface.py``
runs it over every store, derived methods included): the same parameters, kinds, defaults and
annotations, ``async`` where the Protocol is async.

Forwarding passes **only the arguments the caller gave**, as given, so a wrapped store's own
defaults apply (and the contract suites, which call through the adapter, exercise the async
stores' defaults); where every argument is needed (the PostgreSQL builders take them
positionally), `arguments_of` applies the Protocol's defaults.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, Protocol, Self, TypeVar

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.run_queue import RunQueue
from durable_graph.observe.observer import TraceContext

P = ParamSpec("P")
R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])

# The sync spelling of a member → its async spelling (the rest keep their names).
ASYNC_NAMES = {"__enter__": "__aenter__", "__exit__": "__aexit__"}
# Annotations that differ between the sync and the async spelling, by design.
ASYNC_ANNOTATIONS = {
    "Iterator[Event]": "AsyncIterator[Event]",
    "RunQueue": "AsyncRunQueue",
}
ALIASES = {"JSONValue": "object"}
"""`JSONValue` is a documenting alias of ``object``: either spelling matches."""
NOT_AWAITED = {"subscribe"}
"""Async members that stay plain methods (`subscribe` returns an async iterator)."""


class TraceContexts(Protocol):
    """A run queue that keeps each entry's submit trace context (SPEC §13): every store's queue
    does; `durable_graph.observe.tracing` keeps the contexts itself for one that does not."""

    def set_trace_context(self, entry_id: int, context: TraceContext) -> bool:
        """Remember the trace ``context`` ``entry_id`` was submitted in (the first one stays);
        False for an unknown entry or one that has a context."""
        ...

    def trace_context(self, entry_id: int) -> TraceContext | None: ...


def derived(wrapper: F, source: Callable[..., Any]) -> F:
    """``wrapper`` presented as ``source``: its name, docstring, annotations and (through
    ``__wrapped__``) signature — what `inspect`, `help` and `mismatches` see."""
    functools.update_wrapper(wrapper, source)
    return wrapper


class Forwarding(Protocol):
    """A class whose ``_forward`` performs the Protocol method ``name`` with the caller's
    ``args`` and ``kwargs``, as given."""

    def _forward(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any: ...


def forward(method: Callable[Concatenate[Any, P], R]) -> Callable[Concatenate[Forwarding, P], R]:
    """A method with ``method``'s signature whose call is ``self._forward``'s result."""
    name = method.__name__

    def call(self: Forwarding, /, *args: P.args, **kwargs: P.kwargs) -> R:
        result: R = self._forward(name, args, kwargs)
        return result

    return derived(call, method)


def forward_async(
    method: Callable[Concatenate[Any, P], R],
) -> Callable[Concatenate[Forwarding, P], Coroutine[Any, Any, R]]:
    """A coroutine method with ``method``'s signature awaiting ``self._forward``'s awaitable
    (created inside the coroutine: nothing runs before it is awaited)."""
    name = method.__name__

    async def call(self: Forwarding, /, *args: P.args, **kwargs: P.kwargs) -> R:
        pending: Awaitable[R] = self._forward(name, args, kwargs)
        return await pending

    return derived(call, method)


class _Forwards:
    def _forward(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        raise NotImplementedError  # each class using a method set says how it forwards


class RunQueueCalls(_Forwards):
    """`RunQueue`'s methods and `TraceContexts`', each one forwarded call."""

    submit = forward(RunQueue.submit)
    submit_many = forward(RunQueue.submit_many)
    lease = forward(RunQueue.lease)
    renew = forward(RunQueue.renew)
    release = forward(RunQueue.release)
    record_attempt = forward(RunQueue.record_attempt)
    close = forward(RunQueue.close)
    cancel = forward(RunQueue.cancel)
    defer = forward(RunQueue.defer)
    retry = forward(RunQueue.retry)
    entry = forward(RunQueue.entry)
    open_entries = forward(RunQueue.open_entries)
    entries = forward(RunQueue.entries)
    stats = forward(RunQueue.stats)
    await_closed = forward(RunQueue.await_closed)
    reclaim = forward(RunQueue.reclaim)
    set_trace_context = forward(TraceContexts.set_trace_context)
    trace_context = forward(TraceContexts.trace_context)
    # SPEC §15 (durable_graph.core.scheduling)
    set_limit = forward(RunQueue.set_limit)
    limits = forward(RunQueue.limits)
    remove_limit = forward(RunQueue.remove_limit)
    put_schedule = forward(RunQueue.put_schedule)
    schedules = forward(RunQueue.schedules)
    remove_schedule = forward(RunQueue.remove_schedule)
    pause_schedule = forward(RunQueue.pause_schedule)
    fire_schedule = forward(RunQueue.fire_schedule)


class AsyncRunQueueCalls(_Forwards):
    """`RunQueueCalls` as coroutine methods."""

    submit = forward_async(RunQueue.submit)
    submit_many = forward_async(RunQueue.submit_many)
    lease = forward_async(RunQueue.lease)
    renew = forward_async(RunQueue.renew)
    release = forward_async(RunQueue.release)
    record_attempt = forward_async(RunQueue.record_attempt)
    close = forward_async(RunQueue.close)
    cancel = forward_async(RunQueue.cancel)
    defer = forward_async(RunQueue.defer)
    retry = forward_async(RunQueue.retry)
    entry = forward_async(RunQueue.entry)
    open_entries = forward_async(RunQueue.open_entries)
    entries = forward_async(RunQueue.entries)
    stats = forward_async(RunQueue.stats)
    await_closed = forward_async(RunQueue.await_closed)
    reclaim = forward_async(RunQueue.reclaim)
    set_trace_context = forward_async(TraceContexts.set_trace_context)
    trace_context = forward_async(TraceContexts.trace_context)
    # SPEC §15 (durable_graph.core.scheduling)
    set_limit = forward_async(RunQueue.set_limit)
    limits = forward_async(RunQueue.limits)
    remove_limit = forward_async(RunQueue.remove_limit)
    put_schedule = forward_async(RunQueue.put_schedule)
    schedules = forward_async(RunQueue.schedules)
    remove_schedule = forward_async(RunQueue.remove_schedule)
    pause_schedule = forward_async(RunQueue.pause_schedule)
    fire_schedule = forward_async(RunQueue.fire_schedule)


class CheckpointerCalls(_Forwards):
    """`Checkpointer`'s methods, each one forwarded call, and its context manager (leaving it
    closes the store); not ``close`` (each store closes its own way), ``run_queue`` or
    ``subscribe`` (an iterator, not a call)."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    claim = forward(Checkpointer.claim)
    renew_claim = forward(Checkpointer.renew_claim)
    release_claim = forward(Checkpointer.release_claim)
    begin_attempt = forward(Checkpointer.begin_attempt)
    renew_attempt = forward(Checkpointer.renew_attempt)
    finish_attempt = forward(Checkpointer.finish_attempt)
    commit = forward(Checkpointer.commit)
    put_writes = forward(Checkpointer.put_writes)
    append_events = forward(Checkpointer.append_events)
    record_effect = forward(Checkpointer.record_effect)
    retract_turn = forward(Checkpointer.retract_turn)
    prune = forward(Checkpointer.prune)
    prune_all = forward(Checkpointer.prune_all)
    delete_thread = forward(Checkpointer.delete_thread)
    put_writes_fenced = forward(Checkpointer.put_writes_fenced)
    put_writes_and_commit = forward(Checkpointer.put_writes_and_commit)
    delete_runs = forward(Checkpointer.delete_runs)
    copy_thread = forward(Checkpointer.copy_thread)
    get = forward(Checkpointer.get)
    history = forward(Checkpointer.history)
    latest_of_runs = forward(Checkpointer.latest_of_runs)
    search = forward(Checkpointer.search)
    thread = forward(Checkpointer.thread)
    threads = forward(Checkpointer.threads)
    children = forward(Checkpointer.children)
    events_after = forward(Checkpointer.events_after)
    await_events_after = forward(Checkpointer.await_events_after)
    get_effect = forward(Checkpointer.get_effect)
    effects = forward(Checkpointer.effects)


class AsyncCheckpointerCalls(_Forwards):
    """`CheckpointerCalls` as coroutine methods."""

    async def close(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    claim = forward_async(Checkpointer.claim)
    renew_claim = forward_async(Checkpointer.renew_claim)
    release_claim = forward_async(Checkpointer.release_claim)
    begin_attempt = forward_async(Checkpointer.begin_attempt)
    renew_attempt = forward_async(Checkpointer.renew_attempt)
    finish_attempt = forward_async(Checkpointer.finish_attempt)
    commit = forward_async(Checkpointer.commit)
    put_writes = forward_async(Checkpointer.put_writes)
    append_events = forward_async(Checkpointer.append_events)
    record_effect = forward_async(Checkpointer.record_effect)
    retract_turn = forward_async(Checkpointer.retract_turn)
    prune = forward_async(Checkpointer.prune)
    prune_all = forward_async(Checkpointer.prune_all)
    delete_thread = forward_async(Checkpointer.delete_thread)
    put_writes_fenced = forward_async(Checkpointer.put_writes_fenced)
    put_writes_and_commit = forward_async(Checkpointer.put_writes_and_commit)
    delete_runs = forward_async(Checkpointer.delete_runs)
    copy_thread = forward_async(Checkpointer.copy_thread)
    get = forward_async(Checkpointer.get)
    history = forward_async(Checkpointer.history)
    latest_of_runs = forward_async(Checkpointer.latest_of_runs)
    search = forward_async(Checkpointer.search)
    thread = forward_async(Checkpointer.thread)
    threads = forward_async(Checkpointer.threads)
    children = forward_async(Checkpointer.children)
    events_after = forward_async(Checkpointer.events_after)
    await_events_after = forward_async(Checkpointer.await_events_after)
    get_effect = forward_async(Checkpointer.get_effect)
    effects = forward_async(Checkpointer.effects)


def arguments_of(
    method: Callable[..., Any],
) -> Callable[[tuple[Any, ...], dict[str, Any]], Sequence[Any]]:
    """A function of a call's ``(args, kwargs)`` giving every argument of ``method`` after
    ``self``, in order, with ``method``'s defaults for those not given: what a PostgreSQL call
    builder takes after ``config``. The signature is read once, here; a call with positional
    arguments only (the common case on hot paths) just appends the defaults of the rest.
    """
    params = list(inspect.signature(method).parameters.values())[1:]
    names = [p.name for p in params]
    empty = inspect.Parameter.empty
    positional = sum(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params)
    # The defaults that complete a call giving only its first k arguments, positionally.
    fills = {
        k: tuple(p.default for p in params[k:])
        for k in range(positional + 1)
        if all(p.default is not empty for p in params[k:])
    }
    defaults = [(p.name, p.default) for p in params]
    where = f"{method.__name__}()"

    def complete(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Sequence[Any]:
        if not kwargs:
            fill = fills.get(len(args))
            if fill is not None:
                return args + fill
        if len(args) > positional:
            raise TypeError(f"{where} takes {positional} positional arguments, got {len(args)}")
        values = list(args)
        used = 0
        for name, default in defaults[len(args) :]:
            if name in kwargs:
                values.append(kwargs[name])
                used += 1
            elif default is empty:
                raise TypeError(f"{where} missing required argument: {name!r}")
            else:
                values.append(default)
        if used != len(kwargs):
            extra = next(k for k in kwargs if k not in names[len(args) :])
            wrong = "multiple values for" if extra in names else "an unexpected keyword"
            raise TypeError(f"{where} got {wrong} argument {extra!r}")
        return values

    return complete


def members(protocol: type) -> list[str]:
    """The public members of a sync Protocol (methods, properties, the context manager)."""
    return sorted(
        name
        for name in vars(protocol)
        if (not name.startswith("_") or name in ASYNC_NAMES)
        and (callable(vars(protocol)[name]) or isinstance(vars(protocol)[name], property))
    )


def mismatches(protocol: type, impl: type, *, asynchronous: bool = False) -> list[str]:
    """How ``impl``'s public members differ from the sync ``protocol``'s (empty: they match).

    ``asynchronous``: ``impl`` is an async spelling (coroutine methods, `ASYNC_NAMES`,
    `ASYNC_ANNOTATIONS`). Extra members of ``impl`` (``open``, ``config``, ...) are allowed.
    """
    found: list[str] = []
    for name in members(protocol):
        expected = vars(protocol)[name]
        impl_name = ASYNC_NAMES.get(name, name) if asynchronous else name
        actual = inspect.getattr_static(impl, impl_name, None)
        where = f"{impl.__name__}.{impl_name}"
        if actual is None:
            found.append(f"{where}: missing")
        elif isinstance(expected, property):
            if not isinstance(actual, property):
                found.append(f"{where}: not a property")
        elif not callable(actual):
            found.append(f"{where}: not a method")
        else:
            found.extend(f"{where}: {d}" for d in _differences(expected, actual, asynchronous))
    return found


def _differences(expected: Any, actual: Any, asynchronous: bool) -> list[str]:
    want = inspect.signature(expected)
    got = inspect.signature(actual)
    found: list[str] = []
    want_async = asynchronous and expected.__name__ not in NOT_AWAITED
    if inspect.iscoroutinefunction(actual) != want_async:
        found.append("async" if want_async else "must not be async")
    want_params = list(want.parameters.values())
    got_params = list(got.parameters.values())
    if [(p.name, p.kind) for p in want_params] != [(p.name, p.kind) for p in got_params]:
        found.append(f"parameters {got} != {want}")
        return found
    for w, g in zip(want_params, got_params, strict=True):
        if w.default != g.default:
            found.append(f"default of {w.name}: {g.default!r} != {w.default!r}")
        if w.name != "self" and _spelled(w.annotation, asynchronous) != _spelled(
            g.annotation, False
        ):
            found.append(f"annotation of {w.name}: {g.annotation} != {w.annotation}")
    if _spelled(want.return_annotation, asynchronous) != got.return_annotation:
        found.append(f"returns {got.return_annotation} != {want.return_annotation}")
    return found


def _spelled(annotation: Any, asynchronous: bool) -> Any:
    annotation = ALIASES.get(annotation, annotation)
    return ASYNC_ANNOTATIONS.get(annotation, annotation) if asynchronous else annotation


__all__ = [
    "ASYNC_NAMES",
    "AsyncCheckpointerCalls",
    "AsyncRunQueueCalls",
    "CheckpointerCalls",
    "Forwarding",
    "RunQueueCalls",
    "TraceContexts",
    "arguments_of",
    "derived",
    "forward",
    "forward_async",
    "members",
    "mismatches",
]
