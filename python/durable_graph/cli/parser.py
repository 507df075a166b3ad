"""The argument parser, and `main`: one ``error: ...`` line per failure, never a traceback."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from durable_graph._version import __version__
from durable_graph.cli import dashboard as _dashboard
from durable_graph.cli import partitions as _partitions
from durable_graph.cli import scheduling as _scheduling
from durable_graph.cli import serve as _serve
from durable_graph.cli.common import (
    DEBUG_ENV,
    DEFAULT_SQLITE_PATH,
    DSN_ENV,
    CliError,
    UsageError,
    env_flag,
    env_name,
    json_value,
    non_negative_int,
    parse_duration,
    positive_int,
    redacted,
    shown,
)
from durable_graph.cli.health import cmd_health
from durable_graph.cli.langgraph_import import cmd_langgraph_import
from durable_graph.cli.privileges import cmd_grant, cmd_revoke
from durable_graph.cli.queue import (
    cmd_queue_cancel,
    cmd_queue_ls,
    cmd_queue_reclaim,
    cmd_queue_retry,
    cmd_queue_show,
    cmd_queue_stats,
)
from durable_graph.cli.run import (
    cmd_demo,
    cmd_migrate,
    cmd_sql,
    cmd_submit,
    cmd_worker,
)
from durable_graph.cli.threads import (
    cmd_events,
    cmd_prune,
    cmd_thread_children,
    cmd_thread_delete,
    cmd_thread_history,
    cmd_thread_ls,
    cmd_thread_prune,
    cmd_thread_show,
)
from durable_graph.cli.workers import cmd_workers
from durable_graph.core.errors import StoreError
from durable_graph.core.listing import ENTRY_STATES
from durable_graph.core.model import (
    Mode,
)

# --- the parser ----------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see {self.prog} --help)")


def _option(parser: Any, flag: str, *, help: str, **kw: Any) -> None:
    """An option whose default comes from its environment variable (``--poll-interval`` →
    ``DURABLE_GRAPH_POLL_INTERVAL``), both named in its help text. A string default goes
    through the option's type, as one given on the command line does."""
    env = env_name(flag)
    if kw.get("action") == "store_true":
        parser.add_argument(flag, default=env_flag(flag), help=f"{help} [env {env}]", **kw)
        return
    from_env = os.environ.get(env) or None
    if from_env is not None:
        choices = kw.get("choices")
        if choices is not None and from_env not in choices:
            raise UsageError(f"{env}={from_env!r} is not one of {', '.join(choices)}")
        kw["default"] = from_env
        kw["required"] = False
    default = kw.get("default")
    shown_default = "" if default is None or kw.get("required") else f" (default: {default})"
    parser.add_argument(flag, help=f"{help}{shown_default} [env {env}]", **kw)


def _actions(
    group: argparse.ArgumentParser, dest: str, common: _Parser
) -> Callable[[str, Callable[[argparse.Namespace], int], str], Any]:
    """The function adding one action (``queue ls``, ``thread show``...) to a command group."""
    actions = group.add_subparsers(dest=dest, metavar="ACTION", parser_class=_Parser)
    actions.required = True

    def action(name: str, func: Callable[[argparse.Namespace], int], help: str) -> Any:
        sub = actions.add_parser(name, help=help, description=help, parents=[common])
        sub.set_defaults(func=func)
        return sub

    return action


def _common(*, sqlite: bool = True) -> _Parser:
    """Options accepted before or after the command (SUPPRESS keeps the first one given)."""
    common = _Parser(add_help=False)
    store = common.add_argument_group("store")
    store.add_argument(
        "--dsn",
        default=argparse.SUPPRESS,
        help=f"PostgreSQL conninfo or URL; selects PostgreSQL. On the command line it (and "
        f"any password in it) is visible to every user of the machine in `ps`; {DSN_ENV} is "
        f"not [env {DSN_ENV}]",
    )
    if sqlite:
        store.add_argument(
            "--sqlite",
            metavar="PATH",
            default=argparse.SUPPRESS,
            help=f"SQLite file (default: ./{DEFAULT_SQLITE_PATH} when no DSN is given) "
            f"[env {env_name('--sqlite')}]",
        )
    store.add_argument(
        "--schema",
        default=argparse.SUPPRESS,
        help=f"PostgreSQL schema (default: llm4s) [env {env_name('--schema')}]",
    )
    output = common.add_argument_group("output")
    output.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS,
        help=f"print JSON for scripts [env {env_name('--json')}=1]",
    )
    output.add_argument(
        "--progress",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show progress on stderr even when it is not a terminal "
        f"[env {env_name('--progress')}=1]",
    )
    return common


def build_parser() -> argparse.ArgumentParser:
    common = _common()
    parser = _Parser(
        prog="durable-graph",
        description="Operate a durable_graph store: queue runs, run workers, inspect threads. "
        "Exit codes: 0 success, 1 failure, 2 usage error, 130 interrupted.",
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"durable-graph {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    def command(
        name: str,
        func: Callable[[argparse.Namespace], int],
        help: str,
        parents: Sequence[_Parser] = (common,),
    ) -> Any:
        sub = commands.add_parser(name, help=help, description=help, parents=list(parents))
        sub.set_defaults(func=func)
        return sub

    postgres_only = _common(sqlite=False)
    migrate = command(
        "migrate", cmd_migrate, "apply the PostgreSQL migrations to --schema", [postgres_only]
    )
    _option(
        migrate,
        "--plan",
        action="store_true",
        help="print what migrate would apply to --schema, and change nothing",
    )
    command(
        "sql",
        cmd_sql,
        "print the complete PostgreSQL install script for --schema",
        [postgres_only],
    )
    for name, func, help in (
        ("grant", cmd_grant, "let --role call the store in --schema (USAGE + EXECUTE on dg_*)"),
        ("revoke", cmd_revoke, "take back what grant gave --role on --schema"),
    ):
        privilege = command(name, func, help, [postgres_only])
        _option(privilege, "--role", required=True, help="the runtime role")
        _option(privilege, "--print", action="store_true", help="print the SQL, run nothing")

    health = command(
        "health",
        cmd_health,
        "check the store: reachable, schema current, queue depth (exit 1 when not healthy)",
    )
    _option(
        health,
        "--max-depth",
        type=non_negative_int,
        metavar="N",
        help="also unhealthy when more than N entries are open (default: no limit)",
    )

    workers = command(
        "workers", cmd_workers, "the workers that beat recently, idle or busy (store clock)"
    )
    _option(
        workers,
        "--seen-within",
        type=parse_duration,
        metavar="DURATION",
        help="list the workers whose last beat is this recent (default 30s)",
    )
    _option(workers, "--after", metavar="HOLDER", help="the page after this holder")
    _option(
        workers,
        "--limit",
        type=positive_int,
        default=100,
        metavar="N",
        help="workers at most, one page (default 100, at most 1000)",
    )

    worker = command("worker", cmd_worker, "run a worker for a handler until SIGTERM/SIGINT")
    _option(
        worker,
        "--app",
        help="the handler, as module:function; module:app for a durable_graph.worker.app.App"
        " (several handlers by kind); or a compiled LangGraph graph, module:graph, run with"
        " graph_handler on this worker's store",
    )
    _option(
        worker,
        "--langgraph-config",
        metavar="FILE",
        help="run the graphs of this langgraph.json (instead of --app)",
    )
    _option(
        worker,
        "--concurrency",
        type=positive_int,
        default=1,
        metavar="N",
        help="attempts at once",
    )
    _option(worker, "--holder", help="this worker's lease holder name (default: host:pid:id)")
    _option(worker, "--tenant", help="lease only this tenant's entries (default: any tenant)")
    _option(
        worker,
        "--kinds",
        help="comma-separated kinds to lease (default: an App's kinds, else every kind)",
    )
    _option(
        worker,
        "--scheduler",
        action="store_true",
        help="also run the scheduler loop (submits due schedule slots) in this worker",
    )
    for flag, default, text in (
        ("--lease-ttl", "30s", "queue lease ttl"),
        ("--claim-ttl", "30s", "thread claim ttl"),
        ("--poll-interval", "1s", "sleep between polls of an empty queue, with jitter"),
        (
            "--shutdown-deadline",
            "30s",
            "on SIGTERM/SIGINT, how long running attempts may finish",
        ),
        (
            "--backoff",
            "1s",
            "wait before retrying a failed attempt, doubled per attempt up to 5m, jittered",
        ),
    ):
        _option(worker, flag, type=parse_duration, default=default, metavar="DURATION", help=text)
    _option(
        worker,
        "--claim-renew",
        type=parse_duration,
        metavar="DURATION",
        help="claim renewal period (default: claim ttl / 3)",
    )
    _option(
        worker,
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="the least severe log lines printed",
    )
    _option(
        worker,
        "--log-format",
        default="text",
        choices=["text", "json"],
        help="text lines, or one JSON object a line",
    )
    _option(
        worker,
        "--metrics-port",
        type=int,
        metavar="N",
        help="serve Prometheus metrics at http://HOST:N/metrics (extra durable-graph[metrics])",
    )
    _option(
        worker,
        "--metrics-host",
        default="127.0.0.1",
        metavar="HOST",
        help="address the metrics server binds (0.0.0.0 for a remote Prometheus)",
    )
    _option(
        worker,
        "--metrics-sample-interval",
        type=parse_duration,
        default="5s",
        metavar="DURATION",
        help="how often the queue depth gauges are sampled with queue stats",
    )
    _option(
        worker,
        "--traces",
        choices=["console"],
        help="export OpenTelemetry spans of attempts and store calls to stderr"
        " (extra durable-graph[otel]; or configure a TracerProvider in the app)",
    )

    _dashboard.add_parser(command, _option)
    _serve.add_parser(command, _option)
    _scheduling.add_parsers(
        command, lambda group, dest: _actions(group, dest, common), _option, _no_subcommand
    )

    submit = command("submit", cmd_submit, "submit a run to a thread")
    submit.add_argument("thread", help="thread id")
    _option(submit, "--input", type=json_value, required=True, help="the run's input (JSON)")
    _option(submit, "--key", help="idempotency key: a retried identical submit gets the same entry")
    _option(submit, "--tenant", help="the tenant the entry belongs to (default: none)")
    _option(
        submit,
        "--mode",
        choices=[m.value for m in Mode],
        default=Mode.ENQUEUE.value,
        help="when the thread has open entries: queue behind them, reject, or interrupt them",
    )
    _option(
        submit,
        "--max-attempts",
        type=positive_int,
        default=3,
        metavar="N",
        help="attempts before the entry closes Failed",
    )
    _option(
        submit,
        "--priority",
        type=int,
        default=0,
        help="heads of higher priority are leased first across threads",
    )
    _option(submit, "--kind", default="default", help="the handler kind (an App's kinds)")
    _option(
        submit,
        "--wait",
        type=parse_duration,
        metavar="DURATION",
        help="wait up to this long for the entry to close and print its outcome; exit 1 "
        "unless it completed",
    )

    queue = command(
        "queue", _no_subcommand, "queue entries: ls, stats, show, cancel, retry, reclaim"
    )
    queue_action = _actions(queue, "queue_command", common)

    ls = queue_action(
        "ls", cmd_queue_ls, "list open entries in queue order, or (--state) entries newest first"
    )
    _option(ls, "--tenant", help="only this tenant's entries (default: every tenant)")
    _option(ls, "--thread", help="only this thread's entries")
    _option(
        ls,
        "--state",
        choices=(*ENTRY_STATES, "all"),
        help="list the entries in this state (all: in any state, closed ones included), newest "
        "first, one page (default: every open entry in queue order)",
    )
    _option(
        ls,
        "--after",
        type=positive_int,
        metavar="ID",
        help="the page after this entry id (the last one of the previous page)",
    )
    _option(
        ls,
        "--limit",
        type=positive_int,
        metavar="N",
        help="at most N entries, one page (default: 100 with --state, 1000 with --after, "
        "else every open entry)",
    )
    stats = queue_action(
        "stats", cmd_queue_stats, "count entries by state and show the oldest waiting age"
    )
    _option(stats, "--tenant", help="only this tenant's entries (default: every tenant)")
    show = queue_action("show", cmd_queue_show, "show one entry")
    show.add_argument("entry_id", type=positive_int, metavar="ID", help="the entry id")
    _option(show, "--tenant", help="the entry's tenant (default: no tenant)")
    cancel = queue_action("cancel", cmd_queue_cancel, "cancel an open entry")
    cancel.add_argument("entry_id", type=positive_int, metavar="ID", help="the entry id")
    _option(cancel, "--tenant", help="the entry's tenant (default: no tenant)")
    retry = queue_action("retry", cmd_queue_retry, "submit a failed or cancelled entry again")
    retry.add_argument("entry_id", type=positive_int, metavar="ID", help="the entry id")
    _option(retry, "--tenant", help="the entry's tenant (default: no tenant)")
    _option(
        retry,
        "--again",
        action="store_true",
        help="submit one more retry even when the entry was retried already (by default a "
        "second retry shows the first one)",
    )
    reclaim = queue_action("reclaim", cmd_queue_reclaim, "remove entries closed long ago")
    _option(
        reclaim,
        "--older-than",
        type=parse_duration,
        required=True,
        metavar="DURATION",
        help="remove entries closed longer ago than this",
    )
    _option(
        reclaim,
        "--batch",
        type=positive_int,
        default=1000,
        metavar="N",
        help="entries removed per transaction",
    )

    _partitions.add_parser(
        lambda name, func, help: command(name, func, help, [postgres_only]), _actions, postgres_only
    )

    thread = command(
        "thread", _no_subcommand, "threads: ls, show, history, children, delete, prune"
    )
    thread_action = _actions(thread, "thread_command", common)

    tls = thread_action("ls", cmd_thread_ls, "list threads in id order")
    _option(tls, "--after", help="start after this thread id")
    _option(tls, "--limit", type=positive_int, default=100, metavar="N", help="threads at most")
    tshow = thread_action("show", cmd_thread_show, "show a thread and its head state")
    tshow.add_argument("thread_id", metavar="ID", help="the thread id")
    thist = thread_action(
        "history", cmd_thread_history, "list a thread's checkpoints, newest first"
    )
    thist.add_argument("thread_id", metavar="ID", help="the thread id")
    _option(thist, "--before", help="start before this checkpoint id")
    _option(
        thist, "--limit", type=positive_int, default=100, metavar="N", help="checkpoints at most"
    )
    tchildren = thread_action("children", cmd_thread_children, "list a thread's child threads")
    tchildren.add_argument("thread_id", metavar="ID", help="the thread id")
    tdelete = thread_action("delete", cmd_thread_delete, "delete a thread and its descendants")
    tdelete.add_argument("thread_id", metavar="ID", help="the thread id")
    tprune = thread_action(
        "prune", cmd_thread_prune, "LangGraph's prune: keep each thread's latest state, or delete"
    )
    tprune.add_argument("thread_ids", metavar="ID", nargs="+", help="thread ids")
    _option(
        tprune,
        "--strategy",
        choices=("keep_latest", "delete"),
        default="keep_latest",
        help="keep_latest: the latest checkpoint and what resuming needs (default); delete",
    )

    events = command("events", cmd_events, "print a thread's events")
    events.add_argument("thread_id", metavar="THREAD", help="the thread id")
    _option(
        events,
        "--after",
        type=non_negative_int,
        default=0,
        metavar="SEQ",
        help="events after this sequence number",
    )
    _option(events, "--limit", type=positive_int, default=1000, metavar="N", help="events at most")
    _option(
        events,
        "--follow",
        action="store_true",
        help="keep printing new events until Ctrl-C (exit 130)",
    )
    _option(
        events,
        "--poll-interval",
        type=parse_duration,
        default="250ms",
        metavar="DURATION",
        help="with --follow, how often to look for new events",
    )

    prune = command("prune", cmd_prune, "remove old checkpoints and events (retention)")
    _option(
        prune, "--keep-last", type=positive_int, metavar="N", help="keep the newest N checkpoints"
    )
    _option(
        prune,
        "--max-age",
        type=parse_duration,
        metavar="DURATION",
        help="remove what is older than this",
    )
    _option(prune, "--thread", help="prune only this thread (default: every thread)")

    langgraph = command("langgraph", _no_subcommand, "LangGraph: import")
    langgraph_action = _actions(langgraph, "langgraph_command", common)
    limport = langgraph_action(
        "import",
        cmd_langgraph_import,
        "copy threads written by LangGraph's PostgresSaver or SqliteSaver into the store "
        "(whole histories, pending writes, subgraph namespaces), reading no value that would run "
        "code; threads it has whole are skipped, ones a failed run began are completed",
    )
    _option(limport, "--from-postgres", metavar="DSN", help="PostgresSaver's database")
    _option(limport, "--from-sqlite", metavar="PATH", help="SqliteSaver's file (read only)")
    _option(
        limport, "--thread", action="append", metavar="ID", help="only this thread (repeatable)"
    )

    demo = command(
        "demo", cmd_demo, "run the crash-and-resume demo (a fresh SQLite file by default)"
    )
    _option(
        demo,
        "--workers",
        type=positive_int,
        default=3,
        metavar="N",
        help="worker processes to start (one is killed mid-run)",
    )
    _option(
        demo,
        "--metrics-port",
        type=int,
        metavar="N",
        help="worker i serves Prometheus metrics on port N+i-1 (extra durable-graph[metrics])",
    )
    _option(
        demo,
        "--langgraph",
        action="store_true",
        help="run the LangGraph demo instead (needs durable-graph[langgraph])",
    )
    return parser


def _no_subcommand(args: argparse.Namespace) -> int:  # pragma: no cover - argparse requires one
    raise UsageError("missing action")


def _one_line(text: str) -> str:
    return " ".join(text.split()) or "unknown error"


def _error(text: str, argv: Sequence[str]) -> None:
    """Print the one ``error: ...`` line: one line, the DSN redacted, control characters escaped."""
    print(f"error: {shown(redacted(_one_line(text), _dsn_given(argv)))}", file=sys.stderr)


def _dsn_given(argv: Sequence[str]) -> str | None:
    """The DSN on the command line (or in the environment), even when parsing failed."""
    for i, arg in enumerate(argv):
        if arg == "--dsn" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--dsn="):
            return arg.partition("=")[2]
    return os.environ.get(DSN_ENV) or None


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(given)
        func: Callable[[argparse.Namespace], int] = args.func
        return func(args)
    except UsageError as exc:
        _error(str(exc), given)
        return 2
    except (CliError, StoreError) as exc:
        _error(str(exc), given)
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
        _error(f"{type(exc).__name__}: {exc}", given)
        return 1
