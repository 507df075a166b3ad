"""Moving in (SPEC §14.2): copy threads written by LangGraph's own savers into a store.

`import_threads(source, target)` reads every checkpoint of the source saver (LangGraph's
``PostgresSaver`` or ``SqliteSaver``, or any `BaseCheckpointSaver`) and writes it through a
`DurableSaver` (or `AsyncDurableSaver`, with `aimport_threads`): each thread's whole history in
order, with LangGraph's own checkpoint ids, parents, metadata, channel versions (their string
versions continue, see `SaverCore.get_next_version`) and pending writes in their task order, and
each subgraph namespace as a child thread under its root. An imported thread resumes under our
saver where it stopped (an ``interrupt()`` is answered with ``Command(resume=...)``).

The task path of each pending write, which LangGraph's read API does not return, comes from the
source's tables (``task_paths_from_postgres`` / ``task_paths_from_sqlite``); without it the writes
keep LangGraph's order only where task ids sort as their paths.

A thread the target already has is skipped (reported as such), so an interrupted import can be
run again. `durable-graph langgraph import` is the command line form.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

from durable_graph.core.ops import StoreOp, drive, drive_async, store_op
from durable_graph.langgraph import codec
from durable_graph.langgraph.async_saver import AsyncDurableSaver
from durable_graph.langgraph.saver import DurableSaver

TaskPaths = Callable[[str, str, str], dict[str, str]]
"""``(thread_id, checkpoint_ns, checkpoint_id) -> {task_id: task_path}`` of a source."""


@dataclass
class ImportResult:
    imported: list[str] = field(default_factory=list)
    """Threads copied, in the order they were."""
    skipped: list[str] = field(default_factory=list)
    """Threads the target already had."""
    checkpoints: int = 0
    writes: int = 0


def _by_thread(
    tuples: Iterable[CheckpointTuple], wanted: set[str] | None
) -> dict[str, dict[str, list[CheckpointTuple]]]:
    """thread -> namespace -> its checkpoints oldest first (LangGraph lists newest first)."""
    out: dict[str, dict[str, list[CheckpointTuple]]] = defaultdict(lambda: defaultdict(list))
    for t in tuples:
        conf = t.config["configurable"]
        thread_id = str(conf["thread_id"])
        if wanted is None or thread_id in wanted:
            out[thread_id][str(conf.get("checkpoint_ns") or "")].append(t)
    for namespaces in out.values():
        for ns in namespaces:
            namespaces[ns].sort(key=lambda t: str(t.config["configurable"]["checkpoint_id"]))
    return out


def _plan(
    thread_id: str, namespaces: dict[str, list[CheckpointTuple]], paths: TaskPaths | None
) -> list[tuple[RunnableConfig, CheckpointTuple, list[tuple[str, str, list[tuple[str, Any]]]]]]:
    """Per checkpoint, root namespace first: (put config, tuple, [(task, path, writes)])."""
    steps = []
    for ns in sorted(namespaces, key=lambda n: (n != "", n)):
        for t in namespaces[ns]:
            parent = (t.parent_config or {}).get("configurable", {}).get("checkpoint_id")
            config: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}
            if parent is not None:
                config["configurable"]["checkpoint_id"] = parent
            checkpoint_id = str(t.config["configurable"]["checkpoint_id"])
            task_path = paths(thread_id, ns, checkpoint_id) if paths and t.pending_writes else {}
            groups: list[tuple[str, str, list[tuple[str, Any]]]] = []
            for task_id, channel, value in t.pending_writes or ():
                if not groups or groups[-1][0] != task_id:
                    groups.append((task_id, task_path.get(task_id, ""), []))
                groups[-1][2].append((channel, value))
            steps.append((config, t, groups))
    return steps


def _importing(
    tuples: Iterable[CheckpointTuple],
    thread_ids: Sequence[str] | None,
    task_paths: TaskPaths | None,
    put: str,
    put_writes: str,
) -> Generator[StoreOp, Any, ImportResult]:
    """The import written once for both savers (`durable_graph.core.ops`): it yields the
    target saver's calls, ``put`` and ``put_writes`` naming its sync or async methods."""
    result = ImportResult()
    wanted = None if thread_ids is None else set(thread_ids)
    for thread_id, namespaces in _by_thread(tuples, wanted).items():
        codec.store_thread(thread_id, "")
        if (yield store_op("store.thread", thread_id)) is not None:
            result.skipped.append(thread_id)
            continue
        for config, t, groups in _plan(thread_id, namespaces, task_paths):
            versions = t.checkpoint["channel_versions"]
            stored = yield store_op(put, config, t.checkpoint, t.metadata, versions)
            for task_id, path, writes in groups:
                yield store_op(put_writes, stored, writes, task_id, path)
                result.writes += len(writes)
            result.checkpoints += 1
        result.imported.append(thread_id)
    return result


def import_threads(
    source: BaseCheckpointSaver[Any],
    target: DurableSaver,
    thread_ids: Sequence[str] | None = None,
    *,
    task_paths: TaskPaths | None = None,
) -> ImportResult:
    """Copy ``source``'s threads (all, or ``thread_ids``) into ``target``'s store."""
    flow = _importing(source.list(None), thread_ids, task_paths, "put", "put_writes")
    return drive(flow, lambda op: op.on(target))


async def aimport_threads(
    source: BaseCheckpointSaver[Any],
    target: AsyncDurableSaver,
    thread_ids: Sequence[str] | None = None,
    *,
    task_paths: TaskPaths | None = None,
) -> ImportResult:
    """`import_threads` into an async store (``source`` read with its async API)."""
    tuples = [t async for t in source.alist(None)]
    flow = _importing(tuples, thread_ids, task_paths, "aput", "aput_writes")
    return await drive_async(flow, lambda op: op.on(target))


def task_paths_from_postgres(dsn: str) -> TaskPaths:
    """Task paths from ``PostgresSaver``'s ``checkpoint_writes`` (none before its 3.x column)."""
    import psycopg

    conn = psycopg.connect(dsn, autocommit=True)

    def paths(thread_id: str, ns: str, checkpoint_id: str) -> dict[str, str]:
        try:
            rows = conn.execute(
                "SELECT task_id, task_path FROM checkpoint_writes"
                " WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s",
                (thread_id, ns, checkpoint_id),
            ).fetchall()
        except psycopg.errors.UndefinedColumn:
            return {}
        return {str(task): str(path) for task, path in rows}

    return paths


def task_paths_from_sqlite(conn: sqlite3.Connection) -> TaskPaths:
    """Task paths from ``SqliteSaver``'s ``writes`` table (none in files without the column)."""

    def paths(thread_id: str, ns: str, checkpoint_id: str) -> dict[str, str]:
        try:
            rows = conn.execute(
                "SELECT task_id, task_path FROM writes"
                " WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
                (thread_id, ns, checkpoint_id),
            ).fetchall()
        except sqlite3.OperationalError:
            return {}
        return {str(task): str(path) for task, path in rows}

    return paths


__all__ = [
    "ImportResult",
    "aimport_threads",
    "import_threads",
    "task_paths_from_postgres",
    "task_paths_from_sqlite",
]
