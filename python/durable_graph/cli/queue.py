"""The ``queue`` commands: ``ls``, ``stats``, ``show``, ``cancel``, ``retry``, ``reclaim``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from durable_graph.cli.common import (
    CliError,
    Output,
    all_open_entries,
    compact,
    outcome_text,
    output_of,
    progress_of,
    store_of,
    tenant_of,
    when,
)
from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import NotFound
from durable_graph.core.listing import age_text
from durable_graph.core.model import (
    ANY,
    Failed,
    QueueEntry,
    TenantFilter,
)
from durable_graph.core.run_queue import RunQueue

T = TypeVar("T")

# --- commands: queue -----------------------------------------------------------------------


def _lease_text(entry: QueueEntry) -> str:
    if entry.lease_holder is None:
        return "-"
    return f"{entry.lease_holder} until {when(entry.lease_expires_at)}"


def cmd_queue_ls(args: argparse.Namespace) -> int:
    tenant: TenantFilter = ANY if args.tenant is None else args.tenant
    if args.state is not None:
        return _ls_by_state(args, tenant)
    recent: str | None = None
    with store_of(args, read_only=True) as store:
        if args.after is None and args.limit is None:
            entries = all_open_entries(store, tenant, args.thread)
        else:  # one page, continued with --after the last entry shown
            limit = 1000 if args.limit is None else args.limit
            entries = store.run_queue.open_entries(tenant, args.thread, args.after, limit)
            _more_hint(entries, limit)
        if not entries and args.after is None and not output_of(args).as_json:
            recent = _closed_lately(store.run_queue, tenant, args.thread)
    if recent is not None:
        # Issue 26 item 11: right after a submit a worker already ran, say where it went.
        output_of(args).line(
            f"no open entries; {recent} closed in the last hour (--state all lists them)"
        )
        return 0
    _show_entries(args, entries, _OPEN_COLUMNS)
    return 0


def _closed_lately(queue: RunQueue, tenant: TenantFilter, thread: str | None) -> str:
    """How many entries closed in the last hour, from the newest page of every state (the
    store's clock stamps ``closed_at``; "1000+" past one page)."""
    page = queue.entries(None, tenant, thread, None, _RECENT_PAGE)
    since = datetime.now(UTC) - timedelta(hours=1)
    count = sum(1 for e in page if e.closed_at is not None and e.closed_at >= since)
    return f"{count}+" if len(page) == _RECENT_PAGE and count == len(page) else str(count)


_RECENT_PAGE = 1000


def _ls_by_state(args: argparse.Namespace, tenant: TenantFilter) -> int:
    """One page of the entries in ``--state``, newest first (SPEC §13 listing)."""
    limit = 100 if args.limit is None else args.limit
    state = None if args.state == "all" else args.state
    with store_of(args, read_only=True) as store:
        entries = store.run_queue.entries(state, tenant, args.thread, args.after, limit)
    _more_hint(entries, limit)
    _show_entries(args, entries, _BY_STATE_COLUMNS)
    return 0


def _show_entries(
    args: argparse.Namespace, entries: list[QueueEntry], columns: tuple[str, ...]
) -> None:
    out = output_of(args)
    if out.as_json:
        out.json(entries)
    else:
        out.table(columns, [[_CELLS[c](e) for c in columns] for e in entries])


def _more_hint(entries: list[QueueEntry], limit: int) -> None:
    if len(entries) == limit:  # on stderr, so that the table or the JSON stays whole
        print(f"more may follow: --after {entries[-1].entry_id}", file=sys.stderr)


def _outcome_cell(entry: QueueEntry) -> str:
    if isinstance(entry.outcome, Failed):  # a traceback: its last line names the exception
        return f"failed: {_last_line(entry.outcome.error)}"
    return outcome_text(entry.outcome)


_CELLS: dict[str, Callable[[QueueEntry], object]] = {
    "ENTRY": lambda e: e.entry_id,
    "THREAD": lambda e: e.thread_id,
    "TENANT": lambda e: e.tenant or "-",
    "MODE": lambda e: e.mode.value,
    "KEY": lambda e: e.key or "-",
    "ATTEMPTS": lambda e: f"{len(e.attempts)}/{e.max_attempts}",
    "LEASE": _lease_text,
    "OUTCOME": _outcome_cell,
    "SUBMITTED": lambda e: when(e.submitted_at),
    "CLOSED": lambda e: when(e.closed_at),
    "NOT BEFORE": lambda e: when(e.not_before),
    "RETRY OF": lambda e: e.retry_of or "-",
}
"""Each column of an entry table: its header, and how its cell shows an entry."""
_OPEN_COLUMNS = ("ENTRY", "THREAD", "TENANT", "MODE", "KEY", "ATTEMPTS", "LEASE", "SUBMITTED")
_BY_STATE_COLUMNS = (
    "ENTRY",
    "THREAD",
    "TENANT",
    "ATTEMPTS",
    "LEASE",
    "OUTCOME",
    "SUBMITTED",
    "CLOSED",
    "NOT BEFORE",
    "RETRY OF",
)


def _age_text(age: timedelta | None) -> str:
    return "-" if age is None else age_text(age, sep="", width=2)


def cmd_queue_stats(args: argparse.Namespace) -> int:
    tenant: TenantFilter = ANY if args.tenant is None else args.tenant
    with store_of(args, read_only=True) as store:
        stats = store.run_queue.stats(tenant)
    out = output_of(args)
    if out.as_json:
        out.json(stats)
        return 0
    by_kind = [(f"waiting {kind}", n) for kind, n in stats.waiting_by_kind.items()]
    out.fields(
        [
            *stats.counts().items(),
            ("oldest waiting", _age_text(stats.oldest_waiting_age)),
            *by_kind,  # SPEC §15: open entries by kind
        ]
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
            ("input", compact(entry.input, 200)),
            ("attempts", f"{len(entry.attempts)}/{entry.max_attempts}"),
            ("admitted", "yes" if entry.admitted else "no"),
            ("thread deleted", "yes" if entry.thread_deleted else "no"),
            ("submitted", when(entry.submitted_at)),
            ("lease", _lease_text(entry)),
            ("outcome", outcome_text(entry.outcome)),
            ("closed", when(entry.closed_at)),
            ("not before", when(entry.not_before)),
            ("retry of", entry.retry_of or "-"),
        ]
    )
    if entry.attempts:
        out.line()
        out.table(
            ["ATTEMPT", "RUN", "STARTED", "ERROR"],
            [(a.number, a.run_id, when(a.started_at), _last_line(a.error)) for a in entry.attempts],
        )
    for a in entry.attempts:  # SPEC §13: each failed attempt's reason, traceback and all
        if a.error is not None and "\n" in a.error:
            out.line()
            out.line(f"attempt {a.number} failed:")
            for line in a.error.splitlines():
                out.line(f"  {line}")


def _last_line(error: str | None) -> str:
    """A traceback's last line names the exception: enough for a table cell."""
    if error is None:
        return "-"
    lines = error.strip().splitlines()
    last = lines[-1] if lines else ""
    return last if len(last) <= 80 else last[:79] + "…"


def cmd_queue_show(args: argparse.Namespace) -> int:
    with store_of(args, read_only=True) as store:
        entry = _entry_or_fail(store, args.entry_id, tenant_of(args))
    _show_entry(output_of(args), entry)
    return 0


def _on_entry(args: argparse.Namespace, action: Callable[[RunQueue, int, str | None], T]) -> T:
    """``action(run_queue, entry_id, tenant)``; its `NotFound` says what `_entry_or_fail` says."""
    with store_of(args) as store:
        try:
            return action(store.run_queue, args.entry_id, tenant_of(args))
        except NotFound:
            _entry_or_fail(store, args.entry_id, tenant_of(args))
            raise


def cmd_queue_cancel(args: argparse.Namespace) -> int:
    entry = _on_entry(args, lambda queue, entry_id, tenant: queue.cancel(entry_id, tenant=tenant))
    output_of(args).result(entry, f"entry {entry.entry_id} cancelled")
    return 0


def cmd_queue_retry(args: argparse.Namespace) -> int:
    again = bool(getattr(args, "again", False))
    ticket = _on_entry(
        args, lambda queue, entry_id, tenant: queue.retry(entry_id, tenant=tenant, again=again)
    )
    text = f"entry {args.entry_id} retried as entry {ticket.entry_id}"
    if ticket.existing:
        text = (
            f"entry {args.entry_id} was already retried as entry {ticket.entry_id} "
            "(--again to submit another)"
        )
    output_of(args).result(
        {"entry_id": ticket.entry_id, "retry_of": args.entry_id, "existing": ticket.existing},
        text,
    )
    return 0


def cmd_queue_reclaim(args: argparse.Namespace) -> int:
    progress = progress_of(args)
    total = 0
    with store_of(args) as store:
        while True:
            removed = store.run_queue.reclaim(args.older_than, batch=args.batch)
            total += removed
            progress(f"reclaimed {total} entries...")
            if removed < args.batch:
                break
    progress.done()
    output_of(args).result({"reclaimed": total}, f"reclaimed {total} closed entries")
    return 0
