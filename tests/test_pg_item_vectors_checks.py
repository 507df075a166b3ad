"""The item vectors' SQL functions (``sql/76_item_vectors.sql``) refuse every hostile argument
themselves, called over psycopg as another language calls them, with no Python check in front:
DG000 naming the parameter, nothing written (SPEC §10.1). Each hostile vector is one the store's
Python checks (`durable_graph.core.items.check_vectors`) refuse too; and the cosine the SQL
computes is the one the embedded stores compute."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from durable_graph.core import items
from durable_graph.core.errors import ValidationError
from durable_graph.postgres.migrations import migrate
from durable_graph.testkit.postgres.schema import reset_store

PUT = (
    "SELECT * FROM dg_put_indexed_item_v1(%s::text[], %s, %s, %s::text[],"
    " %s::double precision[], NULL, NULL)"
)
SEARCH = (
    "SELECT key, score FROM dg_search_items_by_vector_v1(%s::text[], %s::double precision[],"
    " NULL, 10, 0, false, NULL)"
)


@pytest.fixture(scope="module")
def schema(pg_dsn: str) -> Iterator[str]:
    name = "item_vectors_checks_h48"
    migrate(pg_dsn, name)
    yield name
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture
def conn(pg_dsn: str, schema: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg_dsn, autocommit=True) as c:
        reset_store(c, schema)
        c.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        yield c


def _rows(conn: psycopg.Connection[Any]) -> list[str]:
    return [
        str(r[0])
        for r in conn.execute(
            "SELECT x::text FROM items x UNION ALL SELECT v::text FROM item_vectors v ORDER BY 1"
        )
    ]


@pytest.mark.parametrize(
    ("fields", "vectors", "named"),
    [
        (None, [[1.0]], "fields"),
        (["$"], None, "vectors"),
        (["$"], [], "one row per field"),
        (["a", "b"], [[1.0]], "one row per field"),
        ([], [[1.0]], "one row per field"),
        ([""], [[1.0]], "vectors field"),
        ([None], [[1.0]], "vectors field"),
        (["a", "a"], [[1.0], [2.0]], "distinct"),
        (["$"], [[float("nan")]], "magnitude"),
        (["$"], [[float("inf")]], "magnitude"),
        (["$"], [[1e200]], "magnitude"),
        (["$"], [[1e-200]], "magnitude"),
        (["$"], [[None]], "magnitude"),
        (["$"], [[0.0] * 16001], "16000"),
    ],
)
def test_bad_vectors_are_refused_and_nothing_is_written(
    conn: psycopg.Connection[Any], fields: Any, vectors: Any, named: str
) -> None:
    before = _rows(conn)
    with pytest.raises(psycopg.Error) as info:
        conn.execute(PUT, ("{ns}", "k", '{"a":1}', fields, vectors))
    assert info.value.sqlstate == "DG000", (info.value.sqlstate, str(info.value))
    assert named in (info.value.diag.message_primary or "")
    assert _rows(conn) == before
    if fields is not None and vectors is not None and None not in fields:
        given = dict(zip(fields, vectors, strict=False)) if len(fields) == len(vectors) else None
        if given is not None and len(given) == len(fields):
            with pytest.raises(ValidationError):
                items.check_vectors(given)


@pytest.mark.parametrize("vector", [None, [], [float("nan")], [1e151], [[1.0], [2.0]]])
def test_a_bad_query_vector_is_refused(conn: psycopg.Connection[Any], vector: Any) -> None:
    with pytest.raises(psycopg.Error) as info:
        conn.execute(SEARCH, ("{}", vector))
    assert info.value.sqlstate == "DG000", (info.value.sqlstate, str(info.value))
    assert "vector" in (info.value.diag.message_primary or "")


def test_the_sql_cosine_is_the_embedded_stores(conn: psycopg.Connection[Any]) -> None:
    stored = [0.12, -0.5, 3.25, 1e-3, 0.0]
    query = [1.5, 0.25, -0.75, 2.0, 1e-150]
    conn.execute(PUT, ("{ns}", "k", "{}", ["$"], [stored]))
    ((key, score),) = conn.execute(SEARCH, ("{}", query)).fetchall()
    assert key == "k"
    assert math.isclose(score, items.cosine(query, stored), rel_tol=1e-12)
