"""One pure function per public method: validate the arguments, return the `SqlCall` that does it.

A `SqlCall` is the whole conversation with the database for one method: the statement (``SELECT *
FROM "<schema>".dg_<method>_v1(...)``, the schema composed with `psycopg.sql.Identifier`), its
parameters, and the decoder (from `durable_graph.postgres.rows`) that turns the fetched rows into
model values. Nothing here does I/O: the sync store (`durable_graph.postgres.store`) executes
SqlCalls on a pooled connection, and the async store executes the very same SqlCalls, so there is
one copy of every query and every decoder.

Arguments go through `durable_graph.core.validation` first: bad input raises `ValidationError` naming
the argument before any SQL is composed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC
from typing import Generic, TypeVar

from psycopg import sql

from durable_graph.core.errors import ProcessingError, StoreError
from durable_graph.core.fast_path import check_submissions
from durable_graph.core.model import (
    ANY,
    AttemptStart,
    Checkpoint,
    Claim,
    EffectRecord,
    Event,
    Lease,
    PruneResult,
    QueueEntry,
    QueueStats,
    ThreadInfo,
    ThreadSweep,
    ThreadTtl,
    Ticket,
    TraceContext,
)
from durable_graph.core.scheduling import check_kinds
from durable_graph.core.validation import (
    MAX_PAGE_ROWS,
    EncodedCommit,
    EncodedEvent,
    check_after_seq,
    check_claim,
    check_claim_policy,
    check_commit,
    check_duration,
    check_entry_id,
    check_events,
    check_identifier,
    check_int,
    check_lease,
    check_limit,
    check_listing,
    check_metadata_filter,
    check_optional_identifier,
    check_retention,
    check_run_ids,
    check_submission,
    check_sweep_limit,
    check_tenant_filter,
    check_thread_ttl,
    check_trace_context,
    check_writes,
    encode_json,
    encode_outcome,
)
from durable_graph.postgres.config import PostgresConfig
from durable_graph.postgres.rows import (
    Row,
    Rows,
    attempt_of,
    checkpoint_of,
    claim_of,
    each,
    effect_of,
    entry_of,
    event_of,
    exactly_one,
    first_or_none,
    lease_of,
    lease_with_attempt_of,
    nothing,
    one,
    prune_result_of,
    record,
    stats_of,
    thread_of,
    ticket_of,
    trace_context_of,
)

T = TypeVar("T")
Arg = tuple[str, object]
"""One argument of a SQL function call: its SQL type (the cast that pins the overload), its value."""


@dataclass(frozen=True, slots=True)
class SqlCall(Generic[T]):
    """One SQL function call: the statement, its parameters, and how to read its rows."""

    name: str
    query: bytes
    params: tuple[object, ...]
    decode: Callable[[Rows], T]


@functools.lru_cache(maxsize=512)
def statement(schema: str, function: str, types: tuple[str, ...]) -> bytes:
    """``SELECT * FROM "<schema>".<function>(%s::type, ...)``; casts pin the overload.

    Composed with `psycopg.sql.Identifier` and rendered once: psycopg would otherwise render a
    `sql.Composed` again on every execute. The names are ASCII (`check_schema`, our function
    names), so the bytes are the same in every client encoding.
    """
    args = sql.SQL(", ").join(sql.SQL("%s::" + t) for t in types)
    composed = sql.SQL("SELECT * FROM {}.{}({})").format(
        sql.Identifier(schema), sql.Identifier(function), args
    )
    return composed.as_bytes(None)


def _call(
    config: PostgresConfig,
    name: str,
    function: str,
    args: Sequence[Arg],
    decode: Callable[[Rows], T],
) -> SqlCall[T]:
    # [(type, value), ...] -> types, values (none for a function of no argument, SPEC §15's lists)
    types, values = zip(*args, strict=True) if args else ((), ())
    return SqlCall(
        name, statement(config.schema, function, types), values, _defensive(name, decode)
    )


def _defensive(name: str, decode: Callable[[Rows], T]) -> Callable[[Rows], T]:
    """``decode``, with any failure a `ProcessingError` (SPEC §10 rule 1, issue #11).

    The SQL functions refuse what could not be read back, so a row that still cannot be decoded
    (written before those checks, or by hand) is a database fault, never a raw exception.
    """

    def run(rows: Rows) -> T:
        try:
            return decode(rows)
        except StoreError:
            raise
        except Exception as exc:
            raise ProcessingError(f"{name}: a row could not be decoded: {exc}") from exc

    return run


def _page(
    config: PostgresConfig,
    name: str,
    function: str,
    args: Sequence[Arg],
    limit: int,
    row_of: Callable[[Row], T],
) -> SqlCall[list[T]]:
    """A paged read: ``args``, then the page size (``limit``, checked), every row decoded."""
    return _call(config, name, function, [*args, ("integer", limit)], each(row_of))


# --- arguments the SQL functions share -------------------------------------------------------


def _claim_args(claim: Claim | None) -> list[Arg]:
    """A claim as the functions take it: its thread and fencing token (NULLs for none)."""
    if claim is None:
        return [("text", None), ("bigint", None)]
    return [("text", claim.thread_id), ("bigint", claim.token)]


def _events_args(events: Sequence[EncodedEvent]) -> list[Arg]:
    """Events as three parallel arrays (kinds, payloads, created_at): one parameter each."""
    return [
        ("text[]", [e.kind for e in events]),
        ("text[]", [e.payload for e in events]),
        ("timestamptz[]", [e.created_at for e in events]),
    ]


def _commit_args(cm: EncodedCommit) -> list[Arg]:
    """A commit's arguments after the claim, in the order of `dg_commit_v1`'s parameters."""
    return [
        ("text", cm.checkpoint_id),
        ("text", cm.parent_id),
        ("text", cm.run_id),
        ("text", cm.state),
        ("text", cm.metadata),
        ("text[]", list(cm.next)),
        *_events_args(cm.events),
        ("timestamptz", cm.created_at),
        ("text", cm.parent_thread_id),
        *_claim_args(cm.fence),
    ]


def _claimed_writes(
    config: PostgresConfig, claim: object, checkpoint_id: object, writes: object
) -> list[Arg]:
    """The claim, the checkpoint and the writes (four parallel arrays) of the put_writes calls."""
    c = check_claim("claim", claim)
    checkpoint_id = check_identifier("checkpoint_id", checkpoint_id)
    ws = check_writes("writes", writes, config.max_value_bytes)
    return [
        *_claim_args(c),
        ("text", checkpoint_id),
        ("text[]", [w.task_id for w in ws]),
        ("text[]", [w.channel for w in ws]),
        ("text[]", [w.value for w in ws]),
        ("text[]", [w.task_path for w in ws]),
    ]


def _in_thread(thread_id: object, name: str, value: object) -> list[Arg]:
    """A thread and an optional id ``name`` in it: a checkpoint, or where a page starts."""
    return [
        ("text", check_identifier("thread_id", thread_id)),
        ("text", check_optional_identifier(name, value)),
    ]


def _tenant_args(name: str, tenant: object, *, allow_any: bool) -> list[Arg]:
    t = check_tenant_filter(name, tenant, allow_any=allow_any)
    if t is ANY:
        return [("boolean", True), ("text", None)]
    return [("boolean", False), ("text", t)]


def _kinds_arg(kinds: object) -> list[str] | None:
    """`lease(kinds=...)` (SPEC §15): checked; None for every kind."""
    checked = check_kinds("kinds", kinds)
    return None if checked is None else list(checked)


def lease_args(ls: Lease, *args: Arg) -> list[Arg]:
    """A call fenced by a lease: its entry and token, ``args``, then the entry's tenant."""
    return [("bigint", ls.entry.entry_id), ("bigint", ls.token), *args, ("text", ls.entry.tenant)]


def entry_args(entry_id: object, tenant: object) -> list[Arg]:
    """An entry named by id, seen from a tenant (None: the no-tenant namespace)."""
    return [
        ("bigint", check_entry_id(entry_id)),
        ("text", check_optional_identifier("tenant", tenant)),
    ]


# --- checkpointer: claims -------------------------------------------------------------------


def claim(
    config: PostgresConfig, thread_id: object, holder: object, policy: object
) -> SqlCall[Claim]:
    thread_id = check_identifier("thread_id", thread_id)
    holder = check_identifier("holder", holder)
    ttl = check_claim_policy(policy).ttl
    args = [("text", thread_id), ("text", holder), ("interval", ttl)]
    return _call(config, "claim", "dg_claim_v1", args, exactly_one(claim_of))


def renew_claim(config: PostgresConfig, claim: object) -> SqlCall[Claim]:
    args = _claim_args(check_claim("claim", claim))
    return _call(config, "renew_claim", "dg_renew_claim_v1", args, exactly_one(claim_of))


def release_claim(config: PostgresConfig, claim: object) -> SqlCall[None]:
    args = _claim_args(check_claim("claim", claim))
    return _call(config, "release_claim", "dg_release_claim_v1", args, nothing)


# --- checkpointer: writes -------------------------------------------------------------------


def commit(config: PostgresConfig, claim: object, commit: object) -> SqlCall[Checkpoint]:
    c = check_claim("claim", claim)
    args = _claim_args(c) + _commit_args(check_commit(commit, config.max_value_bytes))
    return _call(config, "commit", "dg_commit_v1", args, exactly_one(checkpoint_of))


def put_writes(
    config: PostgresConfig, claim: object, checkpoint_id: object, writes: object
) -> SqlCall[None]:
    args = _claimed_writes(config, claim, checkpoint_id, writes)
    return _call(config, "put_writes", "dg_put_writes_v2", args, nothing)


def put_writes_fenced(
    config: PostgresConfig, claim: object, checkpoint_id: object, writes: object, fence: object
) -> SqlCall[None]:
    args = _claimed_writes(config, claim, checkpoint_id, writes)
    args += _claim_args(check_claim("fence", fence))
    return _call(config, "put_writes_fenced", "dg_put_writes_fenced_v2", args, nothing)


def put_writes_and_commit(
    config: PostgresConfig, claim: object, checkpoint_id: object, writes: object, commit: object
) -> SqlCall[Checkpoint]:
    args = _claimed_writes(config, claim, checkpoint_id, writes)
    args += _commit_args(check_commit(commit, config.max_value_bytes))
    decode = exactly_one(checkpoint_of)
    return _call(config, "put_writes_and_commit", "dg_put_writes_and_commit_v2", args, decode)


def append_events(
    config: PostgresConfig, claim: object, events: object, run_id: object
) -> SqlCall[list[Event]]:
    c = check_claim("claim", claim)
    es = check_events("events", events, config.max_value_bytes)
    run_id = check_optional_identifier("run_id", run_id)
    args = [*_claim_args(c), *_events_args(es), ("text", run_id)]
    return _call(config, "append_events", "dg_append_events_v1", args, each(event_of))


def record_effect(
    config: PostgresConfig, claim: object, key: object, value: object, run_id: object
) -> SqlCall[EffectRecord]:
    c = check_claim("claim", claim)
    key = check_identifier("key", key)
    text = encode_json("value", value, config.max_value_bytes)
    run_id = check_optional_identifier("run_id", run_id)
    args = [*_claim_args(c), ("text", key), ("text", text), ("text", run_id)]
    return _call(config, "record_effect", "dg_record_effect_v1", args, exactly_one(effect_of))


def retract_turn(config: PostgresConfig, claim: object) -> SqlCall[Checkpoint | None]:
    args = _claim_args(check_claim("claim", claim))
    return _call(config, "retract_turn", "dg_retract_turn_v1", args, first_or_none(checkpoint_of))


def prune(config: PostgresConfig, thread_id: object, policy: object) -> SqlCall[PruneResult]:
    thread_id = check_identifier("thread_id", thread_id)
    p = check_retention(policy)
    args = [("text", thread_id), ("integer", p.keep_last), ("interval", p.max_age)]
    return _call(config, "prune", "dg_prune_v1", args, exactly_one(prune_result_of))


@dataclass(frozen=True, slots=True)
class PruneBatch:
    """One batch of `prune_all`: its counts, how many threads it saw, and where to go on."""

    result: PruneResult
    threads_seen: int
    last_thread_id: str | None


def _prune_batch_of(rows: Rows) -> PruneBatch:
    row = one(rows)
    return PruneBatch(prune_result_of(row), int(row["threads_seen"]), row["last_thread_id"])


def prune_batch(
    config: PostgresConfig, policy: object, batch: object, after: str | None
) -> SqlCall[PruneBatch]:
    """One transaction of `prune_all`: up to ``batch`` threads with id > ``after``."""
    p = check_retention(policy)
    size = check_limit("batch", batch)
    args = [
        ("text", check_optional_identifier("after", after)),
        ("integer", size),
        ("integer", p.keep_last),
        ("interval", p.max_age),
    ]
    return _call(config, "prune_all", "dg_prune_batch_v1", args, _prune_batch_of)


def delete_thread(config: PostgresConfig, thread_id: object, fence: object) -> SqlCall[bool]:
    thread_id = check_identifier("thread_id", thread_id)
    f = None if fence is None else check_claim("fence", fence)
    args = [("text", thread_id), *_claim_args(f)]
    decode = exactly_one(lambda row: bool(row["existed"]))
    return _call(config, "delete_thread", "dg_delete_thread_v1", args, decode)


def delete_runs(config: PostgresConfig, run_ids: object) -> SqlCall[int]:
    args: list[Arg] = [("text[]", list(dict.fromkeys(check_run_ids(run_ids))))]
    decode = exactly_one(lambda row: int(row["removed"]))
    return _call(config, "delete_runs", "dg_delete_runs_v1", args, decode)


def copy_thread(
    config: PostgresConfig, source_thread_id: object, target_thread_id: object
) -> SqlCall[bool]:
    source = check_identifier("source_thread_id", source_thread_id)
    target = check_identifier("target_thread_id", target_thread_id)
    args = [("text", source), ("text", target)]
    decode = exactly_one(lambda row: bool(row["copied"]))
    return _call(config, "copy_thread", "dg_copy_thread_v1", args, decode)


# --- thread TTLs (SPEC §24.1; sql/48_thread_ttl.sql) --------------------------------------

_thread_ttl_of = record(ThreadTtl, expires_at=lambda v: v.astimezone(UTC))


def set_thread_ttl(
    config: PostgresConfig, thread_id: object, minutes: object, strategy: object
) -> SqlCall[ThreadTtl | None]:
    thread_id = check_identifier("thread_id", thread_id)
    ttl, how = check_thread_ttl(minutes, strategy)
    args = [("text", thread_id), ("double precision", ttl), ("text", how)]
    return _call(
        config, "set_thread_ttl", "dg_set_thread_ttl_v1", args, first_or_none(_thread_ttl_of)
    )


def thread_ttl(config: PostgresConfig, thread_id: object) -> SqlCall[ThreadTtl | None]:
    args = [("text", check_identifier("thread_id", thread_id))]
    return _call(config, "thread_ttl", "dg_thread_ttl_v1", args, first_or_none(_thread_ttl_of))


def sweep_threads(config: PostgresConfig, limit: object) -> SqlCall[ThreadSweep]:
    args: list[Arg] = [("integer", check_sweep_limit(limit))]
    decode = exactly_one(
        lambda row: ThreadSweep(row["deleted"], row["kept_latest"], row["checked"])
    )
    return _call(config, "sweep_threads", "dg_sweep_threads_v1", args, decode)


# --- checkpointer: reads --------------------------------------------------------------------


def get(
    config: PostgresConfig, thread_id: object, checkpoint_id: object
) -> SqlCall[Checkpoint | None]:
    args = _in_thread(thread_id, "checkpoint_id", checkpoint_id)
    return _call(config, "get", "dg_get_v1", args, first_or_none(checkpoint_of))


def history(
    config: PostgresConfig, thread_id: object, before: object, limit: object
) -> SqlCall[list[Checkpoint]]:
    args = _in_thread(thread_id, "before", before)
    return _page(
        config, "history", "dg_history_v1", args, check_limit("limit", limit), checkpoint_of
    )


def search(
    config: PostgresConfig, thread_id: object, metadata: object, before: object, limit: object
) -> SqlCall[list[Checkpoint]]:
    thread_id = check_identifier("thread_id", thread_id)
    wanted = check_metadata_filter(metadata, config.max_value_bytes)
    before = check_optional_identifier("before", before)
    args = [
        ("text", thread_id),
        ("text", encode_json("metadata", wanted, config.max_value_bytes)),
        ("text", before),
    ]
    return _page(config, "search", "dg_search_v1", args, check_limit("limit", limit), checkpoint_of)


def latest_of_runs(
    config: PostgresConfig, thread_id: object, run_ids: object
) -> SqlCall[Checkpoint | None]:
    thread_id = check_identifier("thread_id", thread_id)
    ids = list(check_run_ids(run_ids))
    args = [("text", thread_id), ("text[]", ids)]
    decode = first_or_none(checkpoint_of)
    return _call(config, "latest_of_runs", "dg_latest_of_runs_v1", args, decode)


def thread(config: PostgresConfig, thread_id: object) -> SqlCall[ThreadInfo | None]:
    args: list[Arg] = [("text", check_identifier("thread_id", thread_id))]
    return _call(config, "thread", "dg_thread_v1", args, first_or_none(thread_of))


def threads(config: PostgresConfig, after: object, limit: object) -> SqlCall[list[ThreadInfo]]:
    args: list[Arg] = [("text", check_optional_identifier("after", after))]
    return _page(config, "threads", "dg_threads_v1", args, check_limit("limit", limit), thread_of)


def _thread_id_of(row: Row) -> str:
    return row["thread_id"]  # type: ignore[no-any-return]


def children(
    config: PostgresConfig, thread_id: object, after: object, limit: object
) -> SqlCall[list[str]]:
    args = _in_thread(thread_id, "after", after)
    return _page(
        config, "children", "dg_children_v1", args, check_limit("limit", limit), _thread_id_of
    )


def events_after(
    config: PostgresConfig, thread_id: object, after_seq: object, limit: object
) -> SqlCall[list[Event]]:
    args = [
        ("text", check_identifier("thread_id", thread_id)),
        ("bigint", check_after_seq(after_seq)),
    ]
    size = check_limit("limit", limit)
    return _page(config, "events_after", "dg_events_after_v1", args, size, event_of)


def get_effect(
    config: PostgresConfig, thread_id: object, key: object
) -> SqlCall[EffectRecord | None]:
    args = [
        ("text", check_identifier("thread_id", thread_id)),
        ("text", check_identifier("key", key)),
    ]
    return _call(config, "get_effect", "dg_get_effect_v1", args, first_or_none(effect_of))


def effects(
    config: PostgresConfig, thread_id: object, after: object, limit: object
) -> SqlCall[list[EffectRecord]]:
    args = _in_thread(thread_id, "after", after)
    # Refused above the maximum rather than clamped, as the embedded stores do.
    size = check_int("limit", limit, minimum=1, maximum=MAX_PAGE_ROWS)
    return _page(config, "effects", "dg_effects_v1", args, size, effect_of)


# --- run queue ------------------------------------------------------------------------------


def submit(config: PostgresConfig, submission: object) -> SqlCall[Ticket]:
    s = check_submission(submission, config.max_value_bytes)
    args = [
        ("text", s.thread_id),
        ("text", s.input),
        ("text", s.tenant),
        ("text", s.key),
        ("text", s.mode.value),
        ("integer", s.max_attempts),
        ("timestamptz", s.not_before),
        ("integer", s.priority),
        ("text", s.kind),
    ]
    return _call(config, "submit", "dg_submit_v1", args, exactly_one(ticket_of))


def lease(
    config: PostgresConfig,
    holder: object,
    ttl: object,
    tenant: object,
    run_id: object,
    kinds: object,
) -> SqlCall[Lease | None]:
    args = [
        ("text", check_identifier("holder", holder)),
        ("interval", check_duration("ttl", ttl)),
        *_tenant_args("tenant", tenant, allow_any=True),
        ("text", check_optional_identifier("run_id", run_id)),
        ("text[]", _kinds_arg(kinds)),
    ]
    decode = first_or_none(lease_of if run_id is None else lease_with_attempt_of)
    return _call(config, "lease", "dg_lease_v1", args, decode)


def renew(config: PostgresConfig, lease: object, ttl: object) -> SqlCall[Lease]:
    ls = check_lease("lease", lease)
    args = lease_args(ls, ("interval", None if ttl is None else check_duration("ttl", ttl)))
    return _call(config, "renew", "dg_renew_v1", args, exactly_one(lease_of))


def release(config: PostgresConfig, lease: object) -> SqlCall[None]:
    args = lease_args(check_lease("lease", lease))
    return _call(config, "release", "dg_release_v1", args, nothing)


def _attempt_start(rows: Rows) -> AttemptStart:
    start = attempt_of(one(rows))
    if start is None:
        raise RuntimeError("dg_record_attempt_v1 returned no attempt kind")
    return start


def record_attempt(config: PostgresConfig, lease: object, run_id: object) -> SqlCall[AttemptStart]:
    ls = check_lease("lease", lease)
    args = lease_args(ls, ("text", check_identifier("run_id", run_id)))
    return _call(config, "record_attempt", "dg_record_attempt_v1", args, _attempt_start)


def close(config: PostgresConfig, lease: object, outcome: object) -> SqlCall[QueueEntry]:
    ls = check_lease("lease", lease)
    kind, detail = encode_outcome(outcome, config.max_value_bytes)
    args = lease_args(ls, ("text", kind), ("text", detail))
    return _call(config, "close", "dg_close_v1", args, exactly_one(entry_of))


def cancel(config: PostgresConfig, entry_id: object, tenant: object) -> SqlCall[QueueEntry]:
    args = entry_args(entry_id, tenant)
    return _call(config, "cancel", "dg_cancel_v1", args, exactly_one(entry_of))


def entry(config: PostgresConfig, entry_id: object, tenant: object) -> SqlCall[QueueEntry | None]:
    args = entry_args(entry_id, tenant)
    return _call(config, "entry", "dg_entry_v1", args, first_or_none(entry_of))


def open_entries(
    config: PostgresConfig, tenant: object, thread_id: object, after: object, limit: object
) -> SqlCall[list[QueueEntry]]:
    args = [
        *_tenant_args("tenant", tenant, allow_any=True),
        ("text", check_optional_identifier("thread_id", thread_id)),
        ("bigint", None if after is None else check_entry_id(after, "after")),
    ]
    size = check_limit("limit", limit)
    return _page(config, "open_entries", "dg_open_entries_v1", args, size, entry_of)


def entries(
    config: PostgresConfig,
    state: object,
    tenant: object,
    thread_id: object,
    after: object,
    limit: object,
) -> SqlCall[list[QueueEntry]]:
    """`entries`: one page, newest first (sql/92_queue_listing.sql)."""
    s, t, thread, cursor, count = check_listing(state, tenant, thread_id, after, limit)
    args = [
        ("text", s),
        *_tenant_args("tenant", t, allow_any=True),
        ("text", thread),
        ("bigint", cursor),
    ]
    return _page(config, "entries", "dg_entries_v1", args, count, entry_of)


def stats(config: PostgresConfig, tenant: object) -> SqlCall[QueueStats]:
    args = _tenant_args("tenant", tenant, allow_any=True)
    return _call(config, "stats", "dg_queue_stats_v1", args, exactly_one(stats_of))


def set_trace_context(
    config: PostgresConfig, entry_id: object, context: object, tenant: object
) -> SqlCall[bool]:
    context = check_trace_context(context)
    args = entry_args(entry_id, tenant)
    args += [("text", context.traceparent), ("text", context.tracestate)]
    decode = exactly_one(lambda row: bool(row["stored"]))
    return _call(config, "set_trace_context", "dg_set_trace_context_v2", args, decode)


def trace_context(
    config: PostgresConfig, entry_id: object, tenant: object
) -> SqlCall[TraceContext | None]:
    decode = first_or_none(trace_context_of)
    return _call(
        config, "trace_context", "dg_trace_context_v2", entry_args(entry_id, tenant), decode
    )


def reclaim(config: PostgresConfig, older_than: object, batch: object) -> SqlCall[int]:
    """`reclaim`: one transaction removing at most ``batch`` entries; returns how many."""
    args = [
        ("interval", check_duration("older_than", older_than, allow_zero=True)),
        ("integer", check_limit("batch", batch)),
    ]
    decode = exactly_one(lambda row: int(row["removed"]))
    return _call(config, "reclaim", "dg_reclaim_v1", args, decode)


def submit_many(config: PostgresConfig, submissions: object) -> SqlCall[list[Ticket]] | None:
    """None for an empty list (nothing to do: no call)."""
    subs = check_submissions(submissions, config.max_value_bytes)
    if not subs:
        return None
    args = [
        ("text[]", [s.thread_id for s in subs]),
        ("text[]", [s.input for s in subs]),
        ("text[]", [s.tenant for s in subs]),
        ("text[]", [s.key for s in subs]),
        ("text[]", [s.mode.value for s in subs]),
        ("integer[]", [s.max_attempts for s in subs]),
        ("integer[]", [s.priority for s in subs]),
        ("text[]", [s.kind for s in subs]),
    ]
    return _call(config, "submit_many", "dg_submit_many_v1", args, each(ticket_of))


__all__ = ["Arg", "PruneBatch", "Rows", "SqlCall", "entry_args", "lease_args", "statement"]
