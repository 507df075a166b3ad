"""Users and tenants (SPEC §20.4) through LangGraph's SDK, against ``durable-graph serve`` on
SQLite and PostgreSQL and, with ``DURABLE_GRAPH_LANGGRAPH_DEV``, against ``langgraph dev`` with
the same ``Auth`` (tests/service_auth/auth.py): two users, each with their own threads and runs;
the other's are 404, as unknown ones; no user is 401. Here the user is the store's tenant too,
so what the handlers do not filter (stored assistants, crons) is the user's own as well."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import ConflictError, NotFoundError, PermissionDeniedError

from service_support import SERVED_KINDS, served_url

CONFIG = Path(__file__).parent / "service_auth" / "langgraph.json"
HI = {"messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture(scope="module", params=SERVED_KINDS)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    with served_url(request, tmp_path_factory, CONFIG) as url:
        yield url, request.param


def _client(url: str, token: str) -> Any:
    return get_sync_client(url=url, headers={"Authorization": f"Bearer {token}"})


def test_each_user_sees_only_their_own_threads_and_runs(served: tuple[str, str]) -> None:
    url, _ = served
    ada, bob = _client(url, "token-ada"), _client(url, "token-bob")
    mark = uuid.uuid4().hex
    thread = ada.threads.create(metadata={"mark": mark})
    thread_id = thread["thread_id"]
    assert thread["metadata"]["owner"] == "ada"  # as the handler marked it
    run = ada.runs.create(thread_id, "agent", input=HI)
    assert ada.runs.join(thread_id, run["run_id"])["messages"][-1]["type"] == "ai"
    assert [t["thread_id"] for t in ada.threads.search(metadata={"mark": mark})] == [thread_id]

    # Bob: every way in is 404, as for a thread that does not exist.
    assert bob.threads.search(metadata={"mark": mark}) == []
    calls: list[Callable[[], Any]] = [
        lambda: bob.threads.get(thread_id),
        lambda: bob.threads.get_state(thread_id),
        lambda: bob.threads.get_history(thread_id),
        lambda: bob.runs.list(thread_id),
        lambda: bob.runs.get(thread_id, run["run_id"]),
        lambda: bob.runs.create(thread_id, "agent", input=HI),
        lambda: bob.threads.update(thread_id, metadata={"x": 1}),
        lambda: bob.threads.delete(thread_id),
    ]
    for call in calls:
        with pytest.raises(NotFoundError):
            call()
    # His own work goes on beside hers.
    own = bob.threads.create(metadata={"mark": mark})
    assert bob.runs.wait(own["thread_id"], "agent", input=HI)["messages"][-1]["type"] == "ai"
    assert [t["thread_id"] for t in bob.threads.search(metadata={"mark": mark})] == [
        own["thread_id"]
    ]
    # Ada's thread is as she left it.
    assert len(ada.threads.get_state(thread_id)["values"]["messages"]) == 2


def test_no_user_is_401_and_a_refusing_handler_is_403(served: tuple[str, str]) -> None:
    url, _ = served
    with httpx.Client(base_url=url, timeout=30) as http:
        assert http.post("/threads", json={}).status_code == 401
        bad = {"Authorization": "Bearer token-eve"}
        assert http.post("/threads/search", json={}, headers=bad).status_code == 401
    bob = _client(url, "token-bob")
    made = bob.assistants.create("agent", name="bob's")
    with pytest.raises(PermissionDeniedError):
        bob.assistants.delete(made["assistant_id"])
    assert bob.assistants.get(made["assistant_id"])["name"] == "bob's"


def test_stored_assistants_crons_and_items_are_their_users_own(served: tuple[str, str]) -> None:
    url, target = served
    ada, bob = _client(url, "token-ada"), _client(url, "token-bob")
    label = uuid.uuid4().hex
    bob.store.put_item(["notes", label], "k", {"secret": "bob's"})
    assert bob.store.get_item(["notes", label], "k")["value"] == {"secret": "bob's"}
    if target != "reference":  # the reference scopes only what the handlers filter
        assert ada.store.get_item(["notes", label], "k") is None
        assert ada.store.search_items(["notes", label])["items"] == []
    made = bob.assistants.create("agent", metadata={"label": label})
    assert [a["assistant_id"] for a in bob.assistants.search(metadata={"label": label})] == [
        made["assistant_id"]
    ]
    if target == "reference":  # it scopes only what the handlers filter: Ada sees Bob's
        assert ada.assistants.get(made["assistant_id"])["metadata"] == {"label": label}
        return
    assert ada.assistants.search(metadata={"label": label}) == []
    with pytest.raises(NotFoundError):
        ada.assistants.get(made["assistant_id"])
    thread_id = bob.threads.create()["thread_id"]
    cron = bob.crons.create_for_thread(thread_id, "agent", schedule="0 0 1 1 *", input=HI)
    assert [c["cron_id"] for c in bob.crons.search(thread_id=thread_id)] == [cron["cron_id"]]
    assert ada.crons.search(thread_id=thread_id) == []
    with pytest.raises(NotFoundError):
        ada.crons.delete(cron["cron_id"])
    bob.crons.delete(cron["cron_id"])


def test_another_users_thread_id_is_404_to_read_and_409_to_create_as_the_reference(
    served: tuple[str, str],
) -> None:
    """Issue 46 item 8, D244: thread ids are the clients' and one namespace for every user, in
    the reference as here: another user's thread is 404 to every read, and 409 to create
    (``if_exists`` "raise" or "do_nothing" alike, never the other's thread); once its owner
    deletes it, the id is anyone's, with nothing of the earlier thread."""
    url, _ = served
    ada, bob = _client(url, "token-ada"), _client(url, "token-bob")
    thread_id = str(uuid.uuid4())
    ada.threads.create(thread_id=thread_id, metadata={"secret": "ada's"})
    with pytest.raises(NotFoundError):
        bob.threads.get(thread_id)
    for if_exists in ("raise", "do_nothing"):
        with pytest.raises(ConflictError):
            bob.threads.create(thread_id=thread_id, if_exists=if_exists)
    ada.threads.delete(thread_id)
    made = bob.threads.create(thread_id=thread_id)
    assert "secret" not in made["metadata"] and made["metadata"]["owner"] == "bob"
