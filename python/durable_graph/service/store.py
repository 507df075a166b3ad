"""LangGraph Server's store API over the store's items (SPEC §20.3 "the store"; D203).

``PUT /store/items``, ``GET /store/items``, ``DELETE /store/items``, ``POST /store/items/search``
and ``POST /store/namespaces``, as ``langgraph-sdk``'s ``client.store`` calls them and
``langgraph dev`` answers them: a put or a delete is 204, a get the item (``null`` when there is
none), a search ``{"items": [...]}``, a listing ``{"namespaces": [...]}``. They go through the
same `AsyncDurableStore` the graphs get as their ``store``, so a client sees what a node wrote
and the other way round. Every field is checked before anything is written (422 naming it).
Semantic search (SPEC §25.1): with ``langgraph.json``'s ``store.index``, a put's ``index``
(``false``: not embedded; a list of field paths: those instead of the configured ``fields``) is
the store's, and a search's ``query`` ranks the items by cosine similarity, each with its
``score`` (D299); without one, a put's ``index`` is refused by name (nothing would be embedded)
and a search's ``query`` is ignored, as the reference ignores it.

A namespace (a prefix, a suffix) is checked here with the store's own rules
(`durable_graph.core.items.check_namespace`: labels without NUL, lone surrogates or ``.``, at most
20 of 512 bytes) before LangGraph's ``BaseStore`` methods see it, since those raise their own
`InvalidNamespaceError`; any that still comes through is a 422 as well, never a 500 (issue 46
item 7: a NUL in ``/store/namespaces``'s prefix was a 500 whose connection then closed).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, Literal

from langgraph.store.base import InvalidNamespaceError
from starlette.requests import Request
from starlette.responses import Response

from durable_graph.core.errors import ValidationError
from durable_graph.core.items import check_namespace
from durable_graph.langgraph.store import AsyncDurableStore
from durable_graph.service.auth import TENANT
from durable_graph.service.records import count_field
from durable_graph.service.requests import Json, body_of


def _namespace(
    value: object, name: str, *, optional: bool = False, empty: bool = False
) -> tuple[str, ...] | None:
    """A namespace as a list of labels (the store's identifiers without ``.``; none with
    ``empty``), else 422 naming it and the label."""
    if value is None and optional:
        return None
    if not isinstance(value, list | tuple):
        raise ValidationError(f"{name}: must be a list of labels")
    return check_namespace(name, value, allow_empty=empty)


@asynccontextmanager
async def _refusing_namespaces() -> AsyncIterator[None]:
    """LangGraph's own namespace refusals (the root label ``langgraph``, say) as a 422."""
    try:
        yield
    except InvalidNamespaceError as exc:
        raise ValidationError(f"namespace: {exc}") from None


def _key(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ValidationError("key: must be a non-empty string")
    return value


def _bool(value: object, name: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise ValidationError(f"{name}: must be a boolean")


def _ttl(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError("ttl: must be a number of minutes or null")
    return float(value)


def _filter(value: object) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValidationError("filter: must be an object")
    return value


NO_INDEX = (
    "index: semantic search needs langgraph.json's store.index (the embeddings to index with); "
    "this service has none"
)


def _index(body: Mapping[str, Any], store: AsyncDurableStore) -> Literal[False] | list[str] | None:
    """A put's ``index``: None (the configured fields), False, or a list of field paths."""
    value = body.get("index")
    if value is None or value is False:
        return value
    if store.index_config is None:
        raise ValidationError(NO_INDEX)
    if not isinstance(value, list) or not all(isinstance(p, str) and p for p in value):
        raise ValidationError("index: must be false or a list of field paths (strings)")
    return value


def _query(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValidationError("query: must be a string or null")


class StoreApi:
    """The store endpoints' work over ``store`` (the graphs' `AsyncDurableStore`), each request
    on its tenant's items (`auth.TENANT`, SPEC §20.4)."""

    def __init__(self, store: AsyncDurableStore) -> None:
        self.store = store

    @property
    def items(self) -> AsyncDurableStore:
        return self.store.for_tenant(TENANT.get())

    async def put(self, body: Mapping[str, Any]) -> None:
        namespace = _namespace(body.get("namespace"), "namespace")
        key = _key(body.get("key"))
        value = body.get("value")
        if not isinstance(value, dict):
            raise ValidationError("value: must be an object")
        index = _index(body, self.store)
        ttl = _ttl(body.get("ttl"))
        assert namespace is not None
        async with _refusing_namespaces():
            await self.items.aput(namespace, key, value, index=index, ttl=ttl)

    async def get(self, params: Mapping[str, str]) -> dict[str, Any] | None:
        namespace = _namespace(params.get("namespace", "").split("."), "namespace")
        key = _key(params.get("key"))
        refresh = params.get("refresh_ttl")
        if refresh is not None and refresh.lower() not in ("true", "false"):
            raise ValidationError("refresh_ttl: must be true or false")
        assert namespace is not None
        async with _refusing_namespaces():
            found = await self.items.aget(
                namespace, key, refresh_ttl=None if refresh is None else refresh.lower() == "true"
            )
        return None if found is None else found.dict()

    async def delete(self, body: Mapping[str, Any]) -> None:
        namespace = _namespace(body.get("namespace"), "namespace")
        key = _key(body.get("key"))
        assert namespace is not None
        async with _refusing_namespaces():
            await self.items.adelete(namespace, key)

    async def search(self, body: Mapping[str, Any]) -> dict[str, Any]:
        prefix = _namespace(body.get("namespace_prefix") or [], "namespace_prefix", empty=True)
        assert prefix is not None
        filter, limit = _filter(body.get("filter")), count_field(body, "limit", 10, 1)
        offset = count_field(body, "offset", 0, 0)
        refresh = _bool(body.get("refresh_ttl"), "refresh_ttl")
        query = _query(body.get("query"))
        async with _refusing_namespaces():
            found = await self.items.asearch(
                prefix,
                query=query,
                filter=filter,
                limit=limit,
                offset=offset,
                refresh_ttl=refresh,
            )
        return {"items": [item.dict() for item in found]}

    async def namespaces(self, body: Mapping[str, Any]) -> dict[str, Any]:
        prefix = _namespace(body.get("prefix") or None, "prefix", optional=True)
        suffix = _namespace(body.get("suffix") or None, "suffix", optional=True)
        depth = body.get("max_depth")
        if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int)):
            raise ValidationError("max_depth: must be an integer")
        limit, offset = count_field(body, "limit", 100, 1), count_field(body, "offset", 0, 0)
        async with _refusing_namespaces():
            found = await self.items.alist_namespaces(
                prefix=prefix, suffix=suffix, max_depth=depth, limit=limit, offset=offset
            )
        return {"namespaces": [list(ns) for ns in found]}

    # --- the endpoints (``create_app``'s route table names them) ----------------------------

    async def put_item(self, request: Request) -> Response:
        await self.put(await body_of(request))
        return Response(status_code=204)

    async def get_item(self, request: Request) -> Response:
        return Json(await self.get(request.query_params))

    async def delete_item(self, request: Request) -> Response:
        await self.delete(await body_of(request))
        return Response(status_code=204)

    async def search_items(self, request: Request) -> Response:
        return Json(await self.search(await body_of(request)))

    async def list_namespaces(self, request: Request) -> Response:
        return Json(await self.namespaces(await body_of(request)))


__all__ = ["StoreApi"]
