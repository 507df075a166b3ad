"""What ``/a2a/{assistant_id}`` makes of A2A messages and of a graph's messages (SPEC §25.2), as
LangGraph Server makes it: an A2A message's parts become the run's input (text parts human
messages, file parts content blocks, data parts keys of the input); the graph's messages become
the task's history and its answer (public human and AI prose as text parts, a tool's result as a
data part, system prompts and tools' prose never shown), interrupts an ``Interrupt`` artifact.

Messages carry their task in ``additional_kwargs.a2a``: the first message of a new task its
``task_start_id`` (the task's id is the run's, known only once the run is made), a message sent
to a task its ``task_id``; a history is attributed by these marks (`history`).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, Final, Literal

ROLES_V1_TO_SPEC: Final = {"ROLE_USER": "user", "ROLE_AGENT": "agent"}
STATES_V1_TO_SPEC: Final = {
    "TASK_STATE_SUBMITTED": "submitted",
    "TASK_STATE_WORKING": "working",
    "TASK_STATE_COMPLETED": "completed",
    "TASK_STATE_FAILED": "failed",
    "TASK_STATE_CANCELED": "canceled",
    "TASK_STATE_INPUT_REQUIRED": "input-required",
    "TASK_STATE_REJECTED": "rejected",
    "TASK_STATE_AUTH_REQUIRED": "auth-required",
}
"""A2A 1.0's enumerations and the names of the spec's ``message/send`` generation (0.x)."""
STATES_SPEC_TO_V1: Final = {v: k for k, v in STATES_V1_TO_SPEC.items()}
TERMINAL_STATES: Final = frozenset(
    {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}
)
RUN_STATES: Final = {
    "pending": "TASK_STATE_SUBMITTED",
    "running": "TASK_STATE_WORKING",
    "success": "TASK_STATE_COMPLETED",
    "interrupted": "TASK_STATE_CANCELED",  # a cancelled run; an interrupt() ends in success
    "error": "TASK_STATE_FAILED",
    "timeout": "TASK_STATE_FAILED",
}
A2UI_MIME_TYPES: Final = frozenset({"application/json+a2ui", "application/a2ui+json"})
_USER_TYPES: Final = {"human", "humanmessage", "humanmessagechunk"}
_AGENT_TYPES: Final = {"ai", "aimessage", "aimessagechunk"}
_ROLE_TYPES: Final = {"chat", "chatmessage", "chatmessagechunk"}
_MEDIA_BLOCKS: Final = {"audio", "file", "image", "video"}


class PartsRefused(ValueError):
    """The message's parts cannot be a run's input (``-32005``, content type not supported)."""


def to_spec(data: Any) -> Any:
    """An answer in the names of the spec's slash methods (``message/send``...): lower-case
    roles and states, a ``{"task": ...}`` result unwrapped, as the reference answers them."""
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for key, value in data.items():
            if key == "role" and isinstance(value, str):
                out[key] = ROLES_V1_TO_SPEC.get(value, value)
            elif key == "state" and isinstance(value, str):
                out[key] = STATES_V1_TO_SPEC.get(value, value)
            elif key == "result" and isinstance(value, dict) and list(value) == ["task"]:
                out[key] = to_spec(value["task"])
            else:
                out[key] = to_spec(value)
        return out
    if isinstance(data, list):
        return [to_spec(item) for item in data]
    return data


def now() -> str:
    return datetime.now(UTC).isoformat()


def new_id() -> str:
    return str(uuid.uuid4())


# --- an A2A message -> the run's input ----------------------------------------------------------


def is_a2ui(part: object) -> bool:
    metadata = part.get("metadata") if isinstance(part, dict) else None
    return isinstance(metadata, dict) and metadata.get("mimeType") in A2UI_MIME_TYPES


def run_input(parts: list[Any], role: str, message_id: str, mark: dict[str, str]) -> dict[str, Any]:
    """The run's input of a message's ``parts``: text parts each a message (all in one message
    of content blocks when a file part is there), data parts merged into the input; ``mark``
    (the task, `module doc`) on each message. `PartsRefused` for a part that is none of these."""
    messages: list[dict[str, Any]] = []
    data: dict[str, Any] = {}
    blocks: list[dict[str, Any]] = []
    with_blocks = any(isinstance(p, dict) and "file" in p for p in parts)
    graph_role = "human" if role in ("ROLE_USER", "user") else "assistant"
    for part in parts:
        if not isinstance(part, dict):
            raise PartsRefused(
                "Each message part must be an object. "
                "A2A agents support 'text', 'data', and 'file' parts only."
            )
        present = [k for k in ("text", "file", "data") if k in part]
        if len(present) > 1:
            raise PartsRefused(
                "Each message part must contain exactly one of 'text', 'file', or 'data'. "
                f"Got multiple: {present}."
            )
        if "text" in part:
            if with_blocks:
                blocks.append({"type": "text", "text": part["text"]})
            else:
                messages.append({"role": graph_role, "content": part["text"], "id": message_id})
        elif "file" in part:
            blocks.append(_file_block(part["file"]))
        elif "data" in part:
            if not isinstance(part["data"], dict):
                raise PartsRefused("DataPart must contain a JSON object in the 'data' field")
            data.update(part["data"])
        else:
            raise PartsRefused(
                "Unsupported part type. A2A agents support 'text', 'data', and 'file' parts only."
            )
    if blocks:
        messages.append({"role": graph_role, "content": blocks, "id": message_id})
    for message in messages:
        message["additional_kwargs"] = {"a2a": dict(mark)}
    if not messages and not data:
        raise PartsRefused("Message must contain at least one valid text, data, or file part")
    return {**({"messages": messages} if messages else {}), **data}


def _file_block(file: object) -> dict[str, Any]:
    """A file part as a LangChain content block (a URI is passed on, never fetched here)."""
    if not isinstance(file, dict):
        raise PartsRefused("FilePart must contain a 'file' object with 'bytes' or 'uri'.")
    data, uri = file.get("bytes"), file.get("uri")
    if (data is None) == (uri is None):
        raise PartsRefused("FilePart 'file' must contain exactly one of 'bytes' or 'uri'.")
    mime = file.get("mimeType")
    top = mime.split("/", 1)[0].strip().lower() if isinstance(mime, str) else ""
    block: dict[str, Any] = {"type": top if top in ("image", "audio", "video") else "file"}
    block.update({"base64": data} if data is not None else {"url": uri})
    if mime:
        block["mime_type"] = mime
    if file.get("name"):
        block["extras"] = {"filename": file["name"]}
    return block


def text_of_parts(parts: list[Any]) -> str | None:
    """The message's text parts, a line each (None without any): a resume's value."""
    texts = [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return "\n".join(texts) if texts else None


def resume_of_parts(parts: list[Any]) -> tuple[bool, Any]:
    """(found, value) of a data part's ``resume``; ``ValueError`` when two parts carry one."""
    values = [
        p["data"]["resume"]
        for p in parts
        if isinstance(p, dict) and isinstance(p.get("data"), dict) and "resume" in p["data"]
    ]
    if len(values) > 1:
        raise ValueError("Only one resume value is allowed in data parts")
    return (True, values[0]) if values else (False, None)


# --- the graph's messages -> A2A -------------------------------------------------------------------


def a2a_role(message: dict[str, Any]) -> Literal["ROLE_AGENT", "ROLE_USER"] | None:
    """The A2A role of a public LangChain message; None for the rest (system, tool...)."""

    def label(value: object) -> str:
        return value.lower().replace("_", "").replace("-", "") if isinstance(value, str) else ""

    kind, role = label(message.get("type")), label(message.get("role"))
    by_type = by_role = None
    if kind:
        if kind in _USER_TYPES:
            by_type = "ROLE_USER"
        elif kind in _AGENT_TYPES:
            by_type = "ROLE_AGENT"
        elif kind not in _ROLE_TYPES:
            return None
    if role:
        if role in ("human", "user"):
            by_role = "ROLE_USER"
        elif role in ("agent", "assistant"):
            by_role = "ROLE_AGENT"
        else:
            return None
    if by_type is not None and by_role is not None and by_type != by_role:
        return None
    found = by_type or by_role
    return "ROLE_USER" if found == "ROLE_USER" else "ROLE_AGENT" if found else None


def content_parts(content: Any) -> list[dict[str, Any]]:
    """A message's content as A2A parts: its text (runs of text blocks joined) and media."""
    if isinstance(content, str):
        return [{"kind": "text", "text": content}]
    if content is None:
        return []
    if not isinstance(content, list):
        return [{"kind": "text", "text": str(content)}]
    parts: list[dict[str, Any]] = []
    text: list[str] = []
    for block in content:
        if isinstance(block, str):
            text.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            text.append(block["text"] if isinstance(block.get("text"), str) else "")
        elif isinstance(block, dict) and block.get("type") in _MEDIA_BLOCKS:
            if text:
                parts.append({"kind": "text", "text": "".join(text)})
                text = []
            parts.append(_file_part(block))
    if text:
        parts.append({"kind": "text", "text": "".join(text)})
    return parts


def _file_part(block: dict[str, Any]) -> dict[str, Any]:
    file: dict[str, Any] = {}
    if block.get("url") is not None:
        file["uri"] = block["url"]
    else:
        file["bytes"] = block.get("base64") or block.get("data")
    if block.get("mime_type"):
        file["mimeType"] = block["mime_type"]
    extras = block.get("extras")
    name = block.get("filename") or (extras.get("filename") if isinstance(extras, dict) else None)
    if name:
        file["name"] = name
    return {"kind": "file", "file": file}


def has_content(parts: list[dict[str, Any]]) -> bool:
    return any(p.get("kind") in ("data", "file") or p.get("text") for p in parts)


def tool_result(message: dict[str, Any]) -> dict[str, Any] | None:
    """A tool's result (a message with a ``tool_call_id``) as data; None for other messages."""
    call_id = message.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        return None
    result: dict[str, Any] = {"toolCallId": call_id}
    if message.get("content") not in (None, ""):
        result["content"] = message["content"]
    for key in ("name", "status"):
        if isinstance(message.get(key), str) and message[key]:
            result[key] = message[key]
    return result


def response_parts(values: Any) -> list[dict[str, Any]]:
    """The task's answer: the last agent message of the turn (after the last user message)
    with content, else the values as text, as the reference answers."""
    messages = values.get("messages") if isinstance(values, dict) else None
    if not isinstance(messages, list) or not messages or "__error__" in values:
        return [{"kind": "text", "text": str(values)}]
    turn = messages
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], dict) and a2a_role(messages[i]) == "ROLE_USER":
            turn = messages[i + 1 :]
            break
    for message in reversed(turn):
        if isinstance(message, dict) and a2a_role(message) == "ROLE_AGENT" and "content" in message:
            parts = content_parts(message["content"])
            if has_content(parts):
                return parts
    return [{"kind": "text", "text": ""}]


def history(
    messages: Any,
    task_id: str,
    context_id: str,
    length: int | None,
    scope: str,
    task_ids: dict[str, str],
) -> list[dict[str, Any]]:
    """The thread's messages as A2A messages, each of the task its mark names (``task_ids``:
    the context's tasks by their ``task_start_id``); unmarked ones of the task asked about, or
    of none with ``scope`` "task"; then only the task's (``scope`` "task"), the last ``length``."""
    current: str | None = None if scope == "task" else task_id
    known = set(task_ids.values())
    out: list[dict[str, Any]] = []
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict):
            continue
        kwargs = message.get("additional_kwargs")
        mark = kwargs.get("a2a") if isinstance(kwargs, dict) else None
        mark = mark if isinstance(mark, dict) else {}
        if isinstance(mark.get("task_id"), str) and mark["task_id"]:
            current = mark["task_id"] if mark["task_id"] in known | {task_id} else None
        elif isinstance(mark.get("task_start_id"), str) and mark["task_start_id"]:
            current = task_ids.get(mark["task_start_id"])
        if current is None:
            continue
        role = a2a_role(message)
        if role is None:
            result = tool_result(message)
            if result is None:
                continue  # a system prompt, a tool's prose: never shown as speech
            role, parts = "ROLE_AGENT", [{"kind": "data", "data": {"tool_results": [result]}}]
        else:
            parts = content_parts(message.get("content", ""))
            if role == "ROLE_AGENT" and not has_content(parts):
                continue
            parts = parts or [{"kind": "text", "text": ""}]
        out.append(
            {
                "kind": "message",
                "role": role,
                "parts": parts,
                "messageId": message.get("id") or new_id(),
                "taskId": current,
                "contextId": context_id,
            }
        )
    if scope == "task":
        out = [m for m in out if m["taskId"] == task_id]
    if length is None:
        return out
    return out[-length:] if length else []


def stream_message(items: object, task_id: str, context_id: str) -> dict[str, Any] | None:
    """A ``messages`` chunk of the run's stream (a list of messages) as a ``working`` status
    update: its agent prose as text, tools' results as data; None when it has neither."""
    text: list[str] = []
    results: list[dict[str, Any]] = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        if a2a_role(item) is None:
            if (result := tool_result(item)) is not None:
                results.append(result)
            continue
        text.extend(p["text"] for p in content_parts(item.get("content")) if "text" in p)
    parts: list[dict[str, Any]] = [{"kind": "text", "text": "".join(text)}] if "".join(text) else []
    if results:
        parts.append({"kind": "data", "data": {"tool_results": results}})
    if not parts:
        return None
    message = {
        "kind": "message",
        "role": "ROLE_AGENT",
        "parts": parts,
        "messageId": new_id(),
        "taskId": task_id,
        "contextId": context_id,
    }
    return {
        "taskId": task_id,
        "contextId": context_id,
        "kind": "status-update",
        "status": {"state": "TASK_STATE_WORKING", "message": message, "timestamp": now()},
        "final": False,
    }


def interrupt_artifact(interrupts: Any) -> dict[str, Any]:
    """The run's interrupts: what the agent asks before it goes on."""
    parts = []
    for found in interrupts if isinstance(interrupts, list) else []:
        found = found if isinstance(found, dict) else {}
        data = {"id": found.get("id"), "value": found.get("value")}
        if found.get("response_schema") is not None:
            data["response_schema"] = found["response_schema"]
        parts.append({"kind": "data", "data": data})
    return {
        "artifactId": new_id(),
        "name": "Interrupt",
        "description": "Agent requires input to continue",
        "parts": parts,
    }


def response_artifact(parts: list[dict[str, Any]], assistant_id: str) -> dict[str, Any]:
    return {
        "artifactId": new_id(),
        "name": "Assistant Response",
        "description": f"Response from assistant {assistant_id}",
        "parts": parts,
    }


def agent_message(text: str, task_id: str, context_id: str | None = None) -> dict[str, Any]:
    """A status's message: the agent saying ``text``."""
    message = {
        "kind": "message",
        "role": "ROLE_AGENT",
        "parts": [{"kind": "text", "text": text}],
        "messageId": new_id(),
        "taskId": task_id,
    }
    return message if context_id is None else {**message, "contextId": context_id}


__all__ = [
    "TERMINAL_STATES",
    "PartsRefused",
    "agent_message",
    "history",
    "interrupt_artifact",
    "is_a2ui",
    "response_artifact",
    "response_parts",
    "resume_of_parts",
    "run_input",
    "stream_message",
    "text_of_parts",
    "to_spec",
]
