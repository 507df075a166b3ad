"""The deprecated SQL functions keep their signature, result and meaning (SPEC §23.1, D233).

``sql/96_deprecated.sql`` brings back the names other stacks called before 0.2.0 as wrappers
over their successors. Called here over psycopg as another language calls them: each answers as
its successor does for the same store (compared on twin threads or entries), and each refuses a
bad argument as its successor does (SQLSTATE and parameter), writing nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.rows import dict_row

from durable_graph.testkit.postgres.schema import reset_store

Conn = psycopg.Connection[dict[str, Any]]
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.fixture(scope="module")
def schema(module_schema: str) -> str:
    return module_schema


@pytest.fixture
def conn(pg_dsn: str, schema: str) -> Iterator[Conn]:
    with psycopg.connect(pg_dsn, autocommit=True) as plain:
        reset_store(plain, schema)
    with psycopg.connect(pg_dsn, autocommit=True, row_factory=dict_row) as c:
        c.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        yield c


def _rows(conn: Conn, query: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    return conn.execute(query.encode(), params).fetchall()


def _refused(conn: Conn, query: str, params: tuple[Any, ...] = ()) -> tuple[str | None, str]:
    """The SQLSTATE and message of a call that must fail."""
    with pytest.raises(psycopg.Error) as caught:
        conn.execute(query.encode(), params)
    diag = caught.value.diag
    return diag.sqlstate, diag.message_primary or ""


def _claimed_head(conn: Conn, thread: str) -> tuple[int, str]:
    """Claim ``thread`` and commit a first checkpoint; (claim token, checkpoint id)."""
    token = _rows(conn, "SELECT token FROM dg_claim_v1(%s, 'h', '1 minute')", (thread,))[0]["token"]
    _rows(
        conn,
        "SELECT * FROM dg_commit_v1(%s, %s, 'c1', NULL, 'r1', '{}', '{}', ARRAY[]::text[],"
        " NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
        (thread, token),
    )
    return int(token), "c1"


def _writes(conn: Conn, thread: str) -> Any:
    return _rows(conn, "SELECT writes FROM dg_get_v1(%s, NULL)", (thread,))[0]["writes"]


def _count(conn: Conn, table: str) -> int:
    return int(_rows(conn, f"SELECT count(*) AS n FROM {table}")[0]["n"])


# dg_put_writes_v1 -> dg_put_writes_v2


def test_put_writes_v1_writes_as_v2_without_task_paths(conn: Conn) -> None:
    args = (["t1", "t1"], ["a", "b"], ["1", '{"x":2}'])
    old_token, cid = _claimed_head(conn, "old")
    new_token, _ = _claimed_head(conn, "new")
    _rows(conn, "SELECT dg_put_writes_v1('old', %s, %s, %s, %s, %s)", (old_token, cid, *args))
    _rows(conn, "SELECT dg_put_writes_v2('new', %s, %s, %s, %s, %s, NULL)", (new_token, cid, *args))
    assert _writes(conn, "old") == _writes(conn, "new")
    assert len(_writes(conn, "old")) == 2


def test_put_writes_v1_refuses_as_v2(conn: Conn) -> None:
    token, cid = _claimed_head(conn, "t")
    call = "SELECT dg_put_writes_v1('t', %s, %s, ARRAY['task'], ARRAY['ch'], ARRAY[%s])"
    state, message = _refused(conn, call, (token, cid, "{"))
    assert state == "DG000" and "values[1]" in message
    assert _refused(conn, call, (token + 1000, cid, "1"))[0] == "DG002"
    assert _refused(conn, call, (token, "nope", "1"))[0] == "DG404"
    state, message = _refused(conn, call, (token, "", "1"))
    assert state == "DG000" and "checkpoint_id" in message
    assert _count(conn, "pending_writes") == 0


# dg_put_writes_fenced_v1 -> dg_put_writes_fenced_v2


def test_put_writes_fenced_v1_writes_under_the_fence(conn: Conn) -> None:
    root_token, _ = _claimed_head(conn, "root")
    token, cid = _claimed_head(conn, "root\x1fsub")
    call = (
        "SELECT dg_put_writes_fenced_v1('root\x1fsub', %s, %s, ARRAY['task'], ARRAY['ch'],"
        " ARRAY['1'], 'root', %s)"
    )
    state, message = _refused(conn, call, (token, cid, root_token + 1000))
    assert (state, message) == ("DG002", "fence claim is not current on its thread")
    assert _count(conn, "pending_writes") == 0
    _rows(conn, call, (token, cid, root_token))
    assert [w["channel"] for w in _writes(conn, "root\x1fsub")] == ["ch"]


# dg_put_writes_and_commit_v1 -> dg_put_writes_and_commit_v2


def test_put_writes_and_commit_v1_returns_what_v2_returns(conn: Conn) -> None:
    rows = []
    for thread, call in [
        ("old", "dg_put_writes_and_commit_v1(%s, %s, %s, ARRAY['t'], ARRAY['ch'], ARRAY['7'],"),
        (
            "new",
            "dg_put_writes_and_commit_v2(%s, %s, %s, ARRAY['t'], ARRAY['ch'], ARRAY['7'], NULL,",
        ),
    ]:
        token, cid = _claimed_head(conn, thread)
        row = _rows(
            conn,
            f"SELECT * FROM {call} 'c2', 'c1', 'r1', '{{\"n\":2}}', '{{}}', ARRAY[]::text[],"
            " NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
            (thread, token, cid),
        )[0]
        rows.append(
            {k: v for k, v in row.items() if k not in ("thread_id", "created_at", "committed_at")}
        )
        assert _rows(conn, "SELECT checkpoint_id FROM dg_get_v1(%s, 'c1')", (thread,))[0]
        assert len(_writes(conn, thread)) == 0  # the head is c2; c1 holds the write
    assert rows[0] == rows[1]
    assert rows[0]["checkpoint_id"] == "c2"
    assert _count(conn, "pending_writes") == 2


def test_put_writes_and_commit_v1_refuses_as_v2_writing_nothing(conn: Conn) -> None:
    token, cid = _claimed_head(conn, "t")
    state = _refused(
        conn,
        "SELECT * FROM dg_put_writes_and_commit_v1('t', %s, %s, ARRAY['t'], ARRAY['ch'],"
        " ARRAY['7'], 'c2', 'not-the-head', 'r1', '{}', '{}', ARRAY[]::text[],"
        " NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
        (token, cid),
    )[0]
    assert state == "DG003"
    assert _count(conn, "pending_writes") == 0 and _count(conn, "checkpoints") == 1


# dg_finish_attempt_v1 -> dg_finish_attempt_v2


def _leased(conn: Conn, thread: str, tenant: str | None = None) -> tuple[int, int, int]:
    """Submit to ``thread``, lease it and claim its thread: (entry id, lease token, claim token)."""
    entry = _rows(
        conn, "SELECT entry_id FROM dg_submit_v1(%s, '1', %s, NULL, 'enqueue', 3)", (thread, tenant)
    )[0]["entry_id"]
    lease = _rows(
        conn,
        "SELECT token FROM dg_lease_v1('w', '1 minute', %s, %s, 'run-' || %s)",
        (tenant is None, tenant, thread),
    )[0]["token"]
    claim = _rows(conn, "SELECT token FROM dg_claim_v1(%s, 'w', '1 minute')", (thread,))[0]["token"]
    return int(entry), int(lease), int(claim)


def test_finish_attempt_v1_closes_and_releases_the_claim(conn: Conn) -> None:
    entry, lease, claim = _leased(conn, "t")
    row = _rows(
        conn,
        "SELECT * FROM dg_finish_attempt_v1(%s, %s, 'completed', '\"out\"', %s, NULL)",
        (entry, lease, claim),
    )
    assert len(row) == 1 and row[0]["outcome_kind"] == "completed"
    assert row[0]["outcome_detail"] == '"out"' and row[0]["lease_holder"] is None
    assert list(row[0]) == list(_rows(conn, "SELECT * FROM dg_entry_v1(%s, NULL)", (entry,))[0])
    # The claim is released: another holder takes the thread at once.
    assert _rows(conn, "SELECT token FROM dg_claim_v1('t', 'other', '1 minute')")


def test_finish_attempt_v1_leaves_a_claim_no_longer_current(conn: Conn) -> None:
    entry, lease, claim = _leased(conn, "t")
    _rows(conn, "SELECT dg_release_claim_v1('t', %s)", (claim,))
    newer = _rows(conn, "SELECT token FROM dg_claim_v1('t', 'other', '1 minute')")[0]["token"]
    _rows(
        conn,
        "SELECT * FROM dg_finish_attempt_v1(%s, %s, 'failed', '\"boom\"', %s, NULL)",
        (entry, lease, claim),
    )
    assert _rows(conn, "SELECT claim_token FROM threads WHERE thread_id = 't'") == [
        {"claim_token": newer}
    ]


def test_finish_attempt_v1_refuses_as_v2(conn: Conn) -> None:
    entry, lease, claim = _leased(conn, "t")
    call = "SELECT * FROM dg_finish_attempt_v1(%s, %s, %s, '1', %s, %s)"
    state, message = _refused(conn, call, (entry, lease, "done", claim, None))
    assert state == "DG000" and "outcome_kind" in message
    assert _refused(conn, call, (entry, lease + 1000, "completed", claim, None))[0] == "DG102"
    assert _refused(conn, call, (entry, lease, "completed", claim, "other-tenant"))[0] == "DG103"
    state, message = _refused(conn, call, (None, lease, "completed", claim, None))
    assert state == "DG000" and "entry_id" in message
    assert _rows(conn, "SELECT outcome_kind FROM dg_entry_v1(%s, NULL)", (entry,)) == [
        {"outcome_kind": None}
    ]


# dg_entry_v2 -> dg_entry_v1


def test_entry_v2_is_entry_v1(conn: Conn) -> None:
    entry, _, _ = _leased(conn, "t", tenant="acme")
    query = "SELECT * FROM {}(%s, %s)"
    for tenant in ("acme", None, "other"):
        assert _rows(conn, query.format("dg_entry_v2"), (entry, tenant)) == _rows(
            conn, query.format("dg_entry_v1"), (entry, tenant)
        )
    assert len(_rows(conn, query.format("dg_entry_v2"), (entry, "acme"))) == 1
    state, message = _refused(conn, query.format("dg_entry_v2"), (None, None))
    assert state == "DG000" and "entry_id" in message


# dg_set_trace_context_v1, dg_trace_context_v1 -> their _v2 with no tenant


def _submitted(conn: Conn, thread: str, tenant: str | None) -> int:
    return int(
        _rows(
            conn,
            "SELECT entry_id FROM dg_submit_v1(%s, '1', %s, NULL, 'enqueue', 3)",
            (thread, tenant),
        )[0]["entry_id"]
    )


def test_set_trace_context_v1_keeps_the_first_context(conn: Conn) -> None:
    entry = _submitted(conn, "t", None)
    set_ = "SELECT * FROM dg_set_trace_context_v1(%s, %s, %s)"
    assert _rows(conn, set_, (entry, TRACEPARENT, "k=v")) == [{"stored": True}]
    other = "00-" + "1" * 32 + "-" + "2" * 16 + "-00"
    assert _rows(conn, set_, (entry, other, None)) == [{"stored": False}]
    expected = [{"traceparent": TRACEPARENT, "tracestate": "k=v"}]
    assert _rows(conn, "SELECT * FROM dg_trace_context_v1(%s)", (entry,)) == expected
    assert _rows(conn, "SELECT * FROM dg_trace_context_v2(%s, NULL)", (entry,)) == expected


def test_trace_context_v1_sees_the_no_tenant_namespace_only(conn: Conn) -> None:
    entry = _submitted(conn, "t", "acme")
    set_ = "SELECT * FROM dg_set_trace_context_v1(%s, %s, NULL)"
    # Another tenant's entry answers as an id that never existed (SPEC §10.6).
    assert _refused(conn, set_, (entry, TRACEPARENT)) == ("DG404", f"entry {entry} not found")
    assert _refused(conn, set_, (entry + 1000, TRACEPARENT)) == (
        "DG404",
        f"entry {entry + 1000} not found",
    )
    assert _count(conn, "queue_trace_context") == 0
    _rows(conn, "SELECT * FROM dg_set_trace_context_v2(%s, 'acme', %s, NULL)", (entry, TRACEPARENT))
    assert _rows(conn, "SELECT * FROM dg_trace_context_v1(%s)", (entry,)) == []
    assert _rows(conn, "SELECT * FROM dg_trace_context_v1(%s)", (entry + 1000,)) == []


def test_trace_context_v1_refuses_as_v2(conn: Conn) -> None:
    entry = _submitted(conn, "t", None)
    state, message = _refused(
        conn, "SELECT * FROM dg_set_trace_context_v1(%s, 'nope', NULL)", (entry,)
    )
    assert state == "DG000" and "traceparent" in message
    state, message = _refused(
        conn, "SELECT * FROM dg_set_trace_context_v1(%s, %s, %s)", (entry, TRACEPARENT, "é")
    )
    assert state == "DG000" and "tracestate" in message
    state, message = _refused(conn, "SELECT * FROM dg_trace_context_v1(NULL)")
    assert state == "DG000" and "entry_id" in message
    assert _count(conn, "queue_trace_context") == 0


# dg_workers_v1 -> dg_workers_v2


def test_workers_v1_reads_every_page_of_v2(conn: Conn) -> None:
    _rows(
        conn,
        "SELECT count(*) FROM pg_catalog.generate_series(1, 1005) g,"
        " LATERAL dg_worker_heartbeat_v1('w' || pg_catalog.lpad(g::text, 5, '0'), 'host', g,"
        " NULL, CASE WHEN g = 7 THEN 'stopped' ELSE 'idle' END)",
    )
    every = _rows(conn, "SELECT * FROM dg_workers_v1('1 minute')")
    pages: list[dict[str, Any]] = []
    after = None
    while True:
        page = _rows(conn, "SELECT * FROM dg_workers_v2('1 minute', %s, 1000)", (after,))
        pages += page
        if len(page) < 1000:
            break
        after = page[-1]["holder"]
    assert every == pages
    assert len(every) == 1004 and "w00007" not in {w["holder"] for w in every}
    assert [w["holder"] for w in every] == sorted(w["holder"] for w in every)


def test_workers_v1_refuses_as_v2(conn: Conn) -> None:
    for bad in (None, "0 seconds", "-1 minute", "36501 days"):
        state, message = _refused(conn, "SELECT * FROM dg_workers_v1(%s::interval)", (bad,))
        assert state == "DG000" and "seen_within" in message, (bad, message)


def test_workers_v1_on_an_empty_registry_returns_no_row(conn: Conn) -> None:
    assert _rows(conn, "SELECT * FROM dg_workers_v1('1 day')") == []


def test_every_deprecated_function_is_security_definer_and_private(conn: Conn, schema: str) -> None:
    names = [
        "dg_put_writes_v1",
        "dg_put_writes_fenced_v1",
        "dg_put_writes_and_commit_v1",
        "dg_finish_attempt_v1",
        "dg_entry_v2",
        "dg_set_trace_context_v1",
        "dg_trace_context_v1",
        "dg_workers_v1",
    ]
    rows = _rows(
        conn,
        "SELECT p.proname, p.prosecdef, p.proconfig,"
        "       pg_catalog.has_function_privilege('public', p.oid, 'EXECUTE') AS public"
        "  FROM pg_catalog.pg_proc p WHERE p.pronamespace = current_schema()::regnamespace"
        "   AND p.proname = ANY(%s) ORDER BY 1",
        (names,),
    )
    assert [r["proname"] for r in rows] == sorted(names)
    for r in rows:
        assert r["prosecdef"] and not r["public"], r
        assert r["proconfig"][0] == f"search_path={schema}, pg_temp", r


# dg_begin_attempt_v1 -> dg_begin_attempt_v2

_BEGIN = "SELECT * FROM {}('w', interval '30 seconds', interval '30 seconds', true, NULL, %s)"
_FINISH_FAILED = (
    "SELECT outcome_kind FROM dg_finish_attempt_v2(%s, %s, 'failed', '\"boom\"', %s, %s,"
    " NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)"
)


def _failed_after_a_commit(conn: Conn, thread: str, version: str, run: str) -> int:
    """Submit to ``thread``, begin it with dg_begin_attempt_``version``, commit a checkpoint
    with a next task under the run, fail the entry; its id."""
    _rows(conn, "SELECT * FROM dg_submit_v1(%s, '1', NULL, NULL, 'enqueue', 3)", (thread,))
    begun = _rows(conn, _BEGIN.format(f"dg_begin_attempt_{version}"), (run,))[0]
    _rows(
        conn,
        "SELECT * FROM dg_commit_v1(%s, %s, %s, NULL, %s, '{}', NULL, ARRAY['tool'],"
        " ARRAY[]::text[], ARRAY[]::text[], ARRAY[]::timestamptz[], NULL, NULL, NULL, NULL)",
        (thread, begun["claim_token"], f"cp-{run}", run),
    )
    closed = _rows(
        conn, _FINISH_FAILED, (begun["entry_id"], begun["token"], thread, begun["claim_token"])
    )
    assert closed[0]["outcome_kind"] == "failed"
    return int(begun["entry_id"])


def test_begin_attempt_v1_answers_as_before_v2_planned_retries(conn: Conn) -> None:
    # The same row as v2 but plan; for a retry, latest_* over the entry's own attempts only
    # (v1's meaning since it shipped), where v2 reads the retry chain's.
    answers = {}
    for version in ("v1", "v2"):
        thread = f"retried-{version}"
        first = _failed_after_a_commit(conn, thread, version, f"{version}-run-1")
        _rows(conn, "SELECT * FROM dg_retry_v1(%s, NULL)", (first,))
        answers[version] = _rows(
            conn, _BEGIN.format(f"dg_begin_attempt_{version}"), (f"{version}-run-2",)
        )[0]
    v1, v2 = answers["v1"], answers["v2"]
    assert "plan" not in v1 and v2["plan"] == "resume"
    assert v2["latest_checkpoint_id"] == "cp-v2-run-1" and v2["latest_next"] == ["tool"]
    assert all(v1[c] is None for c in v1 if c.startswith("latest_"))
    assert v1["head_checkpoint_id"] == "cp-v1-run-1" and v1["retry_of"] is not None
    varying = ("entry_id", "retry_of", "thread_id", "token", "claim_token", "attempts")
    same = [c for c in v1 if not c.startswith(("latest_", "head_")) and c not in varying]
    assert {c: v1[c] for c in same if "_at" not in c} == {c: v2[c] for c in same if "_at" not in c}
