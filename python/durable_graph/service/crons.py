"""LangGraph Server's crons over the store's schedules (SPEC §15, §20.3; D187).

A cron is a §15 schedule named ``cron:<cron_id>``: each due slot submits the cron's run to its
thread under the key ``schedule:<name>:<slot>``, so a slot runs at most once however many API
processes and schedulers run, and the run is an ordinary run of its thread (listed, joined,
cancelled as any). The schedule's input is the run request the service would queue for
``POST /threads/{id}/runs`` (checked the same way, before anything is stored), with the cron's
own record beside it under ``"cron"`` (its metadata, payload, timestamps): the schedule is the
whole cron, so nothing else needs to stay consistent with it.

A cron made for a thread runs there. A stateless cron (``POST /runs/crons``) runs on a thread of
its own, made with it (``cron-<cron_id>``): its runs continue one another's state, where the
reference gives each run a new thread. Options the store cannot honour are refused (422):
``end_time``, ``webhook``, ``on_run_completed: "delete"``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

from durable_graph.core.async_protocols import AsyncCheckpointer
from durable_graph.core.errors import NotFound, ValidationError
from durable_graph.core.scheduling import Schedule, StoredSchedule, check_timezone, next_slot
from durable_graph.service.auth import TENANT, visible
from durable_graph.service.records import assistant_id_of, count_field, iso, object_field
from durable_graph.service.runs import Runs

PREFIX: Final = "cron:"
"""Names of the schedules that are crons (any other schedule is an operator's own)."""

RUN_FIELDS: Final = (
    "input",
    "config",
    "context",
    "metadata",
    "interrupt_before",
    "interrupt_after",
    "stream_mode",
    "stream_subgraphs",
    "webhook",
)
"""What a cron's payload may hold: the fields of the run it makes (a webhook for each run)."""

REFUSED: Final = {
    "end_time": "a cron runs until it is deleted or disabled here",
    "on_run_completed": "a cron's runs keep their thread here",
}
SORT_KEYS: Final = ("cron_id", "assistant_id", "thread_id", "created_at", "updated_at")


class Crons:
    """The cron endpoints' work over ``store`` (``runs`` checks a cron's run as a run's)."""

    def __init__(self, store: AsyncCheckpointer, runs: Runs) -> None:
        self.store = store
        self.runs = runs

    async def create(self, thread_id: str | None, body: Mapping[str, Any]) -> dict[str, Any]:
        """``POST /runs/crons`` (``thread_id`` None) or ``POST /threads/{id}/runs/crons``."""
        _refuse_unhonoured(body)
        cron_id = str(uuid.uuid4())
        run = {k: body[k] for k in (*RUN_FIELDS, "assistant_id") if k in body}
        request = self.runs.submission_input(thread_id, run)  # checked, nothing written
        schedule = _schedule_text(body)
        timezone = check_timezone("timezone", body.get("timezone") or "UTC")
        enabled = _enabled(body, True)
        if thread_id is not None and not await self.runs.threads.exists(thread_id):
            raise NotFound(f"thread {thread_id} not found")
        now = iso(datetime.now(UTC))
        record = {
            "cron_id": cron_id,
            "assistant_id": assistant_id_of(self.runs.graph_of(body.get("assistant_id"))),
            "thread_id": thread_id,
            "metadata": object_field(body, "metadata"),
            "payload": run,
            "created_at": now,
            "updated_at": now,
        }
        target = thread_id or f"cron-{cron_id}"
        if thread_id is None:  # a stateless cron's thread, made with it
            await self.runs.threads.create(target, {"cron_id": cron_id}, if_exists="do_nothing")
        stored = await self.store.run_queue.put_schedule(
            Schedule(
                name=PREFIX + cron_id,
                cron=schedule,
                thread_id=target,
                input={**_dict(request), "cron": record},
                timezone=timezone,
                tenant=TENANT.get(),  # its runs are the tenant's (SPEC §20.4)
            )
        )
        if not enabled:
            stored = await self.store.run_queue.pause_schedule(stored.schedule.name)
        return cron_json(stored)

    async def update(self, cron_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """``PATCH /runs/crons/{cron_id}``: the fields given, the rest as they were."""
        _refuse_unhonoured(body)
        stored = await self._stored(cron_id)
        record = dict(_record(stored))
        run = {**_dict(record.get("payload")), **{k: body[k] for k in RUN_FIELDS if k in body}}
        request = self.runs.submission_input(record.get("thread_id"), run)
        schedule = _schedule_text(body) if "schedule" in body else stored.schedule.cron
        timezone = check_timezone("timezone", body.get("timezone") or stored.schedule.timezone)
        enabled = _enabled(body, not stored.paused)
        record.update(payload=run, updated_at=iso(datetime.now(UTC)))
        if "metadata" in body:
            record["metadata"] = object_field(body, "metadata")
        stored = await self.store.run_queue.put_schedule(
            Schedule(
                name=stored.schedule.name,
                cron=schedule,
                thread_id=stored.schedule.thread_id,
                input={**_dict(request), "cron": record},
                timezone=timezone,
                tenant=stored.schedule.tenant,
            )
        )
        if enabled == stored.paused:
            stored = await self.store.run_queue.pause_schedule(stored.schedule.name, not enabled)
        return cron_json(stored)

    async def delete(self, cron_id: str) -> None:
        await self._stored(cron_id)  # this tenant's
        if not await self.store.run_queue.remove_schedule(PREFIX + _cron_id(cron_id)):
            raise NotFound(f"cron {cron_id} not found")

    async def search(self, body: Mapping[str, Any]) -> list[dict[str, Any]]:
        """``POST /runs/crons/search``: filtered, sorted, one page."""
        found = await self._matching(body)
        sort_by = body.get("sort_by") or "created_at"
        if sort_by not in SORT_KEYS:
            raise ValidationError(f"sort_by: one of {', '.join(SORT_KEYS)}")
        order = body.get("sort_order") or "desc"
        if order not in ("asc", "desc"):
            raise ValidationError("sort_order: 'asc' or 'desc'")
        found.sort(key=lambda c: str(c.get(sort_by) or ""), reverse=order == "desc")
        limit, offset = count_field(body, "limit", 10, 1), count_field(body, "offset", 0, 0)
        page = found[offset : offset + limit]
        select = body.get("select")
        if select is not None:
            if not isinstance(select, list) or not all(isinstance(s, str) for s in select):
                raise ValidationError("select: a list of field names")
            page = [{k: c.get(k) for k in select} for c in page]
        return page

    async def count(self, body: Mapping[str, Any]) -> int:
        return len(await self._matching(body))

    async def _matching(self, body: Mapping[str, Any]) -> list[dict[str, Any]]:
        assistant = body.get("assistant_id")
        wanted_assistant = (
            None if assistant is None else assistant_id_of(self.runs.graph_of(assistant))
        )
        thread_id = body.get("thread_id")
        enabled = body.get("enabled")
        if enabled is not None and not isinstance(enabled, bool):
            raise ValidationError("enabled: true or false")
        metadata = object_field(body, "metadata")
        found = []
        for stored in await self.store.run_queue.schedules():
            if not stored.schedule.name.startswith(PREFIX) or not _mine(stored):
                continue
            cron = cron_json(stored)
            if (
                wanted_assistant in (None, cron["assistant_id"])
                and thread_id in (None, cron["thread_id"])
                and enabled in (None, cron["enabled"])
                and all(cron["metadata"].get(k) == v for k, v in metadata.items())
            ):
                found.append(cron)
        return found

    async def _stored(self, cron_id: str) -> StoredSchedule:
        name = PREFIX + _cron_id(cron_id)
        for stored in await self.store.run_queue.schedules():
            if stored.schedule.name == name and _mine(stored):
                return stored
        raise NotFound(f"cron {cron_id} not found")


def _mine(stored: StoredSchedule) -> bool:
    """A cron this request may see: its tenant's, passing its auth filter (SPEC §20.4)."""
    metadata = _record(stored).get("metadata")
    return stored.schedule.tenant == TENANT.get() and visible(_dict(metadata))


def cron_json(stored: StoredSchedule) -> dict[str, Any]:
    """A cron as LangGraph Server answers it."""
    record = _record(stored)
    s = stored.schedule
    upcoming = None if stored.paused else next_slot(stored, datetime.now(UTC))
    return {
        "cron_id": s.name.removeprefix(PREFIX),
        "assistant_id": record.get("assistant_id"),
        "thread_id": record.get("thread_id"),
        "on_run_completed": None,
        "end_time": None,
        "schedule": s.cron,
        "timezone": s.timezone,
        "created_at": record.get("created_at") or iso(stored.created_at),
        "updated_at": record.get("updated_at") or iso(stored.created_at),
        "payload": record.get("payload") or {},
        "user_id": None,
        "next_run_date": iso(upcoming),
        "metadata": record.get("metadata") or {},
        "enabled": not stored.paused,
    }


def _record(stored: StoredSchedule) -> dict[str, Any]:
    value = stored.schedule.input
    cron = value.get("cron") if isinstance(value, dict) else None
    return cron if isinstance(cron, dict) else {}


def _refuse_unhonoured(body: Mapping[str, Any]) -> None:
    """Fail closed: an option the service would drop is a 422 naming it."""
    for name, why in REFUSED.items():
        value = body.get(name)
        if value is not None and not (name == "on_run_completed" and value == "keep"):
            raise ValidationError(f"{name}: not supported ({why})")


def _schedule_text(body: Mapping[str, Any]) -> str:
    schedule = body.get("schedule")
    if not isinstance(schedule, str) or not schedule.strip():
        raise ValidationError("schedule: required, a cron expression")
    return schedule.strip()  # the store checks the grammar (DG000 / ValidationError)


def _enabled(body: Mapping[str, Any], default: bool) -> bool:
    value = body.get("enabled", default)
    if not isinstance(value, bool):
        raise ValidationError("enabled: true or false")
    return value


def _cron_id(value: str) -> str:
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise ValidationError("cron_id: must be a UUID") from None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
