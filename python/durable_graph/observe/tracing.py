"""OpenTelemetry spans for store calls and attempts (SPEC §13; extra ``durable-graph[otel]``).

``observed(store, TracingObserver(store))`` (durable_graph.observe.observer) makes one trace of a job:

- ``durable_graph.run_queue.submit`` — a child of whatever span is current where `submit` is
  called; its W3C trace context is stored beside the new entry (`TraceContext`; PostgreSQL
  ``dg_set_trace_context_v2``, which any language can call with its own context);
- ``durable_graph.attempt`` per attempt — a child of that submit span, read back from the store
  by whichever worker process runs it; attributes ``durable_graph.entry_id``,
  ``durable_graph.attempt`` (number), ``durable_graph.run_id``, ``durable_graph.result``;
- a span per store call the attempt makes (claim, commit, record_effect, close...) — children
  of their attempt, found by the call's entry id, run id (commits and claims carry it) or
  thread (one attempt holds a thread at a time).

Long polls (``lease``, ``begin_attempt``, ``await_closed``, ``await_events_after``,
``subscribe``) get no span: an idle worker would otherwise make one a second. Stores without trace-context storage (the
in-memory store) keep the contexts in this observer, which is the store's own lifetime.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
from collections.abc import Awaitable, Iterator
from typing import Any

from durable_graph.core.model import QueueEntry, Submission
from durable_graph.observe.observer import CallInfo, Observer, TraceContext

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "durable_graph.observe.tracing needs OpenTelemetry: pip install 'durable-graph[otel]'"
    ) from exc

SCOPE = "durable_graph"
UNTRACED = frozenset(
    {
        "run_queue.lease",
        "begin_attempt",  # the worker's poll on the fast path (SPEC §11), as lease was
        "run_queue.await_closed",
        "await_events_after",
        "subscribe",
    }
)
_PROPAGATOR = TraceContextTextMapPropagator()


class TracingObserver(Observer):
    """Spans for the calls and attempts of ``store`` (the unwrapped store, sync or async)."""

    def __init__(self, store: Any, tracer_provider: TracerProvider | None = None) -> None:
        self._queue = store.run_queue
        self._tracer = trace.get_tracer(SCOPE, tracer_provider=tracer_provider)
        self._lock = threading.Lock()
        self._by_entry: dict[int, Span] = {}
        self._by_run: dict[str, Span] = {}
        self._by_thread: dict[str, Span] = {}
        self._kept: dict[int, TraceContext] = {}
        self._async = inspect.iscoroutinefunction(getattr(self._queue, "submit", None))
        self._stores_context = hasattr(self._queue, "set_trace_context")

    # --- store calls --------------------------------------------------------------------------

    @contextlib.contextmanager
    def call(self, info: CallInfo) -> Iterator[None]:
        if info.method in UNTRACED:
            yield
            return
        parent = self._attempt_of(info)
        context = trace.set_span_in_context(parent) if parent is not None else None
        with self._tracer.start_as_current_span(
            f"durable_graph.{info.method}", context=context, kind=SpanKind.CLIENT
        ) as span:
            if info.entry_id is not None:
                span.set_attribute("durable_graph.entry_id", info.entry_id)
            if info.run_id is not None:
                span.set_attribute("durable_graph.run_id", info.run_id)
            yield

    def _attempt_of(self, info: CallInfo) -> Span | None:
        with self._lock:
            if info.entry_id is not None and info.entry_id in self._by_entry:
                return self._by_entry[info.entry_id]
            if info.run_id is not None and info.run_id in self._by_run:
                return self._by_run[info.run_id]
            if info.thread_id is not None:
                return self._by_thread.get(info.thread_id)
            return None

    # --- submit -> attempts -------------------------------------------------------------------

    def submitted(self, submission: Submission, entry_id: int) -> Awaitable[None] | None:
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier)  # the submit span, current inside its call
        if "traceparent" not in carrier:
            return None
        context = TraceContext(carrier["traceparent"], carrier.get("tracestate") or None)
        if not self._stores_context:
            with self._lock:
                self._kept.setdefault(entry_id, context)
            return None
        stored = self._queue.set_trace_context(entry_id, context, submission.tenant)
        return stored if self._async else None

    def attempt_started(
        self, entry: QueueEntry, number: int, run_id: str
    ) -> Awaitable[None] | None:
        if not self._stores_context:
            with self._lock:
                kept = self._kept.get(entry.entry_id)
            self._start(entry, number, run_id, kept)
            return None
        found = self._queue.trace_context(entry.entry_id, entry.tenant)
        if not self._async:
            self._start(entry, number, run_id, found)
            return None

        async def start_after_read() -> None:
            self._start(entry, number, run_id, await found)

        return start_after_read()

    def _start(
        self, entry: QueueEntry, number: int, run_id: str, submitted: TraceContext | None
    ) -> None:
        parent: otel_context.Context | None = None
        if submitted is not None:
            carrier = {"traceparent": submitted.traceparent}
            if submitted.tracestate:
                carrier["tracestate"] = submitted.tracestate
            parent = _PROPAGATOR.extract(carrier)
        span = self._tracer.start_span(
            "durable_graph.attempt",
            context=parent,
            kind=SpanKind.CONSUMER,
            attributes={
                "durable_graph.entry_id": entry.entry_id,
                "durable_graph.attempt": number,
                "durable_graph.run_id": run_id,
            },
        )
        with self._lock:
            self._by_entry[entry.entry_id] = span
            self._by_run[run_id] = span
            self._by_thread[entry.thread_id] = span

    def attempt_finished(self, entry: QueueEntry, number: int, result: str, seconds: float) -> None:
        with self._lock:
            span = self._by_entry.pop(entry.entry_id, None)
            if span is None:
                return
            self._by_run = {r: s for r, s in self._by_run.items() if s is not span}
            if self._by_thread.get(entry.thread_id) is span:
                del self._by_thread[entry.thread_id]
        span.set_attribute("durable_graph.result", result)
        if result in ("failed", "lost"):
            span.set_status(Status(StatusCode.ERROR, result))
        span.end()


__all__ = ["SCOPE", "UNTRACED", "TracingObserver"]
