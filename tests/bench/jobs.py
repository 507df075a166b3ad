"""Workloads of the fast-path bench (`tests.bench.fast_path`, SPEC §11, issue 14).

Job: one agent run end to end — submit ~100 B, a worker takes it, commits one ~1 KB checkpoint,
completes it — the way a user wires each stack:

- ours as a user runs it (`UserJob`, what `make bench` compares): the store opened with
  ``PostgresCheckpointer.open(dsn, PostgresConfig(schema=..., max_pool_size=2))``, ``submit``,
  then ``Worker.run_once`` with a handler that ends with ``ctx.commit_last`` (three durable
  transactions: submit, begin, finish);
- ours by its store calls alone (`OursJob`, what the job profile counts): ``submit`` →
  ``begin_attempt`` (which returns the thread's head too, D73) → ``finish_attempt(commit=...)``
  (SPEC §18.1: the checkpoint committed with the close) on a pool of one connection;
  ``params["fused"] = False``: ``commit`` then ``finish_attempt`` (four);
- procrastinate + LangGraph: ``defer_job_async`` → ``fetch_job`` → ``AsyncPostgresSaver.aput``
  → ``finish_job``, the saver on its own connection;
- pgqueuer + LangGraph: ``enqueue`` → ``dequeue`` → ``aput`` → ``log_jobs``, once on
  pgqueuer's psycopg driver and once on asyncpg (``params["driver"]``), the driver its
  documentation starts with.

Checkpoint cycle (commit + read the head) in two state shapes: one channel (a dict holding the
~1 KB transcript) and two channels (``messages`` and ``step``).
"""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

from durable_graph.core.model import ClaimPolicy, Commit, Completed, Submission
from durable_graph.postgres import PostgresCheckpointer
from durable_graph.postgres.config import PostgresConfig
from durable_graph.worker import RunContext, Worker

from .common import JOB_INPUT, STATE, ns
from .stores import open_store

TTL = timedelta(minutes=5)
LONG_CLAIM = ClaimPolicy(ttl=timedelta(hours=1), renew_every=timedelta(minutes=20))


def lg_checkpoint(saver: Any, version: Any, two_channels: bool) -> tuple[Any, Any, Any]:
    """A LangGraph checkpoint (its current format) of the bench state, and its new versions."""
    from langgraph.checkpoint.base import empty_checkpoint

    checkpoint = empty_checkpoint()
    if two_channels:
        values = {"messages": STATE["messages"], "step": STATE["step"]}
    else:
        values = {"state": STATE}
    checkpoint["channel_values"] = values
    versions = {k: version for k in values}
    checkpoint["channel_versions"] = dict(versions)
    return checkpoint, {"source": "loop", "step": 1, "parents": {}}, versions


class OursJob:
    def __init__(self, params: dict[str, Any], index: int) -> None:
        self.params = params
        self.prefix = f"job-{params['tag']}-{index}-{uuid.uuid4().hex[:8]}"
        self.holder = f"w{index}"
        self.n = 0

    def setup(self) -> None:
        self.store = open_store(self.params)
        self.queue = self.store.run_queue

    def op(self) -> dict[str, int]:
        self.n += 1
        t0 = ns()
        self.queue.submit(Submission(thread_id=f"{self.prefix}-{self.n}", input=JOB_INPUT))
        t1 = ns()
        while True:  # all workers share the queue: another may have taken this job
            begun = self.store.begin_attempt(self.holder, TTL, run_id=uuid.uuid4().hex)
            if begun is not None:
                break
        t2 = ns()
        assert begun.claim is not None
        head = begun.head  # read under the claim by begin_attempt (D73), as the worker uses it
        commit = Commit(
            checkpoint_id=uuid.uuid4().hex,
            parent_id=None if head is None else head.checkpoint_id,
            run_id=begun.claim.holder,
            state=STATE,
        )
        if self.params.get("fused", True):
            # SPEC §18.1: the one checkpoint lands with the close (the worker's commit_last).
            self.store.finish_attempt(begun.lease, Completed(), begun.claim, commit=commit)
            t3 = ns()
            return {"submit": t1 - t0, "begin_attempt": t2 - t1, "finish_attempt": t3 - t2}
        self.store.commit(begun.claim, commit)
        t3 = ns()
        self.store.finish_attempt(begun.lease, Completed(), begun.claim)
        t4 = ns()
        return {
            "submit": t1 - t0,
            "begin_attempt": t2 - t1,
            "commit": t3 - t2,
            "finish_attempt": t4 - t3,
        }

    def close(self) -> None:
        self.store.close()


def commit_state_last(ctx: RunContext) -> None:
    """The bench job's handler: one ~1 KB checkpoint, committed with the close."""
    ctx.commit_last(STATE)


class UserJob:
    """The job as a user's process runs it: its own store (a pool of ``params["pool"]``
    connections, 2 by default, as the issue's harness opened it), a `Worker` on it, submit then
    ``run_once``. The renewal thread, the worker's checks and the pool's bookkeeping are
    measured with the store calls, as a user pays them."""

    def __init__(self, params: dict[str, Any], index: int) -> None:
        self.params = params
        self.prefix = f"uj-{params['tag']}-{index}-{uuid.uuid4().hex[:8]}"
        self.holder = f"u{index}-{uuid.uuid4().hex[:8]}"
        self.n = 0

    def setup(self) -> None:
        config = PostgresConfig(
            schema=self.params["schema"], max_pool_size=self.params.get("pool", 2)
        )
        self.store = PostgresCheckpointer.open(self.params["dsn"], config)
        self.worker = Worker(self.store, commit_state_last, holder=self.holder)

    def op(self) -> dict[str, int]:
        self.n += 1
        t0 = ns()
        self.store.run_queue.submit(
            Submission(thread_id=f"{self.prefix}-{self.n}", input=JOB_INPUT)
        )
        t1 = ns()
        while self.worker.run_once() is None:  # another client's worker took this job
            pass
        t2 = ns()
        return {"submit": t1 - t0, "run_once": t2 - t1}

    def close(self) -> None:
        self.store.close()


class _LangGraphSaver:
    """An ``AsyncPostgresSaver`` on its own connection, opened as ``from_conn_string`` does."""

    async def open_saver(self, dsn: str) -> None:
        import psycopg
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg.rows import dict_row

        self.lg_conn = await psycopg.AsyncConnection.connect(
            dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row
        )
        self.saver = AsyncPostgresSaver(self.lg_conn)

    async def put(self, thread_id: str) -> None:
        checkpoint, metadata, versions = lg_checkpoint(
            self.saver, self.saver.get_next_version(None, None), two_channels=False
        )
        config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        await self.saver.aput(config, checkpoint, metadata, versions)


class ProcrastinateJob(_LangGraphSaver):
    def __init__(self, params: dict[str, Any], index: int) -> None:
        self.params = params
        self.prefix = f"pj-{params['tag']}-{index}-{uuid.uuid4().hex[:8]}"
        self.n = 0

    async def setup(self) -> None:
        from procrastinate import PsycopgConnector
        from procrastinate.manager import JobManager

        self.connector = PsycopgConnector(conninfo=self.params["dsn"], min_size=1, max_size=1)
        await self.connector.open_async()
        self.manager = JobManager(self.connector)
        self.worker_id = await self.manager.register_worker()
        await self.open_saver(self.params["lg_dsn"])

    async def op(self) -> dict[str, int]:
        from procrastinate.jobs import Job, Status

        self.n += 1
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
        t2 = ns()
        await self.put(f"{self.prefix}-{self.n}")
        t3 = ns()
        await self.manager.finish_job(job, Status.SUCCEEDED, delete_job=False)
        t4 = ns()
        return {"defer": t1 - t0, "fetch_job": t2 - t1, "aput": t3 - t2, "finish_job": t4 - t3}

    async def close(self) -> None:
        await self.manager.unregister_worker(self.worker_id)
        await self.connector.close_async()
        await self.lg_conn.close()


async def pgqueuer_driver(dsn: str, driver: str | None) -> tuple[Any, Any]:
    """A connection and pgqueuer's driver over it: ``"asyncpg"`` or psycopg (the default)."""
    if driver == "asyncpg":
        import asyncpg
        import psycopg
        from pgqueuer.db import AsyncpgDriver

        # asyncpg reads URLs only: pass the libpq key=value DSN's parts by name.
        parts = psycopg.conninfo.conninfo_to_dict(dsn)
        conn: Any = await asyncpg.connect(
            host=parts.get("host"),
            port=parts.get("port"),
            user=parts.get("user"),
            password=parts.get("password"),
            database=parts.get("dbname"),
        )
        return conn, AsyncpgDriver(conn)
    import psycopg
    from pgqueuer.db import PsycopgDriver

    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    return conn, PsycopgDriver(conn)


class PgqueuerJob(_LangGraphSaver):
    def __init__(self, params: dict[str, Any], index: int) -> None:
        self.params = params
        self.prefix = f"qj-{params['tag']}-{index}-{uuid.uuid4().hex[:8]}"
        self.n = 0
        self.manager_id: Any = uuid.uuid4()

    async def setup(self) -> None:
        from pgqueuer.queries import EntrypointExecutionParameter, Queries

        self.conn, driver = await pgqueuer_driver(self.params["dsn"], self.params.get("driver"))
        self.queries = Queries(driver)
        self.entrypoints: Any = {"bench": EntrypointExecutionParameter(concurrency_limit=0)}
        self.payload = json.dumps(JOB_INPUT).encode()
        await self.open_saver(self.params["lg_dsn"])

    async def op(self) -> dict[str, int]:
        self.n += 1
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
        t2 = ns()
        await self.put(f"{self.prefix}-{self.n}")
        t3 = ns()
        await self.queries.log_jobs([(jobs[0], "successful", None)])
        t4 = ns()
        return {"enqueue": t1 - t0, "dequeue": t2 - t1, "aput": t3 - t2, "log_jobs": t4 - t3}

    async def close(self) -> None:
        await self.conn.close()
        await self.lg_conn.close()


# --- the checkpoint cycle in two state shapes ----------------------------------------------


class OursCycle:
    def __init__(self, params: dict[str, Any], index: int) -> None:
        self.params = params
        self.two = bool(params.get("two_channels"))
        self.thread_id = f"cc-{params['tag']}-{index}-{uuid.uuid4().hex[:8]}"
        self.run_id = uuid.uuid4().hex
        self.head: str | None = None

    def setup(self) -> None:
        self.store = open_store(self.params)
        self.claim = self.store.claim(self.thread_id, "bench", LONG_CLAIM)
        self.state: Any = (
            {"messages": STATE["messages"], "step": STATE["step"]} if self.two else {"state": STATE}
        )

    def op(self) -> dict[str, int]:
        t0 = ns()
        checkpoint = self.store.commit(
            self.claim,
            Commit(uuid.uuid4().hex, self.head, self.run_id, self.state, next=("agent",)),
        )
        t1 = ns()
        head = self.store.get(self.thread_id)
        t2 = ns()
        assert head is not None and head.checkpoint_id == checkpoint.checkpoint_id
        self.head = checkpoint.checkpoint_id
        return {"commit": t1 - t0, "get": t2 - t1}

    def close(self) -> None:
        self.store.close()


class LangGraphCycle:
    def __init__(self, params: dict[str, Any], index: int) -> None:
        self.params = params
        self.two = bool(params.get("two_channels"))
        self.thread_id = f"lc-{params['tag']}-{index}-{uuid.uuid4().hex[:8]}"

    def setup(self) -> None:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        self.conn = psycopg.Connection.connect(
            self.params["dsn"], autocommit=True, prepare_threshold=0, row_factory=dict_row
        )
        self.saver = PostgresSaver(self.conn)
        self.config: Any = {"configurable": {"thread_id": self.thread_id, "checkpoint_ns": ""}}
        self.version: Any = None

    def op(self) -> dict[str, int]:
        self.version = self.saver.get_next_version(self.version, None)
        checkpoint, metadata, versions = lg_checkpoint(self.saver, self.version, self.two)
        t0 = ns()
        self.config = self.saver.put(self.config, checkpoint, metadata, versions)
        t1 = ns()
        got = self.saver.get_tuple(
            {"configurable": {"thread_id": self.thread_id, "checkpoint_ns": ""}}
        )
        t2 = ns()
        assert got is not None and got.checkpoint["id"] == checkpoint["id"]
        return {"put": t1 - t0, "get_tuple": t2 - t1}

    def close(self) -> None:
        self.conn.close()


__all__ = [
    "LangGraphCycle",
    "OursCycle",
    "OursJob",
    "PgqueuerJob",
    "ProcrastinateJob",
    "UserJob",
    "lg_checkpoint",
]
