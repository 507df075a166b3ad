"""The SqlCalls of the worker registry (``sql/86_workers.sql``; `durable_graph.core.workers`).
Same shape as `durable_graph.postgres.calls`: validate, then one function call whose rows the
decoder turns into model values."""

from __future__ import annotations

from datetime import UTC

from durable_graph.core.workers import (
    WorkerSeen,
    check_beat,
    check_seen_within,
    check_worker_state,
    check_workers_page,
)
from durable_graph.postgres.calls import SqlCall, _call
from durable_graph.postgres.config import PostgresConfig
from durable_graph.postgres.rows import Row, each, exactly_one


def _seen_of(row: Row) -> WorkerSeen:
    kinds = row["kinds"]
    return WorkerSeen(
        row["holder"],
        row["host"],
        int(row["pid"]),
        None if kinds is None else tuple(kinds),
        check_worker_state(row["state"]),
        row["started_at"].astimezone(UTC),
        row["last_seen"].astimezone(UTC),
    )


def worker_heartbeat(config: PostgresConfig, beat: object) -> SqlCall[WorkerSeen]:
    b = check_beat(beat)
    args = [
        ("text", b.holder),
        ("text", b.host),
        ("integer", b.pid),
        ("text[]", None if b.kinds is None else list(b.kinds)),
        ("text", b.state),
    ]
    return _call(config, "worker_heartbeat", "dg_worker_heartbeat_v1", args, exactly_one(_seen_of))


def workers(
    config: PostgresConfig, seen_within: object, after: object, limit: object
) -> SqlCall[list[WorkerSeen]]:
    page_after, page_limit = check_workers_page(after, limit)
    args = [
        ("interval", check_seen_within(seen_within)),
        ("text", page_after),
        ("integer", page_limit),
    ]
    return _call(config, "workers", "dg_workers_v2", args, each(_seen_of))


__all__ = ["worker_heartbeat", "workers"]
