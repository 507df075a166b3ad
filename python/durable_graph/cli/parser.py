"""The argument parser, and `main`: one ``error: ...`` line per failure, never a traceback."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, NoReturn

from ..errors import StoreError
from ..model import (
    Mode,
)
from .common import (
    DEBUG_ENV,
    DEFAULT_SQLITE_PATH,
    DSN_ENV,
    CliError,
    UsageError,
    json_value,
    non_negative_int,
    parse_duration,
    positive_int,
    redacted,
    shown,
)
from .privileges import cmd_grant, cmd_revoke
from .queue import (
    cmd_queue_cancel,
    cmd_queue_ls,
    cmd_queue_reclaim,
    cmd_queue_show,
)
from .run import (
    cmd_demo,
    cmd_migrate,
    cmd_sql,
    cmd_submit,
    cmd_worker,
)
from .threads import (
    cmd_events,
    cmd_prune,
    cmd_thread_children,
    cmd_thread_delete,
    cmd_thread_history,
    cmd_thread_ls,
    cmd_thread_show,
)

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
    for name, func, help in (
        ("grant", cmd_grant, "let --role call the store in --schema (USAGE + EXECUTE on dg_*)"),
        ("revoke", cmd_revoke, "take back what grant gave --role on --schema"),
    ):
        privilege = command(name, func, help)
        privilege.add_argument("--role", required=True, help="the runtime role")
        privilege.add_argument("--print", action="store_true", help="print the SQL, run nothing")

    worker = command("worker", cmd_worker, "run a worker for a handler until SIGTERM/SIGINT")
    worker.add_argument("--app", required=True, help="the handler, as module:function")
    worker.add_argument(
        "--concurrency", type=positive_int, default=1, metavar="N", help="attempts at once (1)"
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
    submit.add_argument("--input", type=json_value, required=True, help="the run's input (JSON)")
    submit.add_argument(
        "--key", help="idempotency key: a retried identical submit gets the same entry"
    )
    submit.add_argument("--tenant")
    submit.add_argument("--mode", choices=[m.value for m in Mode], default=Mode.ENQUEUE.value)
    submit.add_argument("--max-attempts", type=positive_int, default=3)
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
    show.add_argument("entry_id", type=positive_int, metavar="ID")
    show.add_argument("--tenant", help="the entry's tenant (default: no tenant)")
    cancel = queue_action("cancel", cmd_queue_cancel, "cancel an open entry")
    cancel.add_argument("entry_id", type=positive_int, metavar="ID")
    cancel.add_argument("--tenant", help="the entry's tenant (default: no tenant)")
    reclaim = queue_action("reclaim", cmd_queue_reclaim, "remove entries closed long ago")
    reclaim.add_argument("--older-than", type=parse_duration, required=True, metavar="DURATION")
    reclaim.add_argument("--batch", type=positive_int, default=1000)

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
    tls.add_argument("--limit", type=positive_int, default=100)
    tshow = thread_action("show", cmd_thread_show, "show a thread and its head state")
    tshow.add_argument("thread_id", metavar="ID")
    thist = thread_action(
        "history", cmd_thread_history, "list a thread's checkpoints, newest first"
    )
    thist.add_argument("thread_id", metavar="ID")
    thist.add_argument("--before", help="start before this checkpoint id")
    thist.add_argument("--limit", type=positive_int, default=100)
    tchildren = thread_action("children", cmd_thread_children, "list a thread's child threads")
    tchildren.add_argument("thread_id", metavar="ID")
    tdelete = thread_action("delete", cmd_thread_delete, "delete a thread and its descendants")
    tdelete.add_argument("thread_id", metavar="ID")

    events = command("events", cmd_events, "print a thread's events")
    events.add_argument("thread_id", metavar="THREAD")
    events.add_argument("--after", type=non_negative_int, default=0, help="events after this seq")
    events.add_argument("--limit", type=positive_int, default=1000)
    events.add_argument("--follow", action="store_true", help="keep printing new events")
    events.add_argument("--poll-interval", type=parse_duration, default=timedelta(milliseconds=250))

    prune = command("prune", cmd_prune, "remove old checkpoints and events (retention)")
    prune.add_argument(
        "--keep-last", type=positive_int, metavar="N", help="keep the newest N checkpoints"
    )
    prune.add_argument(
        "--max-age", type=parse_duration, metavar="DURATION", help="remove what is older than this"
    )
    prune.add_argument("--thread", help="prune only this thread")

    demo = command(
        "demo", cmd_demo, "run the crash-and-resume demo (a fresh SQLite file by default)"
    )
    demo.add_argument("--workers", type=positive_int, default=3)
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
    parser = build_parser()
    given = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parser.parse_args(given)
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
