"""The worker's ``--metrics-port`` and ``--traces``: its store observed (durable_graph.observe.observer),
the queue sampled and the metrics served, spans exported."""

from __future__ import annotations

import argparse
import contextlib
import logging
from collections.abc import Iterator

from durable_graph.cli.common import CliError
from durable_graph.core.checkpointer import Checkpointer
from durable_graph.observe.observer import Observer

log = logging.getLogger("durable_graph.worker")


@contextlib.contextmanager
def worker_observer(args: argparse.Namespace, store: Checkpointer) -> Iterator[Observer | None]:
    """What observes the worker's store calls (None without those options): spans exported, and
    metrics served with the queue sampled on ``store``."""
    port = getattr(args, "metrics_port", None)
    traces = getattr(args, "traces", None)
    if port is None and traces is None:
        yield None
        return
    from durable_graph.observe.observer import Observers

    observers: list[Observer] = []
    with contextlib.ExitStack() as stack:
        if traces is not None:
            observers.append(_tracing(store))
        if port is not None:
            observers.append(stack.enter_context(_metrics(args, store, port)))
        yield Observers(*observers)


def _tracing(store: Checkpointer) -> Observer:
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

        from durable_graph.observe.tracing import TracingObserver
    except ImportError as exc:
        raise CliError(
            f"--traces needs OpenTelemetry: pip install 'durable-graph[otel]' ({exc})"
        ) from None
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    return TracingObserver(store, provider)


@contextlib.contextmanager
def _metrics(args: argparse.Namespace, store: Checkpointer, port: int) -> Iterator[Observer]:
    if not 0 <= port <= 65535:
        raise CliError(f"--metrics-port must be between 0 and 65535, got {port}")
    try:
        from durable_graph.observe.metrics import PrometheusObserver, QueueSampler, serve
    except ImportError as exc:
        raise CliError(str(exc)) from None
    observer = PrometheusObserver()
    try:
        server = serve(observer.registry, port, args.metrics_host)
    except OSError as exc:
        raise CliError(f"could not serve metrics on {args.metrics_host}:{port}: {exc}") from None
    host, bound = server.server_address[:2]
    log.info("metrics at http://%s:%d/metrics", host, bound)
    try:
        with QueueSampler(observer, store.run_queue, args.metrics_sample_interval.total_seconds()):
            yield observer
    finally:
        server.shutdown()
        server.server_close()
