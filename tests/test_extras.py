"""What each extra of pyproject.toml installs is what its commands need (issue 48: ``pip install
'durable-graph[service]'`` answered every cron route with 422 "cron schedules need the cronsim
package")."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

EXTRAS = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"][
    "optional-dependencies"
]


def installed_by(extra: str) -> set[str]:
    """The distributions an extra brings, its ``durable-graph[...]`` extras followed."""
    found: set[str] = set()
    for requirement in EXTRAS[extra]:
        inner = re.fullmatch(r"durable-graph\[([\w,-]+)\]", requirement)
        if inner:
            for name in inner.group(1).split(","):
                found |= installed_by(name)
        else:
            found.add(re.split(r"[<>=\[; ]", requirement, maxsplit=1)[0].lower())
    return found


def test_the_service_extra_brings_what_serve_needs_crons_included() -> None:
    needed = {"starlette", "uvicorn", "cronsim", "langgraph"}  # langgraph brings its SDK
    assert needed <= installed_by("service"), needed - installed_by("service")
