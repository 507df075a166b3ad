"""The store API through ``durable-graph serve`` with ``langgraph-sdk``'s own client (SPEC §20.3
"the store"; D203): put, get, search, list namespaces and delete as the reference answers them,
bad requests refused by name, and a graph node that reads and writes its ``store`` — the same
items the client sees."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import UnprocessableEntityError

from service_support import SERVED_KINDS, served_url

CONFIG = Path(__file__).parent / "service_store" / "langgraph.json"


@pytest.fixture(scope="module", params=SERVED_KINDS)
def url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with served_url(request, tmp_path_factory, CONFIG, schema_prefix="items") as served:
        yield served


def test_items_are_put_got_searched_listed_and_deleted(url: str) -> None:
    client: Any = get_sync_client(url=url)
    user = uuid.uuid4().hex
    ns = ["docs", user]
    client.store.put_item(ns, "a", {"title": "A", "n": 1})
    client.store.put_item(ns, "b", {"title": "B", "n": 2})
    client.store.put_item(["docs", user, "deep"], "c", {"title": "C", "n": 3})
    got = client.store.get_item(ns, "a")
    assert got["namespace"] == ns and got["key"] == "a" and got["value"] == {"title": "A", "n": 1}
    assert got["created_at"] and got["updated_at"]
    assert client.store.get_item(ns, "missing") is None
    found = client.store.search_items(ns, filter={"n": 2})
    assert [i["key"] for i in found["items"]] == ["b"]
    everything = client.store.search_items(ns, limit=10)
    assert {i["key"] for i in everything["items"]} == {"a", "b", "c"}
    page = client.store.search_items(ns, limit=2, offset=0)
    assert len(page["items"]) == 2
    listed = client.store.list_namespaces(prefix=["docs", user])
    assert listed["namespaces"] == [["docs", user], ["docs", user, "deep"]]
    assert client.store.list_namespaces(prefix=["docs", user], max_depth=2)["namespaces"] == [
        ["docs", user]
    ]
    client.store.delete_item(ns, "a")
    assert client.store.get_item(ns, "a") is None
    client.store.put_item(ns, "b", {"title": "B2"})
    got = client.store.get_item(ns, "b")
    assert got["value"] == {"title": "B2"}


def test_a_bad_store_request_is_refused_by_name_and_writes_nothing(url: str) -> None:
    client: Any = get_sync_client(url=url)
    user = uuid.uuid4().hex
    with pytest.raises(UnprocessableEntityError):
        client.http.put("/store/items", json={"namespace": ["a", ""], "key": "k", "value": {}})
    with pytest.raises(UnprocessableEntityError):
        client.http.put("/store/items", json={"namespace": [user], "key": "k", "value": [1]})
    assert client.store.search_items([user])["items"] == []


def test_semantic_search_is_refused_by_name(url: str, request: pytest.FixtureRequest) -> None:
    if request.node.callspec.params["url"] == "reference":
        pytest.skip("ours only: the reference has no index configured and ignores it")
    client: Any = get_sync_client(url=url)
    user = uuid.uuid4().hex
    with pytest.raises(UnprocessableEntityError, match="semantic search"):
        client.store.put_item([user], "k", {"text": "x"}, index=["text"])
    assert client.store.get_item([user], "k") is None


def test_a_graph_node_reads_and_writes_the_same_items(url: str) -> None:
    client: Any = get_sync_client(url=url)
    user = uuid.uuid4().hex
    client.store.put_item(["memories", user], "seed", {"said": "from the client"})
    first = client.runs.wait(None, "memory", input={"user": user, "said": "hello"})
    assert first["known"] == 1 and first["found"] == ["from the client"]
    second = client.runs.wait(None, "memory", input={"user": user, "said": "again"})
    assert second["known"] == 2 and second["found"] == ["from the client", "hello"]
    said = {i["value"]["said"] for i in client.store.search_items(["memories", user])["items"]}
    assert said == {"from the client", "hello", "again"}
