"""Our savers as checkpointer fixtures beside LangGraph's, for LangGraph's own test suite.

`run.py` copies this file into the tests of the downloaded ``langgraph`` sdist (as
``tests/_durable_graph_fixtures.py``, with ``savers.py`` as ``tests/_durable_graph_savers.py``)
and appends one line to that sdist's ``conftest.py``::

    from tests._durable_graph_fixtures import *  # durable_graph's savers beside LangGraph's

which runs after LangGraph's own fixtures are defined, in the conftest's namespace. So it:

- redefines ``sync_checkpointer`` and ``async_checkpointer`` with LangGraph's savers (those named
  in ``DG_SUITE_LANGGRAPH_SAVERS``) and ours (``dg_memory``, ``dg_sqlite``, ``dg_postgres``;
  ``dg_memory_aio``, ``dg_sqlite_aio``, ``dg_postgres_aio``), each selectable with
  ``DG_SUITE_OURS``;
- adds ours to the savers ``test_prune_postgres`` parametrizes over (its ``SYNC`` / ``ASYNC``);
- points LangGraph's PostgreSQL fixtures at the throwaway server `run.py` started
  (``DG_SUITE_PG_URI``), and lets the PostgreSQL-only tests run (``NO_DOCKER`` off after the
  fixtures' parameters were chosen without Redis).

Nothing of LangGraph's is changed: its tests, savers and fixtures run as shipped.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import tests.conftest_checkpointer as lg_fixtures  # type: ignore[import-not-found]
from tests._durable_graph_savers import (  # type: ignore[import-not-found]
    ASYNC_OURS,
    OURS,
    PG_URI,
    SYNC_OURS,
)

if PG_URI:
    lg_fixtures.DEFAULT_POSTGRES_URI = PG_URI
NO_DOCKER = not PG_URI  # read by test_prune_postgres once this conftest is loaded

SYNC_LANGGRAPH = {
    "memory": lg_fixtures._checkpointer_memory,
    "memory_migrate_sends": lg_fixtures._checkpointer_memory_migrate_sends,
    "sqlite": lg_fixtures._checkpointer_sqlite,
    "sqlite_aes": lg_fixtures._checkpointer_sqlite_aes,
    "postgres": lg_fixtures._checkpointer_postgres,
    "postgres_pipe": lg_fixtures._checkpointer_postgres_pipe,
    "postgres_pool": lg_fixtures._checkpointer_postgres_pool,
}
ASYNC_LANGGRAPH = {
    "memory": lg_fixtures._checkpointer_memory,  # LangGraph's async fixture uses it too
    "sqlite_aio": lg_fixtures._checkpointer_sqlite_aio,
    "postgres_aio": lg_fixtures._checkpointer_postgres_aio,
    "postgres_aio_pipe": lg_fixtures._checkpointer_postgres_aio_pipe,
    "postgres_aio_pool": lg_fixtures._checkpointer_postgres_aio_pool,
}


def _chosen(variable: str, default: str) -> list[str]:
    return [n.strip() for n in os.environ.get(variable, default).split(",") if n.strip()]


LANGGRAPH_SAVERS = _chosen("DG_SUITE_LANGGRAPH_SAVERS", "memory,sqlite,postgres")
"""LangGraph's savers to run (sync names; an async run takes the async one of each kind)."""

_ASYNC_OF = {"memory": "memory", "sqlite": "sqlite_aio", "postgres": "postgres_aio"}


SYNC_PARAMS = [n for n in LANGGRAPH_SAVERS if n in SYNC_LANGGRAPH] + [f"dg_{n}" for n in OURS]
ASYNC_PARAMS = [
    _ASYNC_OF.get(n, n) for n in LANGGRAPH_SAVERS if _ASYNC_OF.get(n, n) in ASYNC_LANGGRAPH
] + [f"dg_{n}_aio" for n in OURS]


# --- the fixtures LangGraph's tests take ----------------------------------------------------


@pytest.fixture(scope="function", params=SYNC_PARAMS)
def sync_checkpointer(request: pytest.FixtureRequest) -> Iterator[Any]:
    name: str = request.param
    factory = SYNC_OURS[name[3:]] if name.startswith("dg_") else SYNC_LANGGRAPH[name]
    with factory() as checkpointer:
        yield checkpointer


@pytest.fixture(scope="function", params=ASYNC_PARAMS)
async def async_checkpointer(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    name: str = request.param
    if name.startswith("dg_"):
        async with ASYNC_OURS[name[3:-4]]() as checkpointer:
            yield checkpointer
    elif name == "memory":
        with ASYNC_LANGGRAPH[name]() as checkpointer:
            yield checkpointer
    else:
        async with ASYNC_LANGGRAPH[name]() as checkpointer:
            yield checkpointer


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Add ours to the savers test_prune_postgres parametrizes ``make_checkpointer`` over."""
    if "make_checkpointer" not in metafunc.fixturenames:
        return
    for mark in metafunc.definition.iter_markers("parametrize"):
        if mark.args[0] != "make_checkpointer":
            continue
        savers: list[Any] = mark.args[1]
        if any(getattr(p, "id", "").startswith("dg_") for p in savers):
            return  # the list is shared by the module's tests: added once
        is_async = any(f in savers for f in ASYNC_LANGGRAPH.values())
        ours = ASYNC_OURS if is_async else SYNC_OURS
        suffix = "_aio" if is_async else ""
        savers.extend(pytest.param(ours[n], id=f"dg_{n}{suffix}") for n in OURS)
        return


__all__ = [
    "NO_DOCKER",
    "async_checkpointer",
    "pytest_generate_tests",
    "sync_checkpointer",
]
