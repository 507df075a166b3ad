"""The API surface, declared once: the sync Protocols, and what the other spellings owe them.

The methods of `Checkpointer` and `RunQueue` (`durable_graph.checkpointer`,
`durable_graph.run_queue`) are the source. Their other spellings — the async Protocols
(`durable_graph.aio.protocols`), every store, sync and async, the thread-offloading async
wrappers (`durable_graph.aio._threaded`) and the testkit's sync adapter over an async store —
are checked against them by `mismatches` (``tests/test_api_surface.py`` runs it over all of
them): the same parameters, kinds, defaults and annotations, ``async`` where the Protocol is
async.

The two wrappers declare each method's signature only (a body of ``...``); `forward` and
`forward_async` turn a declaration into a call of the wrapped store's method of the same name
with **only the arguments the caller gave**, so the wrapped store's own defaults apply (and the
contract suites, which call through the adapter, exercise the async stores' defaults).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, ParamSpec, Protocol, TypeVar, cast

P = ParamSpec("P")
R = TypeVar("R")

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


class Forwarding(Protocol):
    """A wrapper that calls the wrapped store's method ``name`` with the ``given`` arguments."""

    def _forward(self, name: str, given: dict[str, Any]) -> Any: ...


def _given(signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    arguments = signature.bind(*args, **kwargs).arguments  # defaults not applied: given only
    arguments.pop("self")
    return arguments


def forward(method: Callable[P, R]) -> Callable[P, R]:
    """A sync wrapper method with ``method``'s signature (its body is never run)."""
    signature = inspect.signature(method)

    @functools.wraps(method)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        wrapper = cast(Forwarding, args[0])
        result: R = wrapper._forward(method.__name__, _given(signature, args, kwargs))
        return result

    return call


def forward_async(
    method: Callable[P, Coroutine[Any, Any, R]],
) -> Callable[P, Coroutine[Any, Any, R]]:
    """An async wrapper method with ``method``'s signature; ``_forward`` returns an awaitable."""
    signature = inspect.signature(method)

    @functools.wraps(method)
    async def call(*args: P.args, **kwargs: P.kwargs) -> R:
        wrapper = cast(Forwarding, args[0])
        pending: Awaitable[R] = wrapper._forward(method.__name__, _given(signature, args, kwargs))
        return await pending

    return call


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


__all__ = ["ASYNC_NAMES", "Forwarding", "forward", "forward_async", "members", "mismatches"]
