"""Change notification by polling (SPEC §6: "LISTEN/NOTIFY later"), shared by the SQLite and
PostgreSQL stores.

Deadlines are monotonic wall-clock time, never the store clock (D21, rule 23). The in-memory store
waits on its condition variable instead, and `durable_graph.aio` has the asyncio twin of these
loops.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import TypeVar

from .model import Event

T = TypeVar("T")


def poll(fetch: Callable[[], T], done: Callable[[T], bool], timeout: timedelta, every: float) -> T:
    """Call ``fetch`` every ``every`` seconds until ``done(value)`` or the timeout passes.

    Returns the last value fetched: the one that was done, or the one read at the timeout.
    """
    deadline = time.monotonic() + timeout.total_seconds()
    while True:
        value = fetch()
        if done(value):
            return value
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return value
        time.sleep(min(every, remaining))


def follow(
    read_after: Callable[[int], list[Event]],
    after_seq: int,
    every: float,
    check_open: Callable[[], None],
) -> Iterator[Event]:
    """Every event after ``after_seq``, forever, reading again every ``every`` s when caught up.

    ``check_open`` runs before each event is handed out, so a live iterator of a closed store
    raises `ProcessingError` on its next step (rule 8).
    """
    cursor = after_seq
    while True:
        batch = read_after(cursor)
        for event in batch:
            check_open()
            cursor = event.seq
            yield event
        if not batch:
            time.sleep(every)


__all__ = ["follow", "poll"]
