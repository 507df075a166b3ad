"""A thread's identity is not its id alone (issue 46 items 1, 4, 5, 11; D241-D245), through
``durable-graph serve`` on SQLite and PostgreSQL with LangGraph's SDK and two users of one
``auth`` handler (tests/service_auth/auth.py): a deleted thread's crons and runs end with it and
never reach the next thread of its id; a cron's run is applied as ``runs.create``'s; a user's
crons are capped. The server allows per-second crons (``--cron-seconds``) so slots come fast."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import ConflictError, NotFoundError

from durable_graph import Commit
from durable_graph.langgraph import DurableSaver, codec
from durable_graph.langgraph.core import LANGGRAPH_NEXT
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.service.records import THREAD_EFFECT, THREAD_SOURCE
from durable_graph.service.threads import HOLDER, SEARCH_SCAN, _owner_namespace
from durable_graph.sqlite import SqliteCheckpointer
from service_support import Backend, served_url, serving, store_backend

CONFIG = Path(__file__).parent / "service_auth" / "langgraph.json"
CAP = 3


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    extra = ("--cron-seconds", "--max-crons-per-user", str(CAP))
    with served_url(request, tmp_path_factory, CONFIG, schema_prefix="ten", extra=extra) as u:
        yield u


def _client(url: str, token: str) -> Any:
    return get_sync_client(url=url, headers={"Authorization": f"Bearer {token}"})


def _say(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def _until(check: Callable[[], bool], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def _texts(client: Any, thread_id: str) -> list[str]:
    values = client.threads.get_state(thread_id)["values"] or {}
    return [m["content"] for m in values.get("messages", [])]


def test_a_deleted_threads_cron_ends_and_never_fires_into_the_next_thread_of_its_id(
    url: str,
) -> None:
    """Item 1: Ada's per-second cron on her thread X; she deletes X: the cron is gone with it,
    nothing re-creates X (Bob can take the id), and Bob's X gets none of her runs."""
    ada, bob = _client(url, "token-ada"), _client(url, "token-bob")
    thread_id = str(uuid.uuid4())
    ada.threads.create(thread_id=thread_id)
    cron = ada.crons.create_for_thread(
        thread_id, "agent", schedule="* * * * * *", input=_say("from-cron")
    )
    _until(lambda: len(ada.runs.list(thread_id)) >= 1)
    ada.threads.delete(thread_id)
    assert ada.crons.search(thread_id=thread_id) == []
    with pytest.raises(NotFoundError):
        ada.crons.delete(cron["cron_id"])
    time.sleep(3)  # three slots: none may re-create X, ownerless
    made = bob.threads.create(thread_id=thread_id)  # 409 if a slot had re-created it
    assert made["metadata"]["owner"] == "bob"
    bob.runs.wait(thread_id, "agent", input=_say("bob-secret"))
    time.sleep(3)  # three more slots: none may land on Bob's X
    assert len(bob.runs.list(thread_id)) == 1
    texts = _texts(bob, thread_id)
    assert texts[0] == "bob-secret" and "from-cron" not in texts


def test_an_old_run_of_a_deleted_thread_is_no_run_of_the_next_thread_of_its_id(
    url: str,
) -> None:
    """Item 4: Ada's runs on X (one ended, one still queued) outlive nothing: once X is
    deleted and Bob makes his own X, her ``runs.get`` / ``runs.join`` / ``runs.list`` of them
    are 404, never Bob's state; his runs are his only."""
    ada, bob = _client(url, "token-ada"), _client(url, "token-bob")
    thread_id = str(uuid.uuid4())
    ada.threads.create(thread_id=thread_id)
    ended = ada.runs.create(thread_id, "agent", input=_say("slow 3"))
    _until(lambda: ada.runs.get(thread_id, ended["run_id"])["status"] == "running")
    ada.runs.cancel(thread_id, ended["run_id"])
    queued = ada.runs.create(thread_id, "agent", input=_say("hi"))
    ada.threads.delete(thread_id)
    bob.threads.create(thread_id=thread_id)
    bob_run = bob.runs.create(thread_id, "agent", input=_say("bob-secret"))
    bob.runs.join(thread_id, bob_run["run_id"])
    for run in (ended, queued):
        with pytest.raises(NotFoundError):
            ada.runs.get(thread_id, run["run_id"])
        with pytest.raises(httpx.HTTPStatusError) as joined:  # the SDK's join maps no errors
            ada.runs.join(thread_id, run["run_id"])
        assert joined.value.response.status_code == 404
    with pytest.raises(NotFoundError):
        ada.runs.list(thread_id)
    assert [r["run_id"] for r in bob.runs.list(thread_id)] == [bob_run["run_id"]]
    assert bob.threads.get(thread_id)["status"] == "idle"
    assert _texts(bob, thread_id)[0] == "bob-secret"


def test_a_crons_run_applies_its_input_and_interrupts_as_runs_create_does(url: str) -> None:
    """Item 5: judged by the thread's state, not by the run's status: the cron's input is the
    graph's input, and its ``interrupt_before`` stops the run before ``chat``."""
    ada = _client(url, "token-ada")
    thread_id = ada.threads.create()["thread_id"]
    cron = ada.crons.create_for_thread(
        thread_id,
        "agent",
        schedule="* * * * * *",
        input=_say("from-cron"),
        interrupt_before=["chat"],
        config={"recursion_limit": 10},
        metadata={"why": "item 5"},
    )
    try:
        _until(lambda: len(ada.runs.list(thread_id)) >= 1)
    finally:
        ada.crons.delete(cron["cron_id"])
    first = ada.runs.list(thread_id, limit=100)[-1]
    ada.runs.join(thread_id, first["run_id"])
    state = ada.threads.get_state(thread_id)
    assert state["values"]["messages"][0]["content"] == "from-cron"
    assert state["next"] == ["chat"]  # interrupted before it, as asked


def test_a_cron_runs_each_slot_once_on_its_thread(url: str) -> None:
    """Every second (``--cron-seconds``: the store's six-field cron, SPEC §15; moved here from
    tests/test_service_crons.py, whose server takes five fields): the slots become runs of the
    thread that finish as any run does (each slot at most once: the schedule contract suite)."""
    ada = _client(url, "token-ada")
    thread_id = ada.threads.create()["thread_id"]
    cron = ada.crons.create_for_thread(thread_id, "agent", schedule="* * * * * *", input=_say("hi"))
    try:
        _until(lambda: len(ada.runs.list(thread_id)) >= 2)
    finally:
        ada.crons.delete(cron["cron_id"])
    runs = ada.runs.list(thread_id, limit=100)
    for run in runs:
        ada.runs.join(thread_id, run["run_id"])
    statuses = {ada.runs.get(thread_id, r["run_id"])["status"] for r in runs}
    assert statuses == {"success"}


def test_a_users_crons_are_capped_and_the_refusal_names_the_cap(url: str) -> None:
    """Item 11: at most ``--max-crons-per-user`` crons a user; past it 409 naming the cap;
    another user's count is their own."""
    ada, bob = _client(url, "token-ada"), _client(url, "token-bob")
    yearly = "0 0 1 1 *"
    made = []
    try:
        while True:
            try:
                made.append(ada.crons.create("agent", schedule=yearly, input=_say("hi")))
            except ConflictError as exc:
                assert "max-crons-per-user" in str(exc.response.text)
                break
            assert len(made) <= CAP, "the cap did not hold"
        assert ada.crons.count() == CAP
        mine = bob.crons.create("agent", schedule=yearly, input=_say("hi"))
        bob.crons.delete(mine["cron_id"])
    finally:
        for cron in made:
            ada.crons.delete(cron["cron_id"])


def _threads_of_another_user(backend: Backend, count: int) -> None:
    """``count`` threads of Bob's whose ids sort before any other, made straight in the store
    as the service makes them (a hidden first checkpoint, the record naming their owner; then
    copies of that thread, one store call each), and indexed under him as the service does."""
    if backend.name == "sqlite":
        opened: Any = SqliteCheckpointer.open(backend.args[1])
    else:
        config = PostgresConfig(schema=backend.args[1])
        opened = PostgresCheckpointer.open(backend.env["DURABLE_GRAPH_DSN"], config)
    with opened as store:
        checkpoint = empty_checkpoint()
        state = codec.encode_checkpoint(DurableSaver(store).serde, checkpoint, None)
        first = {"source": THREAD_SOURCE, "step": -2, "parents": {}}
        claim = store.claim("0-bob", HOLDER)
        store.commit(
            claim, Commit(checkpoint["id"], None, HOLDER, state, first, next=LANGGRAPH_NEXT)
        )
        store.record_effect(claim, THREAD_EFFECT, {"metadata": {"owner": "bob"}, "owner": "bob"})
        store.release_claim(claim)
        for n in range(count):
            assert store.copy_thread("0-bob", f"0-bob-{n:06d}")
        # Bob's index holds a few: enough for his search, which reads only his own.
        store.run_queue.put_item(_owner_namespace("bob"), "0-bob", {})


@pytest.mark.slow  # 10,001 threads of another user's, on each backend
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_users_search_is_exact_however_many_threads_another_user_has(
    kind: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Item 8: Bob has more threads than a search reads (`SEARCH_SCAN`), all sorting before
    Ada's; her search and count still find exactly hers (the store lists her threads only,
    where it listed every user's in id order and the service filtered the first 10,000)."""
    backend = store_backend(kind, request, tmp_path_factory, "srch")
    logs = tmp_path_factory.mktemp("logs")
    with serving(backend, logs, config=CONFIG) as served:
        ada, bob = _client(served, "token-ada"), _client(served, "token-bob")
        ada.threads.search()  # the store's threads of before the index, indexed once
        _threads_of_another_user(backend, SEARCH_SCAN + 1)
        mine = ada.threads.create(thread_id="z-ada", metadata={"k": 1})
        assert [t["thread_id"] for t in ada.threads.search()] == ["z-ada"]
        assert [t["thread_id"] for t in ada.threads.search(metadata={"k": 1})] == ["z-ada"]
        assert ada.threads.count() == 1
        assert mine["metadata"]["owner"] == "ada"
        with pytest.raises(NotFoundError):
            bob.threads.get("z-ada")
