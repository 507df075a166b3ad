"""LangGraph's JavaScript SDK against ``durable-graph serve`` and ``langgraph dev`` (SPEC §25).

`make js-suite` runs this module (not part of `make test`: it installs packages from npm).
``@langchain/langgraph-sdk``'s ``Client`` at the pinned release and at the previous major's last
(each installed at test time under ``build/js``, `tests.js_support`) runs tests/js_sdk/checks.mjs
in Node.js against ``serve`` on SQLite and PostgreSQL and, with ``DURABLE_GRAPH_LANGGRAPH_DEV``
set, against LangGraph's own ``langgraph dev`` serving the same graphs
(tests/service_js/langgraph.json): streaming tokens and values, ``runs.wait``, an interrupt
resumed, ``streamSubgraphs`` with ``updates``, ``runs.join`` of an ended run after a second one,
``joinStream``, cancel, a branch from history, ``updateState``, stateless runs, a failed run's
error (never a traceback) and the store. Each check is a test of its own (the check's name in
the id).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from js_support import CONFIG, SDK_PINNED, SDK_PREVIOUS_MAJOR, sdk_dir
from service_support import SERVED_KINDS, served_url

CHECKS = Path(__file__).parent / "js_sdk" / "checks.mjs"
VERSIONS = [SDK_PINNED, SDK_PREVIOUS_MAJOR]
RESULTS: dict[tuple[str, str], dict[str, dict[str, object]]] = {}
NAMES = [
    "assistants.search finds the graphs",
    "runs.stream values and messages: the reply's tokens, then its values",
    "runs.wait answers the thread's values",
    "an interrupt, resumed with a command",
    "streamSubgraphs with updates: the subgraph's own updates events",
    "runs.join of an ended run, after a second run: the thread's current values",
    "runs.joinStream of a running run, then runs.get and runs.list",
    "runs.cancel of a running run",
    "history, then a run from an earlier checkpoint (a branch)",
    "threads.updateState, then getState",
    "stateless runs.wait (no thread)",
    "a failed run streams its error, never a traceback or a path",
    "store put, get, search, delete",
]
"""checks.mjs's checks, in its order."""


@pytest.fixture(scope="module", params=SERVED_KINDS)
def url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with served_url(request, tmp_path_factory, CONFIG, schema_prefix="js") as served:
        yield served


def run_checks(version: str, url: str) -> dict[str, dict[str, object]]:
    """checks.mjs run once by ``version``'s client against ``url``: each check's line by name."""
    folder = sdk_dir(version)
    shutil.copyfile(CHECKS, folder / CHECKS.name)
    node = shutil.which("node")
    assert node is not None, "Node.js is needed: apt-get install nodejs npm"
    done = subprocess.run(
        [node, CHECKS.name, url], cwd=folder, capture_output=True, text=True, timeout=300
    )
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0 and lines, f"checks.mjs: {done.stdout}\n{done.stderr}"
    return {str(line["name"]): line for line in lines}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("check", NAMES)
def test_js_sdk(url: str, version: str, check: str) -> None:
    key = (version, url)
    if key not in RESULTS:
        RESULTS[key] = run_checks(version, url)
    line = RESULTS[key].get(check)
    assert line is not None, f"checks.mjs did not run {check!r}: {sorted(RESULTS[key])}"
    assert line["ok"], line.get("detail")
