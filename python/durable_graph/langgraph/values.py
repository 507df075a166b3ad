"""Graph values as JSON both ways (SPEC §14.3): what crosses the queue is readable by anyone.

`to_json` turns what a graph produces (state values, stream chunks, interrupts) into plain JSON:
LangChain objects (messages above all) become **LangChain's own JSON form**
(``langchain_core.load.dumpd``: ``{"lc": 1, "type": "constructor", "id": [...], "kwargs":
{...}}``), pydantic models their ``model_dump(mode="json")``, dataclasses and named tuples their
fields, tuples lists; never Python repr text. An object of none of those kinds is refused
(`ValidationError`) rather than silently stringified, except in `to_json(..., lenient=True)`, used
for stream events and outputs, where it becomes ``{"__unserializable__": type name}``.

`from_json` is the way back for inputs: every LangChain constructor form in the value is loaded
with ``langchain_core.load.load`` restricted to ``allowed_objects="core"`` (LangChain's own
allow-list of its core classes: messages, documents, prompts; never an arbitrary import), so a
client may send messages in that form. Messages as plain dicts (``{"role": "user", "content":
...}`` or ``{"type": "human", ...}``) need no loading: LangGraph's ``add_messages`` reducer takes
them as they are.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping
from typing import Any, Final

from durable_graph.core.errors import ValidationError
from durable_graph.core.model import JSON

LC_ALLOWED: Final = "core"
"""``langchain_core.load.load``'s allow-list for inputs: LangChain's core classes only."""


def _is_lc_constructor(value: Mapping[str, Any]) -> bool:
    return value.get("lc") == 1 and value.get("type") == "constructor" and "id" in value


def to_json(value: Any, *, lenient: bool = False, path: str = "value") -> JSON:
    """``value`` as plain JSON, LangChain objects in LangChain's JSON form (see the module)."""
    return _to_json(value, lenient, path, 0)


def _to_json(value: Any, lenient: bool, path: str, depth: int) -> JSON:
    if depth > 500:
        raise ValidationError(f"{path}: nested too deeply")
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        if lenient:
            return None
        raise ValidationError(f"{path}: not a finite number")
    if isinstance(value, Mapping):
        return {str(k): _to_json(v, lenient, f"{path}[{k!r}]", depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)) and not hasattr(value, "_fields"):
        return [_to_json(v, lenient, f"{path}[{i}]", depth + 1) for i, v in enumerate(value)]
    special = _special(value)
    if special is not _NONE:
        return _to_json(special, lenient, path, depth + 1)
    if lenient:
        return {"__unserializable__": type(value).__qualname__}
    raise ValidationError(
        f"{path}: a {type(value).__qualname__} is not JSON and has no JSON form "
        "(LangChain objects, pydantic models and dataclasses have one)"
    )


_NONE = object()


def _special(value: Any) -> Any:
    """The JSON-able form of a non-plain value, or `_NONE`."""
    try:
        from langchain_core.load import dumpd
        from langchain_core.load.serializable import Serializable
    except ImportError:  # pragma: no cover - the extra is installed with durable_graph.langgraph
        Serializable = None  # type: ignore[assignment,misc]
    if Serializable is not None and isinstance(value, Serializable):
        out = dumpd(value)
        if isinstance(out, dict) and out.get("type") != "not_implemented":
            return out
    if hasattr(value, "_fields") and isinstance(value, tuple):  # NamedTuple
        return dict(value._asdict())  # type: ignore[attr-defined]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    model_dump = getattr(value, "model_dump", None)
    if callable(model_dump):
        return model_dump(mode="json")
    slots = getattr(type(value), "__slots__", None)
    if type(value).__module__.startswith("langgraph.") and slots:
        # LangGraph's own small values (Interrupt, Send, Command): their fields.
        return {s: getattr(value, s) for s in slots if not s.startswith("_") and hasattr(value, s)}
    return _NONE


def from_json(value: JSON) -> Any:
    """``value`` with every LangChain JSON constructor in it loaded (allow-listed, see above)."""
    if isinstance(value, list):
        return [from_json(v) for v in value]
    if isinstance(value, dict):
        if _is_lc_constructor(value):
            return _load(value)
        return {k: from_json(v) for k, v in value.items()}
    return value


def _load(value: dict[str, Any]) -> Any:
    from langchain_core.load import load

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LangChain marks load as beta
        try:
            return load(value, allowed_objects=LC_ALLOWED)
        except Exception as exc:
            raise ValidationError(
                f"input: LangChain object {'.'.join(map(str, value.get('id', [])))} "
                f"cannot be loaded ({exc})"
            ) from None


def message_dict(value: JSON) -> JSON:
    """``value`` with each LangChain constructor form turned into the object's flat dict (what
    LangGraph Server sends: ``{"type": "ai", "content": ..., "id": ...}``)."""
    if isinstance(value, list):
        return [message_dict(v) for v in value]
    if isinstance(value, dict):
        if _is_lc_constructor(value):
            try:
                loaded = _load(value)
            except ValidationError:
                return value
            dump = getattr(loaded, "model_dump", None)
            if callable(dump):
                out: JSON = to_json(dump(mode="json"), lenient=True)
                return out
            return value
        return {k: message_dict(v) for k, v in value.items()}
    return value
