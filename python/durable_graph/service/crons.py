"""LangGraph Server's crons over the store's schedules (SPEC §15, §20.3; D187).

A cron is a §15 schedule named ``cron:<cron_id>``: each due slot submits the cron's run to its
thread under the key ``schedule:<name>:<slot>``, so a slot runs at most once however many API
processes and schedulers run, and the run is an ordinary run of its thread (listed, joined,
cancelled as any). The schedule's input is the run request the service would queue for
``POST /threads/{id}/runs`` (checked the same way, before anything is stored), with the cron's
own record in the request's service part under ``"cron"`` (its metadata, payload, timestamps):
the schedule is the whole cron, so nothing else needs to stay consistent with it, and a slot's
run applies its input, config, context, interrupts and graph as ``runs.create``'s does (D242).

A cron is its thread's incarnation's (D241): deleting the thread removes its crons here, and the
store never fires a schedule into a thread deleted after the schedule was made. Over HTTP a
schedule has five fields, as the reference's; six (per second) only when the operator allows
them (``serve --cron-seconds``); a user has at most ``--max-crons-per-user`` crons (D245).

A cron made for a thread runs there. A stateless cron (``POST /runs/crons``) runs on a thread of
its own, made with it (``cron-<cron_id>``): its runs continue one another's state, where the
reference gives each run a new thread. Options the store cannot honour are refused (422):
``end_time``, ``on_run_completed: "delete"``. A ``webhook`` is each run's, checked by the
deployment's webhook policy as a run's is (`durable_graph.service.webhooks`).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from durable_graph.core.async_protocols import AsyncCheckpointer
from durable_graph.core.errors import NotFound, ValidationError
from durable_graph.core.scheduling import Schedule, StoredSchedule, check_timezone, next_slot
from durable_graph.langgraph.run_request import REQUEST_KEY
from durable_graph.service.auth import TENANT, visible
from durable_graph.service.records import assistant_id_of, count_field, iso, object_field
from durable_graph.service.runs import Runs
from durable_graph.service.threads import Conflict

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
MAX_CRONS_PER_USER: Final = 100
"""A user's crons at most, unless ``serve --max-crons-per-user`` says otherwise (D245)."""


@dataclass(frozen=True, slots=True)
class CronSettings:
    """The operator's cron settings: six-field (per-second) schedules allowed over HTTP
    (``seconds``; the reference takes five fields), and each user's cron count cap."""

    seconds: bool = False
    max_per_user: int = MAX_CRONS_PER_USER


class Crons:
    """The cron endpoints' work over ``store`` (``runs`` checks a cron's run as a run's)."""

    def __init__(
        self, store: AsyncCheckpointer, runs: Runs, settings: CronSettings | None = None
    ) -> None:
        self.store = store
        self.runs = runs
        self.settings = settings or CronSettings()

    async def create(self, thread_id: str | None, body: Mapping[str, Any]) -> dict[str, Any]:
        """``POST /runs/crons`` (``thread_id`` None) or ``POST /threads/{id}/runs/crons``."""
        _refuse_unhonoured(body)
        cron_id = str(uuid.uuid4())
        run = {k: body[k] for k in (*RUN_FIELDS, "assistant_id") if k in body}
        request = self.runs.submission_input(thread_id, run)  # checked, nothing written
        schedule = _schedule_text(body, self.settings.seconds)
        timezone = check_timezone("timezone", body.get("timezone") or "UTC")
        enabled = _enabled(body, True)
        if thread_id is not None and not await self.runs.threads.exists(thread_id):
            raise NotFound(f"thread {thread_id} not found")
        await self._under_cap()
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
                input=_with_record(request, record),
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
        schedule = (
            _schedule_text(body, self.settings.seconds)
            if "schedule" in body
            else stored.schedule.cron
        )
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
                input=_with_record(request, record),
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

    async def delete_of_thread(self, thread_id: str) -> None:
        """Remove the crons of ``thread_id`` (its owner's, whom the caller checked): a thread's
        crons end with it (D241); a cron of its next incarnation is never one of these."""
        for stored in await self.store.run_queue.schedules():
            s = stored.schedule
            if s.name.startswith(PREFIX) and s.thread_id == thread_id and s.tenant == TENANT.get():
                await self.store.run_queue.remove_schedule(s.name)

    async def _under_cap(self) -> None:
        """409 naming the cap when this user has ``max_per_user`` crons already (counted over
        all of the tenant's crons, whatever its auth filter shows; D245)."""
        cap = self.settings.max_per_user
        tenant = TENANT.get()
        held = sum(
            1
            for stored in await self.store.run_queue.schedules()
            if stored.schedule.name.startswith(PREFIX) and stored.schedule.tenant == tenant
        )
        if held >= cap:
            raise Conflict(
                f"max_crons_per_user: this user has {held} crons, the most this server allows "
                f"(serve --max-crons-per-user {cap}); delete one first"
            )

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
    value = _dict(stored.schedule.input)
    service = _dict(_dict(value.get(REQUEST_KEY)).get("service"))
    # A cron made before D242 kept its record beside the request (which the handler then read
    # as a plain input; migration 0020 moves it): read there too, as an API process of the
    # earlier release may still make one during a rolling upgrade.
    cron = service.get("cron", value.get("cron"))
    return cron if isinstance(cron, dict) else {}


def _with_record(request: Any, record: dict[str, Any]) -> dict[str, Any]:
    """The schedule's input: the run request with the cron's record in its service part, so the
    input stays a run request (``{"langgraph": ...}`` alone) and each slot's run is applied as
    ``runs.create``'s (D242); the handler reads nothing else of the service part."""
    body = _dict(_dict(request).get(REQUEST_KEY))
    return {REQUEST_KEY: {**body, "service": {**_dict(body.get("service")), "cron": record}}}


def _refuse_unhonoured(body: Mapping[str, Any]) -> None:
    """Fail closed: an option the service would drop is a 422 naming it."""
    for name, why in REFUSED.items():
        value = body.get(name)
        if value is not None and not (name == "on_run_completed" and value == "keep"):
            raise ValidationError(f"{name}: not supported ({why})")


def _schedule_text(body: Mapping[str, Any], seconds: bool) -> str:
    schedule = body.get("schedule")
    if not isinstance(schedule, str) or not schedule.strip():
        raise ValidationError("schedule: required, a cron expression")
    if len(schedule.split()) != 5 and not seconds:
        # The reference's five fields; the store's six-field (per-second) form fires 60 times
        # as often and is the operator's to allow (serve --cron-seconds, D245).
        raise ValidationError(
            "schedule: a cron expression of five fields (minute hour day-of-month month "
            "day-of-week); six-field per-second schedules need serve --cron-seconds"
        )
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
