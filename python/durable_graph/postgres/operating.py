"""The SqlCalls of the queue's operating methods (SPEC §13): `defer` and `retry`.

Kept apart from `calls` (one module per SQL file, ``sql/85_operating.sql``); same shape: validate,
then one function call whose rows the decoder turns into model values.
"""

from __future__ import annotations

import json

from durable_graph.core.model import QueueEntry, Ticket
from durable_graph.core.validation import check_duration, check_error_text, check_lease
from durable_graph.postgres.calls import SqlCall, _call, entry_args, lease_args
from durable_graph.postgres.config import PostgresConfig
from durable_graph.postgres.rows import entry_of, exactly_one, ticket_of


def defer(
    config: PostgresConfig, lease: object, delay: object, error: object
) -> SqlCall[QueueEntry]:
    ls = check_lease("lease", lease)
    args = lease_args(
        ls,
        ("interval", check_duration("delay", delay, allow_zero=True)),
        ("text", None if error is None else _json_string(error, config.max_value_bytes)),
    )
    return _call(config, "defer", "dg_defer_v1", args, exactly_one(entry_of))


def _json_string(error: object, max_bytes: int) -> str:
    """The error as the JSON string the SQL stores (as a failed outcome's detail)."""
    return json.dumps(check_error_text("error", error, max_bytes), ensure_ascii=False)


def retry(config: PostgresConfig, entry_id: object, tenant: object) -> SqlCall[Ticket]:
    args = entry_args(entry_id, tenant)
    return _call(config, "retry", "dg_retry_v1", args, exactly_one(ticket_of))


__all__ = ["defer", "retry"]
