"""`DurableStore` / `AsyncDurableStore` with LangGraph's ``index`` (SPEC §25.1 store.index;
D296-D299), on memory, SQLite and PostgreSQL: the configured ``embed`` embeds a put's fields,
the store keeps the vectors and ranks a ``query`` by cosine. LangGraph's own semantic search
tests run against these in ``make langgraph-store-suite``; these are the parts they do not
show."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import PutOp, SearchOp

from durable_graph.aio import AsyncInMemoryCheckpointer, AsyncSqliteCheckpointer
from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import ValidationError
from durable_graph.langgraph.store import AsyncDurableStore, DurableStore
from durable_graph.memory.store import InMemoryCheckpointer
from durable_graph.testkit.harness import ClockControl

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def embed(texts: list[str]) -> list[list[float]]:
    """Letter counts: a plain function, as a user's ``./embed.py:embed`` may be."""
    return [[float(t.lower().count(c)) for c in LETTERS] for t in texts]


CALLS: list[list[str]] = []


def counting_embed(texts: list[str]) -> list[list[float]]:
    CALLS.append(list(texts))
    return embed(texts)


def _index(**more: Any) -> dict[str, Any]:
    return {"dims": len(LETTERS), "embed": embed, **more}


def test_a_query_ranks_items_by_cosine_of_their_fields_with_scores(
    clocked_store: tuple[Checkpointer, ClockControl],
) -> None:
    store, _ = clocked_store
    items = DurableStore(store.run_queue, index=_index(fields=["title", "body"]))
    items.put(("docs",), "zoo", {"title": "zzz", "body": "zebra"})
    items.put(("docs",), "abc", {"title": "abc", "body": "cab"})
    items.put(("docs",), "plain", {"title": "abc"}, index=False)
    found = items.search(("docs",), query="bca")
    assert [i.key for i in found] == ["abc", "zoo", "plain"]
    assert found[0].score == pytest.approx(1.0)
    z, q = embed(["zebra"])[0], embed(["bca"])[0]
    cos = sum(a * b for a, b in zip(z, q, strict=True)) / (math.hypot(*z) * math.hypot(*q))
    assert found[1].score == pytest.approx(cos)
    assert found[2].score is None
    assert all(i.score is None for i in items.search(("docs",)))  # no query: no ranking


def test_a_put_embeds_its_own_fields_and_a_put_without_index_embeds_none(
    clocked_store: tuple[Checkpointer, ClockControl],
) -> None:
    store, _ = clocked_store
    CALLS.clear()
    items = DurableStore(store.run_queue, index=_index(embed=counting_embed, fields=["a"]))
    items.put(("n",), "k", {"a": "xx", "b": "yy"}, index=["b"])
    items.put(("n",), "j", {"a": "yy"}, index=False)
    items.put(("n",), "i", {"b": "yy"})  # no field "a": nothing to embed
    assert CALLS == [["yy"]]
    found = items.search(("n",), query="yyy")
    assert found[0].key == "k" and found[0].score == pytest.approx(1.0)
    assert {i.key for i in found[1:]} == {"i", "j"} and all(i.score is None for i in found[1:])


@pytest.mark.parametrize(
    ("index", "named"),
    [
        ({"dims": 0, "embed": embed}, "index.dims"),
        ({"dims": 3}, "index.embed"),
        ({"dims": 3, "embed": "no-such-provider:model"}, "index.embed"),
        ({"dims": 3, "embed": embed, "distance_type": "l2"}, "index.distance_type"),
        ({"dims": 3, "embed": embed, "fields": "a", "other": 1}, "index: unknown key 'other'"),
        ({"dims": 3, "embed": embed, "fields": [1]}, "index.fields"),
        ([3], "index must be an IndexConfig"),
    ],
)
def test_a_bad_index_configuration_is_refused_naming_it(index: Any, named: str) -> None:
    with InMemoryCheckpointer() as store, pytest.raises(ValidationError, match=named):
        DurableStore(store.run_queue, index=index)


def test_embeddings_of_other_dims_are_refused_and_nothing_is_written() -> None:
    with InMemoryCheckpointer() as store:
        items = DurableStore(store.run_queue, index={"dims": 3, "embed": embed})
        with pytest.raises(ValidationError, match=r"index\.dims is 3"):
            items.put(("n",), "k", {"a": "x"})
        assert items.get(("n",), "k") is None
        with pytest.raises(ValidationError, match=r"index\.dims is 3"):
            items.search(("n",), query="x")


def test_without_an_index_a_query_and_a_puts_index_are_ignored_as_langgraph_does() -> None:
    with InMemoryCheckpointer() as store:
        items = DurableStore(store.run_queue)
        items.put(("n",), "k", {"a": "x"}, index=["a"])
        assert [(i.key, i.score) for i in items.search(("n",), query="x")] == [("k", None)]
        assert items.index_config is None


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_the_async_store_embeds_with_the_async_embeddings(backend: str, tmp_path: Path) -> None:
    async def aembed(texts: list[str]) -> list[list[float]]:
        await asyncio.sleep(0)
        return embed(texts)

    async def main() -> None:
        opened: Any = (
            AsyncInMemoryCheckpointer()
            if backend == "memory"
            else await AsyncSqliteCheckpointer.open(tmp_path / "lg.db")
        )
        try:
            items = AsyncDurableStore(opened.run_queue, index=_index(embed=aembed))
            await items.abatch([PutOp(("n",), "a", {"t": "aaa"}), PutOp(("n",), "b", {"t": "bbb"})])
            (found,) = await items.abatch([SearchOp(("n",), query="bb")])
            assert [i.key for i in found] == ["b", "a"]  # type: ignore[union-attr]
            mine = items.for_tenant("me")
            assert mine.index_config is items.index_config
            await mine.aput(("n",), "c", {"t": "bbb"})
            assert [i.key for i in await mine.asearch(("n",), query="b")] == ["c"]
        finally:
            await opened.close()

    asyncio.run(main())
