"""Argument checks, written once and called by every backend (SPEC §2, §8, §11, §13).

Every public store method runs its arguments through these functions *before* it touches the
store, so bad input raises `ValidationError` naming the argument (and the path inside a JSON
value, e.g. ``commit.state["a"][3]``) and writes nothing. The checks of plain values (and the JSON
encoding) are `durable_graph.core.scalars`', re-exported here; this module adds those of model
values and of each method's composite arguments: the worker fast path's, the queue listing's,
the worker's options', the paging limits.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, NamedTuple, TypeVar, cast

from durable_graph.core import model as m
from durable_graph.core.errors import ValidationError
from durable_graph.core.listing import ENTRY_STATES, MAX_LIMIT, EntryState
from durable_graph.core.model import (
    ANY,
    BackoffPolicy,
    Cancelled,
    Claim,
    ClaimPolicy,
    Commit,
    Completed,
    EventIn,
    Failed,
    Interrupted,
    Lease,
    Mode,
    PendingWrite,
    QueueEntry,
    RetentionPolicy,
    Submission,
    TenantFilter,
    TraceContext,
    WatchPolicy,
)
from durable_graph.core.scalars import (
    DEFAULT_MAX_VALUE_BYTES,
    INT32_MAX,
    INT64_MAX,
    MAX_DURATION,
    MAX_IDENTIFIER_BYTES,
    MAX_JSON_DEPTH,
    MAX_JSON_NUMBER,
    MAX_PAGE_ROWS,
    STORE_EVENT_PREFIX,
    check_bool,
    check_clock,
    check_duration,
    check_identifier,
    check_int,
    check_max_value_bytes,
    check_optional_identifier,
    check_str,
    check_task_path,
    check_timestamp,
    decode_json,
    encode_json,
    from_micros,
    from_posix,
    json_identity,
    same_json,
    to_micros,
)
from durable_graph.core.scheduling import check_kinds

T = TypeVar("T")


# --- composite arguments ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EncodedEvent:
    kind: str
    payload: str
    created_at: datetime | None


@dataclass(frozen=True, slots=True)
class EncodedCommit:
    checkpoint_id: str
    parent_id: str | None
    run_id: str
    state: str
    metadata: str
    next: tuple[str, ...]
    events: tuple[EncodedEvent, ...]
    created_at: datetime | None
    parent_thread_id: str | None
    fence: m.Claim | None


@dataclass(frozen=True, slots=True)
class EncodedWrite:
    task_id: str
    channel: str
    index: int
    value: str
    task_path: str = ""


@dataclass(frozen=True, slots=True)
class EncodedSubmission:
    thread_id: str
    input: str
    """Canonical JSON (sorted keys): stored as is, and compared byte for byte."""
    tenant: str | None
    key: str | None
    mode: m.Mode
    max_attempts: int
    not_before: datetime | None = None
    retry_of: int | None = None
    priority: int = 0
    kind: str = "default"


def _sequence(name: str, value: object) -> Sequence[object]:
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise ValidationError(f"{name} must be a tuple or list, got {type(value).__name__}")
    return value


def _items(name: str, values: object, kind: type[T]) -> Iterator[tuple[int, str, T]]:
    """Each item of the sequence ``values`` with its index and its name ``name[i]``, checked to
    be a ``kind``."""
    article = "an" if kind.__name__[0] in "AEIOU" else "a"
    for i, item in enumerate(_sequence(name, values)):
        where = f"{name}[{i}]"
        if not isinstance(item, kind):
            raise ValidationError(
                f"{where} must be {article} {kind.__name__}, got {type(item).__name__}"
            )
        yield i, where, item


def check_claim(name: str, value: object) -> m.Claim:

    if not isinstance(value, Claim):
        raise ValidationError(f"{name} must be a Claim, got {type(value).__name__}")
    check_identifier(f"{name}.thread_id", value.thread_id)
    check_int(f"{name}.token", value.token, minimum=0)
    return value


def check_lease(name: str, value: object) -> m.Lease:

    if not isinstance(value, Lease) or not isinstance(value.entry, QueueEntry):
        raise ValidationError(f"{name} must be a Lease, got {type(value).__name__}")
    check_int(f"{name}.entry.entry_id", value.entry.entry_id, minimum=0)
    check_int(f"{name}.token", value.token, minimum=0)
    check_optional_identifier(f"{name}.entry.tenant", value.entry.tenant)
    return value


def check_events(name: str, events: object, max_bytes: int) -> tuple[EncodedEvent, ...]:

    encoded = []
    for _, where, event in _items(name, events, EventIn):
        kind = check_identifier(f"{where}.kind", event.kind)
        if kind.startswith(STORE_EVENT_PREFIX):
            raise ValidationError(
                f"{where}.kind {kind!r}: kinds starting {STORE_EVENT_PREFIX!r} are the store's own"
            )
        encoded.append(
            EncodedEvent(
                kind=kind,
                payload=encode_json(f"{where}.payload", event.payload, max_bytes),
                created_at=check_timestamp(f"{where}.created_at", event.created_at),
            )
        )
    return tuple(encoded)


def check_commit(value: object, max_bytes: int) -> EncodedCommit:

    if not isinstance(value, Commit):
        raise ValidationError(f"commit must be a Commit, got {type(value).__name__}")
    next_nodes = tuple(
        check_identifier(f"commit.next[{i}]", node)
        for i, node in enumerate(_sequence("commit.next", value.next))
    )
    return EncodedCommit(
        checkpoint_id=check_identifier("commit.checkpoint_id", value.checkpoint_id),
        parent_id=check_optional_identifier("commit.parent_id", value.parent_id),
        run_id=check_identifier("commit.run_id", value.run_id),
        state=encode_json("commit.state", value.state, max_bytes),
        metadata=encode_json("commit.metadata", value.metadata, max_bytes),
        next=next_nodes,
        events=check_events("commit.events", value.events, max_bytes),
        created_at=check_timestamp("commit.created_at", value.created_at),
        parent_thread_id=check_optional_identifier(
            "commit.parent_thread_id", value.parent_thread_id
        ),
        fence=None if value.fence is None else check_claim("commit.fence", value.fence),
    )


def check_writes(name: str, writes: object, max_bytes: int) -> tuple[EncodedWrite, ...]:

    encoded = []
    for i, where, write in _items(name, writes, PendingWrite):
        encoded.append(
            EncodedWrite(
                task_id=check_identifier(f"{where}.task_id", write.task_id),
                channel=check_identifier(f"{where}.channel", write.channel),
                index=i,
                value=encode_json(f"{where}.value", write.value, max_bytes),
                task_path=check_task_path(f"{where}.task_path", write.task_path),
            )
        )
    return tuple(encoded)


def check_submission(value: object, max_bytes: int) -> EncodedSubmission:

    if not isinstance(value, Submission):
        raise ValidationError(f"submission must be a Submission, got {type(value).__name__}")
    if not isinstance(value.mode, Mode):
        raise ValidationError(f"submission.mode must be a Mode, got {value.mode!r}")
    return EncodedSubmission(
        thread_id=check_identifier("submission.thread_id", value.thread_id),
        input=encode_json("submission.input", value.input, max_bytes, canonical=True),
        tenant=check_optional_identifier("submission.tenant", value.tenant),
        key=check_optional_identifier("submission.key", value.key),
        mode=value.mode,
        max_attempts=check_int(
            "submission.max_attempts", value.max_attempts, minimum=1, maximum=INT32_MAX
        ),
        not_before=check_timestamp("submission.not_before", value.not_before),
        # SPEC §15 (durable_graph.core.scheduling): the priority and the kind.
        priority=check_int(
            "submission.priority", value.priority, minimum=-INT32_MAX, maximum=INT32_MAX
        ),
        kind=check_identifier("submission.kind", value.kind),
    )


def check_retention(value: object) -> m.RetentionPolicy:

    if not isinstance(value, RetentionPolicy):
        raise ValidationError(f"policy must be a RetentionPolicy, got {type(value).__name__}")
    if value.max_age is not None:
        check_duration("policy.max_age", value.max_age)
    return value


def check_tenant_filter(name: str, value: object, *, allow_any: bool) -> m.TenantFilter:

    if value is ANY:
        if not allow_any:
            raise ValidationError(f"{name} must be a str or None")
        return ANY
    return check_optional_identifier(name, value)


def check_claim_policy(value: object) -> m.ClaimPolicy:

    if not isinstance(value, ClaimPolicy):
        raise ValidationError(f"policy must be a ClaimPolicy, got {type(value).__name__}")
    return value


def check_watch(value: object) -> m.WatchPolicy:

    if not isinstance(value, WatchPolicy):
        raise ValidationError(f"watch must be a WatchPolicy, got {type(value).__name__}")
    return value


def check_metadata_filter(value: object, max_bytes: int) -> dict[str, Any]:
    """`search(metadata=)`: a JSON object (str keys, JSON values); returned decoded, fresh."""
    if not isinstance(value, dict):
        raise ValidationError(f"metadata must be a dict, got {type(value).__name__}")
    decoded: dict[str, Any] = decode_json(encode_json("metadata", value, max_bytes))
    return decoded


def check_run_ids(value: object) -> tuple[str, ...]:
    """`latest_of_runs(run_ids=)`: a tuple or list of identifiers."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise ValidationError(f"run_ids must be a tuple or list, got {type(value).__name__}")
    return tuple(check_identifier(f"run_ids[{i}]", r) for i, r in enumerate(value))


# --- outcomes ------------------------------------------------------------------------------


def check_error_text(name: str, value: object, max_bytes: int) -> str:
    """An attempt's failure text: a str whose JSON string form fits ``max_bytes``, as
    `Failed.error` (SPEC §10 rule 2, §13)."""
    text = check_str(name, value)
    size = len(json.dumps(text, ensure_ascii=False).encode("utf-8"))
    if size > max_bytes:
        raise ValidationError(f"{name} encodes to {size} bytes, over the limit of {max_bytes}")
    return text


def fit_error_text(text: str, max_bytes: int) -> str:
    """``text``, or its end after a "…" (where a traceback names the failure), cut to the
    fewest characters that pass `check_error_text` with ``max_bytes``."""

    def size(value: str) -> int:
        return len(json.dumps(value, ensure_ascii=False).encode("utf-8"))

    if size(text) <= max_bytes:
        return text
    if size("…") > max_bytes:
        return ""
    low, high = 1, len(text)  # the smallest cut that fits: "…" + text[high:] always does
    while low < high:
        middle = (low + high) // 2
        if size("…" + text[middle:]) <= max_bytes:
            high = middle
        else:
            low = middle + 1
    return "…" + text[low:]


def encode_outcome(value: object, max_bytes: int) -> tuple[str, str]:
    """An `EntryOutcome` as ``(kind, detail JSON)``: how every backend stores it."""

    if isinstance(value, Completed):
        return "completed", encode_json("outcome.output", value.output, max_bytes)
    if isinstance(value, Failed):
        detail = json.dumps(check_str("outcome.error", value.error), ensure_ascii=False)
        size = len(detail.encode("utf-8"))
        if size > max_bytes:  # SPEC §10 rule 2: the error text obeys max_value_bytes too
            raise ValidationError(
                f"outcome.error encodes to {size} bytes, over the limit of {max_bytes}"
            )
        return "failed", detail
    if isinstance(value, Cancelled):
        if value.reason not in ("thread_deleted", "requested"):
            raise ValidationError(
                f"outcome.reason must be 'thread_deleted' or 'requested', got {value.reason!r}"
            )
        return "cancelled", json.dumps(value.reason)
    if isinstance(value, Interrupted):
        return "interrupted", str(check_int("outcome.by", value.by, minimum=1))
    raise ValidationError(
        f"outcome must be Completed, Failed, Cancelled or Interrupted, got {type(value).__name__}"
    )


def decode_outcome(kind: str | None, detail: str | None) -> m.EntryOutcome | None:

    if kind is None:
        return None
    value: Any = decode_json(detail) if detail is not None else None
    if kind == "completed":
        return Completed(value)
    if kind == "failed":
        return Failed(value)
    if kind == "cancelled":
        return Cancelled(value)
    if kind == "interrupted":
        return Interrupted(value)
    raise ValueError(f"unknown outcome kind {kind!r}")


# --- the worker fast path (SPEC §11) ------------------------------------------------------


MAX_SUBMISSIONS = 10_000
"""The most submissions one `submit_many` takes (``dg_submit_many_v1`` checks it too)."""


class BeginArgs(NamedTuple):
    holder: str
    ttl: timedelta
    run_id: str
    claim_policy: ClaimPolicy
    tenant: TenantFilter
    kinds: tuple[str, ...] | None = None
    """SPEC §15: the kinds the worker serves (None: every kind)."""


def check_begin(
    holder: object,
    ttl: object,
    run_id: object,
    claim_policy: object,
    tenant: object,
    kinds: object = None,
) -> BeginArgs:
    """`begin_attempt`'s arguments, checked in signature order."""
    if not isinstance(claim_policy, ClaimPolicy):
        raise ValidationError(
            f"claim_policy must be a ClaimPolicy, got {type(claim_policy).__name__}"
        )
    return BeginArgs(
        check_identifier("holder", holder),
        check_duration("ttl", ttl),
        check_identifier("run_id", run_id),
        check_claim_policy(claim_policy),
        check_tenant_filter("tenant", tenant, allow_any=True),
        check_kinds("kinds", kinds),
    )


def check_claim_attempt(
    lease: object, holder: object, claim_policy: object
) -> tuple[Lease, str, ClaimPolicy]:
    """`claim_attempt`'s arguments, checked in signature order."""
    ls = check_lease("lease", lease)
    h = check_identifier("holder", holder)
    if not isinstance(claim_policy, ClaimPolicy):
        raise ValidationError(
            f"claim_policy must be a ClaimPolicy, got {type(claim_policy).__name__}"
        )
    return ls, h, check_claim_policy(claim_policy)


def check_pair(lease: object, claim: object) -> tuple[Lease, Claim]:
    """A lease and the claim of the same attempt: the claim must be on the entry's thread."""
    ls = check_lease("lease", lease)
    c = check_claim("claim", claim)
    if c.thread_id != ls.entry.thread_id:
        raise ValidationError("claim must be on the lease's thread (claim.thread_id)")
    return ls, c


def check_finish(
    lease: object, outcome: object, claim: object, max_bytes: int, commit: object = None
) -> tuple[Lease, tuple[str, str], Claim, EncodedCommit | None]:
    """`finish_attempt`'s arguments in signature order; the outcome and the commit (None when
    not given) encoded as every backend stores them (SPEC §18.1)."""
    ls = check_lease("lease", lease)
    encoded = encode_outcome(outcome, max_bytes)
    _, c = check_pair(ls, claim)
    cm = None if commit is None else check_commit(commit, max_bytes)
    return ls, encoded, c, cm


def check_submissions(submissions: object, max_bytes: int) -> list[EncodedSubmission]:
    """Each submission checked as `submit` checks it, named ``submissions[i]`` in errors."""
    if isinstance(submissions, (str, bytes)) or not isinstance(submissions, Sequence):
        raise ValidationError(
            f"submissions must be a sequence of Submission, got {type(submissions).__name__}"
        )
    if len(submissions) > MAX_SUBMISSIONS:
        raise ValidationError(f"submissions must number at most {MAX_SUBMISSIONS}")
    encoded = []
    for i, s in enumerate(submissions):
        try:
            encoded.append(check_submission(s, max_bytes))
        except ValidationError as exc:
            raise ValidationError(str(exc).replace("submission", f"submissions[{i}]", 1)) from None
    return encoded


# --- the queue listing (SPEC §13) ---------------------------------------------------------


def check_state(value: object) -> EntryState | None:
    if value is None:
        return None
    if not isinstance(value, str) or value not in ENTRY_STATES:
        raise ValidationError(
            f"state must be None or one of {', '.join(ENTRY_STATES)}; got {value!r}"
        )
    return cast(EntryState, value)


def check_listing(
    state: object, tenant: object, thread_id: object, after: object, limit: object
) -> tuple[EntryState | None, TenantFilter, str | None, int | None, int]:
    """The arguments of `entries`, checked in signature order (ValidationError names one)."""
    checked_state = check_state(state)
    checked_tenant = check_tenant_filter("tenant", tenant, allow_any=True)
    checked_thread = check_optional_identifier("thread_id", thread_id)
    checked_after = None if after is None else check_int("after", after, minimum=1)
    checked_limit = check_int("limit", limit, minimum=1, maximum=MAX_LIMIT)
    return checked_state, checked_tenant, checked_thread, checked_after, checked_limit


# --- the worker's options ------------------------------------------------------------------


def check_backoff(value: object) -> BackoffPolicy:
    if not isinstance(value, BackoffPolicy):
        raise ValidationError("backoff must be a BackoffPolicy")
    check_duration("backoff.base", value.base, allow_zero=True)
    check_duration("backoff.cap", value.cap, allow_zero=True)
    if not (isinstance(value.factor, (int, float)) and 1.0 <= value.factor <= 100.0):
        raise ValidationError("backoff.factor must be a number in [1, 100]")
    if not (isinstance(value.jitter, (int, float)) and 0.0 <= value.jitter <= 1.0):
        raise ValidationError("backoff.jitter must be a number in [0, 1]")
    return value


# --- paging, entries, events, retention, trace contexts -----------------------------------


def check_limit(name: str, value: object) -> int:
    """A positive int, clamped to the SQL functions' documented maximum (`MAX_PAGE_ROWS`): a
    page is bounded anyway, so asking for more only means "as many as a page holds"."""
    return min(check_int(name, value, minimum=1), MAX_PAGE_ROWS)


def check_entry_id(value: object, name: str = "entry_id") -> int:
    """An entry id: an int >= 0."""
    return check_int(name, value, minimum=0)


def check_thread_ttl(minutes: object, strategy: object) -> tuple[float | None, str]:
    """`set_thread_ttl`'s TTL: minutes (a positive, finite number up to
    `MAX_THREAD_TTL_MINUTES`; None clears it) and a strategy of `THREAD_TTL_STRATEGIES`."""
    if strategy not in m.THREAD_TTL_STRATEGIES:
        raise ValidationError(f"strategy must be 'delete' or 'keep_latest', got {strategy!r}")
    if minutes is None:
        return None, str(strategy)
    if not isinstance(minutes, int | float) or isinstance(minutes, bool):
        raise ValidationError(f"ttl must be a number of minutes, got {type(minutes).__name__}")
    if not math.isfinite(minutes) or minutes <= 0 or minutes > m.MAX_THREAD_TTL_MINUTES:
        raise ValidationError(
            f"ttl must be more than 0 and at most {m.MAX_THREAD_TTL_MINUTES:g} minutes, "
            f"got {minutes!r}"
        )
    return float(minutes), str(strategy)


MAX_SWEEP_LIMIT: Final = 10_000
"""Expired threads one `sweep_threads` transaction takes at most (the reference's default
``sweep_limit``)."""


def check_sweep_limit(value: object) -> int:
    """`sweep_threads`' limit: an int in 1..`MAX_SWEEP_LIMIT` (a transaction stays short)."""
    return check_int("limit", value, minimum=1, maximum=MAX_SWEEP_LIMIT)


def check_prune_all(policy: object, batch: object) -> tuple[object, int]:
    check_retention(policy)
    """`prune_all`'s arguments: the policy, and the batch size (`check_limit`)."""
    return policy, check_limit("batch", batch)


def check_after_seq(value: object) -> int:
    """An event sequence number to read after: an int >= 0."""
    return check_int("after_seq", value, minimum=0)


def check_trace_context(value: object) -> m.TraceContext:
    if not isinstance(value, TraceContext):
        raise ValidationError("context must be a TraceContext")
    return value


# --- the waits (`await_events_after`, `subscribe`, `await_closed`) ------------------------


def check_subscribe(thread_id: object, after_seq: object, watch: object) -> None:
    check_identifier("thread_id", thread_id)
    check_after_seq(after_seq)
    check_watch(watch)


def check_await_events(
    thread_id: object, after_seq: object, timeout: object, watch: object
) -> None:
    check_identifier("thread_id", thread_id)
    check_after_seq(after_seq)
    check_duration("timeout", timeout, allow_zero=True)
    check_watch(watch)


def check_await_closed(entry_id: object, timeout: object, tenant: object) -> None:
    check_entry_id(entry_id)
    check_duration("timeout", timeout, allow_zero=True)
    check_optional_identifier("tenant", tenant)


__all__ = [
    "DEFAULT_MAX_VALUE_BYTES",
    "INT32_MAX",
    "INT64_MAX",
    "MAX_DURATION",
    "MAX_IDENTIFIER_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_JSON_NUMBER",
    "MAX_PAGE_ROWS",
    "MAX_SUBMISSIONS",
    "MAX_SWEEP_LIMIT",
    "STORE_EVENT_PREFIX",
    "BeginArgs",
    "EncodedCommit",
    "EncodedEvent",
    "EncodedSubmission",
    "EncodedWrite",
    "check_after_seq",
    "check_await_closed",
    "check_await_events",
    "check_backoff",
    "check_begin",
    "check_bool",
    "check_claim",
    "check_claim_attempt",
    "check_claim_policy",
    "check_clock",
    "check_commit",
    "check_duration",
    "check_entry_id",
    "check_error_text",
    "check_events",
    "check_finish",
    "check_identifier",
    "check_int",
    "check_lease",
    "check_limit",
    "check_listing",
    "check_max_value_bytes",
    "check_metadata_filter",
    "check_optional_identifier",
    "check_pair",
    "check_prune_all",
    "check_retention",
    "check_run_ids",
    "check_state",
    "check_str",
    "check_submission",
    "check_submissions",
    "check_subscribe",
    "check_sweep_limit",
    "check_tenant_filter",
    "check_thread_ttl",
    "check_timestamp",
    "check_trace_context",
    "check_watch",
    "check_writes",
    "decode_json",
    "decode_outcome",
    "encode_json",
    "encode_outcome",
    "fit_error_text",
    "from_micros",
    "from_posix",
    "json_identity",
    "same_json",
    "to_micros",
]
