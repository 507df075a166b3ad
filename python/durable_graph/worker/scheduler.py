"""The scheduler loop (SPEC §15): submits the due slots of the store's cron schedules.

Any number of schedulers may run against one store (``durable-graph scheduler``, or ``worker
--scheduler``): each pass fires each schedule's due slots (`core.scheduling.due_slots`) with
`RunQueue.fire_schedule`, which submits a slot at most once, so a slot runs once however many
schedulers fire it. A schedule whose slots cannot be computed (a cron or time zone this package
refuses) is logged once and skipped: every other schedule still fires (issue 37 item 6).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from durable_graph.core.errors import StoreError
from durable_graph.core.run_queue import RunQueue
from durable_graph.core.scheduling import StoredSchedule, due_slots, slot_problem
from durable_graph.core.validation import check_clock, check_duration, from_posix

log = logging.getLogger("durable_graph.scheduler")


@dataclass(frozen=True, slots=True)
class Fired:
    """A slot this scheduler submitted (``existing``: the slot's key was already held)."""

    name: str
    slot: datetime
    entry_id: int
    existing: bool


class Scheduler:
    """Fires due schedule slots every ``interval`` until stopped."""

    def __init__(
        self,
        queue: RunQueue,
        *,
        interval: timedelta = timedelta(seconds=1),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.queue = queue
        self.interval = check_duration("interval", interval)
        check_clock(clock)
        self._clock = clock
        self._stop = threading.Event()
        self._reported: set[tuple[str, str, str]] = set()

    def _due(self, stored: StoredSchedule, now: datetime) -> list[datetime]:
        """The due slots of one schedule; none (logged once) when they cannot be computed."""
        s = stored.schedule
        problem = slot_problem(s)
        if problem is None:
            try:
                return due_slots(stored, now)
            except Exception as exc:  # one schedule never stops the others
                problem = f"{type(exc).__name__}: {exc}"
        if (s.name, s.cron, s.timezone) not in self._reported:
            self._reported.add((s.name, s.cron, s.timezone))
            log.error("schedule %s skipped: its slots cannot be computed (%s)", s.name, problem)
        return []

    def tick(self) -> list[Fired]:
        """One pass: every due slot of every schedule, fired in order."""
        now = from_posix(self._clock())
        fired: list[Fired] = []
        for stored in self.queue.schedules():
            name = stored.schedule.name
            for slot in self._due(stored, now):
                ticket = self.queue.fire_schedule(name, slot)
                if ticket is None:
                    break  # another scheduler got there first (or it is paused): next pass
                fired.append(Fired(name, slot, ticket.entry_id, ticket.existing))
                log.info("schedule %s: slot %s submitted as entry %d", name, slot, ticket.entry_id)
        return fired

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        """Pass after pass until `stop`; a failed pass is logged and the next one tries again."""
        log.info("scheduler started (every %s)", self.interval)
        while not self._stop.is_set():
            try:
                self.tick()
            except StoreError as exc:
                log.warning("scheduler pass failed: %s", exc)
            except Exception:  # a bug must not end the loop (a worker's --scheduler thread)
                log.exception("scheduler pass failed")
            self._stop.wait(self.interval.total_seconds())
        log.info("scheduler stopped")

    def start_thread(self) -> threading.Thread:
        """`run` in a daemon thread (a worker's ``--scheduler``); `stop` ends it."""
        thread = threading.Thread(target=self.run, name="dg-scheduler", daemon=True)
        thread.start()
        return thread


__all__ = ["Fired", "Scheduler"]
