"""`HookedStore`: the real in-memory store with one-shot test hooks, for the worker tests of the
attempt flow's former drifts (`test_worker.py` and `test_aio_worker.py` run the same cases)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from durable_graph.core.model import AttemptBegun, Claim, ClaimPolicy
from durable_graph.memory.store import InMemoryCheckpointer

_POLICY = ClaimPolicy()


class HookedStore(InMemoryCheckpointer):
    """The real in-memory store, running a test's one-shot hook first in `claim`, or after
    `claim_attempt`.

    `begin_attempt` reads the head itself (D73); when it found the claim busy, the worker takes
    the claim and the plan with `claim_attempt` (D231), then starts the handler: the
    ``before_handler`` hook runs right after that call returns, in the worker's gap before the
    handler. ``hooked_claim_taken`` is set once the claim made after the claim hook is taken.
    """

    def __init__(self) -> None:
        super().__init__()
        self.before_claim: Callable[[], None] | None = None
        self.before_handler: Callable[[], None] | None = None
        self.hooked_claim_taken = threading.Event()

    def claim(self, thread_id: str, holder: str, policy: ClaimPolicy = _POLICY) -> Claim:
        hook, self.before_claim = self.before_claim, None
        if hook is None:
            return super().claim(thread_id, holder, policy)
        hook()
        claim = super().claim(thread_id, holder, policy)
        self.hooked_claim_taken.set()
        return claim

    def claim_attempt(self, *args: Any, **kwargs: Any) -> AttemptBegun:
        begun = super().claim_attempt(*args, **kwargs)
        hook, self.before_handler = self.before_handler, None
        if hook is not None:
            hook()
        return begun
