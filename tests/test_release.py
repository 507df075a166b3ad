"""SPEC §23.1: one version for the package, the schema and the SQL API (D232).

``durable_graph._version.__version__`` is the one place it is written: the package's metadata,
``durable-graph --version`` and ``durable_graph.__version__`` read it, and CHANGELOG.md has an
entry for it. (The schema's side, ``dg_schema_meta_v1()``'s release, is tested with the schema;
the SQL API's manifest in tests/test_sql_api.py.)
"""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import durable_graph
from durable_graph._version import __version__

ROOT = Path(__file__).resolve().parent.parent


def test_the_version_is_a_release_number() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__), __version__


def test_the_cli_prints_the_version() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "durable_graph.cli", "--version"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert result.stdout == f"durable-graph {__version__}\n"


def test_the_package_exports_the_one_version() -> None:
    assert durable_graph.__version__ == __version__


def test_pyproject_reads_the_version_from_the_module() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"]
    assert project["project"]["dynamic"] == ["version"]
    dynamic = project["tool"]["setuptools"]["dynamic"]["version"]
    assert dynamic == {"attr": "durable_graph._version.__version__"}


def test_the_installed_metadata_carries_the_version() -> None:
    # An editable install made before the version moved shows the old number: reinstall
    # (`pip install -e .`) after a release bump.
    assert importlib.metadata.version("durable-graph") == __version__


def test_the_changelog_has_an_entry_for_the_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.search(rf"^## \[{re.escape(__version__)}\] - \d{{4}}-\d{{2}}-\d{{2}}$", text, re.M)


def test_the_install_script_records_the_version() -> None:
    # sql/install.sql runs under psql alone, so it spells the number out: it must be this one.
    text = (ROOT / "sql" / "install.sql").read_text(encoding="utf-8")
    assert re.findall(r"^\\set dg_release (\S+)$", text, re.M) == [__version__]
