"""`HookedStore`: the real in-memory store with one-shot test hooks, for the worker tests of the
attempt flow's former drifts (`test_worker.py` and `test_aio_worker.py` run the same cases)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from durable_graph.core.model import AttemptBegun, Checkpoint, Claim, ClaimPolicy
from durable_graph.memory.store import InMemoryCheckpointer

_POLICY = ClaimPolicy()


class HookedStore(InMemoryCheckpointer):
    """The real in-memory store, running a test's one-shot hook first in `claim` or in `get`.

    `begin_attempt` reads the head itself (D73); when it found the claim busy, the worker goes on
    step by step and reads the head with `get` right before the handler starts: the `get` hook
    waits for that call (the `get` that `begin_attempt` composes inside its one call skips it).
    ``hooked_claim_taken`` is set once the claim made after the claim hook is taken.
    """

    _in_begin = False

    def __init__(self) -> None:
        super().__init__()
        self.before_claim: Callable[[], None] | None = None
        self.before_plan: Callable[[], None] | None = None
        self.hooked_claim_taken = threading.Event()

    def begin_attempt(self, *args: Any, **kwargs: Any) -> AttemptBegun | None:
        self._in_begin = True
        try:
            return super().begin_attempt(*args, **kwargs)
        finally:
            self._in_begin = False

    def claim(self, thread_id: str, holder: str, policy: ClaimPolicy = _POLICY) -> Claim:
        hook, self.before_claim = self.before_claim, None
        if hook is None:
            return super().claim(thread_id, holder, policy)
        hook()
        claim = super().claim(thread_id, holder, policy)
        self.hooked_claim_taken.set()
        return claim

    def get(self, thread_id: str, checkpoint_id: str | None = None) -> Checkpoint | None:
        if self._in_begin:
            return super().get(thread_id, checkpoint_id)
        hook, self.before_plan = self.before_plan, None
        if hook is not None:
            hook()
        return super().get(thread_id, checkpoint_id)
