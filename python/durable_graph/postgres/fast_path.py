"""The PostgreSQL call builders of the worker's fast path (SPEC §11, §18.1;
``sql/75_fast_path.sql``): each checks its arguments and builds one `SqlCall` of a composed
function (begin, renew, finish with its commit), as `calls` does for the single steps."""

from __future__ import annotations

from durable_graph.core.fast_path import (
    check_begin,
    check_claim_attempt,
    check_finish,
    check_pair,
)
from durable_graph.core.model import AttemptBegun, Claim, Lease, QueueEntry
from durable_graph.postgres.calls import (
    Arg,
    SqlCall,
    _call,
    _claim_args,
    _commit_args,
    _tenant_args,
    lease_args,
)
from durable_graph.postgres.config import PostgresConfig
from durable_graph.postgres.rows import (
    begun_of,
    claimed_of,
    entry_of,
    exactly_one,
    first_or_none,
    renewed_of,
)


def begin_attempt(
    config: PostgresConfig,
    holder: object,
    ttl: object,
    run_id: object,
    claim_policy: object,
    tenant: object,
    kinds: object,
) -> SqlCall[AttemptBegun | None]:
    a = check_begin(holder, ttl, run_id, claim_policy, tenant, kinds)
    args = [
        ("text", a.holder),
        ("interval", a.ttl),
        ("interval", a.claim_policy.ttl),
        *_tenant_args("tenant", a.tenant, allow_any=True),
        ("text", a.run_id),
        ("text[]", None if a.kinds is None else list(a.kinds)),
    ]
    # v2: the plan decided in SQL with the retry chain's runs (SPEC §23.5, D229).
    return _call(config, "begin_attempt", "dg_begin_attempt_v2", args, first_or_none(begun_of))


def claim_attempt(
    config: PostgresConfig, lease: object, holder: object, claim_policy: object
) -> SqlCall[AttemptBegun]:
    """The rest of `begin_attempt` once the thread's claim is free: the lease checked, the
    claim taken as ``holder``, the entry, latest over its retry chain's runs, the plan and the
    head, in one ``dg_claim_attempt_v1`` call (SPEC §11, §19.3, §23.5)."""
    ls, h, policy = check_claim_attempt(lease, holder, claim_policy)
    args = lease_args(ls, ("text", h), ("interval", policy.ttl))
    return _call(config, "claim_attempt", "dg_claim_attempt_v1", args, exactly_one(claimed_of(h)))


def renew_attempt(
    config: PostgresConfig, lease: object, claim: object
) -> SqlCall[tuple[Lease, Claim]]:
    ls, c = check_pair(lease, claim)
    args = lease_args(ls, ("bigint", c.token))
    return _call(config, "renew_attempt", "dg_renew_attempt_v1", args, exactly_one(renewed_of))


_NO_COMMIT: list[Arg] = [
    ("text", None),
    ("text", None),
    ("text", None),
    ("text", None),
    ("text", None),
    ("text[]", None),
    ("text[]", None),
    ("text[]", None),
    ("timestamptz[]", None),
    ("timestamptz", None),
    ("text", None),
    ("text", None),
    ("bigint", None),
]
"""`_commit_args` of no commit: `finish_attempt` without ``commit`` (the same statement)."""


def finish_attempt(
    config: PostgresConfig, lease: object, outcome: object, claim: object, commit: object
) -> SqlCall[QueueEntry]:
    """SPEC §11 / §18.1: ``commit`` (when given) committed under ``claim``, the entry closed and
    the claim released, in one ``dg_finish_attempt_v2`` call (one transaction)."""
    ls, (kind, detail), c, cm = check_finish(lease, outcome, claim, config.max_value_bytes, commit)
    committed = _NO_COMMIT if cm is None else _commit_args(cm)
    args = lease_args(ls, ("text", kind), ("text", detail), *_claim_args(c), *committed)
    return _call(config, "finish_attempt", "dg_finish_attempt_v2", args, exactly_one(entry_of))


__all__ = ["begin_attempt", "claim_attempt", "finish_attempt", "renew_attempt"]
