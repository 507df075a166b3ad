"""The public SQL API as a released product (SPEC §23.1, D232): its manifest, ``sql/api.json``.

Every public function of a store's schema (``dg_*``: the runtime roles' calls and the DBA's
``dg_admin_*``) has one entry in the manifest: its name and identity arguments (what a caller's
call resolves to), its full argument list with names and defaults, its result type (a ``TABLE``'s
columns in order), volatility and ``SECURITY DEFINER``, as the catalog shows them once
installed; and the reviewed record of its life: the release it shipped in (``since``), the
release that deprecated it (``deprecated``) and the function to call instead (``successor``),
and the release that removed it (``removed``).

`problems` is the rule the test (``tests/test_sql_api.py``) holds: a released function never
changes shape and never disappears, unless its entry says it was removed in a release after
the one that deprecated it; and nothing public is installed that the manifest lacks.
`merged` is what ``tools/sql_api_manifest.py`` writes: new functions added as of this release;
a changed or vanished entry refused unless it is this release's own (``allow_change``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from typing import Any

import psycopg

from durable_graph.postgres.sql_files import release_order

SHAPE = ("arguments", "result", "volatility", "security_definer")
"""The fields a released entry keeps for ever (with its name and identity arguments)."""

_CATALOG = """
SELECT p.proname::text,
       pg_catalog.pg_get_function_identity_arguments(p.oid),
       pg_catalog.pg_get_function_arguments(p.oid),
       pg_catalog.pg_get_function_result(p.oid),
       CASE p.provolatile WHEN 'v' THEN 'volatile' WHEN 's' THEN 'stable' ELSE 'immutable' END,
       p.prosecdef
  FROM pg_catalog.pg_proc p
  JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = %s AND p.proname LIKE 'dg\\_%%'
"""


@dataclass(frozen=True, slots=True)
class Function:
    """One public function: its shape as installed, and its life as reviewed."""

    name: str
    identity_arguments: str
    arguments: str
    result: str
    volatility: str
    security_definer: bool
    since: str
    deprecated: str | None = None
    successor: str | None = None
    removed: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.name, self.identity_arguments)

    @property
    def signature(self) -> str:
        return f"{self.name}({self.identity_arguments})"

    def shape(self) -> tuple[object, ...]:
        return tuple(getattr(self, f) for f in SHAPE)


def release_key(release: str) -> tuple[int, ...]:
    """``"0.2.0"`` → ``(0, 2, 0)``, for ordering releases (`sql_files.release_order`, which
    a malformed release fails here)."""
    key = release_order(release)
    if key is None:
        raise ValueError(f"{release!r} is not a release (digits and dots: 0.2.0)")
    return key


def installed(conn: psycopg.Connection[Any], schema: str, since: str) -> list[Function]:
    """The public functions installed in ``schema``, each as a new entry of release ``since``."""
    rows = conn.execute(_CATALOG, (schema,)).fetchall()
    found = [
        Function(
            name=str(r[0]),
            identity_arguments=str(r[1]),
            arguments=str(r[2]),
            result=str(r[3]),
            volatility=str(r[4]),
            security_definer=bool(r[5]),
            since=since,
        )
        for r in rows
    ]
    return sorted(found, key=lambda f: f.key)


def loads(text: str) -> list[Function]:
    """The entries of a manifest's text."""
    data = json.loads(text)
    return [Function(**entry) for entry in data["functions"]]


def dumps(functions: list[Function]) -> str:
    """A manifest's text: the entries by name and identity arguments, one field a line."""
    data = {
        "about": (
            "The public SQL API (SPEC §23.1): one entry per dg_* function as the catalog shows it "
            "installed, with the release it shipped in, deprecated in and removed in. Checked by "
            "tests/test_sql_api.py; written by tools/sql_api_manifest.py (sql/README.md, "
            "'Releases')."
        ),
        "functions": [asdict(f) for f in sorted(functions, key=lambda f: f.key)],
    }
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _differences(entry: Function, now: Function) -> str:
    return "; ".join(
        f"{f}: {getattr(entry, f)!r} in the manifest, {getattr(now, f)!r} installed"
        for f in SHAPE
        if getattr(entry, f) != getattr(now, f)
    )


def problems(manifest: list[Function], now: list[Function], version: str) -> list[str]:
    """Every way the installed functions ``now`` break the manifest's record (none: it holds).

    ``version`` is the package's (`durable_graph._version.__version__`): no entry may name a
    later release.
    """
    out: list[str] = []
    by_key = {f.key: f for f in now}
    known = {f.key for f in manifest}
    names = {f.name for f in manifest if f.removed is None}
    current = release_key(version)
    for entry in manifest:
        for field in ("since", "deprecated", "removed"):
            release = getattr(entry, field)
            if release is not None and release_key(release) > current:
                out.append(f"{entry.signature}: {field} {release} is after this release {version}")
        if entry.deprecated is not None and entry.successor is None:
            out.append(f"{entry.signature}: deprecated in {entry.deprecated} without a successor")
        if entry.successor is not None and entry.successor not in names:
            out.append(f"{entry.signature}: its successor {entry.successor} is not in the API")
        got = by_key.get(entry.key)
        if entry.removed is not None:
            deprecated = entry.deprecated
            if deprecated is None or release_key(entry.removed)[:2] <= release_key(deprecated)[:2]:
                out.append(
                    f"{entry.signature}: removed in {entry.removed}, not in a minor release after "
                    f"the one that deprecated it ({deprecated})"
                )
            if got is not None:
                out.append(f"{entry.signature}: removed in {entry.removed} but still installed")
            continue
        if got is None:
            out.append(
                f"{entry.signature} (since {entry.since}) is not installed: a released function "
                "is kept (deprecated) for at least one minor release after its successor ships; "
                "bring it back, or record its removal in sql/api.json and CHANGELOG.md"
            )
        elif got.shape() != entry.shape():
            out.append(
                f"{entry.signature} (since {entry.since}) changed: {_differences(entry, got)}; "
                "a released function never changes: give the new shape a new _vN name"
            )
    for f in now:
        if f.key not in known:
            out.append(
                f"{f.signature} is installed but not in sql/api.json: "
                "run tools/sql_api_manifest.py and review the entry"
            )
    return out


def merged(
    manifest: list[Function], now: list[Function], version: str, *, allow_change: bool = False
) -> tuple[list[Function], list[str]]:
    """The manifest with the installed functions ``now`` recorded, and what it refused.

    A function not in the manifest is added as of ``version``. An entry whose shape differs, or
    which is no longer installed, is refused (kept as it was, named in the second list) — unless
    ``allow_change`` and the entry is ``version``'s own (``since == version``, not yet in an
    earlier release): then it takes the installed shape, or is dropped. Reviewed fields (since,
    deprecated, successor, removed) are kept.
    """
    by_key = {f.key: f for f in now}
    out: list[Function] = []
    refused: list[str] = []
    for entry in manifest:
        got = by_key.pop(entry.key, None)
        own = allow_change and entry.since == version and entry.deprecated is None
        if entry.removed is not None or (got is not None and got.shape() == entry.shape()):
            out.append(entry)
        elif got is None:
            if not own:
                out.append(entry)
                refused.append(f"{entry.signature} (since {entry.since}) is not installed")
        elif own:
            out.append(replace(entry, **{f: getattr(got, f) for f in SHAPE}))
        else:
            out.append(entry)
            refused.append(
                f"{entry.signature} (since {entry.since}) changed: {_differences(entry, got)}"
            )
    out.extend(by_key.values())
    return sorted(out, key=lambda f: f.key), refused


__all__ = [
    "SHAPE",
    "Function",
    "dumps",
    "installed",
    "loads",
    "merged",
    "problems",
    "release_key",
]
