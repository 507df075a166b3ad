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
        ({"store": {"index": {"dims": 3, "embed": "openai:x"}}}, "'store.index'"),
        ({"checkpointer": {"serde": {"pickle_fallback": True}}}, "'checkpointer.serde'"),
        ({"encryption": {"path": "./enc.py:encryption", "aes": True}}, "'encryption.aes'"),
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
    config = _with(tmp_path, store={"index": {"dims": 3, "embed": "openai:x"}})
    argv = [str(BIN), "--sqlite", str(tmp_path / "s.db"), "serve", "--config", str(config)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "'store.index' is not supported" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


_HANDLERS = """
from langgraph_sdk import Encryption

encryption = Encryption()


async def same(ctx, data):
    return data
"""


@pytest.mark.filterwarnings("ignore:The Encryption API is in beta")
@pytest.mark.parametrize(
    ("registered", "named"),
    [
        ("encryption.encrypt.blob(same)", "each encrypt handler needs its decrypt handler"),
        ("", "has no handlers"),
        (
            "encryption.encrypt.json(same); encryption.decrypt.json(same)\n"
            "encryption.context(same)",
            "@encryption.context",
        ),
    ],
)
def test_an_encryption_the_savers_cannot_honour_is_refused_naming_it(
    tmp_path: Path, registered: str, named: str
) -> None:
    """``encryption.path`` (D286): handlers without their pair, none, or keys chosen per user
    (a context handler) stop the service at start, naming ``encryption``."""
    (tmp_path / "enc.py").write_text(_HANDLERS + registered + "\n")
    config = LangGraphConfig.read(_with(tmp_path, encryption={"path": "./enc.py:encryption"}))
    with pytest.raises(ValidationError, match="config: encryption") as refused:
        config.saver_serializer()
    assert named in str(refused.value)


@pytest.mark.filterwarnings("ignore:The Encryption API is in beta")
def test_a_json_encryptor_that_changes_the_keys_fails_the_write(tmp_path: Path) -> None:
    """As the reference enforces: the JSON handler transforms values, never the key set."""
    (tmp_path / "enc.py").write_text(
        _HANDLERS
        + "async def dropped(ctx, data):\n    return {}\n"
        + "encryption.encrypt.json(dropped); encryption.decrypt.json(same)\n"
    )
    config = LangGraphConfig.read(_with(tmp_path, encryption={"path": "./enc.py:encryption"}))
    serde = config.saver_serializer()
    with pytest.raises(ValidationError, match="keys it was given"):
        serde.seal_json({"source": "loop", "step": 1})
    assert serde.seal_json({"run_id": "r"}) == {"run_id": "r", "__encryption_context__": {}}
