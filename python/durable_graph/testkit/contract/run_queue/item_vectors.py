"""The item store's vectors (SPEC §25.1 store.index, sql/76_item_vectors.sql;
durable_graph.core.items): items put with an index and searched by cosine similarity, on every
backend (D296-D298)."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from durable_graph.core.errors import ValidationError
from durable_graph.core.items import ScoredItem, cosine
from durable_graph.core.run_queue import RunQueue
from durable_graph.testkit.harness import ClockControl


def _keys(found: list[ScoredItem]) -> list[str]:
    return [s.item.key for s in found]


class ItemVectorTests:
    """Put with vectors, search by vector: ranked by the best field's cosine, in the store
    (D296-D298)."""

    def test_a_search_by_vector_ranks_items_by_cosine_with_scores(self, queue: RunQueue) -> None:
        queue.put_indexed_item(("docs",), "x", {"t": "x"}, {"$": [1.0, 0.0, 0.0]})
        queue.put_indexed_item(("docs",), "xy", {"t": "xy"}, {"$": [1.0, 1.0, 0.0]})
        queue.put_indexed_item(("docs",), "z", {"t": "z"}, {"$": [0.0, 0.0, 2.0]})
        found = queue.search_items_by_vector(("docs",), [1.0, 0.0, 0.0])
        assert _keys(found) == ["x", "xy", "z"]
        assert [s.score for s in found] == pytest.approx([1.0, 1 / math.sqrt(2), 0.0])
        assert found[0].item.value == {"t": "x"}

    def test_the_best_field_scores_an_item(self, queue: RunQueue) -> None:
        query = [0.3, -0.2, 0.9]
        fields = {"title": [1.0, 0.0, 0.0], "body": [0.3, -0.2, 0.8]}
        queue.put_indexed_item(("docs",), "a", {}, fields)
        (found,) = queue.search_items_by_vector((), query)
        assert found.score == pytest.approx(cosine(query, fields["body"]), abs=1e-12)

    def test_a_search_by_vector_filters_pages_and_scopes_by_prefix(self, queue: RunQueue) -> None:
        for i in range(5):
            queue.put_indexed_item(("a", "b"), f"k{i}", {"n": i}, {"$": [1.0, float(i)]})
        queue.put_indexed_item(("a", "c"), "other", {"n": 9}, {"$": [1.0, 0.0]})
        assert _keys(queue.search_items_by_vector(("a", "b"), [1.0, 0.0])) == [
            "k0", "k1", "k2", "k3", "k4",
        ]  # fmt: skip
        page = queue.search_items_by_vector(("a", "b"), [1.0, 0.0], limit=2, offset=1)
        assert _keys(page) == ["k1", "k2"]
        found = queue.search_items_by_vector(("a",), [1.0, 0.0], filter={"n": {"$gte": 3}})
        assert _keys(found) == ["other", "k3", "k4"]

    def test_items_without_current_vectors_come_last_without_a_score(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        queue.put_item(("ns",), "plain", {"v": 1})
        clock.advance(timedelta(seconds=1))
        queue.put_indexed_item(("ns",), "none", {"v": 2}, {})
        clock.advance(timedelta(seconds=1))
        queue.put_indexed_item(("ns",), "stale", {"v": 3}, {"$": [1.0, 0.0]})
        clock.advance(timedelta(seconds=1))
        queue.put_item(("ns",), "stale", {"v": 4})  # a plain put: its old vectors are stale
        clock.advance(timedelta(seconds=1))
        queue.put_indexed_item(("ns",), "other_dims", {"v": 5}, {"$": [1.0, 0.0, 0.0]})
        clock.advance(timedelta(seconds=1))
        queue.put_indexed_item(("ns",), "low", {"v": 6}, {"$": [-1.0, 0.0]})
        queue.put_indexed_item(("ns",), "high", {"v": 7}, {"$": [0.0, 1.0]})
        found = queue.search_items_by_vector(("ns",), [0.0, 1.0])
        assert _keys(found) == ["high", "low", "other_dims", "stale", "none", "plain"]
        assert [s.score for s in found] == pytest.approx([1.0, 0.0, None, None, None, None])
        page = queue.search_items_by_vector(("ns",), [0.0, 1.0], limit=2, offset=1)
        assert _keys(page) == ["low", "other_dims"]

    def test_a_put_again_replaces_the_vectors_and_a_delete_removes_them(
        self, queue: RunQueue
    ) -> None:
        queue.put_indexed_item(("ns",), "k", {"v": 1}, {"a": [1.0, 0.0], "b": [0.0, 1.0]})
        queue.put_indexed_item(("ns",), "k", {"v": 2}, {"a": [-1.0, 0.0]})
        (found,) = queue.search_items_by_vector(("ns",), [0.0, 1.0])
        assert found.score == pytest.approx(0.0) and found.item.value == {"v": 2}
        assert queue.delete_item(("ns",), "k") is True
        queue.put_item(("ns",), "k", {"v": 3})
        (found,) = queue.search_items_by_vector(("ns",), [0.0, 1.0])
        assert found.score is None and found.item.value == {"v": 3}

    def test_expired_and_other_tenants_items_are_not_found(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        queue.put_indexed_item(("ns",), "old", {}, {"$": [1.0]}, ttl=1)
        queue.put_indexed_item(("ns",), "theirs", {}, {"$": [1.0]}, tenant="b")
        queue.put_indexed_item(("ns",), "mine", {}, {"$": [1.0]}, tenant="a")
        clock.advance(timedelta(minutes=2))
        assert _keys(queue.search_items_by_vector((), [1.0])) == []
        assert _keys(queue.search_items_by_vector((), [1.0], tenant="a")) == ["mine"]
        assert _keys(queue.search_items_by_vector((), [1.0], tenant="c")) == []
        assert queue.sweep_items(100) == 1

    def test_a_refreshing_search_by_vector_moves_expiry(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        queue.put_indexed_item(("ns",), "k", {}, {"$": [1.0]}, ttl=10)
        clock.advance(timedelta(minutes=8))
        (found,) = queue.search_items_by_vector(("ns",), [1.0], refresh_ttl=True)
        clock.advance(timedelta(minutes=8))
        assert _keys(queue.search_items_by_vector(("ns",), [1.0])) == ["k"]
        assert found.item.expires_at is not None

    def test_a_zero_vector_scores_zero(self, queue: RunQueue) -> None:
        queue.put_indexed_item(("ns",), "k", {}, {"$": [0.0, 0.0]})
        (found,) = queue.search_items_by_vector(("ns",), [1.0, 0.0])
        assert found.score == 0.0

    @pytest.mark.parametrize(
        ("vectors", "named"),
        [
            ({"$": []}, "vectors['$']"),
            ({"$": [1.0, float("nan")]}, "vectors['$']"),
            ({"$": [1e200]}, "vectors['$']"),
            ({"$": ["1"]}, "vectors['$']"),
            ({"a": [1.0], "b": [1.0, 2.0]}, "one length"),
            ({"": [1.0]}, "vectors field"),
            ([1.0], "vectors"),
        ],
    )
    def test_bad_vectors_are_refused_and_nothing_is_written(
        self, queue: RunQueue, vectors: object, named: str
    ) -> None:
        with pytest.raises(ValidationError, match=named.replace("[", r"\[").replace("$", r"\$")):
            queue.put_indexed_item(("ns",), "k", {"v": 1}, vectors)  # type: ignore[arg-type]
        assert queue.get_item(("ns",), "k") is None

    @pytest.mark.parametrize("vector", [[], [float("inf")], [1e-200], "ab"])
    def test_a_bad_query_vector_is_refused(self, queue: RunQueue, vector: object) -> None:
        with pytest.raises(ValidationError, match="vector"):
            queue.search_items_by_vector(("ns",), vector)  # type: ignore[arg-type]


__all__ = ["ItemVectorTests"]
