"""What the sync `Worker` waits with, in threads: the names of ``_compat_async.py``. A unit runs in
a daemon thread kept `IDLE` seconds for the next: one started per attempt cost ~0.3 ms (issue 38).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Collection
from concurrent import futures
from typing import TypeVar

from durable_graph.core.errors import ValidationError
from durable_graph.worker.signals import StopSignals

T = TypeVar("T")

ASYNC = False
SIGNALS_BY_DEFAULT = True  # a `Worker` run in the main thread notes SIGTERM and SIGINT (D226)
Interrupted = KeyboardInterrupt  # Ctrl-C where the worker installed no signal handler
Unit = futures.Future[None]  # a function run in a thread of its own
Wake = threading.Event
Signals = StopSignals
IDLE = 5.0

log = logging.getLogger("durable_graph.worker")
_work: queue.SimpleQueue[tuple[Unit, Callable[[], None], str]] = queue.SimpleQueue()
_lock = threading.Lock()
_idle = 0  # threads waiting for a unit, not yet promised one


def spawn(fn: Callable[[], None], name: str) -> Unit:
    """Run ``fn()`` in a thread: an idle one, or a new one."""
    global _idle
    unit: Unit = futures.Future()
    with _lock:
        idle, _idle = _idle > 0, max(0, _idle - 1)
    if idle:
        _work.put((unit, fn, name))
    else:
        threading.Thread(target=_serve, args=(unit, fn, name), daemon=True).start()
    return unit


def _serve(unit: Unit, fn: Callable[[], None], name: str) -> None:
    """Run ``fn``, then each unit given to this thread, until none comes for `IDLE` seconds."""
    global _idle
    while True:
        threading.current_thread().name = name
        if unit.set_running_or_notify_cancel():
            try:
                fn()
                unit.set_result(None)
            except BaseException as exc:
                log.error("unexpected error in %s", name, exc_info=exc)
                unit.set_exception(exc)
        threading.current_thread().name = "dg-idle"
        with _lock:
            _idle += 1
        while True:
            try:
                unit, fn, name = _work.get(timeout=IDLE)
                break
            except queue.Empty:
                with _lock:  # a thread promised a unit waits for it
                    if _idle > 0:
                        _idle -= 1
                        return


def wait_event(event: threading.Event, timeout: float | None) -> bool:
    return event.wait(timeout)


def wait_units(units: Collection[Unit], timeout: float | None = None) -> None:
    futures.wait(units, timeout=timeout)


def resolved(value: T) -> T:
    return value


def check_handler(handler: object) -> None:
    if not callable(handler):
        raise ValidationError("handler must be callable")
