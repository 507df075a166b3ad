"""The worker's ``--metrics-port``: its store observed, the queue sampled, the metrics served."""

from __future__ import annotations

import argparse
import contextlib
import logging
from collections.abc import Iterator

from ..checkpointer import Checkpointer
from .common import CliError

log = logging.getLogger("durable_graph.worker")


@contextlib.contextmanager
def worker_metrics(args: argparse.Namespace, store: Checkpointer) -> Iterator[Checkpointer]:
    """``store`` itself without ``--metrics-port``; else observed, with metrics served."""
    port = getattr(args, "metrics_port", None)
    if port is None:
        yield store
        return
    if not 0 <= port <= 65535:
        raise CliError(f"--metrics-port must be between 0 and 65535, got {port}")
    try:
        from ..metrics import PrometheusObserver, QueueSampler, serve
        from ..observe import observed
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
        every = args.metrics_sample_interval.total_seconds()
        with QueueSampler(observer, store.run_queue, every):
            yield observed(store, observer)
    finally:
        server.shutdown()
        server.server_close()
