"""(a) Checkpoint cycle: commit under a held claim + read the head back.

Ours: ``commit(claim, Commit(...))`` then ``get(thread_id)``, each worker on its own thread with
a claim taken once in ``setup`` (ttl long enough never to need renewing).
LangGraph: ``PostgresSaver.put(config, checkpoint, metadata, new_versions)`` then
``get_tuple(config)`` (the head), the same ~1 KB state as one channel (``messages`` is a list,
so LangGraph stores it as a versioned blob, as a graph would), one connection per worker opened
the way ``PostgresSaver.from_conn_string`` does.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from durable_graph.core.model import ClaimPolicy, Commit

from .common import STATE, ns
from .stores import open_store

LONG_CLAIM = ClaimPolicy(ttl=timedelta(hours=1), renew_every=timedelta(minutes=20))


class OursCheckpointCycle:
    def __init__(self, params: dict[str, Any], index: int) -> None:
        self.params = params
        self.thread_id = f"ckpt-{params['tag']}-{index}-{uuid.uuid4().hex[:8]}"
        self.run_id = f"run-{uuid.uuid4().hex}"
        self.head: str | None = None

    def setup(self) -> None:
        self.store = open_store(self.params)
        self.claim = self.store.claim(self.thread_id, "bench", LONG_CLAIM)

    def op(self) -> dict[str, int]:
        t0 = ns()
        checkpoint = self.store.commit(
            self.claim,
            Commit(
                checkpoint_id=uuid.uuid4().hex,
                parent_id=self.head,
                run_id=self.run_id,
                state=STATE,
                next=("agent",),
            ),
        )
        t1 = ns()
        head = self.store.get(self.thread_id)
        t2 = ns()
        assert head is not None and head.checkpoint_id == checkpoint.checkpoint_id
        self.head = checkpoint.checkpoint_id
        return {"commit": t1 - t0, "get": t2 - t1}

    def close(self) -> None:
        self.store.close()


class LangGraphCheckpointCycle:
    def __init__(self, params: dict[str, Any], index: int) -> None:
        self.params = params
        self.thread_id = f"lg-{params['tag']}-{index}-{uuid.uuid4().hex[:8]}"

    def setup(self) -> None:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        self.conn = psycopg.Connection.connect(
            self.params["dsn"], autocommit=True, prepare_threshold=0, row_factory=dict_row
        )
        self.saver = PostgresSaver(self.conn)
        self.config: Any = {"configurable": {"thread_id": self.thread_id, "checkpoint_ns": ""}}
        self.version: str | None = None
        self.step = 0

    def op(self) -> dict[str, int]:
        from langgraph.checkpoint.base import empty_checkpoint

        self.version = self.saver.get_next_version(self.version, None)
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"messages": STATE["messages"], "step": STATE["step"]}
        checkpoint["channel_versions"] = {"messages": self.version, "step": self.version}
        metadata: Any = {"source": "loop", "step": self.step, "parents": {}}
        self.step += 1
        t0 = ns()
        self.config = self.saver.put(
            self.config, checkpoint, metadata, {"messages": self.version, "step": self.version}
        )
        t1 = ns()
        got = self.saver.get_tuple(
            {"configurable": {"thread_id": self.thread_id, "checkpoint_ns": ""}}
        )
        t2 = ns()
        assert got is not None and got.checkpoint["id"] == checkpoint["id"]
        return {"put": t1 - t0, "get_tuple": t2 - t1}

    def close(self) -> None:
        self.conn.close()


def setup_langgraph(dsn: str) -> None:
    """Create LangGraph's tables (its migrations) in the database ``dsn``."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    with psycopg.Connection.connect(
        dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row
    ) as conn:
        PostgresSaver(conn).setup()
