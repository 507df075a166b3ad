"""The API surface's one rule, checked: every spelling of a store method matches the sync Protocol.

The methods of `Checkpointer` and `RunQueue` (`durable_graph.core.checkpointer`,
`durable_graph.core.run_queue`, plus `TraceContexts`, a queue's trace-context storage) are the one
place each signature is declared. Every other spelling is written out — by hand (the async
Protocols in `durable_graph.core.async_protocols`, the embedded stores, the waits) or generated
from the Protocols by ``tools/generate_stores.py`` (the PostgreSQL stores' one-call methods, the
threaded async wrappers, the testkit's sync adapter) — and `mismatches` compares each with the
sync Protocol (``tests/test_api_surface.py`` runs it over every store): the same parameters,
kinds, defaults and annotations, ``async`` where the Protocol is async.
"""

from __future__ import annotations

import inspect
from typing import Any

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


__all__ = ["ASYNC_NAMES", "members", "mismatches"]
