"""Commands that run things: ``migrate``, ``sql``, ``worker``, ``submit``, ``demo``."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.util
import json
import logging
import os
import shlex
import sys
from collections.abc import Callable
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from durable_graph.cli.common import (
    DSN_ENV,
    CliError,
    UsageError,
    connect,
    dsn_of,
    open_async_store,
    outcome_text,
    output_of,
    postgres_config,
    progress_of,
    redacted,
    required_dsn,
    shown,
    store_label,
    store_of,
    to_jsonable,
)
from durable_graph.cli.observability import worker_observer
from durable_graph.core.errors import ValidationError
from durable_graph.core.model import (
    ANY,
    BackoffPolicy,
    ClaimPolicy,
    Completed,
    Mode,
    QueueEntry,
    Submission,
    TenantFilter,
)
from durable_graph.observe.observer import Observer, observed

# --- commands: schema ----------------------------------------------------------------------


def cmd_migrate(args: argparse.Namespace) -> int:
    dsn = required_dsn(args, "migrate needs --dsn (or DURABLE_GRAPH_DSN)")
    from durable_graph.postgres import migrations

    config = postgres_config(args)
    schema = config.schema
    connect(dsn, config).close()  # a refused login reads as such, not as a schema problem
    if args.plan:
        plan = migrations.plan(dsn, schema, config)
        output_of(args).result(
            {
                "schema": schema,
                "current": plan.current,
                "version": plan.version,
                "release": plan.release,
                "target_version": migrations.required_version(),
                "target_release": migrations.release(),
                "migrations": plan.migrations,
                "functions": plan.functions,
            },
            "\n".join(plan.lines()),
        )
        return 0
    version = migrations.migrate(dsn, schema, config)
    output_of(args).result(
        {"schema": schema, "version": version}, f"schema {schema} is at version {version}"
    )
    return 0


def cmd_sql(args: argparse.Namespace) -> int:
    from durable_graph.postgres import migrations

    sys.stdout.write(migrations.install_script(postgres_config(args).schema))
    return 0


# --- commands: worker and submit -----------------------------------------------------------


class _SafeFormatter(logging.Formatter):
    """Log lines as error lines are printed: the DSN redacted, control characters escaped."""

    def __init__(self, dsn: str | None) -> None:
        super().__init__("%(asctime)s %(levelname)s %(message)s")
        self._dsn = dsn

    def format(self, record: logging.LogRecord) -> str:
        lines = super().format(record).split("\n")
        return "\n".join(shown(redacted(line, self._dsn)) for line in lines)


# The attempt fields the worker puts on its log records (``extra=``), copied into JSON lines.
_RECORD_FIELDS = ("entry_id", "thread_id", "attempt", "run_id", "outcome", "duration_s")


class _JsonFormatter(logging.Formatter):
    """One JSON object a line (``--log-format json``): time, level, logger, message, the
    attempt's fields when it is about one, and the traceback as one string; DSN redacted."""

    def __init__(self, dsn: str | None) -> None:
        super().__init__()
        self._dsn = dsn

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": redacted(record.getMessage(), self._dsn),
        }
        for name in _RECORD_FIELDS:
            if hasattr(record, name):
                data[name] = getattr(record, name)
        if record.exc_info:
            data["traceback"] = redacted(self.formatException(record.exc_info), self._dsn)
        return json.dumps(data, ensure_ascii=True, default=str)


def _log_handler(args: argparse.Namespace) -> logging.Handler:
    handler = logging.StreamHandler(sys.stderr)
    json_lines = getattr(args, "log_format", "text") == "json"
    handler.setFormatter((_JsonFormatter if json_lines else _SafeFormatter)(dsn_of(args)))
    return handler


def load_app(spec: str) -> Callable[..., Any]:
    """``module:attr`` (attr may be dotted) → the handler; the current directory is importable.

    The current directory goes *last* on ``sys.path``: a file there (``json.py``, ``sqlite3.py``)
    never shadows a library module that the worker or the store imports later. An app module
    named like an installed module is refused rather than silently replaced by it.
    """
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise UsageError(f"--app must look like module:handler, got {spec!r}")
    cwd = os.getcwd()
    sys.path[:] = [entry for entry in sys.path if entry not in ("", ".", cwd)] + [cwd]
    top = module_name.partition(".")[0]
    if (Path(cwd, f"{top}.py").exists() or Path(cwd, top).is_dir()) and _installed(top, cwd):
        raise CliError(
            f"--app module {top!r} in the current directory has the name of an installed "
            "module; rename it"
        )
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise CliError(f"cannot import {module_name!r} for --app: {exc}") from None
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise CliError(f"{module_name!r} has no attribute {attr!r} (--app {spec})") from None
    if not callable(target) and not _is_graph(target):
        raise CliError(f"--app {spec} is not callable")
    handler: Callable[..., Any] = target
    return handler


def _is_graph(target: object) -> bool:
    """A compiled LangGraph graph (``--app module:graph``). LangGraph is imported only for an
    object of its own (importing it costs a worker's start seconds)."""
    if not type(target).__module__.startswith("langgraph."):
        return False
    try:
        from langgraph.pregel import Pregel
    except ImportError:
        return False
    return isinstance(target, Pregel)


GraphHandlerOf = Callable[[Any], Any]
"""Makes the async handler of the worker's LangGraph graphs from an `AsyncDurableSaver`."""


def _graphs_of(args: argparse.Namespace) -> GraphHandlerOf | None:
    """The handler of the LangGraph graphs the worker runs (``--langgraph-config``: each by the
    name a run request gives; ``--app module:graph``: that graph), or None for a plain handler."""
    if args.langgraph_config is not None:
        if args.app is not None:
            raise UsageError("give --app or --langgraph-config, not both")
        try:
            from durable_graph.langgraph.config_file import LangGraphConfig
            from durable_graph.langgraph.handler import async_graphs_handler
            from durable_graph.langgraph.store import AsyncDurableStore
            from durable_graph.service.http_app import load_user_app
            from durable_graph.service.http_config import HttpConfig
            from durable_graph.service.retention import item_ttl, store_ttl_config, with_retention
            from durable_graph.service.webhooks import (
                WebhookPolicy,
                delivery_deadline,
                with_webhooks,
            )
        except ImportError as exc:
            raise UsageError(f"--langgraph-config needs durable-graph[langgraph] ({exc})") from None
        try:
            config = LangGraphConfig.read(args.langgraph_config)
            graphs = config.load_graphs()
            # A run's webhook is delivered by whichever worker takes its delivery, under this
            # file's policy, on slots of its own (D247, D248).
            policy = WebhookPolicy.of(config.webhooks)
            ttl = item_ttl(store_ttl_config(config.store_ttl))
            args.saver_serde = config.saver_serializer()  # encryption (D286)
            # http.app's lifespan runs around the worker too, as around the reference's queue
            # workers (D279): what it sets up, the graphs may use.
            http = HttpConfig.of(config.http)
            args.http_app = (
                None if http.app is None else load_user_app(config.path.parent, http.app)
            )
            index = config.store_index()
        except ValidationError as exc:
            raise CliError(f"--langgraph-config: {exc}") from None
        try:
            args.deliveries = (policy, delivery_deadline(), not http.disable_webhooks)
        except ValidationError as exc:
            raise CliError(str(exc)) from None
        # The graphs' LangGraph ``store`` is the store's items (SPEC §20.3), as under ``serve``;
        # the retention sweeps serve set up (SPEC §24) run on any such worker too.
        return lambda saver: with_retention(
            with_webhooks(
                async_graphs_handler(
                    graphs,
                    saver,
                    store=AsyncDurableStore(saver.store.run_queue, ttl=ttl, index=index),
                )
            )
        )
    if args.app is None:
        raise UsageError("worker needs --app module:handler (or --langgraph-config FILE)")
    target = load_app(args.app)
    if not _is_graph(target):
        return None
    from durable_graph.langgraph.handler import async_graph_handler

    return lambda saver: async_graph_handler(cast(Any, target), saver)


async def _run_graphs(
    args: argparse.Namespace,
    handler_of: GraphHandlerOf,
    observer: Observer | None,
    options: dict[str, Any],
) -> None:
    """An `AsyncWorker` running the graphs with ``astream`` on the async store, as LangGraph
    Server runs graphs (so ``async def`` nodes and tools run); stopped by SIGTERM or SIGINT.
    With ``--langgraph-config``, webhook deliveries run beside it on a worker of their own
    (D247): the graph worker leases runs, unless ``--kinds`` says otherwise; and ``http.app``'s
    lifespan runs around them."""
    app = getattr(args, "http_app", None)
    async with AsyncExitStack() as stack:
        if app is not None:
            await stack.enter_async_context(app.router.lifespan_context(app))
        await _run_workers(args, handler_of, observer, options)


async def _run_workers(
    args: argparse.Namespace,
    handler_of: GraphHandlerOf,
    observer: Observer | None,
    options: dict[str, Any],
) -> None:
    """`_run_graphs`'s workers."""
    from durable_graph.langgraph import AsyncDurableSaver
    from durable_graph.worker.aio import AsyncWorker

    async with await open_async_store(args, must_exist=False) as opened:
        store = opened if observer is None else observed(opened, observer)
        handler = handler_of(AsyncDurableSaver(store, serde=getattr(args, "saver_serde", None)))
        deliveries = getattr(args, "deliveries", None)
        if deliveries is None:
            await AsyncWorker(store, handler, install_signal_handlers=True, **options).run()
            return
        from durable_graph.service.webhooks import delivery_worker, run_kinds

        policy, deadline, sends = deliveries
        kinds, delivering = run_kinds(options.get("kinds"))
        workers = [AsyncWorker(store, handler, **{**options, "kinds": kinds})] if kinds else []
        if delivering:
            workers.append(delivery_worker(store, policy, deadline, options, send=sends))
        if not workers:
            raise CliError("--kinds: no kind this worker runs")
        # The first takes SIGTERM and SIGINT; the others stop when it has stopped.
        first, *others = workers
        first.install_signal_handlers = True
        beside = [asyncio.create_task(w.run()) for w in others]
        try:
            await first.run()
        finally:
            for w in others:
                w.stop()
            await asyncio.gather(*beside, return_exceptions=True)


def _installed(name: str, cwd: str) -> bool:
    """Whether ``name`` imports from somewhere other than ``cwd`` (the standard library, a
    package): with ``cwd`` last on the path, that one would win."""
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    origin = None if found is None else (found.origin or "")
    if origin is None:
        return False
    if origin in ("built-in", "frozen"):
        return True
    return Path(origin).resolve().parent != Path(cwd).resolve() and not Path(
        origin
    ).resolve().is_relative_to(Path(cwd).resolve() / name)


def cmd_worker(args: argparse.Namespace) -> int:
    from durable_graph.worker.sync import Worker

    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()), handlers=[_log_handler(args)]
    )
    renew = args.claim_renew if args.claim_renew is not None else args.claim_ttl / 3
    try:
        claim_policy = ClaimPolicy(ttl=args.claim_ttl, renew_every=renew)
    except ValidationError as exc:
        raise CliError(f"--claim-ttl/--claim-renew: {exc}") from None
    graphs = _graphs_of(args)  # a bad --app or config fails before the store is opened
    with store_of(args, must_exist=False) as opened, worker_observer(args, opened) as observer:
        store = opened if observer is None else observed(opened, observer)
        tenant: TenantFilter = ANY if args.tenant is None else args.tenant
        kinds = None if not args.kinds else [k.strip() for k in args.kinds.split(",")]
        options: dict[str, Any] = {} if kinds is None else {"kinds": kinds}
        options.update(
            holder=args.holder,
            concurrency=args.concurrency,
            lease_ttl=args.lease_ttl,
            claim_policy=claim_policy,
            tenant=tenant,
            poll_interval=args.poll_interval,
            shutdown_deadline=args.shutdown_deadline,
            backoff=BackoffPolicy(base=args.backoff),
        )
        scheduler = None
        if args.scheduler:  # SPEC §15: the scheduler loop inside this worker
            from durable_graph.worker.scheduler import Scheduler

            scheduler = Scheduler(store.run_queue)
            scheduler.start_thread()
        try:
            if graphs is not None:
                asyncio.run(_run_graphs(args, graphs, observer, options))
            else:
                Worker(store, load_app(args.app), **options).run()
        finally:
            if scheduler is not None:
                scheduler.stop()
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    submission = Submission(
        thread_id=args.thread,
        input=args.input,
        tenant=args.tenant,
        key=args.key,
        mode=Mode(args.mode),
        max_attempts=args.max_attempts,
        priority=args.priority,
        kind=args.kind,
    )
    out = output_of(args)
    with store_of(args, must_exist=False) as store:
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
    # --wait answers "did the run complete?": a failed, cancelled or interrupted run is exit 1.
    return 1 if closed is not None and not isinstance(closed.outcome, Completed) else 0


# --- commands: demo ------------------------------------------------------------------------


def _langgraph_demo(args: argparse.Namespace) -> int:
    """``demo --langgraph``: a LangGraph graph run by the queue (durable_graph.langgraph.demo)."""
    try:
        from durable_graph.langgraph import demo as langgraph_demo
    except ImportError as exc:
        raise UsageError(
            f"--langgraph needs the extra: pip install 'durable-graph[langgraph]' ({exc})"
        ) from exc
    if dsn_of(args) is None and getattr(args, "sqlite", None) is None:
        import tempfile

        args.sqlite = str(Path(tempfile.mkdtemp(prefix="durable-graph-demo-")) / "demo.db")
    with store_of(args, must_exist=False) as store:
        return 0 if langgraph_demo.run(store) else 1


def _worker_launcher_argv(args: argparse.Namespace, sqlite_path: str | None) -> list[str]:
    script = Path(sys.executable).with_name("durable-graph")
    base = [str(script)] if script.exists() else [sys.executable, "-m", "durable_graph.cli"]
    if sqlite_path is not None:
        return [*base, "--sqlite", sqlite_path, "worker"]
    schema = getattr(args, "schema", None)
    return [*base, *([] if schema is None else ["--schema", schema]), "worker"]


def cmd_demo(args: argparse.Namespace) -> int:
    from durable_graph.cli import demo

    if getattr(args, "langgraph", False):
        return _langgraph_demo(args)
    dsn = dsn_of(args)
    sqlite_path: str | None = None
    env: dict[str, str] = {}
    if dsn is None:
        if getattr(args, "sqlite", None) is None:
            import tempfile

            args.sqlite = str(Path(tempfile.mkdtemp(prefix="durable-graph-demo-")) / "demo.db")
        sqlite_path = str(Path(args.sqlite).resolve())
    else:
        env[DSN_ENV] = dsn  # the DSN goes to the workers in their environment, not their argv
    launcher = demo.WorkerLauncher(
        argv=_worker_launcher_argv(args, sqlite_path),
        env=env,
        metrics_port=getattr(args, "metrics_port", None),
    )
    progress = progress_of(args)
    out = output_of(args)
    with store_of(args, must_exist=False) as store:
        summary = demo.run(
            store,
            launcher,
            store_label=store_label(args),
            workers=args.workers,
            out=sys.stderr if out.as_json else sys.stdout,
            progress=progress,
        )
    progress.done()
    # Issue 26 item 12: the demo's store may sit in a temporary directory: say how to look.
    summary["dashboard"] = _dashboard_command(args, sqlite_path)
    if out.as_json:
        out.json(summary)
    else:
        out.line(f"Look at it in the dashboard: {summary['dashboard']}")
    return 0 if summary["ok"] else 1


def _dashboard_command(args: argparse.Namespace, sqlite_path: str | None) -> str:
    """The command that opens the dashboard on the demo's store (the DSN stays out of it: it
    is read from DURABLE_GRAPH_DSN, as the workers read it)."""
    program = sys.argv[0] if Path(sys.argv[0]).name == "durable-graph" else "durable-graph"
    if sqlite_path is not None:
        return f"{shlex.quote(program)} dashboard --sqlite {shlex.quote(sqlite_path)}"
    schema = getattr(args, "schema", None)
    where = f" --schema {shlex.quote(schema)}" if schema else ""
    return f"{DSN_ENV}=... {shlex.quote(program)} dashboard{where}"
