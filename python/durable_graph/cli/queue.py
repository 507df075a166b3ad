"""The ``queue`` commands: ``ls``, ``show``, ``cancel``, ``reclaim``."""

from __future__ import annotations

import argparse

from ..checkpointer import Checkpointer
from ..errors import NotFound
from ..model import (
    ANY,
    QueueEntry,
    TenantFilter,
)
from .common import (
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

# --- commands: queue -----------------------------------------------------------------------


def _lease_text(entry: QueueEntry) -> str:
    if entry.lease_holder is None:
        return "-"
    return f"{entry.lease_holder} until {when(entry.lease_expires_at)}"


def cmd_queue_ls(args: argparse.Namespace) -> int:
    tenant: TenantFilter = ANY if args.tenant is None else args.tenant
    with store_of(args, read_only=True) as store:
        entries = all_open_entries(store, tenant, args.thread)
    out = output_of(args)
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
                when(e.submitted_at),
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
            ("input", compact(entry.input, 200)),
            ("attempts", f"{len(entry.attempts)}/{entry.max_attempts}"),
            ("admitted", "yes" if entry.admitted else "no"),
            ("thread deleted", "yes" if entry.thread_deleted else "no"),
            ("submitted", when(entry.submitted_at)),
            ("lease", _lease_text(entry)),
            ("outcome", outcome_text(entry.outcome)),
            ("closed", when(entry.closed_at)),
        ]
    )
    if entry.attempts:
        out.line()
        out.table(
            ["ATTEMPT", "RUN", "STARTED"],
            [(a.number, a.run_id, when(a.started_at)) for a in entry.attempts],
        )


def cmd_queue_show(args: argparse.Namespace) -> int:
    with store_of(args, read_only=True) as store:
        entry = _entry_or_fail(store, args.entry_id, tenant_of(args))
    _show_entry(output_of(args), entry)
    return 0


def cmd_queue_cancel(args: argparse.Namespace) -> int:
    with store_of(args) as store:
        try:
            entry = store.run_queue.cancel(args.entry_id, tenant=tenant_of(args))
        except NotFound:
            _entry_or_fail(store, args.entry_id, tenant_of(args))
            raise
    out = output_of(args)
    if out.as_json:
        out.json(entry)
    else:
        out.line(f"entry {entry.entry_id} cancelled")
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
    out = output_of(args)
    if out.as_json:
        out.json({"reclaimed": total})
    else:
        out.line(f"reclaimed {total} closed entries")
    return 0
