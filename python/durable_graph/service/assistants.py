"""Assistants, stored with their versions (SPEC §20.3; D191).

The graphs of ``langgraph.json`` are the system assistants, as with LangGraph's server (their id
`assistant_id_of` the graph's name; read-only here). An assistant a client creates is a store
thread of its own, ``assistant:<id>``, whose checkpoints are its versions: each holds the whole
record (graph, name, description, config, context, metadata, version), committed under a claim,
so a version is written whole or not at all and two updates never interleave. `update` commits
the next version; `set_latest` commits the chosen version's record again as the head; `versions`
reads the history, newest first; `delete` deletes the thread. Nothing else keeps assistant
state. Such threads are not the service's conversation threads: `Threads.search` skips them.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from contextlib import suppress
from datetime import UTC, datetime
from typing import Any, Final, TypeGuard

from durable_graph.core.async_protocols import AsyncCheckpointer
from durable_graph.core.errors import NotFound, StoreError, ThreadBusy, ValidationError
from durable_graph.core.model import Commit
from durable_graph.service.auth import TENANT, visible
from durable_graph.service.records import assistant_id_of, count_field, iso, object_field

PREFIX: Final = "assistant:"
"""Thread ids of stored assistants (never a conversation thread's: those are UUIDs or ids a
client chose, and `Threads.search` leaves these out)."""
HOLDER: Final = "langgraph-api"
SYSTEM_TIME: Final = "1970-01-01T00:00:00+00:00"


class Assistants:
    """The assistant endpoints' work over ``store``; ``graphs`` are the served graphs' names."""

    def __init__(self, store: AsyncCheckpointer, graphs: list[str]) -> None:
        self.store = store
        self.graphs = graphs

    def system(self, name: str) -> dict[str, Any]:
        return {
            "assistant_id": assistant_id_of(name),
            "graph_id": name,
            "name": name,
            "description": None,
            "config": {},
            "context": {},
            "metadata": {"created_by": "system"},
            "version": 1,
            "created_at": SYSTEM_TIME,
            "updated_at": SYSTEM_TIME,
        }

    async def get(self, assistant_id: str) -> dict[str, Any]:
        """A system assistant or a stored one (`NotFound` for neither)."""
        for name in self.graphs:
            if assistant_id == assistant_id_of(name) and visible(self.system(name)["metadata"]):
                return self.system(name)
        return _public(await self._stored(assistant_id))

    async def create(self, body: Mapping[str, Any]) -> dict[str, Any]:
        graph_id = self._graph(body.get("graph_id"))
        given = body.get("assistant_id")
        assistant_id = _uuid(given) if given is not None else str(uuid.uuid4())
        now = iso(datetime.now(UTC))
        record = {
            "assistant_id": assistant_id,
            "graph_id": graph_id,
            "name": _text(body, "name") or "Untitled",
            "description": _text(body, "description"),
            "config": object_field(body, "config"),
            "context": object_field(body, "context"),
            "metadata": object_field(body, "metadata"),
            "version": 1,
            "latest_version": 1,
            "created_at": now,
            "updated_at": now,
            "owner": TENANT.get(),
        }
        thread_id = PREFIX + assistant_id
        if await self.store.thread(thread_id) is not None:
            if body.get("if_exists") == "do_nothing":
                return await self.get(assistant_id)
            raise Conflict(f"assistant {assistant_id} already exists")
        await self._commit(thread_id, None, record)
        return _public(record)

    async def update(self, assistant_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """The next version: the fields given, the rest as the latest version has them; its
        metadata merged into the latest's, as the reference merges it."""
        current = await self._stored(assistant_id)
        record = dict(current)
        if "graph_id" in body:
            record["graph_id"] = self._graph(body.get("graph_id"))
        for name in ("config", "context"):
            if name in body:
                record[name] = object_field(body, name)
        if "metadata" in body:
            record["metadata"] = {**current["metadata"], **object_field(body, "metadata")}
        for name in ("name", "description"):
            if name in body:
                record[name] = _text(body, name)
        version = int(current["latest_version"]) + 1
        record.update(version=version, latest_version=version, updated_at=iso(datetime.now(UTC)))
        await self._commit(PREFIX + assistant_id, current, record)
        return _public(record)

    async def set_latest(self, assistant_id: str, version: object) -> dict[str, Any]:
        if isinstance(version, bool) or not isinstance(version, int):
            raise ValidationError("version: an integer")
        current = await self._stored(assistant_id)
        chosen = next(
            (v for v in await self._history(assistant_id) if v["version"] == version), None
        )
        if chosen is None:
            raise NotFound(f"assistant {assistant_id} has no version {version}")
        record = {**chosen, "latest_version": current["latest_version"]}
        await self._commit(PREFIX + assistant_id, current, record)
        return _public(record)

    async def versions(self, assistant_id: str, body: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Each version once (its first record), newest first; ``metadata`` filters."""
        if any(assistant_id == assistant_id_of(n) for n in self.graphs):
            return [await self.get(assistant_id)]
        await self._stored(assistant_id)
        seen: dict[int, dict[str, Any]] = {}
        for record in reversed(await self._history(assistant_id)):  # oldest first
            seen.setdefault(int(record["version"]), record)
        wanted = object_field(body, "metadata")
        found = [
            _public(r)
            for _, r in sorted(seen.items(), reverse=True)
            if all(r["metadata"].get(k) == v for k, v in wanted.items())
        ]
        limit, offset = count_field(body, "limit", 10, 1), count_field(body, "offset", 0, 0)
        return found[offset : offset + limit]

    async def delete(self, assistant_id: str) -> None:
        if any(assistant_id == assistant_id_of(n) for n in self.graphs):
            raise ValidationError("assistant_id: a system assistant is a graph of langgraph.json")
        await self._stored(assistant_id)  # this tenant's
        if not await self.store.delete_thread(PREFIX + _uuid(assistant_id)):
            raise NotFound(f"assistant {assistant_id} not found")

    async def search(self, body: Mapping[str, Any]) -> list[dict[str, Any]]:
        found = await self._matching(body)
        limit, offset = count_field(body, "limit", 10, 1), count_field(body, "offset", 0, 0)
        return found[offset : offset + limit]

    async def count(self, body: Mapping[str, Any]) -> int:
        return len(await self._matching(body))

    async def _matching(self, body: Mapping[str, Any]) -> list[dict[str, Any]]:
        graph_id = body.get("graph_id")
        name = body.get("name")
        metadata = object_field(body, "metadata")
        candidates = [self.system(n) for n in self.graphs]
        after = PREFIX
        while True:  # the stored ones: the threads whose ids start with the prefix
            page = await self.store.threads(after=after, limit=100)
            mine = [t for t in page if t.thread_id.startswith(PREFIX)]
            for info in mine:
                head = await self.store.get(info.thread_id)
                if head is not None and _mine(head.state):
                    candidates.append(_public(head.state))
            if len(mine) < len(page) or not page:
                break
            after = page[-1].thread_id
        return [
            a
            for a in candidates
            if visible(a["metadata"])
            and graph_id in (None, a["graph_id"])
            and name in (None, a["name"])
            and all(a["metadata"].get(k) == v for k, v in metadata.items())
        ]

    async def _stored(self, assistant_id: str) -> dict[str, Any]:
        if any(assistant_id == assistant_id_of(n) for n in self.graphs):
            raise ValidationError("assistant_id: a system assistant is a graph of langgraph.json")
        head = await self.store.get(PREFIX + _uuid(assistant_id))
        if head is None or not _mine(head.state):  # another tenant's is as unknown (§20.4)
            raise NotFound(f"assistant {assistant_id} not found")
        return head.state

    async def _history(self, assistant_id: str) -> list[dict[str, Any]]:
        thread_id = PREFIX + assistant_id
        records: list[dict[str, Any]] = []
        before: str | None = None
        while page := await self.store.history(thread_id, before=before, limit=100):
            records.extend(c.state for c in page if isinstance(c.state, dict))
            before = page[-1].checkpoint_id
        return records

    async def _commit(
        self, thread_id: str, current: Mapping[str, Any] | None, record: dict[str, Any]
    ) -> None:
        """One version, under the thread's claim: `Conflict` when another update holds it."""
        try:
            claim = await self.store.claim(thread_id, HOLDER)
        except ThreadBusy:
            raise Conflict(f"assistant {thread_id.removeprefix(PREFIX)} is being updated") from None
        try:
            head = await self.store.get(thread_id)
            if (head is None) != (current is None) or (head is not None and head.state != current):
                raise Conflict(f"assistant {thread_id.removeprefix(PREFIX)} changed meanwhile")
            await self.store.commit(
                claim,
                Commit(
                    checkpoint_id=str(uuid.uuid4()),
                    parent_id=None if head is None else head.checkpoint_id,
                    run_id=HOLDER,
                    state=record,
                    metadata={"source": "assistant", "version": record["version"]},
                ),
            )
        finally:
            with suppress(StoreError):
                await self.store.release_claim(claim)

    def _graph(self, value: object) -> str:
        if not isinstance(value, str) or value not in self.graphs:
            raise ValidationError(f"graph_id: one of {', '.join(self.graphs)}")
        return value


class Conflict(Exception):
    """409 for an assistant."""


def _public(record: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in ("latest_version", "owner")}


def _mine(record: object) -> TypeGuard[dict[str, Any]]:
    """A stored assistant this request may see: its tenant's, passing its auth filter."""
    return (
        isinstance(record, dict)
        and record.get("owner") == TENANT.get()
        and visible(record.get("metadata") or {})
    )


def _uuid(value: object) -> str:
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        raise ValidationError("assistant_id: must be a UUID") from None


def _text(body: Mapping[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise ValidationError(f"{name}: must be a string")
    return value
