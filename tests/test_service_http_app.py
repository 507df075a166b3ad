"""``langgraph.json``'s ``http`` section and ``auth.cache`` (SPEC §25.1, issue 48) through real
``durable-graph serve`` processes on SQLite and PostgreSQL and, with
``DURABLE_GRAPH_LANGGRAPH_DEV``, ``langgraph dev`` with the same files: a user's Starlette app
written by the test (a route, a middleware stamping every answer, a lifespan writing a file)
served beside the service's routes, in the reference's order; ``mount_prefix``; ``disable_*``
groups answering 404; ``configurable_headers`` reaching a run's ``configurable``;
``disable_webhooks``; ``middleware_order: "auth_first"`` and ``enable_custom_route_auth`` with a
user's ``Auth``, whose users ``auth.cache`` keeps."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import NotFoundError

from service_support import (
    BIN,
    REFERENCE,
    SERVED_KINDS,
    Backend,
    free_port,
    process,
    reference_serving_process,
    serving_process,
    store_backend,
)
from test_service_webhooks import Receiver, deliveries

ECHO = '''
"""A graph answering the keys of its run's configurable."""
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict


class State(TypedDict, total=False):
    seen: dict[str, Any]


def echo(state: State, config: RunnableConfig) -> State:
    return {"seen": {k: v for k, v in config["configurable"].items() if isinstance(v, str)}}


builder = StateGraph(State)
builder.add_node("echo", echo)
builder.add_edge(START, "echo")
builder.add_edge("echo", END)
graph = builder.compile()
'''

APP = '''
"""A team's own app: a route, a middleware stamping every answer, a lifespan writing a file."""
import contextlib
import os
from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.responses import JSONResponse
from starlette.routing import Route

LOG = Path(__file__).resolve().parent / "lifespan.log"


class Stamp(BaseHTTPMiddleware):
    async def dispatch(self, request, call_next):
        saw_user = "user" in request.scope
        response = await call_next(request)
        response.headers["x-stamp"] = "stamped"
        response.headers["x-saw-user"] = str(saw_user).lower()
        return response


@contextlib.asynccontextmanager
async def lifespan(app):
    with LOG.open("a") as f:
        f.write(f"started {os.getpid()}\\n")
    yield
    with LOG.open("a") as f:
        f.write(f"stopped {os.getpid()}\\n")


async def hello(request):
    user, auth = request.scope.get("user"), request.scope.get("auth")
    return JSONResponse(
        {
            "hello": "world",
            "identity": getattr(user, "identity", None),
            "scopes": list(getattr(auth, "scopes", None) or []),
        }
    )


async def theirs(request):
    return JSONResponse({"theirs": request.url.path})


app = Starlette(
    routes=[
        Route("/custom/hello", hello),
        Route("/info", theirs),
        Route("/ok", theirs),
        Route("/openapi.json", theirs),
        Route("/threads", theirs, methods=["POST"]),
    ],
    middleware=[Middleware(Stamp)],
    lifespan=lifespan,
)
hello_only = Starlette(routes=[Route("/custom/hello", hello)], middleware=[Middleware(Stamp)])
'''

AUTH = '''
"""Two users; each call of authenticate is counted in the user's permissions."""
import itertools

from langgraph_sdk import Auth

auth = Auth()
calls = itertools.count(1)


@auth.authenticate
async def authenticate(authorization: str | None) -> dict:
    token = (authorization or "").removeprefix("Bearer ")
    if token not in ("token-ada", "token-bob"):
        raise Auth.exceptions.HTTPException(status_code=401, detail="who are you?")
    return {"identity": token.removeprefix("token-"), "permissions": [f"call-{next(calls)}"]}
'''

PREFIXED = {
    "dependencies": ["."],
    "graphs": {"echo": "./echo.py:graph"},
    "env": {},
    "webhooks": {
        "url": {"require_https": False, "disable_loopback": False, "allowed_domains": ["127.0.0.1"]}
    },
    "http": {
        "app": "./app.py:app",
        "mount_prefix": "/api/",
        "disable_store": True,
        "disable_webhooks": True,
        "configurable_headers": {"includes": ["x-*", "my-header"], "excludes": ["x-secret*"]},
    },
}
AUTHENTICATED = {
    "dependencies": ["."],
    "graphs": {"echo": "./echo.py:graph"},
    "env": {},
    "auth": {
        "path": "./auth.py:auth",
        "cache": {"cache_keys": ["Authorization"], "ttl_seconds": 600, "max_size": 10},
    },
    "http": {
        "app": "./app.py:hello_only",
        "enable_custom_route_auth": True,
        "middleware_order": "auth_first",
        "disable_meta": True,
        "disable_assistants": True,
    },
}


MIDDLEWARE_FIRST = {
    **AUTHENTICATED,
    "http": {"app": "./app.py:hello_only", "enable_custom_route_auth": True},
}


@pytest.fixture(scope="module")
def app_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The team's files, written here: the graph, the app, the auth and both langgraph.json."""
    where = tmp_path_factory.mktemp("http_app")
    (where / "echo.py").write_text(ECHO)
    (where / "app.py").write_text(APP)
    (where / "auth.py").write_text(AUTH)
    (where / "prefixed.json").write_text(json.dumps(PREFIXED))
    (where / "authenticated.json").write_text(json.dumps(AUTHENTICATED))
    (where / "middleware_first.json").write_text(json.dumps(MIDDLEWARE_FIRST))
    return where


def _client(url: str, **options: Any) -> Any:
    """LangGraph's sync client (typed Any: these tests read its answers as JSON)."""
    return get_sync_client(url=url, **options)


@dataclass(frozen=True)
class Served:
    url: str
    kind: str
    backend: Backend | None
    pid: int


@contextmanager
def _serve(
    kind: str,
    config: Path,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Served]:
    """``config`` served by our ``serve`` on ``kind``'s store, or by ``langgraph dev``."""
    logs = tmp_path_factory.mktemp("logs")
    if kind == "reference":
        assert REFERENCE is not None
        with reference_serving_process(REFERENCE, logs, config) as (url, proc):
            yield Served(url, kind, None, proc.pid)
        return
    backend = store_backend(kind, request, tmp_path_factory, "http")
    with serving_process(backend, logs, config=config) as (url, proc):
        yield Served(url, kind, backend, proc.pid)


@pytest.fixture(scope="module", params=SERVED_KINDS)
def prefixed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, app_dir: Path
) -> Iterator[Served]:
    with _serve(request.param, app_dir / "prefixed.json", request, tmp_path_factory) as served:
        yield served


@pytest.fixture(scope="module", params=SERVED_KINDS)
def authenticated(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, app_dir: Path
) -> Iterator[Served]:
    config = app_dir / "authenticated.json"
    with _serve(request.param, config, request, tmp_path_factory) as served:
        yield served


# --- http.app, mount_prefix, disable_*, configurable_headers ------------------------------------


def test_the_apps_route_is_served_beside_the_services_its_middleware_around_both(
    prefixed: Served,
) -> None:
    api = f"{prefixed.url}/api"
    with httpx.Client(timeout=30) as http:
        hello = http.get(f"{api}/custom/hello")
        assert hello.status_code == 200
        assert hello.json()["hello"] == "world"
        assert hello.headers["x-stamp"] == "stamped"
        search = http.post(f"{api}/threads/search", json={})
        assert search.status_code == 200 and isinstance(search.json(), list)
        assert search.headers["x-stamp"] == "stamped"  # the service's routes too
    client = _client(url=api)
    assert client.threads.create() == {"theirs": "/api/threads"}  # their POST /threads
    assert isinstance(client.runs.wait(None, "echo", input={})["seen"], dict)  # ours


def test_the_apps_routes_take_info_and_the_groups_never_ok_or_openapi(prefixed: Served) -> None:
    """As the reference orders routes: /ok, /metrics, /openapi.json; the app's; /, /info; the
    groups."""
    api = f"{prefixed.url}/api"
    with httpx.Client(timeout=30) as http:
        assert http.get(f"{api}/info").json() == {"theirs": "/api/info"}
        assert http.post(f"{api}/threads", json={}).json() == {"theirs": "/api/threads"}
        assert http.get(f"{api}/ok").json()["ok"] is True
        assert "paths" in http.get(f"{api}/openapi.json").json()
        assert http.get(f"{api}/").json()["ok"] is True


def test_the_mount_prefix_holds_every_route_but_the_health_checks(prefixed: Served) -> None:
    with httpx.Client(timeout=30) as http:
        for path in ("/ok", "/"):
            answer = http.get(f"{prefixed.url}{path}")
            assert answer.status_code == 200 and answer.json()["ok"] is True
            assert "x-stamp" not in answer.headers  # outside the app, as the reference
        for path in ("/threads/search", "/assistants/search"):
            answer = http.post(f"{prefixed.url}{path}", json={})
            assert answer.status_code == 404, path
        assert http.get(f"{prefixed.url}/custom/hello").status_code == 404
        if prefixed.kind != "reference":  # a thread id it cannot answer for, named (D146)
            body = {"assistant_id": "echo", "input": {}, "if_not_exists": "create"}
            refused = http.post(f"{prefixed.url}/api/threads/a%0Ab/runs", json=body)
            assert refused.status_code == 422 and "thread_id" in refused.json()["detail"]


def test_a_disabled_group_answers_404(prefixed: Served) -> None:
    api = f"{prefixed.url}/api"
    with httpx.Client(timeout=30) as http:
        answer = http.put(f"{api}/store/items", json={"namespace": ["a"], "key": "k", "value": {}})
        assert answer.status_code == 404
        assert answer.json() == {"detail": "Not Found"}
    with pytest.raises(NotFoundError):
        _client(url=api).store.search_items(["a"])
    assert _client(url=api).assistants.search()  # the other groups are served


def test_configurable_headers_reach_the_runs_configurable(prefixed: Served) -> None:
    sent = {
        "x-team": "blue",
        "my-header": "mine",
        "x-secret-token": "hidden",
        "other": "not named",
        "authorization": "Bearer never",
        "langsmith-trace": "20240101T000000000000Zabc",
    }
    client = _client(url=f"{prefixed.url}/api", api_key="never", headers=sent)
    body = {"configurable": {"x-team": "from the body", "mine": "kept"}}
    seen = client.runs.wait(None, "echo", input={}, config=body)["seen"]
    shown = {k: v for k, v in seen.items() if k in {*sent, "x-api-key", "mine"}}
    assert shown == {
        "x-team": "blue",  # a header over the body's value, as the reference
        "my-header": "mine",
        "mine": "kept",
        "langsmith-trace": "20240101T000000000000Zabc",  # always, as the reference
    }
    streamed = [
        part.data
        for part in client.runs.stream(None, "echo", input={}, stream_mode="values")
        if part.event == "values" and part.data.get("seen")
    ]
    assert streamed[-1]["seen"]["x-team"] == "blue"


def test_disable_webhooks_runs_the_run_and_sends_nothing(prefixed: Served) -> None:
    receiver = Receiver(free_port())
    receiver.start()
    try:
        client = _client(url=f"{prefixed.url}/api")
        thread_id = str(uuid.uuid4())  # POST /threads is the app's: the run makes its thread
        run = client.runs.create(
            thread_id, "echo", input={}, webhook=receiver.url, if_not_exists="create"
        )
        client.runs.join(thread_id, run["run_id"])
        assert client.runs.get(thread_id, run["run_id"])["status"] == "success"
        if prefixed.backend is not None:  # its delivery ended unsent
            ended = deliveries(prefixed.backend, "completed", 30)
            assert "http.disable_webhooks" in json.dumps(ended)
        else:
            time.sleep(2)
        assert receiver.got == []
    finally:
        receiver.stop()


def test_the_apps_lifespan_has_started_before_serve_answers(
    prefixed: Served, app_dir: Path
) -> None:
    assert f"started {prefixed.pid}" in (app_dir / "lifespan.log").read_text().splitlines()


@pytest.mark.parametrize("kind", ["sqlite", *(["reference"] if REFERENCE else [])])
def test_the_apps_lifespan_ends_when_serve_stops(
    kind: str,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    app_dir: Path,
) -> None:
    with _serve(kind, app_dir / "prefixed.json", request, tmp_path_factory) as served:
        lines = (app_dir / "lifespan.log").read_text().splitlines()
        assert f"started {served.pid}" in lines and f"stopped {served.pid}" not in lines
    assert f"stopped {served.pid}" in (app_dir / "lifespan.log").read_text().splitlines()


def test_a_worker_runs_the_apps_lifespan_around_it(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, app_dir: Path
) -> None:
    """As the reference's queue workers: what the lifespan sets up, the graphs may use."""
    backend = store_backend("sqlite", request, tmp_path_factory, "http")
    argv = [str(BIN), *backend.args, "worker", "--langgraph-config", str(app_dir / "prefixed.json")]
    log = tmp_path_factory.mktemp("logs") / "worker.log"
    with process(argv, backend, log, app_dir) as proc:
        deadline = time.monotonic() + 60
        while f"started {proc.pid}" not in (app_dir / "lifespan.log").read_text().splitlines():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
    assert f"stopped {proc.pid}" in (app_dir / "lifespan.log").read_text().splitlines()


# --- auth_first, enable_custom_route_auth, disable_meta, auth.cache -----------------------------


def test_the_apps_routes_need_a_user_and_see_it(authenticated: Served) -> None:
    with httpx.Client(base_url=authenticated.url, timeout=30) as http:
        refused = http.get("/custom/hello")
        assert refused.status_code == 401 and refused.json() == {"detail": "who are you?"}
        assert "x-stamp" not in refused.headers  # auth_first: refused before their middleware
        ada = {"Authorization": "Bearer token-ada"}
        hello = http.get("/custom/hello", headers=ada)
        assert hello.status_code == 200
        assert hello.json()["identity"] == "ada"
        assert hello.headers["x-saw-user"] == "true"  # their middleware runs after auth


def test_auth_first_puts_the_services_authentication_before_their_middleware(
    authenticated: Served,
) -> None:
    with httpx.Client(base_url=authenticated.url, timeout=30) as http:
        refused = http.post("/threads/search", json={})
        assert refused.status_code == 401 and "x-stamp" not in refused.headers
        ada = {"Authorization": "Bearer token-ada"}
        search = http.post("/threads/search", json={}, headers=ada)
        assert search.status_code == 200
        assert search.headers["x-stamp"] == "stamped" and search.headers["x-saw-user"] == "true"


def test_disable_meta_and_disable_assistants_leave_ok_alone(authenticated: Served) -> None:
    with httpx.Client(base_url=authenticated.url, timeout=30) as http:
        assert http.get("/ok").json()["ok"] is True  # no user needed, as the reference
        ada = {"Authorization": "Bearer token-ada"}
        for path in ("/info", "/metrics", "/openapi.json"):
            assert http.get(path, headers=ada).status_code == 404, path
    client = _client(url=authenticated.url, headers={"Authorization": "Bearer token-bob"})
    with pytest.raises(NotFoundError):
        client.assistants.search()
    assert client.runs.wait(None, "echo", input={})["seen"]  # runs are served


def test_auth_cache_keeps_a_user_for_its_ttl(authenticated: Served) -> None:
    """Ours keeps the user the handler returned, keyed by ``Authorization`` (each call of the
    handler is counted in the user's permissions); the reference keeps a JavaScript handler's
    users only, so it calls a Python one each time."""
    with httpx.Client(base_url=authenticated.url, timeout=30) as http:
        bob = {"Authorization": "Bearer token-bob"}
        scopes = [http.get("/custom/hello", headers=bob).json()["scopes"] for _ in range(3)]
        assert http.get("/custom/hello").status_code == 401  # a refusal is never kept
    if authenticated.kind == "reference":
        assert len({s[0] for s in scopes}) == 3
    else:
        assert scopes[0] == scopes[1] == scopes[2]


@pytest.mark.parametrize("kind", ["sqlite", *(["reference"] if REFERENCE else [])])
def test_by_default_their_middleware_runs_before_authentication(
    kind: str,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    app_dir: Path,
) -> None:
    """``middleware_order`` "middleware_first" (the default) with ``enable_custom_route_auth``:
    their middleware sees every request, refused ones too, and no user yet."""
    config = app_dir / "middleware_first.json"
    with (
        _serve(kind, config, request, tmp_path_factory) as served,
        httpx.Client(base_url=served.url, timeout=30) as http,
    ):
        for refused in (http.get("/custom/hello"), http.post("/threads/search", json={})):
            assert refused.status_code == 401
            assert refused.headers["x-stamp"] == "stamped"
        hello = http.get("/custom/hello", headers={"Authorization": "Bearer token-ada"})
        assert hello.status_code == 200 and hello.json()["identity"] == "ada"
        assert hello.headers["x-saw-user"] == "false"
