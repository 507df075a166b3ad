"""Retention for the service (SPEC §24, issue 47): thread TTLs as LangGraph Server takes them,
and the sweeps as jobs of the queue.

A thread's ``ttl`` (``threads.create`` / ``threads.update``): minutes, or ``{"ttl": minutes,
"strategy": "delete" | "keep_latest"}`` as LangGraph's SDK sends it; ``langgraph.json``'s
``checkpointer.ttl`` (``strategy``, ``default_ttl``, ``sweep_interval_minutes``,
``sweep_limit``) gives new threads their default and sets the sweep up; its ``store.ttl``
(``default_ttl``, ``refresh_on_read``, ``sweep_interval_minutes``) does the same for the
store's items (`durable_graph.langgraph.store`).

The sweeps are §15 schedules (D262): ``retention:threads`` and ``retention:items``, each of kind
``retention`` on a queue thread of its own name, so each slot is one entry, run once however
many API processes and schedulers fire it, and two sweeps of a kind never overlap (one thread's
entries are leased one at a time). Any worker of a ``langgraph.json`` (``serve``'s, ``worker
--langgraph-config``) runs it (`with_retention`): a loop of short store transactions
(`sweep_threads`, `sweep_items`), each of at most ``sweep_limit`` threads.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from langgraph.store.base import TTLConfig

from durable_graph.core.async_protocols import AsyncCheckpointer
from durable_graph.core.errors import ValidationError
from durable_graph.core.model import JSON, THREAD_TTL_STRATEGIES, ThreadTtl
from durable_graph.core.scheduling import Schedule
from durable_graph.core.validation import MAX_SWEEP_LIMIT, check_thread_ttl
from durable_graph.service.records import iso

if TYPE_CHECKING:
    from durable_graph.aio import AsyncRunContext

log = logging.getLogger("durable_graph.service")

KIND: Final = "retention"
THREADS: Final = "retention:threads"
"""The thread sweep's schedule, and the queue thread its runs are entries of."""
ITEMS: Final = "retention:items"
"""The item sweep's schedule, and its queue thread."""
DEFAULT_SWEEP_INTERVAL: Final = 5
"""Minutes between sweeps when ``sweep_interval_minutes`` is not given (the reference's)."""
DEFAULT_SWEEP_LIMIT: Final = 1000
"""Threads one sweep transaction takes when ``sweep_limit`` is not given (D263)."""
MAX_ROUNDS: Final = 100
"""Transactions one sweep job runs at most; what is left waits for the next slot."""
ITEM_BATCH: Final = 1000


@dataclass(frozen=True, slots=True)
class ThreadTtlConfig:
    """``checkpointer.ttl`` of ``langgraph.json``, checked."""

    strategy: str = "delete"
    default_ttl: float | None = None
    sweep_interval_minutes: int = DEFAULT_SWEEP_INTERVAL
    sweep_limit: int = DEFAULT_SWEEP_LIMIT


@dataclass(frozen=True, slots=True)
class StoreTtlConfig:
    """``store.ttl`` of ``langgraph.json``, checked."""

    default_ttl: float | None = None
    refresh_on_read: bool = True
    sweep_interval_minutes: int | None = None


def _object(value: object, name: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValidationError(f"{name}: must be an object")
    return value


def _interval(value: object, name: str) -> int:
    """Minutes between sweeps, as a cron can space them: 1..59, or whole hours dividing a day."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValidationError(f"{name}: a whole number of minutes >= 1, got {value!r}")
    if value >= 60 and (value % 60 or 24 % (value // 60)):
        raise ValidationError(
            f"{name}: 1 to 59 minutes, or whole hours that divide a day (60, 120, 180, 240, "
            f"360, 480, 720, 1440), got {value}"
        )
    return value


def cron_every(minutes: int) -> str:
    """The cron expression of a sweep every ``minutes`` (`_interval`'s values): slots at the
    minutes of each hour divisible by it (a last gap of the hour shorter when it does not
    divide 60), or at the hours of the day divisible by its hours."""
    if minutes < 60:
        return f"*/{minutes} * * * *"
    return f"0 */{minutes // 60} * * *"


def thread_ttl_config(value: object) -> ThreadTtlConfig | None:
    """``checkpointer.ttl`` checked (`ValidationError` naming the key), None when absent."""
    if value is None:
        return None
    given = _object(value, "checkpointer.ttl")
    strategy = given.get("strategy", "delete")
    if strategy not in THREAD_TTL_STRATEGIES:
        raise ValidationError(
            f"checkpointer.ttl.strategy: 'delete' or 'keep_latest', got {strategy!r}"
        )
    default = given.get("default_ttl")
    if default is not None:
        try:
            check_thread_ttl(default, strategy)
        except ValidationError as exc:
            raise ValidationError(f"checkpointer.ttl.default_ttl: {exc}") from None
    interval = _interval(
        given.get("sweep_interval_minutes", DEFAULT_SWEEP_INTERVAL),
        "checkpointer.ttl.sweep_interval_minutes",
    )
    limit = given.get("sweep_limit", DEFAULT_SWEEP_LIMIT)
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_SWEEP_LIMIT:
        raise ValidationError(
            f"checkpointer.ttl.sweep_limit: 1..{MAX_SWEEP_LIMIT} threads a transaction, "
            f"got {limit!r}"
        )
    return ThreadTtlConfig(strategy, None if default is None else float(default), interval, limit)


def store_ttl_config(value: object) -> StoreTtlConfig | None:
    """``store.ttl`` checked (`ValidationError` naming the key), None when absent."""
    if value is None:
        return None
    given = _object(value, "store.ttl")
    default = given.get("default_ttl")
    if default is not None and (
        not isinstance(default, int | float)
        or isinstance(default, bool)
        or not math.isfinite(default)
        or default <= 0
    ):
        raise ValidationError(f"store.ttl.default_ttl: minutes > 0 or null, got {default!r}")
    refresh = given.get("refresh_on_read", True)
    if not isinstance(refresh, bool):
        raise ValidationError(f"store.ttl.refresh_on_read: true or false, got {refresh!r}")
    interval = given.get("sweep_interval_minutes")
    if interval is not None:
        interval = _interval(interval, "store.ttl.sweep_interval_minutes")
    return StoreTtlConfig(None if default is None else float(default), refresh, interval)


def item_ttl(config: StoreTtlConfig | None) -> TTLConfig | None:
    """``store.ttl`` as LangGraph's ``TTLConfig`` for the graphs' store: its ``default_ttl``
    for an item put without one, ``refresh_on_read`` (None: no TTL)."""
    if config is None:
        return None
    given = TTLConfig(refresh_on_read=config.refresh_on_read)
    if config.default_ttl is not None:
        given["default_ttl"] = config.default_ttl
    return given


def requested_ttl(value: object, default: ThreadTtlConfig | None) -> tuple[float, str] | None:
    """A request's ``ttl`` (minutes, or ``{"ttl", "strategy"}``), checked before anything is
    written (`ValidationError` naming ``ttl``); absent: the configured default, if any."""
    if value is None:
        if default is None or default.default_ttl is None:
            return None
        return default.default_ttl, default.strategy
    strategy = default.strategy if default is not None else "delete"
    if isinstance(value, Mapping):
        unknown = set(value) - {"ttl", "default_ttl", "strategy"}
        if unknown:
            raise ValidationError(f"ttl: unknown field(s) {sorted(unknown)}")
        strategy = value.get("strategy") or strategy
        # ``default_ttl`` read as ``ttl`` where ``ttl`` is absent, as the reference maps it.
        minutes = value.get("ttl", value.get("default_ttl"))
        if minutes is None:
            raise ValidationError("ttl.ttl: the TTL in minutes is required")
    else:
        minutes = value
    try:
        ttl, how = check_thread_ttl(minutes, strategy)
    except ValidationError as exc:
        name = "ttl.strategy" if str(exc).startswith("strategy") else "ttl"
        raise ValidationError(f"{name}: {exc}") from None
    assert ttl is not None  # minutes was not None
    return ttl, how


def ttl_json(ttl: ThreadTtl) -> dict[str, Any]:
    """A thread's ``ttl`` as the reference answers ``threads.get(include=["ttl"])``."""
    return {
        "strategy": ttl.strategy,
        "ttl_minutes": ttl.minutes,
        "expires_at": iso(ttl.expires_at),
    }


async def set_up(
    store: AsyncCheckpointer,
    threads: ThreadTtlConfig | None,
    items: StoreTtlConfig | None,
) -> None:
    """Put the sweeps' schedules as ``langgraph.json`` says, and remove one it no longer asks
    for (a deployment that drops its TTL stops sweeping). The last process to start wins."""
    queue = store.run_queue
    wanted: dict[str, tuple[int, JSON]] = {}
    if threads is not None:
        wanted[THREADS] = (
            threads.sweep_interval_minutes,
            {"sweep": "threads", "limit": threads.sweep_limit},
        )
    if items is not None and items.sweep_interval_minutes is not None:
        wanted[ITEMS] = (items.sweep_interval_minutes, {"sweep": "items", "batch": ITEM_BATCH})
    for name in (THREADS, ITEMS):
        if name in wanted:
            minutes, given = wanted[name]
            await queue.put_schedule(
                Schedule(
                    name=name, cron=cron_every(minutes), thread_id=name, input=given, kind=KIND
                )
            )
            log.info("retention: %s every %d minute(s)", name, minutes)
        elif await queue.remove_schedule(name):
            log.info("retention: %s removed (langgraph.json no longer asks for it)", name)


AsyncHandler = Callable[["AsyncRunContext"], Awaitable[JSON]]


def with_retention(handler: AsyncHandler) -> AsyncHandler:
    """The worker's handler: a ``retention`` entry is a sweep; anything else is ``handler``'s."""

    async def dispatch(ctx: AsyncRunContext) -> JSON:
        if ctx.entry.kind == KIND:
            return await sweep(ctx.store, ctx.input)
        return await handler(ctx)

    return dispatch


async def sweep(store: AsyncCheckpointer, given: JSON) -> JSON:
    """One sweep job: short transactions until one takes fewer than its limit (or
    `MAX_ROUNDS`); its counts."""
    what = given.get("sweep") if isinstance(given, dict) else None
    if what == "threads" and isinstance(given, dict):
        limit = given.get("limit", DEFAULT_SWEEP_LIMIT)
        deleted = kept = checked = 0
        for _ in range(MAX_ROUNDS):
            done = await store.sweep_threads(limit)
            deleted, kept = deleted + done.deleted, kept + done.kept_latest
            checked += done.checked
            if done.checked < limit:
                break
        if deleted or kept:
            log.info("retention: %d thread(s) deleted, %d pruned to their head", deleted, kept)
        return {"deleted": deleted, "kept_latest": kept, "checked": checked}
    if what == "items" and isinstance(given, dict):
        batch = given.get("batch", ITEM_BATCH)
        removed = 0
        for _ in range(MAX_ROUNDS):
            gone = await store.run_queue.sweep_items(batch)
            removed += gone
            if gone < batch:
                break
        if removed:
            log.info("retention: %d expired item(s) removed", removed)
        return {"removed": removed}
    raise ValidationError(f"input: a retention job names its sweep, got {given!r}")


__all__ = [
    "ITEMS",
    "KIND",
    "THREADS",
    "StoreTtlConfig",
    "ThreadTtlConfig",
    "cron_every",
    "item_ttl",
    "requested_ttl",
    "set_up",
    "store_ttl_config",
    "sweep",
    "thread_ttl_config",
    "ttl_json",
    "with_retention",
]
