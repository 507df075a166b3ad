"""The API surface, declared once: the Protocols are the source, the other spellings derive.

The methods of `Checkpointer` and `RunQueue` (`durable_graph.checkpointer`,
`durable_graph.run_queue`, plus `TraceContexts`, a queue's optional trace-context storage) are
the one place each signature is written. The spellings that only pass a call on are *derived*
from them, one line a method, by the factories here and their two PostgreSQL cousins:

- the thread-offloading async wrappers (`durable_graph.aio._threaded`):
  ``submit = forward_async(RunQueue.submit)``;
- the testkit's sync adapter over an async store: ``submit = forward(AsyncRunQueue.submit)``;
- the PostgreSQL stores, sync and async: ``commit = sql_call(Checkpointer.commit, calls.commit)``
  (`durable_graph.postgres.store`, `durable_graph.aio.postgres`; `arguments_of` applies the
  Protocol's defaults, since the builders take every argument positionally).

A derived method presents its source's name, docstring and signature (`derived`), is typed from
it (mypy checks the call sites and that the class satisfies the Protocol), and is a coroutine
function where it should be. The spellings written out by hand — the async Protocols
(`durable_graph.aio.protocols`), the embedded stores, the hand-written waits — are checked
against the sync Protocols by `mismatches` (``tests/test_api_surface.py`` runs it over every
store, derived methods included): the same parameters, kinds, defaults and annotations,
``async`` where the Protocol is async.

The forwarding factories pass **only the arguments the caller gave**, as given, so the wrapped
store's own defaults apply (and the contract suites, which call through the adapter, exercise
the async stores' defaults).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from .observe import TraceContext

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
    does; `durable_graph.tracing` keeps the contexts itself for one that does not."""

    def set_trace_context(self, entry_id: int, context: TraceContext) -> bool:
        """Remember the trace ``context`` ``entry_id`` was submitted in (the first one stays);
        False for an unknown entry or one that has a context."""
        ...

    def trace_context(self, entry_id: int) -> TraceContext | None: ...


def derived(wrapper: F, source: Callable[..., Any], builder: Callable[..., Any] | None = None) -> F:
    """``wrapper`` presented as ``source``: its name, docstring, annotations and (through
    ``__wrapped__``) signature — what `inspect`, `help` and `mismatches` see. ``builder``: the
    PostgreSQL call builder a `sql_call` runs, kept as ``wrapper.sql_builder`` so a test can
    check that it takes the Protocol's parameters in order."""
    functools.update_wrapper(wrapper, source)
    if builder is not None:
        vars(wrapper)["sql_builder"] = builder
    return wrapper


class Forwarding(Protocol):
    """A wrapper whose ``_forward`` calls the wrapped store's method ``name`` with the caller's
    ``args`` and ``kwargs``, as given."""

    def _forward(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any: ...


def forward(
    method: Callable[Concatenate[Any, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[Forwarding, P], R]:
    """A sync method over the async ``method`` of the same name (``_forward`` runs it)."""
    name = method.__name__

    def call(self: Forwarding, /, *args: P.args, **kwargs: P.kwargs) -> R:
        result: R = self._forward(name, args, kwargs)
        return result

    return derived(call, method)


def forward_async(
    method: Callable[Concatenate[Any, P], R],
) -> Callable[Concatenate[Forwarding, P], Coroutine[Any, Any, R]]:
    """An async method over the sync ``method`` of the same name (``_forward`` returns an
    awaitable of its result)."""
    name = method.__name__

    async def call(self: Forwarding, /, *args: P.args, **kwargs: P.kwargs) -> R:
        pending: Awaitable[R] = self._forward(name, args, kwargs)
        return await pending

    return derived(call, method)


def arguments_of(
    method: Callable[..., Any],
) -> Callable[[tuple[Any, ...], dict[str, Any]], Sequence[Any]]:
    """A function of a call's ``(args, kwargs)`` giving every argument of ``method`` after
    ``self``, in order, with ``method``'s defaults for those not given: what a PostgreSQL call
    builder takes after ``config``. The signature is read once, here; a call that gives each
    argument positionally (the common case on hot paths) returns ``args`` as it is.
    """
    params = list(inspect.signature(method).parameters.values())[1:]
    names = [p.name for p in params]
    positional = sum(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params)
    every = len(params) if positional == len(params) else -1  # keyword-only: no fast path
    defaults = [(p.name, p.default) for p in params]
    where = f"{method.__name__}()"

    def complete(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Sequence[Any]:
        if len(args) == every and not kwargs:
            return args
        if len(args) > positional:
            raise TypeError(f"{where} takes {positional} positional arguments, got {len(args)}")
        values = list(args)
        used = 0
        for name, default in defaults[len(args) :]:
            if name in kwargs:
                values.append(kwargs[name])
                used += 1
            elif default is inspect.Parameter.empty:
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
    "Forwarding",
    "TraceContexts",
    "arguments_of",
    "derived",
    "forward",
    "forward_async",
    "members",
    "mismatches",
]
