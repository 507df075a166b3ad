"""A2A tasks over the service's runs (SPEC §25.2), as LangGraph Server keeps them: a task is
the run its first message made, ``{thread_id}:{run_id}`` (the thread its ``contextId``); the runs
that go on with it (a resume) carry its id in their metadata (``a2a.task_id``), and the first
message's run its ``a2a.task_start_id``, by which the context's messages are attributed. A task's
state is its latest run's, ``INPUT_REQUIRED`` when that run is the context's last and the thread
waits for input; its history the thread's messages as that run left them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from starlette.requests import Request

from durable_graph.core.errors import NotFound, ValidationError
from durable_graph.core.model import QueueEntry
from durable_graph.service import a2a_messages as msgs
from durable_graph.service.auth import authorize_action
from durable_graph.service.jsonrpc import INVALID_PARAMS, RpcError
from durable_graph.service.records import check_thread_id
from durable_graph.service.runs import Runs, final_values
from durable_graph.service.threads import Threads

MAX_HISTORY: Final = 10
"""``historyLength`` at most, as the reference."""
SCOPE_HEADER: Final = "LangGraph-A2A-History-Scope"
RUN_SCAN: Final = 1000
"""A context's runs read to find a task's, and threads a ``ListTasks`` reads, at most."""


@dataclass(frozen=True, slots=True)
class Task:
    """A task found: its latest run (``run``, as ``GET .../runs/{id}`` answers it) and state."""

    task_id: str
    context_id: str
    run: dict[str, Any]
    state: str
    task_ids: dict[str, str]


class Tasks:
    """Finding and listing an agent's tasks, readable by the request's user."""

    def __init__(self, threads: Threads, runs: Runs) -> None:
        self.threads = threads
        self.runs = runs

    async def readable(self, context_id: str) -> bool:
        """The thread is there for this user (its ``threads`` ``read`` asked)."""
        await authorize_action("threads", "read", {"thread_id": context_id})
        try:
            return await self.threads.exists(check_thread_id(context_id, "contextId"))
        except ValidationError:
            return False

    async def resolve(self, task_id: str, context_id: str | None, assistant_id: str) -> Task | None:
        """The task ``task_id`` names (its context ``context_id`` when the id has none), of this
        agent and readable by this user; its latest run (a resume's, say); None otherwise."""
        parsed, run_id = task_id.split(":", 1) if ":" in task_id else ("", task_id)
        if parsed and context_id and parsed != context_id:
            return None
        ctx = context_id or parsed
        if not ctx or not await self.readable(ctx):
            return None
        try:
            anchor = self.runs.json(await self.runs.entry(ctx, run_id))
        except (NotFound, ValidationError):
            return None
        stored = a2a_of(anchor).get("task_id")
        if anchor["assistant_id"] != assistant_id or (stored and stored != task_id):
            return None
        runs = _newest_first(await self.runs.list(ctx, RUN_SCAN, 0, None))
        latest, thread = anchor, None
        for run in runs:
            if run["assistant_id"] == assistant_id and (
                run["run_id"] == run_id or a2a_of(run).get("task_id") == task_id
            ):
                latest = run
                if run["run_id"] == runs[0]["run_id"]:  # the context's last: its thread tells
                    thread = await self.threads.get(ctx)
                break
        state = _task_state(latest, thread)
        return Task(task_id, ctx, latest, state, _start_ids(runs, ctx, assistant_id))

    async def task_ids(self, context_id: str, assistant_id: str) -> dict[str, str]:
        runs = await self.runs.list(context_id, RUN_SCAN, 0, None)
        return _start_ids(runs, context_id, assistant_id)

    async def waits_for_input(self, context_id: str) -> bool:
        try:
            thread = await self.threads.get(context_id)
        except (NotFound, ValidationError):
            return False
        return bool(thread["status"] == "interrupted")

    async def run_messages(self, task: Task) -> Any:
        return await self.messages_of(await self.runs.entry(task.context_id, task.run["run_id"]))

    async def messages_of(self, entry: QueueEntry) -> Any:
        """The thread's messages as the run left them (as they are now, while it goes on)."""
        if entry.closed:
            values = await final_values(entry, self.threads)
        else:
            values = (await self.threads.get(entry.thread_id))["values"]
        return values.get("messages") if isinstance(values, dict) else None

    async def list(
        self, request: Request, params: dict[str, Any], assistant_id: str
    ) -> dict[str, Any]:
        """This agent's tasks, newest first, over the contexts the user may read (one with
        ``contextId``): ``status``, ``statusTimestampAfter``, ``pageSize``, ``pageToken``."""
        size = params.get("pageSize")
        if size is not None and (
            isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= 100
        ):
            raise RpcError(INVALID_PARAMS, "pageSize must be an integer between 1 and 100.")
        length = history_length(params.get("historyLength"))
        scope = history_scope(params, request)
        state = params.get("status")
        state = msgs.STATES_SPEC_TO_V1.get(state, state) if isinstance(state, str) else state
        if state is not None and state not in msgs.STATES_V1_TO_SPEC:
            raise RpcError(INVALID_PARAMS, f"Invalid status value: '{state}'.")
        after = params.get("statusTimestampAfter")
        if after is not None and not _is_timestamp(after):
            refused = "statusTimestampAfter must be a valid ISO 8601 timestamp."
            raise RpcError(INVALID_PARAMS, refused)
        token = params.get("pageToken")
        if token is not None and not isinstance(token, str):
            raise RpcError(INVALID_PARAMS, "pageToken must be a string.")
        if token and not token.isdigit():
            raise RpcError(INVALID_PARAMS, "Invalid pageToken.")
        context_id = params.get("contextId")
        if context_id is not None and not isinstance(context_id, str):
            raise RpcError(INVALID_PARAMS, "contextId must be a string.")
        if context_id is not None:
            contexts = [context_id] if await self.readable(context_id) else []
        else:
            await authorize_action("threads", "search", {"limit": RUN_SCAN})
            found = await self.threads.search(None, None, None, RUN_SCAN, 0)
            contexts = [t["thread_id"] for t in found]
        tasks: dict[str, tuple[dict[str, Any], str, dict[str, str]]] = {}
        for ctx in contexts:
            thread = await self.threads.get(ctx)
            runs = _newest_first(await self.runs.list(ctx, RUN_SCAN, 0, None))
            ids = _start_ids(runs, ctx, assistant_id)
            for run in runs:
                if run["assistant_id"] != assistant_id or task_id_of(ctx, run) in tasks:
                    continue
                latest = run["run_id"] == runs[0]["run_id"]
                task_state = _task_state(run, thread if latest else None)
                if (state and task_state != state) or (after and run["updated_at"] < after):
                    continue
                task: dict[str, Any] = {"kind": "task", "id": task_id_of(ctx, run)}
                task["contextId"] = ctx
                task["status"] = {"state": task_state, "timestamp": run["updated_at"]}
                if not params.get("includeArtifacts", False):
                    task["artifacts"] = []
                tasks[task["id"]] = (task, run["run_id"], ids)
        ordered = sorted(tasks.values(), key=lambda t: t[0]["status"]["timestamp"], reverse=True)
        offset = int(token) if token else 0
        page = ordered[offset : offset + (size or 50)]
        if length != 0:
            for task, run_id, ids in page:
                entry = await self.runs.entry(task["contextId"], run_id)
                messages = await self.messages_of(entry)
                task["history"] = msgs.history(
                    messages, task["id"], task["contextId"], length, scope, ids
                )
        following = offset + len(page)
        return {
            "tasks": [task for task, _, _ in page],
            "totalSize": len(ordered),
            "pageSize": len(page),
            "nextPageToken": str(following) if following < len(ordered) else "",
        }


def history_length(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RpcError(INVALID_PARAMS, "historyLength must be a non-negative integer")
    if value > MAX_HISTORY:
        raise RpcError(INVALID_PARAMS, f"historyLength cannot exceed {MAX_HISTORY}")
    return value


def history_scope(options: dict[str, Any], request: Request) -> str:
    scope = options.get("historyScope")
    if scope is None:
        scope = request.headers.get(SCOPE_HEADER, "context")
    if scope not in ("context", "task"):
        raise RpcError(INVALID_PARAMS, "historyScope must be 'context' or 'task'")
    return str(scope)


def task_params(params: dict[str, Any]) -> tuple[str, str | None]:
    task_id, context_id = params.get("id"), params.get("contextId")
    if not task_id:
        raise RpcError(INVALID_PARAMS, "Missing required parameter: id (task_id)")
    if not isinstance(task_id, str) or (context_id is not None and not isinstance(context_id, str)):
        raise RpcError(INVALID_PARAMS, "Task id and contextId must be strings")
    return task_id, context_id


def a2a_of(run: dict[str, Any]) -> dict[str, Any]:
    metadata = run.get("metadata")
    found = metadata.get("a2a") if isinstance(metadata, dict) else None
    return found if isinstance(found, dict) else {}


def task_id_of(context_id: str, run: dict[str, Any]) -> str:
    stored = a2a_of(run).get("task_id")
    return stored if isinstance(stored, str) and stored else f"{context_id}:{run['run_id']}"


def _start_ids(runs: list[dict[str, Any]], context_id: str, assistant_id: str) -> dict[str, str]:
    """The context's tasks by the ``task_start_id`` of their first message."""
    return {
        a2a_of(run)["task_start_id"]: task_id_of(context_id, run)
        for run in runs
        if run["assistant_id"] == assistant_id and isinstance(a2a_of(run).get("task_start_id"), str)
    }


def _newest_first(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(runs, key=lambda r: (str(r["created_at"]), str(r["run_id"])), reverse=True)


def _task_state(run: dict[str, Any], thread: dict[str, Any] | None) -> str:
    """A run's task state; a finished run whose thread waits for input (the context's last
    run) is ``INPUT_REQUIRED``."""
    if run["status"] == "success" and thread is not None and thread["status"] == "interrupted":
        return "TASK_STATE_INPUT_REQUIRED"
    return msgs.RUN_STATES.get(run["status"], "TASK_STATE_SUBMITTED")


def _is_timestamp(value: object) -> bool:
    try:
        datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return False
    return isinstance(value, str)


__all__ = [
    "MAX_HISTORY",
    "SCOPE_HEADER",
    "Task",
    "Tasks",
    "a2a_of",
    "history_length",
    "history_scope",
    "task_id_of",
    "task_params",
]
