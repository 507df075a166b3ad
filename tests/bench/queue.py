"""(b) Queue lifecycle: put a job in, take it out, mark it started, finish it.

Ours: ``submit`` (a fresh thread per job) + ``lease`` + ``record_attempt`` + ``close``; the
fused variant ``submit`` + ``lease(run_id=...)`` + ``close``. All workers share one queue
(``tenant=ANY``), so a worker may lease another worker's job; an empty lease is retried.
procrastinate: ``JobManager.defer_job_async`` + ``fetch_job`` + ``finish_job`` on its
``PsycopgConnector`` (async psycopg pool of one connection), no worker loop.
pgqueuer: ``Queries.enqueue`` + ``dequeue`` + ``log_jobs`` (its completion) on
``PsycopgDriver`` over one async psycopg connection, no QueueManager.
"""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

from durable_graph.core.model import Completed, Started, Submission

from .common import JOB_INPUT, ns
from .stores import open_store

LEASE_TTL = timedelta(minutes=5)


class OursQueueLifecycle:
    def __init__(self, params: dict[str, Any], index: int) -> None:
        self.params = params
        self.fused = bool(params.get("fused"))
        self.prefix = f"q-{params['tag']}-{index}-{uuid.uuid4().hex[:8]}"
        self.holder = f"w{index}"
        self.n = 0
        self.retries = 0

    def setup(self) -> None:
        self.store = open_store(self.params)
        self.queue = self.store.run_queue

    def op(self) -> dict[str, int]:
        self.n += 1
        run_id = f"{self.prefix}-r{self.n}"
        t0 = ns()
        self.queue.submit(Submission(thread_id=f"{self.prefix}-{self.n}", input=JOB_INPUT))
        t1 = ns()
        while True:
            if self.fused:
                lease = self.queue.lease(self.holder, LEASE_TTL, run_id=run_id)
            else:
                lease = self.queue.lease(self.holder, LEASE_TTL)
            if lease is not None:
                break
            self.retries += 1
        t2 = ns()
        parts = {"submit": t1 - t0}
        if self.fused:
            assert isinstance(lease.attempt, Started)
            parts["lease(run_id)"] = t2 - t1
        else:
            parts["lease"] = t2 - t1
            started = self.queue.record_attempt(lease, run_id)
            assert isinstance(started, Started)
            t2b = ns()
            parts["record_attempt"] = t2b - t2
            t2 = t2b
        self.queue.close(lease, Completed({"ok": True}))
        parts["close"] = ns() - t2
        return parts

    def close(self) -> None:
        self.store.close()


class ProcrastinateLifecycle:
    def __init__(self, params: dict[str, Any], index: int) -> None:
        self.params = params
        self.retries = 0

    async def setup(self) -> None:
        from procrastinate import PsycopgConnector
        from procrastinate.manager import JobManager

        self.connector = PsycopgConnector(conninfo=self.params["dsn"], min_size=1, max_size=1)
        await self.connector.open_async()
        self.manager = JobManager(self.connector)
        self.worker_id = await self.manager.register_worker()

    async def op(self) -> dict[str, int]:
        from procrastinate.jobs import Job, Status

        t0 = ns()
        await self.manager.defer_job_async(
            Job(
                queue="bench",
                lock=None,
                queueing_lock=None,
                task_name="bench_task",
                task_kwargs=JOB_INPUT,
            )
        )
        t1 = ns()
        while True:
            job = await self.manager.fetch_job(["bench"], self.worker_id)
            if job is not None:
                break
            self.retries += 1
        t2 = ns()
        await self.manager.finish_job(job, Status.SUCCEEDED, delete_job=False)
        t3 = ns()
        return {"defer": t1 - t0, "fetch_job": t2 - t1, "finish_job": t3 - t2}

    async def close(self) -> None:
        await self.manager.unregister_worker(self.worker_id)
        await self.connector.close_async()


async def setup_procrastinate(dsn: str) -> None:
    from procrastinate import PsycopgConnector
    from procrastinate.schema import SchemaManager

    connector = PsycopgConnector(conninfo=dsn, min_size=1, max_size=1)
    await connector.open_async()
    try:
        await SchemaManager(connector).apply_schema_async()
    finally:
        await connector.close_async()


class PgqueuerLifecycle:
    def __init__(self, params: dict[str, Any], index: int) -> None:
        self.params = params
        self.retries = 0
        self.manager_id: Any = uuid.uuid4()

    async def setup(self) -> None:
        import psycopg
        from pgqueuer.db import PsycopgDriver
        from pgqueuer.queries import EntrypointExecutionParameter, Queries

        self.conn = await psycopg.AsyncConnection.connect(self.params["dsn"], autocommit=True)
        self.queries = Queries(PsycopgDriver(self.conn))
        self.entrypoints: Any = {"bench": EntrypointExecutionParameter(concurrency_limit=0)}
        self.payload = json.dumps(JOB_INPUT).encode()

    async def op(self) -> dict[str, int]:
        t0 = ns()
        await self.queries.enqueue("bench", self.payload)
        t1 = ns()
        while True:
            jobs = await self.queries.dequeue(
                batch_size=1,
                entrypoints=self.entrypoints,
                queue_manager_id=self.manager_id,
                global_concurrency_limit=None,
                heartbeat_timeout=timedelta(seconds=30),
            )
            if jobs:
                break
            self.retries += 1
        t2 = ns()
        await self.queries.log_jobs([(jobs[0], "successful", None)])
        t3 = ns()
        return {"enqueue": t1 - t0, "dequeue": t2 - t1, "log_jobs": t3 - t2}

    async def close(self) -> None:
        await self.conn.close()


async def setup_pgqueuer(dsn: str) -> None:
    import psycopg
    from pgqueuer.db import PsycopgDriver
    from pgqueuer.queries import Queries

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await Queries(PsycopgDriver(conn)).install()
