"""LangGraph's own checkpointer conformance suite (langgraph-checkpoint-conformance) against
`DurableSaver` and `AsyncDurableSaver` on the in-memory, SQLite and PostgreSQL stores (SPEC §12).

Every capability must be detected and every one of its tests must pass.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

from durable_graph.aio import (
    AsyncInMemoryCheckpointer,
    AsyncPostgresCheckpointer,
    AsyncSqliteCheckpointer,
)
from durable_graph.langgraph import AsyncDurableSaver, DurableSaver
from durable_graph.langgraph.codec import safe_serializer
from durable_graph.langgraph.encryption import SealingSerializer
from durable_graph.memory.store import InMemoryCheckpointer
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.sqlite import SqliteCheckpointer

SaverFactory = Callable[[], AsyncGenerator[BaseCheckpointSaver[int], None]]


def _check(name: str, factory: SaverFactory) -> None:
    registered = checkpointer_test(name=name)(factory)
    report = asyncio.run(validate(registered))
    failures = [f for r in report.results.values() for f in r.failures]
    detected = {c for c, r in report.results.items() if r.detected}
    passed = sum(r.tests_passed for r in report.results.values())
    failed = sum(r.tests_failed for r in report.results.values())
    print(f"{name}: {passed}/{passed + failed} passed")
    assert detected == {c.value for c in ALL_CAPABILITIES}
    assert failures == []
    assert (passed, failed) == (81, 0)


def test_durable_saver_passes_conformance_on_memory() -> None:
    async def factory() -> AsyncGenerator[BaseCheckpointSaver[int], None]:
        with InMemoryCheckpointer() as store:
            yield DurableSaver(store)

    _check("DurableSaver[memory]", factory)


def test_durable_saver_passes_conformance_on_sqlite(tmp_path: Path) -> None:
    async def factory() -> AsyncGenerator[BaseCheckpointSaver[int], None]:
        with SqliteCheckpointer.open(str(tmp_path / f"{uuid.uuid4().hex}.db")) as store:
            yield DurableSaver(store)

    _check("DurableSaver[sqlite]", factory)


def test_durable_saver_passes_conformance_on_postgres(pg_dsn: str, pg_schema: str) -> None:
    async def factory() -> AsyncGenerator[BaseCheckpointSaver[int], None]:
        with PostgresCheckpointer.open(pg_dsn, PostgresConfig(schema=pg_schema)) as store:
            yield DurableSaver(store)

    _check("DurableSaver[postgres]", factory)


def test_async_durable_saver_passes_conformance_on_memory() -> None:
    async def factory() -> AsyncGenerator[BaseCheckpointSaver[int], None]:
        store = AsyncInMemoryCheckpointer()
        yield AsyncDurableSaver(store)
        await store.close()

    _check("AsyncDurableSaver[memory]", factory)


def test_async_durable_saver_passes_conformance_on_sqlite(tmp_path: Path) -> None:
    async def factory() -> AsyncGenerator[BaseCheckpointSaver[int], None]:
        store = await AsyncSqliteCheckpointer.open(str(tmp_path / f"{uuid.uuid4().hex}.db"))
        yield AsyncDurableSaver(store)
        await store.close()

    _check("AsyncDurableSaver[sqlite]", factory)


def test_async_durable_saver_passes_conformance_on_postgres(pg_dsn: str, pg_schema: str) -> None:
    async def factory() -> AsyncGenerator[BaseCheckpointSaver[int], None]:
        store = await AsyncPostgresCheckpointer.open(pg_dsn, PostgresConfig(schema=pg_schema))
        yield AsyncDurableSaver(store)
        await store.close()

    _check("AsyncDurableSaver[postgres]", factory)


def _encryption() -> Any:
    """An SDK ``Encryption`` (langgraph.json's ``encryption``) with reversible handlers."""
    import base64
    import json

    from langgraph_sdk import Encryption

    encryption = Encryption()

    def flip(data: bytes) -> bytes:
        return bytes(c ^ 0x5A for c in data)

    @encryption.encrypt.blob
    async def encrypt_blob(ctx: Any, blob: bytes) -> bytes:
        return b"E" + flip(blob)

    @encryption.decrypt.blob
    async def decrypt_blob(ctx: Any, blob: bytes) -> bytes:
        assert blob[:1] == b"E"
        return flip(blob[1:])

    @encryption.encrypt.json
    async def encrypt_json(ctx: Any, data: dict[str, Any]) -> dict[str, Any]:
        return {k: base64.b64encode(flip(json.dumps(v).encode())).decode() for k, v in data.items()}

    @encryption.decrypt.json
    async def decrypt_json(ctx: Any, data: dict[str, Any]) -> dict[str, Any]:
        return {k: json.loads(flip(base64.b64decode(v))) for k, v in data.items()}

    return encryption


@pytest.mark.filterwarnings("ignore:The Encryption API is in beta")
def test_savers_sealed_by_an_encryption_pass_conformance(tmp_path: Path) -> None:
    """langgraph.json's ``encryption`` (D286) changes what is stored, never what a saver
    answers: every capability, the sync saver on SQLite and the async one in memory."""
    sealed = SealingSerializer(_encryption(), safe_serializer())

    async def sync_factory() -> AsyncGenerator[BaseCheckpointSaver[int], None]:
        with SqliteCheckpointer.open(str(tmp_path / f"{uuid.uuid4().hex}.db")) as store:
            yield DurableSaver(store, serde=sealed)

    async def async_factory() -> AsyncGenerator[BaseCheckpointSaver[int], None]:
        store = AsyncInMemoryCheckpointer()
        yield AsyncDurableSaver(store, serde=sealed)
        await store.close()

    _check("DurableSaver[sqlite, encryption]", sync_factory)
    _check("AsyncDurableSaver[memory, encryption]", async_factory)
