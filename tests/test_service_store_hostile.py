"""The store API under hostile input (issue 46 item 7), on real ``durable-graph serve`` processes
over SQLite and PostgreSQL: every namespace, key, filter and page an attacker can send to each
``/store/*`` endpoint is answered 2xx or 422, never a 500, and the keep-alive connection it came
on serves the next request.

The requests go through ``langgraph-sdk``'s own client where it can send them; what it cannot
encode (a lone surrogate, bytes that are not UTF-8, a body that is not JSON) goes as raw bytes
over one ``httpx`` connection, the same one for every request, so a server that closed the
connection after a refusal (as uvicorn does after an unhandled error) fails the test."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import APIStatusError

from service_support import served_url

CONFIG = Path(__file__).parent / "service_store" / "langgraph.json"

DEEP = 600
"""Containers nested deeper than the store takes (512)."""

# Labels and keys that must be refused wherever a namespace or a key goes.
BAD_LABELS: list[Any] = [
    "a\x00b",
    "\x00",
    "",
    "a.b",
    ".",
    "x" * 513,
    "é" * 257,  # 514 UTF-8 bytes
    1,
    None,
    True,
    ["nested"],
    {"o": 1},
]
ODD_LABELS = [
    "\x01\x1f\x7f",
    "tab\there",
    "new\nline",
    "*",
    "$eq",
    "🙂",
    "a b",
    "\u202e",
    "x" * 512,
]
"""Labels the store takes: control characters other than NUL, wildcards, emoji, 512 bytes."""
BAD_NAMESPACES: list[Any] = [
    *([label] for label in BAD_LABELS),
    ["ok", "a\x00"],
    ["x"] * 21,
    "a.b",
    "plain",
    {"0": "a"},
    42,
    [[["deep"]]],
]
BAD_KEYS: list[Any] = ["", "k\x00", "x" * 513, 1, None, ["k"], {"k": 1}]
BAD_FILTERS: list[Any] = [
    {"a\x00": 1},
    {"": 1},
    {"x" * 513: 1},
    {"a": {"$foo": 1}},
    {"a": {"$eq": 1, "$ne": 2}},
    {"a": {"$eq": 1, "b": 2}},
    {f"k{i}": i for i in range(101)},
    {"a": json.loads("[" * DEEP + "]" * DEEP)},
    {"a": {"$gt": json.loads("[" * DEEP + "]" * DEEP)}},
    [1],
    "a",
    7,
]
ODD_FILTERS: list[Any] = [
    {},
    {"a": None},
    {"a": {"$gt": "a\x00"}},
    {"a": {"$lt": [1, {"b": None}]}},
    {"a": {"nested": {"$eq": 1}}},
    {"$or": [1]},
    {"a": "\x01" * 10_000},
    {"a": {"$gte": 1e308}},
    {f"k{i}": i for i in range(100)},
]
BAD_PAGES: list[Any] = [-1, 0, -(2**63), 2**63, 10**30, 1.5, "10", True, None, [1], {"n": 1}]
"""A limit (0 included) or an offset (0 excluded) that must be refused."""


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with served_url(request, tmp_path_factory, CONFIG, schema_prefix="hostile") as served:
        yield served


class Probe:
    """One keep-alive connection (``httpx``, one connection at most) and the SDK's client; every
    answer is checked to be 2xx or 422, and the connection to serve the next request."""

    def __init__(self, url: str) -> None:
        self.raw = httpx.Client(base_url=url, limits=httpx.Limits(max_connections=1), timeout=30)
        self.sdk: Any = get_sync_client(url=url)
        self.ns = ["hostile", uuid.uuid4().hex]
        self.answers: list[tuple[int, str]] = []

    def send(self, method: str, path: str, body: bytes | None = None, **params: str) -> int:
        response = self.raw.request(
            method,
            path,
            content=body,
            params=params or None,
            headers={"content-type": "application/json"} if body is not None else None,
        )
        what = f"{method} {path} {params or ''} {(body or b'')[:120]!r}"
        self._check(response.status_code, response.text, what)
        assert response.headers.get("connection", "").lower() != "close", what
        # The same connection serves the next request.
        ok = self.raw.get("/ok")
        assert ok.status_code == 200, what
        return response.status_code

    def json(self, method: str, path: str, body: Any) -> int:
        return self.send(method, path, json.dumps(body).encode())

    def sdk_call(self, call: Any, *args: Any, **kwargs: Any) -> int:
        """A call of the SDK's store client: its status (2xx when it returned)."""
        try:
            call(*args, **kwargs)
        except APIStatusError as exc:
            status = exc.response.status_code
            self._check(status, exc.response.text, f"{call.__name__}{args}{kwargs}")
            return status
        return 200

    def _check(self, status: int, text: str, what: str) -> None:
        self.answers.append((status, what))
        assert status < 300 or status == 422, (status, what, text[:300])
        if status == 422:
            assert json.loads(text)["detail"], what  # a refusal names what it refuses


@pytest.fixture
def probe(url: str) -> Iterator[Probe]:
    p = Probe(url)
    try:
        yield p
    finally:
        p.raw.close()


def test_bad_namespaces_are_refused_at_every_endpoint(probe: Probe) -> None:
    """The NUL of the review (``/store/namespaces`` prefix and suffix, a search's
    ``namespace_prefix``) and every other bad namespace: 422 at put, get, delete, search and
    list, nothing written."""
    store = probe.sdk.store
    for ns in BAD_NAMESPACES:
        assert probe.json("PUT", "/store/items", {"namespace": ns, "key": "k", "value": {}}) == 422
        assert probe.json("DELETE", "/store/items", {"namespace": ns, "key": "k"}) == 422
        # An empty string is a missing prefix (every namespace), as null and [] are.
        want = 200 if ns == "" else 422
        assert probe.json("POST", "/store/items/search", {"namespace_prefix": ns}) == want, ns
        for field in ("prefix", "suffix"):
            assert probe.json("POST", "/store/namespaces", {field: ns}) == want, (field, ns)
    for label in BAD_LABELS:
        if isinstance(label, str) and label and "." not in label:  # the SDK refuses "." itself
            assert probe.sdk_call(store.put_item, [label], key="k", value={}) == 422
            assert probe.sdk_call(store.get_item, ["ok", label], key="k") == 422
            assert probe.sdk_call(store.delete_item, [label], key="k") == 422
        if isinstance(label, str) and label:
            assert probe.sdk_call(store.search_items, ["ok", label]) == 422
            assert probe.sdk_call(store.list_namespaces, prefix=[label]) == 422
            assert probe.sdk_call(store.list_namespaces, suffix=["ok", label]) == 422
    assert probe.send("GET", "/store/items", namespace="a\x00b", key="k") == 422
    assert probe.send("GET", "/store/items", namespace="a..b", key="k") == 422
    assert probe.send("GET", "/store/items", namespace="", key="k") == 422
    assert probe.send("GET", "/store/items", key="k") == 422
    assert probe.sdk_call(store.list_namespaces, prefix=["hostile"], limit=1000) == 200
    assert store.list_namespaces(prefix=["hostile"], limit=1000)["namespaces"] == []


def test_bad_keys_values_and_ttls_are_refused(probe: Probe) -> None:
    for key in BAD_KEYS:
        sent = {"namespace": probe.ns, "key": key, "value": {}}
        assert probe.json("PUT", "/store/items", sent) == 422, key
        assert probe.json("DELETE", "/store/items", {"namespace": probe.ns, "key": key}) == 422
    for body in (
        {"value": [1]},
        {"value": "x"},
        {"value": None},
        {"value": {"a": json.loads("[" * DEEP + "]" * DEEP)}},
        {"value": {}, "ttl": -1},
        {"value": {}, "ttl": 0},
        {"value": {}, "ttl": 10**30},
        {"value": {}, "ttl": "5"},
        {"value": {}, "index": ["a"]},
    ):
        sent = {"namespace": probe.ns, "key": "k", **body}
        assert probe.json("PUT", "/store/items", sent) == 422, body
    assert probe.send("GET", "/store/items", namespace=".".join(probe.ns), key="k\x00") == 422
    assert probe.send("GET", "/store/items", namespace=".".join(probe.ns), key="") == 422
    ns = ".".join(probe.ns)
    assert probe.send("GET", "/store/items", namespace=ns, key="k", refresh_ttl="maybe") == 422
    # What the store takes: odd labels and keys, control characters in values, 200 or 204.
    for label in ODD_LABELS:
        assert probe.sdk_call(probe.sdk.store.put_item, [*probe.ns, label], key=label, value={})
        got = probe.sdk.store.get_item([*probe.ns, label], key=label)
        assert got["namespace"] == [*probe.ns, label] and got["key"] == label
    text = "".join(chr(c) for c in range(32)) + "\x7f\u2028\ufeff"
    probe.sdk.store.put_item(probe.ns, key="controls", value={"t": text})
    assert probe.sdk.store.get_item(probe.ns, key="controls")["value"] == {"t": text}
    # Nothing of a refused put was written.
    keys = {i["key"] for i in probe.sdk.store.search_items(probe.ns, limit=100)["items"]}
    assert keys == {*ODD_LABELS, "controls"}


def test_bad_filters_and_pages_are_refused_and_odd_ones_answered(probe: Probe) -> None:
    store = probe.sdk.store
    store.put_item(probe.ns, key="a", value={"a": 1})
    for bad in BAD_FILTERS:
        body = {"namespace_prefix": probe.ns, "filter": bad}
        assert probe.json("POST", "/store/items/search", body) == 422, bad
    for odd in ODD_FILTERS:
        assert probe.sdk_call(store.search_items, probe.ns, filter=odd) == 200, odd
    for value in BAD_PAGES:
        for path, prefix in (
            ("/store/items/search", {"namespace_prefix": probe.ns}),
            ("/store/namespaces", {"prefix": probe.ns}),
        ):
            for field in ("limit", "offset"):
                if not (field == "offset" and value == 0):
                    assert probe.json("POST", path, {**prefix, field: value}) == 422, (field, value)
        status = probe.json("POST", "/store/namespaces", {"max_depth": value})
        assert status == (200 if value is None else 422), value
    assert probe.sdk_call(store.search_items, probe.ns, limit=1000, offset=1_000_000) == 200
    assert probe.sdk_call(store.search_items, probe.ns, limit=1001) == 422
    assert probe.sdk_call(store.list_namespaces, limit=1000, offset=1_000_001) == 422
    assert probe.sdk_call(store.search_items, probe.ns, refresh_ttl="yes") == 422


def test_bodies_the_sdk_cannot_send_are_refused(probe: Probe) -> None:
    """Lone surrogates, bytes that are not UTF-8, non-JSON, a huge or deep body, an object with
    a key twice: 422, and the connection stays open."""
    ns = json.dumps(probe.ns)
    for path in ("/store/items/search", "/store/namespaces"):
        field = "namespace_prefix" if path.endswith("search") else "prefix"
        for body in (
            f'{{"{field}": ["\\ud800"]}}'.encode(),
            f'{{"{field}": ["a\\udfff"]}}'.encode(),
            f'{{"{field}": ["\xff"]}}'.encode("latin-1"),
            b'{"' + field.encode() + b'": ["\xed\xa0\x80"]}',
            f'{{"{field}": {ns}, "limit": 1e999}}'.encode(),
            f'{{"{field}": {ns}, "limit": NaN}}'.encode(),
            f'{{"{field}": {ns}, "{field}": ["a\\u0000"]}}'.encode(),
            b"[" * 100_000 + b"]" * 100_000,
            b"not json",
            b"[]",
            b"\x00",
        ):
            assert probe.send("POST", path, body) == 422, body[:80]
    for body in (
        b'{"namespace": ["\\ud800"], "key": "k", "value": {}}',
        f'{{"namespace": {ns}, "key": "\\udc00", "value": {{}}}}'.encode(),
        f'{{"namespace": {ns}, "key": "k", "value": {{"v": "\\ud800"}}}}'.encode(),
        f'{{"namespace": {ns}, "key": "k", "value": {{"a": 1, "a": 2}}}}'.encode(),
    ):
        assert probe.send("PUT", "/store/items", body) == 422, body
    # Huge strings under the body cap (8 MiB; a larger body is 413 while it is read, by design).
    huge = "x" * (4 * 2**20)
    for path, sent, want in (
        ("/store/items", {"namespace": probe.ns, "key": huge, "value": {}}, 422),
        ("/store/items", {"namespace": [huge], "key": "k", "value": {}}, 422),
        ("/store/items/search", {"namespace_prefix": [huge]}, 422),
        ("/store/items/search", {"namespace_prefix": probe.ns, "filter": {huge: 1}}, 422),
        ("/store/namespaces", {"prefix": [huge]}, 422),
        ("/store/namespaces", {"suffix": ["a", huge]}, 422),
        # A value (and a filter's value) may be this large: under the store's value limit.
        ("/store/items", {"namespace": probe.ns, "key": "huge", "value": {"v": huge}}, 204),
        ("/store/items/search", {"namespace_prefix": probe.ns, "filter": {"v": huge}}, 200),
    ):
        method = "PUT" if path == "/store/items" else "POST"
        assert probe.json(method, path, sent) == want, (path, want)
    probe.sdk.store.delete_item(probe.ns, "huge")
    # Query strings: NUL, a lone surrogate and a byte that is not UTF-8, escaped.
    for query in ("namespace=a%00b&key=k", "namespace=%ED%A0%80&key=k", "namespace=a&key=%FF"):
        response = probe.raw.get("/store/items?" + query)
        probe._check(response.status_code, response.text, query)
        assert probe.raw.get("/ok").status_code == 200
    assert probe.sdk.store.search_items(probe.ns)["items"] == []


def test_the_keep_alive_connection_serves_on_after_each_refusal(url: str) -> None:
    """The review's second finding: after the 500 the next request on that connection failed.
    One raw socket, HTTP/1.1 keep-alive: each refused request is followed on the same socket by
    a good one, which is answered."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    bodies = [
        ("/store/namespaces", {"prefix": ["a\x00b"]}),
        ("/store/namespaces", {"suffix": ["a\x00"]}),
        ("/store/items/search", {"namespace_prefix": ["a\x00"]}),
        ("/store/namespaces", {"prefix": ["ok"], "limit": -1}),
    ]
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as s:
        reader = s.makefile("rb")
        for path, body in bodies * 3:
            for p, b in ((path, body), ("/store/namespaces", {"prefix": ["ok"]})):
                data = json.dumps(b).encode()
                s.sendall(
                    f"POST {p} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode()
                    + data
                )
                status, headers = _head(reader)
                length = int(headers.get("content-length", "0"))
                answer = reader.read(length)
                assert status == (422 if b is body else 200), (p, b, status, answer)
                assert headers.get("connection", "") != "close"


def _head(reader: Any) -> tuple[int, dict[str, str]]:
    line = reader.readline()
    assert line, "the server closed the connection"
    status = int(line.split(b" ", 2)[1])
    headers = {}
    while (line := reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers
