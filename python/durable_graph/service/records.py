"""How the store's rows look to a LangGraph SDK client (SPEC §14.6): ids, runs, threads, states.

Nothing here is stored by the service itself (it keeps no state of its own):

- a **run** is a queue entry: its id is the entry id written as a UUID (`run_id_of`,
  `entry_id_of`), its status is the entry's (`run_status`), its assistant, metadata and
  strategy are in the entry's input (the run request's ``service`` part);
- a **thread** is a store thread created by the service with a first, empty LangGraph checkpoint
  (metadata ``source: "dg.thread"``, hidden from states and history) and an effect
  ``langgraph.thread`` holding its metadata; its status comes from its open entries and state;
- an **assistant** is a graph of ``langgraph.json``; its id is a UUID derived from the graph name
  (`assistant_id_of`), and runs may name the graph itself, as with LangGraph's server.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final
from urllib.parse import quote

from durable_graph.core.errors import ValidationError
from durable_graph.core.model import (
    JSON,
    Cancelled,
    Completed,
    Failed,
    Interrupted,
    QueueEntry,
)
from durable_graph.langgraph.run_request import REQUEST_KEY
from durable_graph.langgraph.values import message_dict, to_json

RUN_PREFIX: Final = "00000000-0000-4000-8000-"
"""Run ids are entry ids in this UUID form, so any API process maps one to the other."""

ASSISTANT_NS: Final = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
THREAD_EFFECT: Final = "langgraph.thread"
GRAPH_EFFECT: Final = "langgraph.graph"
METADATA_UPDATE: Final = "langgraph.thread.metadata."
"""Effect keys of a thread's metadata updates, numbered (an effect is written once: each
``threads.update`` is one more key, merged over the creation's metadata in order)."""
THREAD_SOURCE: Final = "dg.thread"
"""``source`` of the service's first, empty checkpoint of a thread (hidden from clients)."""


MAX_THREAD_ID: Final = 512
_THREAD_ID: Final = re.compile(r"[\x20-\x7e]+")
_THREAD_ID_UNSAFE: Final = frozenset("/?#%\\")


def check_thread_id(value: object, name: str = "thread_id") -> str:
    """A thread id the service can answer for (D146): 1..512 printable ASCII characters, none of
    ``/ ? # % \\``, not ``.`` or ``..``. Others cannot travel in a path the SDK builds (a
    ``/`` never reaches the route, ``..`` is resolved away) or in the ``Location`` headers of a
    run (CR/LF, NUL, non-ASCII), so they are refused (422) before anything is written."""
    if not isinstance(value, str):
        raise ValidationError(f"{name}: must be a string")
    if (
        not _THREAD_ID.fullmatch(value)
        or len(value) > MAX_THREAD_ID
        or value in (".", "..")
        or not _THREAD_ID_UNSAFE.isdisjoint(value)
    ):
        raise ValidationError(
            f"{name}: {value[:80]!r} is not a thread id the service answers for: 1 to "
            f"{MAX_THREAD_ID} printable ASCII characters, none of / ? # % \\, not . or .."
        )
    return value


def run_path(thread_id: str, entry_id: int) -> str:
    """The path of a run, as its ``Location`` headers name it (the thread id percent-encoded)."""
    return f"/threads/{quote(thread_id, safe='')}/runs/{run_id_of(entry_id)}"


def run_id_of(entry_id: int) -> str:
    return f"{RUN_PREFIX}{entry_id:012x}"


def entry_id_of(run_id: str) -> int | None:
    if not run_id.startswith(RUN_PREFIX) or len(run_id) != len(RUN_PREFIX) + 12:
        return None
    try:
        return int(run_id[len(RUN_PREFIX) :], 16)
    except ValueError:
        return None


def assistant_id_of(graph: str) -> str:
    return str(uuid.uuid5(ASSISTANT_NS, graph))


def iso(when: datetime | None) -> str | None:
    return None if when is None else when.astimezone(UTC).isoformat()


def service_part(entry: QueueEntry) -> dict[str, Any]:
    """The service's record of a run in the entry's input (empty for other entries)."""
    body = entry.input.get(REQUEST_KEY) if isinstance(entry.input, dict) else None
    if not isinstance(body, dict):
        return {}
    part = body.get("service")
    return part if isinstance(part, dict) else {}


def request_part(entry: QueueEntry) -> dict[str, Any]:
    body = entry.input.get(REQUEST_KEY) if isinstance(entry.input, dict) else None
    return body if isinstance(body, dict) else {}


def interrupted_output(output: JSON) -> bool:
    return isinstance(output, dict) and bool(output.get("interrupts") or output.get("next"))


_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?:: (.*))?$")
_NOT_THE_EXCEPTION = ("Traceback (most recent call last):", "During handling of", "The above ")


def client_error(error: str) -> dict[str, str]:
    """What a client sees of a failed run (SPEC §19.4): the exception's type and message, as
    LangGraph's server sends them (``{"error": "ValueError", "message": "..."}``), never the
    traceback or a file path, which operators keep in the attempt record. ``error`` is the
    failure the worker recorded (`worker.flow.error_text`): a traceback whose last block, after
    its last indented line, is ``Type: message`` with every line of the message — unwrapped
    once when it is the worker's `FinalFailure` ("Type: message") — or "Type: message" alone."""
    lines = error.rstrip().splitlines()
    traceback = error.startswith((_NOT_THE_EXCEPTION[0], "…"))  # or its end (fitted)
    if traceback:
        lines = _last_block(lines)
    kind, message = _exception(lines)
    if kind is None:
        # Never the traceback itself, whatever its shape (SPEC §19.4).
        return {"error": "Error", "message": "the run failed" if traceback else error.strip()}
    if kind == "FinalFailure":
        inner, unwrapped = _exception(message.split("\n"))
        kind, message = (inner, unwrapped) if inner is not None else ("Error", message)
    return {"error": kind, "message": message}


def _last_block(lines: list[str]) -> list[str]:
    """A traceback's ``Type: message`` block: from the first unindented line after its last
    frame (a frame's source and caret lines are indented), to the end — so a message's own
    indented lines stay in it and no frame or path is ever part of it."""
    frames = [i for i, line in enumerate(lines) if line.lstrip("…").startswith("  File ")]
    start = frames[-1] + 1 if frames else 1
    while start < len(lines) and lines[start][:1].isspace():
        start += 1
    return lines[start:]


def _exception(lines: list[str]) -> tuple[str | None, str]:
    """``Type: message`` (the message's further lines included) as (type's name, message);
    (None, "") when the first line names no exception type."""
    found = _EXCEPTION_LINE.match(lines[0]) if lines else None
    kind = found.group(1).rsplit(".", 1)[-1] if found is not None else ""
    if found is None or not kind[:1].isupper():
        return None, ""
    return kind, "\n".join([found.group(2) or "", *lines[1:]]).strip()


def run_status(entry: QueueEntry, now: datetime) -> str:
    """LangGraph's run status: pending, running, success, error, interrupted."""
    outcome = entry.outcome
    if outcome is None:
        live = entry.lease_expires_at is not None and entry.lease_expires_at > now
        return "running" if live else "pending"
    if isinstance(outcome, Completed):
        return "success"
    if isinstance(outcome, Failed):
        return "error"
    if isinstance(outcome, (Cancelled, Interrupted)):
        return "interrupted"
    return "error"


def run_json(entry: QueueEntry, now: datetime) -> dict[str, Any]:
    part = service_part(entry)
    req = request_part(entry)
    updated = entry.closed_at or (entry.attempts[-1].started_at if entry.attempts else None)
    return {
        "run_id": run_id_of(entry.entry_id),
        "thread_id": entry.thread_id,
        "assistant_id": part.get("assistant_id"),
        "created_at": iso(entry.submitted_at),
        "updated_at": iso(updated or entry.submitted_at),
        "status": run_status(entry, now),
        "metadata": part.get("metadata") or {},
        "multitask_strategy": part.get("multitask_strategy", "enqueue"),
        "kwargs": {
            "input": req.get("input"),
            "command": req.get("command"),
            "config": req.get("config") or {},
            "stream_mode": req.get("stream_mode") or [],
            "interrupt_before": req.get("interrupt_before"),
            "interrupt_after": req.get("interrupt_after"),
            "checkpoint_id": req.get("checkpoint_id"),
        },
    }


def api_value(value: Any) -> JSON:
    """A graph value as the reference server sends it (messages as flat dicts)."""
    return message_dict(to_json(value, lenient=True))


def interrupt_json(interrupt: Any) -> dict[str, JSON]:
    return {"value": api_value(interrupt.value), "id": interrupt.id}


def checkpoint_ref(config: Any) -> dict[str, Any] | None:
    if not config:
        return None
    conf = config.get("configurable") or {}
    return {
        "thread_id": conf.get("thread_id"),
        "checkpoint_ns": conf.get("checkpoint_ns", ""),
        "checkpoint_id": conf.get("checkpoint_id"),
        "checkpoint_map": conf.get("checkpoint_map") or {},
    }


def state_json(snapshot: Any) -> dict[str, Any]:
    """A LangGraph ``StateSnapshot`` as the reference's ``ThreadState``."""
    tasks = []
    for task in snapshot.tasks:
        sub = task.state
        tasks.append(
            {
                "id": task.id,
                "name": task.name,
                "path": list(task.path) if task.path else [],
                "error": None if task.error is None else str(task.error),
                "interrupts": [interrupt_json(i) for i in task.interrupts],
                "checkpoint": (sub.get("configurable") if isinstance(sub, dict) else None),
                "state": state_json(sub) if sub is not None and not isinstance(sub, dict) else None,
                "result": api_value(task.result) if task.result is not None else None,
            }
        )
    metadata = dict(snapshot.metadata or {})
    parent = checkpoint_ref(snapshot.parent_config)
    if metadata.get("step") == -1:
        parent = None  # the service's own first checkpoint is not the client's
    return {
        "values": api_value(snapshot.values),
        "next": list(snapshot.next),
        "tasks": tasks,
        "checkpoint": checkpoint_ref(snapshot.config),
        "metadata": to_json(metadata, lenient=True),
        "created_at": snapshot.created_at,
        "parent_checkpoint": parent,
        "interrupts": [interrupt_json(i) for i in snapshot.interrupts],
    }


def empty_state(thread_id: str) -> dict[str, Any]:
    return {
        "values": {},
        "next": [],
        "tasks": [],
        "checkpoint": None,
        "metadata": {},
        "created_at": None,
        "parent_checkpoint": None,
        "interrupts": [],
    }


def object_field(body: Mapping[str, Any], name: str) -> dict[str, Any]:
    """``body[name]``: an object (``{}`` when absent), else `ValidationError` naming it."""
    value = body.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValidationError(f"{name}: must be an object")
    return value


def count_field(body: Mapping[str, Any], name: str, default: int, low: int) -> int:
    """``body[name]``: an integer at least ``low`` (``default`` when absent)."""
    value = body.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValidationError(f"{name}: an integer >= {low}")
    return value
