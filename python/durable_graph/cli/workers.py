"""``workers``: the workers that beat recently (issue 26 item 13), idle ones too — a worker
holding no lease shows nowhere else. One `RunQueue.workers` call; "recently" by the store
clock."""

from __future__ import annotations

import argparse
import sys

from durable_graph.cli.common import CliError, open_store, output_of, when
from durable_graph.core.errors import ValidationError
from durable_graph.core.workers import SEEN_WITHIN


def cmd_workers(args: argparse.Namespace) -> int:
    within = args.seen_within or SEEN_WITHIN
    store = open_store(args, read_only=True)
    try:
        seen = store.run_queue.workers(within, after=args.after, limit=args.limit)
    except ValidationError as exc:
        raise CliError(str(exc)) from None
    finally:
        store.close()
    out = output_of(args)
    if out.as_json:
        out.json(seen)
        return 0
    if not seen:
        out.line(f"no worker beat in the last {within.total_seconds():.0f}s")
        return 0
    out.table(
        ["HOLDER", "STATE", "HOST", "PID", "KINDS", "STARTED (UTC)", "LAST BEAT (UTC)"],
        [
            [
                w.holder, w.state, w.host, w.pid, "all" if w.kinds is None else ",".join(w.kinds),
                when(w.started_at), when(w.last_seen),
            ]
            for w in seen
        ],
    )  # fmt: skip
    busy = sum(1 for w in seen if w.state == "busy")
    out.line(f"{len(seen)} worker(s): {busy} busy, {len(seen) - busy} idle")
    if len(seen) == args.limit:  # one page, continued with --after the last holder shown
        print(f"more may follow: --after {seen[-1].holder}", file=sys.stderr)
    return 0
