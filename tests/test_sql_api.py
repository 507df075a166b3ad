"""The public SQL API is the released record, ``sql/api.json`` (SPEC §23.1, D232).

The schema this checkout installs must match the manifest exactly: every released ``dg_*``
function with its arguments, result, volatility and security as recorded; none gone unless the
manifest records its removal in a minor release after the one that deprecated it; none
installed that the manifest lacks. The manifest is read, never regenerated here: a change is
made by ``tools/sql_api_manifest.py`` and reviewed as a diff of the file.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import psycopg
from psycopg import sql

from durable_graph._version import __version__
from durable_graph.postgres import api
from durable_graph.postgres.migrations import migrate

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "sql" / "api.json"


def _manifest() -> list[api.Function]:
    return api.loads(MANIFEST.read_text(encoding="utf-8"))


def _installed(dsn: str, schema: str) -> list[api.Function]:
    migrate(dsn, schema)
    with psycopg.connect(dsn, autocommit=True) as conn:
        return api.installed(conn, schema, __version__)


def test_the_installed_api_is_the_manifests(pg_dsn: str, pg_schema: str) -> None:
    found = api.problems(_manifest(), _installed(pg_dsn, pg_schema), __version__)
    assert found == [], "\n".join(found)


def test_a_function_changed_in_the_schema_is_caught(pg_dsn: str, pg_schema: str) -> None:
    _installed(pg_dsn, pg_schema)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("ALTER FUNCTION {}.dg_thread_v1(text) VOLATILE").format(
                sql.Identifier(pg_schema)
            )
        )
        conn.execute(
            sql.SQL("DROP FUNCTION {}.dg_trace_context_v1(bigint)").format(
                sql.Identifier(pg_schema)
            )
        )
        now = api.installed(conn, pg_schema, __version__)
    found = api.problems(_manifest(), now, __version__)
    assert len(found) == 2, found
    assert found[0].startswith("dg_thread_v1(p_thread_id text) (since 0.2.0) changed: volatility")
    assert found[1].startswith("dg_trace_context_v1(p_entry_id bigint) (since 0.2.0) is not")


def test_the_manifest_is_as_the_tool_writes_it() -> None:
    text = MANIFEST.read_text(encoding="utf-8")
    assert api.dumps(api.loads(text)) == text


def test_every_public_name_is_versioned() -> None:
    for f in _manifest():
        assert re.fullmatch(r"dg_[a-z0-9_]+_v[0-9]+", f.name), f.name


def test_every_deprecated_function_is_documented_with_its_successor() -> None:
    readme = (ROOT / "sql" / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Deprecated functions\n", 1)[1].split("\n## ", 1)[0]
    deprecated = [f for f in _manifest() if f.deprecated is not None and f.removed is None]
    assert deprecated
    for f in deprecated:
        assert f"`{f.name}(" in section, f.name
        assert f"`{f.successor}" in section, f.successor


def test_every_deprecated_function_is_in_the_changelog() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    for f in _manifest():
        if f.deprecated is not None:
            assert f"`{f.name}`" in changelog, f.name


# The rules themselves, on a small manifest.

_ENTRY = api.Function(
    name="dg_thing_v1",
    identity_arguments="p_id bigint",
    arguments="p_id bigint",
    result="TABLE(id bigint)",
    volatility="stable",
    security_definer=True,
    since="0.2.0",
)
_NEXT = replace(_ENTRY, name="dg_thing_v2", identity_arguments="", arguments="")


def test_a_changed_signature_result_volatility_or_security_is_refused() -> None:
    changes = [
        ("arguments", replace(_ENTRY, arguments="p_id bigint DEFAULT 0")),
        ("result", replace(_ENTRY, result="TABLE(id bigint, extra text)")),
        ("volatility", replace(_ENTRY, volatility="volatile")),
        ("security_definer", replace(_ENTRY, security_definer=False)),
    ]
    for field, changed in changes:
        found = api.problems([_ENTRY], [changed], "0.3.0")
        assert len(found) == 1 and "changed" in found[0] and f"{field}:" in found[0]


def test_a_released_function_that_disappears_is_refused() -> None:
    found = api.problems([_ENTRY, _NEXT], [_NEXT], "0.3.0")
    assert len(found) == 1 and "is not installed" in found[0]


def test_an_overload_is_a_function_of_its_own() -> None:
    other = replace(_ENTRY, identity_arguments="p_id text", arguments="p_id text")
    found = api.problems([_ENTRY], [_ENTRY, other], "0.2.0")
    assert found == [
        "dg_thing_v1(p_id text) is installed but not in sql/api.json: "
        "run tools/sql_api_manifest.py and review the entry"
    ]


def test_removal_is_allowed_a_minor_release_after_deprecation() -> None:
    gone = replace(_ENTRY, deprecated="0.2.0", successor="dg_thing_v2", removed="0.3.0")
    assert api.problems([gone, _NEXT], [_NEXT], "0.3.0") == []


def test_removal_in_the_release_that_deprecated_it_is_refused() -> None:
    for deprecated, removed in [(None, "0.3.0"), ("0.2.0", "0.2.1"), ("0.3.0", "0.3.0")]:
        gone = replace(_ENTRY, deprecated=deprecated, successor="dg_thing_v2", removed=removed)
        found = api.problems([gone, _NEXT], [_NEXT], "0.3.0")
        assert any("not in a minor release after" in p for p in found), (deprecated, removed)


def test_a_removed_function_still_installed_is_refused() -> None:
    gone = replace(_ENTRY, deprecated="0.2.0", successor="dg_thing_v2", removed="0.3.0")
    found = api.problems([gone, _NEXT], [_ENTRY, _NEXT], "0.3.0")
    assert found == ["dg_thing_v1(p_id bigint): removed in 0.3.0 but still installed"]


def test_a_deprecation_names_a_successor_in_the_api() -> None:
    assert api.problems([replace(_ENTRY, deprecated="0.2.0")], [_ENTRY], "0.2.0") == [
        "dg_thing_v1(p_id bigint): deprecated in 0.2.0 without a successor",
    ]
    lost = replace(_ENTRY, deprecated="0.2.0", successor="dg_thing_v9")
    assert api.problems([lost], [_ENTRY], "0.2.0") == [
        "dg_thing_v1(p_id bigint): its successor dg_thing_v9 is not in the API",
    ]


def test_no_entry_names_a_later_release_than_the_packages() -> None:
    found = api.problems([replace(_ENTRY, since="0.3.0")], [_ENTRY], "0.2.0")
    assert found == ["dg_thing_v1(p_id bigint): since 0.3.0 is after this release 0.2.0"]


# What the tool writes (tools/sql_api_manifest.py).


def test_the_tool_adds_a_new_function_as_of_this_release() -> None:
    new, refused = api.merged([_ENTRY], [_ENTRY, replace(_NEXT, since="0.3.0")], "0.3.0")
    assert refused == [] and new == [_ENTRY, replace(_NEXT, since="0.3.0")]


def test_the_tool_keeps_a_changed_released_entry_and_says_so() -> None:
    changed = replace(_ENTRY, volatility="volatile")
    for allow_change in (False, True):
        new, refused = api.merged([_ENTRY], [changed], "0.3.0", allow_change=allow_change)
        assert new == [_ENTRY] and len(refused) == 1 and "volatility" in refused[0]
    new, refused = api.merged([_ENTRY], [], "0.3.0", allow_change=True)
    assert new == [_ENTRY] and refused == [
        "dg_thing_v1(p_id bigint) (since 0.2.0) is not installed"
    ]


def test_the_tool_lets_this_releases_own_entries_change_when_asked() -> None:
    changed = replace(_ENTRY, volatility="volatile")
    assert api.merged([_ENTRY], [changed], "0.2.0", allow_change=True) == ([changed], [])
    assert api.merged([_ENTRY], [], "0.2.0", allow_change=True) == ([], [])
    assert api.merged([_ENTRY], [changed], "0.2.0")[1] != []


def test_the_tool_keeps_the_reviewed_fields() -> None:
    reviewed = replace(_ENTRY, deprecated="0.2.0", successor="dg_thing_v2")
    assert api.merged([reviewed, _NEXT], [_ENTRY, _NEXT], "0.2.0") == ([reviewed, _NEXT], [])


def test_releases_order_by_number_not_text() -> None:
    assert api.release_key("0.10.0") > api.release_key("0.9.1") > api.release_key("0.9.0")


_DROP = re.compile(r"DROP\s+FUNCTION\s+(?:IF\s+EXISTS\s+)?([a-z_0-9]+)\s*\(", re.IGNORECASE)


def test_an_install_drops_no_function_but_a_removed_one() -> None:
    # An install or upgrade runs every function file: a DROP there of a released function would
    # take it from its callers (and its grants with it) on every upgrade, even to put it back.
    # Pre-release signatures are dropped once, by migration 0019 (D228); from 0.2.0 on a file
    # drops only a public function the manifest records as removed.
    from durable_graph.postgres.sql_files import function_files

    removed = {f.name for f in _manifest() if f.removed is not None}
    dropped = [
        (f.name, name)
        for f in function_files()
        for name in _DROP.findall(re.sub(r"--[^\n]*", "", f.text))
        if name not in removed
    ]
    assert dropped == []
