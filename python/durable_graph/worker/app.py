"""An app of several handlers, one per kind (SPEC §15): ``durable-graph worker --app mod:app``.

::

    app = App()

    @app.handler("summarize", max_attempts=5, timeout=timedelta(minutes=2))
    def summarize(ctx):
        ...

    @app.handler()  # the "default" kind
    def chat(ctx):
        ...

A worker given an `App` leases only entries of the app's kinds and runs each with its kind's
handler and options: ``max_attempts`` caps the attempts of that kind (below the entry's own),
``backoff`` replaces the worker's, and a handler that returns after its ``timeout`` counts as a
raise of `HandlerTimeout`. The timeout is cooperative (the handler is not interrupted; it can
read ``App.over_time(ctx)`` to stop early).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from durable_graph.core.errors import ValidationError
from durable_graph.core.model import BackoffPolicy
from durable_graph.core.scheduling import DEFAULT_KIND, check_kind
from durable_graph.core.validation import INT32_MAX, check_duration, check_int

F = TypeVar("F", bound=Callable[..., Any])


class HandlerTimeout(Exception):
    """A handler returned after its kind's ``timeout``: the attempt counts as failed."""


@dataclass(frozen=True, slots=True)
class HandlerOptions:
    """One kind's options; None: the worker's (``backoff``) or none (the others)."""

    max_attempts: int | None = None
    backoff: BackoffPolicy | None = None
    timeout: timedelta | None = None


class App:
    """Handlers by kind, with their options; callable as a worker's handler (it dispatches)."""

    def __init__(self) -> None:
        self._handlers: dict[str, Callable[..., Any]] = {}
        self._options: dict[str, HandlerOptions] = {}
        self._started: dict[int, float] = {}

    def handler(
        self,
        kind: str = DEFAULT_KIND,
        *,
        max_attempts: int | None = None,
        backoff: BackoffPolicy | None = None,
        timeout: timedelta | None = None,
    ) -> Callable[[F], F]:
        """Register the decorated function as the handler of ``kind``."""
        check_kind("kind", kind)
        if kind in self._handlers:
            raise ValidationError(f"kind {kind!r} already has a handler")
        if max_attempts is not None:
            check_int("max_attempts", max_attempts, minimum=1, maximum=INT32_MAX)
        if backoff is not None and not isinstance(backoff, BackoffPolicy):
            raise ValidationError("backoff must be a BackoffPolicy")
        if timeout is not None:
            check_duration("timeout", timeout)
        options = HandlerOptions(max_attempts, backoff, timeout)

        def register(fn: F) -> F:
            if not callable(fn):
                raise ValidationError("handler must be callable")
            self._handlers[kind] = fn
            self._options[kind] = options
            return fn

        return register

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds served, sorted."""
        return tuple(sorted(self._handlers))

    def options(self, kind: str) -> HandlerOptions:
        return self._options.get(kind, HandlerOptions())

    def over_time(self, ctx: Any) -> bool:
        """Whether the attempt running in ``ctx`` is past its kind's timeout."""
        timeout = self.options(ctx.entry.kind).timeout
        started = self._started.get(id(ctx))
        return (
            timeout is not None
            and started is not None
            and time.monotonic() - started > timeout.total_seconds()
        )

    def __call__(self, ctx: Any) -> Any:
        """Run the handler of ``ctx.entry.kind`` (the worker only leases the app's kinds)."""
        kind = ctx.entry.kind
        handler = self._handlers.get(kind)
        if handler is None:  # not leased by an app worker; another caller's mistake
            raise LookupError(f"no handler for kind {kind!r}")
        self._started[id(ctx)] = time.monotonic()
        try:
            output = handler(ctx)
            if self.over_time(ctx):
                timeout = self._options[kind].timeout
                raise HandlerTimeout(f"the {kind!r} handler ran over its timeout of {timeout}")
            return output
        finally:
            self._started.pop(id(ctx), None)


__all__ = ["App", "HandlerOptions", "HandlerTimeout"]
