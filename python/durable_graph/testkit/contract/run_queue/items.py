"""The item store (SPEC §20.3 "the store", sql/74_items.sql; durable_graph.core.items): LangGraph's
long-term memory, on every backend."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from durable_graph.core.errors import ValidationError
from durable_graph.core.items import StoredItem
from durable_graph.core.model import JSON
from durable_graph.core.run_queue import RunQueue
from durable_graph.testkit.contract.run_queue.support import SLACK
from durable_graph.testkit.harness import ClockControl


def _keys(items: list[StoredItem]) -> list[str]:
    return [i.key for i in items]


class ItemStoreTests:
    """Put, get, delete, search, namespaces and TTL of items, each tenant's own."""

    def test_an_item_put_is_got_with_its_value_and_store_times(self, queue: RunQueue) -> None:
        put = queue.put_item(("users", "u1"), "prefs", {"theme": "dark", "n": [1, 2.5, None]})
        got = queue.get_item(["users", "u1"], "prefs")
        assert got == put
        assert got.namespace == ("users", "u1") and got.key == "prefs"
        assert got.value == {"theme": "dark", "n": [1, 2.5, None]}
        assert got.created_at == got.updated_at and got.expires_at is None and got.ttl is None
        assert queue.get_item(("users", "u1"), "other") is None
        assert queue.get_item(("users",), "prefs") is None

    def test_a_put_again_replaces_the_value_and_keeps_created_at(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        first = queue.put_item(("ns",), "k", {"v": 1})
        clock.advance(timedelta(seconds=5))
        second = queue.put_item(("ns",), "k", {"w": 2})
        assert second.created_at == first.created_at
        assert second.updated_at - first.updated_at >= timedelta(seconds=5) - SLACK
        got = queue.get_item(("ns",), "k")
        assert got is not None and got.value == {"w": 2}

    def test_delete_removes_the_item_and_says_whether_there_was_one(self, queue: RunQueue) -> None:
        queue.put_item(("ns",), "k", {})
        assert queue.delete_item(("ns",), "k") is True
        assert queue.get_item(("ns",), "k") is None
        assert queue.delete_item(("ns",), "k") is False

    def test_another_tenants_items_are_unknown(self, queue: RunQueue) -> None:
        queue.put_item(("ns",), "k", {"who": "a"}, tenant="a")
        queue.put_item(("ns",), "k", {"who": "none"})
        assert queue.get_item(("ns",), "k", tenant="b") is None
        assert queue.search_items((), tenant="b") == []
        assert queue.item_namespaces(tenant="b") == []
        assert queue.delete_item(("ns",), "k", tenant="b") is False
        got = queue.get_item(("ns",), "k", tenant="a")
        assert got is not None and got.value == {"who": "a"}
        none = queue.get_item(("ns",), "k")
        assert none is not None and none.value == {"who": "none"}

    def test_search_is_under_a_prefix_of_whole_labels_newest_first(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        for ns, key in [(("a",), "1"), (("a", "b"), "2"), (("ab",), "3"), (("a", "c"), "4")]:
            queue.put_item(ns, key, {"k": key})
            clock.advance(timedelta(seconds=1))
        assert _keys(queue.search_items(("a",))) == ["4", "2", "1"]
        assert _keys(queue.search_items(("a", "b"))) == ["2"]
        assert _keys(queue.search_items(())) == ["4", "3", "2", "1"]
        assert _keys(queue.search_items((), limit=2, offset=1)) == ["3", "2"]
        assert _keys(queue.search_items((), limit=2, offset=4)) == []

    def test_search_filters_by_equality_and_operators_on_top_level_keys(
        self, queue: RunQueue
    ) -> None:
        values: dict[str, dict[str, JSON]] = {
            "i1": {"n": 1, "s": "apple", "b": True, "o": {"x": [1, 2]}},
            "i2": {"n": 2.5, "s": "banana", "b": False},
            "i3": {"n": 10, "s": "Cherry", "b": 1},
            "i4": {"s": "date"},
        }
        for key, value in values.items():
            queue.put_item(("f",), key, value)

        def found(f: dict[str, object]) -> set[str]:
            return set(_keys(queue.search_items(("f",), filter=f)))  # type: ignore[arg-type]

        assert found({"n": 1}) == {"i1"}
        assert found({"n": 1.0}) == {"i1"}  # JSON equality: numbers by value (D201)
        assert found({"b": True}) == {"i1"}  # true is not 1
        assert found({"o": {"x": [1, 2]}}) == {"i1"}
        assert found({"n": {"$eq": 2.5}}) == {"i2"}
        assert found({"n": {"$ne": 1}}) == {"i2", "i3"}  # a missing key matches no operator
        assert found({"n": {"$gt": 2}}) == {"i2", "i3"}  # numbers by value, not as text
        assert found({"n": {"$gte": 2.5}}) == {"i2", "i3"}
        assert found({"n": {"$lt": 10}}) == {"i1", "i2"}
        assert found({"n": {"$lte": 10}}) == {"i1", "i2", "i3"}
        assert found({"s": {"$gt": "b"}}) == {"i2", "i4"}  # code point order: "C" < "b"
        assert found({"s": {"$gt": 1}}) == set()  # a string and a number are not ordered
        assert found({"n": {"$gte": 1}, "s": "apple"}) == {"i1"}
        assert found({}) == {"i1", "i2", "i3", "i4"}

    def test_namespaces_are_listed_by_prefix_suffix_and_depth(self, queue: RunQueue) -> None:
        for ns in [("a", "b", "c"), ("a", "b", "d"), ("a", "x"), ("b", "c"), ("a",)]:
            queue.put_item(ns, "k", {})
        assert queue.item_namespaces() == [
            ("a",), ("a", "b", "c"), ("a", "b", "d"), ("a", "x"), ("b", "c"),
        ]  # fmt: skip
        assert queue.item_namespaces(prefix=("a", "b")) == [("a", "b", "c"), ("a", "b", "d")]
        assert queue.item_namespaces(suffix=("c",)) == [("a", "b", "c"), ("b", "c")]
        assert queue.item_namespaces(prefix=("a", "*", "d")) == [("a", "b", "d")]
        assert queue.item_namespaces(suffix=("*", "c")) == [("a", "b", "c"), ("b", "c")]
        assert queue.item_namespaces(max_depth=2) == [("a",), ("a", "b"), ("a", "x"), ("b", "c")]
        assert queue.item_namespaces(max_depth=1) == [("a",), ("b",)]
        assert queue.item_namespaces(limit=2, offset=1) == [("a", "b", "c"), ("a", "b", "d")]

    def test_an_item_expires_after_its_ttl_and_a_refreshing_read_extends_it(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        put = queue.put_item(("t",), "k", {"v": 1}, ttl=1.0)
        assert put.ttl == 1.0 and put.expires_at is not None
        assert put.expires_at - put.updated_at == timedelta(minutes=1)
        clock.advance(timedelta(seconds=40))
        plain = queue.get_item(("t",), "k")
        assert plain is not None and plain.expires_at == put.expires_at
        refreshed = queue.get_item(("t",), "k", refresh_ttl=True)
        assert refreshed is not None and refreshed.expires_at is not None
        assert refreshed.expires_at - put.expires_at >= timedelta(seconds=40) - SLACK
        clock.advance(timedelta(seconds=40))  # past the first expiry, before the refreshed one
        assert queue.get_item(("t",), "k") is not None
        searched = queue.search_items(("t",), refresh_ttl=True)
        assert _keys(searched) == ["k"]
        clock.advance(timedelta(seconds=61))
        assert queue.get_item(("t",), "k") is None
        assert queue.search_items(("t",)) == []
        assert queue.item_namespaces() == []

    def test_expired_items_are_left_out_before_a_page_is_cut(
        self, queue: RunQueue, clock: ClockControl
    ) -> None:
        """An expired item inside a page's window is not counted (as PostgresStore with
        ``omit_expired``, D200): the pages hold the live items only."""
        for key, ttl in [("c", 60.0), ("b", 60.0), ("x", 0.5), ("a", 60.0)]:
            queue.put_item(("p",), key, {}, ttl=ttl)
            clock.advance(timedelta(seconds=1))
        clock.advance(timedelta(minutes=1))  # "x" expired, not swept
        assert _keys(queue.search_items(("p",), limit=2)) == ["a", "b"]
        assert _keys(queue.search_items(("p",), limit=2, offset=2)) == ["c"]
        assert _keys(queue.search_items(("p",), limit=2, refresh_ttl=True)) == ["a", "b"]
        assert queue.get_item(("p",), "x", refresh_ttl=True) is None  # never revived

    def test_sweep_deletes_expired_items_only(self, queue: RunQueue, clock: ClockControl) -> None:
        queue.put_item(("t",), "gone", {}, ttl=0.5)
        queue.put_item(("t",), "gone2", {}, ttl=0.5, tenant="a")
        queue.put_item(("t",), "stays", {}, ttl=5)
        queue.put_item(("t",), "forever", {})
        assert queue.sweep_items() == 0
        clock.advance(timedelta(minutes=1))
        assert queue.sweep_items(batch=1) == 1
        assert queue.sweep_items() == 1
        assert queue.sweep_items() == 0
        assert sorted(_keys(queue.search_items(("t",)))) == ["forever", "stays"]
        assert queue.delete_item(("t",), "gone") is False

    def test_an_expired_item_put_again_is_new(self, queue: RunQueue, clock: ClockControl) -> None:
        first = queue.put_item(("t",), "k", {}, ttl=0.5)
        clock.advance(timedelta(minutes=1))
        again = queue.put_item(("t",), "k", {"v": 2})
        assert again.created_at > first.created_at and again.expires_at is None

    @pytest.mark.parametrize(
        ("call", "name"),
        [
            (lambda q: q.put_item(("a.b",), "k", {}), "namespace"),
            (lambda q: q.put_item(("a", ""), "k", {}), "namespace"),
            (lambda q: q.put_item(("a", 1), "k", {}), "namespace"),
            (lambda q: q.put_item((), "k", {}), "namespace"),
            (lambda q: q.put_item("ab", "k", {}), "namespace"),
            (lambda q: q.put_item(("a",), "", {}), "key"),
            (lambda q: q.put_item(("a",), "k", [1]), "value"),
            (lambda q: q.put_item(("a",), "k", {}, ttl=0), "ttl"),
            (lambda q: q.put_item(("a",), "k", {}, ttl=float("nan")), "ttl"),
            (lambda q: q.put_item(("a",), "k", {}, tenant=""), "tenant"),
            (lambda q: q.get_item(("a.b",), "k"), "namespace"),
            (lambda q: q.get_item(("a",), "k", refresh_ttl=1), "refresh_ttl"),
            (lambda q: q.delete_item(("a",), 5), "key"),
            (lambda q: q.search_items(("a.b",)), "prefix"),
            (lambda q: q.search_items((), filter={"n": {"$in": [1]}}), "filter"),
            (lambda q: q.search_items((), filter=[1]), "filter"),
            (lambda q: q.search_items((), limit=0), "limit"),
            (lambda q: q.search_items((), offset=-1), "offset"),
            (lambda q: q.item_namespaces(prefix=("a.b",)), "prefix"),
            (lambda q: q.item_namespaces(suffix=("",)), "suffix"),
            (lambda q: q.item_namespaces(max_depth=0), "max_depth"),
            (lambda q: q.item_namespaces(limit=1001), "limit"),
            (lambda q: q.sweep_items(batch=0), "batch"),
        ],
    )
    def test_bad_arguments_are_refused_by_name_and_write_nothing(
        self, queue: RunQueue, call: Callable[[RunQueue], object], name: str
    ) -> None:
        with pytest.raises(ValidationError, match=name):
            call(queue)
        assert queue.search_items(()) == []
