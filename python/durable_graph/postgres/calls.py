"""One pure function per public method: validate the arguments, return the `Call` that does it.

A `Call` is the whole conversation with the database for one method: the statement (``SELECT *
FROM "<schema>".dg_<method>_v1(...)``, the schema composed with `psycopg.sql.Identifier`), its
parameters, and the decoder that turns the fetched rows (dicts keyed by column name, shapes in
``sql/README.md``) into model values. Nothing here does I/O: the sync store
(`durable_graph.postgres.store`) executes Calls on a pooled connection, and an asyncio caller can
execute the very same Calls, so there is one copy of every query and every decoder.

Arguments go through `durable_graph.validation` first: bad input raises `ValidationError` naming
the argument before any SQL is composed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from psycopg import sql

from ..errors import ProcessingError, StoreError, ValidationError
from ..fast_path import check_begin, check_finish, check_pair, check_submissions
from ..listing import check_listing
from ..model import (
    ANY,
    Attempt,
    AttemptBegun,
    AttemptStart,
    Checkpoint,
    Claim,
    EffectRecord,
    Event,
    Exhausted,
    Lease,
    Mode,
    PendingWrite,
    PruneResult,
    QueueEntry,
    QueueStats,
    Started,
    ThreadDeleted,
    ThreadInfo,
    Ticket,
)
from ..observe import TraceContext
from ..run_queue import plan_attempt
from ..validation import (
    MAX_PAGE_ROWS,
    check_claim,
    check_claim_policy,
    check_commit,
    check_duration,
    check_events,
    check_identifier,
    check_int,
    check_lease,
    check_metadata_filter,
    check_optional_identifier,
    check_retention,
    check_run_ids,
    check_submission,
    check_tenant_filter,
    check_writes,
    decode_json,
    decode_outcome,
    encode_json,
    encode_outcome,
)
from .config import PostgresConfig

T = TypeVar("T")
Row = dict[str, Any]
Rows = list[Row]


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
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
    args: Sequence[tuple[str, object]],
    decode: Callable[[Rows], T],
) -> Call[T]:
    types = tuple(t for t, _ in args)
    return Call(
        name,
        statement(config.schema, function, types),
        tuple(v for _, v in args),
        _defensive(name, decode),
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


# --- argument checks not covered by a shared helper ----------------------------------------


def _limit(name: str, value: object) -> int:
    """A positive int, clamped to the SQL functions' documented maximum (`MAX_PAGE_ROWS`): a
    page is bounded anyway, so asking for more only means "as many as a page holds"."""
    return min(check_int(name, value, minimum=1), MAX_PAGE_ROWS)


# --- decoders -------------------------------------------------------------------------------


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


def _utc_or_none(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC)


def _iso(value: str) -> datetime:
    return datetime.fromisoformat(value).astimezone(UTC)


def _one(rows: Rows) -> Row:
    if len(rows) != 1:
        raise RuntimeError(f"expected one row, got {len(rows)}")
    return rows[0]


def checkpoint_of(row: Row) -> Checkpoint:
    writes = row["writes"] or []
    return Checkpoint(
        thread_id=row["thread_id"],
        checkpoint_id=row["checkpoint_id"],
        parent_id=row["parent_id"],
        run_id=row["run_id"],
        state=decode_json(row["state"]),
        metadata=decode_json(row["metadata"]),
        next=tuple(row["next"] or ()),
        created_at=_utc(row["created_at"]),
        committed_at=_utc(row["committed_at"]),
        seq=row["seq"],
        writes=tuple(PendingWrite(w["task_id"], w["channel"], w["value"]) for w in writes),
    )


def event_of(row: Row) -> Event:
    return Event(
        thread_id=row["thread_id"],
        seq=row["seq"],
        kind=row["kind"],
        payload=decode_json(row["payload"]),
        run_id=row["run_id"],
        created_at=_utc(row["created_at"]),
        committed_at=_utc(row["committed_at"]),
    )


def thread_of(row: Row) -> ThreadInfo:
    return ThreadInfo(
        thread_id=row["thread_id"],
        parent_thread_id=row["parent_thread_id"],
        head_id=row["head_id"],
        last_seq=row["last_seq"],
        created_at=_utc(row["created_at"]),
        updated_at=_utc(row["updated_at"]),
        claim_holder=row["claim_holder"],
        claim_expires_at=_utc_or_none(row["claim_expires_at"]),
    )


def effect_of(row: Row) -> EffectRecord:
    return EffectRecord(
        thread_id=row["thread_id"],
        key=row["key"],
        value=decode_json(row["value"]),
        run_id=row["run_id"],
        recorded_at=_utc(row["recorded_at"]),
        existing=row["existing"],
    )


def claim_of(row: Row) -> Claim:
    return Claim(
        thread_id=row["thread_id"],
        holder=row["holder"],
        token=row["token"],
        expires_at=_utc(row["expires_at"]),
        ttl=row["ttl"],
    )


def entry_of(row: Row) -> QueueEntry:
    return QueueEntry(
        entry_id=row["entry_id"],
        tenant=row["tenant"],
        thread_id=row["thread_id"],
        key=row["key"],
        input=decode_json(row["input"]),
        mode=Mode(row["mode"]),
        max_attempts=row["max_attempts"],
        attempts=tuple(
            Attempt(a["number"], a["run_id"], _iso(a["started_at"]), a.get("error"))
            for a in row["attempts"] or ()
        ),
        admitted=row["admitted"],
        thread_deleted=row["thread_deleted"],
        submitted_at=_utc(row["submitted_at"]),
        lease_holder=row["lease_holder"],
        lease_expires_at=_utc_or_none(row["lease_expires_at"]),
        outcome=decode_outcome(row["outcome_kind"], row["outcome_detail"]),
        closed_at=_utc_or_none(row["closed_at"]),
        closed_at_seq=row["closed_at_seq"],
        not_before=_utc_or_none(row["not_before"]),
        retry_of=row["retry_of"],
    )


def attempt_of(row: Row) -> AttemptStart | None:
    kind = row["attempt_kind"]
    if kind is None:
        return None
    if kind == "started":
        return Started(row["attempt_number"])
    if kind == "exhausted":
        return Exhausted()
    if kind == "thread_deleted":
        return ThreadDeleted()
    raise RuntimeError(f"unknown attempt kind {kind!r}")


def lease_of(row: Row, *, with_attempt: bool = False) -> Lease:
    """A lease row: the entry row plus ``token, holder, expires_at, ttl`` of the lease issued."""
    return Lease(
        entry=entry_of(row),
        token=row["token"],
        holder=row["holder"],
        expires_at=_utc(row["expires_at"]),
        ttl=row["ttl"],
        attempt=attempt_of(row) if with_attempt else None,
    )


def _first_or_none(convert: Callable[[Row], T]) -> Callable[[Rows], T | None]:
    return lambda rows: convert(rows[0]) if rows else None


def _each(convert: Callable[[Row], T]) -> Callable[[Rows], list[T]]:
    return lambda rows: [convert(r) for r in rows]


def _exactly_one(convert: Callable[[Row], T]) -> Callable[[Rows], T]:
    return lambda rows: convert(_one(rows))


def _nothing(rows: Rows) -> None:
    return None


# --- checkpointer: claims -------------------------------------------------------------------


def claim(config: PostgresConfig, thread_id: object, holder: object, policy: object) -> Call[Claim]:
    thread_id = check_identifier("thread_id", thread_id)
    holder = check_identifier("holder", holder)
    ttl = check_claim_policy(policy).ttl
    args = [("text", thread_id), ("text", holder), ("interval", ttl)]
    return _call(config, "claim", "dg_claim_v1", args, _exactly_one(claim_of))


def renew_claim(config: PostgresConfig, claim: object) -> Call[Claim]:
    c = check_claim("claim", claim)
    args = [("text", c.thread_id), ("bigint", c.token)]
    return _call(config, "renew_claim", "dg_renew_claim_v1", args, _exactly_one(claim_of))


def release_claim(config: PostgresConfig, claim: object) -> Call[None]:
    c = check_claim("claim", claim)
    args = [("text", c.thread_id), ("bigint", c.token)]
    return _call(config, "release_claim", "dg_release_claim_v1", args, _nothing)


# --- checkpointer: writes -------------------------------------------------------------------


def commit(config: PostgresConfig, claim: object, commit: object) -> Call[Checkpoint]:
    c = check_claim("claim", claim)
    cm = check_commit(commit, config.max_value_bytes)
    args = [
        ("text", c.thread_id),
        ("bigint", c.token),
        ("text", cm.checkpoint_id),
        ("text", cm.parent_id),
        ("text", cm.run_id),
        ("text", cm.state),
        ("text", cm.metadata),
        ("text[]", list(cm.next)),
        ("text[]", [e.kind for e in cm.events]),
        ("text[]", [e.payload for e in cm.events]),
        ("timestamptz[]", [e.created_at for e in cm.events]),
        ("timestamptz", cm.created_at),
        ("text", cm.parent_thread_id),
        ("text", None if cm.fence is None else cm.fence.thread_id),
        ("bigint", None if cm.fence is None else cm.fence.token),
    ]
    return _call(config, "commit", "dg_commit_v1", args, _exactly_one(checkpoint_of))


def put_writes(
    config: PostgresConfig, claim: object, checkpoint_id: object, writes: object
) -> Call[None]:
    c = check_claim("claim", claim)
    checkpoint_id = check_identifier("checkpoint_id", checkpoint_id)
    ws = check_writes("writes", writes, config.max_value_bytes)
    args = [
        ("text", c.thread_id),
        ("bigint", c.token),
        ("text", checkpoint_id),
        ("text[]", [w.task_id for w in ws]),
        ("text[]", [w.channel for w in ws]),
        ("text[]", [w.value for w in ws]),
    ]
    return _call(config, "put_writes", "dg_put_writes_v1", args, _nothing)


def put_writes_fenced(
    config: PostgresConfig, claim: object, checkpoint_id: object, writes: object, fence: object
) -> Call[None]:
    c = check_claim("claim", claim)
    checkpoint_id = check_identifier("checkpoint_id", checkpoint_id)
    ws = check_writes("writes", writes, config.max_value_bytes)
    f = check_claim("fence", fence)
    args = [
        ("text", c.thread_id),
        ("bigint", c.token),
        ("text", checkpoint_id),
        ("text[]", [w.task_id for w in ws]),
        ("text[]", [w.channel for w in ws]),
        ("text[]", [w.value for w in ws]),
        ("text", f.thread_id),
        ("bigint", f.token),
    ]
    return _call(config, "put_writes_fenced", "dg_put_writes_fenced_v1", args, _nothing)


def put_writes_and_commit(
    config: PostgresConfig, claim: object, checkpoint_id: object, writes: object, commit: object
) -> Call[Checkpoint]:
    c = check_claim("claim", claim)
    checkpoint_id = check_identifier("checkpoint_id", checkpoint_id)
    ws = check_writes("writes", writes, config.max_value_bytes)
    cm = check_commit(commit, config.max_value_bytes)
    args = [
        ("text", c.thread_id),
        ("bigint", c.token),
        ("text", checkpoint_id),
        ("text[]", [w.task_id for w in ws]),
        ("text[]", [w.channel for w in ws]),
        ("text[]", [w.value for w in ws]),
        ("text", cm.checkpoint_id),
        ("text", cm.parent_id),
        ("text", cm.run_id),
        ("text", cm.state),
        ("text", cm.metadata),
        ("text[]", list(cm.next)),
        ("text[]", [e.kind for e in cm.events]),
        ("text[]", [e.payload for e in cm.events]),
        ("timestamptz[]", [e.created_at for e in cm.events]),
        ("timestamptz", cm.created_at),
        ("text", cm.parent_thread_id),
        ("text", None if cm.fence is None else cm.fence.thread_id),
        ("bigint", None if cm.fence is None else cm.fence.token),
    ]
    return _call(
        config,
        "put_writes_and_commit",
        "dg_put_writes_and_commit_v1",
        args,
        _exactly_one(checkpoint_of),
    )


def append_events(
    config: PostgresConfig, claim: object, events: object, run_id: object
) -> Call[list[Event]]:
    c = check_claim("claim", claim)
    es = check_events("events", events, config.max_value_bytes)
    run_id = check_optional_identifier("run_id", run_id)
    args = [
        ("text", c.thread_id),
        ("bigint", c.token),
        ("text[]", [e.kind for e in es]),
        ("text[]", [e.payload for e in es]),
        ("timestamptz[]", [e.created_at for e in es]),
        ("text", run_id),
    ]
    return _call(config, "append_events", "dg_append_events_v1", args, _each(event_of))


def record_effect(
    config: PostgresConfig, claim: object, key: object, value: object, run_id: object
) -> Call[EffectRecord]:
    c = check_claim("claim", claim)
    key = check_identifier("key", key)
    text = encode_json("value", value, config.max_value_bytes)
    run_id = check_optional_identifier("run_id", run_id)
    args = [("text", c.thread_id), ("bigint", c.token), ("text", key), ("text", text)]
    args.append(("text", run_id))
    return _call(config, "record_effect", "dg_record_effect_v1", args, _exactly_one(effect_of))


def retract_turn(config: PostgresConfig, claim: object) -> Call[Checkpoint | None]:
    c = check_claim("claim", claim)
    args = [("text", c.thread_id), ("bigint", c.token)]
    return _call(config, "retract_turn", "dg_retract_turn_v1", args, _first_or_none(checkpoint_of))


def _prune_result(row: Row) -> PruneResult:
    return PruneResult(int(row["checkpoints_removed"]), int(row["events_removed"]))


def prune(config: PostgresConfig, thread_id: object, policy: object) -> Call[PruneResult]:
    thread_id = check_identifier("thread_id", thread_id)
    p = check_retention(policy)
    args = [("text", thread_id), ("integer", p.keep_last), ("interval", p.max_age)]
    return _call(config, "prune", "dg_prune_v1", args, _exactly_one(_prune_result))


@dataclass(frozen=True, slots=True)
class PruneBatch:
    """One batch of `prune_all`: its counts, how many threads it saw, and where to go on."""

    result: PruneResult
    threads_seen: int
    last_thread_id: str | None


def check_prune_all(policy: object, batch: object) -> tuple[object, int]:
    check_retention(policy)
    return policy, _limit("batch", batch)


def prune_batch(
    config: PostgresConfig, policy: object, batch: object, after: str | None
) -> Call[PruneBatch]:
    """One transaction of `prune_all`: up to ``batch`` threads with id > ``after``."""
    p = check_retention(policy)
    size = _limit("batch", batch)
    args = [
        ("text", check_optional_identifier("after", after)),
        ("integer", size),
        ("integer", p.keep_last),
        ("interval", p.max_age),
    ]

    def decode(rows: Rows) -> PruneBatch:
        row = _one(rows)
        return PruneBatch(_prune_result(row), int(row["threads_seen"]), row["last_thread_id"])

    return _call(config, "prune_all", "dg_prune_batch_v1", args, decode)


def delete_thread(config: PostgresConfig, thread_id: object, fence: object) -> Call[bool]:
    thread_id = check_identifier("thread_id", thread_id)
    f = None if fence is None else check_claim("fence", fence)
    args = [
        ("text", thread_id),
        ("text", None if f is None else f.thread_id),
        ("bigint", None if f is None else f.token),
    ]
    return _call(
        config,
        "delete_thread",
        "dg_delete_thread_v1",
        args,
        _exactly_one(lambda row: bool(row["existed"])),
    )


def delete_runs(config: PostgresConfig, run_ids: object) -> Call[int]:
    ids = list(dict.fromkeys(check_run_ids(run_ids)))
    return _call(
        config,
        "delete_runs",
        "dg_delete_runs_v1",
        [("text[]", ids)],
        _exactly_one(lambda row: int(row["removed"])),
    )


def copy_thread(
    config: PostgresConfig, source_thread_id: object, target_thread_id: object
) -> Call[bool]:
    source = check_identifier("source_thread_id", source_thread_id)
    target = check_identifier("target_thread_id", target_thread_id)
    return _call(
        config,
        "copy_thread",
        "dg_copy_thread_v1",
        [("text", source), ("text", target)],
        _exactly_one(lambda row: bool(row["copied"])),
    )


# --- checkpointer: reads --------------------------------------------------------------------


def get(
    config: PostgresConfig, thread_id: object, checkpoint_id: object
) -> Call[Checkpoint | None]:
    thread_id = check_identifier("thread_id", thread_id)
    checkpoint_id = check_optional_identifier("checkpoint_id", checkpoint_id)
    args = [("text", thread_id), ("text", checkpoint_id)]
    return _call(config, "get", "dg_get_v1", args, _first_or_none(checkpoint_of))


def history(
    config: PostgresConfig, thread_id: object, before: object, limit: object
) -> Call[list[Checkpoint]]:
    thread_id = check_identifier("thread_id", thread_id)
    before = check_optional_identifier("before", before)
    args = [("text", thread_id), ("text", before), ("integer", _limit("limit", limit))]
    return _call(config, "history", "dg_history_v1", args, _each(checkpoint_of))


def search(
    config: PostgresConfig, thread_id: object, metadata: object, before: object, limit: object
) -> Call[list[Checkpoint]]:
    thread_id = check_identifier("thread_id", thread_id)
    wanted = check_metadata_filter(metadata, config.max_value_bytes)
    before = check_optional_identifier("before", before)
    args = [
        ("text", thread_id),
        ("text", encode_json("metadata", wanted, config.max_value_bytes)),
        ("text", before),
        ("integer", _limit("limit", limit)),
    ]
    return _call(config, "search", "dg_search_v1", args, _each(checkpoint_of))


def latest_of_runs(
    config: PostgresConfig, thread_id: object, run_ids: object
) -> Call[Checkpoint | None]:
    thread_id = check_identifier("thread_id", thread_id)
    ids = list(check_run_ids(run_ids))
    args = [("text", thread_id), ("text[]", ids)]
    return _call(
        config, "latest_of_runs", "dg_latest_of_runs_v1", args, _first_or_none(checkpoint_of)
    )


def thread(config: PostgresConfig, thread_id: object) -> Call[ThreadInfo | None]:
    args = [("text", check_identifier("thread_id", thread_id))]
    return _call(config, "thread", "dg_thread_v1", args, _first_or_none(thread_of))


def threads(config: PostgresConfig, after: object, limit: object) -> Call[list[ThreadInfo]]:
    args = [
        ("text", check_optional_identifier("after", after)),
        ("integer", _limit("limit", limit)),
    ]
    return _call(config, "threads", "dg_threads_v1", args, _each(thread_of))


def children(
    config: PostgresConfig, thread_id: object, after: object, limit: object
) -> Call[list[str]]:
    args = [
        ("text", check_identifier("thread_id", thread_id)),
        ("text", check_optional_identifier("after", after)),
        ("integer", _limit("limit", limit)),
    ]
    return _call(
        config, "children", "dg_children_v1", args, lambda rows: [r["thread_id"] for r in rows]
    )


def check_after_seq(value: object) -> int:
    return check_int("after_seq", value, minimum=0)


def events_after(
    config: PostgresConfig, thread_id: object, after_seq: object, limit: object
) -> Call[list[Event]]:
    args = [
        ("text", check_identifier("thread_id", thread_id)),
        ("bigint", check_after_seq(after_seq)),
        ("integer", _limit("limit", limit)),
    ]
    return _call(config, "events_after", "dg_events_after_v1", args, _each(event_of))


def get_effect(config: PostgresConfig, thread_id: object, key: object) -> Call[EffectRecord | None]:
    args = [
        ("text", check_identifier("thread_id", thread_id)),
        ("text", check_identifier("key", key)),
    ]
    return _call(config, "get_effect", "dg_get_effect_v1", args, _first_or_none(effect_of))


def effects(
    config: PostgresConfig, thread_id: object, after: object, limit: object
) -> Call[list[EffectRecord]]:
    args = [
        ("text", check_identifier("thread_id", thread_id)),
        ("text", check_optional_identifier("after", after)),
        ("integer", check_int("limit", limit, minimum=1, maximum=MAX_PAGE_ROWS)),
    ]
    return _call(config, "effects", "dg_effects_v1", args, _each(effect_of))


# --- run queue ------------------------------------------------------------------------------


def submit(config: PostgresConfig, submission: object) -> Call[Ticket]:
    s = check_submission(submission, config.max_value_bytes)
    args = [
        ("text", s.thread_id),
        ("text", s.input),
        ("text", s.tenant),
        ("text", s.key),
        ("text", s.mode.value),
        ("integer", s.max_attempts),
        ("timestamptz", s.not_before),
    ]
    return _call(
        config,
        "submit",
        "dg_submit_v1",
        args,
        _exactly_one(lambda row: Ticket(row["entry_id"], row["existing"])),
    )


def _tenant_args(name: str, tenant: object, *, allow_any: bool) -> list[tuple[str, object]]:
    t = check_tenant_filter(name, tenant, allow_any=allow_any)
    if t is ANY:
        return [("boolean", True), ("text", None)]
    return [("boolean", False), ("text", t)]


def lease(
    config: PostgresConfig, holder: object, ttl: object, tenant: object, run_id: object
) -> Call[Lease | None]:
    args = [
        ("text", check_identifier("holder", holder)),
        ("interval", check_duration("ttl", ttl)),
        *_tenant_args("tenant", tenant, allow_any=True),
        ("text", check_optional_identifier("run_id", run_id)),
    ]
    with_attempt = run_id is not None
    return _call(
        config,
        "lease",
        "dg_lease_v1",
        args,
        _first_or_none(lambda row: lease_of(row, with_attempt=with_attempt)),
    )


def renew(config: PostgresConfig, lease: object, ttl: object) -> Call[Lease]:
    ls = check_lease("lease", lease)
    args = [
        ("bigint", ls.entry.entry_id),
        ("bigint", ls.token),
        ("interval", None if ttl is None else check_duration("ttl", ttl)),
        ("text", ls.entry.tenant),
    ]
    return _call(config, "renew", "dg_renew_v1", args, _exactly_one(lease_of))


def release(config: PostgresConfig, lease: object) -> Call[None]:
    ls = check_lease("lease", lease)
    args = [("bigint", ls.entry.entry_id), ("bigint", ls.token), ("text", ls.entry.tenant)]
    return _call(config, "release", "dg_release_v1", args, _nothing)


def _attempt_start(rows: Rows) -> AttemptStart:
    start = attempt_of(_one(rows))
    if start is None:
        raise RuntimeError("dg_record_attempt_v1 returned no attempt kind")
    return start


def record_attempt(config: PostgresConfig, lease: object, run_id: object) -> Call[AttemptStart]:
    ls = check_lease("lease", lease)
    args = [
        ("bigint", ls.entry.entry_id),
        ("bigint", ls.token),
        ("text", check_identifier("run_id", run_id)),
        ("text", ls.entry.tenant),
    ]
    return _call(config, "record_attempt", "dg_record_attempt_v1", args, _attempt_start)


def close(config: PostgresConfig, lease: object, outcome: object) -> Call[QueueEntry]:
    ls = check_lease("lease", lease)
    kind, detail = encode_outcome(outcome, config.max_value_bytes)
    args = [
        ("bigint", ls.entry.entry_id),
        ("bigint", ls.token),
        ("text", kind),
        ("text", detail),
        ("text", ls.entry.tenant),
    ]
    return _call(config, "close", "dg_close_v1", args, _exactly_one(entry_of))


def _entry_id(value: object) -> int:
    return check_int("entry_id", value, minimum=0)


def _entry_id_named(name: str, value: object) -> int:
    return check_int(name, value, minimum=0)


def cancel(config: PostgresConfig, entry_id: object, tenant: object) -> Call[QueueEntry]:
    args = [
        ("bigint", _entry_id(entry_id)),
        ("text", check_optional_identifier("tenant", tenant)),
    ]
    return _call(config, "cancel", "dg_cancel_v1", args, _exactly_one(entry_of))


def entry(config: PostgresConfig, entry_id: object, tenant: object) -> Call[QueueEntry | None]:
    args = [
        ("bigint", _entry_id(entry_id)),
        ("text", check_optional_identifier("tenant", tenant)),
    ]
    return _call(config, "entry", "dg_entry_v1", args, _first_or_none(entry_of))


def open_entries(
    config: PostgresConfig, tenant: object, thread_id: object, after: object, limit: object
) -> Call[list[QueueEntry]]:
    args = [
        *_tenant_args("tenant", tenant, allow_any=True),
        ("text", check_optional_identifier("thread_id", thread_id)),
        ("bigint", None if after is None else _entry_id_named("after", after)),
        ("integer", _limit("limit", limit)),
    ]
    return _call(config, "open_entries", "dg_open_entries_v1", args, _each(entry_of))


def entries(
    config: PostgresConfig,
    state: object,
    tenant: object,
    thread_id: object,
    after: object,
    limit: object,
) -> Call[list[QueueEntry]]:
    """`entries`: one page, newest first (sql/92_queue_listing.sql)."""
    s, t, thread, cursor, count = check_listing(state, tenant, thread_id, after, limit)
    args = [
        ("text", s),
        *_tenant_args("tenant", t, allow_any=True),
        ("text", thread),
        ("bigint", cursor),
        ("integer", count),
    ]
    return _call(config, "entries", "dg_entries_v1", args, _each(entry_of))


def _stats_of(row: Row) -> QueueStats:
    return QueueStats(
        open=row["open"],
        running=row["running"],
        completed=row["completed"],
        failed=row["failed"],
        cancelled=row["cancelled"],
        interrupted=row["interrupted"],
        oldest_waiting_age=row["oldest_waiting_age"],
    )


def stats(config: PostgresConfig, tenant: object) -> Call[QueueStats]:
    args = _tenant_args("tenant", tenant, allow_any=True)
    return _call(config, "stats", "dg_queue_stats_v1", args, _exactly_one(_stats_of))


def set_trace_context(config: PostgresConfig, entry_id: object, context: object) -> Call[bool]:
    if not isinstance(context, TraceContext):
        raise ValidationError("context must be a TraceContext")
    args = [
        ("bigint", _entry_id(entry_id)),
        ("text", context.traceparent),
        ("text", context.tracestate),
    ]
    return _call(
        config,
        "set_trace_context",
        "dg_set_trace_context_v1",
        args,
        _exactly_one(lambda row: bool(row["stored"])),
    )


def trace_context(config: PostgresConfig, entry_id: object) -> Call[TraceContext | None]:
    args = [("bigint", _entry_id(entry_id))]
    return _call(
        config,
        "trace_context",
        "dg_trace_context_v1",
        args,
        _first_or_none(lambda row: TraceContext(row["traceparent"], row["tracestate"])),
    )


def reclaim(config: PostgresConfig, older_than: object, batch: object) -> Call[int]:
    """`reclaim`: one transaction removing at most ``batch`` entries; returns how many."""
    args = [
        ("interval", check_duration("older_than", older_than, allow_zero=True)),
        ("integer", _limit("batch", batch)),
    ]
    return _call(
        config, "reclaim", "dg_reclaim_v1", args, _exactly_one(lambda row: int(row["removed"]))
    )


# --- the worker fast path (SPEC §11; sql/75_fast_path.sql) ---------------------------------


def _checkpoint_columns(row: Row, prefix: str) -> Checkpoint | None:
    """The ``latest_*`` or ``head_*`` columns of a begin_attempt row as a checkpoint; None when
    NULL."""
    if row[prefix + "checkpoint_id"] is None:
        return None
    return checkpoint_of(
        {"thread_id": row["thread_id"], **{k: row[prefix + k] for k in _CHECKPOINT_COLUMNS}}
    )


_CHECKPOINT_COLUMNS = (
    "checkpoint_id",
    "parent_id",
    "run_id",
    "state",
    "metadata",
    "next",
    "created_at",
    "committed_at",
    "seq",
    "writes",
)


def _begun_of(row: Row) -> AttemptBegun:
    lease = lease_of(row, with_attempt=True)
    if row["claim_token"] is None:
        return AttemptBegun(lease, lease.attempt, None, lease.entry, None, None, None)
    claim = Claim(
        thread_id=row["thread_id"],
        holder=lease.entry.attempts[-1].run_id,  # the attempt just recorded: its run id
        token=row["claim_token"],
        expires_at=_utc(row["claim_expires_at"]),
        ttl=row["claim_ttl"],
    )
    # The entry columns were read after the claim, in the same transaction.
    latest = _checkpoint_columns(row, "latest_")
    plan = plan_attempt(lease.entry, latest)
    head = _checkpoint_columns(row, "head_")
    return AttemptBegun(lease, lease.attempt, claim, lease.entry, latest, plan, head)


def begin_attempt(
    config: PostgresConfig,
    holder: object,
    ttl: object,
    run_id: object,
    claim_policy: object,
    tenant: object,
) -> Call[AttemptBegun | None]:
    a = check_begin(holder, ttl, run_id, claim_policy, tenant)
    args = [
        ("text", a.holder),
        ("interval", a.ttl),
        ("interval", a.claim_policy.ttl),
        *_tenant_args("tenant", a.tenant, allow_any=True),
        ("text", a.run_id),
    ]
    return _call(config, "begin_attempt", "dg_begin_attempt_v1", args, _first_or_none(_begun_of))


def _renewed_of(row: Row) -> tuple[Lease, Claim]:
    claim = Claim(
        thread_id=row["thread_id"],
        holder=row["claim_holder"],
        token=row["claim_token"],
        expires_at=_utc(row["claim_expires_at"]),
        ttl=row["claim_ttl"],
    )
    return lease_of(row), claim


def renew_attempt(
    config: PostgresConfig, lease: object, claim: object
) -> Call[tuple[Lease, Claim]]:
    ls, c = check_pair(lease, claim)
    args = [
        ("bigint", ls.entry.entry_id),
        ("bigint", ls.token),
        ("bigint", c.token),
        ("text", ls.entry.tenant),
    ]
    return _call(config, "renew_attempt", "dg_renew_attempt_v1", args, _exactly_one(_renewed_of))


def finish_attempt(
    config: PostgresConfig, lease: object, outcome: object, claim: object
) -> Call[QueueEntry]:
    ls, (kind, detail), c = check_finish(lease, outcome, claim, config.max_value_bytes)
    args = [
        ("bigint", ls.entry.entry_id),
        ("bigint", ls.token),
        ("text", kind),
        ("text", detail),
        ("bigint", c.token),
        ("text", ls.entry.tenant),
    ]
    return _call(config, "finish_attempt", "dg_finish_attempt_v1", args, _exactly_one(entry_of))


def submit_many(config: PostgresConfig, submissions: object) -> Call[list[Ticket]] | None:
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
    ]
    return _call(
        config,
        "submit_many",
        "dg_submit_many_v1",
        args,
        lambda rows: [Ticket(r["entry_id"], r["existing"]) for r in rows],
    )


__all__ = ["Call", "PruneBatch", "statement"]
