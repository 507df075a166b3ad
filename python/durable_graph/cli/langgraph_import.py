"""``durable-graph langgraph import``: threads written by LangGraph's own savers into a store
(SPEC §14.2; `durable_graph.langgraph.importer`)."""

from __future__ import annotations

import argparse
import contextlib
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from durable_graph.cli.common import CliError, UsageError, output_of, store_of


@contextlib.contextmanager
def _source(args: argparse.Namespace) -> Iterator[tuple[Any, Any, list[str]]]:
    """(LangGraph's saver over the source, its task paths, the threads to import). The saver
    reads with `importer.StrictReader`: nothing the source stores runs as code."""
    try:
        from durable_graph.langgraph import importer
    except ImportError as exc:  # pragma: no cover - the extra is missing
        raise CliError(f"needs durable-graph[langgraph]: {exc}") from None
    if args.from_postgres:
        try:
            from langgraph.checkpoint.postgres import PostgresSaver
        except ImportError:
            raise CliError("--from-postgres needs langgraph-checkpoint-postgres") from None
        # UTF-8 text as str on any source (a SQL_ASCII database's included), a bad row failing
        # its thread alone.
        with PostgresSaver.from_conn_string(importer.utf8_dsn(args.from_postgres)) as saver:
            threads = args.thread or importer.threads_in_postgres(args.from_postgres)
            reader = importer.strict_copy(saver)
            yield reader, importer.task_paths_from_postgres(args.from_postgres), threads
        return
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver
    except ImportError:
        raise CliError("--from-sqlite needs langgraph-checkpoint-sqlite") from None
    if not Path(args.from_sqlite).is_file():
        raise CliError(f"no SqliteSaver file at {args.from_sqlite}")
    conn = sqlite3.connect(f"file:{args.from_sqlite}?mode=ro", uri=True, check_same_thread=False)
    try:
        threads = args.thread or importer.threads_in_sqlite(conn)
        lg_saver = SqliteSaver(conn, serde=importer.StrictReader())
        yield lg_saver, importer.task_paths_from_sqlite(conn), threads
    finally:
        conn.close()


def cmd_langgraph_import(args: argparse.Namespace) -> int:
    if bool(args.from_postgres) == bool(args.from_sqlite):
        raise UsageError("langgraph import needs one of --from-postgres DSN or --from-sqlite PATH")
    from durable_graph.langgraph import DurableSaver
    from durable_graph.langgraph.importer import import_threads

    out = output_of(args)
    with _source(args) as (source, paths, threads), store_of(args, must_exist=False) as store:
        result = import_threads(source, DurableSaver(store), threads, task_paths=paths)
    out.result(
        {
            "imported": result.imported,
            "skipped": result.skipped,
            "failed": result.failed,
            "checkpoints": result.checkpoints,
            "writes": result.writes,
        },
        f"imported {len(result.imported)} threads ({result.checkpoints} checkpoints, "
        f"{result.writes} pending writes); skipped {len(result.skipped)} already in the store"
        + (f": {', '.join(result.skipped)}" if result.skipped else ""),
    )
    for thread_id, why in result.failed.items():
        print(f"error: thread {thread_id!r} not imported: {why}", file=sys.stderr)
    return 1 if result.failed else 0
