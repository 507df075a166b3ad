"""The dashboard's scheduling page (SPEC §15): waiting entries by kind, concurrency limits with
their live leases, and the schedules with their next run."""

from __future__ import annotations

from datetime import datetime

from durable_graph.core.model import QueueEntry, QueueStats
from durable_graph.core.scheduling import (
    ConcurrencyLimit,
    StoredSchedule,
    next_slot,
    slot_problem,
)
from durable_graph.dashboard.render import _table, page, text, when


def _next_run(s: StoredSchedule, now: datetime) -> str:
    problem = slot_problem(s.schedule)
    if problem is not None:
        return text(f"invalid: {problem}")
    return "paused" if s.paused else text(when(next_slot(s, now)))


def scheduling_page(
    stats: QueueStats,
    limits: list[ConcurrencyLimit],
    schedules: list[StoredSchedule],
    running: list[QueueEntry],
    now: datetime,
) -> str:
    kinds = [(text(kind), str(n)) for kind, n in stats.waiting_by_kind.items()]
    live: dict[tuple[str, str], int] = {}
    for e in running:
        live[("kind", e.kind)] = live.get(("kind", e.kind), 0) + 1
        if e.tenant is not None:
            live[("tenant", e.tenant)] = live.get(("tenant", e.tenant), 0) + 1
    limit_rows = [
        (
            text(lim.scope),
            text(lim.name),
            str(live.get((lim.scope, lim.name), 0)),
            str(lim.max_leases),
        )
        for lim in limits
    ]
    schedule_rows = [
        (
            text(s.schedule.name),
            f"<code>{text(s.schedule.cron)}</code>",
            text(s.schedule.timezone),
            text(s.schedule.thread_id),
            text(s.schedule.kind),
            _next_run(s, now),
            text(when(s.last_slot)),
            "each missed slot" if s.schedule.catch_up else "latest only",
        )
        for s in schedules
    ]
    body = (
        "<h1>Scheduling</h1>"
        "<h2>Waiting by kind</h2>"
        + _table(["kind", "waiting"], kinds, "kinds", "Nothing waits.")
        + "<h2>Concurrency limits</h2>"
        + _table(["scope", "name", "live leases", "max"], limit_rows, "limits", "No limits.")
        + "<h2>Schedules</h2>"
        + _table(
            ["name", "cron", "time zone", "thread", "kind", "next run", "last slot", "missed"],
            schedule_rows,
            "schedules",
            "No schedules.",
        )
    )
    return page("Scheduling", body, nav="scheduling")


__all__ = ["scheduling_page"]
