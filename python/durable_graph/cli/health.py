"""``health``: is the store reachable, is its schema current, how deep is the queue (one
`RunQueue.stats` call: counted by the store, aged by the store clock)."""

from __future__ import annotations

import argparse
from typing import Any

from durable_graph.cli.common import (
    CliError,
    Unreachable,
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
        "queue_waiting": None,
        "queue_running": None,
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
        # One call, counted in one snapshot by the store at its own clock (issue 26 item 3):
        # never a walk over the open entries.
        stats = store.run_queue.stats(ANY)
    finally:
        store.close()
    depth = stats.open + stats.running
    report["queue_depth"] = depth
    report["queue_waiting"] = stats.open
    report["queue_running"] = stats.running
    if stats.oldest_waiting_age is not None:
        report["oldest_open_age_seconds"] = round(stats.oldest_waiting_age.total_seconds(), 3)
    limit = getattr(args, "max_depth", None)
    if limit is not None and depth > limit:
        report["problem"] = f"{depth} open entries, more than --max-depth {limit}"
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
        if depth:
            depth_text += f": {report['queue_waiting']} waiting, {report['queue_running']} running"
        if age is not None:
            depth_text += f" (oldest waiting since {age:.0f}s, store clock)"
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
