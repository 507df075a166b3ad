"""The item store's SQL functions (``sql/74_items.sql``) refuse every hostile argument themselves
(issue 46 item 7), called over psycopg as another language calls them, with no Python check in
front: DG000 naming the parameter, nothing written. And each hostile value is refused by the SQL
exactly when the store's Python checks (`durable_graph.core.items`) refuse it, so the embedded
stores, ``serve`` and a direct SQL caller draw the same line."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from durable_graph.core import items
from durable_graph.core.errors import ValidationError
from durable_graph.postgres.migrations import migrate
from durable_graph.testkit.postgres.schema import reset_store

MAX_BYTES = 1 << 20

# (text[] literal as PostgreSQL reads it, the labels Python would be given or None when Python
# cannot be given it: an array of another shape).
NAMESPACES: list[tuple[str | None, Any]] = [
    ("{a,NULL}", ["a", None]),
    ("{NULL}", [None]),
    ('{""}', [""]),
    ('{"a.b"}', ["a.b"]),
    ('{"."}', ["."]),
    ("{" + "x" * 513 + "}", ["x" * 513]),
    ("{" + "é" * 257 + "}", ["é" * 257]),
    ("{" + ",".join(["x"] * 21) + "}", ["x"] * 21),
    ("{{a},{b}}", None),
    ("[0:1]={a,b}", None),
    ("[2:3]={a,b}", None),
    ("[0:0]={a}", None),
    (None, None),
]
GOOD_LABELS = ["\x01\x1f\x7f", "tab\there", "*", "$eq", "🙂", "x" * 512, "é" * 256]
FILTERS: list[str] = [
    '{"":1}',
    '{"' + "x" * 513 + '":1}',
    '{"a":{"$foo":1}}',
    '{"a":{"$eq":1,"$ne":2}}',
    '{"a":{"$eq":1,"b":2}}',
    "{" + ",".join(f'"k{i}":1' for i in range(101)) + "}",
    '{"a":' + "[" * 513 + "]" * 513 + "}",
    '{"a":{"$gt":1e999}}',
    '{"a":"\\ud800"}',
    '{"a":1} x',
    "[1]",
    '"a"',
    "7",
    "null",
    "",
    "{",
]
GOOD_FILTERS = [
    "{}",
    '{"a":null}',
    '{"a":{"$gt":"a\\u0000"}}',
    '{"a":{"nested":{"$eq":1}}}',
    '{"$or":[1]}',
    "{" + ",".join(f'"k{i}":1' for i in range(100)) + "}",
]
PAGES = [(0, 0), (-1, 0), (1001, 0), (10, -1), (10, 1_000_001), (None, 0), (10, None)]

PUT = "SELECT * FROM dg_put_item_v1(%s::text[], %s, %s, %s, %s)"
GET = "SELECT * FROM dg_get_item_v1(%s::text[], %s, false, NULL)"
DELETE = "SELECT * FROM dg_delete_item_v1(%s::text[], %s, NULL)"
SEARCH = "SELECT * FROM dg_search_items_v1(%s::text[], %s, %s, %s, false, NULL)"
LIST = "SELECT * FROM dg_item_namespaces_v1(%s::text[], %s::text[], %s, %s, %s, NULL)"


@pytest.fixture(scope="module")
def schema(pg_dsn: str) -> Iterator[str]:
    name = "items_checks_h46"
    migrate(pg_dsn, name)
    yield name
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture
def conn(pg_dsn: str, schema: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg_dsn, autocommit=True) as c:
        reset_store(c, schema)
        c.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        c.execute(PUT, ("{seed}", "k", '{"a": 1}', None, None))
        yield c


def _items(conn: psycopg.Connection[Any]) -> list[str]:
    return [str(r[0]) for r in conn.execute("SELECT x::text FROM items x ORDER BY 1")]


def _refused(conn: psycopg.Connection[Any], query: str, params: tuple[Any, ...], name: str) -> None:
    before = _items(conn)
    with pytest.raises(psycopg.Error) as info:
        conn.execute(query, params)
    assert info.value.sqlstate == "DG000", (info.value.sqlstate, str(info.value), params)
    assert name in (info.value.diag.message_primary or ""), (str(info.value), params)
    assert _items(conn) == before


def _python_refuses(check: Callable[[], object]) -> bool:
    try:
        check()
    except ValidationError:
        return True
    return False


@pytest.mark.parametrize("literal,labels", NAMESPACES)
def test_every_bad_namespace_is_refused_by_each_function(
    conn: psycopg.Connection[Any], literal: str | None, labels: Any
) -> None:
    if labels is not None:
        assert _python_refuses(lambda: items.check_namespace("namespace", labels))
    _refused(conn, PUT, (literal, "k", "{}", None, None), "namespace")
    _refused(conn, GET, (literal, "k"), "namespace")
    _refused(conn, DELETE, (literal, "k"), "namespace")
    if literal is not None:  # NULL is "no prefix" for a listing
        _refused(conn, SEARCH, (literal, None, 10, 0), "prefix")
        _refused(conn, LIST, (literal, None, None, 10, 0), "prefix")
        _refused(conn, LIST, (None, literal, None, 10, 0), "suffix")


@pytest.mark.parametrize("label", GOOD_LABELS)
def test_labels_python_takes_the_sql_takes(conn: psycopg.Connection[Any], label: str) -> None:
    assert items.check_namespace("namespace", ["ok", label]) == ("ok", label)
    row = conn.execute(PUT, (["ok", label], label, "{}", None, None)).fetchone()
    assert row is not None and row[0] == ["ok", label] and row[1] == label
    assert conn.execute(LIST, (["ok", label], None, None, 10, 0)).fetchall() == [(["ok", label],)]


@pytest.mark.parametrize("key", [None, "", "x" * 513])
def test_a_bad_key_is_refused(conn: psycopg.Connection[Any], key: str | None) -> None:
    assert _python_refuses(lambda: items.check_key(key))
    _refused(conn, PUT, ("{a}", key, "{}", None, None), "key")
    _refused(conn, GET, ("{a}", key), "key")
    _refused(conn, DELETE, ("{a}", key), "key")


@pytest.mark.parametrize("text", FILTERS)
def test_a_bad_filter_is_refused(conn: psycopg.Connection[Any], text: str) -> None:
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None  # Python is never given it: the SQL alone must refuse it
    if parsed is not None:  # Python's None is SQL's NULL (no filter), never the text 'null'
        assert _python_refuses(lambda: items.check_filter(parsed, MAX_BYTES)), text
    _refused(conn, SEARCH, ("{}", text, 10, 0), "filter")


@pytest.mark.parametrize("text", GOOD_FILTERS)
def test_filters_python_takes_the_sql_takes(conn: psycopg.Connection[Any], text: str) -> None:
    items.check_filter(json.loads(text), MAX_BYTES)
    conn.execute(SEARCH, ("{}", text, 10, 0)).fetchall()


@pytest.mark.parametrize("limit,offset", PAGES)
def test_a_bad_page_is_refused(
    conn: psycopg.Connection[Any], limit: int | None, offset: int | None
) -> None:
    assert _python_refuses(lambda: items.check_page(limit, offset))
    name = "limit" if limit is None or not 1 <= limit <= 1000 else "offset"
    _refused(conn, SEARCH, ("{}", None, limit, offset), name)
    _refused(conn, LIST, (None, None, None, limit, offset), name)


@pytest.mark.parametrize("depth", [0, -1, 21])
def test_a_bad_max_depth_is_refused(conn: psycopg.Connection[Any], depth: int) -> None:
    assert _python_refuses(lambda: items.check_max_depth(depth))
    _refused(conn, LIST, (None, None, depth, 10, 0), "max_depth")


@pytest.mark.parametrize(
    "value,ttl,name",
    [
        ("[1]", None, "value"),
        ('{"a":"\\ud800"}', None, "value"),
        ('{"a":' + "[" * 513 + "]" * 513 + "}", None, "value"),
        ("{}", 0.0, "ttl"),
        ("{}", -1.0, "ttl"),
        ("{}", float("nan"), "ttl"),
        ("{}", float("inf"), "ttl"),
        ("{}", 1e30, "ttl"),
    ],
)
def test_a_bad_value_or_ttl_is_refused(
    conn: psycopg.Connection[Any], value: str, ttl: float | None, name: str
) -> None:
    _refused(conn, PUT, ("{a}", "k", value, ttl, None), name)
