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
        ({"encryption": {"path": "./enc.py:encryption", "aes": True}}, "'encryption.aes'"),
        ({"priority": {"path": "./p.py:priority"}}, "'priority.path'"),
        ({"ui": {"agent": "./ui.tsx"}}, "'ui.agent'"),
        ({"http": {"disable_event_streaming": True}}, "'http.disable_event_streaming'"),
        ({"auth": {"path": "./auth.py:auth", "openapi": {}}}, "'auth.openapi'"),
        ({"auth": {"cache": {"ttl_seconds": 60}}}, "'auth.cache'"),
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


@pytest.mark.parametrize(
    ("http", "named"),
    [
        ({"mount_prefix": "api"}, "http.mount_prefix"),
        ({"mount_prefix": "/a/{b}"}, "http.mount_prefix"),
        ({"mount_prefix": "/a/../b"}, "http.mount_prefix"),
        ({"disable_runs": "yes"}, "http.disable_runs"),
        ({"disable_webhooks": 1}, "http.disable_webhooks"),
        ({"enable_custom_route_auth": "true"}, "http.enable_custom_route_auth"),
        ({"middleware_order": "auth_last"}, "http.middleware_order"),
        ({"configurable_headers": {"includes": "x-*"}}, "http.configurable_headers.includes"),
        ({"configurable_headers": {"only": ["x-*"]}}, "http.configurable_headers.only"),
        ({"configurable_headers": ["x-*"]}, "http.configurable_headers"),
        ({"logging_headers": {"includes": ["user-agent"]}}, "http.logging_headers.includes"),
        ({"app": "./app.py"}, "http.app"),
        ({"app": "./app.js:app"}, "http.app"),
        ({"app": 3}, "http.app"),
    ],
)
def test_a_bad_http_value_is_refused_naming_it(http: dict[str, object], named: str) -> None:
    from durable_graph.service.http_config import HttpConfig

    with pytest.raises(ValidationError, match=named.replace(".", r"\.")):
        HttpConfig.of(http)


def test_http_values_are_read_as_the_reference_reads_them() -> None:
    from durable_graph.service.http_config import HttpConfig

    http = HttpConfig.of(
        {
            "mount_prefix": "/my-api/v1/",
            "disable_store": True,
            "disable_mcp": False,
            "middleware_order": "auth_first",
            "logging_headers": {"excludes": ["authorization"]},
            "configurable_headers": {"include": ["x-*", "User-Agent"], "exclude": ["x-secret"]},
        }
    )
    assert http.mount_prefix == "/my-api/v1"  # a trailing slash dropped
    assert http.disabled == {"store"} and http.auth_first and not http.custom_route_auth
    headers = {
        "x-team": "a",
        "x-secret": "b",
        "user-agent": "c",
        "accept": "d",
        "x-api-key": "e",
        "authorization": "f",
        "langsmith-trace": "g",
        "baggage": "langsmith-project=p%201,langsmith-tags=a%2Cb,langsmith-metadata=%7B%22k%22%3A1%7D",
    }
    assert http.headers.configurable(headers) == {
        "x-team": "a",
        "user-agent": "c",
        "langsmith-trace": "g",
        "langsmith-project": "p 1",
        "langsmith-tags": ["a", "b"],
        "langsmith-metadata": {"k": 1},
    }
    assert HttpConfig.of(None).headers.configurable(headers) == {
        k: v for k, v in http.headers.configurable(headers).items() if k.startswith("langsmith")
    }  # none without includes, as the reference


@pytest.mark.parametrize(
    ("cache", "named"),
    [
        ({"ttl_seconds": 0}, "auth.cache.ttl_seconds"),
        ({"ttl_seconds": "60"}, "auth.cache.ttl_seconds"),
        ({"max_size": 0}, "auth.cache.max_size"),
        ({"cache_keys": "authorization"}, "auth.cache.cache_keys"),
        ({"cache_key": ["authorization"]}, "auth.cache.cache_key"),
        ([], "auth.cache"),
    ],
)
def test_a_bad_auth_cache_is_refused_naming_it(cache: object, named: str) -> None:
    from durable_graph.service.auth import AuthCache

    with pytest.raises(ValidationError, match=named.replace(".", r"\.")):
        AuthCache.of(cache)


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


GRAPH = """
from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict


class State(TypedDict):
    x: int


builder = StateGraph(State)
builder.add_node("n", lambda state: state)
builder.add_edge(START, "n")
graph = builder.compile()
not_an_app = 42
"""


@pytest.mark.parametrize(
    ("keys", "said"),
    [
        ({"http": {"disable_threads": "no"}}, "http.disable_threads must be true or false"),
        ({"http": {"app": "./agent.py:not_an_app"}}, "http.app: ./agent.py:not_an_app is a int"),
        ({"http": {"app": "./missing.py:app"}}, "http.app: cannot load"),
        ({"auth": {"path": "./agent.py:graph", "cache": {"max_size": -1}}}, "auth.cache.max_size"),
    ],
)
def test_serve_stops_at_start_on_a_bad_http_or_auth_cache_value(
    tmp_path: Path, keys: dict[str, object], said: str
) -> None:
    import subprocess

    from service_support import BIN

    (tmp_path / "agent.py").write_text(GRAPH)
    argv = [str(BIN), "--sqlite", str(tmp_path / "s.db"), "serve", "--config"]
    argv.append(str(_with(tmp_path, **keys)))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert said in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "s.db").exists()  # stopped before the store is opened


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
