"""Our savers beside LangGraph's in ``langgraph-checkpoint-postgres``'s tests (test_sync,
test_async), which parametrize ``saver_name`` over their module's ``_saver(name)``.

`run.py` copies this file into that sdist's tests (as ``tests/_durable_graph_fixtures.py``, with
``savers.py``) and appends one import line to its ``conftest.py``, which then:

- points the sdist's PostgreSQL URIs at the suite's throwaway server (``DG_SUITE_PG_URI``);
- adds ``dg_memory``, ``dg_sqlite``, ``dg_postgres`` (test_sync) or their ``_aio`` forms
  (test_async) to every ``saver_name`` list that holds ``"base"`` (PostgresSaver itself), but
  for the two tests of PostgresSaver's internals (`POSTGRES_SAVER_INTERNALS`);
- has the module's ``_saver`` open ours for those names (LangGraph's own names run as shipped).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import pytest
from tests._durable_graph_savers import (  # type: ignore[import-not-found]
    ASYNC_OURS,
    OURS,
    PG_URI,
    SYNC_OURS,
)

if PG_URI:
    DEFAULT_POSTGRES_URI = PG_URI
    DEFAULT_URI = PG_URI + "postgres?sslmode=disable"


POSTGRES_SAVER_INTERNALS = frozenset(
    {"test_pending_sends_migration", "test_get_checkpoint_no_channel_values"}
)
"""Tests of PostgresSaver's own internals, not of the saver API: its migration of checkpoints
written before LangGraph's v4 format (stored rows it inserts itself), and one that monkeypatches
``PostgresSaver._load_checkpoint_tuple``. They are not run on ours."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Add ours to each ``saver_name`` list that runs PostgresSaver itself (``"base"``)."""
    if "saver_name" not in metafunc.fixturenames:
        return
    if metafunc.function.__name__ in POSTGRES_SAVER_INTERNALS:
        return
    is_async = metafunc.module.__name__.endswith("test_async")
    for mark in metafunc.definition.iter_markers("parametrize"):
        names: list[Any] = mark.args[1]
        if mark.args[0] == "saver_name" and "base" in names:
            suffix = "_aio" if is_async else ""
            names.extend(f"dg_{n}{suffix}" for n in OURS if f"dg_{n}{suffix}" not in names)


@pytest.fixture(autouse=True)
def _durable_graph_savers(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The module's ``_saver(name)`` also opens ours (``dg_*``)."""
    module = request.module
    theirs = getattr(module, "_saver", None)
    if theirs is None or getattr(theirs, "_durable_graph", False):
        return
    if module.__name__.endswith("test_async"):

        @asynccontextmanager
        async def either_async(name: str) -> AsyncIterator[Any]:
            if name.startswith("dg_"):
                async with ASYNC_OURS[name[3:].removesuffix("_aio")]() as saver:
                    yield saver
            else:
                async with theirs(name) as saver:
                    yield saver

        patched: Any = either_async
    else:

        @contextmanager
        def either(name: str) -> Iterator[Any]:
            if name.startswith("dg_"):
                with SYNC_OURS[name[3:]]() as saver:
                    yield saver
            else:
                with theirs(name) as saver:
                    yield saver

        patched = either
    patched._durable_graph = True
    monkeypatch.setattr(module, "_saver", patched)


__all__ = [
    *(["DEFAULT_POSTGRES_URI", "DEFAULT_URI"] if PG_URI else []),
    "_durable_graph_savers",
    "pytest_generate_tests",
]
