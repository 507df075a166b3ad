"""What notifications cost writers (SPEC §11): submit and commit throughput in three schemas of
one database — triggers disabled, enabled with nobody waiting (the usual case under load), and
enabled with a waiter registered for every change the workload makes (each write notifies).
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
from psycopg import sql

from durable_graph.core.model import Commit, Submission

from .common import JOB_INPUT, STATE, ns
from .jobs import LONG_CLAIM
from .stores import open_store


def _register(params: dict[str, Any], kind: str, key: str) -> None:
    """A waiter's registration that outlives the run (as a listener keeps it alive)."""
    with psycopg.connect(params["dsn"], autocommit=True) as conn:
        conn.execute(
            sql.SQL("SELECT {}.dg_watch_v1(%s, %s, %s, '1 hour')").format(
                sql.Identifier(params["schema"])
            ),
            (f"bench-{kind}-{key}", [kind], [key]),
        )


class SubmitOnly:
    def __init__(self, params: dict[str, Any], index: int) -> None:
        self.params = params
        self.prefix = f"s-{params['tag']}-{index}-{uuid.uuid4().hex[:8]}"
        self.n = 0

    def setup(self) -> None:
        self.store = open_store(self.params)
        if self.params.get("watched"):
            _register(self.params, "queue", "")

    def op(self) -> dict[str, int]:
        self.n += 1
        t0 = ns()
        self.store.run_queue.submit(Submission(f"{self.prefix}-{self.n}", JOB_INPUT))
        return {"submit": ns() - t0}

    def close(self) -> None:
        self.store.close()


class CommitOnly:
    def __init__(self, params: dict[str, Any], index: int) -> None:
        self.params = params
        self.thread_id = f"c-{params['tag']}-{index}-{uuid.uuid4().hex[:8]}"
        self.head: str | None = None

    def setup(self) -> None:
        self.store = open_store(self.params)
        self.claim = self.store.claim(self.thread_id, "bench", LONG_CLAIM)
        if self.params.get("watched"):
            _register(self.params, "events", self.thread_id)

    def op(self) -> dict[str, int]:
        t0 = ns()
        checkpoint = self.store.commit(
            self.claim, Commit(uuid.uuid4().hex, self.head, "run", STATE, next=("agent",))
        )
        self.head = checkpoint.checkpoint_id
        return {"commit": ns() - t0}

    def close(self) -> None:
        self.store.close()


def disable_triggers(dsn: str, schema: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in ("events", "queue_entries"):
            conn.execute(
                sql.SQL("ALTER TABLE {}.{} DISABLE TRIGGER USER").format(
                    sql.Identifier(schema), sql.Identifier(table)
                )
            )


__all__ = ["CommitOnly", "SubmitOnly", "disable_triggers"]
