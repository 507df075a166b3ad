"""``health``: is the store reachable, is its schema current, how deep is the queue."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from durable_graph.cli.common import (
    CliError,
    Unreachable,
    all_open_entries,
    dsn_of,
    open_store,
    output_of,
    redacted,
    store_label,
)
from durable_graph.core.errors import StoreError
from durable_graph.core.model import ANY


def _check(args: argparse.Namespace) -> dict[str, Any]:
    """The health report; ``ok`` is false when the store cannot be reached, its schema is not
    current, or (``--max-depth``) the queue is deeper than allowed."""
    report: dict[str, Any] = {
        "store": store_label(args),
        "reachable": False,
        "schema_current": False,
        "queue_depth": None,
        "oldest_open_age_seconds": None,
        "ok": False,
        "problem": None,
    }
    try:
        store = open_store(args, read_only=True)
    except Unreachable as exc:
        report["problem"] = redacted(str(exc), dsn_of(args))
        return report
    except (CliError, StoreError) as exc:
        # Reached, but the schema (or the SQLite file's version) is missing, old or foreign.
        report["reachable"] = True
        report["problem"] = redacted(str(exc), dsn_of(args))
        return report
    report["reachable"] = report["schema_current"] = True
    try:
        entries = all_open_entries(store, ANY, None)
    finally:
        store.close()
    report["queue_depth"] = len(entries)
    if entries:
        oldest = min(e.submitted_at for e in entries)
        report["oldest_open_age_seconds"] = round(
            max(0.0, (datetime.now(UTC) - oldest).total_seconds()), 3
        )
    limit = getattr(args, "max_depth", None)
    if limit is not None and len(entries) > limit:
        report["problem"] = f"{len(entries)} open entries, more than --max-depth {limit}"
        return report
    report["ok"] = True
    return report


def cmd_health(args: argparse.Namespace) -> int:
    report = _check(args)
    out = output_of(args)
    if out.as_json:
        out.json(report)
    else:

        def yes(value: object) -> str:
            return "yes" if value else "no"

        depth = report["queue_depth"]
        age = report["oldest_open_age_seconds"]
        depth_text = (
            "-" if depth is None else f"{depth} open {'entry' if depth == 1 else 'entries'}"
        )
        if age is not None:
            depth_text += f" (oldest submitted {age:.0f}s ago)"
        rows: list[tuple[str, object]] = [
            ("store", report["store"]),
            ("reachable", yes(report["reachable"])),
            ("schema current", yes(report["schema_current"])),
            ("queue depth", depth_text),
            ("status", "healthy" if report["ok"] else "UNHEALTHY"),
        ]
        if report["problem"]:
            rows.append(("problem", " ".join(str(report["problem"]).split())))
        out.fields(rows)
    return 0 if report["ok"] else 1
