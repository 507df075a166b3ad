"""The decoders of the SQL functions' rows: fetched rows (dicts keyed by column name) as model values.

The functions return a few row shapes (``sql/README.md``, "Row shapes") whose columns are named
after the model's fields, so most decoders are one `record` line naming only the columns that
need converting; `durable_graph.postgres.calls` pairs each call with its decoder.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any, TypeVar

from durable_graph.core import model as m
from durable_graph.core.model import TraceContext
from durable_graph.core.validation import decode_json, decode_outcome

T = TypeVar("T")
Row = dict[str, Any]
Rows = list[Row]


def record(
    cls: type[T],
    *,
    prefix: str = "",
    computed: Mapping[str, Callable[[Row], object]] | None = None,
    **convert: Callable[[Any], object],
) -> Callable[[Row], T]:
    """The decoder of rows whose columns are named after ``cls``'s fields.

    Field ``f`` is column ``prefix + f`` (``thread_id`` is never prefixed: it is the row's own),
    passed through ``convert[f]`` when given; ``computed[f]`` reads a field that has no column of
    its own from the whole row. The columns are worked out once, here: per row it is one
    `itemgetter` and the conversions, as fast as a decoder written out field by field.
    """
    extra = computed or {}
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    read = [n for n in names if n not in extra]
    if len(read) < 2:  # `itemgetter` of one key returns the value, not a tuple
        raise ValueError(f"{cls.__name__}: record needs two columns or more")
    unknown = (set(convert) | set(extra)) - set(names)
    if unknown:
        raise ValueError(f"{cls.__name__} has no field {sorted(unknown)}")
    pick = itemgetter(*[n if n == "thread_id" else prefix + n for n in read])
    conversions = [(i, convert[n]) for i, n in enumerate(read) if n in convert]
    # Inserted in field order, so each lands at its field's position.
    insertions = [(i, extra[n]) for i, n in enumerate(names) if n in extra]

    def decode(row: Row) -> T:
        values = list(pick(row))
        for i, conv in conversions:
            values[i] = conv(values[i])
        for i, compute in insertions:
            values.insert(i, compute(row))
        return cls(*values)

    return decode


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


def _utc_or_none(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC)


def _iso(value: str) -> datetime:
    return datetime.fromisoformat(value).astimezone(UTC)


def _strings(value: list[str] | None) -> tuple[str, ...]:
    return tuple(value or ())


def _writes(value: list[dict[str, Any]] | None) -> tuple[m.PendingWrite, ...]:
    return tuple(
        m.PendingWrite(w["task_id"], w["channel"], w["value"], w.get("task_path", ""))
        for w in value or ()
    )


def _attempts(value: list[dict[str, Any]] | None) -> tuple[m.Attempt, ...]:
    return tuple(
        m.Attempt(a["number"], a["run_id"], _iso(a["started_at"]), a.get("error"))
        for a in value or ()
    )


def _outcome(row: Row) -> object:
    return decode_outcome(row["outcome_kind"], row["outcome_detail"])


_CHECKPOINT_COLUMNS: dict[str, Any] = {  # converters, as `record` takes them
    "state": decode_json,
    "metadata": decode_json,
    "next": _strings,
    "created_at": _utc,
    "committed_at": _utc,
    "writes": _writes,
}

checkpoint_of = record(m.Checkpoint, **_CHECKPOINT_COLUMNS)
event_of = record(m.Event, payload=decode_json, created_at=_utc, committed_at=_utc)
thread_of = record(m.ThreadInfo, created_at=_utc, updated_at=_utc, claim_expires_at=_utc_or_none)
effect_of = record(m.EffectRecord, value=decode_json, recorded_at=_utc)
claim_of = record(m.Claim, expires_at=_utc)
entry_of = record(
    m.QueueEntry,
    computed={"outcome": _outcome},
    input=decode_json,
    mode=m.Mode,
    attempts=_attempts,
    submitted_at=_utc,
    lease_expires_at=_utc_or_none,
    closed_at=_utc_or_none,
    not_before=_utc_or_none,
)
ticket_of = record(m.Ticket)
stats_of = record(m.QueueStats)
prune_result_of = record(m.PruneResult, checkpoints_removed=int, events_removed=int)
trace_context_of = record(TraceContext)


def attempt_of(row: Row) -> m.AttemptStart | None:
    kind = row["attempt_kind"]
    if kind is None:
        return None
    if kind == "started":
        return m.Started(row["attempt_number"])
    if kind == "exhausted":
        return m.Exhausted()
    if kind == "thread_deleted":
        return m.ThreadDeleted()
    raise RuntimeError(f"unknown attempt kind {kind!r}")


def lease_of(row: Row, *, with_attempt: bool = False) -> m.Lease:
    """A lease row: the entry row plus ``token, holder, expires_at, ttl`` of the lease issued."""
    return m.Lease(
        entry=entry_of(row),
        token=row["token"],
        holder=row["holder"],
        expires_at=_utc(row["expires_at"]),
        ttl=row["ttl"],
        attempt=attempt_of(row) if with_attempt else None,
    )


def lease_with_attempt_of(row: Row) -> m.Lease:
    """A lease row with the attempt recorded with it (``lease(run_id=...)``, `begin_attempt`)."""
    return lease_of(row, with_attempt=True)


# --- the worker fast path (SPEC §11; sql/75_fast_path.sql) ---------------------------------

_latest_checkpoint_of = record(m.Checkpoint, prefix="latest_", **_CHECKPOINT_COLUMNS)
_head_checkpoint_of = record(m.Checkpoint, prefix="head_", **_CHECKPOINT_COLUMNS)
_renewed_claim_of = record(m.Claim, prefix="claim_", expires_at=_utc)


def _prefixed_checkpoint(
    row: Row, prefix: str, decode: Callable[[Row], m.Checkpoint]
) -> m.Checkpoint | None:
    """The ``latest_*`` or ``head_*`` columns of a begin_attempt row; None when NULL."""
    return None if row[prefix + "checkpoint_id"] is None else decode(row)


def _plan_of(word: str, latest: m.Checkpoint | None) -> m.AttemptPlan:
    """``dg_begin_attempt_v2``'s plan column, decided in SQL with the retry chain's runs (SPEC
    §19.3, §23.5): 'fresh', 'resume' (from ``latest``) or 'finished'."""
    if word == "resume" and latest is not None:
        return m.Resume(latest)
    if word == "finished":
        return m.Finished(latest)
    if word == "fresh":
        return m.Fresh()
    raise RuntimeError(f"unexpected plan {word!r} (latest {latest!r})")


def begun_of(row: Row) -> m.AttemptBegun:
    """A ``dg_begin_attempt_v2`` row."""
    lease = lease_with_attempt_of(row)
    if row["claim_token"] is None:
        return m.AttemptBegun(lease, lease.attempt, None, lease.entry, None, None, None)
    # The claim's holder is the attempt just recorded: its run id.
    return _claimed(row, lease, lease.entry.attempts[-1].run_id)


def claimed_of(holder: str) -> Callable[[Row], m.AttemptBegun]:
    """The decoder of a ``dg_claim_attempt_v1`` row, the thread claimed as ``holder``."""
    return lambda row: _claimed(row, lease_with_attempt_of(row), holder)


def _claimed(row: Row, lease: m.Lease, holder: str) -> m.AttemptBegun:
    """A claimed ``dg_begin_attempt_v2`` / ``dg_claim_attempt_v1`` row."""
    claim = m.Claim(
        thread_id=row["thread_id"],
        holder=holder,
        token=row["claim_token"],
        expires_at=_utc(row["claim_expires_at"]),
        ttl=row["claim_ttl"],
    )
    # The entry columns were read after the claim, in the same transaction; so was the head,
    # and latest (over the runs of the entry's retry chain), from which SQL planned.
    latest = _prefixed_checkpoint(row, "latest_", _latest_checkpoint_of)
    plan = _plan_of(row["plan"], latest)
    head = _prefixed_checkpoint(row, "head_", _head_checkpoint_of)
    return m.AttemptBegun(lease, lease.attempt, claim, lease.entry, latest, plan, head)


def renewed_of(row: Row) -> tuple[m.Lease, m.Claim]:
    """A renew_attempt row: the lease row plus the ``claim_*`` columns of the claim renewed."""
    return lease_of(row), _renewed_claim_of(row)


# --- from rows to results -------------------------------------------------------------------


def one(rows: Rows) -> Row:
    if len(rows) != 1:
        raise RuntimeError(f"expected one row, got {len(rows)}")
    return rows[0]


def first_or_none(convert: Callable[[Row], T]) -> Callable[[Rows], T | None]:
    return lambda rows: convert(rows[0]) if rows else None


def each(convert: Callable[[Row], T]) -> Callable[[Rows], list[T]]:
    return lambda rows: [convert(r) for r in rows]


def exactly_one(convert: Callable[[Row], T]) -> Callable[[Rows], T]:
    return lambda rows: convert(one(rows))


def nothing(rows: Rows) -> None:
    return None


__all__ = ["Row", "Rows", "checkpoint_of", "entry_of", "event_of", "record"]
