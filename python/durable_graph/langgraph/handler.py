"""Worker handlers that run a compiled LangGraph graph for each queue entry (SPEC §12).

``Worker(store, graph_handler(graph))`` runs ``graph`` on the entry's thread with a saver bound to
the attempt (`DurableSaver.for_run`): every checkpoint is fenced by the attempt's claim and
committed under its run id, so the worker's at-most-once protocol (SPEC §5) covers the graph:

- `Fresh` (no checkpoint of this entry's attempts): the input is applied — ``{"resume": v}``
  resumes an ``interrupt()`` with ``Command(resume=v)``, any other input is the graph's input.
- `Resume` (an earlier attempt of this entry committed): the input is never applied again; the
  graph continues from its checkpoint when LangGraph has tasks left (``invoke(None)``), and is
  left alone when it finished or waits at an interrupt.

The saver commits LangGraph's checkpoints with ``next=("langgraph",)``: whether a graph has
finished is LangGraph's to say (its state's ``next``), so `plan_attempt` never reports them
`Finished` and the handler asks LangGraph.

The entry's output is ``{"values": ..., "interrupts": [...], "next": [...]}``: the graph's state
values and pending interrupts as JSON (values that are not JSON appear as their ``str``), so a
caller sees the question an ``interrupt()`` asked and answers with a new submission.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.pregel import Pregel
from langgraph.types import Command, StateSnapshot

from durable_graph.core.model import JSON, Fresh
from durable_graph.langgraph.async_saver import AsyncDurableSaver
from durable_graph.langgraph.saver import DurableSaver
from durable_graph.worker.sync import RunContext

RESUME_KEY = "resume"
"""An input ``{"resume": value}`` answers the thread's pending ``interrupt()``."""


def _json(value: Any) -> JSON:
    """``value`` as JSON: plain JSON as it is, anything else through ``str``."""
    out: JSON = json.loads(json.dumps(value, default=str, allow_nan=False))
    return out


def output_of(snapshot: StateSnapshot) -> JSON:
    """The entry's output: the graph's values, pending interrupts and next nodes, as JSON."""
    return _json(
        {
            "values": snapshot.values,
            "interrupts": [{"id": i.id, "value": i.value} for i in snapshot.interrupts],
            "next": list(snapshot.next),
        }
    )


def graph_input(value: JSON) -> Any:
    """What to give ``invoke`` for an entry's input (``{"resume": v}`` -> ``Command``)."""
    if isinstance(value, dict) and set(value) == {RESUME_KEY}:
        return Command(resume=value[RESUME_KEY])
    return value


def _config(thread_id: str, extra: RunnableConfig | None) -> RunnableConfig:
    config: dict[str, Any] = dict(extra or {})
    configurable = dict(config.get("configurable") or {})
    configurable["thread_id"] = thread_id
    configurable.setdefault("checkpoint_ns", "")
    config["configurable"] = configurable
    return config  # type: ignore[return-value]


def _should_continue(snapshot: StateSnapshot) -> bool:
    """A resumed attempt runs LangGraph only when tasks are left and none waits at an interrupt."""
    return bool(snapshot.next) and not snapshot.interrupts


def graph_handler(
    graph: Pregel[Any, Any, Any, Any],
    saver: DurableSaver,
    *,
    config: RunnableConfig | None = None,
) -> Callable[[RunContext], JSON]:
    """A `Worker` handler running ``graph`` with ``saver.for_run(claim, run_id)`` per attempt."""

    def handler(ctx: RunContext) -> JSON:
        bound = graph.copy(update={"checkpointer": saver.for_run(ctx.claim, ctx.run_id)})
        cfg = _config(ctx.thread_id, config)
        if isinstance(ctx.plan, Fresh):
            bound.invoke(graph_input(ctx.input), cfg)
        else:
            if _should_continue(bound.get_state(cfg)):
                ctx.check()
                bound.invoke(None, cfg)
        ctx.check()  # a stale attempt reports its loss, not an output
        return output_of(bound.get_state(cfg))

    return handler


def async_graph_handler(
    graph: Pregel[Any, Any, Any, Any],
    saver: AsyncDurableSaver,
    *,
    config: RunnableConfig | None = None,
) -> Callable[[Any], Awaitable[JSON]]:
    """An `AsyncWorker` handler: `graph_handler` with ``ainvoke`` over an `AsyncDurableSaver`."""

    async def handler(ctx: Any) -> JSON:
        bound = graph.copy(update={"checkpointer": saver.for_run(ctx.claim, ctx.run_id)})
        cfg = _config(ctx.thread_id, config)
        if isinstance(ctx.plan, Fresh):
            await bound.ainvoke(graph_input(ctx.input), cfg)
        elif _should_continue(await bound.aget_state(cfg)):
            ctx.check()
            await bound.ainvoke(None, cfg)
        ctx.check()
        return output_of(await bound.aget_state(cfg))

    return handler
