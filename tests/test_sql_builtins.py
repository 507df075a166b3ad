"""SPEC §10.8: the SQL functions call every builtin schema-qualified (``pg_catalog.name(...)``).

A function planted in the store's schema (``pg_column_size(text)``, ``nextval(text)``,
``cardinality(text[])``) is a better match than ``pg_catalog``'s polymorphic or ``regclass`` one
for an unqualified call, so an unqualified call of a builtin runs whatever another role put there.

Found by parsing, not by a list of names: every file of ``sql/`` goes through PostgreSQL's own
parser (libpg_query, through ``pglast``), every PL/pgSQL body (functions and ``DO`` blocks)
through PL/pgSQL's, and every expression they hold through the SQL parser again. A function call
of the parse tree (``FuncCall``) whose name has no schema must name one of the store's own
functions (defined in ``sql/``, resolved through the pinned ``search_path`` to the store's schema);
anything else is reported. That includes multi-argument ``unnest(a, b)`` in FROM: the parser keeps
it as one unqualified ``unnest`` call, which the analyser expands into one-argument ``unnest``
calls resolved through ``search_path`` — it is written ``ROWS FROM (pg_catalog.unnest(a), ...)``.
SQL-standard syntax the grammar turns into calls (``EXTRACT``, ``SUBSTRING ... FROM``,
``CURRENT_TIMESTAMP``, ...) comes out of the parser already ``pg_catalog``-qualified, and
``COALESCE``/``GREATEST``/``NULLIF`` are not function calls: none is shadowable, none reported.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pglast.parser import parse_plpgsql_json, parse_sql_json

SQL_DIR = Path(__file__).parent.parent / "sql"
_ASSIGN = re.compile(r":=")
_LEAD = re.compile(r"(?:\s|--[^\n]*\n)*")  # what precedes a statement's first word


def _nodes(tree: Any, kind: str) -> Iterator[Any]:
    """Every node named ``kind`` in a JSON parse tree."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            if key == kind:
                yield value
            yield from _nodes(value, kind)
    elif isinstance(tree, list):
        for value in tree:
            yield from _nodes(value, kind)


def _sval(node: Any) -> str:
    return str(node["String"]["sval"])


def _def_elem(options: list[Any], name: str) -> Any:
    for option in options:
        elem = option.get("DefElem", {})
        if elem.get("defname") == name:
            return elem.get("arg")
    return None


def _plpgsql_queries(function_sql: str) -> Iterator[str]:
    """The SQL of every expression and statement of a PL/pgSQL function, as parsable SQL."""
    for expr in _nodes(json.loads(parse_plpgsql_json(function_sql)), "PLpgSQL_expr"):
        query, mode = str(expr["query"]), int(expr.get("parseMode", 0))
        if mode == 0:  # a whole statement (PERFORM comes as SELECT)
            yield query
        elif mode == 2:  # an expression
            yield "SELECT " + query
        else:  # an assignment, target := value: the target as a column, compared
            yield "SELECT " + _ASSIGN.sub("=", query, count=1)


def _calls(sql_text: str, where: str) -> Iterator[tuple[str, str]]:
    """(where, name) of every unqualified function call of ``sql_text``, bodies included."""
    tree = json.loads(parse_sql_json(sql_text))
    raw = sql_text.encode("utf-8")  # the parser's locations count bytes
    for stmt in tree.get("stmts", []):
        node = stmt["stmt"]
        start = int(stmt.get("stmt_location", 0))
        length = stmt.get("stmt_len")
        chunk = raw[start : start + int(length)] if length else raw[start:]
        text = chunk.decode("utf-8")
        lead = _LEAD.match(text)
        line = raw.count(b"\n", 0, start) + 1 + (lead.group(0).count("\n") if lead else 0)
        here = f"{where}:{line}"
        bodies: list[str] = []
        if "CreateFunctionStmt" in node:
            fn = node["CreateFunctionStmt"]
            options = fn.get("options", [])
            language = _sval(_def_elem(options, "language")).lower()
            body = _def_elem(options, "as")
            name = _sval(fn["funcname"][-1])
            here = f"{where}:{line} {name}"
            if language == "plpgsql":
                bodies.extend(_plpgsql_queries(text))
            elif language == "sql" and body is not None:
                bodies.extend(_sval(item) for item in body["List"]["items"])
            # The rest of the statement (argument defaults) is searched below.
            fn = {k: v for k, v in fn.items() if k != "options"}
            node = {"CreateFunctionStmt": fn}
        elif "DoStmt" in node:
            code = _sval(_def_elem(node["DoStmt"]["args"], "as"))
            wrapped = (
                f"CREATE FUNCTION dg_do() RETURNS void LANGUAGE plpgsql AS $dg_do${code}$dg_do$"
            )
            bodies.extend(_plpgsql_queries(wrapped))
            node = {}
        for call in _nodes(node, "FuncCall"):
            if len(call["funcname"]) == 1:
                yield here, _sval(call["funcname"][0])
        for body in bodies:
            for _, name in _calls(body, here):
                yield here, name


def _own_functions(files: list[Path]) -> set[str]:
    names: set[str] = set()
    for path in files:
        for stmt in json.loads(parse_sql_json(path.read_text(encoding="utf-8")))["stmts"]:
            if "CreateFunctionStmt" in stmt["stmt"]:
                names.add(_sval(stmt["stmt"]["CreateFunctionStmt"]["funcname"][-1]))
    return names


def _offenders(files: list[Path]) -> list[str]:
    own = _own_functions(files)
    return [
        f"{where}: {name}"
        for path in files
        for where, name in _calls(path.read_text(encoding="utf-8"), path.name)
        if name not in own
    ]


def test_every_builtin_is_called_schema_qualified() -> None:
    files = sorted(SQL_DIR.glob("[0-9][0-9]_*.sql"))
    assert len(files) > 10
    assert _offenders(files) == []


def test_the_parser_finds_what_a_list_and_a_comma_counter_missed(tmp_path: Path) -> None:
    """The two misses of the earlier regular-expression test (issue #24): ``pg_column_size``,
    not in its list, and one-argument ``unnest(ARRAY[a, b])``, whose commas inside ``ARRAY[...]``
    it took for a multi-argument call; and multi-argument ``unnest`` in FROM, expanded through
    ``search_path``. Qualified calls, our own functions, comments and strings are not reported."""
    source = tmp_path / "50_planted.sql"
    source.write_text(
        """
CREATE OR REPLACE FUNCTION _dg_own(p_value jsonb) RETURNS integer
LANGUAGE sql AS $$ SELECT pg_catalog.pg_column_size(p_value) $$;

CREATE OR REPLACE FUNCTION dg_probe_v1(p_a text, p_b text, p_value jsonb) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_n bigint;  -- count(*) in a comment is nothing
BEGIN
    v_n := coalesce(pg_column_size(p_value), 0) + _dg_own(p_value);
    PERFORM 1 FROM unnest(ARRAY[p_a, p_b]) AS u(id);
    SELECT pg_catalog.count(*) INTO v_n FROM unnest(ARRAY[p_a], ARRAY[p_b]) AS u(a, b);
    SELECT pg_catalog.count(*) INTO v_n
      FROM ROWS FROM (pg_catalog.unnest(ARRAY[p_a]), pg_catalog.unnest(ARRAY[p_b])) AS u(a, b);
    RAISE NOTICE 'length(%)', p_a;
    RETURN v_n;
END;
$$;

DO $$ BEGIN PERFORM length('x'); END $$;
""",
        encoding="utf-8",
    )
    found = [o.split(": ", 1)[1] for o in _offenders([source])]
    assert found == ["pg_column_size", "unnest", "unnest", "length"]
