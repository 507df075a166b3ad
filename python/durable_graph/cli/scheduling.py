"""The scheduling commands (SPEC §15): ``limits set|ls|rm``, ``schedule add|ls|rm|pause``, and
``scheduler`` (the loop that submits due slots)."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from durable_graph.cli.common import (
    CliError,
    UsageError,
    json_value,
    non_negative_int,
    output_of,
    parse_duration,
    positive_int,
    store_of,
    when,
)
from durable_graph.core.errors import ValidationError
from durable_graph.core.scheduling import (
    LimitScope,
    Schedule,
    StoredSchedule,
    next_slot,
    slot_problem,
)


def _scope(args: argparse.Namespace) -> tuple[LimitScope, str]:
    if (args.tenant is None) == (args.kind is None):
        raise UsageError("give exactly one of --tenant T or --kind K")
    return ("tenant", args.tenant) if args.tenant is not None else ("kind", args.kind)


def cmd_limits_set(args: argparse.Namespace) -> int:
    scope, name = _scope(args)
    with store_of(args, must_exist=False) as store:
        try:
            limit = store.run_queue.set_limit(scope, name, args.max)
        except ValidationError as exc:
            raise CliError(str(exc)) from None
    output_of(args).result(limit, f"{scope} {name}: at most {limit.max_leases} live lease(s)")
    return 0


def cmd_limits_ls(args: argparse.Namespace) -> int:
    with store_of(args, read_only=True) as store:
        limits = store.run_queue.limits()
    out = output_of(args)
    if out.as_json:
        out.json(limits)
    else:
        out.table(["SCOPE", "NAME", "MAX"], [(x.scope, x.name, x.max_leases) for x in limits])
    return 0


def cmd_limits_rm(args: argparse.Namespace) -> int:
    scope, name = _scope(args)
    with store_of(args) as store:
        removed = store.run_queue.remove_limit(scope, name)
    output_of(args).result(
        {"removed": removed}, f"{scope} {name}: limit removed" if removed else "no such limit"
    )
    return 0 if removed else 1


def cmd_schedule_add(args: argparse.Namespace) -> int:
    try:
        schedule = Schedule(
            name=args.name,
            cron=args.cron,
            thread_id=args.thread,
            input=args.input,
            timezone=args.timezone,
            kind=args.kind,
            tenant=args.tenant,
            priority=args.priority,
            max_attempts=args.max_attempts,
            catch_up=args.catch_up,
        )
        with store_of(args, must_exist=False) as store:
            stored = store.run_queue.put_schedule(schedule)
    except ValidationError as exc:
        raise CliError(str(exc)) from None
    upcoming = next_slot(stored, datetime.now(UTC))
    output_of(args).result(stored, f"schedule {stored.schedule.name}: next run {when(upcoming)}")
    return 0


def _next_run(s: StoredSchedule, now: datetime) -> str:
    """The NEXT RUN column: paused, the next slot, or why none can be computed."""
    problem = slot_problem(s.schedule)
    if problem is not None:
        return f"invalid: {problem}"
    return "paused" if s.paused else when(next_slot(s, now))


def cmd_schedule_ls(args: argparse.Namespace) -> int:
    with store_of(args, read_only=True) as store:
        schedules = store.run_queue.schedules()
    now = datetime.now(UTC)
    out = output_of(args)
    if out.as_json:
        out.json(
            [
                {
                    "schedule": s,
                    "next_run": None if s.paused or slot_problem(s.schedule) else next_slot(s, now),
                    "problem": slot_problem(s.schedule),
                }
                for s in schedules
            ]
        )
        return 0
    rows = [
        (
            s.schedule.name,
            s.schedule.cron,
            s.schedule.timezone,
            s.schedule.thread_id,
            s.schedule.kind,
            _next_run(s, now),
            when(s.last_slot),
        )
        for s in schedules
    ]
    out.table(["NAME", "CRON", "TZ", "THREAD", "KIND", "NEXT RUN", "LAST SLOT"], rows)
    return 0


def cmd_schedule_rm(args: argparse.Namespace) -> int:
    with store_of(args) as store:
        removed = store.run_queue.remove_schedule(args.name)
    output_of(args).result(
        {"removed": removed}, f"schedule {args.name} removed" if removed else "no such schedule"
    )
    return 0 if removed else 1


def cmd_schedule_pause(args: argparse.Namespace) -> int:
    with store_of(args) as store:
        stored = store.run_queue.pause_schedule(args.name, paused=not args.resume)
    state = "paused" if stored.paused else "resumed"
    output_of(args).result(stored, f"schedule {args.name} {state}")
    return 0


def cmd_scheduler(args: argparse.Namespace) -> int:
    from durable_graph.worker.scheduler import Scheduler
    from durable_graph.worker.signals import POLL, StopSignals

    logging.basicConfig(level=getattr(logging, args.log_level.upper()))
    # The loop runs in a thread and the main thread only waits for SIGTERM / SIGINT: a handler
    # that set the loop's Event could deadlock on the lock Event.wait holds (worker/signals.py).
    with StopSignals().installed() as signals, store_of(args, must_exist=False) as store:
        scheduler = Scheduler(store.run_queue, interval=args.interval)
        if not signals.take():  # a signal while the store opened: stop before the first pass
            loop = scheduler.start_thread()
            while loop.is_alive() and not signals.take():
                loop.join(POLL)
            scheduler.stop()
            loop.join()
    return 0


def add_parsers(
    command: Callable[..., Any],
    actions: Callable[[Any, str], Callable[..., Any]],
    option: Callable[..., None],
    no_subcommand: Callable[[argparse.Namespace], int],
) -> None:
    """The ``limits``, ``schedule`` and ``scheduler`` commands (``command``/``actions``/``option``
    as `durable_graph.cli.parser` builds its commands)."""
    limits = command("limits", no_subcommand, "concurrency limits per tenant or kind: set, ls, rm")
    action = actions(limits, "limits_command")
    for name, func, text in (
        ("set", cmd_limits_set, "at most --max live leases for --tenant T or --kind K"),
        ("rm", cmd_limits_rm, "remove the limit of --tenant T or --kind K"),
    ):
        sub = action(name, func, text)
        option(sub, "--tenant", help="the tenant the limit applies to")
        option(sub, "--kind", help="the kind the limit applies to")
        if name == "set":
            option(sub, "--max", type=non_negative_int, required=True, help="live leases at most")
    action("ls", cmd_limits_ls, "list the limits")

    schedule = command("schedule", no_subcommand, "cron schedules: add, ls, rm, pause")
    action = actions(schedule, "schedule_command")
    add = action("add", cmd_schedule_add, "add (or replace) a named cron schedule")
    add.add_argument("name", help="the schedule's name")
    option(add, "--cron", required=True, help="cron expression: 5 fields, or 6 with seconds first")
    option(add, "--thread", required=True, help="the thread each run is submitted to")
    option(add, "--input", type=json_value, default="null", help="each run's input (JSON)")
    option(add, "--timezone", default="UTC", help="IANA time zone the expression is read in")
    option(add, "--kind", default="default", help="the handler kind of each run")
    option(add, "--tenant", help="the tenant of each run (default: none)")
    option(add, "--priority", type=int, default=0, help="the priority of each run")
    option(add, "--max-attempts", type=positive_int, default=3, help="attempts of each run")
    option(
        add,
        "--catch-up",
        action="store_true",
        help="after downtime run every missed slot (default: only the latest)",
    )
    action("ls", cmd_schedule_ls, "list the schedules with their next run")
    rm = action("rm", cmd_schedule_rm, "remove a schedule")
    rm.add_argument("name", help="the schedule's name")
    pause = action("pause", cmd_schedule_pause, "pause a schedule (--resume: resume it)")
    pause.add_argument("name", help="the schedule's name")
    option(pause, "--resume", action="store_true", help="resume instead")

    loop = command("scheduler", cmd_scheduler, "submit due schedule slots until SIGTERM/SIGINT")
    option(
        loop,
        "--interval",
        type=parse_duration,
        default="1s",
        metavar="DURATION",
        help="how often the schedules are read",
    )
    option(loop, "--log-level", default="info", help="logging level")


__all__ = ["add_parsers"]
