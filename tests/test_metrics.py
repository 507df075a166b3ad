"""Prometheus metrics (SPEC §13): a real worker process scraped while it runs, and the observer
the metrics hang on (durable_graph.observe.observer) on sync and async stores."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest

from durable_graph import Completed, EntryClosed, Submission
from durable_graph.aio import AsyncInMemoryCheckpointer
from durable_graph.memory.store import InMemoryCheckpointer
from durable_graph.observe.metrics import PrometheusObserver
from durable_graph.observe.observer import observed
from durable_graph.sqlite import SqliteCheckpointer
from service_support import sqlite_worker

BIN = Path(sys.executable).with_name("durable-graph")
APP = textwrap.dedent(
    """
    def handler(ctx):
        if ctx.input == "fail":
            raise RuntimeError("the model refused")
        ctx.commit({"input": ctx.input})
        return ctx.input
    """
)
TTL = timedelta(seconds=30)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _free_ports(count: int) -> int:
    """The first of ``count`` consecutive ports free now (the demo's workers serve metrics on
    ``port + i``): a port one above a free one may be taken, by this run's PostgreSQL say."""
    while True:
        first = _free_port()
        with contextlib.ExitStack() as held:
            try:
                for port in range(first + 1, first + count):
                    s = held.enter_context(socket.socket())
                    s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return first


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text: str = response.read().decode()
        return text


def _value(text: str, series: str) -> float | None:
    match = re.search(rf"^{re.escape(series)} (\S+)$", text, re.MULTILINE)
    return None if match is None else float(match.group(1))


def _sample(metrics: PrometheusObserver, name: str, labels: dict[str, str] | None = None) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    assert value is not None, f"no sample {name} {labels}"
    return value


def _until(check: object, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_worker_metrics_show_attempts_calls_and_queue_depth(tmp_path: Path) -> None:
    (tmp_path / "metrics_app.py").write_text(APP)
    db = str(tmp_path / "store.db")
    port = _free_port()
    with SqliteCheckpointer.open(db) as store:
        queue = store.run_queue
        ids = [queue.submit(Submission(f"t-{n}", f"job-{n}")).entry_id for n in range(2)]
        ids.append(queue.submit(Submission("t-bad", "fail", max_attempts=1)).entry_id)
        worker = sqlite_worker(
            db,
            "metrics_app:handler",
            tmp_path,
            *("--metrics-port", str(port), "--metrics-sample-interval", "100ms"),
        )
        try:
            for entry_id in ids:
                assert queue.await_closed(entry_id, timedelta(seconds=30)) is not None
            text = ""

            def sampled() -> bool:
                nonlocal text
                text = _scrape(port)
                return _value(text, 'durable_graph_queue_entries{state="completed"}') == 2

            _until(sampled)
        finally:
            worker.send_signal(signal.SIGTERM)
            _, stderr = worker.communicate(timeout=30)
    assert worker.returncode == 0, stderr
    assert _value(text, "durable_graph_attempts_started_total") == 3
    assert _value(text, 'durable_graph_attempts_finished_total{result="completed"}') == 2
    assert _value(text, 'durable_graph_attempts_finished_total{result="failed"}') == 1
    assert _value(text, 'durable_graph_attempt_duration_seconds_count{result="completed"}') == 2
    assert _value(text, 'durable_graph_queue_entries{state="failed"}') == 1
    assert _value(text, 'durable_graph_queue_entries{state="open"}') == 0
    assert _value(text, "durable_graph_queue_oldest_waiting_seconds") == 0
    leases = _value(  # workers lease with begin_attempt (SPEC §11)
        text, 'durable_graph_store_call_duration_seconds_count{method="begin_attempt"}'
    )
    assert leases is not None and leases >= 3
    assert _value(text, 'durable_graph_store_call_duration_seconds_count{method="commit"}') == 2
    # Labels are bounded: no thread id, input or tenant appears in any series.
    for private in ("t-0", "t-bad", "job-0", "the model refused"):
        assert private not in text


def test_a_scrape_during_the_demo_shows_attempts_and_queue_depth(tmp_path: Path) -> None:
    """`make demo`'s run with metrics on: its workers serve Prometheus metrics while it runs."""
    port = _free_ports(2)
    env = {k: v for k, v in os.environ.items() if k != "DURABLE_GRAPH_DSN"}
    demo = subprocess.Popen(
        [
            *(str(BIN), "demo", "--sqlite", str(tmp_path / "demo.db")),
            *("--workers", "2", "--metrics-port", str(port)),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen = ""
    try:

        def scraped_during_run() -> bool:
            nonlocal seen
            assert demo.poll() is None, "the demo ended before a scrape showed its work"
            for p in (port, port + 1):  # one worker may be the one the demo kills
                try:
                    text = _scrape(p)
                except OSError:
                    continue
                started = _value(text, "durable_graph_attempts_started_total")
                depth = _value(text, 'durable_graph_queue_entries{state="open"}')
                if started and started >= 1 and depth is not None:
                    seen = text
                    return True
            return False

        _until(scraped_during_run, timeout=60)
        stdout, stderr = demo.communicate(timeout=120)
    finally:
        if demo.poll() is None:
            demo.kill()
            stdout, stderr = demo.communicate()
    assert demo.returncode == 0, stdout + stderr
    assert f"metrics http://127.0.0.1:{port}/metrics" in stdout
    assert _value(seen, 'durable_graph_queue_entries{state="running"}') is not None


def test_a_demo_worker_that_cannot_serve_metrics_is_named_and_the_demo_fails(
    tmp_path: Path,
) -> None:
    """A worker that exits before it starts (its metrics port taken) is named with its error,
    and the demo crashes none of the one left (it once killed it and waited 50 s for nothing)."""
    port = _free_ports(2)
    env = {k: v for k, v in os.environ.items() if k != "DURABLE_GRAPH_DSN"}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port + 1))
        taken.listen()
        demo = subprocess.run(
            [
                *(str(BIN), "demo", "--sqlite", str(tmp_path / "demo.db")),
                *("--workers", "2", "--metrics-port", str(port)),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert demo.returncode == 1, demo.stdout + demo.stderr
    assert "demo-worker-2 exited before it started (exit 1: " in demo.stdout
    assert "Address already in use" in demo.stdout
    assert "fewer than two workers are up: nothing killed" in demo.stdout
    assert "All 8 entries closed" in demo.stdout  # the one left ran them all
    assert "FAILED: demo-worker-2 did not start" in demo.stdout


def test_observer_counts_renewals_losses_and_claim_waits() -> None:
    metrics = PrometheusObserver()
    with InMemoryCheckpointer() as raw:
        store = observed(raw, metrics)
        queue = store.run_queue
        entry_id = queue.submit(Submission("t", "x")).entry_id
        lease = queue.lease("w", TTL, run_id="run-1")
        assert lease is not None
        lease = queue.renew(lease)
        claim = raw.claim("t", "someone-else")
        with pytest.raises(Exception, match="claim"):
            store.claim("t", "run-1")
        raw.release_claim(claim)
        queue.cancel(entry_id)
        with pytest.raises(EntryClosed):
            queue.renew(lease)
    assert _sample(metrics, "durable_graph_lease_renewals_total") == 1
    assert _sample(metrics, "durable_graph_leases_lost_total") == 1
    assert _sample(metrics, "durable_graph_claim_waits_total") == 1
    assert _sample(metrics, "durable_graph_attempts_started_total") == 1


def test_observer_sees_async_store_calls_and_attempts() -> None:
    metrics = PrometheusObserver()

    async def main() -> None:
        async with observed(AsyncInMemoryCheckpointer(), metrics) as store:
            queue = store.run_queue
            await queue.submit(Submission("t", "x"))
            lease = await queue.lease("w", TTL, run_id="run-1")
            assert lease is not None
            closed = await queue.close(lease, Completed("done"))
            assert closed.outcome == Completed("done")

    asyncio.run(main())
    finished = {"result": "completed"}
    assert _sample(metrics, "durable_graph_attempts_finished_total", finished) == 1
    close = {"method": "run_queue.close"}
    assert _sample(metrics, "durable_graph_store_call_duration_seconds_count", close) == 1
