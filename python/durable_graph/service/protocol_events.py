"""A thread's event log as LangGraph's streaming protocol events (the SDK's ``threads.stream``,
SPEC §20.2).

A protocol event is ``{"type": "event", "event_id", "seq", "method", "params": {"namespace",
"timestamp", "data", "node"?}}``. The runs the protocol starts write the store modes
`PROTOCOL_MODES` (`streaming`: LangGraph's content-block message events, tool events, custom
chunks, updates, values); `Translator` turns each ``lg.*`` event of the log into the protocol's:

- ``values`` (``__interrupt__`` taken out), ``updates`` (one per node, ``params.node``),
  ``messages`` (LangGraph's own ``message-start`` / ``content-block-*`` / ``message-finish``),
  ``tools`` (``tool-started`` / ``tool-finished``...), ``custom`` (a chunk with a ``name`` is the
  ``custom:<name>`` channel's as it is, any other ``{"payload": chunk}``);
- ``input.requested`` ``{"interrupt_id", "payload"}`` for each interrupt a run stops at, with the
  root's ``lifecycle`` ``interrupted``;
- subgraphs' ``lifecycle`` (below);
- the root's ``lifecycle`` from the runs themselves: ``running`` before a run's first event,
  ``completed`` / ``failed`` (with its ``error``; a cancelled run is ``failed``) right after the
  log's event the run closed at (`QueueEntry.closed_at_seq`).

Numbering: a connection reads the thread's log from its first event and numbers what it sends
(``seq``, and ``event_id`` its string); every event and lifecycle has a fixed place in the log,
so every connection numbers alike and a reconnecting client's ``since`` (the last ``seq`` it saw)
means the same thing to the next connection. Subgraphs' own lifecycles (``started`` for a
namespace, then its end) are inferred from the run's ``tasks`` events by LangGraph's own
`LifecycleTransformer`, as LangGraph Server infers them (a subagent a tool starts has one, which
the SDK's ``thread.subgraphs`` finds); the ``tasks`` events themselves are not sent, as there.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from langgraph.stream.transformers import LifecycleTransformer

from durable_graph.core.model import Cancelled, Completed, Event, Failed, QueueEntry
from durable_graph.langgraph.run_request import RunRequest
from durable_graph.langgraph.streaming import EVENT_PREFIX, MESSAGES_V2, TASKS, open_payload
from durable_graph.langgraph.values import message_dict
from durable_graph.service.records import client_error

CHANNELS: Final = frozenset(
    {"values", "updates", "messages", "tools", "lifecycle", "input", "checkpoints", "tasks"}
    | {"custom"}
)
"""The protocol's channels (besides ``custom:<name>``)."""

PROTOCOL_MODES: Final = ("values", "updates", "custom", "tools", TASKS, MESSAGES_V2)
"""The store modes a protocol run writes."""

INTERRUPT: Final = "__interrupt__"


def is_channel(value: object) -> bool:
    return isinstance(value, str) and (
        value in CHANNELS or (value.startswith("custom:") and len(value) > len("custom:"))
    )


def graph_of(entry: QueueEntry) -> str:
    """The graph a run ran (its request names it)."""
    try:
        return RunRequest.of(entry.input).graph or "root"
    except Exception:  # a run not made by the service: no request of ours
        return "root"


class Translator:
    """One connection's numbering and state over a thread's log (see the module)."""

    def __init__(self, serde: Any = None) -> None:
        self.serde = serde  # the savers': the log's events are sealed by it under encryption
        self.seq = 0
        self.started: set[int] = set()
        self.ended: set[int] = set()
        self.interrupted: set[int] = set()
        self.asked: set[str] = set()  # interrupt ids already sent
        self.subgraphs: dict[int, _Subgraphs] = {}  # a run's subgraph lifecycles

    # --- runs --------------------------------------------------------------------------------

    def start(self, entry: QueueEntry) -> list[dict[str, Any]]:
        if entry.entry_id in self.started:
            return []
        self.started.add(entry.entry_id)
        return [self._lifecycle("running", graph_of(entry))]

    def end(self, entry: QueueEntry) -> list[dict[str, Any]]:
        """The root's terminal lifecycle of a closed run (after its ``running``)."""
        if entry.entry_id in self.ended:
            return []
        out = self.start(entry)
        self.ended.add(entry.entry_id)
        outcome = entry.outcome
        graph = graph_of(entry)
        subgraphs = self.subgraphs.pop(entry.entry_id, None)
        if subgraphs is not None:  # the ones no task result closed end with the run
            failed = None if isinstance(outcome, Completed) else RuntimeError("the run ended")
            out += [self._event("lifecycle", n, d) for n, d in subgraphs.end(failed)]
        if isinstance(outcome, Completed):
            output = outcome.output if isinstance(outcome.output, dict) else {}
            interrupts = output.get("interrupts") or []
            if interrupts or output.get("next"):
                if entry.entry_id not in self.interrupted:
                    out += self._asked([], interrupts, entry)
                    if entry.entry_id not in self.interrupted:
                        self.interrupted.add(entry.entry_id)
                        out.append(self._lifecycle("interrupted", graph))
                return out
            out.append(self._lifecycle("completed", graph))
        elif isinstance(outcome, Failed):
            shown = client_error(outcome.error)  # never the traceback (SPEC §19.4, §25.4)
            out.append(
                self._lifecycle("failed", graph, error=f"{shown['error']}: {shown['message']}")
            )
        elif isinstance(outcome, Cancelled):
            out.append(self._lifecycle("failed", graph, error=f"cancelled ({outcome.reason})"))
        else:  # interrupted by a later run of the thread (multitask_strategy interrupt)
            out.append(self._lifecycle("failed", graph, error="interrupted by another run"))
        return out

    # --- events ------------------------------------------------------------------------------

    def event(self, entry: QueueEntry, event: Event) -> list[dict[str, Any]]:
        """The protocol events of one ``lg.*`` event of ``entry``'s run."""
        out = self.start(entry)
        mode = event.kind.removeprefix(EVENT_PREFIX)
        opened = open_payload(self.serde, event.payload)  # sealed under encryption (D289)
        payload = opened if isinstance(opened, dict) else {}
        data = payload.get("data")
        raw_ns = payload.get("ns")
        ns = [str(s) for s in raw_ns] if isinstance(raw_ns, list) else []
        if mode == "values":
            values = message_dict(data)
            if isinstance(values, dict) and INTERRUPT in values:
                out += self._asked(ns, values.pop(INTERRUPT), entry)
            if values:
                out.append(self._event("values", ns, values))
        elif mode == "updates" and isinstance(data, dict):
            for node, update in data.items():
                if node == INTERRUPT:
                    out += self._asked(ns, update, entry)
                elif update is not None:
                    values = message_dict(update)
                    if not isinstance(values, dict):
                        values = {"value": values}
                    out.append(self._event("updates", ns, values, node=node))
        elif mode == MESSAGES_V2 and isinstance(data, list) and len(data) == 2:
            if isinstance(data[0], dict):
                out.append(self._event("messages", ns, data[0]))
        elif mode == "tools" and isinstance(data, dict):
            tool = dict(data)
            node = tool.pop("__node", None)
            if "output" in tool:
                tool["output"] = message_dict(tool["output"])
            out.append(self._event("tools", ns, tool, node=node if isinstance(node, str) else None))
        elif mode == TASKS and isinstance(data, dict):
            subgraphs = self.subgraphs.setdefault(entry.entry_id, _Subgraphs())
            out += [self._event("lifecycle", n, d) for n, d in subgraphs.task(ns, data)]
        elif mode == "custom":
            chunk = message_dict(data)
            named = isinstance(chunk, dict) and isinstance(chunk.get("name"), str)
            out.append(self._event("custom", ns, chunk if named else {"payload": chunk}))
        return out

    def _asked(self, ns: list[str], interrupts: Any, entry: QueueEntry) -> list[dict[str, Any]]:
        """``input.requested`` for each interrupt not sent yet; the root's ``interrupted``."""
        out: list[dict[str, Any]] = []
        for item in interrupts if isinstance(interrupts, list) else []:
            interrupt_id = item.get("id") if isinstance(item, dict) else None
            if not isinstance(interrupt_id, str) or interrupt_id in self.asked:
                continue
            self.asked.add(interrupt_id)
            request = {"interrupt_id": interrupt_id, "payload": message_dict(item.get("value"))}
            out.append(self._event("input.requested", ns, request))
        if out and entry.entry_id not in self.interrupted:
            self.interrupted.add(entry.entry_id)
            out.append(self._lifecycle("interrupted", graph_of(entry)))
        return out

    # --- envelopes ---------------------------------------------------------------------------

    def _lifecycle(self, status: str, graph: str, *, error: str | None = None) -> dict[str, Any]:
        data: dict[str, Any] = {"event": status, "graph_name": graph}
        if error is not None:
            data["error"] = error
        return self._event("lifecycle", [], data)

    def _event(
        self, method: str, ns: list[str], data: Any, *, node: str | None = None
    ) -> dict[str, Any]:
        self.seq += 1
        params: dict[str, Any] = {
            "namespace": ns,
            "timestamp": int(time.time() * 1000),
            "data": data,
        }
        if node is not None:
            params["node"] = node
        return {
            "type": "event",
            "event_id": str(self.seq),
            "seq": self.seq,
            "method": method,
            "params": params,
        }


class _Subgraphs:
    """A run's subgraphs' lifecycles (``started``, then ``completed``/``failed``/``interrupted``
    for each namespace) from its task events, inferred by LangGraph's own `LifecycleTransformer`,
    as LangGraph Server infers them."""

    def __init__(self) -> None:
        self.found: list[dict[str, Any]] = []
        self.names: dict[tuple[str, ...], Any] = {}  # namespace -> its graph's name
        self.lifecycle = LifecycleTransformer()
        self.lifecycle.init()["lifecycle"]._wire(self.found.append)  # as LangGraph's mux wires it

    def task(self, ns: list[str], data: dict[str, Any]) -> list[tuple[list[str], Any]]:
        self.lifecycle.process(
            {"type": "event", "method": "tasks", "params": {"namespace": ns, "data": data}}  # type: ignore[typeddict-item]
        )
        return self._taken()

    def end(self, failed: Exception | None) -> list[tuple[list[str], Any]]:
        if failed is None:
            self.lifecycle.finalize()
        else:
            self.lifecycle.fail(failed)
        return self._taken()

    def _taken(self) -> list[tuple[list[str], Any]]:
        """The lifecycles found, as the reference sends them: ``started`` as LangGraph makes
        it; a terminal one with the graph's name instead of the namespace."""
        taken = []
        for payload in self.found:
            ns = list(payload.get("namespace") or [])
            data = dict(payload)
            if data["event"] == "started":
                self.names[tuple(ns)] = data.get("graph_name")
            else:
                del data["namespace"]
                if self.names.get(tuple(ns)):
                    data["graph_name"] = self.names[tuple(ns)]
            taken.append((ns, data))
        self.found.clear()
        return taken


class Filter:
    """A subscription: channels, namespace prefixes within ``depth``, events after ``since``."""

    def __init__(
        self,
        channels: Iterable[str],
        namespaces: Sequence[Sequence[str]] | None = None,
        depth: int | None = None,
        since: int | None = None,
    ) -> None:
        self.channels = set(channels)
        self.namespaces = [list(n) for n in namespaces] if namespaces else None
        self.depth = depth
        self.since = since

    def matches(self, event: Mapping[str, Any]) -> bool:
        if self.since is not None and event["seq"] <= self.since:
            return False
        if _channel(event) not in self.channels and not (
            event["method"] == "custom" and "custom" in self.channels
        ):
            return False
        if self.namespaces is None:
            return True
        ns = event["params"]["namespace"]
        for prefix in self.namespaces:
            if _prefixes(prefix, ns) and (
                self.depth is None or len(ns) - len(prefix) <= self.depth
            ):
                return True
        return False


def _channel(event: Mapping[str, Any]) -> str:
    method = str(event["method"])
    if method == "input.requested":
        return "input"
    if method == "custom":
        data = event["params"].get("data")
        name = data.get("name") if isinstance(data, dict) else None
        return f"custom:{name}" if isinstance(name, str) and name else "custom"
    return method


def _prefixes(prefix: list[str], ns: list[str]) -> bool:
    """``prefix`` starts ``ns``; a prefix segment without ``:`` matches a segment's name part
    (``tools`` matches ``tools:call-1``), as the protocol's namespaces match."""
    if len(prefix) > len(ns):
        return False
    for want, have in zip(prefix, ns, strict=False):
        if want != have and (":" in want or have.split(":")[0] != want):
            return False
    return True


__all__ = ["CHANNELS", "PROTOCOL_MODES", "Filter", "Translator", "graph_of", "is_channel"]
