"""The proxy database's functions, generated from a partition's own catalog (SPEC §16.3).

Every public ``dg_*`` function of a partition gets a function of the same name and signature in
the proxy's schema:

- **thread-keyed** (first argument ``p_thread_id``): a PL/Proxy stub, ``RUN ON
  _dg_thread_part(p_thread_id)``; when it also names another thread (``p_parent_thread_id``,
  ``p_fence_thread_id``), the route refuses one on another partition (``_dg_same_part``, DG000);
- ``dg_copy_thread_v1``: routed by its source, refusing a target on another partition;
- **entry-keyed** (first argument ``p_entry_id``): ``RUN ON _dg_entry_part(p_entry_id)``;
- **store-wide**: the PL/pgSQL of ``sql/proxy/NN_*.sql`` (lease, listings, sweeps, batches),
  built on two generated helpers per function, ``_dg_on_F(p_part integer, ...)`` (``RUN ON
  p_part``) and ``_dg_all_F(...)`` (``RUN ON ALL``), both ``TARGET``-ing the partition's ``F``.

A partition function with no rule here is an error (`ProcessingError`): a new store-wide call
needs its template before a proxy can be generated, so a proxy never routes a call wrongly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import psycopg

from durable_graph.core.errors import ProcessingError
from durable_graph.postgres.sql_files import function_bodies

THREAD_ALSO = ("p_parent_thread_id", "p_fence_thread_id")
"""Arguments naming another thread that must share the call's partition."""

_PROXY_FILE = re.compile(r"\d\d_[a-z0-9_]+\.sql")


@dataclass(frozen=True, slots=True)
class Signature:
    """A partition function as the catalog shows it."""

    name: str
    arguments: str  # pg_get_function_arguments: names, types, defaults
    identity: str  # pg_get_function_identity_arguments
    result: str  # pg_get_function_result

    @property
    def argument_names(self) -> list[str]:
        names = []
        for part in _split_args(self.identity):
            words = part.split()
            if words:
                names.append(words[0])
        return names


def _split_args(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for c in text:
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        if c == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += c
    if cur.strip():
        parts.append(cur.strip())
    return parts


def read_signatures(conn: psycopg.Connection[Any], schema: str) -> list[Signature]:
    """The public ``dg_*`` functions of a partition's schema."""
    rows = conn.execute(
        "SELECT p.proname, pg_catalog.pg_get_function_arguments(p.oid),"
        "       pg_catalog.pg_get_function_identity_arguments(p.oid),"
        "       pg_catalog.pg_get_function_result(p.oid)"
        "  FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace"
        " WHERE n.nspname = %s AND p.proname LIKE 'dg\\_%%' ORDER BY 1",
        (schema,),
    ).fetchall()
    return [Signature(str(a), str(b), str(c), str(d)) for a, b, c, d in rows]


def proxy_files() -> list[tuple[str, str]]:
    """``sql/proxy/NN_*.sql``: (name, text), in install order."""
    root = resources.files("durable_graph") / "_sql" / "proxy"
    found = [
        (e.name, e.read_text(encoding="utf-8"))
        for e in root.iterdir()
        if e.is_file() and _PROXY_FILE.fullmatch(e.name)
    ]
    return sorted(found)


def templated() -> set[str]:
    """The names of the functions ``sql/proxy/`` defines."""
    return {name for _, text in proxy_files() for name, _ in function_bodies(text)}


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _stub(
    schema: str,
    cluster: str,
    sig: Signature,
    run_on: str,
    name: str | None = None,
    arguments: str | None = None,
) -> str:
    fn = name or sig.name
    return (
        f"CREATE FUNCTION {_q(schema)}.{fn}({sig.arguments if arguments is None else arguments})"
        f" RETURNS {sig.result} LANGUAGE plproxy AS $$\n"
        f"CLUSTER '{cluster}';\nRUN ON {run_on};\nTARGET {schema}.{sig.name};\n$$;"
    )


def _on_partition(schema: str, cluster: str, sig: Signature, name: str, arguments: str) -> str:
    """``name(p_part, args...)``: ``sig`` on partition ``p_part`` (a SELECT of its own: with
    TARGET, PL/Proxy would pass p_part on too)."""
    args = ", ".join(sig.argument_names)
    select = (
        f"SELECT {schema}.{sig.name}({args})"
        if sig.result == "void"
        else f"SELECT * FROM {schema}.{sig.name}({args})"
    )
    return (
        f"CREATE FUNCTION {_q(schema)}.{name}({arguments}) RETURNS {sig.result}"
        f" LANGUAGE plproxy AS $$\nCLUSTER '{cluster}';\nRUN ON p_part;\n{select};\n$$;"
    )


def _route(schema: str, sig: Signature, others: list[tuple[str, str]]) -> tuple[str, str]:
    """A routing function for a call naming other threads: (its DDL, its RUN ON expression)."""
    first = sig.argument_names[0]
    args = [first, *(o for o, _ in others)]
    # Each check raises on its own (DG000 naming the argument); the value is first's partition.
    checks = " + ".join(f"0 * _dg_same_part({first}, {a}, '{label}')" for a, label in others)
    fn = f"_dg_route_{sig.name}"
    ddl = (
        f"CREATE FUNCTION {_q(schema)}.{fn}({', '.join(a + ' text' for a in args)})"
        f" RETURNS integer LANGUAGE sql IMMUTABLE SET search_path FROM CURRENT"
        f" AS $$ SELECT _dg_thread_part({first}) + "
        f"{checks} $$;"
    )
    return ddl, f"{schema}.{fn}({', '.join(args)})"


def _entry_route(schema: str, sig: Signature, others: list[tuple[str, str]]) -> tuple[str, str]:
    """`_route` for an entry-keyed call that also commits on ``p_thread_id`` (NULL: no commit,
    nothing to check): its RUN ON is the entry's partition."""
    args = ["p_thread_id", *(o for o, _ in others)]
    checks = " + ".join(
        f"coalesce(0 * _dg_same_part(p_thread_id, {a}, '{label}'), 0)" for a, label in others
    )
    fn = f"_dg_route_{sig.name}"
    ddl = (
        f"CREATE FUNCTION {_q(schema)}.{fn}(p_entry_id bigint, {', '.join(a + ' text' for a in args)})"
        f" RETURNS integer LANGUAGE sql IMMUTABLE SET search_path FROM CURRENT"
        f" AS $$ SELECT _dg_entry_part(p_entry_id) + {checks} $$;"
    )
    return ddl, f"{schema}.{fn}(p_entry_id, {', '.join(args)})"


def generate(schema: str, cluster: str, partitions: int, signatures: list[Signature]) -> list[str]:
    """Every statement that fills the proxy's (empty) schema, in order."""
    own = templated()
    out = [
        f"CREATE FUNCTION {_q(schema)}._dg_partitions() RETURNS integer LANGUAGE sql IMMUTABLE"
        " SET search_path FROM CURRENT"
        f" AS $$ SELECT {int(partitions)} $$;"
    ]
    stubs: list[str] = []
    missing: list[str] = []
    for sig in signatures:
        names = sig.argument_names if sig.name not in PARTITION_ONLY else []
        if names[:1] == ["p_thread_id"] and sig.name not in own:
            others = [(a, a.removeprefix("p_")) for a in names if a in THREAD_ALSO]
            if others:
                ddl, run_on = _route(schema, sig, others)
                stubs.extend([ddl, _stub(schema, cluster, sig, run_on)])
            else:
                stubs.append(_stub(schema, cluster, sig, f"{schema}._dg_thread_part(p_thread_id)"))
            continue
        if names[:2] == ["p_source", "p_target"] and sig.name not in own:
            ddl, run_on = _route(schema, sig, [("p_target", "target_thread_id")])
            stubs.extend([ddl, _stub(schema, cluster, sig, run_on)])
            continue
        if names[:1] == ["p_entry_id"] and sig.name not in own:
            others = [(a, a.removeprefix("p_")) for a in names if a in THREAD_ALSO]
            if others and "p_thread_id" in names:
                # A fused commit (dg_finish_attempt_v2): the entry's partition, refusing a
                # parent or fence on another than the commit's thread's, as a commit does.
                ddl, run_on = _entry_route(schema, sig, others)
                stubs.extend([ddl, _stub(schema, cluster, sig, run_on)])
            else:
                stubs.append(_stub(schema, cluster, sig, f"{schema}._dg_entry_part(p_entry_id)"))
            continue
        # Store-wide (or partition-only): helpers for the templates.
        helper = sig.name.removeprefix("dg_")
        on_args = "p_part integer" + (", " + sig.arguments if sig.arguments else "")
        stubs.append(_on_partition(schema, cluster, sig, f"_dg_on_{helper}", on_args))
        if sig.result.startswith(("TABLE(", "SETOF ")):  # RUN ON ALL needs a set
            stubs.append(_stub(schema, cluster, sig, "ALL", f"_dg_all_{helper}"))
        if sig.name not in own and not _partition_only(sig.name):
            missing.append(sig.name)
    _refuse(
        missing,
        "no proxy routing for partition function(s)",
        "add their store-wide template to sql/proxy/",
    )
    files = proxy_files()  # the routing (00_) first: the stubs' RUN ON calls it
    out.extend(text for name, text in files if name.startswith("00_"))
    out.extend(stubs)
    out.extend(text for name, text in files if not name.startswith("00_"))
    return out


def check_signatures(partition: list[Signature], generated: list[Signature]) -> None:
    """Refuse a proxy whose functions differ from the partition's: a template written for an
    older signature (an argument or a result column added since) would fail only when called."""
    have = {(s.name, s.identity): s for s in generated}
    wrong = []
    for sig in partition:
        if sig.name in PARTITION_ONLY:
            continue
        got = have.get((sig.name, sig.identity))
        if got is None or got.result != sig.result or got.arguments != sig.arguments:
            wrong.append(sig.name)
    _refuse(
        wrong,
        "the proxy's template differs from the partition's signature for",
        "bring sql/proxy/ up to date with sql/",
    )


def _refuse(functions: list[str], problem: str, remedy: str) -> None:
    """Refuse the proxy if any ``functions`` (their names) have ``problem``: the message names
    them and the ``remedy``."""
    if functions:
        raise ProcessingError(f"{problem} {', '.join(functions)}: {remedy}")


PARTITION_ONLY = frozenset(
    {
        "dg_lease_peek_v1",
        "dg_queue_position_v1",
        "dg_open_entries_at_v1",
        "dg_page_bytes_v1",
        "dg_reclaim_peek_v1",
        "dg_schedule_thread_v1",
        "dg_take_schedule_v1",
        "dg_adopt_schedule_v1",
        "dg_submit_many_check_v1",
        "dg_submit_many_undo_v1",
        "dg_limit_usage_v1",
        "dg_lease_limited_v1",
        "dg_begin_attempt_limited_v1",
        "dg_begin_attempt_limited_v2",
    }
)
"""Functions a partition serves to the proxy only (``sql/93_partitions.sql``)."""


def _partition_only(name: str) -> bool:
    return name in PARTITION_ONLY


__all__ = [
    "PARTITION_ONLY",
    "Signature",
    "check_signatures",
    "generate",
    "proxy_files",
    "read_signatures",
    "templated",
]
