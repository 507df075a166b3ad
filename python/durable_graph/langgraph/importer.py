"""Moving in (SPEC §14.2): copy threads written by LangGraph's own savers into a store.

`import_threads(source, target)` reads the checkpoints of the source saver (LangGraph's
``PostgresSaver`` or ``SqliteSaver``, or any `BaseCheckpointSaver`) and writes them through a
`DurableSaver` (or `AsyncDurableSaver`, with `aimport_threads`): each thread's whole history in
order, with LangGraph's own checkpoint ids, parents, metadata, channel versions (their string
versions continue, see `SaverCore.get_next_version`) and pending writes in their task order, and
each subgraph namespace as a child thread under its root. An imported thread resumes under our
saver where it stopped (an ``interrupt()`` is answered with ``Command(resume=...)``).

What is guaranteed (docs/decisions.md D154):

- **Nothing stored in the source runs as code.** The source is read with `StrictReader` in place
  of its own serializer (LangGraph's default one imports and calls whatever a msgpack value
  names): the types of `codec.safe_serializer` load, and any other type, a pickle or an ``lc``
  constructor outside LangChain's own allow-list is refused — where LangGraph's strict mode
  would quietly keep the raw data, the import stops that thread instead.
- **A thread is read whole before anything of it is written**: a refused value fails that thread
  (`ImportResult.failed` names it and why) with nothing of it written; the other threads go on.
- **A rerun finishes what a failed run began.** The store takes one checkpoint per write, so a
  thread whose writing stopped part way (a value the store refuses, a crash) is left with the
  checkpoints written so far; the next run writes only the checkpoints and task writes the
  target lacks (compared by id), so it completes the thread once the source is fixed. A thread
  the target already holds whole, or holding a checkpoint the source lacks (it ran on under our
  saver since), is reported skipped and nothing is written.

The task path of each pending write, which LangGraph's read API does not return, comes from the
source's tables (``task_paths_from_postgres`` / ``task_paths_from_sqlite``); without it the writes
keep LangGraph's order only where task ids sort as their paths. ``threads_in_sqlite`` /
``threads_in_postgres`` list the source's threads from its tables, so a refused value is reported
under its thread (`durable-graph langgraph import` passes them; without ``thread_ids`` the threads
are found by listing the source, and a refusal there fails the whole import).

A source's thread id the store cannot hold fails that thread alone, named, the others imported:
one whose bytes are not UTF-8 (a SQLite file holds any bytes as TEXT; a PostgreSQL database in
``SQL_ASCII`` does too), listed by ``threads_in_sqlite`` / ``threads_in_postgres`` with its
undecodable bytes as lone surrogates (``surrogateescape``, as Python reads such a ``--thread``
argument) and reported under its bytes written ``\\xNN`` (`shown_id`); one with NUL or U+001F
(refused by the store). Decoding the listing with the ``sqlite3`` module's default raised a raw
``OperationalError`` that ended the whole import (issue 46 item 9).
"""

from __future__ import annotations

import copy
import json
import sqlite3
from collections import defaultdict
from collections.abc import Awaitable, Callable, Generator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import ormsgpack
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.serde import _msgpack as lg_msgpack
from langgraph.checkpoint.serde.jsonplus import _is_safe_json_type

from durable_graph.core.errors import GraphError, ValidationError
from durable_graph.core.scalars import check_identifier
from durable_graph.langgraph import codec
from durable_graph.langgraph.async_saver import AsyncDurableSaver
from durable_graph.langgraph.saver import DurableSaver

TaskPaths = Callable[[str, str, str], dict[str, str]]
"""``(thread_id, checkpoint_ns, checkpoint_id) -> {task_id: task_path}`` of a source."""

_Saver = TypeVar("_Saver", bound=BaseCheckpointSaver[Any])


class RefusedValue(ValueError):
    """A source value the import does not load: loading it would run code the source names."""


# LangGraph's msgpack extension codes (langgraph.checkpoint.serde.jsonplus): the ones that import
# and call a (module, name), the one that calls a method, and the data-only ones.
_CONSTRUCTORS = frozenset({0, 1, 2, 4, 5})
_METHOD = 3
_DATA = frozenset({6, 7})  # a numpy array's bytes, a DeltaChannel snapshot


def _check_msgpack(data: bytes) -> None:
    """Refuse a msgpack value naming a callable outside LangGraph's safe types."""
    refused: list[str] = []

    def hook(code: int, payload: bytes) -> None:
        inner = ormsgpack.unpackb(payload, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
        if code in _DATA:
            return None
        named = (
            tuple(str(part) for part in inner[:2])
            if isinstance(inner, list | tuple) and len(inner) >= 3
            else ()
        )
        if code in _CONSTRUCTORS and named in lg_msgpack.SAFE_MSGPACK_TYPES:
            return None
        method = (*named, str(inner[3])) if code == _METHOD and len(inner) >= 4 else ()
        if method and method in lg_msgpack.SAFE_MSGPACK_METHODS:
            return None
        refused.append(".".join(method or named) or f"msgpack extension {code}")
        raise RefusedValue(refused[-1])

    try:
        ormsgpack.unpackb(data, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
    except (ValueError, ormsgpack.MsgpackDecodeError) as exc:
        what = refused[0] if refused else f"undecodable msgpack ({exc})"
        raise RefusedValue(f"a value naming {what}, which the import never loads") from None


def _check_json(data: bytes) -> None:
    """Refuse an ``lc: 2`` constructor outside LangGraph's safe types (``lc: 1`` ones are
    LangChain's, whose reviver refuses anything outside langchain-core)."""

    def hook(obj: dict[str, Any]) -> dict[str, Any]:
        if obj.get("lc") == 2 and obj.get("type") == "constructor":
            ident = obj.get("id")
            if not isinstance(ident, list) or not _is_safe_json_type(ident):
                raise RefusedValue(f"a JSON constructor of {ident!r}, which the import never loads")
        return obj

    json.loads(data, object_hook=hook)


class StrictReader:
    """`codec.safe_serializer`, made to refuse rather than degrade: the source's serializer
    during an import. A value it does not load raises `RefusedValue`."""

    def __init__(self) -> None:
        self._inner = codec.safe_serializer()

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return self._inner.dumps_typed(obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        kind, payload = data
        if kind == "msgpack":
            _check_msgpack(payload)
        elif kind == "json":
            _check_json(payload)
        elif kind not in ("null", "bytes", "bytearray"):
            raise RefusedValue(f"a {kind!r} value, which the import never loads")
        try:
            return self._inner.loads_typed(data)
        except ValueError as exc:  # LangChain's reviver refusing an lc: 1 constructor
            raise RefusedValue(str(exc).split(". ")[0]) from None


def strict_copy(source: _Saver) -> _Saver:
    """``source`` reading with `StrictReader` (a shallow copy: connection and lock shared)."""
    reader = copy.copy(source)
    reader.serde = StrictReader()
    return reader


@dataclass
class ImportResult:
    imported: list[str] = field(default_factory=list)
    """Threads written (whole, or completed), in the order they were."""
    skipped: list[str] = field(default_factory=list)
    """Threads the target already held whole: nothing written."""
    failed: dict[str, str] = field(default_factory=dict)
    """Threads not imported (or not completed), with why."""
    checkpoints: int = 0
    writes: int = 0


@dataclass(frozen=True)
class _Step:
    """One source checkpoint to write: the put's config (its LangGraph parent), its tuple, the
    config it is stored under, and its pending writes grouped by task (task, path, writes)."""

    put_config: RunnableConfig
    source: CheckpointTuple
    stored: RunnableConfig
    groups: list[tuple[str, str, list[tuple[str, Any]]]]

    @property
    def namespace(self) -> str:
        return str(self.stored["configurable"]["checkpoint_ns"])

    @property
    def checkpoint_id(self) -> str:
        return str(self.stored["configurable"]["checkpoint_id"])


def _by_thread(tuples: Iterable[CheckpointTuple]) -> dict[str, list[CheckpointTuple]]:
    out: dict[str, list[CheckpointTuple]] = defaultdict(list)
    for t in tuples:
        out[str(t.config["configurable"]["thread_id"])].append(t)
    return out


def _plan(thread_id: str, tuples: list[CheckpointTuple], paths: TaskPaths | None) -> list[_Step]:
    """The thread's checkpoints to write, root namespace first, each namespace oldest first
    (LangGraph lists newest first)."""
    namespaces: dict[str, list[CheckpointTuple]] = defaultdict(list)
    for t in tuples:
        namespaces[str(t.config["configurable"].get("checkpoint_ns") or "")].append(t)
    steps = []
    for ns in sorted(namespaces, key=lambda n: (n != "", n)):
        for t in sorted(
            namespaces[ns], key=lambda t: str(t.config["configurable"]["checkpoint_id"])
        ):
            parent = (t.parent_config or {}).get("configurable", {}).get("checkpoint_id")
            config: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}
            if parent is not None:
                config["configurable"]["checkpoint_id"] = parent
            checkpoint_id = str(t.config["configurable"]["checkpoint_id"])
            stored: RunnableConfig = {
                "configurable": {
                    "thread_id": thread_id,
                    "checkpoint_ns": ns,
                    "checkpoint_id": checkpoint_id,
                }
            }
            task_path = paths(thread_id, ns, checkpoint_id) if paths and t.pending_writes else {}
            groups: list[tuple[str, str, list[tuple[str, Any]]]] = []
            for task_id, channel, value in t.pending_writes or ():
                if not groups or groups[-1][0] != task_id:
                    groups.append((task_id, task_path.get(task_id, ""), []))
                groups[-1][2].append((channel, value))
            steps.append(_Step(config, t, stored, groups))
    return steps


def _namespaces(steps: list[_Step]) -> list[str]:
    return sorted({s.namespace for s in steps}, key=lambda n: (n != "", n))


def _held(tuples: Iterable[CheckpointTuple]) -> dict[str, set[str]]:
    """What the target holds of a namespace: checkpoint id -> the tasks with writes there."""
    return {
        str(t.config["configurable"]["checkpoint_id"]): {w[0] for w in t.pending_writes or ()}
        for t in tuples
    }


def _moved_on(steps: list[_Step], held: dict[str, dict[str, set[str]]]) -> bool:
    """Whether the target holds a checkpoint of the thread that the source lacks: the thread has
    run on under our saver since it was imported, so it is not completed from the source."""
    ours = {(s.namespace, s.checkpoint_id) for s in steps}
    return any((ns, cid) not in ours for ns, ids in held.items() for cid in ids)


def _scope(thread_id: str, ns: str | None = None) -> RunnableConfig:
    conf: dict[str, Any] = {"thread_id": thread_id}
    if ns is not None:
        conf["checkpoint_ns"] = ns
    return {"configurable": conf}


_FAILURES = (ValueError, TypeError, NotImplementedError, GraphError)
"""What fails one thread, the others going on: a value refused (`RefusedValue`, a
`ValidationError`; LangGraph's encoder raises TypeError for one too deep), a write the store
refuses. Anything else (the store down) stops the import."""


def shown_id(thread_id: str) -> str:
    """A source thread id as it is reported: its undecodable bytes (lone surrogates, from
    ``surrogateescape``) written ``\\xNN``, so the name prints and encodes as JSON."""
    return thread_id.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _refused_id(thread_id: str) -> str | None:
    """Why the store cannot hold a source's thread id (its bytes not UTF-8, a NUL, U+001F, more
    than 512 bytes), else None."""
    if shown_id(thread_id) != thread_id:
        return (
            "its id is not valid UTF-8 (bytes "
            f"{thread_id.encode('utf-8', 'surrogateescape')!r}); the store holds UTF-8 thread "
            "ids only: give the thread a UTF-8 id in the source to import it"
        )
    try:
        codec.store_thread(check_identifier("thread_id", thread_id), "")
    except ValidationError as exc:
        return f"its id cannot be stored: {exc}"
    return None


def _failure(step: _Step | None, exc: BaseException) -> str:
    if step is None:
        return f"reading its checkpoints from the source: {exc}"
    ns = f" (namespace {step.namespace})" if step.namespace else ""
    return f"checkpoint {step.checkpoint_id}{ns}: {exc}"


def _missing(
    steps: list[_Step], held: dict[str, dict[str, set[str]]]
) -> list[tuple[_Step, bool, list[tuple[str, str, list[tuple[str, Any]]]]]]:
    """What the target lacks of each step, in order: whether its checkpoint (then every group of
    its writes), else the groups of the tasks that have no writes there yet."""
    out = []
    for step in steps:
        tasks = held[step.namespace].get(step.checkpoint_id)
        groups = [g for g in step.groups if tasks is None or g[0] not in tasks]
        out.append((step, tasks is None, groups))
    return out


def _settle(
    result: ImportResult, thread_id: str, tuples: list[CheckpointTuple], before: tuple[int, int]
) -> None:
    """File a thread that did not fail: imported when it wrote, skipped when the target held it
    whole already (neither when the source has no checkpoint of it)."""
    if tuples:
        wrote = (result.checkpoints, result.writes) != before
        (result.imported if wrote else result.skipped).append(thread_id)


@dataclass(frozen=True)
class _Call:
    """One saver call the import of a thread asks its driver for: ``source.list`` or
    ``target.list`` (answered with the tuples), ``target.put`` or ``target.put_writes``."""

    name: str
    args: tuple[Any, ...]


_Thread = Generator[_Call, Any, None]
"""The import of one thread, written once (`_import_thread`): it yields the saver calls it
needs, and `import_threads` makes them on a sync saver, `aimport_threads` on an async one."""


def _import_thread(
    thread_id: str,
    listed: dict[str, list[CheckpointTuple]] | None,
    task_paths: TaskPaths | None,
    result: ImportResult,
) -> _Thread:
    refused = _refused_id(thread_id)  # fails this thread only, named
    if refused is not None:
        result.failed[shown_id(thread_id)] = refused
        return
    before = (result.checkpoints, result.writes)
    step: _Step | None = None
    try:
        # The whole thread is read (and every value checked) before anything is written.
        if listed is not None:
            tuples = listed[thread_id]
        else:
            tuples = yield _Call("source.list", (_scope(thread_id),))
        steps = _plan(thread_id, tuples, task_paths)
        held = {}
        for ns in _namespaces(steps):
            held[ns] = _held((yield _Call("target.list", (_scope(thread_id, ns),))))
        if _moved_on(steps, held):
            result.skipped.append(thread_id)
            return
        for step, whole, groups in _missing(steps, held):
            if whole:
                checkpoint, metadata = step.source.checkpoint, step.source.metadata
                versions = checkpoint["channel_versions"]
                yield _Call("target.put", (step.put_config, checkpoint, metadata, versions))
                result.checkpoints += 1
            for task_id, path, writes in groups:
                yield _Call("target.put_writes", (step.stored, writes, task_id, path))
                result.writes += len(writes)
    except _FAILURES as exc:
        result.failed[thread_id] = _failure(step, exc)
        return
    _settle(result, thread_id, tuples, before)


@dataclass(frozen=True)
class _Failed:
    """A call's failure, thrown into the thread's import where it is reported."""

    exc: BaseException


def _next_call(thread: _Thread, answer: Any) -> _Call | None:
    """The thread's next call, given the last one's answer (or failure); None once it is done."""
    try:
        return thread.throw(answer.exc) if isinstance(answer, _Failed) else thread.send(answer)
    except StopIteration:
        return None


def import_threads(
    source: BaseCheckpointSaver[Any],
    target: DurableSaver,
    thread_ids: Sequence[str] | None = None,
    *,
    task_paths: TaskPaths | None = None,
) -> ImportResult:
    """Copy ``source``'s threads (all, or ``thread_ids``) into ``target``'s store."""
    reader = strict_copy(source)
    calls: dict[str, Callable[..., Any]] = {
        "source.list": lambda config: list(reader.list(config)),
        "target.list": lambda config: list(target.list(config)),
        "target.put": target.put,
        "target.put_writes": target.put_writes,
    }
    listed = None if thread_ids is not None else _by_thread(reader.list(None))
    result = ImportResult()
    for thread_id in list(listed) if listed is not None else thread_ids or ():
        thread = _import_thread(thread_id, listed, task_paths, result)
        answer: Any = None
        while (call := _next_call(thread, answer)) is not None:
            try:
                answer = calls[call.name](*call.args)
            except _FAILURES as exc:  # the thread's own handler reports it
                answer = _Failed(exc)
    return result


async def aimport_threads(
    source: BaseCheckpointSaver[Any],
    target: AsyncDurableSaver,
    thread_ids: Sequence[str] | None = None,
    *,
    task_paths: TaskPaths | None = None,
) -> ImportResult:
    """`import_threads` into an async store (``source`` read with its async API)."""
    reader = strict_copy(source)

    async def source_list(config: RunnableConfig | None) -> list[CheckpointTuple]:
        return [t async for t in reader.alist(config)]

    async def target_list(config: RunnableConfig) -> list[CheckpointTuple]:
        return [t async for t in target.alist(config)]

    calls: dict[str, Callable[..., Awaitable[Any]]] = {
        "source.list": source_list,
        "target.list": target_list,
        "target.put": target.aput,
        "target.put_writes": target.aput_writes,
    }
    listed = None if thread_ids is not None else _by_thread(await source_list(None))
    result = ImportResult()
    for thread_id in list(listed) if listed is not None else thread_ids or ():
        thread = _import_thread(thread_id, listed, task_paths, result)
        answer: Any = None
        while (call := _next_call(thread, answer)) is not None:
            try:
                answer = await calls[call.name](*call.args)
            except _FAILURES as exc:  # the thread's own handler reports it
                answer = _Failed(exc)
    return result


def _decoded(raw: object) -> str:
    """A listed id: bytes as UTF-8, any undecodable byte kept as a lone surrogate."""
    if isinstance(raw, bytes | bytearray | memoryview):
        return bytes(raw).decode("utf-8", "surrogateescape")
    return str(raw)


def threads_in_sqlite(conn: sqlite3.Connection) -> list[str]:
    """The thread ids of ``SqliteSaver``'s ``checkpoints`` table, read without decoding a value;
    an id whose bytes are not UTF-8 is listed too (see the module docstring)."""
    rows = conn.execute(
        "SELECT DISTINCT CAST(thread_id AS BLOB) AS t FROM checkpoints ORDER BY t"
    ).fetchall()
    return [_decoded(row[0]) for row in rows]


def utf8_dsn(dsn: str) -> str:
    """``dsn`` with ``client_encoding=utf8``: text of a ``SQL_ASCII`` source database reads as
    str (psycopg gives bytes there), and a row that is not UTF-8 fails alone."""
    import psycopg

    return psycopg.conninfo.make_conninfo(dsn, client_encoding="utf8")


def threads_in_postgres(dsn: str) -> list[str]:
    """The thread ids of ``PostgresSaver``'s ``checkpoints`` table, read without decoding a value;
    an id whose bytes are not UTF-8 (a ``SQL_ASCII`` database) is listed too (see the module
    docstring). Read as raw bytes (``client_encoding`` ``SQL_ASCII``: no conversion)."""
    import psycopg

    raw = psycopg.conninfo.make_conninfo(dsn, client_encoding="SQL_ASCII")
    with psycopg.connect(raw, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id"
        ).fetchall()
    return [_decoded(row[0]) for row in rows]


def task_paths_from_postgres(dsn: str) -> TaskPaths:
    """Task paths from ``PostgresSaver``'s ``checkpoint_writes`` (none before its 3.x column)."""
    import psycopg

    conn = psycopg.connect(utf8_dsn(dsn), autocommit=True)

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
    "RefusedValue",
    "StrictReader",
    "aimport_threads",
    "import_threads",
    "shown_id",
    "strict_copy",
    "task_paths_from_postgres",
    "task_paths_from_sqlite",
    "threads_in_postgres",
    "threads_in_sqlite",
    "utf8_dsn",
]
