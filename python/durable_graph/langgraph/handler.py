"""Worker handlers that run a compiled LangGraph graph for each queue entry (SPEC §12, §14.3-5).

``Worker(store, graph_handler(graph, DurableSaver(store)))`` (``AsyncWorker`` with
``async_graph_handler(graph, AsyncDurableSaver(store))``) runs ``graph`` on the entry's thread
with a saver bound to the attempt (`DurableSaver.for_run`): every checkpoint is fenced by the
attempt's claim and committed under its run id, so the worker's at-most-once protocol (SPEC §5)
covers the graph:

- `Fresh` (no checkpoint of this entry's attempts): the input is applied — a run request
  (`run_request`: input or ``Command``, run config, ``checkpoint_id``, interrupts, stream modes)
  or a plain graph input (``{"resume": v}`` resumes an ``interrupt()``).
- `Resume` (an earlier attempt of this entry committed): the input is never applied again; the
  graph continues from its checkpoint when LangGraph has tasks left (``invoke(None)``), and is
  left alone when it finished or waits at an interrupt.

The saver commits LangGraph's checkpoints with ``next=("langgraph",)``: whether a graph has
finished is LangGraph's to say (its state's ``next``), so `plan_attempt` never reports them
`Finished` and the handler asks LangGraph.

An error raised by the graph is retried as every handler's is, with the entry's backoff up to
its ``max_attempts`` (SPEC §19.4): the next attempt resumes from the last checkpoint and re-runs
the failed step, never applying the input again. Errors no retry can change (`FINAL_ERRORS`:
a recursion limit, an invalid update, an empty input, a refused argument) fail the entry at once
(`FinalFailure`). A crash, a lost lease or claim are retried as for every handler.

The requested stream modes go into the thread's event log (`streaming`). The entry's output is
``{"values": ..., "interrupts": [{"id", "value"}], "next": [...]}`` as
JSON, LangChain messages in LangChain's JSON form (`values.to_json`), so a caller sees the
question an ``interrupt()`` asked and answers with a new submission.

**Under ``durable-graph worker --app``**: name the compiled graph itself (``--app
mymodule:graph``); the worker wraps it with ``graph_handler(graph, DurableSaver(store))`` on the
store it opened, so the module never opens a store of its own. Several graphs:
``--langgraph-config langgraph.json``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any, Final, cast

from langchain_core.runnables import RunnableConfig
from langgraph.errors import EmptyInputError, GraphRecursionError, InvalidUpdateError
from langgraph.pregel import Pregel
from langgraph.pregel.protocol import StreamProtocol
from langgraph.store.base import BaseStore
from langgraph.types import StateSnapshot

from durable_graph.core.errors import NotFound, ValidationError
from durable_graph.core.model import JSON, EventIn, Fresh
from durable_graph.langgraph import codec
from durable_graph.langgraph.async_saver import AsyncDurableSaver
from durable_graph.langgraph.factory import GraphFactory, ServedGraph
from durable_graph.langgraph.run_request import RESUME_KEY, RunRequest
from durable_graph.langgraph.saver import DurableSaver
from durable_graph.langgraph.streaming import Outbox
from durable_graph.langgraph.values import to_json
from durable_graph.worker.flow import FinalFailure
from durable_graph.worker.sync import RunContext

if TYPE_CHECKING:  # the async worker is imported by those who use it (durable_graph.aio)
    from durable_graph.aio import AsyncRunContext

CONFIG_KEY_STREAM = "__pregel_stream"
"""LangGraph's config key for a parent stream (its ``CONFIG_KEY_STREAM``): the loop sends each
chunk to it as it emits, which is how step events reach the checkpoint they precede."""

__all__ = ["RESUME_KEY", "async_graph_handler", "graph_handler", "output_of"]


def output_of(snapshot: StateSnapshot) -> JSON:
    """The entry's output: the graph's values, pending interrupts and next nodes, as JSON."""
    return to_json(
        {
            "values": snapshot.values,
            "interrupts": [{"id": i.id, "value": i.value} for i in snapshot.interrupts],
            "next": list(snapshot.next),
        },
        lenient=True,
    )


def graph_input(value: JSON) -> Any:
    """What to give LangGraph for an entry's input (``{"resume": v}`` -> ``Command``)."""
    return RunRequest.of(value).graph_input()


def _should_continue(snapshot: StateSnapshot) -> bool:
    """A resumed attempt runs LangGraph only when tasks are left and none waits at an interrupt."""
    return bool(snapshot.next) and not snapshot.interrupts


def _merged(request: RunRequest, base: RunnableConfig | None) -> RunRequest:
    """The request with the handler's own ``config`` under it (the request's keys win)."""
    if not base:
        return request
    config: dict[str, Any] = {k: v for k, v in base.items() if k != "configurable"}
    config.update({k: v for k, v in request.config.items() if k != "configurable"})
    configurable = dict(base.get("configurable") or {})
    configurable.update(dict(request.config.get("configurable") or {}))  # type: ignore[arg-type]
    config["configurable"] = configurable
    return RunRequest(**{**_fields(request), "config": config})


def _fields(request: RunRequest) -> dict[str, Any]:
    return {name: getattr(request, name) for name in request.__slots__}


def _carried_its_values(head: Any, serde: Any) -> bool:
    """Whether the stream already holds the values of the checkpoint a retried attempt resumes
    from: every checkpoint's commit carries them, except the input's (its values chunk comes
    after it, with the next checkpoint). Its metadata read with the saver's ``serde`` (it may
    be encrypted, D286)."""
    metadata = getattr(head, "metadata", None)
    if not isinstance(metadata, dict):
        return False
    return codec.decode_metadata(serde, metadata).get("source") != "input"


class _Attempt:
    """One attempt, what both handlers share: the graph bound to the attempt, what to run, with
    which config, and its stream. The handlers are the same dozen lines each, written out (as
    LangGraph writes ``stream`` and ``astream``): one calls the graph and the store, the other
    awaits them."""

    def __init__(
        self,
        ctx: RunContext | AsyncRunContext,
        base: RunnableConfig | None,
        graph: Pregel[Any, Any, Any, Any],
        saver: DurableSaver | AsyncDurableSaver,
    ) -> None:
        self.request = _merged(RunRequest.of(ctx.input), base)
        self.fresh = isinstance(ctx.plan, Fresh)
        self.outbox = Outbox(
            self.request.stream_mode,
            self.request.stream_subgraphs,
            resumed=not self.fresh and _carried_its_values(ctx.head, saver.serde),
            nested_from_stream=isinstance(saver, AsyncDurableSaver),  # astream's subgraphs
            serde=saver.serde,  # under encryption, events are sealed too (D289)
        )
        streams = bool(self.request.stream_mode)
        events_for = self.outbox.for_checkpoint if streams else None
        bound_saver = saver.for_run(ctx.claim, ctx.run_id, events_for=events_for)
        self.graph = graph.copy(update={"checkpointer": bound_saver})
        self.head_config = self.request.runnable_config(ctx.thread_id, at_checkpoint=False)
        self.config = self.request.runnable_config(ctx.thread_id, at_checkpoint=self.fresh)
        if streams:
            configurable: dict[str, Any] = dict(self.config["configurable"])
            configurable[CONFIG_KEY_STREAM] = StreamProtocol(
                self.outbox.from_loop,
                self.outbox.step_modes,  # type: ignore[arg-type]
            )
            configurable.update(self.outbox.configurable())
            self.config = {**self.config, "configurable": configurable}

    def rollback_runs(self, entries: Mapping[int, Any]) -> list[str]:
        """The run ids of the entries a ``rollback`` submission removes."""
        return [a.run_id for e in entries.values() if e is not None for a in e.attempts]

    @property
    def rollback(self) -> list[int]:
        """The entries a fresh ``rollback`` submission removes first (none on a resume)."""
        ids = (self.request.service.get("rollback") or []) if self.fresh else []
        return [i for i in ids if isinstance(i, int)] if isinstance(ids, list) else []

    @property
    def todo(self) -> Any:
        """What the graph is given: the request's input when fresh, None to continue."""
        return self.request.graph_input() if self.fresh else None

    def stream_kwargs(self) -> dict[str, Any]:
        kwargs = {
            **self.outbox.stream_kwargs(),
            "subgraphs": True,
            "interrupt_before": self.request.interrupt_before,
            "interrupt_after": self.request.interrupt_after,
        }
        if self.request.durability is not None:  # else LangGraph's default ("async")
            kwargs["durability"] = self.request.durability
        if self.outbox.events:  # astream_events' own version (its v2 events), not astream's
            kwargs["version"] = "v2"
        return kwargs

    def stream(self) -> AsyncIterator[Any]:
        """The graph's run as the async handler iterates it: ``astream``, or with the
        ``events`` mode ``astream_events`` (`streaming`)."""
        if self.outbox.events:
            events: AsyncIterator[Any] = self.graph.astream_events(
                self.todo, self.config, **self.stream_kwargs()
            )
            return events
        return self.graph.astream(self.todo, self.config, **self.stream_kwargs())

    def live(self, item: Any) -> list[EventIn]:
        """One stream item into the outbox; the live events due to be appended now, if any."""
        if self.outbox.events:
            self.outbox.from_event(item)
        else:
            self.outbox.from_stream(item)
        return self.outbox.take_live() if self.outbox.live_due() else []

    @contextmanager
    def held_back(self, batch: list[EventIn]) -> Iterator[None]:
        """Around the append of live events: before the run's first checkpoint has landed
        (`NotFound`) they wait for the next flush."""
        try:
            yield
        except NotFound:
            self.outbox.put_back(batch)


FINAL_ERRORS: tuple[type[Exception], ...] = (
    GraphRecursionError,
    InvalidUpdateError,
    EmptyInputError,
    ValidationError,
)
"""A graph's errors another attempt would only repeat (SPEC §19.4): the run fails at once."""


@contextmanager
def _graph_errors() -> Iterator[None]:
    """Around the graph's run: an error in `FINAL_ERRORS` ends the run (`FinalFailure`, naming
    the error); any other, the store's included, passes as it is, for the worker's retries."""
    try:
        yield
    except FINAL_ERRORS as exc:
        raise FinalFailure(f"{type(exc).__name__}: {exc}") from exc


def graph_handler(
    graph: Pregel[Any, Any, Any, Any],
    saver: DurableSaver,
    *,
    config: RunnableConfig | None = None,
) -> Callable[[RunContext], JSON]:
    """A `Worker` handler running ``graph`` with ``saver.for_run(claim, run_id)`` per attempt.

    ``config`` is a base run config under each submission's own (``recursion_limit``, ``tags``,
    ``configurable`` values for every run).
    """

    def handler(ctx: RunContext) -> JSON:
        at = _Attempt(ctx, config, graph, saver)
        if at.outbox.events:  # LangGraph has no sync stream_events
            raise FinalFailure("stream_mode: 'events' needs the async worker (astream_events)")
        if at.rollback:
            entries = {i: ctx.store.run_queue.entry(i) for i in at.rollback}
            ctx.store.delete_runs(at.rollback_runs(entries))
        if at.fresh or _should_continue(at.graph.get_state(at.head_config)):
            ctx.check()
            with _graph_errors():
                for item in at.graph.stream(at.todo, at.config, **at.stream_kwargs()):
                    if batch := at.live(item):
                        with at.held_back(batch):
                            ctx.append_events(batch)
            if rest := at.outbox.take_rest():
                ctx.append_events(rest)
        ctx.check()  # a stale attempt reports its loss, not an output
        return output_of(at.graph.get_state(at.head_config))

    return handler


def async_graph_handler(
    graph: Pregel[Any, Any, Any, Any],
    saver: AsyncDurableSaver,
    *,
    config: RunnableConfig | None = None,
) -> Callable[[AsyncRunContext], Awaitable[JSON]]:
    """An `AsyncWorker` handler: `graph_handler` with ``astream`` over an `AsyncDurableSaver`.

    ``AsyncWorker(store, async_graph_handler(graph, AsyncDurableSaver(store)))`` on an async
    store; the same inputs, run config, streaming and output as `graph_handler`.
    """

    async def handler(ctx: AsyncRunContext) -> JSON:
        at = _Attempt(ctx, config, graph, saver)
        if at.rollback:
            entries = {i: await ctx.store.run_queue.entry(i) for i in at.rollback}
            await ctx.store.delete_runs(at.rollback_runs(entries))
        if at.fresh or _should_continue(await at.graph.aget_state(at.head_config)):
            ctx.check()
            with _graph_errors():
                async for item in at.stream():
                    if batch := at.live(item):
                        with at.held_back(batch):
                            await ctx.append_events(batch)
            if rest := at.outbox.take_rest():
                await ctx.append_events(rest)
        ctx.check()
        return output_of(await at.graph.aget_state(at.head_config))

    return handler


def graphs_handler(
    graphs: Mapping[str, ServedGraph],
    saver: DurableSaver,
    *,
    config: RunnableConfig | None = None,
    store: BaseStore | None = None,
) -> Callable[[RunContext], JSON]:
    """`graph_handler` for several graphs: a run request's ``graph`` names which (the only one
    when there is one); `ValidationError` (the entry fails) for an unknown name. A graph
    factory makes the run's graph for each attempt (`factory`); ``store`` is the graphs' own
    LangGraph store (their ``store`` argument), if any."""
    handlers = {
        n: graph_handler(_served(g, n, store), saver, config=config)
        for n, g in graphs.items()
        if not isinstance(g, GraphFactory)
    }

    def handler(ctx: RunContext) -> JSON:
        name = _graph_name(ctx.input, graphs)
        with suppress(NotFound):  # a thread's first run: no commit to hang the effect on yet
            ctx.record_effect(GRAPH_EFFECT, lambda: name)
        made = graphs[name]
        if isinstance(made, GraphFactory):  # in the worker's thread, with no loop running
            graph = asyncio.run(made.make(RUN_ACCESS, _run_config(ctx, config), store))
            return graph_handler(_served(graph, name, store), saver, config=config)(ctx)
        return handlers[name](ctx)

    return handler


def async_graphs_handler(
    graphs: Mapping[str, ServedGraph],
    saver: AsyncDurableSaver,
    *,
    config: RunnableConfig | None = None,
    store: BaseStore | None = None,
) -> Callable[[AsyncRunContext], Awaitable[JSON]]:
    """`graphs_handler` for an `AsyncWorker`: each graph run with ``astream``, so ``async def``
    nodes and tools run, as LangGraph Server runs every graph."""
    handlers = {
        n: async_graph_handler(_served(g, n, store), saver, config=config)
        for n, g in graphs.items()
        if not isinstance(g, GraphFactory)
    }

    async def handler(ctx: AsyncRunContext) -> JSON:
        name = _graph_name(ctx.input, graphs)
        with suppress(NotFound):  # a thread's first run: no commit to hang the effect on yet
            await ctx.record_effect(GRAPH_EFFECT, lambda: name)
        made = graphs[name]
        run_store = _store_for(store, ctx.entry.tenant)
        if isinstance(made, GraphFactory):
            graph = await made.make(RUN_ACCESS, _run_config(ctx, config), run_store)
        elif run_store is not store:  # a user's run: the user's items (SPEC §20.4)
            graph = made
        else:
            return await handlers[name](ctx)
        run = async_graph_handler(_served(graph, name, run_store), saver, config=config)
        return await run(ctx)

    return handler


def _served(
    graph: Pregel[Any, Any, Any, Any], name: str, store: BaseStore | None
) -> Pregel[Any, Any, Any, Any]:
    """``graph`` as a run of the file's graph ``name`` runs it: with ``store``, and named
    ``name`` unless its author named it (as LangGraph Server names it: the root run of an
    ``events`` stream, traces)."""
    update: dict[str, Any] = {"store": store}
    if graph.name == "LangGraph":  # LangGraph's default name
        update["name"] = name
    return graph.copy(update=update)


def _store_for(store: BaseStore | None, tenant: str | None) -> BaseStore | None:
    """The graphs' store for a run of ``tenant``: its own items when the store keeps tenants
    apart (`AsyncDurableStore.for_tenant`), else ``store`` itself."""
    for_tenant = getattr(store, "for_tenant", None)
    return store if for_tenant is None or tenant is None else cast(BaseStore, for_tenant(tenant))


RUN_ACCESS: Final = "threads.create_run"


def _run_config(ctx: RunContext | AsyncRunContext, base: RunnableConfig | None) -> RunnableConfig:
    """The config a factory gets for a run: the run's own over ``base``, with its thread."""
    return _merged(RunRequest.of(ctx.input), base).runnable_config(
        ctx.thread_id, at_checkpoint=False
    )


GRAPH_EFFECT = "langgraph.graph"
"""Effect naming the graph that first ran on a thread (what the service reads its state with)."""


def _graph_name(value: JSON, names: Mapping[str, Any]) -> str:
    name = RunRequest.of(value).graph
    if name is None and len(names) == 1:
        return next(iter(names))
    if name is None or name not in names:
        raise ValidationError(f"input['langgraph']['graph']: no graph named {name!r} here")
    return name
