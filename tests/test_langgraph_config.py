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


def _with(tmp_path: Path, **keys: object) -> Path:
    path = tmp_path / "langgraph.json"
    path.write_text(json.dumps({"graphs": {"agent": "./agent.py:graph"}, **keys}))
    return path


@pytest.mark.parametrize(
    ("keys", "named"),
    [
        ({"store": {"index": {"dims": 3, "embed": "openai:x"}, "other": 1}}, "'store.other'"),
        ({"checkpointer": {"serde": {"pickle_fallback": True}}}, "'checkpointer.serde'"),
        ({"encryption": {"path": "./enc.py:encryption"}}, "'encryption.path'"),
        ({"priority": {"path": "./p.py:priority"}}, "'priority.path'"),
        ({"ui": {"agent": "./ui.tsx"}}, "'ui.agent'"),
        ({"http": {"app": "./app.py:app"}}, "'http.app'"),
        (
            {"http": {"cors": {"allow_origins": ["*"]}, "mount_prefix": "/api"}},
            "'http.mount_prefix'",
        ),
        ({"auth": {"path": "./auth.py:auth", "cache": {"ttl_seconds": 60}}}, "'auth.cache'"),
        ({"grpahs": {"agent": "./agent.py:graph"}}, "unknown key 'grpahs'"),
    ],
)
def test_a_key_the_service_would_not_honour_is_refused_by_name(
    tmp_path: Path, keys: dict[str, object], named: str
) -> None:
    """Fail closed (SPEC §25.1, issue 48): a deployment moved from LangGraph's platform never
    starts without what its file asks and without a word."""
    with pytest.raises(ValidationError, match=named.replace(".", r"\.")):
        LangGraphConfig.read(_with(tmp_path, **keys))


def test_build_settings_and_empty_sections_are_read_without_refusal(tmp_path: Path) -> None:
    path = _with(
        tmp_path,
        python_version="3.11",
        dockerfile_lines=["RUN true"],
        pip_installer="uv",
        store={},
        http={"cors": {"allow_origins": ["https://app.example.com"]}},
        auth={"path": None},
    )
    assert LangGraphConfig.read(path).graphs == {"agent": "./agent.py:graph"}


def test_serve_refuses_to_start_with_a_key_it_would_not_honour(tmp_path: Path) -> None:
    import subprocess

    from service_support import BIN

    (tmp_path / "agent.py").write_text("graph = None\n")
    config = _with(tmp_path, store={"index": {"dims": 3, "embed": "openai:x"}, "other": 1})
    argv = [str(BIN), "--sqlite", str(tmp_path / "s.db"), "serve", "--config", str(config)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "'store.other' is not supported" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_store_index_loads_the_users_embeddings_as_the_reference_server_does(
    tmp_path: Path,
) -> None:
    """SPEC §25.1: ``store.index.embed`` as ``./file.py:attr`` is the user's function (loaded
    relative to the file, as graphs are); the whole is checked as the store checks it."""
    (tmp_path / "embed.py").write_text(
        "def embed(texts):\n    return [[float(len(t)), 1.0] for t in texts]\n"
    )
    index = {"dims": 2, "embed": "./embed.py:embed", "fields": ["text"]}
    loaded = LangGraphConfig.read(_with(tmp_path, store={"index": index})).store_index()
    assert loaded is not None and loaded["dims"] == 2 and loaded["fields"] == ["text"]
    assert loaded["embed"](["abc"]) == [[3.0, 1.0]]
    assert LangGraphConfig.read(_with(tmp_path, store={"ttl": None})).store_index() is None


@pytest.mark.parametrize(
    ("index", "named"),
    [
        ({"dims": 0, "embed": "./embed.py:embed"}, "store.index.dims"),
        ({"dims": 2, "embed": "./missing.py:embed"}, "store.index.embed"),
        ({"dims": 2, "embed": "./embed.py:nothing"}, "store.index.embed"),
        ({"dims": 2, "embed": 7}, "store.index.embed"),
        ({"dims": 2, "embed": "./embed.py:embed", "distance_type": "l2"}, "distance_type"),
        ([2], "store.index"),
    ],
)
def test_a_bad_store_index_is_refused_naming_it(tmp_path: Path, index: object, named: str) -> None:
    (tmp_path / "embed.py").write_text(
        "def embed(texts):\n    return [[1.0, 0.0] for _ in texts]\n"
    )
    with pytest.raises(ValidationError, match=named.replace(".", r"\.")):
        LangGraphConfig.read(_with(tmp_path, store={"index": index})).store_index()
