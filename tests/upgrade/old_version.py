"""Earlier states of this repository, run as they were: the archived tarballs of
``tests/upgrade/states`` (written by ``tools/archive_state.py``, described by ``SOURCES.json``).

`states()` reads SOURCES.json; `extract` checks a tarball's sha256 against it (a mismatch
raises: nothing is skipped) and unpacks it. `OldPackage.run_driver` runs a script against the
OLD package in a subprocess of this venv's Python: ``python -I`` (no PYTHONPATH, no user site,
no current directory) with a bootstrap that puts ``<extract>/python`` first on ``sys.path``
and removes every other entry holding a ``durable_graph`` package (the venv's editable install
of the new package adds ``/…/python`` through a ``.pth`` file), then checks that
``durable_graph`` and every ``durable_graph.*`` module the script loaded came from the extract.
An old state needs only psycopg, psycopg_pool and yoyo from the venv.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
STATES = HERE / "states"
SOURCES = STATES / "SOURCES.json"
DRIVER = HERE / "store_driver.py"

# Run in the child before the script: the extract's package first, nobody else's.
_BOOTSTRAP = r"""
import os, runpy, sys
root = os.path.realpath(sys.argv[1])
script = sys.argv[2]
def other(entry):
    path = os.path.realpath(entry or ".")
    return path != root and os.path.isdir(os.path.join(path, "durable_graph"))
sys.path[:] = [root] + [p for p in sys.path if not other(p)]
sys.argv = sys.argv[2:]
import durable_graph
expected = os.path.join(root, "durable_graph", "__init__.py")
if os.path.realpath(durable_graph.__file__) != expected:
    raise SystemExit(f"old_version: imported {durable_graph.__file__}, not {expected}")
try:
    runpy.run_path(script, run_name="__main__")
finally:
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if name.split(".")[0] == "durable_graph" and file and not os.path.realpath(
            file
        ).startswith(root + os.sep):
            raise SystemExit(f"old_version: {name} was imported from {file}, not from {root}")
"""


@dataclass(frozen=True)
class State:
    """One archived earlier state, as SOURCES.json records it."""

    label: str
    commit: str
    commit_date: str
    schema_version: int
    sha256: str
    command: str

    @property
    def tarball(self) -> Path:
        return STATES / f"{self.label}.tar.gz"


def states() -> list[State]:
    """Every archived state, oldest first (SOURCES.json's order)."""
    entries = json.loads(SOURCES.read_text())
    return [
        State(
            label=str(e["label"]),
            commit=str(e["commit"]),
            commit_date=str(e["commit_date"]),
            schema_version=int(e["schema_version"]),
            sha256=str(e["sha256"]),
            command=str(e["command"]),
        )
        for e in entries
    ]


def tarball_digest(state: State) -> str:
    return hashlib.sha256(state.tarball.read_bytes()).hexdigest()


def extract(state: State, dest: Path) -> OldPackage:
    """Check the tarball against SOURCES.json (raises on a mismatch), unpack it under ``dest``."""
    digest = tarball_digest(state)
    if digest != state.sha256:
        raise AssertionError(
            f"{state.tarball}: sha256 {digest}, SOURCES.json records {state.sha256} "
            f"(remake it with: {state.command})"
        )
    root = dest / state.label
    root.mkdir(parents=True)
    with tarfile.open(state.tarball) as tar:
        tar.extractall(root, filter="tar")
    return OldPackage(state, root)


@dataclass(frozen=True)
class OldPackage:
    """An extracted state: ``root/python/durable_graph`` with its ``_sql`` and ``_migrations``."""

    state: State
    root: Path

    @property
    def python_path(self) -> Path:
        return self.root / "python"

    def run(
        self, script: Path, *args: str, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run ``script`` (argv: ``args``) against this package; the caller checks the result."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        return subprocess.run(
            [sys.executable, "-I", "-c", _BOOTSTRAP, str(self.python_path), str(script), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=self.root,
            check=False,
        )

    def run_driver(self, request: dict[str, Any], timeout: float = 120) -> dict[str, Any]:
        """Run `store_driver` against this package: ``request`` in, its JSON answer out."""
        request_path = self.root / f"request-{os.getpid()}-{id(request)}.json"
        answer_path = request_path.with_suffix(".answer.json")
        request_path.write_text(json.dumps(request))
        done = self.run(DRIVER, str(request_path), str(answer_path), timeout=timeout)
        if done.returncode != 0 or not answer_path.exists():
            raise AssertionError(
                f"the driver of {self.state.label} exited {done.returncode}\n"
                f"stdout:\n{done.stdout[-4000:]}\nstderr:\n{done.stderr[-8000:]}"
            )
        answer: dict[str, Any] = json.loads(answer_path.read_text())
        return answer
