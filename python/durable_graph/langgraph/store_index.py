"""A `DurableStore`'s semantic index: LangGraph's ``IndexConfig`` (``store.index`` of
``langgraph.json``; SPEC §25.1; D296-D298).

`check_index` reads the configuration as LangGraph's stores do (``dims``, ``embed``: an
``Embeddings``, a function, or a ``provider:model`` string for ``init_embeddings``; ``fields``:
the value's paths to embed, ``["$"]`` the whole value as JSON), `texts` picks an item's texts
(one per indexed field path, as LangGraph names them: ``path``, or ``path.i`` when a path
selects several), `vectors` checks what the embeddings returned. The vectors are kept and ranked
by the store (`RunQueue.put_indexed_item`, `search_items_by_vector`): cosine similarity, in SQL
on PostgreSQL. Nothing here calls an embedding model of its own: ``embed`` is the user's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from langchain_core.embeddings import Embeddings
from langgraph.store.base import IndexConfig, ensure_embeddings, get_text_at_path, tokenize_path

from durable_graph.core.errors import ValidationError
from durable_graph.core.items import MAX_DIMS

KEYS: Final = frozenset({"dims", "embed", "fields", "distance_type", "ann_index_config"})
"""What an index configuration may hold: LangGraph's ``IndexConfig``, and ``PostgresIndexConfig``'s
``distance_type`` (``cosine`` only) and ``ann_index_config`` (read, unused: the scan is exact)."""


@dataclass(frozen=True, slots=True)
class StoreIndex:
    """A checked index configuration: ``config`` as given (a store's ``index_config``)."""

    config: IndexConfig
    embeddings: Embeddings
    dims: int
    fields: tuple[tuple[str, Literal["$"] | list[str]], ...]


def check_index(index: object) -> StoreIndex | None:
    """None, or ``index`` (an ``IndexConfig`` dict) checked, its ``embed`` made an
    ``Embeddings``; else `ValidationError` naming the key."""
    if index is None:
        return None
    if not isinstance(index, Mapping):
        raise ValidationError(
            f"index must be an IndexConfig dict or None, got {type(index).__name__}"
        )
    extra = sorted(str(k) for k in index if k not in KEYS)
    if extra:
        raise ValidationError(f"index: unknown key {extra[0]!r} (known: {', '.join(sorted(KEYS))})")
    dims = index.get("dims")
    if isinstance(dims, bool) or not isinstance(dims, int) or not 1 <= dims <= MAX_DIMS:
        raise ValidationError(f"index.dims must be an integer of 1..{MAX_DIMS}, got {dims!r}")
    distance = index.get("distance_type", "cosine")
    if distance != "cosine":
        raise ValidationError(
            f"index.distance_type: only 'cosine' is supported by DurableStore, got {distance!r}"
        )
    fields = index.get("fields") or ["$"]
    if isinstance(fields, str):
        fields = [fields]
    if not isinstance(fields, list) or not all(isinstance(f, str) and f for f in fields):
        raise ValidationError("index.fields must be a list of field paths (str) or None")
    if index.get("embed") is None:
        raise ValidationError("index.embed is required (an Embeddings, a function or a string)")
    try:
        embeddings = ensure_embeddings(index["embed"])
    except (ValueError, TypeError, ImportError) as exc:
        raise ValidationError(f"index.embed: {exc}") from None
    tokenized = tuple((f, "$" if f == "$" else tokenize_path(f)) for f in fields)
    return StoreIndex(dict(index), embeddings, dims, tokenized)  # type: ignore[arg-type]


def texts(
    index: StoreIndex, value: Mapping[str, Any], paths: Literal[False] | Sequence[str] | None
) -> list[tuple[str, str]]:
    """The (field, text) pairs to embed for ``value`` put with ``paths`` (a put's ``index``:
    None the configured fields, False none)."""
    if paths is False:
        return []
    chosen = index.fields if paths is None else [(p, tokenize_path(p)) for p in paths]
    out: list[tuple[str, str]] = []
    for path, tokens in chosen:
        found = get_text_at_path(dict(value), tokens)
        out.extend((f"{path}.{i}" if len(found) > 1 else path, t) for i, t in enumerate(found))
    return out


def vectors(
    index: StoreIndex, pairs: Sequence[tuple[str, str]], embedded: Sequence[Sequence[float]]
) -> dict[str, Sequence[float]]:
    """Each field's embedding, each checked to have ``dims`` numbers."""
    if len(embedded) != len(pairs):
        raise ValidationError(
            f"index.embed returned {len(embedded)} embeddings for {len(pairs)} texts"
        )
    for vector in embedded:
        if len(vector) != index.dims:
            raise ValidationError(
                f"index.embed returned {len(vector)} numbers, index.dims is {index.dims}"
            )
    return {field: vector for (field, _), vector in zip(pairs, embedded, strict=True)}


def query_vector(index: StoreIndex, vector: Sequence[float]) -> Sequence[float]:
    if len(vector) != index.dims:
        raise ValidationError(
            f"index.embed returned {len(vector)} numbers, index.dims is {index.dims}"
        )
    return vector


__all__ = ["KEYS", "StoreIndex", "check_index", "query_vector", "texts", "vectors"]
