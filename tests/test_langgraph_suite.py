"""LangGraph's own tests against our savers (SPEC §14.1): the short subset in `make test`.

Runs `tests/langgraph_suite/run.py` on the delta-channel (but the long fork and subgraph files),
checkpoint-migration, pydantic and prune files of the installed ``langgraph``'s sdist (downloaded from PyPI once into
``build/langgraph-suite/``), with our six savers (`DurableSaver` on memory, SQLite and
PostgreSQL, `AsyncDurableSaver` on their async stores) as the checkpointer fixtures; every one of
those tests must pass (``-k dg_``: LangGraph's own savers are left to the whole suite,
``make langgraph-suite``, which runs them beside ours and compares; they pass all of this
subset).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_langgraphs_own_tests_pass_on_our_savers(tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    env = dict(os.environ, DG_SUITE_LANGGRAPH_SAVERS="none")
    done = subprocess.run(
        [sys.executable, "-m", "tests.langgraph_suite.run", "--subset", "short",
         "--out", str(out), "--", "-k", "dg_"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    report = out.read_text(encoding="utf-8") if out.exists() else done.stdout[-4000:]
    print(report)
    assert done.returncode == 0, report + done.stderr[-4000:]
    rows = {line.split("|")[1].strip(): line for line in report.splitlines() if "| dg_" in line}
    assert set(rows) == {
        "dg_memory", "dg_sqlite", "dg_postgres", "dg_memory_aio", "dg_sqlite_aio",
        "dg_postgres_aio",
    }  # fmt: skip
    for line in rows.values():
        passed, failed = (int(c) for c in line.split("|")[2:4])
        assert passed > 0 and failed == 0, line
