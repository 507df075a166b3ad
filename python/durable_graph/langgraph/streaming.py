"""A graph run's stream in the thread's event log (SPEC §14.5).

The handler asks LangGraph for the modes a submission names and writes each chunk as an event
of the thread (kind ``lg.<mode>``, payload ``{"data": <JSON>}`` plus ``"ns"`` for a subgraph's
chunk), fenced by the attempt's claim like every other write. Two paths, so that a reader sees
each event once even when a worker dies mid-run:

- **Step modes** (``values``, ``updates``, ``debug``) are taken from LangGraph's loop as it emits
  them (a stream protocol beside the caller's, LangGraph's own mechanism for subgraphs) and ride
  **in the transaction of the checkpoint they precede**: LangGraph emits a step's updates and
  values before it saves the step's checkpoint, and marks each checkpoint in the stream before
  the next step starts. So the events of a step commit with its checkpoint or not at all: a
  retried attempt resumes from the last checkpoint and emits the lost step again, and nothing
  is doubled. Chunks emitted after the last checkpoint (an interrupt's ``__interrupt__``
  update) are appended when the graph returns.
- **Live modes** (``messages`` tokens, ``custom``, ``tools``) are appended as they come, at most
  one transaction per `STREAM_INTERVAL`, and the rest when the graph returns. Each token is an
  event of its own (so a client gets one ``messages/partial`` a token, as from LangGraph's
  server), carrying only its own text; its message's metadata rides on the message's first
  token only (a reader keeps it per message id). The log keeps the order in which the graph
  emitted its chunks: a live event that came after a step event still waiting for its
  checkpoint (LangGraph saves checkpoints in the background) waits for that commit, and those
  that came before a checkpoint's step events ride with it. A worker that dies mid-step may
  have appended tokens of that step; the next attempt streams the step again under its own run
  id (every event carries it), so a reader can drop a superseded attempt's partial message.

``messages-v2`` asks LangGraph for its protocol-shaped messages (`StreamMessagesHandlerV2`:
``message-start``, ``content-block-delta``... dicts, what LangGraph's streaming protocol carries,
SPEC §20.2): the graph is streamed with ``version="v2"`` and each event is kept as it is, one
event each (still appended at most once per interval); LangGraph's whole-message tuples of that
stream are left out, as LangGraph Server leaves them out of the protocol.

``events`` is LangChain's ``astream_events`` (version ``"v2"``), as LangGraph Server streams it:
the graph is run with ``astream_events`` instead of ``astream``; the root run's
``on_chain_stream`` events carry ``astream``'s own items (handled as above), and every other
event (``on_chain_start``, ``on_chat_model_stream``, ... but those tagged ``langsmith:hidden``)
is a live event of its own, kind ``lg.events``. The sync handler cannot run it (LangGraph has
no sync ``stream_events``): there ``events`` fails the run.

Under ``langgraph.json``'s ``encryption`` (D289) each event's ``data`` leaves the outbox sealed
by the saver's serializer (`seal_event`: ``{"data": {"t": "msgpack+sdk", "b": ...}, "sealed":
true}``, its ``ns`` plain), and readers open it with the same (`open_payload`): the log holds no
plaintext of the run either.

The run's end is the entry's close: `QueueEntry.closed_at_seq` is the thread's last event number
then, so a reader that has seen that number has seen the whole stream.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from langgraph._internal._constants import CONFIG_KEY_STREAM_MESSAGES_V2

from durable_graph.core.errors import ValidationError
from durable_graph.core.model import JSON, EventIn
from durable_graph.langgraph import codec
from durable_graph.langgraph.encryption import SealingSerializer
from durable_graph.langgraph.values import to_json

STREAM_INTERVAL: Final = 0.1
"""Seconds between two live stream transactions of one run (tokens, custom chunks)."""

EVENT_PREFIX: Final = "lg."
"""Kind prefix of a graph run's stream events: ``lg.values``, ``lg.messages``..."""

STEP_MODES: Final = frozenset({"values", "updates", "debug"})
MESSAGES_V2: Final = "messages-v2"
"""The store mode of LangGraph's protocol-shaped message events (see the module)."""
TASKS: Final = "tasks"
"""LangGraph's task events: written live, each reduced to `task_identity`."""
EVENTS: Final = "events"
"""``astream_events``' events (see the module)."""
LIVE_MODES: Final = frozenset({"messages", "custom", "tools", TASKS, MESSAGES_V2, EVENTS})
STREAM_MODES: Final = STEP_MODES | LIVE_MODES


def check_stream_modes(modes: object) -> tuple[str, ...]:
    """The stream modes of a submission (a mode or a list of them), checked."""
    if modes is None:
        return ()
    return tuple(listed_modes(modes, STREAM_MODES))


def listed_modes(modes: object, served: Collection[str]) -> list[str]:
    """``modes`` (a mode or a list of them) as a list without repeats, each one of ``served``
    (`ValidationError` otherwise): the check of a submission's and of the service's."""
    listed = [modes] if isinstance(modes, str) else modes
    if not isinstance(listed, list) or not all(isinstance(m, str) for m in listed):
        raise ValidationError("stream_mode: must be a mode or a list of modes")
    for mode in listed:
        if mode not in served:
            raise ValidationError(
                f"stream_mode: {mode!r} is not one of {', '.join(sorted(served))}"
            )
    return list(dict.fromkeys(listed))


def event_of(ns: Sequence[str], mode: str, data: Any) -> EventIn:
    payload: dict[str, JSON] = {"data": to_json(data, lenient=True)}
    if ns:
        payload["ns"] = list(ns)
    return EventIn(f"{EVENT_PREFIX}{mode}", payload)


SEALED: Final = "sealed"
"""Payload key of an event whose ``data`` is sealed (see the module)."""


def seal_event(serde: Any, event: EventIn) -> EventIn:
    """``event`` with its ``data`` sealed by ``serde`` when that is ``encryption``'s serializer
    with blob handlers (else, or when sealed already, as it is)."""
    payload = event.payload
    if not (isinstance(serde, SealingSerializer) and serde.seals_blobs):
        return event
    if not isinstance(payload, dict) or payload.get(SEALED):
        return event
    sealed: dict[str, JSON] = {**payload, "data": codec.encode(serde, payload.get("data"))}
    sealed[SEALED] = True
    return EventIn(event.kind, sealed, event.created_at)


def open_payload(serde: Any, payload: JSON) -> JSON:
    """An event's payload as it was written: a sealed ``data`` opened with ``serde``."""
    if not (isinstance(payload, dict) and payload.get(SEALED)):
        return payload
    stored = payload.get("data")
    if not isinstance(stored, dict):
        raise ValidationError("stored event: sealed data is not a sealed value")
    data: JSON = codec.decode(serde, stored)
    return {**{k: v for k, v in payload.items() if k != SEALED}, "data": data}


def task_identity(data: Any) -> Any:
    """What a task event keeps (what LangGraph's lifecycle inference reads, D195): the task's id,
    name and triggers, its agent's name, the id of the tool call it runs; a result's error and
    interrupts, and that it is one. Not its input, writes or state: those are the checkpoints'."""
    if not isinstance(data, dict):
        return data
    kept = {k: data[k] for k in ("id", "name", "triggers") if k in data}
    metadata = data.get("metadata")
    if isinstance(metadata, dict) and "lc_agent_name" in metadata:
        kept["metadata"] = {"lc_agent_name": metadata["lc_agent_name"]}
    given = data.get("input")
    if isinstance(given, dict) and isinstance(given.get("tool_call"), dict):
        kept["input"] = {"tool_call": {"id": given["tool_call"].get("id")}}
    elif isinstance(given, list):
        calls = [c for c in given if isinstance(c, dict) and isinstance(c.get("id"), str)]
        kept["input"] = [{"id": c["id"]} for c in calls[:1]]
    if "result" in data:
        kept["result"] = {}
        kept.update({k: data[k] for k in ("error", "interrupts") if data.get(k)})
    return kept


@dataclass
class _Token:
    ns: tuple[str, ...]
    chunk: Any
    metadata: Any


@dataclass
class Outbox:
    """One attempt's stream on its way to the event log (see the module docstring)."""

    modes: tuple[str, ...]
    subgraphs: bool = False
    interval: float = STREAM_INTERVAL
    clock: Callable[[], float] = time.monotonic
    resumed: bool = False
    """A retried attempt from a checkpoint whose values the stream already carried: LangGraph
    opens a resumed run's stream with that state, and that first root ``values`` chunk is not
    written again."""
    nested_from_stream: bool = False
    """A subgraph's step chunks come from the caller's iteration, not the loop: LangGraph's
    ``astream`` gives a subgraph the caller's queue as its stream, where ``stream`` gives it the
    loop's own (which carries them to the protocol the handler installs). They then ride with
    the root checkpoint committed after they are read, in the order they were read."""
    serde: Any = None
    """The saver's serializer: events leave sealed by it under ``encryption`` (`seal_event`)."""
    _step: list[tuple[int, EventIn]] = field(default_factory=list)
    _marks: dict[str, int] = field(default_factory=dict)
    _live: list[tuple[int, EventIn | _Token]] = field(default_factory=list)
    _count: int = 0
    """Events taken so far, both paths: each keeps its number, the order the graph emitted
    them in, which the log keeps."""
    _last_flush: float = 0.0
    _announced: set[str] = field(default_factory=set)
    """Message ids whose metadata went out with their first token."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def v2(self) -> bool:
        return MESSAGES_V2 in self.modes

    @property
    def events(self) -> bool:
        """Whether the graph runs with ``astream_events`` (`from_event` takes its items)."""
        return EVENTS in self.modes

    def stream_kwargs(self) -> dict[str, Any]:
        """What to ask of ``stream``/``astream`` for the live modes (the step modes come from
        the loop)."""
        asked = ["custom", *(m for m in ("messages", "tools", TASKS) if m in self.modes)]
        if self.nested_from_stream and self.subgraphs:
            asked += sorted(STEP_MODES & set(self.modes))
        if self.v2:
            return {"stream_mode": [*asked, "messages"], "version": "v2"}
        return {"stream_mode": asked}

    def configurable(self) -> dict[str, Any]:
        """What the run's ``configurable`` needs for the live modes (LangGraph's v2 messages
        handler is switched on there)."""
        return {CONFIG_KEY_STREAM_MESSAGES_V2: True} if self.v2 else {}

    @property
    def step_modes(self) -> set[str]:
        """What to ask of LangGraph's loop (``checkpoints`` marks the step boundaries)."""
        return {m for m in self.modes if m in STEP_MODES} | {"checkpoints"}

    # --- step modes: from LangGraph's loop, committed with the checkpoints -------------------

    def from_loop(self, chunk: tuple[tuple[str, ...], str, Any]) -> None:
        """LangGraph's stream protocol callback (called as the loop emits, in its threads)."""
        ns, mode, data = chunk
        if ns and (not self.subgraphs or self.nested_from_stream):
            return
        with self._lock:
            if mode == "checkpoints":
                if not ns:
                    checkpoint_id = ((data or {}).get("config") or {}).get("configurable", {})
                    cid = checkpoint_id.get("checkpoint_id")
                    if isinstance(cid, str) and cid not in self._marks:
                        self._marks[cid] = len(self._step)
                return
            if self.resumed and not ns and mode in ("values", "updates"):
                self.resumed = False
                if mode == "values":
                    return
            if mode in self.modes:
                self._step.append((self._next(), event_of(ns, mode, data)))

    def _next(self) -> int:
        self._count += 1
        return self._count

    def for_checkpoint(self, checkpoint_id: str) -> list[EventIn]:
        """The events that ride with this root checkpoint's commit (taken once): its step
        events, and the live events held back for them, in the order they came."""
        with self._lock:
            upto = self._marks.pop(checkpoint_id, len(self._step))
            taken, self._step = self._step[:upto], self._step[upto:]
            self._marks = {k: max(0, v - upto) for k, v in self._marks.items()}
            if checkpoint_id not in self._marks:
                self._marks[checkpoint_id] = 0  # its mark, if it comes later, marks nothing
            out = [e for _, e in sorted(taken + self._take_live(), key=lambda n: n[0])]
            return [seal_event(self.serde, e) for e in out]

    # --- live modes: from the caller's iteration, coalesced ----------------------------------

    def from_stream(self, item: Any) -> None:
        """One item of ``graph.stream(..., stream_mode=[...], subgraphs=True)`` (a ``(ns, mode,
        data)`` tuple, or with ``version="v2"`` a ``{"type", "ns", "data"}`` dict)."""
        data: Any
        ns, mode, data = (
            (item.get("ns") or (), item.get("type"), item.get("data"))
            if isinstance(item, dict)
            else item
        )
        ns = tuple(ns)
        with self._lock:  # the sync handler's checkpoints take live events in another thread
            self._from_stream(ns, mode, data)

    def from_event(self, event: Any) -> None:
        """One event of ``graph.astream_events(..., version="v2")``: the root run's
        ``on_chain_stream`` is an item of ``astream`` (`from_stream`); any other, an ``events``
        event as it is, but those LangChain hides from tracing (a conditional edge's)."""
        if not isinstance(event, dict):
            return
        if event.get("event") == "on_chain_stream" and not event.get("parent_ids"):
            chunk = (event.get("data") or {}).get("chunk")
            if isinstance(chunk, tuple | dict):
                self.from_stream(chunk)
            return
        if "langsmith:hidden" in (event.get("tags") or ()):
            return
        with self._lock:
            self._live.append((self._next(), event_of((), EVENTS, event)))

    def _from_stream(self, ns: tuple[str, ...], mode: Any, data: Any) -> None:
        if mode == "messages" and self.v2:
            event, metadata = data if isinstance(data, tuple) and len(data) == 2 else (None, None)
            protocol = isinstance(event, dict) and isinstance(event.get("event"), str)
            if protocol and (not ns or self.subgraphs):
                self._live.append((self._next(), event_of(ns, MESSAGES_V2, [event, metadata])))
            return
        if ns and self.subgraphs and self.nested_from_stream and mode in STEP_MODES:
            if mode in self.modes:
                self._step.append((self._next(), event_of(ns, mode, data)))
            return
        if (ns and not self.subgraphs) or mode not in self.modes or mode not in LIVE_MODES:
            return
        if mode == TASKS:  # from the iteration, as a nested graph's reach only it
            self._live.append((self._next(), event_of(ns, TASKS, task_identity(data))))
            return
        if mode == "messages":
            chunk, metadata = data
            key = getattr(chunk, "id", None)
            if key is not None and key in self._announced:
                metadata = None  # carried by the message's first token
            elif key is not None:
                self._announced.add(key)
            self._live.append((self._next(), _Token(ns, chunk, metadata)))
        else:
            self._live.append((self._next(), event_of(ns, mode, data)))

    def live_due(self) -> bool:
        with self._lock:
            ready = bool(self._live) and self._live[0][0] < self._held_from()
        return ready and self.clock() - self._last_flush >= self.interval

    def take_live(self) -> list[EventIn]:
        """The live events that may be appended now: those that came before every step event
        still waiting for its checkpoint (a later one waits for that commit)."""
        with self._lock:
            return [seal_event(self.serde, e) for _, e in self._take_live()]

    def _held_from(self) -> float:
        return self._step[0][0] if self._step else math.inf

    def _take_live(self) -> list[tuple[int, EventIn]]:
        bound = self._held_from()
        due = [(n, e) for n, e in self._live if n < bound]
        self._live = [(n, e) for n, e in self._live if n >= bound]
        self._last_flush = self.clock()
        return [
            (n, event_of(e.ns, "messages", [e.chunk, e.metadata]) if isinstance(e, _Token) else e)
            for n, e in due
        ]

    def put_back(self, events: list[EventIn]) -> None:
        """Live events that could not be appended yet (a thread's log exists from its first
        commit on): they go out with the next flush, before anything newer."""
        with self._lock:
            self._live[:0] = [(0, e) for e in events]

    def take_rest(self) -> list[EventIn]:
        """What is left when the graph returns, in the order it came (an interrupt's update
        after the tokens and custom chunks of its step)."""
        with self._lock:
            rest = self._step + self._live
            self._step, self._live = [], []
        out = sorted(rest, key=lambda n: n[0])
        return [
            seal_event(
                self.serde,
                event_of(e.ns, "messages", [e.chunk, e.metadata]) if isinstance(e, _Token) else e,
            )
            for _, e in out
        ]
