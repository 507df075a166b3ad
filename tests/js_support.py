"""npm packages installed at test time for the JavaScript suites (tests/js_suite.py,
tests/browser_suite.py): each set in a directory of its own under ``build/js`` (nothing of it is
kept in the repository), from the npm registry, once."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
JS_WORK = ROOT / "build" / "js"
CONFIG = Path(__file__).parent / "service_js" / "langgraph.json"
"""The graphs the JavaScript suites serve: ``agent`` (tests/service_app), ``nested`` (a
subgraph) and ``chat`` (a slowly streaming chat model, for the React hook's page)."""
SDK_PINNED = "1.17.0"
"""The pinned ``@langchain/langgraph-sdk`` (npm's ``latest`` when pinned)."""
SDK_PREVIOUS_MAJOR = "0.1.10"
"""The last release of the major before it, which users still run."""


def npm_dir(name: str, packages: list[str]) -> Path:
    """``build/js/<name>`` with ``packages`` (npm specs, exact versions) installed."""
    folder = JS_WORK / name
    marker = folder / "node_modules" / ".dg-installed"
    wanted = json.dumps(sorted(packages))
    if marker.exists() and marker.read_text(encoding="utf-8") == wanted:
        return folder
    npm = shutil.which("npm")
    assert npm is not None, "npm is needed: apt-get install nodejs npm"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "package.json").write_text(
        json.dumps({"name": f"dg-{name}", "private": True, "type": "module"}), encoding="utf-8"
    )
    subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", *packages],
        cwd=folder,
        check=True,
    )
    marker.write_text(wanted, encoding="utf-8")
    return folder


def sdk_dir(version: str) -> Path:
    """``@langchain/langgraph-sdk`` at ``version`` (and ``@langchain/core``, its peer)."""
    return npm_dir(
        f"sdk-{version}", [f"@langchain/langgraph-sdk@{version}", "@langchain/core@1.5.0"]
    )
