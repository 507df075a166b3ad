"""Graph factories under ``durable-graph serve`` (issue 35), against ``langgraph dev`` too: a
function ``langgraph.json`` names is called for each run with the run's config and a
``ServerRuntime`` (``threads.create_run``, for execution, with the graphs' store), as LangGraph
Server calls it; the run's ``configurable`` reaches it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_sync_client

from service_support import SERVED_KINDS, served_url

CONFIG = Path(__file__).parent / "service_factory" / "langgraph.json"


@pytest.fixture(scope="module", params=SERVED_KINDS)
def url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with served_url(request, tmp_path_factory, CONFIG) as served:
        yield served


def test_a_factory_gets_the_runs_config_and_an_execution_runtime(url: str) -> None:
    client: Any = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    values = client.runs.wait(thread_id, "with_runtime", input={"text": "hi"})
    assert values["text"] == "hi echoed"
    assert values["access"] == "threads.create_run" and values["execution"] is True
    assert values["has_store"] is True  # the graphs' store, as the reference gives it
    again = client.runs.wait(
        thread_id, "with_runtime", input={"text": "hi"}, config={"configurable": {"suffix": "!"}}
    )
    assert again["text"] == "hi!"
    assert client.threads.get_state(thread_id)["values"]["text"] == "hi!"


def test_a_factory_of_the_config_alone(url: str) -> None:
    client: Any = get_sync_client(url=url)
    values = client.runs.wait(
        None, "with_config", input={"text": "x"}, config={"configurable": {"suffix": "?"}}
    )
    assert values == {"text": "x?"}
    schemas = client.assistants.get_schemas(
        client.assistants.search(graph_id="with_config")[0]["assistant_id"]
    )
    assert "text" in schemas["state_schema"]["properties"]


def test_an_assistants_subgraphs_and_their_schemas(url: str) -> None:
    """``/assistants/{id}/subgraphs`` (SPEC §25.3), as the reference answers it."""
    client: Any = get_sync_client(url=url)
    assistant_id = client.assistants.search(graph_id="nested")[0]["assistant_id"]
    subgraphs = client.assistants.get_subgraphs(assistant_id)
    assert list(subgraphs) == ["inner"], subgraphs
    assert set(subgraphs["inner"]) >= {"input_schema", "output_schema", "state_schema"}
    assert "seen" in subgraphs["inner"]["state_schema"]["properties"]
    assert client.assistants.get_subgraphs(assistant_id, namespace="inner") == {
        "inner": subgraphs["inner"]
    }
    assert client.assistants.get_subgraphs(assistant_id, namespace="nowhere") == {}


def test_a_subgraphs_updates_stream_with_its_namespace_before_its_parents(url: str) -> None:
    """``stream_subgraphs`` with ``updates`` (issue 48: under the async worker a subgraph's step
    chunks never reached the log, since LangGraph's ``astream`` hands them to the caller's
    queue only): the inner step's update under ``updates|inner:<task>``, then the parent's."""
    client: Any = get_sync_client(url=url)
    thread_id = client.threads.create()["thread_id"]
    parts = client.runs.stream(
        thread_id, "nested", input={"text": "x"}, stream_mode="updates", stream_subgraphs=True
    )
    seen = [(p.event, p.data) for p in parts if p.event != "metadata"]
    assert len(seen) == 2, seen
    assert seen[0][0].startswith("updates|inner:") and seen[0][1] == {"count": {"seen": 1}}
    assert seen[1] == ("updates", {"inner": {"text": "x", "seen": 1}})
