"""A worker's options, checked once for `Worker` and `AsyncWorker`, and the timings derived from
them (renewal, claim wait, idle delay)."""

from __future__ import annotations

import os
import random
import socket
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Final, TypedDict

from durable_graph.core.errors import ValidationError
from durable_graph.core.model import ANY, BackoffPolicy, ClaimPolicy, TenantFilter
from durable_graph.core.scheduling import check_kinds
from durable_graph.core.validation import (
    check_backoff,
    check_duration,
    check_identifier,
    check_int,
    check_tenant_filter,
)

DEFAULT_BACKOFF: Final = BackoffPolicy()  # about 1 s, 2 s, 4 s ... capped at 5 min
DEFAULT_HEARTBEAT_EVERY: Final = timedelta(seconds=5)  # the registry lists a worker 30 s longer


def _check_heartbeat_every(value: object) -> timedelta:
    every = check_duration("heartbeat_every", value)
    if every > timedelta(hours=1):
        raise ValidationError("heartbeat_every must be at most 1 hour")
    return every


class WorkerOptions(TypedDict, total=False):
    """A worker's keyword options (both workers'); their defaults are `WorkerSettings.check`'s."""

    holder: str | None
    concurrency: int
    lease_ttl: timedelta
    claim_policy: ClaimPolicy
    tenant: TenantFilter
    poll_interval: timedelta
    shutdown_deadline: timedelta
    backoff: BackoffPolicy
    kinds: Sequence[str] | None
    """SPEC §15: lease only entries of these kinds (default: every kind; an `App`'s kinds)."""
    heartbeat_every: timedelta
    """How often `run` records in the store that the worker lives, idle or busy
    (`RunQueue.worker_heartbeat`; at most 1 h)."""


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    """A worker's checked configuration, with the timings derived from it (sync and async)."""

    holder: str
    concurrency: int
    lease_ttl: timedelta
    claim_policy: ClaimPolicy
    tenant: TenantFilter
    poll_interval: timedelta
    shutdown_deadline: timedelta
    backoff: BackoffPolicy = DEFAULT_BACKOFF
    kinds: tuple[str, ...] | None = None
    heartbeat_every: timedelta = DEFAULT_HEARTBEAT_EVERY
    max_attempts: int | None = None
    """An `App` kind's cap on attempts, below each entry's own ``max_attempts``."""

    @classmethod
    def check(
        cls,
        *,
        holder: str | None = None,
        concurrency: int = 1,
        lease_ttl: timedelta = timedelta(seconds=30),
        claim_policy: ClaimPolicy = ClaimPolicy(),
        tenant: TenantFilter = ANY,
        poll_interval: timedelta = timedelta(seconds=1),
        shutdown_deadline: timedelta = timedelta(seconds=30),
        backoff: BackoffPolicy = DEFAULT_BACKOFF,
        kinds: Sequence[str] | None = None,
        heartbeat_every: timedelta = DEFAULT_HEARTBEAT_EVERY,
    ) -> WorkerSettings:
        """Check every argument (`ValidationError` naming it); ``holder=None`` → host:pid:id."""
        if not isinstance(claim_policy, ClaimPolicy):
            raise ValidationError("claim_policy must be a ClaimPolicy")
        return cls(
            holder=check_identifier(
                "holder",
                holder
                if holder is not None
                else f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}",
            ),
            concurrency=check_int("concurrency", concurrency, minimum=1, maximum=1024),
            lease_ttl=check_duration("lease_ttl", lease_ttl),
            claim_policy=claim_policy,
            tenant=check_tenant_filter("tenant", tenant, allow_any=True),
            poll_interval=check_duration("poll_interval", poll_interval),
            shutdown_deadline=check_duration("shutdown_deadline", shutdown_deadline),
            backoff=check_backoff(backoff),
            kinds=check_kinds("kinds", kinds),
            heartbeat_every=_check_heartbeat_every(heartbeat_every),
        )

    @property
    def renew_every(self) -> float:
        """Seconds between renewals of the lease and the claim: ``min(renew_every, ttl / 3)``."""
        return min(self.claim_policy.renew_every, self.lease_ttl / 3).total_seconds()

    @property
    def claim_wait(self) -> float:
        """How long a busy thread's claim is waited for, lease held: one ttl + one renewal (D41)."""
        return self.claim_policy.ttl.total_seconds() + self.renew_every

    @property
    def claim_retry_delay(self) -> float:
        """Seconds between claim tries while the thread is busy (D41)."""
        return min(0.2, self.poll_interval.total_seconds())

    def idle_delay(self, scale: float = 1.0) -> float:
        """Seconds to wait after an empty poll (``scale=2`` after a busy thread, D41), jittered."""
        return self.poll_interval.total_seconds() * scale * random.uniform(0.5, 1.5)


__all__ = ["DEFAULT_BACKOFF", "DEFAULT_HEARTBEAT_EVERY", "WorkerOptions", "WorkerSettings"]
