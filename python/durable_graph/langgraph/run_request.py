"""What a graph submission asks for (SPEC §14.4): input or command, run config, stream modes.

A graph submission's input is either a plain graph input (``{"resume": v}`` answers an
``interrupt()``), or a **run request**, ``{"langgraph": {...}}`` with these fields, each
optional:

- ``input``: the graph's input (JSON; LangChain's JSON form of messages is loaded, see `values`);
- ``command``: ``{"resume": ..., "update": ..., "goto": ...}``, LangGraph's ``Command`` instead of
  an input;
- ``config``: ``{"configurable": {...}, "recursion_limit": n, "tags": [...], "metadata": {...}}``
  (``thread_id`` and ``checkpoint_ns`` are the entry's own and cannot be set);
- ``checkpoint_id``: run from that checkpoint of the thread (replay, time travel): LangGraph forks
  from it, so later history stays;
- ``interrupt_before`` / ``interrupt_after``: node names or ``"*"``;
- ``stream_mode``: modes to write into the event log (see `streaming`), ``stream_subgraphs``;
- ``durability``: LangGraph's ``"sync"``, ``"async"`` (its default) or ``"exit"`` (checkpoints
  written only when the run stops: done, interrupted or failed);
- ``graph``: which graph of a worker that serves several (`durable-graph worker
  --langgraph-config`);
- ``service``: the API's own record of the run (`durable_graph.service`); the handler reads only
  ``rollback`` from it (entry ids whose runs it deletes before applying the input).

`graph_submission` builds one. Anything malformed raises `ValidationError` naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, cast

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from durable_graph.core.errors import ValidationError
from durable_graph.core.model import JSON, Mode, Submission
from durable_graph.langgraph.streaming import check_stream_modes
from durable_graph.langgraph.values import from_json

REQUEST_KEY: Final = "langgraph"
"""The one key of a run request's input."""

RESUME_KEY: Final = "resume"
"""A plain input ``{"resume": value}`` answers the thread's pending ``interrupt()``."""

_CONFIG_KEYS: Final = frozenset({"configurable", "recursion_limit", "tags", "metadata"})
_FIELDS: Final = frozenset(
    {
        "input",
        "command",
        "config",
        "checkpoint_id",
        "interrupt_before",
        "interrupt_after",
        "stream_mode",
        "stream_subgraphs",
        "durability",
        "graph",
        "service",
    }
)
DURABILITIES: Final = ("sync", "async", "exit")
"""LangGraph's ``durability`` values (``Durability`` in ``langgraph.types``)."""
_OWN_CONFIGURABLE: Final = frozenset({"thread_id", "checkpoint_ns", "checkpoint_id"})


@dataclass(frozen=True, slots=True)
class RunRequest:
    """A graph submission's input, checked (see the module docstring)."""

    input: JSON = None
    command: dict[str, JSON] | None = None
    config: dict[str, JSON] = field(default_factory=dict)
    checkpoint_id: str | None = None
    interrupt_before: list[str] | str | None = None
    interrupt_after: list[str] | str | None = None
    stream_mode: tuple[str, ...] = ()
    stream_subgraphs: bool = False
    durability: str | None = None
    graph: str | None = None
    service: dict[str, JSON] = field(default_factory=dict)

    @classmethod
    def of(cls, value: JSON) -> RunRequest:
        """The request an entry's input makes (a plain input is ``input``, or ``resume``)."""
        if not (isinstance(value, dict) and set(value) == {REQUEST_KEY}):
            if isinstance(value, dict) and set(value) == {RESUME_KEY}:
                return cls(command={"resume": value[RESUME_KEY]})
            return cls(input=value)
        body = value[REQUEST_KEY]
        if not isinstance(body, dict):
            raise ValidationError("input['langgraph']: must be an object")
        unknown = set(body) - _FIELDS
        if unknown:
            raise ValidationError(f"input['langgraph']: unknown field {sorted(unknown)[0]!r}")
        command = body.get("command")
        if command is not None:
            if not isinstance(command, dict) or not set(command) <= {"resume", "update", "goto"}:
                raise ValidationError(
                    "input['langgraph']['command']: an object of resume, update, goto"
                )
            if body.get("input") is not None:
                raise ValidationError("input['langgraph']: give input or command, not both")
        checkpoint_id = body.get("checkpoint_id")
        if checkpoint_id is not None and (not isinstance(checkpoint_id, str) or not checkpoint_id):
            raise ValidationError("input['langgraph']['checkpoint_id']: must be a string")
        graph = body.get("graph")
        if graph is not None and not isinstance(graph, str):
            raise ValidationError("input['langgraph']['graph']: must be a string")
        service = body.get("service") or {}
        if not isinstance(service, dict):
            raise ValidationError("input['langgraph']['service']: must be an object")
        durability = body.get("durability")
        if durability is not None and durability not in DURABILITIES:
            raise ValidationError(
                f"input['langgraph']['durability']: one of {', '.join(DURABILITIES)}"
            )
        return cls(
            input=body.get("input"),
            command=command,
            config=_check_config(body.get("config")),
            checkpoint_id=checkpoint_id,
            interrupt_before=_check_nodes("interrupt_before", body.get("interrupt_before")),
            interrupt_after=_check_nodes("interrupt_after", body.get("interrupt_after")),
            stream_mode=check_stream_modes(body.get("stream_mode")),
            stream_subgraphs=bool(body.get("stream_subgraphs", False)),
            durability=durability,
            graph=graph,
            service=service,
        )

    def graph_input(self) -> Any:
        """What to give LangGraph: a ``Command``, or the input with LangChain objects loaded."""
        if self.command is not None:
            c = self.command
            kwargs: dict[str, Any] = {}
            if "resume" in c:
                kwargs["resume"] = from_json(c["resume"])
            if c.get("update") is not None:
                kwargs["update"] = from_json(c["update"])
            if c.get("goto") is not None:
                kwargs["goto"] = c["goto"]
            return Command(**kwargs)
        return from_json(self.input)

    def runnable_config(self, thread_id: str, *, at_checkpoint: bool) -> RunnableConfig:
        """The run's config on ``thread_id`` (from ``checkpoint_id`` when ``at_checkpoint``)."""
        config: dict[str, Any] = {k: v for k, v in self.config.items() if k != "configurable"}
        configurable = dict(cast(Mapping[str, Any], self.config.get("configurable") or {}))
        configurable["thread_id"] = thread_id
        configurable["checkpoint_ns"] = ""
        if at_checkpoint and self.checkpoint_id is not None:
            configurable["checkpoint_id"] = self.checkpoint_id
        config["configurable"] = configurable
        return cast(RunnableConfig, config)


def _check_config(value: object) -> dict[str, JSON]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValidationError("input['langgraph']['config']: must be an object")
    out: dict[str, JSON] = {}
    for key, item in value.items():
        where = f"input['langgraph']['config'][{key!r}]"
        if key not in _CONFIG_KEYS:
            continue  # LangGraph Server's clients send more (callbacks...): not a run's business
        if key == "recursion_limit" and (
            not isinstance(item, int) or isinstance(item, bool) or item < 1
        ):
            raise ValidationError(f"{where}: must be a positive integer")
        if key == "tags" and (
            not isinstance(item, list) or not all(isinstance(t, str) for t in item)
        ):
            raise ValidationError(f"{where}: must be a list of strings")
        if key in ("configurable", "metadata") and not isinstance(item, dict):
            raise ValidationError(f"{where}: must be an object")
        if key == "configurable":
            assert isinstance(item, dict)
            item = {k: v for k, v in item.items() if k not in _OWN_CONFIGURABLE}
        out[key] = item
    return out


def _check_nodes(name: str, value: object) -> list[str] | str | None:
    if value is None or value == "*":
        return value
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise ValidationError(f"input['langgraph'][{name!r}]: a list of node names or '*'")
    return list(value)


def run_request(
    input: JSON = None,
    *,
    command: Mapping[str, JSON] | None = None,
    config: Mapping[str, JSON] | None = None,
    checkpoint_id: str | None = None,
    interrupt_before: Sequence[str] | str | None = None,
    interrupt_after: Sequence[str] | str | None = None,
    stream_mode: Sequence[str] | str | None = None,
    stream_subgraphs: bool = False,
    durability: str | None = None,
    graph: str | None = None,
    service: Mapping[str, JSON] | None = None,
) -> JSON:
    """A run request's input (checked as the handler will check it)."""
    body: dict[str, JSON] = {}
    for key, value in (
        ("input", input),
        ("command", dict(command) if command is not None else None),
        ("config", dict(config) if config is not None else None),
        ("checkpoint_id", checkpoint_id),
        ("interrupt_before", _listed(interrupt_before)),
        ("interrupt_after", _listed(interrupt_after)),
        ("stream_mode", _listed(stream_mode)),
        ("stream_subgraphs", stream_subgraphs or None),
        ("durability", durability),
        ("graph", graph),
        ("service", dict(service) if service is not None else None),
    ):
        if value is not None:
            body[key] = value
    out: JSON = {REQUEST_KEY: body}
    RunRequest.of(out)
    return out


def _listed(value: Sequence[str] | str | None) -> JSON:
    if value is None or value == "*":
        return value
    return [value] if isinstance(value, str) else list(value)


def graph_submission(
    thread_id: str,
    input: JSON = None,
    *,
    command: Mapping[str, JSON] | None = None,
    config: Mapping[str, JSON] | None = None,
    checkpoint_id: str | None = None,
    interrupt_before: Sequence[str] | str | None = None,
    interrupt_after: Sequence[str] | str | None = None,
    stream_mode: Sequence[str] | str | None = None,
    stream_subgraphs: bool = False,
    graph: str | None = None,
    tenant: str | None = None,
    key: str | None = None,
    mode: Mode = Mode.ENQUEUE,
    max_attempts: int = 3,
) -> Submission:
    """A `Submission` that runs a graph on ``thread_id`` with this run config."""
    return Submission(
        thread_id=thread_id,
        input=run_request(
            input,
            command=command,
            config=config,
            checkpoint_id=checkpoint_id,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            stream_mode=stream_mode,
            stream_subgraphs=stream_subgraphs,
            graph=graph,
        ),
        tenant=tenant,
        key=key,
        mode=mode,
        max_attempts=max_attempts,
    )
