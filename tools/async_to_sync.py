"""The sync twin of an async module, as plain source (psycopg 3's ``tools/async_to_sync.py``).

`sync_twin` rewrites the code of an async module token by token, leaving its comments, strings
and layout alone: ``async def`` / ``async with`` / ``async for`` → ``def`` / ``with`` / ``for``,
``await x`` → ``x``, ``Awaitable[T]`` → ``T`` (``T | Awaitable[T]`` → ``T``), and each name of
``names`` renamed (``AsyncCheckpointer`` → ``Checkpointer``, a module ``asyncio`` → ``time`` for
``asyncio.sleep``, ...). What only one spelling has is written in the source as ``if ASYNC:``
(its ``else:``, if any, is the sync code) or ``if not ASYNC:`` (sync only): the sync twin keeps
the sync branch, dedented in place of the ``if``. The module's docstring is replaced by ``doc``.
The caller formats the result (``tools/generate_stores.py`` runs ruff, which also drops the
imports the sync code no longer uses).

A construct with no sync spelling (an ``asyncio`` call other than ``sleep`` outside an ``if
ASYNC:`` block) is refused: the async source keeps to what this transform knows.
"""

from __future__ import annotations

import ast
import io
import itertools
import tokenize
from collections.abc import Mapping

Edit = tuple[tuple[int, int], tuple[int, int], str]
"""(start, end, replacement): (row, column) positions as `tokenize` gives them."""


def sync_twin(source: str, names: Mapping[str, str], doc: str) -> str:
    """``source`` (an async module) as its sync twin, headed by the docstring ``doc``."""
    source = _sync_branches(source)
    tokens = [
        t
        for t in tokenize.generate_tokens(io.StringIO(source).readline)
        if t.type not in (tokenize.NL, tokenize.COMMENT)
    ]
    edits: list[Edit] = []
    for i, token in enumerate(tokens):
        after = tokens[i + 1] if i + 1 < len(tokens) else token
        if token.type == tokenize.STRING and token.string[1:-1] in names:  # in __all__
            edits.append((token.start, token.end, repr(names[token.string[1:-1]])))
            continue
        if token.type != tokenize.NAME:
            continue
        if token.string == "async":
            if after.string not in ("def", "with", "for"):
                raise SystemExit(
                    f"line {token.start[0]}: no sync spelling for async {after.string}"
                )
            edits.append((token.start, after.start, ""))
        elif token.string == "Awaitable" and tokens[i - 1].string == "|":
            closing = _closing_bracket(tokens, i + 1)
            edits.append((tokens[i - 2].end, closing[1], ""))  # T | Awaitable[T] -> T
        elif token.string == "await":
            edits.append((token.start, after.start, ""))
        elif token.string == "Awaitable" and after.string == "[":
            edits.append((token.start, after.end, ""))
            edits.append(_closing_bracket(tokens, i + 1))
        elif token.string == "asyncio":  # its import, or asyncio.sleep
            called = tokens[i + 2].string if after.string == "." else "sleep"
            if called != "sleep":
                raise SystemExit(f"line {token.start[0]}: no sync spelling for asyncio.{called}")
            edits.append((token.start, token.end, "time"))
        elif token.string in names:
            edits.append((token.start, token.end, names[token.string]))
    return _with_doc(_applied(source, edits), doc)


def _sync_branches(source: str) -> str:
    """``source`` with each ``if ASYNC:`` / ``if not ASYNC:`` statement replaced by its sync
    branch (dedented to the ``if``), or dropped when it has none."""
    lines = source.splitlines(keepends=True)
    blocks = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.If):
            continue
        test = node.test
        negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        name = test.operand if isinstance(test, ast.UnaryOp) and negated else test
        if not (isinstance(name, ast.Name) and name.id == "ASYNC"):
            continue
        branch = node.body if negated else node.orelse
        if negated and node.orelse:
            raise SystemExit(f"line {node.lineno}: no else after if not ASYNC")
        assert node.end_lineno is not None
        kept: list[str] = []
        if branch:
            first = min([branch[0].lineno, *(d.lineno for d in _decorators(branch[0]))])
            last = branch[-1].end_lineno
            assert last is not None
            indent = branch[0].col_offset - node.col_offset
            kept = [line[indent:] if line.strip() else line for line in lines[first - 1 : last]]
        blocks.append((node.lineno, node.end_lineno, kept))
    blocks.sort()
    for (_, end, _), (start, _, _) in itertools.pairwise(blocks):
        if start <= end:
            raise SystemExit(f"line {start}: an if ASYNC: block inside another")
    for start, end, kept in reversed(blocks):
        lines[start - 1 : end] = kept
    return "".join(lines)


def _decorators(node: ast.stmt) -> list[ast.expr]:
    decorated = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return node.decorator_list if isinstance(node, decorated) else []


def _closing_bracket(tokens: list[tokenize.TokenInfo], opening: int) -> Edit:
    """The edit removing the ``]`` that closes the ``[`` at ``tokens[opening]``."""
    depth = 0
    for token in tokens[opening:]:
        if token.string == "[":
            depth += 1
        elif token.string == "]":
            depth -= 1
            if depth == 0:
                return (token.start, token.end, "")
    raise SystemExit(f"line {tokens[opening].start[0]}: unclosed [")


def _applied(source: str, edits: list[Edit]) -> str:
    lines = source.splitlines(keepends=True)
    for (row, col), (end_row, end_col), text in sorted(edits, reverse=True):
        if row != end_row:
            raise SystemExit(f"line {row}: an edit across lines")
        line = lines[row - 1]
        lines[row - 1] = line[:col] + text + line[end_col:]
    return "".join(lines)


def _with_doc(source: str, doc: str) -> str:
    """``source`` with its module docstring replaced by ``doc``."""
    first = ast.parse(source).body[0]
    assert isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
    lines = source.splitlines(keepends=True)
    assert first.end_lineno is not None
    return f'"""{doc}"""\n' + "".join(lines[first.end_lineno :])
