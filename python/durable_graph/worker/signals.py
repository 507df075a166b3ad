"""SIGTERM and SIGINT, noted by a handler that takes no lock and acted on by the main thread.

A Python signal handler runs in the main thread between two of its bytecodes, and that thread may
hold a lock at that moment: `threading.Event.wait` holds its condition's lock for a few bytecodes
on each call, `with lock:` blocks and logging hold theirs. A handler that takes the same lock
(``event.set()``, a log line, ``with lock:``) waits for itself for ever, and the process then
ignores every later SIGTERM. That is how a ``durable-graph scheduler`` once hung in a test, rarely:
its handler set the Event its loop was waiting on, 0.1 s at a time.

So the handler only appends the signal's number to a list (one C call, no lock), and the main
thread takes the numbers between its waits of at most `POLL` seconds and acts on them (`wait`).
asyncio's ``add_signal_handler`` already calls its handler from the event loop.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType

POLL = 0.1  # the longest a main thread waits before it looks for a signal

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopSignals:
    """The stop signals noted while `installed` (if ``install``), given to ``on_signal`` by `wait`."""

    def __init__(
        self, on_signal: Callable[[int], None] = lambda signum: None, install: bool = True
    ) -> None:
        self._received: list[int] = []
        self._on_signal = on_signal
        self._install = install

    def _note(self, signum: int, frame: FrameType | None) -> None:
        self._received.append(signum)  # no lock: see the module's docstring

    def take(self) -> list[int]:
        """The signals received since the last call, oldest first (from the main thread)."""
        taken: list[int] = []
        while self._received:
            taken.append(self._received.pop(0))  # one C call: a handler between two is kept
        return taken

    @contextlib.contextmanager
    def installed(self) -> Iterator[StopSignals]:
        """Note SIGTERM and SIGINT while inside (in the main thread: Python runs no other's)."""
        if not self._install or threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {sig: signal.signal(sig, self._note) for sig in STOP_SIGNALS}
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def wait(self, event: threading.Event, timeout: float | None = None) -> bool:
        """Wait for ``event`` `POLL` seconds at a time, each signal taken given to ``on_signal``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not event.is_set():
            left = POLL if deadline is None else min(POLL, deadline - time.monotonic())
            if left <= 0:
                break
            event.wait(left)
            for signum in self.take():
                self._on_signal(signum)
        return event.is_set()


__all__ = ["POLL", "STOP_SIGNALS", "StopSignals"]
