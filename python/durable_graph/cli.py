"""The ``durable-graph`` command line: operate a store, run workers, and run the demo.

The store is PostgreSQL when ``--dsn`` (or ``DURABLE_GRAPH_DSN``) is given, else the SQLite file
``--sqlite PATH`` (default ``./durable_graph.db``). Output is an aligned table by default and JSON
with ``--json``. Every user mistake — a bad argument, an unknown entry or thread, a refused call,
a store that cannot be reached — prints one ``error: ...`` line on stderr and exits non-zero
(1 for store and lookup errors, 2 for usage errors); never a traceback (docs/decisions.md D45).
``DURABLE_GRAPH_DEBUG=1`` re-raises unexpected errors with their traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import enum
import importlib
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NoReturn, TextIO

from .checkpointer import Checkpointer
from .errors import NotFound, StoreError, ValidationError
from .model import (
    ANY,
    Cancelled,
    Checkpoint,
    ClaimPolicy,
    Completed,
    EntryOutcome,
    Event,
    Failed,
    Interrupted,
    Mode,
    PruneResult,
    QueueEntry,
    RetentionPolicy,
    Submission,
    TenantFilter,
    ThreadInfo,
    WatchPolicy,
)

DSN_ENV = "DURABLE_GRAPH_DSN"
DEBUG_ENV = "DURABLE_GRAPH_DEBUG"
DEFAULT_SQLITE_PATH = "durable_graph.db"
PAGE = 500


class CliError(Exception):
    """A user mistake the CLI reports as one ``error:`` line (exit 1)."""


class UsageError(Exception):
    """A bad command line (exit 2)."""


# --- durations -----------------------------------------------------------------------------

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str) -> timedelta:
    """``30s``, ``5m``, ``2h``, ``7d``, ``250ms`` or a sum such as ``1h30m``."""
    compact = text.strip().replace(" ", "")
    parts = _DURATION_PART.findall(compact)
    if not compact or "".join(n + u for n, u in parts) != compact:
        raise argparse.ArgumentTypeError(
            f"invalid duration {text!r} (use e.g. 30s, 5m, 2h, 7d, 250ms)"
        )
    return timedelta(seconds=sum(float(n) * _UNITS[u] for n, u in parts))


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {value}")
    return value


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from None


# --- output --------------------------------------------------------------------------------


def to_jsonable(value: Any) -> Any:
    """Store values as plain JSON: datetimes ISO 8601, durations in seconds, outcomes tagged."""
    if isinstance(value, (Completed, Failed, Cancelled, Interrupted)):
        return {"kind": type(value).__name__.lower(), **_fields(value)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        data = _fields(value)
        if isinstance(value, QueueEntry):
            data["closed"] = value.closed
        return data
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    return value


def _fields(value: Any) -> dict[str, Any]:
    return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}


def _when(value: datetime | None) -> str:
    return "-" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _compact(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def outcome_text(outcome: EntryOutcome | None, limit: int = 40) -> str:
    if outcome is None:
        return "open"
    if isinstance(outcome, Completed):
        if outcome.output is None:
            return "completed"
        return f"completed {_compact(outcome.output, limit)}"
    if isinstance(outcome, Failed):
        return f"failed: {outcome.error}"
    if isinstance(outcome, Cancelled):
        return f"cancelled ({outcome.reason})"
    return f"interrupted by entry {outcome.by}"


class Output:
    """Tables for people, JSON for scripts."""

    def __init__(self, as_json: bool, out: TextIO = sys.stdout) -> None:
        self.as_json = as_json
        self.out = out

    def json(self, value: Any) -> None:
        json.dump(to_jsonable(value), self.out, ensure_ascii=False, indent=2)
        self.out.write("\n")

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        cells = [[str(c) for c in row] for row in rows]
        widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        self.out.write(fmt.format(*headers).rstrip() + "\n")
        for row in cells:
            self.out.write(fmt.format(*row).rstrip() + "\n")

    def fields(self, pairs: Sequence[tuple[str, object]]) -> None:
        width = max(len(k) for k, _ in pairs)
        for key, val in pairs:
            self.out.write(f"{key + ':':<{width + 1}} {val}\n")

    def line(self, text: str = "") -> None:
        self.out.write(text + "\n")


class Progress:
    """A status line on stderr for long operations: only on a terminal, or with ``--progress``."""

    def __init__(self, enabled: bool, err: TextIO = sys.stderr) -> None:
        self.enabled = enabled
        self.err = err
        self._tty = err.isatty()
        self._last = ""

    def __call__(self, text: str) -> None:
        if not self.enabled or text == self._last:
            return
        self._last = text
        if self._tty:
            self.err.write("\r\x1b[K" + text)
        elif text:
            self.err.write(text + "\n")
        self.err.flush()

    def done(self) -> None:
        self("")


# --- the store -----------------------------------------------------------------------------


def _dsn(args: argparse.Namespace) -> str | None:
    dsn: str | None = getattr(args, "dsn", None)
    if dsn is not None and getattr(args, "sqlite", None) is not None:
        raise UsageError("give either --dsn or --sqlite, not both")
    if dsn is None and getattr(args, "sqlite", None) is None:
        dsn = os.environ.get(DSN_ENV) or None
    return dsn


def _sqlite_path(args: argparse.Namespace) -> str:
    return str(getattr(args, "sqlite", None) or DEFAULT_SQLITE_PATH)


def _postgres_config(args: argparse.Namespace) -> Any:
    from .postgres import PostgresConfig

    schema = getattr(args, "schema", None)
    return PostgresConfig() if schema is None else PostgresConfig(schema=schema)


def open_store(args: argparse.Namespace, *, must_exist: bool = True) -> Checkpointer:
    """The store the options name. ``must_exist``: a missing SQLite file is an error, not created."""
    dsn = _dsn(args)
    if dsn is not None:
        try:
            from .postgres import PostgresCheckpointer
        except ImportError as exc:
            raise CliError(f"the PostgreSQL backend is not available: {exc}") from None
        store: Checkpointer = PostgresCheckpointer.open(dsn, _postgres_config(args))
        return store
    if getattr(args, "schema", None) is not None:
        raise UsageError(
            "--schema applies to PostgreSQL only (give --dsn or set DURABLE_GRAPH_DSN)"
        )
    path = _sqlite_path(args)
    if must_exist and not Path(path).exists():
        raise CliError(
            f"no store at {path} (give --sqlite PATH or --dsn, or submit a run to create it)"
        )
    try:
        from .sqlite import SqliteCheckpointer
    except ImportError as exc:
        raise CliError(f"the SQLite backend is not available: {exc}") from None
    sqlite_store: Checkpointer = SqliteCheckpointer.open(path)
    return sqlite_store


def _store_label(args: argparse.Namespace) -> str:
    dsn = _dsn(args)
    if dsn is None:
        return f"SQLite {_sqlite_path(args)}"
    schema = getattr(args, "schema", None) or _postgres_config(args).schema
    return f"PostgreSQL (schema {schema})"


@contextmanager
def _store(args: argparse.Namespace, *, must_exist: bool = True) -> Iterator[Checkpointer]:
    store = open_store(args, must_exist=must_exist)
    try:
        yield store
    finally:
        store.close()


def _out(args: argparse.Namespace) -> Output:
    return Output(bool(getattr(args, "json", False)))


def _progress(args: argparse.Namespace) -> Progress:
    return Progress(bool(getattr(args, "progress", False)) or sys.stderr.isatty())


def _tenant(args: argparse.Namespace) -> str | None:
    tenant: str | None = getattr(args, "tenant", None)
    return tenant


# --- commands: schema ----------------------------------------------------------------------


def cmd_migrate(args: argparse.Namespace) -> int:
    dsn = _dsn(args)
    if dsn is None:
        raise UsageError("migrate needs --dsn (or DURABLE_GRAPH_DSN)")
    from .postgres import migrations

    schema = _postgres_config(args).schema
    version = migrations.migrate(dsn, schema)
    out = _out(args)
    if out.as_json:
        out.json({"schema": schema, "version": version})
    else:
        out.line(f"schema {schema} is at version {version}")
    return 0


def cmd_sql(args: argparse.Namespace) -> int:
    from .postgres import migrations

    sys.stdout.write(migrations.install_script(_postgres_config(args).schema))
    return 0


# --- commands: worker and submit -----------------------------------------------------------


def load_app(spec: str) -> Callable[..., Any]:
    """``module:attr`` (attr may be dotted) → the handler; the current directory is importable."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise UsageError(f"--app must look like module:handler, got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise CliError(f"cannot import {module_name!r} for --app: {exc}") from None
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise CliError(f"{module_name!r} has no attribute {attr!r} (--app {spec})") from None
    if not callable(target):
        raise CliError(f"--app {spec} is not callable")
    handler: Callable[..., Any] = target
    return handler


def cmd_worker(args: argparse.Namespace) -> int:
    from .worker import Worker

    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(message)s",
    )
    handler = load_app(args.app)
    renew = args.claim_renew if args.claim_renew is not None else args.claim_ttl / 3
    try:
        claim_policy = ClaimPolicy(ttl=args.claim_ttl, renew_every=renew)
    except ValidationError as exc:
        raise CliError(f"--claim-ttl/--claim-renew: {exc}") from None
    with _store(args, must_exist=False) as store:
        tenant: TenantFilter = ANY if args.tenant is None else args.tenant
        worker = Worker(
            store,
            handler,
            holder=args.holder,
            concurrency=args.concurrency,
            lease_ttl=args.lease_ttl,
            claim_policy=claim_policy,
            tenant=tenant,
            poll_interval=args.poll_interval,
            shutdown_deadline=args.shutdown_deadline,
        )
        worker.run()
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    submission = Submission(
        thread_id=args.thread,
        input=args.input,
        tenant=args.tenant,
        key=args.key,
        mode=Mode(args.mode),
        max_attempts=args.max_attempts,
    )
    out = _out(args)
    with _store(args, must_exist=False) as store:
        ticket = store.run_queue.submit(submission)
        closed: QueueEntry | None = None
        if args.wait is not None:
            closed = store.run_queue.await_closed(ticket.entry_id, args.wait, tenant=args.tenant)
            if closed is None:
                raise CliError(f"entry {ticket.entry_id} is still open after {args.wait}")
    if out.as_json:
        data: dict[str, Any] = {"entry_id": ticket.entry_id, "existing": ticket.existing}
        if closed is not None:
            data["outcome"] = to_jsonable(closed.outcome)
        out.json(data)
    else:
        note = " (existing: same keyed submission)" if ticket.existing else ""
        out.line(f"entry {ticket.entry_id}{note}")
        if closed is not None:
            out.line(outcome_text(closed.outcome, limit=100_000))
    return 0


# --- commands: queue -----------------------------------------------------------------------


def _lease_text(entry: QueueEntry) -> str:
    if entry.lease_holder is None:
        return "-"
    return f"{entry.lease_holder} until {_when(entry.lease_expires_at)}"


def _all_open_entries(store: Any, tenant: TenantFilter, thread_id: str | None) -> list[QueueEntry]:
    """Every open entry, page by page (open_entries is paginated, SPEC §10 rule 2)."""
    entries: list[QueueEntry] = []
    after: int | None = None
    while page := store.run_queue.open_entries(tenant, thread_id, after, 1000):
        entries += page
        after = page[-1].entry_id
    return entries


def _all_children(store: Any, thread_id: str) -> list[str]:
    """Every child of the thread, page by page (children is paginated, SPEC §10 rule 2)."""
    children: list[str] = []
    after: str | None = None
    while page := store.children(thread_id, after, 1000):
        children += page
        after = page[-1]
    return children


def cmd_queue_ls(args: argparse.Namespace) -> int:
    tenant: TenantFilter = ANY if args.tenant is None else args.tenant
    with _store(args) as store:
        entries = _all_open_entries(store, tenant, args.thread)
    out = _out(args)
    if out.as_json:
        out.json(entries)
        return 0
    out.table(
        ["ENTRY", "THREAD", "TENANT", "MODE", "KEY", "ATTEMPTS", "LEASE", "SUBMITTED"],
        [
            (
                e.entry_id,
                e.thread_id,
                e.tenant or "-",
                e.mode.value,
                e.key or "-",
                f"{len(e.attempts)}/{e.max_attempts}",
                _lease_text(e),
                _when(e.submitted_at),
            )
            for e in entries
        ],
    )
    return 0


def _entry_or_fail(store: Checkpointer, entry_id: int, tenant: str | None) -> QueueEntry:
    entry = store.run_queue.entry(entry_id, tenant=tenant)
    if entry is None:
        scope = "" if tenant is None else f" for tenant {tenant!r}"
        hint = "" if tenant is not None else " (use --tenant for a tenant's entries)"
        raise CliError(f"entry {entry_id} not found{scope}{hint}")
    return entry


def _show_entry(out: Output, entry: QueueEntry) -> None:
    if out.as_json:
        out.json(entry)
        return
    out.fields(
        [
            ("entry", entry.entry_id),
            ("thread", entry.thread_id),
            ("tenant", entry.tenant or "-"),
            ("key", entry.key or "-"),
            ("mode", entry.mode.value),
            ("input", _compact(entry.input, 200)),
            ("attempts", f"{len(entry.attempts)}/{entry.max_attempts}"),
            ("admitted", "yes" if entry.admitted else "no"),
            ("thread deleted", "yes" if entry.thread_deleted else "no"),
            ("submitted", _when(entry.submitted_at)),
            ("lease", _lease_text(entry)),
            ("outcome", outcome_text(entry.outcome)),
            ("closed", _when(entry.closed_at)),
        ]
    )
    if entry.attempts:
        out.line()
        out.table(
            ["ATTEMPT", "RUN", "STARTED"],
            [(a.number, a.run_id, _when(a.started_at)) for a in entry.attempts],
        )


def cmd_queue_show(args: argparse.Namespace) -> int:
    with _store(args) as store:
        entry = _entry_or_fail(store, args.entry_id, _tenant(args))
    _show_entry(_out(args), entry)
    return 0


def cmd_queue_cancel(args: argparse.Namespace) -> int:
    with _store(args) as store:
        try:
            entry = store.run_queue.cancel(args.entry_id, tenant=_tenant(args))
        except NotFound:
            _entry_or_fail(store, args.entry_id, _tenant(args))
            raise
    out = _out(args)
    if out.as_json:
        out.json(entry)
    else:
        out.line(f"entry {entry.entry_id} cancelled")
    return 0


def cmd_queue_reclaim(args: argparse.Namespace) -> int:
    progress = _progress(args)
    total = 0
    with _store(args) as store:
        while True:
            removed = store.run_queue.reclaim(args.older_than, batch=args.batch)
            total += removed
            progress(f"reclaimed {total} entries...")
            if removed < args.batch:
                break
    progress.done()
    out = _out(args)
    if out.as_json:
        out.json({"reclaimed": total})
    else:
        out.line(f"reclaimed {total} closed entries")
    return 0


# --- commands: threads and events ---------------------------------------------------------


def _thread_rows(threads: Sequence[ThreadInfo]) -> list[tuple[object, ...]]:
    return [
        (
            t.thread_id,
            t.parent_thread_id or "-",
            t.head_id or "-",
            t.last_seq,
            _when(t.updated_at),
            "-"
            if t.claim_holder is None
            else f"{t.claim_holder} until {_when(t.claim_expires_at)}",
        )
        for t in threads
    ]


def cmd_thread_ls(args: argparse.Namespace) -> int:
    with _store(args) as store:
        threads = store.threads(after=args.after, limit=args.limit)
    out = _out(args)
    if out.as_json:
        out.json(threads)
    else:
        out.table(["THREAD", "PARENT", "HEAD", "SEQ", "UPDATED", "CLAIM"], _thread_rows(threads))
    return 0


def _thread_or_fail(store: Checkpointer, thread_id: str) -> ThreadInfo:
    info = store.thread(thread_id)
    if info is None:
        raise CliError(f"thread {thread_id!r} not found")
    return info


def cmd_thread_show(args: argparse.Namespace) -> int:
    with _store(args) as store:
        info = _thread_or_fail(store, args.thread_id)
        head = store.get(args.thread_id)
        children = _all_children(store, args.thread_id)
        entries = _all_open_entries(store, ANY, args.thread_id)
    out = _out(args)
    if out.as_json:
        out.json(
            {
                "thread": to_jsonable(info),
                "head": to_jsonable(head),
                "children": children,
                "open_entries": [e.entry_id for e in entries],
            }
        )
        return 0
    out.fields(
        [
            ("thread", info.thread_id),
            ("parent", info.parent_thread_id or "-"),
            ("head", info.head_id or "-"),
            ("last seq", info.last_seq),
            ("created", _when(info.created_at)),
            ("updated", _when(info.updated_at)),
            (
                "claim",
                "-"
                if info.claim_holder is None
                else f"{info.claim_holder} until {_when(info.claim_expires_at)}",
            ),
            ("children", ", ".join(children) or "-"),
            ("open entries", ", ".join(str(e.entry_id) for e in entries) or "-"),
        ]
    )
    if head is not None:
        out.line()
        out.line(f"head checkpoint {head.checkpoint_id} (run {head.run_id}):")
        out.line(json.dumps(head.state, ensure_ascii=False, indent=2))
    return 0


def _history_rows(history: Sequence[Checkpoint]) -> list[tuple[object, ...]]:
    return [
        (
            cp.seq,
            cp.checkpoint_id,
            cp.run_id,
            ",".join(cp.next) or "(end)",
            _when(cp.committed_at),
            _compact(cp.metadata, 50),
        )
        for cp in history
    ]


def cmd_thread_history(args: argparse.Namespace) -> int:
    with _store(args) as store:
        _thread_or_fail(store, args.thread_id)
        history = store.history(args.thread_id, before=args.before, limit=args.limit)
    out = _out(args)
    if out.as_json:
        out.json(history)
    else:
        out.table(
            ["SEQ", "CHECKPOINT", "RUN", "NEXT", "COMMITTED", "METADATA"], _history_rows(history)
        )
    return 0


def cmd_thread_children(args: argparse.Namespace) -> int:
    with _store(args) as store:
        _thread_or_fail(store, args.thread_id)
        children = _all_children(store, args.thread_id)
    out = _out(args)
    if out.as_json:
        out.json(children)
    else:
        for child in children:
            out.line(child)
    return 0


def cmd_thread_delete(args: argparse.Namespace) -> int:
    with _store(args) as store:
        existed = store.delete_thread(args.thread_id)
    if not existed:
        raise CliError(
            f"thread {args.thread_id!r} not found (its open queue entries, if any, were marked deleted)"
        )
    out = _out(args)
    if out.as_json:
        out.json({"thread_id": args.thread_id, "deleted": True})
    else:
        out.line(f"deleted thread {args.thread_id} and its descendants")
    return 0


def _event_row(event: Event) -> tuple[object, ...]:
    return (
        event.seq,
        event.kind,
        event.run_id or "-",
        _when(event.created_at),
        _compact(event.payload),
    )


_EVENT_HEADERS = ["SEQ", "KIND", "RUN", "CREATED", "PAYLOAD"]


def cmd_events(args: argparse.Namespace) -> int:
    out = _out(args)
    with _store(args) as store:
        if not args.follow:
            events = store.events_after(args.thread_id, args.after, limit=args.limit)
            if out.as_json:
                out.json(events)
            else:
                out.table(_EVENT_HEADERS, [_event_row(e) for e in events])
            return 0
        # --follow: one line per event as it lands (JSON Lines with --json) until interrupted.
        watch = WatchPolicy(poll_interval=args.poll_interval)
        try:
            for event in store.subscribe(args.thread_id, after_seq=args.after, watch=watch):
                if out.as_json:
                    out.out.write(json.dumps(to_jsonable(event), ensure_ascii=False) + "\n")
                else:
                    out.out.write("  ".join(str(c) for c in _event_row(event)) + "\n")
                out.out.flush()
        except KeyboardInterrupt:
            return 0
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    if args.keep_last is None and args.max_age is None:
        raise UsageError("prune needs --keep-last N and/or --max-age DURATION")
    policy = RetentionPolicy(keep_last=args.keep_last, max_age=args.max_age)
    progress = _progress(args)
    removed_checkpoints = removed_events = threads_done = 0
    with _store(args) as store:
        if args.thread is not None:
            result = store.prune(args.thread, policy)
            removed_checkpoints, removed_events, threads_done = (
                result.checkpoints_removed,
                result.events_removed,
                1,
            )
        else:
            # Thread by thread (each prune is atomic for its thread), so progress is real.
            after: str | None = None
            while True:
                page = store.threads(after=after, limit=PAGE)
                for info in page:
                    result = store.prune(info.thread_id, policy)
                    removed_checkpoints += result.checkpoints_removed
                    removed_events += result.events_removed
                    threads_done += 1
                    progress(
                        f"pruned {threads_done} threads: {removed_checkpoints} checkpoints, "
                        f"{removed_events} events removed"
                    )
                if len(page) < PAGE:
                    break
                after = page[-1].thread_id
    progress.done()
    out = _out(args)
    total = PruneResult(removed_checkpoints, removed_events)
    if out.as_json:
        out.json({**to_jsonable(total), "threads": threads_done})
    else:
        out.line(
            f"removed {total.checkpoints_removed} checkpoints and {total.events_removed} events "
            f"from {threads_done} threads"
        )
    return 0


# --- commands: demo ------------------------------------------------------------------------


def _worker_launcher_argv(args: argparse.Namespace, sqlite_path: str | None) -> list[str]:
    script = Path(sys.executable).with_name("durable-graph")
    base = [str(script)] if script.exists() else [sys.executable, "-m", "durable_graph.cli"]
    if sqlite_path is not None:
        return [*base, "--sqlite", sqlite_path, "worker"]
    schema = getattr(args, "schema", None)
    return [*base, *([] if schema is None else ["--schema", schema]), "worker"]


def cmd_demo(args: argparse.Namespace) -> int:
    from . import demo

    dsn = _dsn(args)
    sqlite_path: str | None = None
    env: dict[str, str] = {}
    if dsn is None:
        if getattr(args, "sqlite", None) is None:
            import tempfile

            args.sqlite = str(Path(tempfile.mkdtemp(prefix="durable-graph-demo-")) / "demo.db")
        sqlite_path = str(Path(args.sqlite).resolve())
    else:
        env[DSN_ENV] = dsn  # the DSN goes to the workers in their environment, not their argv
    launcher = demo.WorkerLauncher(argv=_worker_launcher_argv(args, sqlite_path), env=env)
    progress = _progress(args)
    out = _out(args)
    with _store(args, must_exist=False) as store:
        summary = demo.run(
            store,
            launcher,
            store_label=_store_label(args),
            workers=args.workers,
            out=sys.stderr if out.as_json else sys.stdout,
            progress=progress,
        )
    progress.done()
    if out.as_json:
        out.json(summary)
    return 0 if summary["ok"] else 1


# --- the parser ----------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see {self.prog} --help)")


def _common() -> _Parser:
    """Options accepted before or after the command (SUPPRESS keeps the first one given)."""
    common = _Parser(add_help=False)
    store = common.add_argument_group("store")
    store.add_argument(
        "--dsn",
        default=argparse.SUPPRESS,
        help=f"PostgreSQL conninfo or URL (default: ${DSN_ENV})",
    )
    store.add_argument(
        "--sqlite",
        metavar="PATH",
        default=argparse.SUPPRESS,
        help=f"SQLite file (default: ./{DEFAULT_SQLITE_PATH} when no DSN is given)",
    )
    store.add_argument(
        "--schema", default=argparse.SUPPRESS, help="PostgreSQL schema (default: llm4s)"
    )
    output = common.add_argument_group("output")
    output.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print JSON for scripts"
    )
    output.add_argument(
        "--progress",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show progress on stderr even when it is not a terminal",
    )
    return common


def build_parser() -> argparse.ArgumentParser:
    common = _common()
    parser = _Parser(
        prog="durable-graph",
        description="Operate a durable_graph store: queue runs, run workers, inspect threads.",
        parents=[common],
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    def command(name: str, func: Callable[[argparse.Namespace], int], help: str) -> Any:
        sub = commands.add_parser(name, help=help, description=help, parents=[common])
        sub.set_defaults(func=func)
        return sub

    command("migrate", cmd_migrate, "apply the PostgreSQL migrations to --schema")
    command("sql", cmd_sql, "print the complete PostgreSQL install script for --schema")

    worker = command("worker", cmd_worker, "run a worker for a handler until SIGTERM/SIGINT")
    worker.add_argument("--app", required=True, help="the handler, as module:function")
    worker.add_argument(
        "--concurrency", type=_positive_int, default=1, metavar="N", help="attempts at once (1)"
    )
    worker.add_argument("--holder", help="this worker's lease holder name (default host:pid:id)")
    worker.add_argument("--tenant", help="lease only this tenant's entries (default: any)")
    worker.add_argument(
        "--lease-ttl",
        type=parse_duration,
        default=timedelta(seconds=30),
        metavar="DURATION",
        help="queue lease ttl (30s)",
    )
    worker.add_argument(
        "--claim-ttl",
        type=parse_duration,
        default=timedelta(seconds=30),
        metavar="DURATION",
        help="thread claim ttl (30s)",
    )
    worker.add_argument(
        "--claim-renew",
        type=parse_duration,
        metavar="DURATION",
        help="claim renewal period (claim ttl / 3)",
    )
    worker.add_argument(
        "--poll-interval",
        type=parse_duration,
        default=timedelta(seconds=1),
        metavar="DURATION",
        help="sleep between polls of an empty queue, with jitter (1s)",
    )
    worker.add_argument(
        "--shutdown-deadline",
        type=parse_duration,
        default=timedelta(seconds=30),
        metavar="DURATION",
        help="on SIGTERM/SIGINT, how long running attempts may finish (30s)",
    )
    worker.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"]
    )

    submit = command("submit", cmd_submit, "submit a run to a thread")
    submit.add_argument("thread", help="thread id")
    submit.add_argument("--input", type=_json_value, required=True, help="the run's input (JSON)")
    submit.add_argument(
        "--key", help="idempotency key: a retried identical submit gets the same entry"
    )
    submit.add_argument("--tenant")
    submit.add_argument("--mode", choices=[m.value for m in Mode], default=Mode.ENQUEUE.value)
    submit.add_argument("--max-attempts", type=_positive_int, default=3)
    submit.add_argument(
        "--wait",
        type=parse_duration,
        metavar="DURATION",
        help="wait up to this long for the entry to close, then print its outcome",
    )

    queue = command("queue", _no_subcommand, "queue entries: ls, show, cancel, reclaim")
    queue_commands = queue.add_subparsers(
        dest="queue_command", metavar="ACTION", parser_class=_Parser
    )
    queue_commands.required = True

    def queue_action(name: str, func: Callable[[argparse.Namespace], int], help: str) -> Any:
        sub = queue_commands.add_parser(name, help=help, description=help, parents=[common])
        sub.set_defaults(func=func)
        return sub

    ls = queue_action("ls", cmd_queue_ls, "list open entries in queue order")
    ls.add_argument("--tenant", help="only this tenant's entries (default: every tenant)")
    ls.add_argument("--thread", help="only this thread's entries")
    show = queue_action("show", cmd_queue_show, "show one entry")
    show.add_argument("entry_id", type=_positive_int, metavar="ID")
    show.add_argument("--tenant", help="the entry's tenant (default: no tenant)")
    cancel = queue_action("cancel", cmd_queue_cancel, "cancel an open entry")
    cancel.add_argument("entry_id", type=_positive_int, metavar="ID")
    cancel.add_argument("--tenant", help="the entry's tenant (default: no tenant)")
    reclaim = queue_action("reclaim", cmd_queue_reclaim, "remove entries closed long ago")
    reclaim.add_argument("--older-than", type=parse_duration, required=True, metavar="DURATION")
    reclaim.add_argument("--batch", type=_positive_int, default=1000)

    thread = command("thread", _no_subcommand, "threads: ls, show, history, children, delete")
    thread_commands = thread.add_subparsers(
        dest="thread_command", metavar="ACTION", parser_class=_Parser
    )
    thread_commands.required = True

    def thread_action(name: str, func: Callable[[argparse.Namespace], int], help: str) -> Any:
        sub = thread_commands.add_parser(name, help=help, description=help, parents=[common])
        sub.set_defaults(func=func)
        return sub

    tls = thread_action("ls", cmd_thread_ls, "list threads in id order")
    tls.add_argument("--after", help="start after this thread id")
    tls.add_argument("--limit", type=_positive_int, default=100)
    tshow = thread_action("show", cmd_thread_show, "show a thread and its head state")
    tshow.add_argument("thread_id", metavar="ID")
    thist = thread_action(
        "history", cmd_thread_history, "list a thread's checkpoints, newest first"
    )
    thist.add_argument("thread_id", metavar="ID")
    thist.add_argument("--before", help="start before this checkpoint id")
    thist.add_argument("--limit", type=_positive_int, default=100)
    tchildren = thread_action("children", cmd_thread_children, "list a thread's child threads")
    tchildren.add_argument("thread_id", metavar="ID")
    tdelete = thread_action("delete", cmd_thread_delete, "delete a thread and its descendants")
    tdelete.add_argument("thread_id", metavar="ID")

    events = command("events", cmd_events, "print a thread's events")
    events.add_argument("thread_id", metavar="THREAD")
    events.add_argument("--after", type=_non_negative_int, default=0, help="events after this seq")
    events.add_argument("--limit", type=_positive_int, default=1000)
    events.add_argument("--follow", action="store_true", help="keep printing new events")
    events.add_argument("--poll-interval", type=parse_duration, default=timedelta(milliseconds=250))

    prune = command("prune", cmd_prune, "remove old checkpoints and events (retention)")
    prune.add_argument(
        "--keep-last", type=_positive_int, metavar="N", help="keep the newest N checkpoints"
    )
    prune.add_argument(
        "--max-age", type=parse_duration, metavar="DURATION", help="remove what is older than this"
    )
    prune.add_argument("--thread", help="prune only this thread")

    demo = command(
        "demo", cmd_demo, "run the crash-and-resume demo (a fresh SQLite file by default)"
    )
    demo.add_argument("--workers", type=_positive_int, default=3)
    return parser


def _no_subcommand(args: argparse.Namespace) -> int:  # pragma: no cover - argparse requires one
    raise UsageError("missing action")


def _one_line(text: str) -> str:
    return " ".join(text.split()) or "unknown error"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        func: Callable[[argparse.Namespace], int] = args.func
        return func(args)
    except UsageError as exc:
        print(f"error: {_one_line(str(exc))}", file=sys.stderr)
        return 2
    except (CliError, StoreError) as exc:
        print(f"error: {_one_line(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): not an error worth a message.
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        return 0
    except Exception as exc:
        if os.environ.get(DEBUG_ENV):
            raise
        print(f"error: {type(exc).__name__}: {_one_line(str(exc))}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
