"""SPEC §10.8: the SQL functions call builtins schema-qualified where an overload could shadow
them. A function planted in the store's schema (``nextval(text)``, ``cardinality(text[])``) is a
better match than ``pg_catalog``'s polymorphic or ``regclass`` one for an unqualified call, so
every call of these names in ``sql/`` is written ``pg_catalog.name(...)``. (Multi-argument
``unnest`` in FROM is special syntax that only the unqualified name gets, and is left as it is.)
"""

from __future__ import annotations

import re
from pathlib import Path

SQL_DIR = Path(__file__).parent.parent / "sql"
SHADOWABLE = [
    "nextval",
    "to_json",
    "to_jsonb",
    "json_build_object",
    "jsonb_build_object",
    "json_agg",
    "jsonb_agg",
    "array_agg",
    "unnest",
    "cardinality",
    "max",
    "min",
    "bool_or",
    "bool_and",
    "row_number",
    "count",
    "sum",
    "string_agg",
    "array_length",
    "array_position",
    "array_append",
    "array_cat",
    "array_remove",
    "jsonb_typeof",
    "jsonb_array_length",
    "json_typeof",
    "octet_length",
    "length",
    "format",
    "generate_series",
    "clock_timestamp",
    "now",
    "sha256",
    "encode",
    "convert_to",
    "substr",
    "lower",
    "upper",
    "replace",
    "make_interval",
    "date_part",
    "abs",
    "floor",
    "ceil",
    "round",
]
CALL = re.compile(r"(?<![\w.\"])(" + "|".join(SHADOWABLE) + r")\s*\(", re.I)


def _multi_arg(text: str, start: int) -> bool:
    depth = 0
    for ch in text[start:]:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return False
        elif ch == "," and depth == 1:
            return True
    return True


def _unqualified(line: str) -> list[str]:
    code = line.partition("--")[0]
    found = []
    for i, part in enumerate(code.split("'")):
        if i % 2:  # inside a string literal
            continue
        for m in CALL.finditer(part):
            if m.group(1).lower() == "unnest" and _multi_arg(part, m.end() - 1):
                continue
            found.append(m.group(1))
    return found


def test_every_shadowable_builtin_is_called_schema_qualified() -> None:
    offenders = [
        f"{path.name}:{n}: {name}"
        for path in sorted(SQL_DIR.glob("[0-9][0-9]_*.sql"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for name in _unqualified(line)
    ]
    assert offenders == []
