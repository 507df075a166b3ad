"""What a backend's tests give the contract suites: a fresh store and a handle on its clock."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from durable_graph.core.checkpointer import Checkpointer


class ClockControl(Protocol):
    """Moves the store's clock forward (the store decides time, SPEC §4)."""

    def advance(self, delta: timedelta) -> None: ...


class ManualClock:
    """A store clock for the in-memory and SQLite stores: POSIX seconds that move only on demand.

    Pass it as ``clock=`` (it is a zero-argument callable); `advance` moves it forward.
    """

    def __init__(self, start: float = 1_750_000_000.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, delta: timedelta) -> None:
        with self._lock:
            self._now += delta.total_seconds()


@dataclass
class Harness:
    """A fresh store (with its ``run_queue``) and the control of its clock."""

    store: Checkpointer
    clock: ClockControl
