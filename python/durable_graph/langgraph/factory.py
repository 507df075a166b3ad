"""Graph factories of ``langgraph.json``: a function that makes the graph, called per use.

LangGraph Server accepts, for a graph, a function returning it (sync or ``async``), taking no
argument, a ``RunnableConfig``, a ``ServerRuntime`` (``langgraph_sdk.runtime``: which access it
is for, the user, the ``store``, a run's ``context``), or both by keyword; which parameter is
which is read from the annotations (the one annotated ``ServerRuntime`` is the runtime). As
there, a run calls the factory for itself ("threads.create_run", with the run's config and
context); what only reads a graph (its state, schemas, drawing) uses one graph the service made
with a read runtime ("assistants.read") when it started (D194).
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

from langchain_core.runnables import RunnableConfig
from langgraph.graph import StateGraph
from langgraph.pregel import Pregel
from langgraph.store.base import BaseStore
from langgraph_sdk.runtime import ServerRuntime, _ExecutionRuntime, _ReadRuntime

from durable_graph.core.errors import ValidationError

Access = Literal["threads.create_run", "assistants.read"]


@dataclass(frozen=True, slots=True)
class GraphFactory:
    """A function of ``langgraph.json`` that makes a graph; `make` calls it."""

    spec: str
    fn: Callable[..., Any]
    config_param: str | None
    runtime_param: str | None

    @classmethod
    def of(cls, spec: str, fn: Callable[..., Any]) -> GraphFactory:
        """Which parameter takes the config and which the runtime; `ValidationError` for a
        signature LangGraph Server would not call either."""
        params = list(inspect.signature(fn).parameters.values())
        runtime = [p.name for p in params if _is_runtime(_hints(fn).get(p.name, p.annotation))]
        if len(params) > 2 or (len(params) == 2 and len(runtime) != 1):
            raise ValidationError(
                f"config: the graph factory {spec} must take at most a RunnableConfig and a "
                "ServerRuntime (annotated as one)"
            )
        others = [p.name for p in params if p.name not in runtime]
        return cls(spec, fn, others[0] if others else None, runtime[0] if runtime else None)

    async def make(
        self,
        access: Access,
        config: RunnableConfig,
        store: BaseStore | None,
        context: Any = None,
    ) -> Pregel[Any, Any, Any, Any]:
        """The graph for one use: the factory called (and awaited) with what it asks for."""
        kwargs: dict[str, Any] = {}
        if self.config_param is not None:
            kwargs[self.config_param] = config
        if self.runtime_param is not None:
            kwargs[self.runtime_param] = _runtime(access, store, context)
        made = self.fn(**kwargs)
        if inspect.isawaitable(made):
            made = await made
        if isinstance(made, StateGraph):
            made = made.compile()
        if not isinstance(made, Pregel):
            raise ValidationError(f"config: the factory {self.spec} made no LangGraph graph")
        return made


def _runtime(access: Access, store: BaseStore | None, context: Any) -> ServerRuntime[Any]:
    if access == "threads.create_run":
        return _ExecutionRuntime(access_context=access, store=store, context=context)  # type: ignore[arg-type]
    return _ReadRuntime(access_context=access, store=store)  # type: ignore[arg-type]


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """The factory's resolved annotations (names the SDK's and LangChain's types resolve to)."""
    names = {"ServerRuntime": ServerRuntime, "RunnableConfig": RunnableConfig}
    try:
        return typing.get_type_hints(fn, localns=names)
    except Exception:  # an annotation that does not resolve says nothing: not the runtime
        return {}


def _is_runtime(annotation: Any) -> bool:
    """``ServerRuntime``, ``ServerRuntime[Ctx]``, the SDK's runtime classes, or one wrapped
    (``Annotated``)."""
    if annotation is ServerRuntime:
        return True
    if isinstance(annotation, type):
        return issubclass(annotation, (_ExecutionRuntime, _ReadRuntime))
    origin = get_origin(annotation)
    if origin is ServerRuntime:
        return True
    args = get_args(annotation)
    return origin is not None and bool(args) and _is_runtime(args[0])


ServedGraph = Pregel[Any, Any, Any, Any] | GraphFactory
"""A graph of ``langgraph.json`` as loaded: compiled, or the factory that makes it."""
