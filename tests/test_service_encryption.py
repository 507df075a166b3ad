"""``langgraph.json``'s ``encryption`` under ``durable-graph serve`` (SPEC §25.1, issue 48, D286),
with real ``serve`` processes and LangGraph's SDK on SQLite and PostgreSQL: the SDK's
``Encryption`` handlers seal checkpoint values, pending writes and checkpoint metadata, so the
tables hold ciphertext (read directly here: the plaintext marker is nowhere in them, the handlers'
ciphertext is), while every answer the SDK gets is the plaintext; a bad ``encryption`` stops
``serve`` naming it."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import uuid
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from langgraph_sdk import get_sync_client

from service_support import APP, BIN, Backend, env_of, process, serving, store_backend

MARKER = "PLAINTEXT-MARKER-7f3a"
"""Said by the user and put in the run's metadata: never stored as it is."""
REPLY = "I am a durable agent, streaming one token at a time"  # service_app/agent.py's

ENCRYPTION = """
import base64, json
from langgraph_sdk import Encryption

encryption = Encryption()


def _x(data: bytes) -> bytes:
    return bytes(c ^ 0x5A for c in data)


@encryption.encrypt.blob
async def encrypt_blob(ctx, blob):
    return b"ENC1" + _x(blob)


@encryption.decrypt.blob
async def decrypt_blob(ctx, blob):
    assert blob.startswith(b"ENC1"), blob[:8]
    return _x(blob[4:])


@encryption.encrypt.json
async def encrypt_json(ctx, data):
    return {k: "enc:" + base64.b64encode(_x(json.dumps(v).encode())).decode()
            for k, v in data.items()}


@encryption.decrypt.json
async def decrypt_json(ctx, data):
    return {k: json.loads(_x(base64.b64decode(v[4:])))
            if isinstance(v, str) and v.startswith("enc:") else v
            for k, v in data.items()}
"""


def _config(tmp: Path, **sections: Any) -> Path:
    """A langgraph.json serving the test app's graph, with ``sections``."""
    path = tmp / f"langgraph-{uuid.uuid4().hex[:8]}.json"
    given = {"dependencies": [str(APP)], "graphs": {"agent": f"{APP}/agent.py:graph"}}
    path.write_text(json.dumps({**given, **sections}), encoding="utf-8")
    return path


def _stored(backend: Backend) -> list[str]:
    """Every checkpoint's state and metadata, every pending write's value and every event's
    payload (the runs' streams), as stored."""
    queries = [
        "SELECT state, metadata FROM checkpoints",
        "SELECT value, '' FROM pending_writes",
        "SELECT payload, '' FROM events",
    ]
    rows: list[tuple[Any, ...]] = []
    if backend.name == "postgres":
        with psycopg.connect(backend.env["DURABLE_GRAPH_DSN"]) as conn:
            conn.execute(f'SET search_path TO "{backend.args[1]}"')
            for q in queries:
                q = q.replace("state, metadata", "state::text, metadata::text")
                rows += conn.execute(q.replace("SELECT value,", "SELECT value::text,"))
                rows = [tuple(str(v) for v in r) for r in rows]
    else:
        with sqlite3.connect(backend.args[1]) as conn:
            for q in queries:
                rows += conn.execute(q).fetchall()
    return [str(v) for row in rows for v in row]


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Backend:
    return store_backend(request.param, request, tmp_path_factory, "enc")


def test_checkpoints_are_stored_encrypted_and_read_back_plain(
    backend: Backend, tmp_path: Path
) -> None:
    (tmp_path / "enc.py").write_text(ENCRYPTION, encoding="utf-8")
    config = _config(tmp_path, encryption={"path": f"{tmp_path}/enc.py:encryption"})
    with serving(backend, tmp_path, config=config) as url:
        client: Any = get_sync_client(url=url)  # its answers are JSON, read as such
        thread = client.threads.create()
        said = {"messages": [{"role": "user", "content": f"hi {MARKER}"}]}
        out = client.runs.wait(
            thread["thread_id"], "agent", input=said, config={"metadata": {"note": MARKER}}
        )
        assert isinstance(out, dict)
        assert out["messages"][0]["content"] == f"hi {MARKER}"
        state = client.threads.get_state(thread["thread_id"])
        assert state["values"]["messages"][0]["content"] == f"hi {MARKER}"
        history = client.threads.get_history(thread["thread_id"])
        assert history[0]["values"] == state["values"]
        assert any(h["metadata"].get("note") == MARKER for h in history)
        assert {h["metadata"]["source"] for h in history} >= {"input", "loop"}
        # A metadata filter still finds the checkpoints (applied after decryption).
        found = client.threads.get_history(thread["thread_id"], metadata={"source": "input"})
        assert [h["metadata"]["source"] for h in found] == ["input"]
        # A second turn reads the first's state back through the handlers.
        again = client.runs.wait(thread["thread_id"], "agent", input=said)
        assert isinstance(again, dict)
        assert [m["content"] for m in again["messages"]][1:] == [REPLY, f"hi {MARKER}"]
    stored = _stored(backend)
    assert stored
    assert not [s for s in stored if MARKER in s]
    assert any("msgpack+sdk" in s for s in stored)  # the blob handler's ciphertext
    assert any('"note": "enc:' in s or '"note":"enc:' in s for s in stored)  # the JSON handler's


def test_streams_are_stored_encrypted_and_streamed_plain(backend: Backend, tmp_path: Path) -> None:
    """The run's stream in the thread's log is sealed too (D289): each reader opens it —
    ``runs.stream`` in every mode, ``threads.join_stream``, the protocol's thread stream."""
    (tmp_path / "enc.py").write_text(ENCRYPTION, encoding="utf-8")
    config = _config(tmp_path, encryption={"path": f"{tmp_path}/enc.py:encryption"})
    with serving(backend, tmp_path, config=config) as url:
        client: Any = get_sync_client(url=url)
        thread = client.threads.create()["thread_id"]
        said = {"messages": [{"role": "user", "content": f"hi {MARKER}"}]}
        modes = ["values", "updates", "messages-tuple", "custom", "events"]
        parts = list(client.runs.stream(thread, "agent", input=said, stream_mode=modes))
        shown = {p.event: json.dumps(p.data) for p in parts}
        assert MARKER in shown["values"] and MARKER in shown["events"]
        assert REPLY in shown["updates"] and "messages" in shown
        body = {"channels": ["values", "lifecycle"]}
        with httpx.stream(
            "POST", f"{url}/threads/{thread}/stream/events", json=body, timeout=30
        ) as response:
            seen = []
            for line in response.iter_lines():
                if line.startswith("data:"):
                    seen.append(json.loads(line.removeprefix("data:")))
                    if seen[-1]["method"] == "lifecycle" and "completed" in line:
                        break
        values = [e["params"]["data"] for e in seen if e["method"] == "values"]
        assert values and values[-1]["messages"][0]["content"] == f"hi {MARKER}"
    stored = _stored(backend)
    assert not [s for s in stored if MARKER in s or REPLY in s]
    assert any('"sealed": true' in s or '"sealed":true' in s for s in stored)


def test_a_worker_of_the_same_file_stores_encrypted_too(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """``worker --langgraph-config`` loads the same handlers: the run it takes is sealed."""
    backend = store_backend("sqlite", request, tmp_path_factory, "encw")
    (tmp_path / "enc.py").write_text(ENCRYPTION, encoding="utf-8")
    config = _config(tmp_path, encryption={"path": f"{tmp_path}/enc.py:encryption"})
    worker = [str(BIN), *backend.args, "worker", "--langgraph-config", str(config)]
    with (
        serving(backend, tmp_path, config=config, workers=0) as url,
        process([*worker, "--poll-interval", "100ms"], backend, tmp_path / "worker.log"),
    ):
        client: Any = get_sync_client(url=url)
        thread = client.threads.create()
        said = {"messages": [{"role": "user", "content": f"hi {MARKER}"}]}
        out = client.runs.wait(thread["thread_id"], "agent", input=said)
        assert [m["content"] for m in out["messages"]] == [f"hi {MARKER}", REPLY]
    stored = _stored(backend)
    assert any("msgpack+sdk" in s for s in stored)
    assert not [s for s in stored if MARKER in s]


@pytest.mark.parametrize(
    ("section", "named"),
    [
        ({"path": 3}, "encryption"),
        ({"path": "./missing.py:encryption"}, "encryption.path"),
        ({"path": "json:dumps"}, "encryption.path"),
        ({"path": "./enc.py:encryption", "cipher": "aes"}, "encryption.cipher"),
    ],
)
def test_a_bad_encryption_stops_serve_naming_it(
    tmp_path: Path, section: dict[str, Any], named: str
) -> None:
    (tmp_path / "enc.py").write_text(ENCRYPTION, encoding="utf-8")
    config = _config(tmp_path, encryption=section)
    db = tmp_path / "bad.db"
    argv = [str(BIN), "--sqlite", str(db), "serve", "--config", str(config)]
    done = subprocess.run(
        argv, env=env_of(Backend("sqlite", (), {})), capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    assert named in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not db.exists()  # refused before the store was opened
