"""Prometheus metrics of a worker (SPEC §13; extra ``durable-graph[metrics]``).

`PrometheusObserver` is an `Observer` (durable_graph.observe.observer) counting what the wrapped store
sees; `QueueSampler` sets the queue gauges from `RunQueue.stats` every few seconds; `serve`
exposes a registry over HTTP. `durable-graph worker --metrics-port N` wires the three.

Labels are bounded sets only — a store method, an attempt result, an error class, an entry
state — never a thread id, an input or a tenant, so the series count stays fixed.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

from durable_graph.core.errors import ValidationError
from durable_graph.core.model import QueueEntry, QueueStats
from durable_graph.core.run_queue import RunQueue
from durable_graph.observe.observer import CallInfo, Observer

try:
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "durable_graph.observe.metrics needs prometheus-client: pip install 'durable-graph[metrics]'"
    ) from exc

# Attempts last from milliseconds (a resumed, finished run) to many minutes (an LLM graph).
_ATTEMPT_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
# Store calls: a local SQLite read is ~0.1 ms, a PostgreSQL round trip ~1 ms.
_CALL_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


class PrometheusObserver(Observer):
    """The worker's metrics, registered in ``registry`` (a new one by default)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.attempts_started = Counter(
            "durable_graph_attempts_started", "Attempts recorded by this process.", registry=r
        )
        self.attempts_finished = Counter(
            "durable_graph_attempts_finished",
            "Attempts ended, by result: an outcome (completed, failed, cancelled, interrupted),"
            " released (to be retried) or lost (its lease was gone).",
            ["result"],
            registry=r,
        )
        self.attempt_duration = Histogram(
            "durable_graph_attempt_duration_seconds",
            "Time from an attempt's start to its end, by result.",
            ["result"],
            buckets=_ATTEMPT_BUCKETS,
            registry=r,
        )
        self.store_call_duration = Histogram(
            "durable_graph_store_call_duration_seconds",
            "Latency of store calls, by method (errors included).",
            ["method"],
            buckets=_CALL_BUCKETS,
            registry=r,
        )
        self.store_call_errors = Counter(
            "durable_graph_store_call_errors",
            "Store calls that raised, by method and error class.",
            ["method", "error"],
            registry=r,
        )
        self.lease_renewals = Counter(
            "durable_graph_lease_renewals", "Lease renewals that succeeded.", registry=r
        )
        self.leases_lost = Counter(
            "durable_graph_leases_lost",
            "Lease renewals that found the lease gone (expired, taken over or cancelled).",
            registry=r,
        )
        self.claim_waits = Counter(
            "durable_graph_claim_waits",
            "Claims refused because another holder's claim was live (the worker waited).",
            registry=r,
        )
        self.queue_entries = Gauge(
            "durable_graph_queue_entries",
            "Queue entries by state, sampled from RunQueue.stats (every tenant).",
            ["state"],
            registry=r,
        )
        self.queue_oldest_waiting = Gauge(
            "durable_graph_queue_oldest_waiting_seconds",
            "Age of the oldest open entry by the store clock; 0 when none waits.",
            registry=r,
        )

    @contextlib.contextmanager
    def call(self, info: CallInfo) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        except BaseException as exc:
            self.store_call_errors.labels(info.method, type(exc).__name__).inc()
            raise
        finally:
            self.store_call_duration.labels(info.method).observe(time.perf_counter() - start)

    def attempt_started(self, entry: QueueEntry, number: int, run_id: str) -> None:
        self.attempts_started.inc()

    def attempt_finished(self, entry: QueueEntry, number: int, result: str, seconds: float) -> None:
        self.attempts_finished.labels(result).inc()
        self.attempt_duration.labels(result).observe(seconds)

    def lease_renewed(self, entry: QueueEntry) -> None:
        self.lease_renewals.inc()

    def lease_lost(self, entry: QueueEntry) -> None:
        self.leases_lost.inc()

    def claim_busy(self, thread_id: str) -> None:
        self.claim_waits.inc()

    def sample(self, queue: RunQueue) -> None:
        """Set the queue gauges from one `RunQueue.stats` call."""
        self.set_queue_stats(queue.stats())

    def set_queue_stats(self, stats: QueueStats) -> None:
        """Set the queue gauges; an async worker's loop feeds it ``await queue.stats()``."""
        for state, count in stats.counts().items():
            self.queue_entries.labels(state).set(count)
        age = stats.oldest_waiting_age
        self.queue_oldest_waiting.set(0.0 if age is None else age.total_seconds())


class QueueSampler:
    """A daemon thread calling `PrometheusObserver.sample` every ``interval`` seconds."""

    def __init__(self, observer: PrometheusObserver, queue: RunQueue, interval: float = 5.0):
        if not interval > 0:
            raise ValidationError("interval must be positive")
        self._observer = observer
        self._queue = queue
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dg-metrics-sampler", daemon=True)

    def __enter__(self) -> QueueSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(self._interval + 5)

    def _run(self) -> None:
        while True:
            # A failed sample (the store briefly down) leaves the last values; the worker logs
            # store errors already.
            with contextlib.suppress(Exception):
                self._observer.sample(self._queue)
            if self._stop.wait(self._interval):
                return


def serve(registry: CollectorRegistry, port: int, host: str = "127.0.0.1") -> Any:
    """Serve ``registry`` at ``http://host:port/metrics`` from a daemon thread; the server."""
    server, _thread = start_http_server(port, addr=host, registry=registry)
    return server


__all__ = ["PrometheusObserver", "QueueSampler", "serve"]
