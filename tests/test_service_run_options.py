"""Run options of the rest of the run API (SPEC §25.3, issue 48) through LangGraph's SDK, on
``serve`` over SQLite and PostgreSQL and — with ``DURABLE_GRAPH_LANGGRAPH_DEV`` set — on the
reference ``langgraph dev`` serving the same graph (`service_support.SERVED_KINDS`): each answer
here is the reference's.

``durability`` (D287): ``"exit"`` checkpoints only when the run stops, so its history is the
run's last checkpoint (after an earlier one of the thread's, if any); ``"sync"``, ``"async"``
and none keep every step; an interrupted ``exit`` run keeps its interrupt and resumes; the older
``checkpoint_during: false`` is ``exit``; an unknown value is 422 naming ``durability``.

The ``events`` stream mode (D288): ``astream_events``' events, each an ``events`` frame, the
same kinds in the same order as the reference's on the same graph, beside the other modes
asked."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client

from service_support import SERVED_KINDS, served_url

HI = {"messages": [{"role": "user", "content": "hi"}]}
REPLY = "I am a durable agent, streaming one token at a time"  # service_app/agent.py's


@pytest.fixture(scope="module", params=SERVED_KINDS)
def url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with served_url(request, tmp_path_factory, schema_prefix="opts") as served:
        yield served


def _history(client: Any, thread_id: str) -> list[tuple[Any, ...]]:
    """(source, step, next) of each checkpoint of the thread's history, newest first."""
    return [
        (h["metadata"]["source"], h["metadata"]["step"], h["next"])
        for h in client.threads.get_history(thread_id)
    ]


@pytest.mark.parametrize("durability", ["sync", "async", None])
def test_durability_sync_and_async_keep_every_step(url: str, durability: str | None) -> None:
    client: Any = get_sync_client(url=url)
    thread = client.threads.create()["thread_id"]
    out = client.runs.wait(thread, "agent", input=HI, durability=durability)
    assert len(out["messages"]) == 2
    assert _history(client, thread) == [
        ("loop", 1, []),
        ("loop", 0, ["chat"]),
        ("input", -1, ["__start__"]),
    ]


def test_durability_exit_checkpoints_only_when_the_run_stops(url: str) -> None:
    client: Any = get_sync_client(url=url)
    thread = client.threads.create()["thread_id"]
    out = client.runs.wait(thread, "agent", input=HI, durability="exit")
    assert [m["type"] for m in out["messages"]] == ["human", "ai"]
    assert _history(client, thread) == [("loop", 1, [])]
    state = client.threads.get_state(thread)
    assert state["values"] == {"messages": out["messages"]}
    assert state["parent_checkpoint"] is None  # nothing before it was written
    again = client.runs.wait(thread, "agent", input=HI, durability="exit")
    assert len(again["messages"]) >= 3
    assert _history(client, thread) == [("loop", 4, []), ("loop", 1, [])]


def test_durability_exit_keeps_an_interrupt_and_resumes(url: str) -> None:
    client: Any = get_sync_client(url=url)
    thread = client.threads.create()["thread_id"]
    asked = {"messages": [{"role": "user", "content": "ask me"}]}
    client.runs.wait(thread, "agent", input=asked, durability="exit")
    assert _history(client, thread) == [("loop", 0, ["ask"])]
    state = client.threads.get_state(thread)
    assert [i["value"] for t in state["tasks"] for i in t["interrupts"]] == ["what is your name?"]
    out = client.runs.wait(thread, "agent", command={"resume": "Ada"}, durability="exit")
    assert len(out["messages"]) == 2
    assert _history(client, thread) == [("loop", 1, []), ("loop", 0, ["ask"])]


def test_durability_exit_streams_the_same_events(url: str) -> None:
    client: Any = get_sync_client(url=url)
    thread = client.threads.create()["thread_id"]
    parts = client.runs.stream(
        thread, "agent", input=HI, stream_mode=["values", "updates"], durability="exit"
    )
    assert [p.event for p in parts] == ["metadata", "values", "updates", "values"]
    assert _history(client, thread) == [("loop", 1, [])]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the SDK says so; clients send it
def test_checkpoint_during_false_is_durability_exit(url: str) -> None:
    client: Any = get_sync_client(url=url)
    thread = client.threads.create()["thread_id"]
    client.runs.wait(thread, "agent", input=HI, checkpoint_during=False)
    assert _history(client, thread) == [("loop", 1, [])]


def test_an_unknown_durability_is_refused_naming_it(url: str) -> None:
    client: Any = get_sync_client(url=url)
    thread = client.threads.create()["thread_id"]
    with pytest.raises(httpx.HTTPStatusError) as refused:
        client.runs.wait(thread, "agent", input=HI, durability="never")
    assert refused.value.response.status_code == 422
    assert "durability" in refused.value.response.text
    assert client.runs.list(thread) == []


def _kinds(parts: list[Any]) -> list[tuple[str, ...]]:
    """Each frame's event (an ``events`` frame's own event and name), repeats collapsed."""
    kinds: list[tuple[str, ...]] = []
    for part in parts:
        kind = (part.data["event"], part.data["name"]) if part.event == "events" else (part.event,)
        if not kinds or kinds[-1] != kind:
            kinds.append(kind)
    return kinds


def test_the_events_mode_streams_astream_events(url: str) -> None:
    client: Any = get_sync_client(url=url)
    thread = client.threads.create()["thread_id"]
    parts = list(client.runs.stream(thread, "agent", input=HI, stream_mode="events"))
    assert _kinds(parts) == [
        ("metadata",),
        ("on_chain_start", "agent"),
        ("on_chain_start", "chat"),
        ("on_chat_model_start", "GenericFakeChatModel"),
        ("on_chat_model_stream", "GenericFakeChatModel"),
        ("on_chat_model_end", "GenericFakeChatModel"),
        ("on_chain_stream", "chat"),
        ("on_chain_end", "chat"),
        ("on_chain_end", "agent"),
    ]
    events = [p.data for p in parts if p.event == "events"]
    assert {"data", "event", "metadata", "name", "parent_ids", "run_id", "tags"} <= set(events[0])
    assert events[0]["parent_ids"] == [] and events[1]["parent_ids"] == [events[0]["run_id"]]
    tokens = [e["data"]["chunk"] for e in events if e["event"] == "on_chat_model_stream"]
    assert "".join(t["content"] for t in tokens) == REPLY
    assert tokens[0]["type"] == "AIMessageChunk"
    end = events[-1]["data"]["output"]["messages"]
    assert [(m["type"], m["content"]) for m in end] == [("human", "hi"), ("ai", REPLY)]
    assert client.threads.get_state(thread)["values"]["messages"][1]["content"] == REPLY


def test_the_events_mode_streams_beside_the_other_modes(url: str) -> None:
    client: Any = get_sync_client(url=url)
    thread = client.threads.create()["thread_id"]
    asked = ["events", "values", "updates"]
    parts = list(client.runs.stream(thread, "agent", input=HI, stream_mode=asked))
    frames = [p.event for p in parts]
    assert frames.count("values") == 2 and frames.count("updates") == 1
    assert parts[-1].event in ("events", "values")
    kinds = [k for k in _kinds(parts) if len(k) == 2]
    assert kinds[0] == ("on_chain_start", "agent") and kinds[-1] == ("on_chain_end", "agent")
    assert (
        parts[[p.event for p in parts].index("updates")].data["chat"]["messages"][0]["content"]
        == REPLY
    )
