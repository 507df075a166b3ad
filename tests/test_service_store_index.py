"""Semantic search through ``durable-graph serve`` with ``langgraph.json``'s ``store.index``
(SPEC §25.1; D296-D299), with ``langgraph-sdk``'s own client, on SQLite and PostgreSQL and on the
reference server with the same file: ``PUT /store/items`` embeds the item's fields with the
user's ``embed`` (``index``: false, or other fields), ``POST /store/items/search`` with a
``query`` answers the items by cosine similarity with their ``score``, and a graph node's
``store`` searches the same way."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import UnprocessableEntityError

from service_support import SERVED_KINDS, served_url

HERE = Path(__file__).parent / "service_store_index"
CONFIG = HERE / "langgraph.json"
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _cosine(a: str, b: str) -> float:
    x = [float(a.count(c)) for c in LETTERS]
    y = [float(b.count(c)) for c in LETTERS]
    return sum(p * q for p, q in zip(x, y, strict=True)) / (math.hypot(*x) * math.hypot(*y))


@pytest.fixture(scope="module", params=SERVED_KINDS)
def url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with served_url(request, tmp_path_factory, CONFIG, schema_prefix="vectors") as served:
        yield served


def test_a_query_answers_items_by_cosine_with_their_scores(url: str) -> None:
    client: Any = get_sync_client(url=url)
    ns = ["docs", uuid.uuid4().hex]
    client.store.put_item(ns, "cab", {"text": "cabby", "title": "zzz"})
    client.store.put_item(ns, "zoo", {"text": "zebra", "title": "abc"})
    client.store.put_item(ns, "titled", {"text": "zzz", "title": "abc"}, index=["title"])
    client.store.put_item(ns, "plain", {"text": "abc"}, index=False)
    found = client.store.search_items(ns, query="abc", limit=10)["items"]
    assert [i["key"] for i in found] == ["titled", "cab", "zoo", "plain"]
    scores = [i["score"] for i in found]
    assert scores[:3] == pytest.approx([1.0, _cosine("cabby", "abc"), _cosine("zebra", "abc")])
    assert scores[3] is None
    assert found[1]["value"] == {"text": "cabby", "title": "zzz"}
    page = client.store.search_items(ns, query="abc", limit=2, offset=1)["items"]
    assert [i["key"] for i in page] == ["cab", "zoo"]
    filtered = client.store.search_items(ns, query="abc", filter={"title": "abc"})["items"]
    assert [i["key"] for i in filtered] == ["titled", "zoo"]
    unranked = client.store.search_items(ns, limit=10)["items"]
    assert {i["key"] for i in unranked} == {"cab", "zoo", "titled", "plain"}
    assert all(i["score"] is None for i in unranked)


def test_a_put_again_is_embedded_again(url: str) -> None:
    client: Any = get_sync_client(url=url)
    ns = ["docs", uuid.uuid4().hex]
    client.store.put_item(ns, "a", {"text": "xyz"})
    client.store.put_item(ns, "b", {"text": "qqq"})
    client.store.put_item(ns, "a", {"text": "qqqq"})
    found = client.store.search_items(ns, query="q")["items"]
    assert [i["score"] for i in found] == pytest.approx([1.0, 1.0])
    assert {i["key"] for i in found} == {"a", "b"}


def test_a_graph_nodes_store_searches_by_meaning(url: str) -> None:
    client: Any = get_sync_client(url=url)
    user = uuid.uuid4().hex
    client.store.put_item(["notes", user], "x", {"text": "zebra"})
    client.store.put_item(["notes", user], "y", {"text": "banana"})
    done = client.runs.wait(None, "recall", input={"user": user, "said": "nab", "query": "nab"})
    assert [text for text, _ in done["found"]] == ["banana", "zebra"]
    assert done["found"][0][1] == pytest.approx(_cosine("banana", "nab"))
    found = client.store.search_items(["notes", user], query="nab", limit=1)["items"]
    assert [i["value"] for i in found] == [{"text": "nab"}]


def test_a_bad_index_or_query_is_refused_by_name(url: str, request: pytest.FixtureRequest) -> None:
    if request.node.callspec.params["url"] == "reference":
        pytest.skip("ours only: what the reference answers a bad type is its schema's word")
    client: Any = get_sync_client(url=url)
    ns = [uuid.uuid4().hex]
    with pytest.raises(UnprocessableEntityError, match="index"):
        client.http.put(
            "/store/items", json={"namespace": ns, "key": "k", "value": {}, "index": [1]}
        )
    with pytest.raises(UnprocessableEntityError, match="query"):
        client.http.post("/store/items/search", json={"namespace_prefix": ns, "query": 3})
    assert client.store.get_item(ns, "k") is None
