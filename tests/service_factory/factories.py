"""Graph factories as ``langgraph.json`` names them (tests/test_service_factory.py)."""

from __future__ import annotations

from typing import Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, StateGraph
from langgraph.pregel import Pregel
from langgraph.store.base import BaseStore
from langgraph_sdk.runtime import ServerRuntime


class State(TypedDict, total=False):
    text: str
    access: str
    execution: bool
    has_store: bool


def _echo(suffix: str, **seen: Any) -> Pregel[Any, Any, Any, Any]:
    def echo(state: State) -> State:
        return {"text": (state.get("text") or "") + suffix, **seen}  # type: ignore[typeddict-item]

    graph = StateGraph(State)
    graph.add_node("echo", echo)
    graph.set_entry_point("echo")
    graph.add_edge("echo", END)
    return graph.compile()


async def with_runtime(
    config: RunnableConfig, runtime: ServerRuntime[Any]
) -> Pregel[Any, Any, Any, Any]:
    """Config and runtime (in this order or the other: the annotation says which)."""
    return _echo(
        str((config.get("configurable") or {}).get("suffix", " echoed")),
        access=runtime.access_context,
        execution=runtime.execution_runtime is not None,
        has_store=isinstance(runtime.store, BaseStore),
    )


def with_config(config: RunnableConfig) -> Pregel[Any, Any, Any, Any]:
    return _echo(str((config.get("configurable") or {}).get("suffix", " plain")))


class Inner(TypedDict, total=False):
    text: str
    seen: int


def _inner_step(state: Inner) -> Inner:
    return {"seen": (state.get("seen") or 0) + 1}


_inner = StateGraph(Inner)
_inner.add_node("count", _inner_step)
_inner.set_entry_point("count")
_inner.add_edge("count", END)

_outer = StateGraph(Inner)
_outer.add_node("inner", _inner.compile())
_outer.set_entry_point("inner")
_outer.add_edge("inner", END)
nested = _outer.compile()
"""A graph with a subgraph (``/assistants/{id}/subgraphs``)."""
