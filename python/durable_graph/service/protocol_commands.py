"""``POST /threads/{thread_id}/commands``: the streaming protocol's commands (SPEC §20.2).

A command is ``{"id": int, "method": str, "params": {...}}``; the answer ``{"type": "success",
"id", "result"}`` or ``{"type": "error", "id", "error": code, "message"}`` (HTTP 200, as
LangGraph Server answers: the SDK reads the envelope). Served:

- ``run.start`` ``{assistant_id, input, config?, metadata?, multitaskStrategy?, force_resume?}``
  -> ``{"run_id"}``: a run of the thread (created if new) through `Runs.create`, as every run
  of the service, with the store modes of the protocol (`PROTOCOL_MODES`) and its subgraphs'
  events; a fork's checkpoint comes as ``config.configurable.checkpoint_id``. On a thread
  waiting at an interrupt (or with ``force_resume``), the input is the interrupt's answer: the
  run resumes with ``Command(resume=input)``, as the reference decides.
- ``input.respond`` ``{interrupt_id, response, namespace?}`` or ``{responses: [...]}``, with
  ``update`` / ``goto`` / ``config`` / ``metadata`` -> ``{}``: each interrupt must be one the
  thread waits at (``no_such_interrupt`` otherwise; while the thread is still busy finishing the
  run that asked, it is waited for up to `SETTLE`), then one run resumes them all
  (``Command(resume={interrupt_id: response, ...})``) with the thread's graph.

Not served: ``subscription.*`` (their transport is the WebSocket, not served: an HTTP stream
carries its filter in its request), ``agent.getTree``, ``input.inject``, ``state.*`` — answered
501 with the error ``not_supported``; a method the protocol does not have: ``unknown_command``.
A body without an integer ``id`` and a string ``method``: 400 ``invalid_argument``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Final

from durable_graph.core.errors import NotFound, StoreError, ThreadBusy, ValidationError
from durable_graph.service.protocol_events import PROTOCOL_MODES
from durable_graph.service.records import run_id_of
from durable_graph.service.runs import Runs
from durable_graph.service.threads import Threads

NOT_SERVED: Final = frozenset(
    {
        "subscription.subscribe",
        "subscription.unsubscribe",
        "subscription.reconnect",
        "agent.getTree",
        "input.inject",
        "state.get",
        "state.listCheckpoints",
        "state.fork",
    }
)
STRATEGIES: Final = ("reject", "enqueue", "interrupt", "rollback")
SETTLE: Final = 5.0
"""Seconds an ``input.respond`` waits for the run that asked to have finished."""
SETTLE_EVERY: Final = 0.05


class CommandError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class Commands:
    def __init__(self, threads: Threads, runs: Runs) -> None:
        self.threads = threads
        self.runs = runs

    async def handle(self, thread_id: str, command: object) -> tuple[int, dict[str, Any]]:
        """The HTTP status and the answer to ``command``."""
        if (
            not isinstance(command, dict)
            or isinstance(command.get("id"), bool)
            or not isinstance(command.get("id"), int)
            or not isinstance(command.get("method"), str)
        ):
            cid = command.get("id") if isinstance(command, dict) else None
            message = "a command is {id: integer, method: string, params: object}"
            return 400, _error(cid if isinstance(cid, int) else None, "invalid_argument", message)
        cid, method = command["id"], command["method"]
        params = command.get("params") or {}
        if not isinstance(params, dict):
            return 200, _error(cid, "invalid_argument", "params: must be an object")
        if method in NOT_SERVED:
            return 501, _error(cid, "not_supported", f"{method} is not served over HTTP here")
        try:
            if method == "run.start":
                result = await self.run_start(thread_id, params)
            elif method == "input.respond":
                result = await self.input_respond(thread_id, params)
            else:
                raise CommandError("unknown_command", f"unknown protocol command: {method}")
        except CommandError as exc:
            return 200, _error(cid, exc.code, str(exc))
        except ValidationError as exc:
            return 200, _error(cid, "invalid_argument", str(exc))
        except NotFound as exc:
            return 200, _error(cid, "no_such_run", str(exc))
        except ThreadBusy as exc:
            return 200, _error(cid, "unknown_error", str(exc) or "the thread is busy")
        return 200, {"type": "success", "id": cid, "result": result}

    # --- run.start ---------------------------------------------------------------------------

    async def run_start(self, thread_id: str, params: Mapping[str, Any]) -> dict[str, Any]:
        assistant_id = params.get("assistant_id")
        if not isinstance(assistant_id, str) or not assistant_id:
            raise ValidationError("assistant_id: required, a string")
        body = _run_body(params)
        body["assistant_id"] = assistant_id
        body["input"] = params.get("input")
        body["if_not_exists"] = "create"
        # As the reference: an input to a thread waiting at an interrupt (or ``force_resume``)
        # is the answer to it, resumed; RemoteGraph's v3 stream sends a resume so.
        if body["input"] is not None and (
            params.get("force_resume") or await self._waits_for_input(thread_id)
        ):
            body["command"], body["input"] = {"resume": body["input"]}, None
        config = body.get("config")
        configurable = config.get("configurable") if isinstance(config, dict) else None
        if isinstance(configurable, dict) and configurable.get("checkpoint_id") is not None:
            body["checkpoint_id"] = configurable["checkpoint_id"]  # a fork
        entry = await self.runs.create(thread_id, body, modes=PROTOCOL_MODES)
        return {"run_id": run_id_of(entry.entry_id)}

    # --- input.respond -----------------------------------------------------------------------

    async def input_respond(self, thread_id: str, params: Mapping[str, Any]) -> dict[str, Any]:
        answers = _answers(params)
        waiting = await self._interrupts(thread_id)
        for interrupt_id in answers:
            if interrupt_id not in waiting:
                raise CommandError(
                    "no_such_interrupt", f"unknown or already answered interrupt: {interrupt_id}"
                )
        command: dict[str, Any] = {"resume": answers}
        for key in ("update", "goto"):
            if params.get(key) is not None:
                command[key] = params[key]
        body = _run_body(params)
        body["assistant_id"] = await self.threads.graph_name(thread_id)
        body["command"] = command
        await self.runs.create(thread_id, body, modes=PROTOCOL_MODES)
        return {}

    async def _waits_for_input(self, thread_id: str) -> bool:
        try:
            return bool(await self._interrupts(thread_id))
        except NotFound:  # a new thread: nothing waits
            return False

    async def _interrupts(self, thread_id: str) -> set[str]:
        """The ids of the interrupts the thread waits at; while the run that asked is still
        finishing (the client saw its question first), waited for up to `SETTLE`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SETTLE
        while True:
            try:
                thread = await self.threads.get(thread_id)
            except StoreError:
                raise
            except Exception as exc:  # a state LangGraph cannot rebuild
                raise CommandError("unknown_error", f"the thread's state: {exc}") from exc
            ids = {
                i["id"]
                for pending in (thread.get("interrupts") or {}).values()
                for i in pending
                if isinstance(i, dict) and isinstance(i.get("id"), str)
            }
            if ids or thread.get("status") != "busy" or loop.time() >= deadline:
                return ids
            await asyncio.sleep(SETTLE_EVERY)


def _run_body(params: Mapping[str, Any]) -> dict[str, Any]:
    """The run arguments a command shares with the REST API's runs (checked by `Runs`)."""
    strategy = params.get("multitaskStrategy") or params.get("multitask_strategy") or "enqueue"
    if strategy not in STRATEGIES:
        raise ValidationError(f"multitaskStrategy: one of {', '.join(STRATEGIES)}")
    return {
        "config": params.get("config"),
        "metadata": params.get("metadata"),
        "multitask_strategy": strategy,
        "stream_subgraphs": True,
    }


def _answers(params: Mapping[str, Any]) -> dict[str, Any]:
    """``{interrupt_id: response}`` of an ``input.respond`` (one answer or ``responses``)."""
    many = params.get("responses")
    if many is not None:
        if not isinstance(many, list) or not many:
            raise ValidationError("responses: a non-empty list of {interrupt_id, response}")
        items = many
    else:
        items = [params]
    answers: dict[str, Any] = {}
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("interrupt_id"), str):
            raise ValidationError("interrupt_id: required, a string")
        namespace = item.get("namespace", [])
        if not isinstance(namespace, list) or not all(isinstance(s, str) for s in namespace):
            raise ValidationError("namespace: a list of strings")
        answers[item["interrupt_id"]] = item.get("response")
    return answers


def _error(cid: int | None, code: str, message: str) -> dict[str, Any]:
    return {"type": "error", "id": cid, "error": code, "message": message}


__all__ = ["Commands"]
