"""``langgraph.json`` as ``langgraph dev`` reads it (python/durable_graph/langgraph/config_file.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from durable_graph.core.errors import ValidationError
from durable_graph.langgraph.config_file import LangGraphConfig


def _config(tmp_path: Path, env: object) -> Path:
    path = tmp_path / "langgraph.json"
    path.write_text(json.dumps({"graphs": {"agent": "./agent.py:graph"}, "env": env}))
    return path


def test_a_missing_env_file_is_skipped_as_langgraph_dev_skips_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """README's own langgraph.json names ``.env``; a fresh checkout has none."""
    config = LangGraphConfig.read(_config(tmp_path, ".env"))
    assert config.env == {}
    assert "does not exist" in caplog.text


def test_an_env_file_sets_what_it_names(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("# keys\nexport A_KEY='one'\nB_KEY=two\n\nnot a pair\n")
    assert LangGraphConfig.read(_config(tmp_path, ".env")).env == {"A_KEY": "one", "B_KEY": "two"}


def test_an_env_file_that_cannot_be_read_is_refused(tmp_path: Path) -> None:
    (tmp_path / "env_dir").mkdir()
    with pytest.raises(ValidationError, match="cannot read env file"):
        LangGraphConfig.read(_config(tmp_path, "env_dir"))
