"""The SQL functions check every argument themselves (SPEC §10 rules 1-2, issue #11).

Called directly over psycopg, as another language would, with no Python validation in front: a
bad argument gets DG000 naming the parameter and writes nothing (every table is compared before
and after); limits live in the schema and a DBA changes them with ``dg_admin_set_limit_v1``; read pages
are byte-bounded yet always progress.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from durable_graph.core.errors import ProcessingError, ValidationError
from durable_graph.core.model import ANY, Commit, EventIn, Failed, Submission, WatchPolicy
from durable_graph.core.scheduling import check_cron
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.postgres.migrations import migrate
from durable_graph.testkit.cron_cases import BAD_CRONS, GOOD_CRONS
from durable_graph.testkit.postgres.schema import reset_store

DEEP_512 = "[" * 512 + "]" * 512
DEEP_513 = "[" * 513 + "]" * 513
DEEP_100K = "[" * 100_000 + "]" * 100_000


@pytest.fixture(scope="module")
def schema(module_schema: str) -> str:
    return module_schema


@pytest.fixture
def conn(pg_dsn: str, schema: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg_dsn, autocommit=True) as c:
        reset_store(c, schema)
        c.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        yield c


def _dump(conn: psycopg.Connection[Any]) -> dict[str, list[str]]:
    """Every row of every store table, as text: 'nothing written' is equality of two dumps."""
    tables = [
        "threads",
        "checkpoints",
        "pending_writes",
        "events",
        "effects",
        "queue_entries",
        "queue_attempts",
        "limits",
        "thread_ttls",
    ]
    return {
        t: [
            str(r[0])
            for r in conn.execute(
                sql.SQL("SELECT x::text FROM {} x ORDER BY 1").format(sql.Identifier(t))
            )
        ]
        for t in tables
    }


def _refused(conn: psycopg.Connection[Any], query: str, params: tuple[Any, ...], name: str) -> str:
    """Run ``query`` expecting DG000 whose message names ``name``, with nothing written."""
    before = _dump(conn)
    with pytest.raises(psycopg.Error) as info:
        conn.execute(query, params)
    assert info.value.sqlstate == "DG000", (info.value.sqlstate, str(info.value))
    message = info.value.diag.message_primary or ""
    assert name in message, message
    assert _dump(conn) == before
    return message


def _claimed(conn: psycopg.Connection[Any], thread: str = "t") -> int:
    """A thread with one checkpoint c1; the token of its claim."""
    token = conn.execute("SELECT token FROM dg_claim_v1(%s, 'h', interval '1 hour')", (thread,))
    value = int(token.fetchone()[0])  # type: ignore[index]
    _commit(conn, value, "c1", None, "{}", thread=thread)
    return value


def _commit(
    conn: psycopg.Connection[Any],
    token: int,
    checkpoint: str,
    parent: str | None,
    state: str,
    *,
    thread: str = "t",
    payloads: list[str] | None = None,
) -> None:
    payloads = payloads or []
    conn.execute(
        "SELECT * FROM dg_commit_v1(%s, %s, %s, %s, 'run-1', %s, NULL, '{}', %s, %s, %s,"
        " NULL, NULL, NULL, NULL)",
        (
            thread,
            token,
            checkpoint,
            parent,
            state,
            ["e"] * len(payloads),
            payloads,
            [None] * len(payloads),
        ),
    )


COMMIT = (
    "SELECT * FROM dg_commit_v1(%s, %s, 'c2', 'c1', 'run-2', %s, NULL, '{}', '{}', '{}', '{}',"
    " NULL, NULL, NULL, NULL)"
)


# --- JSON text --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "state",
    [
        '{"a":',
        "nope",
        "NaN",
        "[1, Infinity]",
        '"\\ud800"',
        '{"a": "\\udc00x"}',
        "[1e400]",
        "-1e309",
        DEEP_513,
        DEEP_100K,
        "",
        "1 2",
        "{'a': 1}",
    ],
    ids=[
        "truncated",
        "word",
        "nan",
        "infinity",
        "lone-high-surrogate",
        "lone-low-surrogate",
        "beyond-double",
        "beyond-double-negative",
        "depth-513",
        "depth-100000",
        "empty",
        "two-values",
        "single-quotes",
    ],
)
def test_commit_refuses_state_that_is_not_readable_json(
    conn: psycopg.Connection[Any], state: str
) -> None:
    token = _claimed(conn)
    _refused(conn, COMMIT, ("t", token, state), "state")


@pytest.mark.parametrize(
    "state",
    [DEEP_512, '"\\u0000"', '{"\\u0000": "a\\u0000b"}', '{"a":1,"a":2}', "1.7976931348623157e308"],
    ids=["depth-512", "nul-escape", "nul-in-key", "duplicate-key", "largest-double"],
)
def test_commit_accepts_json_python_reads_back(conn: psycopg.Connection[Any], state: str) -> None:
    token = _claimed(conn)
    conn.execute(COMMIT, ("t", token, state))
    stored = conn.execute("SELECT state FROM checkpoints WHERE checkpoint_id = 'c2'").fetchone()
    assert stored is not None and stored[0] == state
    json.loads(stored[0])  # Python decodes it


def test_commit_names_the_bad_event_payload(conn: psycopg.Connection[Any]) -> None:
    token = _claimed(conn)
    query = (
        "SELECT * FROM dg_commit_v1('t', %s, 'c2', 'c1', 'run-2', '{}', NULL, '{}',"
        " ARRAY['a', 'b'], ARRAY['1', '{x'], ARRAY[NULL, NULL]::timestamptz[],"
        " NULL, NULL, NULL, NULL)"
    )
    assert "event_payloads[2]" in _refused(conn, query, (token,), "event_payloads[2]")


@pytest.mark.parametrize(
    ("query", "params", "name"),
    [
        ("SELECT dg_put_writes_v2('t', %s, 'c1', ARRAY['task'], ARRAY['ch'], ARRAY['{'], NULL) ", (), "values[1]"),
        ("SELECT * FROM dg_append_events_v1('t', %s, ARRAY['k'], ARRAY['nope'], ARRAY[NULL]::timestamptz[], NULL)", (), "payloads[1]"),
        ("SELECT * FROM dg_record_effect_v1('t', %s, 'k', '[[', NULL)", (), "value"),
        ("SELECT * FROM dg_append_events_v1('t', %s, ARRAY['store.x'], ARRAY['1'], ARRAY[NULL]::timestamptz[], NULL)", (), "store."),
        ("SELECT * FROM dg_append_events_v1('t', %s, ARRAY['k'], ARRAY['1'], ARRAY['infinity']::timestamptz[], NULL)", (), "created_at[1]"),
    ],
    ids=["write-value", "event-payload", "effect-value", "store-kind", "infinite-timestamp"],
)  # fmt: skip
def test_claimed_writes_refuse_bad_arguments(
    conn: psycopg.Connection[Any], query: str, params: tuple[Any, ...], name: str
) -> None:
    token = _claimed(conn)
    _refused(conn, query, (token, *params), name)


# --- identifiers, counts, enums -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "params", "name"),
    [
        ("SELECT * FROM dg_claim_v1(%s, 'h', interval '1 min')", ("",), "thread_id"),
        ("SELECT * FROM dg_claim_v1(%s, 'h', interval '1 min')", ("x" * 513,), "thread_id"),
        ("SELECT * FROM dg_claim_v1(%s, 'h', interval '1 min')", ("é" * 257,), "thread_id"),
        ("SELECT * FROM dg_claim_v1('t', %s, interval '1 min')", ("h" * 514,), "holder"),
        ("SELECT * FROM dg_claim_v1('t', 'h', %s)", (timedelta(days=36501),), "ttl"),
        ("SELECT * FROM dg_lease_v1(%s, interval '1 min', true, NULL, NULL)", ("h" * 514,), "holder"),
        ("SELECT * FROM dg_lease_v1('h', interval '1000000 years', true, NULL, NULL)", (), "ttl"),
        ("SELECT * FROM dg_submit_v1('t', '1', NULL, NULL, %s, 3)", ("later",), "mode"),
        ("SELECT * FROM dg_submit_v1('t', '1', NULL, NULL, 'enqueue', %s)", (0,), "max_attempts"),
        ("SELECT * FROM dg_submit_v1('t', %s, NULL, NULL, 'enqueue', 3)", ("{x}",), "input"),
        ("SELECT * FROM dg_submit_v1('t', '1', %s, NULL, 'enqueue', 3)", ("",), "tenant"),
        ("SELECT * FROM dg_submit_v1('t', '1', NULL, %s, 'enqueue', 3)", ("k" * 513,), "key"),
        ("SELECT * FROM dg_history_v1('t', NULL, %s)", (-1,), "limit"),
        ("SELECT * FROM dg_history_v1('t', NULL, %s)", (100_001,), "limit"),
        ("SELECT * FROM dg_events_after_v1('t', %s, 10)", (-1,), "after_seq"),
        ("SELECT * FROM dg_threads_v1(NULL, %s)", (0,), "limit"),
        ("SELECT * FROM dg_children_v1('t', NULL, %s)", (0,), "limit"),
        ("SELECT * FROM dg_open_entries_v1(true, NULL, NULL, NULL, %s)", (-5,), "limit"),
        ("SELECT * FROM dg_reclaim_v1(interval '1 min', %s)", (0,), "batch"),
        ("SELECT * FROM dg_prune_batch_v1(NULL, %s, 1, NULL)", (0,), "batch"),
        ("SELECT * FROM dg_latest_of_runs_v1('t', %s)", (["r", ""],), "run_ids[2]"),
        ("SELECT * FROM dg_get_v1('t', %s)", ("",), "checkpoint_id"),
        ("SELECT * FROM dg_entry_v1(%s, NULL)", (None,), "entry_id"),
        ("SELECT * FROM dg_admin_set_limit_v1(%s, 10)", ("max_rows",), "name"),
        ("SELECT * FROM dg_admin_set_limit_v1('max_value_bytes', %s)", (0,), "value"),
        # SPEC §23.5's calls: the SQL API checks its own arguments for every language.
        ("SELECT * FROM dg_begin_attempt_v2(%s, interval '1 min', interval '1 min', true, NULL, 'r')", ("",), "holder"),
        ("SELECT * FROM dg_begin_attempt_v2('w', interval '1 min', interval '1 min', true, NULL, %s)", ("",), "run_id"),
        ("SELECT * FROM dg_begin_attempt_v2('w', interval '1 min', %s, true, NULL, 'r')", (None,), "claim_ttl"),
        ("SELECT * FROM dg_begin_attempt_v2('w', %s, interval '1 min', true, NULL, 'r')", ("-1 min",), "ttl"),
        ("SELECT * FROM dg_claim_attempt_v1(%s, 1, 'h', interval '1 min', NULL)", (None,), "entry_id"),
        ("SELECT * FROM dg_claim_attempt_v1(1, %s, 'h', interval '1 min', NULL)", (None,), "token"),
        ("SELECT * FROM dg_claim_attempt_v1(1, 1, %s, interval '1 min', NULL)", ("",), "holder"),
        ("SELECT * FROM dg_claim_attempt_v1(1, 1, 'h', %s, NULL)", (None,), "claim_ttl"),
        ("SELECT * FROM dg_claim_attempt_v1(1, 1, 'h', %s, NULL)", ("-1 min",), "claim_ttl"),
        ("SELECT * FROM dg_claim_attempt_v1(1, 1, 'h', interval '1 min', %s)", ("",), "tenant"),
    ],
)  # fmt: skip
def test_functions_refuse_bad_arguments_with_dg000_naming_them(
    conn: psycopg.Connection[Any], query: str, params: tuple[Any, ...], name: str
) -> None:
    _refused(conn, query, params, name)


@pytest.mark.parametrize(
    ("kind", "detail"),
    [
        ("done", '"x"'),
        ("failed", "1"),
        ("failed", "{"),
        ("cancelled", '"bored"'),
        ("interrupted", "1.5"),
        ("interrupted", "0"),
        ("interrupted", '"7"'),
    ],
)
def test_close_refuses_outcomes_no_reader_could_decode(
    conn: psycopg.Connection[Any], kind: str, detail: str
) -> None:
    conn.execute("SELECT * FROM dg_submit_v1('t', '1', NULL, NULL, 'enqueue', 3)")
    row = conn.execute("SELECT entry_id, token FROM dg_lease_v1('h', '1 min', true, NULL, NULL)")
    entry_id, token = row.fetchone()  # type: ignore[misc]
    name = "outcome_kind" if kind == "done" else "outcome_detail"
    query = "SELECT * FROM dg_close_v1(%s, %s, %s, %s, NULL)"
    _refused(conn, query, (entry_id, token, kind, detail), name)


# --- limits in the schema ---------------------------------------------------------------------


def test_max_value_bytes_is_the_schemas_and_a_dba_can_change_it(
    conn: psycopg.Connection[Any],
) -> None:
    token = _claimed(conn)
    conn.execute("SELECT dg_admin_set_limit_v1('max_value_bytes', 10)")
    _refused(conn, COMMIT, ("t", token, '"0123456789"'), "max_value_bytes")
    conn.execute(COMMIT, ("t", token, '"01234567"'))


def test_max_call_bytes_bounds_everything_one_call_writes(conn: psycopg.Connection[Any]) -> None:
    token = _claimed(conn)
    conn.execute("SELECT dg_admin_set_limit_v1('max_call_bytes', 4000)")
    query = "SELECT * FROM dg_append_events_v1('t', %s, %s, %s, %s, NULL)"  # 1,000 small events
    params = (token, ["k"] * 1000, ["1"] * 1000, [None] * 1000)
    _refused(conn, query, params, "max_call_bytes")
    conn.execute(query, (token, ["k"] * 10, ["1"] * 10, [None] * 10))


def test_failed_outcome_obeys_max_value_bytes(pg_dsn: str, schema: str) -> None:
    config = PostgresConfig(schema=schema, max_value_bytes=1000)
    with psycopg.connect(pg_dsn, autocommit=True) as c:
        reset_store(c, schema)
    with PostgresCheckpointer.open(pg_dsn, config) as store:
        store.run_queue.submit(Submission("t", "go"))
        lease = store.run_queue.lease("h", timedelta(minutes=1))
        assert lease is not None
        with pytest.raises(ValidationError, match=r"outcome\.error"):
            store.run_queue.close(lease, Failed("x" * 1000))
        assert store.run_queue.close(lease, Failed("x" * 900)).closed


# --- byte-bounded pages -------------------------------------------------------------------------


def test_events_after_page_is_byte_bounded_and_always_progresses(
    conn: psycopg.Connection[Any],
) -> None:
    token = _claimed(conn)
    big = json.dumps("x" * 3000)
    conn.execute(
        "SELECT * FROM dg_append_events_v1('t', %s, %s, %s, %s, NULL)",
        (token, ["k"] * 5, [big] * 5, [None] * 5),
    )
    conn.execute("SELECT dg_admin_set_limit_v1('max_page_bytes', 5000)")
    seqs = []
    after = 0
    while True:
        rows = conn.execute(
            "SELECT seq, octet_length(kind || payload || coalesce(run_id, ''))"
            " FROM dg_events_after_v1('t', %s, 1000)",
            (after,),
        ).fetchall()
        page = [int(r[0]) for r in rows]
        if not page:
            break
        assert sum(r[1] for r in rows[:-1]) < 5000  # the row that reaches the bound ends it
        assert sum(r[1] for r in rows) >= 5000 or page[-1] == 6
        seqs += page
        after = page[-1]
    assert seqs == list(range(1, 7))
    # A row bigger than the whole bound still comes, alone: readers always progress.
    conn.execute("SELECT dg_admin_set_limit_v1('max_page_bytes', 1)")
    one = conn.execute("SELECT seq FROM dg_events_after_v1('t', 1, 1000)").fetchall()
    assert [r[0] for r in one] == [2]


def test_history_page_is_byte_bounded_and_always_progresses(
    conn: psycopg.Connection[Any],
) -> None:
    token = _claimed(conn)
    parent = "c1"
    for i in range(2, 6):
        _commit(conn, token, f"c{i}", parent, json.dumps("y" * 2000))
        parent = f"c{i}"
    conn.execute("SELECT dg_admin_set_limit_v1('max_page_bytes', 3000)")
    ids: list[str] = []
    before = None
    while True:
        rows = conn.execute("SELECT checkpoint_id FROM dg_history_v1('t', %s, 100)", (before,))
        page = [str(r[0]) for r in rows]
        if not page:
            break
        assert len(page) <= 2
        ids += page
        before = page[-1]
    assert ids == ["c5", "c4", "c3", "c2", "c1"]


def test_threads_page_is_byte_bounded_and_always_progresses(
    conn: psycopg.Connection[Any],
) -> None:
    names = [f"{chr(ord('a') + i)}{'x' * 400}" for i in range(5)]  # ~500 bytes a row
    for name in names:
        _claimed(conn, name)
    conn.execute("SELECT dg_admin_set_limit_v1('max_page_bytes', 1200)")
    seen: list[str] = []
    after = None
    while True:
        rows = conn.execute("SELECT thread_id FROM dg_threads_v1(%s, 100)", (after,))
        page = [str(r[0]) for r in rows]
        if not page:
            break
        assert len(page) <= 3  # two rows fill 1,200 bytes less one row's worth
        seen += page
        after = page[-1]
    assert seen == names
    # A bound smaller than one row still returns that row: readers always progress.
    conn.execute("SELECT dg_admin_set_limit_v1('max_page_bytes', 1)")
    assert len(conn.execute("SELECT thread_id FROM dg_threads_v1(NULL, 100)").fetchall()) == 1


def test_subscribe_gets_past_a_page_bigger_than_the_bound(pg_dsn: str, schema: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as c:
        reset_store(c, schema)
        c.execute(
            sql.SQL("SELECT {}.dg_admin_set_limit_v1('max_page_bytes', 2000)").format(
                sql.Identifier(schema)
            )
        )
    with PostgresCheckpointer.open(pg_dsn, PostgresConfig(schema=schema)) as store:
        claim = store.claim("t", "h")
        events = tuple(EventIn("big", "z" * 5000) for _ in range(4))
        store.commit(claim, Commit("c1", None, "run-1", {}, events=events))
        assert len(store.events_after("t", 0)) == 1  # one page: one row over the bound
        seen = []
        fast = WatchPolicy(poll_interval=timedelta(milliseconds=10))
        for event in store.subscribe("t", 0, watch=fast):
            seen.append(event.seq)
            if len(seen) == 5:
                break
        assert seen == [1, 2, 3, 4, 5]  # 4 events and store.checkpoint


def test_open_entries_and_children_pages_are_byte_bounded(conn: psycopg.Connection[Any]) -> None:
    for i in range(3):
        conn.execute(
            "SELECT * FROM dg_submit_v1(%s, %s, NULL, NULL, 'enqueue', 3)",
            (f"t{i}", json.dumps("i" * 3000)),
        )
    conn.execute("SELECT dg_admin_set_limit_v1('max_page_bytes', 100)")
    page = conn.execute("SELECT entry_id FROM dg_open_entries_v1(true, NULL, NULL)").fetchall()
    assert len(page) == 1
    rest = conn.execute(
        "SELECT entry_id FROM dg_open_entries_v1(true, NULL, NULL, %s, 1000)", (page[0][0],)
    ).fetchall()
    assert len(rest) == 1 and rest[0][0] > page[0][0]


# --- identity and decoding ------------------------------------------------------------------------


def test_keyed_submit_from_another_language_matches_pythons_by_json_value(
    pg_dsn: str, schema: str, conn: psycopg.Connection[Any]
) -> None:
    with PostgresCheckpointer.open(pg_dsn, PostgresConfig(schema=schema)) as store:
        ticket = store.run_queue.submit(Submission("t", {"n": 1, "m": [2]}, key="k"))
    # Node's JSON.stringify order and a JavaScript-style number.
    row = conn.execute(
        "SELECT entry_id, existing FROM dg_submit_v1('t', %s, NULL, 'k', 'enqueue', 3)",
        ('{ "m": [2.0], "n": 1e0 }',),
    ).fetchone()
    assert row == (ticket.entry_id, True)


def test_a_row_python_cannot_decode_is_a_processing_error(
    pg_dsn: str, schema: str, conn: psycopg.Connection[Any]
) -> None:
    conn.execute("SELECT * FROM dg_submit_v1('t', '1', NULL, NULL, 'enqueue', 3)")
    # Written behind the functions' back (as by an older version): not JSON at all.
    conn.execute("UPDATE queue_entries SET input = 'not json'")
    store = PostgresCheckpointer.open(pg_dsn, PostgresConfig(schema=schema))
    with store, pytest.raises(ProcessingError, match="could not be decoded"):
        store.run_queue.open_entries(tenant=ANY)


def test_upgrade_closes_open_entries_whose_input_no_reader_can_decode(
    pg_dsn: str, pg_schema: str
) -> None:
    # A version-1 schema (as `durable-graph sql` of that version left it) holding a poisoned
    # open entry ahead of a good one on the same thread.
    from durable_graph.postgres.migrations import migration_files

    with psycopg.connect(pg_dsn, autocommit=True) as c:
        c.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(pg_schema)))
        c.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(pg_schema)))
        c.execute(migration_files()[0].text.encode())
        c.execute("INSERT INTO schema_meta VALUES ('version', '1'), ('functions_digest', 'x')")
        c.execute(
            "INSERT INTO queue_entries (thread_id, input, mode, max_attempts, submitted_at)"
            " VALUES ('t', '{\"a\":', 'enqueue', 3, now()), ('t', '1', 'enqueue', 3, now())"
        )
        c.execute("INSERT INTO queue_threads (thread_id, head_entry_id) VALUES ('t', 1)")
    migrate(pg_dsn, pg_schema)
    with PostgresCheckpointer.open(pg_dsn, PostgresConfig(schema=pg_schema)) as store:
        queue = store.run_queue
        closed = queue.entry(1)
        assert closed is not None and closed.outcome == Failed(
            "input is not valid JSON (closed by migration 0002)"
        )
        assert closed.input == '{"a":'  # the original text, kept as a JSON string
        lease = queue.lease("w", timedelta(minutes=1), run_id="run-1")
        assert lease is not None and lease.entry.entry_id == 2 and lease.entry.input == 1


def test_keyed_submit_with_a_nul_escape_matches_its_own_text_only(
    conn: psycopg.Connection[Any],
) -> None:
    query = "SELECT entry_id, existing FROM dg_submit_v1('t', %s, NULL, 'k', 'enqueue', 3)"
    first = conn.execute(query, ('{"a":"x\\u0000"}',)).fetchone()
    assert first is not None and first[1] is False
    assert conn.execute(query, ('{"a":"x\\u0000"}',)).fetchone() == (first[0], True)
    with pytest.raises(psycopg.Error) as info:
        conn.execute(query, ('{"a":"y\\u0000"}',))
    assert info.value.sqlstate == "DG101"


def test_effects_page_is_byte_bounded_and_always_progresses(
    conn: psycopg.Connection[Any],
) -> None:
    token = _claimed(conn)
    keys = [f"k{i}" for i in range(5)]
    for key in keys:
        conn.execute(
            "SELECT * FROM dg_record_effect_v1('t', %s, %s, %s, 'r')",
            (token, key, json.dumps("v" * 1000)),
        )
    conn.execute("SELECT dg_admin_set_limit_v1('max_page_bytes', 2500)")
    seen: list[str] = []
    after = None
    while True:
        rows = conn.execute("SELECT key FROM dg_effects_v1('t', %s, 100)", (after,))
        page = [str(r[0]) for r in rows]
        if not page:
            break
        assert len(page) <= 3  # ~1,005 bytes a row: the third reaches 2,500
        seen += page
        after = page[-1]
    assert seen == keys
    # A bound smaller than one row still returns that row: readers always progress.
    conn.execute("SELECT dg_admin_set_limit_v1('max_page_bytes', 1)")
    assert len(conn.execute("SELECT key FROM dg_effects_v1('t', NULL, 100)").fetchall()) == 1


# A short scalar is checked by one regular expression (issue 25) instead of a parse: it must
# agree with the parse (and with Python's json) on both sides of its edge.
SHORT_VALID = ["null", " true ", "false", "-0", "123456789012345", '"plain"', '"ü ☃"', '""']
SHORT_INVALID = ["00", "-", "+1", "1.", '"a\tb"', '"open', "nul", "'x'", "truee"]


@pytest.mark.parametrize("state", SHORT_VALID)
def test_commit_accepts_a_short_scalar_as_the_parse_does(
    conn: psycopg.Connection[Any], state: str
) -> None:
    json.loads(state)  # valid for Python too
    token = _claimed(conn)
    conn.execute(COMMIT, ("t", token, state))


@pytest.mark.parametrize("state", SHORT_INVALID)
def test_commit_refuses_a_short_non_json_scalar_as_the_parse_does(
    conn: psycopg.Connection[Any], state: str
) -> None:
    with pytest.raises(ValueError):
        json.loads(state)
    token = _claimed(conn)
    _refused(conn, COMMIT, ("t", token, state), "state")


# --- the proxy's limited leases (partition-only, sql/93_partitions.sql) -----------------------

LEASE_LIMITED = (
    "SELECT * FROM dg_lease_limited_v1('w', interval '1 minute', true, NULL, NULL, NULL, %s)"
)
BEGIN_LIMITED = (
    "SELECT * FROM dg_begin_attempt_limited_v1('w', interval '1 minute', interval '1 minute',"
    " true, NULL, 'run-1', NULL, %s)"
)


@pytest.mark.parametrize("query", [LEASE_LIMITED, BEGIN_LIMITED], ids=["lease", "begin"])
@pytest.mark.parametrize(
    "live",
    [
        "[1]",
        '{"team": {}}',
        '{"tenant": [1]}',
        '{"tenant": {"acme": -1}}',
        '{"kind": {"gpu": 1.5}}',
        '{"kind": {"gpu": "2"}}',
    ],
)
def test_limited_leases_refuse_a_live_count_of_another_shape(
    conn: psycopg.Connection[Any], query: str, live: str
) -> None:
    conn.execute("SELECT * FROM dg_submit_v1('t', '{}', NULL, NULL, 'enqueue', 3)")
    _refused(conn, query, (live,), "p_live")


@pytest.mark.parametrize("query", [LEASE_LIMITED, BEGIN_LIMITED], ids=["lease", "begin"])
def test_limited_leases_take_the_proxys_live_counts(
    conn: psycopg.Connection[Any], query: str
) -> None:
    conn.execute("SELECT * FROM dg_submit_v1('t', '{}', NULL, NULL, 'enqueue', 3)")
    live = '{"tenant": {}, "kind": {"default": 0}}'
    assert len(conn.execute(query, (live,)).fetchall()) == 1


# --- issue 37 item 6: dg_put_schedule_v1 refuses every cron expression Python refuses -----------

_PUT_SCHEDULE = (
    "SELECT * FROM dg_put_schedule_v1('s', %s, 'UTC', 't', 'null', 'default', NULL, 0, 3, false)"
)


def _schedules(conn: psycopg.Connection[Any]) -> list[str]:
    return [str(r[0]) for r in conn.execute("SELECT x::text FROM schedules x ORDER BY 1")]


@pytest.mark.parametrize("expr", BAD_CRONS)
def test_put_schedule_refuses_what_python_refuses(conn: psycopg.Connection[Any], expr: str) -> None:
    with pytest.raises(ValidationError, match="cron"):
        check_cron("cron", expr)
    before = _schedules(conn)
    _refused(conn, _PUT_SCHEDULE, (expr,), "cron")
    assert _schedules(conn) == before == []


@pytest.mark.parametrize("expr", GOOD_CRONS)
def test_put_schedule_accepts_what_python_accepts(conn: psycopg.Connection[Any], expr: str) -> None:
    assert check_cron("cron", expr) == expr
    row = conn.execute(_PUT_SCHEDULE, (expr,)).fetchone()
    assert row is not None and row[1] == expr


# --- issue 47: the thread TTL functions check their own arguments (sql/48_thread_ttl.sql) --------


@pytest.mark.parametrize(
    ("minutes", "strategy", "name"),
    [
        (-1.0, "delete", "ttl"),
        (0.0, "delete", "ttl"),
        (5_256_001.0, "delete", "ttl"),
        (float("nan"), "delete", "ttl"),
        (float("inf"), "delete", "ttl"),
        (5.0, "purge", "strategy"),
        (5.0, None, "strategy"),
    ],
)
def test_set_thread_ttl_refuses_each_bad_argument_naming_it(
    conn: psycopg.Connection[Any], minutes: float, strategy: str | None, name: str
) -> None:
    _claimed(conn)
    conn.execute("SELECT * FROM dg_set_thread_ttl_v1('t', 5, 'delete')")
    query = "SELECT * FROM dg_set_thread_ttl_v1(%s, %s::double precision, %s)"
    _refused(conn, query, ("t", minutes, strategy), name)
    _refused(conn, query, (None, 5.0, "delete"), "thread_id")
    _refused(conn, "SELECT * FROM dg_thread_ttl_v1(%s)", (None,), "thread_id")


@pytest.mark.parametrize("limit", [0, -1, 10_001, None])
def test_sweep_threads_refuses_a_bad_limit(
    conn: psycopg.Connection[Any], limit: int | None
) -> None:
    _claimed(conn)
    conn.execute("SELECT * FROM dg_set_thread_ttl_v1('t', 0.0001, 'delete')")
    _refused(conn, "SELECT * FROM dg_sweep_threads_v1(%s::integer)", (limit,), "limit")


def test_set_thread_ttl_on_a_thread_without_a_commit_writes_nothing(
    conn: psycopg.Connection[Any],
) -> None:
    before = _dump(conn)
    assert (
        conn.execute("SELECT * FROM dg_set_thread_ttl_v1('nobody', 5, 'delete')").fetchall() == []
    )
    assert _dump(conn) == before
