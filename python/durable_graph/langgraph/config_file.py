"""``langgraph.json`` in LangGraph's own format: the graphs a service serves and workers run.

Read here: ``graphs`` (name -> ``"./file.py:attr"`` or ``"package.module:attr"``; the attribute
a compiled graph, a ``StateGraph`` (compiled here) or a function returning either: a graph
factory, called per use as LangGraph Server calls it, see `factory`), ``dependencies`` (local
paths, ``"."`` above all, put on ``sys.path``; packages are the deployer's to install), ``env``
(a ``.env`` file path — a missing one is logged and skipped, as ``langgraph dev`` does — or an
object: set in the environment where not already set), ``auth.path`` (the users' ``Auth`` the
service runs, `durable_graph.service.auth`) and ``auth.cache`` (kept as written, checked there),
``http`` (kept as written: ``http.cors`` is `durable_graph.service.guard`'s, the other keys
`durable_graph.service.http_config`'s), ``webhooks`` (kept as written: the policy of the
receivers a run's webhook may name,
`durable_graph.service.webhooks.WebhookPolicy`, which checks its keys), ``checkpointer.ttl``
and ``store.ttl`` (retention, `durable_graph.service.retention`, which checks them),
``encryption.path`` (the SDK's ``Encryption`` over what the savers store,
`durable_graph.langgraph.encryption`),
``store.index`` (the graphs' store's semantic index: `store_index` loads its ``embed`` as the
reference server does, a ``./file.py:attr`` the user's embeddings, any other string a
``provider:model`` for LangChain's ``init_embeddings``; the store checks the rest,
`durable_graph.langgraph.store_index`). Graphs are compiled with no checkpointer of their own:
the worker binds each run to the store's saver.

Fail closed (SPEC §25.1): every other key of LangGraph's configuration schema is either a build
setting of ``langgraph build`` (`BUILD_KEYS`: the image, not the server; logged, as they change
nothing a run does) or refused when the file is read, naming it (`REFUSED`), as is a key the
schema does not have: a deployment never starts believing it has what it does not.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from durable_graph.core.errors import ValidationError

log = logging.getLogger("durable_graph.langgraph")

BUILD_KEYS: Final = frozenset(
    {
        "$schema",
        "python_version",
        "node_version",
        "api_version",
        "_INTERNAL_docker_tag",
        "base_image",
        "image_distro",
        "pip_config_file",
        "pip_installer",
        "source",
        "dockerfile_lines",
        "keep_pkg_tools",
    }
)
"""LangGraph's build settings (the Docker image ``langgraph build`` makes), not the server's."""

HTTP_KEYS: Final = frozenset(
    {
        "app",
        "cors",
        "mount_prefix",
        "configurable_headers",
        "logging_headers",
        "middleware_order",
        "enable_custom_route_auth",
        "disable_assistants",
        "disable_threads",
        "disable_runs",
        "disable_store",
        "disable_meta",
        "disable_ui",
        "disable_mcp",
        "disable_a2a",
        "disable_webhooks",
    }
)
"""The keys of LangGraph's ``http`` settings (its ``HttpConfig``), each honoured."""

HONOURED: Final = {
    "graphs": None,
    "dependencies": None,
    "env": None,
    "auth": frozenset({"path", "cache"}),
    "http": HTTP_KEYS,
    "checkpointer": frozenset({"ttl"}),
    "store": frozenset({"ttl", "index"}),
    "webhooks": None,  # its keys are WebhookPolicy's to check
    "encryption": frozenset({"path"}),
}
"""The keys read (None: the whole value; a set: those of its keys, the others refused)."""

REFUSED: Final = {
    "store": "only store.ttl and store.index are served",
    "checkpointer": "only checkpointer.ttl is served (a path or serializer settings are not)",
    "encryption": "only encryption.path is read",
    "priority": "a run priority function is not served",
    "ui": "generative UI components are not served",
    "auth": "only auth.path and auth.cache are served (LangSmith's Studio auth and API keys, "
    "and the OpenAPI security settings, are not)",
    "http": "not one of LangGraph's http keys",
}
"""Why a key (or one of its keys) is refused: what serving it would take."""


@dataclass(frozen=True, slots=True)
class LangGraphConfig:
    path: Path
    graphs: dict[str, str]
    """Graph name -> where it is (as written in the file)."""
    env: dict[str, str]
    auth: str | None = None
    """``auth.path``: the ``langgraph_sdk.Auth`` the service runs (``./auth.py:auth``)."""
    auth_cache: Any = None
    """``auth.cache`` as written (`durable_graph.service.auth.AuthCache` checks it)."""
    http: dict[str, Any] | None = None
    """``http`` as written (`durable_graph.service.http_config.HttpConfig` checks it)."""
    webhooks: dict[str, Any] | None = None
    """``webhooks`` as written (``url``: the receivers' policy, read by the service)."""
    checkpointer_ttl: Any = None
    """``checkpointer.ttl`` as written (threads' TTL and its sweep: `durable_graph.service.retention`
    checks it)."""
    store_ttl: Any = None
    """``store.ttl`` as written (the items' TTL and its sweep, checked there too)."""
    encryption: str | None = None
    """``encryption.path``: the SDK's ``Encryption`` the savers seal with
    (`durable_graph.langgraph.encryption`)."""
    store_index_config: Any = None
    """``store.index`` as written (LangGraph's ``IndexConfig``; `store_index` loads it)."""

    @classmethod
    def read(cls, path: str | Path) -> LangGraphConfig:
        p = Path(path).resolve()
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ValidationError(f"config: cannot read {p} as JSON ({exc})") from None
        if not isinstance(data, dict):
            raise ValidationError("config: langgraph.json must be an object")
        _refuse_unserved(data)
        graphs = data.get("graphs")
        if not isinstance(graphs, dict) or not graphs:
            raise ValidationError("config: 'graphs' must name at least one graph")
        for name, spec in graphs.items():
            if isinstance(spec, dict):  # {"path": ..., "description": ...}
                spec = spec.get("path")
            if not isinstance(spec, str) or ":" not in spec:
                raise ValidationError(f"config: graphs[{name!r}] must look like './file.py:graph'")
            graphs[name] = spec
        env = data.get("env") or {}
        if isinstance(env, str):
            env = _read_dotenv(p.parent / env)
        if not isinstance(env, dict):
            raise ValidationError("config: 'env' must be a file name or an object")
        deps = data.get("dependencies") or []
        if not isinstance(deps, list):
            raise ValidationError("config: 'dependencies' must be a list")
        for dep in deps:
            if isinstance(dep, str) and (dep.startswith(".") or dep.startswith("/")):
                local = str((p.parent / dep).resolve())
                if local not in sys.path:
                    sys.path.append(local)
        auth = data.get("auth") or {}
        if not isinstance(auth, dict) or not isinstance(auth.get("path"), str | None):
            raise ValidationError("config: 'auth' must be an object with a 'path'")
        if auth.get("cache") is not None and auth.get("path") is None:
            raise ValidationError("config: 'auth.cache' caches auth.path's users: name a path")
        webhooks = data.get("webhooks")
        if webhooks is not None and not isinstance(webhooks, dict):
            raise ValidationError("config: 'webhooks' must be an object")
        http = data.get("http")
        if http is not None and not isinstance(http, dict):
            raise ValidationError("config: 'http' must be an object")
        env_vars = {str(k): str(v) for k, v in env.items()}
        sections = {}
        for key in ("checkpointer", "store"):
            section = data.get(key) or {}
            if not isinstance(section, dict):
                raise ValidationError(f"config: '{key}' must be an object")
            sections[key] = section
        index = sections["store"].get("index")
        if index is not None and not isinstance(index, dict):
            raise ValidationError("config: 'store.index' must be an object")
        encryption = data.get("encryption") or {}
        if not isinstance(encryption, dict) or not isinstance(encryption.get("path"), str | None):
            raise ValidationError("config: 'encryption' must be an object with a 'path'")
        return cls(
            p,
            dict(graphs),
            env_vars,
            auth.get("path"),
            auth.get("cache"),
            http,
            webhooks,
            checkpointer_ttl=sections["checkpointer"].get("ttl"),
            store_ttl=sections["store"].get("ttl"),
            encryption=encryption.get("path"),
            store_index_config=index,
        )

    def apply_env(self) -> None:
        for key, value in self.env.items():
            os.environ.setdefault(key, value)

    def saver_serializer(self) -> Any:
        """The savers' serializer under ``encryption`` (its handlers loaded and checked), or
        None for the default one."""
        from durable_graph.langgraph.codec import safe_serializer
        from durable_graph.langgraph.encryption import SealingSerializer, check_encryption

        spec = self.encryption
        if spec is None:
            return None
        if not isinstance(spec, str) or ":" not in spec:
            raise ValidationError("config: 'encryption.path' must look like './encryption.py:name'")
        self.apply_env()  # the handlers may read their keys from the environment
        try:
            found = load_object(self.path.parent, spec, "config: encryption.path")
        except ValidationError:
            raise
        except Exception as exc:  # the user's module failed to import
            raise ValidationError(f"config: encryption.path: cannot load {spec} ({exc})") from None
        return SealingSerializer(check_encryption(found, spec), safe_serializer())

    def store_index(self) -> dict[str, Any] | None:
        """``store.index`` with its ``embed`` loaded (None without one): a ``./file.py:attr``
        (relative to this file) is the object it names (the user's embeddings: an
        ``Embeddings`` or a function of a list of texts), as the reference server loads it;
        another string is kept (a ``provider:model`` for LangChain's ``init_embeddings``); the
        whole checked as the store checks it (`durable_graph.langgraph.store_index`), so a
        service refuses a bad one at start."""
        if not self.store_index_config:
            return None
        index = dict(self.store_index_config)
        embed = index.get("embed")
        if not isinstance(embed, str) or not embed:
            raise ValidationError("config: 'store.index.embed' must be a string")
        if ".py:" in embed:
            self.apply_env()
            index["embed"] = load_object(self.path.parent, embed, "config: store.index.embed")
        from durable_graph.langgraph.store_index import check_index

        try:
            check_index(index)
        except ValidationError as exc:
            raise ValidationError(f"config: store.{exc}") from None
        return index

    def load_graphs(self) -> dict[str, Any]:
        """Each graph, compiled, or its `GraphFactory` (see the module docstring)."""
        self.apply_env()
        return {name: load_graph(self.path.parent, spec) for name, spec in self.graphs.items()}


def _refuse_unserved(data: dict[str, Any]) -> None:
    """`ValidationError` naming the first key the service would not honour (see the module)."""
    build = sorted(k for k in data if k in BUILD_KEYS)
    if build:
        log.info("config: %s: build settings of langgraph build, not read here", ", ".join(build))
    for key, value in data.items():
        if key in BUILD_KEYS or value is None or value == {}:  # asks for nothing
            continue
        if key not in HONOURED and key not in REFUSED:
            raise ValidationError(f"config: unknown key {key!r} (not in LangGraph's schema)")
        served = HONOURED.get(key, frozenset())
        if served is None:
            continue
        extra = sorted(set(value) - served) if isinstance(value, dict) else []
        if key not in HONOURED or extra:
            named = f"{key}.{extra[0]}" if extra else key
            raise ValidationError(f"config: {named!r} is not supported: {REFUSED[key]}")


def _read_dotenv(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:  # as `langgraph dev`: a missing .env is not an error
        log.warning("config: env file %s does not exist; nothing set from it", path)
        return {}
    except OSError as exc:
        raise ValidationError(f"config: cannot read env file {path} ({exc})") from None
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.removeprefix("export ").partition("=")
        out[key.strip()] = value.strip().strip("'\"")
    return out


def load_object(base: Path, spec: str, label: str) -> Any:
    """The object ``spec`` names: ``./file.py:attr`` (a file relative to ``base``, loaded once a
    process, its folder put on ``sys.path``) or ``package.module:attr``; `ValidationError`
    starting with ``label`` when there is none."""
    where, _, attr = spec.rpartition(":")
    if where.endswith(".py") or "/" in where:
        file = (base / where).resolve()
        name = f"durable_graph_app_{file.stem}_{abs(hash(str(file)))}"
        module = sys.modules.get(name)
        if module is None:
            found = importlib.util.spec_from_file_location(name, file)
            if found is None or found.loader is None or not file.is_file():
                raise ValidationError(f"{label}: cannot load {file}")
            module = importlib.util.module_from_spec(found)
            sys.modules[name] = module
            if str(file.parent) not in sys.path:
                sys.path.append(str(file.parent))
            found.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    target: Any = module
    for part in attr.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise ValidationError(f"{label}: {where} has no attribute {attr!r}")
    return target


def load_graph(base: Path, spec: str) -> Any:
    """The compiled graph ``spec`` names (``./file.py:attr`` relative to ``base``), or its
    `GraphFactory` when it names a function."""
    from langgraph.graph import StateGraph
    from langgraph.pregel import Pregel

    from durable_graph.langgraph.factory import GraphFactory

    target = load_object(base, spec, "config")
    if callable(target) and not isinstance(target, (Pregel, StateGraph)):
        return GraphFactory.of(spec, target)  # called per use, as LangGraph Server calls it
    if isinstance(target, StateGraph):
        target = target.compile()
    if not isinstance(target, Pregel):
        raise ValidationError(f"config: {spec} is not a LangGraph graph")
    return target
