"""(f) LangGraph graph cycle: one ``invoke`` of a three-node graph (deterministic nodes, ~1 KB of
state) with its checkpointer.

Ours: `DurableSaver` bound to the run's claim (``for_run``: every write fenced, committed under
the run id), over one PostgreSQL connection. LangGraph: ``PostgresSaver`` over one connection
opened the way ``PostgresSaver.from_conn_string`` does. Both on the same server, the same graph,
the default durability (``"async"``); each worker keeps invoking its own thread (the nodes
overwrite the state, so it stays ~1 KB): a cycle writes the input checkpoint, three node
checkpoints and each node's pending writes.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any, TypedDict

from durable_graph.core.model import ClaimPolicy

from .common import STATE
from .stores import open_store

LONG_CLAIM = ClaimPolicy(ttl=timedelta(hours=1), renew_every=timedelta(minutes=20))


class GraphState(TypedDict, total=False):
    messages: list[dict[str, str]]
    step: int
    summary: str


def build_graph(checkpointer: Any) -> Any:
    from langgraph.graph import END, START, StateGraph

    def plan(state: GraphState) -> GraphState:
        return {"step": state.get("step", 0) + 1}

    def act(state: GraphState) -> GraphState:
        return {"messages": STATE["messages"], "step": state.get("step", 0) + 1}

    def answer(state: GraphState) -> GraphState:
        return {"summary": f"{len(state.get('messages', []))} messages", "step": 3}

    builder = StateGraph(GraphState)
    builder.add_node("plan", plan)
    builder.add_node("act", act)
    builder.add_node("answer", answer)
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "act")
    builder.add_edge("act", "answer")
    builder.add_edge("answer", END)
    return builder.compile(checkpointer=checkpointer)


INPUT: GraphState = {"messages": STATE["messages"], "step": 0}


class OursGraphCycle:
    def __init__(self, params: dict[str, Any], index: int) -> None:
        self.params = params
        self.thread_id = f"graph-{params['tag']}-{index}-{uuid.uuid4().hex[:8]}"
        self.run_id = f"run-{uuid.uuid4().hex}"

    def setup(self) -> None:
        from durable_graph.langgraph import DurableSaver

        self.store = open_store(self.params)
        claim = self.store.claim(self.thread_id, self.run_id, LONG_CLAIM)
        saver = DurableSaver(self.store).for_run(claim, self.run_id)
        self.graph = build_graph(saver)
        self.config: Any = {"configurable": {"thread_id": self.thread_id}}

    def op(self) -> None:
        out = self.graph.invoke(INPUT, self.config)
        assert out["step"] == 3

    def close(self) -> None:
        self.store.close()


class LangGraphGraphCycle:
    def __init__(self, params: dict[str, Any], index: int) -> None:
        self.params = params
        self.thread_id = f"lg-graph-{params['tag']}-{index}-{uuid.uuid4().hex[:8]}"

    def setup(self) -> None:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        self.conn = psycopg.Connection.connect(
            self.params["dsn"], autocommit=True, prepare_threshold=0, row_factory=dict_row
        )
        self.graph = build_graph(PostgresSaver(self.conn))
        self.config: Any = {"configurable": {"thread_id": self.thread_id}}

    def op(self) -> None:
        out = self.graph.invoke(INPUT, self.config)
        assert out["step"] == 3

    def close(self) -> None:
        self.conn.close()
