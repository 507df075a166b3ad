"""OpenTelemetry spans (SPEC §13): one job's spans linked submit → attempts → commits → close,
within one process and across two store connections (the trace context travels in the store),
on the in-memory store and on PostgreSQL, sync and async."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from psycopg import sql

from durable_graph import Checkpointer, Completed, Submission, ValidationError
from durable_graph.core.model import BackoffPolicy
from durable_graph.memory.store import InMemoryCheckpointer
from durable_graph.observe.observer import TraceContext, observed
from durable_graph.observe.tracing import TracingObserver
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.postgres.async_store import AsyncPostgresCheckpointer
from durable_graph.sqlite import SqliteCheckpointer
from durable_graph.worker.aio import AsyncWorker
from durable_graph.worker.sync import RunContext, Worker
from service_support import sqlite_worker

RETRY_AT_ONCE = BackoffPolicy(base=timedelta(0))
"""The flaky handler's retry runs in the same test, not after the default backoff."""


@dataclass
class Tracing:
    provider: TracerProvider
    exporter: InMemorySpanExporter

    def spans(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.exporter.get_finished_spans() if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.spans(name)
        assert len(found) == 1, [s.name for s in self.exporter.get_finished_spans()]
        return found[0]


def _tracing() -> Tracing:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return Tracing(provider, exporter)


class _Flaky:
    """Raises on the first attempt, commits twice and returns on the second."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, ctx: RunContext) -> Any:
        self.calls += 1
        ctx.commit({"step": 1}, next=["two"])
        if self.calls == 1:
            raise RuntimeError("flaky model")
        ctx.commit({"step": 2})
        return "done"


def _ids(span: ReadableSpan) -> tuple[int, int]:
    assert span.context is not None
    return span.context.trace_id, span.context.span_id


def _parent(span: ReadableSpan) -> tuple[int, int] | None:
    return None if span.parent is None else (span.parent.trace_id, span.parent.span_id)


def _submit_in_a_request(store: Checkpointer, tracing: Tracing, thread: str) -> ReadableSpan:
    with tracing.provider.get_tracer("app").start_as_current_span("request"):
        store.run_queue.submit(Submission(thread, "go", max_attempts=2))
    return tracing.one("request")


def test_one_job_is_one_trace_from_submit_to_close() -> None:
    tracing = _tracing()
    with InMemoryCheckpointer() as raw:
        store = observed(raw, TracingObserver(raw, tracing.provider))
        request = _submit_in_a_request(store, tracing, "t-1")
        worker = Worker(store, _Flaky(), holder="w", backoff=RETRY_AT_ONCE)
        first, second = worker.run_once(), worker.run_once()
        assert first is not None and first.note == "retry"
        assert second is not None and second.outcome == Completed("done")

    trace_id = _ids(request)[0]
    submit = tracing.one("durable_graph.run_queue.submit")
    assert _parent(submit) == _ids(request)
    attempts = sorted(
        tracing.spans("durable_graph.attempt"),
        key=lambda s: int(str((s.attributes or {})["durable_graph.attempt"])),
    )
    assert [(s.attributes or {})["durable_graph.result"] for s in attempts] == [
        "released",
        "completed",
    ]
    for attempt in attempts:
        assert _parent(attempt) == _ids(submit)
        assert (attempt.attributes or {})["durable_graph.entry_id"] == 1
        assert str((attempt.attributes or {})["durable_graph.run_id"])
    commits = tracing.spans("durable_graph.commit")
    assert len(commits) == 3
    assert sum(_parent(c) == _ids(attempts[1]) for c in commits) == 2
    close = tracing.one("durable_graph.finish_attempt")
    assert _parent(close) == _ids(attempts[1])
    linked = [s for s in tracing.exporter.get_finished_spans() if _ids(s)[0] == trace_id]
    assert {s.name for s in linked} >= {
        "durable_graph.run_queue.submit",
        "durable_graph.attempt",  # its claim is taken inside begin_attempt, a poll: no span
        "durable_graph.commit",
        "durable_graph.finish_attempt",
    }
    assert not tracing.spans("durable_graph.run_queue.lease")  # polls make no spans
    assert not tracing.spans("durable_graph.begin_attempt")


@pytest.fixture
def pg_config(pg_dsn: str, pg_schema: str) -> Iterator[PostgresConfig]:
    yield PostgresConfig(schema=pg_schema)


def _assert_one_trace_across_stores(
    raw_a: PostgresCheckpointer | SqliteCheckpointer, raw_b: Checkpointer, thread: str
) -> None:
    """A job submitted through ``raw_a`` in a request and run twice by a worker on ``raw_b`` (two
    stores on one database) is one trace: the stored context, the attempts and the close."""
    submitter, runner = _tracing(), _tracing()
    a = observed(raw_a, TracingObserver(raw_a, submitter.provider))
    request = _submit_in_a_request(a, submitter, thread)
    b = observed(raw_b, TracingObserver(raw_b, runner.provider))
    worker = Worker(b, _Flaky(), holder="w", backoff=RETRY_AT_ONCE)
    assert worker.run_once() is not None and worker.run_once() is not None
    stored = raw_a.run_queue.trace_context(1)
    submit = submitter.one("durable_graph.run_queue.submit")
    assert _ids(submit)[0] == _ids(request)[0]
    assert stored is not None and stored.traceparent.split("-")[1] == f"{_ids(submit)[0]:032x}"
    attempts = runner.spans("durable_graph.attempt")
    assert len(attempts) == 2
    assert all(_parent(s) == _ids(submit) for s in attempts)
    close = runner.one("durable_graph.finish_attempt")
    assert _ids(close)[0] == _ids(submit)[0]


def test_trace_context_travels_through_postgres_to_another_worker(
    pg_dsn: str, pg_config: PostgresConfig
) -> None:
    with (
        PostgresCheckpointer.open(pg_dsn, pg_config) as raw_a,
        PostgresCheckpointer.open(pg_dsn, pg_config) as raw_b,
    ):
        _assert_one_trace_across_stores(raw_a, raw_b, "t-pg")


def test_trace_context_travels_through_a_sqlite_file_to_another_worker(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with SqliteCheckpointer.open(path) as raw_a, SqliteCheckpointer.open(path) as raw_b:
        _assert_one_trace_across_stores(raw_a, raw_b, "t-sqlite")


def test_async_postgres_store_links_attempts_to_the_submit(
    pg_dsn: str, pg_config: PostgresConfig
) -> None:
    tracing = _tracing()

    async def handler(ctx: Any) -> Any:
        await ctx.commit({"step": 1})
        return "ok"

    async def main() -> None:
        raw = await AsyncPostgresCheckpointer.open(pg_dsn, pg_config)
        async with observed(raw, TracingObserver(raw, tracing.provider)) as store:
            with tracing.provider.get_tracer("app").start_as_current_span("request"):
                await store.run_queue.submit(Submission("t-async", "go"))
            report = await AsyncWorker(store, handler, holder="w").run_once()
            assert report is not None and report.outcome == Completed("ok")

    asyncio.run(main())
    submit = tracing.one("durable_graph.run_queue.submit")
    attempt = tracing.one("durable_graph.attempt")
    assert _parent(attempt) == _ids(submit)
    assert _parent(tracing.one("durable_graph.commit")) == _ids(attempt)


def test_trace_context_is_checked_in_python_and_in_sql(
    pg_dsn: str, pg_config: PostgresConfig
) -> None:
    for bad in ("00-abc", "00-" + "0" * 32 + "-" + "1" * 16 + "-01", "01-" + "a" * 32 + "-b"):
        with pytest.raises(ValidationError, match="traceparent"):
            TraceContext(bad)
    with pytest.raises(ValidationError, match="tracestate"):
        TraceContext("00-" + "a" * 32 + "-" + "b" * 16 + "-01", "x\n")
    good = TraceContext("00-" + "a" * 32 + "-" + "b" * 16 + "-01", "vendor=1")
    with PostgresCheckpointer.open(pg_dsn, pg_config) as store:
        queue: Any = store.run_queue
        entry_id = queue.submit(Submission("t", "go")).entry_id
        assert queue.set_trace_context(entry_id, good) is True
        other = TraceContext("00-" + "c" * 32 + "-" + "d" * 16 + "-01")
        assert queue.set_trace_context(entry_id, other) is False  # the first one stays
        assert queue.trace_context(entry_id) == good
        assert queue.trace_context(entry_id + 1) is None
    with psycopg.connect(pg_dsn, autocommit=True) as conn, pytest.raises(psycopg.Error) as err:
        conn.execute(
            sql.SQL("SELECT * FROM {}.dg_set_trace_context_v2(%s, NULL, %s, NULL)").format(
                sql.Identifier(pg_config.schema)
            ),
            (entry_id, "not-a-traceparent"),
        )
    assert err.value.sqlstate == "DG000"


def test_worker_command_exports_an_attempts_spans_to_the_console(tmp_path: Path) -> None:
    app = "def handler(ctx):\n    ctx.commit({'a': 1})\n    return 1\n"
    (tmp_path / "traced_app.py").write_text(app)
    db = str(tmp_path / "store.db")
    with SqliteCheckpointer.open(db) as store:
        entry_id = store.run_queue.submit(Submission("t", "go")).entry_id
        worker = sqlite_worker(db, "traced_app:handler", tmp_path, "--traces", "console")
        try:
            assert store.run_queue.await_closed(entry_id, timedelta(seconds=30)) is not None
        finally:
            worker.send_signal(signal.SIGTERM)
            stdout, stderr = worker.communicate(timeout=30)
    assert worker.returncode == 0, stderr
    spans = []
    decoder = json.JSONDecoder()
    text = stdout.strip()
    while text:
        span, end = decoder.raw_decode(text)
        spans.append(span)
        text = text[end:].strip()
    by_name = {s["name"]: s for s in spans}
    attempt = by_name["durable_graph.attempt"]
    assert attempt["attributes"]["durable_graph.entry_id"] == entry_id
    for child in ("durable_graph.commit", "durable_graph.finish_attempt"):
        assert by_name[child]["context"]["trace_id"] == attempt["context"]["trace_id"]
        assert by_name[child]["parent_id"] == attempt["context"]["span_id"]


def test_sql_trace_context_calls_answer_as_for_an_unknown_id_across_tenants(
    pg_dsn: str, pg_config: PostgresConfig
) -> None:
    """SPEC §10.6 on the SQL API itself (issue #24): dg_set_trace_context_v2 /
    dg_trace_context_v2 take the tenant."""
    tp = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
    with PostgresCheckpointer.open(pg_dsn, pg_config) as store:
        entry_id = store.run_queue.submit(Submission("t", "go", tenant="a")).entry_id
    unknown = entry_id + 1000
    s = sql.Identifier(pg_config.schema)

    def answer(conn: psycopg.Connection[Any], query: str, *args: object) -> object:
        try:
            return conn.execute(sql.SQL(query).format(s), args).fetchall()
        except psycopg.Error as exc:
            return exc.sqlstate

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        set_v2 = "SELECT * FROM {}.dg_set_trace_context_v2(%s, %s, %s, NULL)"
        get_v2 = "SELECT * FROM {}.dg_trace_context_v2(%s, %s)"
        for other in ("b", None):
            assert answer(conn, set_v2, entry_id, other, tp) == [(False,)]
            assert answer(conn, set_v2, unknown, other, tp) == [(False,)]
        assert answer(conn, set_v2, entry_id, "a", tp) == [(True,)]
        for other in ("b", None):
            assert answer(conn, get_v2, entry_id, other) == answer(conn, get_v2, unknown, other)
            assert answer(conn, get_v2, entry_id, other) == []
        assert answer(conn, get_v2, entry_id, "a") == [(tp, None)]
        assert answer(conn, set_v2, entry_id, "", tp) == "DG000"  # the tenant is checked
