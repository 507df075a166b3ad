"""The Calls of SPEC §15's store methods (``sql/72_scheduling.sql``): concurrency limits and
schedules. Same shape as `durable_graph.postgres.calls`: validate, then one function call whose
rows the decoder turns into model values."""

from __future__ import annotations

from durable_graph.core.errors import ValidationError
from durable_graph.core.model import Ticket
from durable_graph.core.scheduling import (
    ConcurrencyLimit,
    StoredSchedule,
    check_limit_args,
    check_schedule,
    check_schedule_name,
    check_scope,
    check_slot,
    stored_schedule,
)
from durable_graph.core.validation import check_identifier
from durable_graph.postgres.calls import SqlCall, _call
from durable_graph.postgres.config import PostgresConfig
from durable_graph.postgres.rows import Row, each, exactly_one, first_or_none, ticket_of


def _limit_of(row: Row) -> ConcurrencyLimit:
    return ConcurrencyLimit(check_scope(row["scope"]), row["name"], int(row["max_leases"]))


def set_limit(
    config: PostgresConfig, scope: object, name: object, max_leases: object
) -> SqlCall[ConcurrencyLimit]:
    lim = check_limit_args(scope, name, max_leases)
    args = [("text", lim.scope), ("text", lim.name), ("integer", lim.max_leases)]
    return _call(config, "set_limit", "dg_set_limit_v1", args, exactly_one(_limit_of))


def limits(config: PostgresConfig) -> SqlCall[list[ConcurrencyLimit]]:
    return _call(config, "limits", "dg_limits_v1", [], each(_limit_of))


def remove_limit(config: PostgresConfig, scope: object, name: object) -> SqlCall[bool]:
    args = [("text", check_scope(scope)), ("text", check_identifier("name", name))]
    decode = exactly_one(lambda row: bool(row["removed"]))
    return _call(config, "remove_limit", "dg_remove_limit_v1", args, decode)


def put_schedule(config: PostgresConfig, schedule: object) -> SqlCall[StoredSchedule]:
    s = check_schedule(schedule, config.max_value_bytes)
    args = [
        ("text", s.name),
        ("text", s.cron),
        ("text", s.timezone),
        ("text", s.thread_id),
        ("text", s.input),
        ("text", s.kind),
        ("text", s.tenant),
        ("integer", s.priority),
        ("integer", s.max_attempts),
        ("boolean", s.catch_up),
    ]
    return _call(config, "put_schedule", "dg_put_schedule_v1", args, exactly_one(stored_schedule))


def schedules(config: PostgresConfig) -> SqlCall[list[StoredSchedule]]:
    return _call(config, "schedules", "dg_schedules_v1", [], each(stored_schedule))


def remove_schedule(config: PostgresConfig, name: object) -> SqlCall[bool]:
    args = [("text", check_schedule_name(name))]
    decode = exactly_one(lambda row: bool(row["removed"]))
    return _call(config, "remove_schedule", "dg_remove_schedule_v1", args, decode)


def pause_schedule(config: PostgresConfig, name: object, paused: object) -> SqlCall[StoredSchedule]:
    checked = check_schedule_name(name)
    if not isinstance(paused, bool):
        raise ValidationError("paused must be a bool")
    args = [("text", checked), ("boolean", paused)]
    decode = exactly_one(stored_schedule)
    return _call(config, "pause_schedule", "dg_pause_schedule_v1", args, decode)


def fire_schedule(config: PostgresConfig, name: object, slot: object) -> SqlCall[Ticket | None]:
    args = [("text", check_schedule_name(name)), ("timestamptz", check_slot("slot", slot))]
    return _call(config, "fire_schedule", "dg_fire_schedule_v1", args, first_or_none(ticket_of))


__all__ = [
    "fire_schedule",
    "limits",
    "pause_schedule",
    "put_schedule",
    "remove_limit",
    "remove_schedule",
    "schedules",
    "set_limit",
]
