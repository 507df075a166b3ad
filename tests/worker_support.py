"""What the sync and async worker tests (`test_worker.py`, `test_aio_worker.py`) share."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from durable_graph import ClaimPolicy
from durable_graph.core.model import BackoffPolicy

FAST: dict[str, Any] = {
    "lease_ttl": timedelta(milliseconds=600),
    "claim_policy": ClaimPolicy(
        ttl=timedelta(milliseconds=600), renew_every=timedelta(milliseconds=150)
    ),
    "poll_interval": timedelta(milliseconds=50),
    "backoff": BackoffPolicy(base=timedelta(0)),  # retries at once (backoff: test_operating_*)
}
"""Worker options for tests: short lease and claim ttls, quick polls, retries at once."""
