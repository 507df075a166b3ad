"""Scheduling (SPEC §15): priorities, kinds, concurrency limits and cron schedules.

The values and the argument checks every backend shares (`ValidationError` naming the argument,
nothing written), and the pure slot arithmetic of schedules. The store methods are on the
`RunQueue` Protocol (`set_limit`, `limits`, `remove_limit`, `put_schedule`, `schedules`,
`remove_schedule`, `pause_schedule`, `fire_schedule`); the scheduler loop that fires due slots is
`durable_graph.worker.scheduler`.

Cron expressions (`durable_graph.core.cron`: the grammar, and slots as UTC instants across
daylight-saving changes) are evaluated by `cronsim` (the optional extra ``durable-graph[cron]``):
the stores keep an expression as text, checked on every backend before it is stored, and the SQL
API checks the same grammar itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any, Final, Literal, Protocol, TypeAlias
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from durable_graph.core.cron import cron_error, latest_slot, slots_after
from durable_graph.core.errors import ValidationError
from durable_graph.core.model import JSON
from durable_graph.core.scalars import (
    INT32_MAX,
    check_identifier,
    check_int,
    check_optional_identifier,
    check_timestamp,
    decode_json,
    encode_json,
)

DEFAULT_KIND: Final = "default"
"""`Submission.kind` when none is given."""
MAX_KINDS: Final = 100
"""The most kinds one `lease(kinds=...)` serves (``dg_lease_v1`` checks it too)."""
MAX_SCHEDULE_NAME_BYTES: Final = 200
"""A schedule's name, so that ``schedule:<name>:<slot>`` stays a submission key (512 bytes)."""
MAX_CRON_BYTES: Final = 512
MAX_CATCH_UP: Final = 1000
"""The most missed slots one scheduler pass submits for a ``catch_up`` schedule."""

LimitScope: TypeAlias = Literal["tenant", "kind"]
LIMIT_SCOPES: Final = ("tenant", "kind")


@dataclass(frozen=True, slots=True)
class ConcurrencyLimit:
    """At most ``max_leases`` entries of the tenant (``scope="tenant"``) or of the kind
    (``scope="kind"``) named ``name`` hold a live lease at once (SPEC §15). A lease that would
    exceed a limit is not taken: that entry waits, and the lease takes the next available one."""

    scope: LimitScope
    name: str
    max_leases: int


@dataclass(frozen=True, slots=True)
class Schedule:
    """A named cron schedule (SPEC §15): each due slot submits ``input`` to ``thread_id`` as an
    ENQUEUE entry of ``kind`` (and ``tenant``, ``priority``, ``max_attempts``) under the key
    ``schedule:<name>:<slot>``.

    ``cron``: five fields (minute hour day month weekday), or six with seconds first, evaluated
    in ``timezone`` (an IANA name). Missed slots (no scheduler ran, or the schedule was paused):
    by default only the latest due slot runs; with ``catch_up`` each one does, oldest first
    (at most `MAX_CATCH_UP` a pass)."""

    name: str
    cron: str
    thread_id: str
    input: JSON = None
    timezone: str = "UTC"
    kind: str = DEFAULT_KIND
    tenant: str | None = None
    priority: int = 0
    max_attempts: int = 3
    catch_up: bool = False


@dataclass(frozen=True, slots=True)
class StoredSchedule:
    """A schedule as the store keeps it: ``created_at`` (store time; no slot at or before it is
    due), ``paused``, and ``last_slot``, the newest slot submitted (None before the first)."""

    schedule: Schedule
    paused: bool
    created_at: datetime
    last_slot: datetime | None


@dataclass(frozen=True, slots=True)
class EncodedSchedule:
    """A checked `Schedule` with its input as canonical JSON text, as every backend stores it."""

    name: str
    cron: str
    timezone: str
    thread_id: str
    input: str
    kind: str
    tenant: str | None
    priority: int
    max_attempts: int
    catch_up: bool


# --- checks --------------------------------------------------------------------------------


class Columns(Protocol):
    """A stored row read by column name: a mapping, or an ``sqlite3.Row``."""

    def __getitem__(self, column: str, /) -> Any: ...


def encoded_schedule(row: Columns) -> EncodedSchedule:
    """The schedule a stored row keeps (the names of ``dg_schedules_v1``'s columns, ``input`` as
    JSON text), typed as every backend reads one."""
    return EncodedSchedule(
        name=row["name"],
        cron=row["cron"],
        timezone=row["timezone"],
        thread_id=row["thread_id"],
        input=row["input"],
        kind=row["kind"],
        tenant=row["tenant"],
        priority=int(row["priority"]),
        max_attempts=int(row["max_attempts"]),
        catch_up=bool(row["catch_up"]),
    )


def schedule_fields(schedule: EncodedSchedule) -> dict[str, Any]:
    """``schedule``'s `EncodedSchedule` fields by name (also of a row that extends it): the
    fields of a `Schedule` too, ``input`` aside (JSON text here)."""
    return {f.name: getattr(schedule, f.name) for f in fields(EncodedSchedule)}


def stored_of(
    schedule: EncodedSchedule, paused: bool, created_at: datetime, last_slot: datetime | None
) -> StoredSchedule:
    """The `StoredSchedule` of a checked schedule (``input`` JSON text) and the store's fields;
    times in UTC."""
    decoded = Schedule(**schedule_fields(schedule) | {"input": decode_json(schedule.input)})
    last = None if last_slot is None else last_slot.astimezone(UTC)
    return StoredSchedule(decoded, bool(paused), created_at.astimezone(UTC), last)


def stored_schedule(row: Mapping[str, Any]) -> StoredSchedule:
    """A stored schedule from its row's fields (the names of ``dg_schedules_v1``'s columns,
    ``input`` as JSON text), as every backend reads one; times in UTC."""
    return stored_of(encoded_schedule(row), row["paused"], row["created_at"], row["last_slot"])


def check_priority(name: str, value: object) -> int:
    return check_int(name, value, minimum=-INT32_MAX, maximum=INT32_MAX)


def check_kind(name: str, value: object) -> str:
    return check_identifier(name, value)


def check_kinds(name: str, value: object) -> tuple[str, ...] | None:
    """`lease(kinds=...)`: None (every kind), or 1..`MAX_KINDS` distinct kinds."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, frozenset, set)):
        raise ValidationError(f"{name} must be a sequence of str or None")
    kinds = tuple(sorted(value)) if isinstance(value, (set, frozenset)) else tuple(value)
    if not 1 <= len(kinds) <= MAX_KINDS:
        raise ValidationError(f"{name} must hold 1..{MAX_KINDS} kinds")
    for i, kind in enumerate(kinds):
        check_kind(f"{name}[{i}]", kind)
    if len(set(kinds)) != len(kinds):
        raise ValidationError(f"{name} must not repeat a kind")
    return kinds


def check_scope(value: object) -> LimitScope:
    if value == "tenant":
        return "tenant"
    if value == "kind":
        return "kind"
    raise ValidationError(f"scope must be 'tenant' or 'kind', got {value!r}")


def check_limit_args(scope: object, name: object, max_leases: object) -> ConcurrencyLimit:
    return ConcurrencyLimit(
        check_scope(scope),
        check_identifier("name", name),
        check_int("max_leases", max_leases, minimum=0, maximum=INT32_MAX),
    )


def check_schedule_name(value: object) -> str:
    name = check_identifier("name", value)
    if len(name.encode("utf-8")) > MAX_SCHEDULE_NAME_BYTES:
        raise ValidationError(f"name must be at most {MAX_SCHEDULE_NAME_BYTES} UTF-8 bytes")
    return name


def check_timezone(name: str, value: object) -> str:
    if not isinstance(value, str) or not value or len(value) > 64:
        raise ValidationError(f"{name} must be an IANA time zone name")
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValidationError(f"{name} {value!r} is not a known time zone") from None
    if value not in _zones():
        raise ValidationError(f"{name} {value!r} is not a known time zone")
    return value


_ZONES: set[str] = set()


def _zones() -> set[str]:
    if not _ZONES:
        _ZONES.update(available_timezones() | {"UTC"})
    return _ZONES


def check_cron(name: str, value: object) -> str:
    """A cron expression of `durable_graph.core.cron`'s grammar (five fields, or six with
    seconds first), which `cronsim` evaluates."""
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{name} must be a cron expression")
    if len(value.encode("utf-8")) > MAX_CRON_BYTES or "\x00" in value:
        raise ValidationError(f"{name} must be at most {MAX_CRON_BYTES} bytes, without NUL")
    why = cron_error(value)
    if why is not None:
        raise ValidationError(f"{name} {value!r} is not a cron expression: {why}")
    return value


def check_schedule(value: object, max_bytes: int) -> EncodedSchedule:
    if not isinstance(value, Schedule):
        raise ValidationError(f"schedule must be a Schedule, got {type(value).__name__}")
    if not isinstance(value.catch_up, bool):
        raise ValidationError("schedule.catch_up must be a bool")
    return EncodedSchedule(
        name=check_schedule_name(value.name),
        cron=check_cron("schedule.cron", value.cron),
        timezone=check_timezone("schedule.timezone", value.timezone),
        thread_id=check_identifier("schedule.thread_id", value.thread_id),
        input=encode_json("schedule.input", value.input, max_bytes, canonical=True),
        kind=check_kind("schedule.kind", value.kind),
        tenant=check_optional_identifier("schedule.tenant", value.tenant),
        priority=check_priority("schedule.priority", value.priority),
        max_attempts=check_int(
            "schedule.max_attempts", value.max_attempts, minimum=1, maximum=INT32_MAX
        ),
        catch_up=value.catch_up,
    )


def other_tenants_name(name: str) -> str:
    """The refusal of a put over another tenant's schedule (issue 37 item 8, D-decision in
    docs/decisions.md): schedules are named schema-wide, and one tenant never replaces
    another's."""
    return f"name {name!r} is taken by a schedule of another tenant"


def check_slot(name: str, value: object) -> datetime:
    """A slot: a tz-aware instant, whole seconds (a cron slot never has a fraction)."""
    slot = check_timestamp(name, value)
    if slot is None:
        raise ValidationError(f"{name} must be a datetime")
    if slot.microsecond:
        raise ValidationError(f"{name} must be a whole second")
    return slot.astimezone(UTC)


# --- slots ---------------------------------------------------------------------------------


def slot_key(name: str, slot: datetime) -> str:
    """The submission key of a slot: ``schedule:<name>:<slot as UTC ISO 8601, seconds>``."""
    return f"schedule:{name}:{slot.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}"


def slot_problem(schedule: Schedule) -> str | None:
    """Why a stored schedule's slots cannot be computed (its cron expression or time zone was
    stored by a check older than this package's, or planted in the table), or None. A scheduler
    skips such a schedule and goes on with the others; listings show the reason (issue 37)."""
    try:
        check_cron("cron", schedule.cron)
        check_timezone("timezone", schedule.timezone)
    except ValidationError as exc:
        return str(exc)
    return None


def due_slots(stored: StoredSchedule, now: datetime) -> list[datetime]:
    """The slots a scheduler submits at ``now`` (SPEC §15's missed-slot policy): those after the
    newest submitted one (or the schedule's creation) and at or before ``now``; only the latest
    of them unless the schedule catches up (then each, oldest first, `MAX_CATCH_UP` at most).
    Slots are UTC instants (`durable_graph.core.cron`), so a daylight-saving change moves none."""
    if stored.paused:
        return []
    s = stored.schedule
    base = stored.last_slot if stored.last_slot is not None else stored.created_at
    if not s.catch_up:
        latest = latest_slot(s.cron, s.timezone, now, base)
        return [] if latest is None else [latest]
    due: list[datetime] = []
    for slot in slots_after(s.cron, s.timezone, base):
        if slot > now or len(due) == MAX_CATCH_UP:
            break
        due.append(slot)
    return due


def next_slot(stored: StoredSchedule, now: datetime) -> datetime | None:
    """The first slot after ``now`` (and after the newest submitted one): its next run."""
    s = stored.schedule
    after = max(now, stored.last_slot or now, stored.created_at)
    return next(slots_after(s.cron, s.timezone, after), None)


__all__ = [
    "DEFAULT_KIND",
    "LIMIT_SCOPES",
    "MAX_CATCH_UP",
    "MAX_KINDS",
    "Columns",
    "ConcurrencyLimit",
    "EncodedSchedule",
    "LimitScope",
    "Schedule",
    "StoredSchedule",
    "check_cron",
    "check_kind",
    "check_kinds",
    "check_limit_args",
    "check_priority",
    "check_schedule",
    "check_schedule_name",
    "check_scope",
    "check_slot",
    "check_timezone",
    "due_slots",
    "encoded_schedule",
    "next_slot",
    "other_tenants_name",
    "schedule_fields",
    "slot_key",
    "slot_problem",
    "stored_of",
    "stored_schedule",
]
