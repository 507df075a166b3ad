"""SPEC §22: the worker and the LangGraph saver call the store's methods directly, so mypy checks
every call. Each test copies the real source, makes one mistake a string-named operation would
have hidden (arguments swapped, a method misspelled), and runs ``mypy --strict`` on the copy:
the unchanged copy passes, each mistake is an error of the kind named."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "python" / "durable_graph"
WORKER = PACKAGE / "worker" / "attempt_async.py"
SAVER = PACKAGE / "langgraph" / "async_saver.py"

MISTAKES = [
    pytest.param(
        WORKER,
        "self.store.finish_attempt, self.lease, outcome, claim, commit=commit",
        "self.store.finish_attempt, self.lease, claim, outcome, commit=commit",
        "arg-type",
        id="worker-finish_attempt-swapped",
    ),
    pytest.param(
        WORKER,
        "self.store.run_queue.defer, self.lease, outcome.delay, outcome.error",
        "self.store.run_queue.defer, self.lease, outcome.error, outcome.delay",
        "arg-type",
        id="worker-defer-swapped",
    ),
    pytest.param(
        WORKER,
        "self.store.finish_attempt, self.lease, outcome, claim, commit=commit",
        "self.store.finish_atempt, self.lease, outcome, claim, commit=commit",
        "attr-defined",
        id="worker-finish_attempt-misspelled",
    ),
    pytest.param(
        SAVER,
        "await self.store.commit(claim, on_parent(commit, parent, fence))",
        "await self.store.commit(on_parent(commit, parent, fence), claim)",
        "arg-type",
        id="saver-commit-swapped",
    ),
]


def _mypy(tmp_path: Path, source: str, name: str) -> subprocess.CompletedProcess[str]:
    """``mypy --strict`` on ``source`` as a module of its own, the package importable."""
    copy = tmp_path / f"{name}.py"
    copy.write_text(source, encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
         "--cache-dir", str(tmp_path.parent / "mypy-cache"), str(copy)],
        cwd=tmp_path,
        env={"MYPYPATH": str(ROOT / "python"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip


@pytest.mark.parametrize("source", [WORKER, SAVER], ids=["worker", "saver"])
def test_the_unchanged_source_type_checks(tmp_path: Path, source: Path) -> None:
    result = _mypy(tmp_path, source.read_text(encoding="utf-8"), "unchanged")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(("source", "call", "mistake", "error"), MISTAKES)
def test_mypy_rejects_a_mistaken_store_call(
    tmp_path: Path, source: Path, call: str, mistake: str, error: str
) -> None:
    text = source.read_text(encoding="utf-8")
    assert text.count(call) >= 1, f"the call {call!r} is no longer in {source.name}"
    result = _mypy(tmp_path, text.replace(call, mistake, 1), "mistaken")
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"[{error}]" in result.stdout, result.stdout
