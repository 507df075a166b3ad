"""Every example in README.md and docs/*.md runs as written.

Each ```python, ```sh and ```console block of a file runs in order, in one fresh directory per
file (so a ``# myapp.py`` block is the module a later console block's worker imports), with
``.venv`` there linking to this virtualenv and its ``bin`` first on ``PATH`` (as after
``source .venv/bin/activate``). A block that uses PostgreSQL (it names ``DURABLE_GRAPH_DSN``,
``postgres`` or ``--schema``) gets ``DURABLE_GRAPH_DSN`` pointing at the test server; the others
see no DSN, so the CLI uses its SQLite default. A block preceded by
``<!-- docs-test: skip (why) -->`` is not run: the set-up commands that install or run the
whole suite.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN = ("python", "sh", "console")
SKIP = re.compile(r"<!--\s*docs-test:\s*skip\s*\((?P<why>[^)]+)\)\s*-->")
FENCE = re.compile(r"^```(?P<lang>\w*)\s*$")
MODULE = re.compile(r"^#\s*(?P<name>[A-Za-z_]\w*\.py)\b")
POSTGRES = re.compile(r"DURABLE_GRAPH_DSN|postgres|--schema", re.IGNORECASE)
BLOCK_TIMEOUT = 90
MAX_SKIPPED = 6  # few: set-up commands only


@dataclass
class Block:
    path: Path
    line: int
    lang: str
    code: str
    skip: str | None

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line} ({self.lang})"


def blocks(path: Path) -> list[Block]:
    found: list[Block] = []
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        start = i
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            i += 1
        lang = fence["lang"]
        if lang in RUN:
            marker = SKIP.search(lines[start - 1]) if start > 0 else None
            code = "\n".join(lines[start + 1 : i]) + "\n"
            found.append(Block(path, start + 1, lang, code, marker and marker["why"]))
        i += 1
    return found


def console_script(code: str) -> str:
    """The commands of a console transcript (``$ `` lines, and the lines a trailing ``\\``
    continues); the rest is sample output."""
    commands: list[str] = []
    continued = False
    for line in code.splitlines():
        if line.startswith("$ ") or continued:
            commands.append(line[2:] if line.startswith("$ ") and not continued else line)
            continued = line.endswith("\\")
    return "".join(command + "\n" for command in commands)


def run_block(block: Block, cwd: Path, env: dict[str, str]) -> None:
    if block.lang == "python":
        module = MODULE.match(block.code)
        if module is not None:  # a module the next blocks use: written, and imported once
            (cwd / module["name"]).write_text(block.code)
            argv = [sys.executable, "-c", f"import {module['name'][:-3]}"]
        else:
            script = cwd / f"block_{block.line}.py"
            script.write_text(block.code)
            argv = [sys.executable, script.name]
    else:
        script_text = console_script(block.code) if block.lang == "console" else block.code
        argv = ["bash", "-e", "-c", script_text]
    if POSTGRES.search(block.code) is None:
        env = {k: v for k, v in env.items() if k != "DURABLE_GRAPH_DSN"}
    # Its own process group, so a worker a block left in the background cannot outlive it.
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=BLOCK_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        pytest.fail(f"{block} ran past {BLOCK_TIMEOUT}s\n{stdout}\n{stderr}")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, f"{block} exited {proc.returncode}\n{stdout}\n{stderr}"
    assert "Traceback" not in stderr, f"{block}\n{stderr}"


@pytest.fixture
def doc_env(pg_dsn: str, tmp_path: Path) -> dict[str, str]:
    venv = Path(sys.executable).parent.parent
    (tmp_path / ".venv").symlink_to(venv)
    base = {k: v for k, v in os.environ.items() if not k.startswith("DURABLE_GRAPH_")}
    return {
        **base,
        "PATH": f"{venv / 'bin'}{os.pathsep}{base.get('PATH', '')}",
        "VIRTUAL_ENV": str(venv),
        "DURABLE_GRAPH_DSN": pg_dsn,
    }


def _drop_doc_schemas(dsn: str) -> None:
    """The schemas the docs name (the default and the examples'): fresh for every file."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for schema in ("llm4s", "agents"):
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def test_the_docs_have_runnable_examples_and_few_skipped_ones() -> None:
    every = [b for path in DOCS for b in blocks(path)]
    assert sum(b.skip is None for b in every) >= 8
    skipped = [str(b) for b in every if b.skip is not None]
    assert len(skipped) <= MAX_SKIPPED, skipped


@pytest.mark.parametrize("path", DOCS, ids=[str(p.relative_to(ROOT)) for p in DOCS])
def test_every_example_runs_as_written(
    path: Path, doc_env: dict[str, str], pg_dsn: str, tmp_path: Path
) -> None:
    _drop_doc_schemas(pg_dsn)
    try:
        for block in blocks(path):
            if block.skip is None:
                run_block(block, tmp_path, doc_env)
    finally:
        _drop_doc_schemas(pg_dsn)
