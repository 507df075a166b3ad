"""Wake-up latency (SPEC §11): an idle worker, a job submitted, the handler starting — p50/p99
over ``n`` jobs spaced ``gap`` s apart (so the worker is idle each time), submitter and worker
in one process (one clock). Each worker polls every 5 s: a wake-up faster than that came from
its LISTEN/NOTIFY.

- ours: `Worker` (a thread) over `PostgresCheckpointer`, woken by the store's listener;
- procrastinate: ``App.run_worker_async(listen_notify=True)``, a task deferred with
  ``defer_async``;
- pgqueuer: ``QueueManager.run`` with an entrypoint, jobs from ``Queries.enqueue``, on asyncpg
  (the driver pgqueuer's documentation starts with) and on its psycopg driver. The psycopg
  driver reads notifications with ``notifies(timeout=1.0)`` on the connection its queries use,
  so a wake-up there waits out that read: its figure is pgqueuer's, not a bench artefact.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
import uuid
from datetime import timedelta
from typing import Any

POLL = 5.0


def ours(dsn: str, schema: str, n: int, gap: float) -> list[float]:
    from durable_graph.core.model import Submission
    from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
    from durable_graph.worker.sync import RunContext, Worker

    config = PostgresConfig(schema=schema, auto_migrate=False, max_pool_size=2)
    latencies: list[float] = []
    started = threading.Event()

    def handler(ctx: RunContext) -> None:
        sent: Any = ctx.input
        latencies.append((time.perf_counter() - float(sent["t"])) * 1000)
        started.set()

    with PostgresCheckpointer.open(dsn, config) as store:
        worker = Worker(store, handler, poll_interval=timedelta(seconds=POLL))
        runner = threading.Thread(target=worker.run, daemon=True)
        runner.start()
        time.sleep(1.0)
        prefix = uuid.uuid4().hex[:8]
        for i in range(n):
            started.clear()
            store.run_queue.submit(Submission(f"wake-{prefix}-{i}", {"t": time.perf_counter()}))
            started.wait(POLL * 3)
            time.sleep(gap)
        worker.stop()
        runner.join(30)
    return latencies


async def _procrastinate(dsn: str, n: int, gap: float) -> list[float]:
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))
    latencies: list[float] = []
    started = asyncio.Event()

    @app.task(queue="wake", name="wake")
    async def wake(t: float) -> None:
        latencies.append((time.perf_counter() - t) * 1000)
        started.set()

    async with app.open_async():
        worker = asyncio.create_task(
            app.run_worker_async(
                queues=["wake"],
                wait=True,
                listen_notify=True,
                fetch_job_polling_interval=POLL,
                install_signal_handlers=False,
            )
        )
        await asyncio.sleep(1.5)
        for _ in range(n):
            started.clear()
            await wake.defer_async(t=time.perf_counter())
            await asyncio.wait_for(started.wait(), POLL * 3)
            await asyncio.sleep(gap)
        worker.cancel()
        with contextlib.suppress(BaseException):  # cancelled on purpose
            await asyncio.wait_for(worker, 10)
    return latencies


async def _pgqueuer(dsn: str, n: int, gap: float, driver: str) -> list[float]:
    from pgqueuer.qm import QueueManager
    from pgqueuer.queries import Queries

    from .jobs import pgqueuer_driver

    worker_conn, worker_driver = await pgqueuer_driver(dsn, driver)
    submit_conn, submit_driver = await pgqueuer_driver(dsn, driver)
    manager = QueueManager(Queries(worker_driver))
    submit = Queries(submit_driver)
    latencies: list[float] = []
    started = asyncio.Event()

    @manager.entrypoint("wake")
    async def wake(job: Any) -> None:
        latencies.append((time.perf_counter() - json.loads(job.payload)["t"]) * 1000)
        started.set()

    running = asyncio.create_task(
        manager.run(dequeue_timeout=timedelta(seconds=POLL), batch_size=1)
    )
    await asyncio.sleep(1.5)
    try:
        for _ in range(n):
            started.clear()
            await submit.enqueue("wake", json.dumps({"t": time.perf_counter()}).encode())
            await asyncio.wait_for(started.wait(), POLL * 3)
            await asyncio.sleep(gap)
    finally:
        manager.shutdown.set()
        try:
            await asyncio.wait_for(running, 15)
        except BaseException:
            running.cancel()
        await worker_conn.close()
        await submit_conn.close()
    return latencies


def procrastinate_worker(dsn: str, n: int, gap: float) -> list[float]:
    return asyncio.run(_procrastinate(dsn, n, gap))


def pgqueuer_worker(dsn: str, n: int, gap: float, driver: str = "asyncpg") -> list[float]:
    return asyncio.run(_pgqueuer(dsn, n, gap, driver))


__all__ = ["ours", "pgqueuer_worker", "procrastinate_worker"]
