"""The ``thread`` commands (``ls``, ``show``, ``history``, ``children``, ``delete``,
``prune``), ``events``, ``prune``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from durable_graph.cli.common import (
    PAGE,
    CliError,
    UsageError,
    all_children,
    all_open_entries,
    compact,
    output_of,
    progress_of,
    shown,
    store_of,
    to_jsonable,
    when,
)
from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import ThreadBusy
from durable_graph.core.model import (
    ANY,
    Checkpoint,
    Event,
    PruneResult,
    RetentionPolicy,
    ThreadInfo,
    WatchPolicy,
)
from durable_graph.observe import readable

# --- commands: threads and events ---------------------------------------------------------


def _thread_rows(threads: Sequence[ThreadInfo]) -> list[tuple[object, ...]]:
    return [
        (
            t.thread_id,
            t.parent_thread_id or "-",
            t.head_id or "-",
            t.last_seq,
            when(t.updated_at),
            "-" if t.claim_holder is None else f"{t.claim_holder} until {when(t.claim_expires_at)}",
        )
        for t in threads
    ]


def cmd_thread_ls(args: argparse.Namespace) -> int:
    with store_of(args, read_only=True) as store:
        threads = store.threads(after=args.after, limit=args.limit)
    # Subgraph namespace threads are their root's (``thread children``), not threads of their own.
    threads = [t for t in threads if readable.is_top_level(t.thread_id)]
    out = output_of(args)
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
    with store_of(args, read_only=True) as store:
        info = _thread_or_fail(store, args.thread_id)
        head = store.get(args.thread_id)
        children = all_children(store, args.thread_id)
        entries = all_open_entries(store, ANY, args.thread_id)
    out = output_of(args)
    if out.as_json:
        out.json(
            {
                "thread": to_jsonable(info),
                "head": to_jsonable(head),
                "values": None if head is None else readable.readable_state(head.state),
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
            ("created", when(info.created_at)),
            ("updated", when(info.updated_at)),
            (
                "claim",
                "-"
                if info.claim_holder is None
                else f"{info.claim_holder} until {when(info.claim_expires_at)}",
            ),
            ("children", ", ".join(children) or "-"),
            ("open entries", ", ".join(str(e.entry_id) for e in entries) or "-"),
        ]
    )
    if head is not None:
        out.line()
        out.line(f"head checkpoint {head.checkpoint_id} (run {head.run_id}):")
        shown_state = readable.readable_state(head.state)  # LangGraph's: its channel values
        out.line(json.dumps(shown_state, ensure_ascii=False, indent=2))
    return 0


def _history_rows(history: Sequence[Checkpoint]) -> list[tuple[object, ...]]:
    return [
        (
            cp.seq,
            cp.checkpoint_id,
            cp.run_id,
            readable.readable_next(cp),
            when(cp.committed_at),
            compact(cp.metadata, 50),
        )
        for cp in history
    ]


def cmd_thread_history(args: argparse.Namespace) -> int:
    with store_of(args, read_only=True) as store:
        _thread_or_fail(store, args.thread_id)
        history = store.history(args.thread_id, before=args.before, limit=args.limit)
    out = output_of(args)
    if out.as_json:
        out.json(history)
    else:
        out.table(
            ["SEQ", "CHECKPOINT", "RUN", "NEXT", "COMMITTED", "METADATA"], _history_rows(history)
        )
        if history:  # on stderr, so that the table stays whole
            print(_SEQ_NOTE, file=sys.stderr)
    return 0


_SEQ_NOTE = (
    "SEQ: the thread's event number at each commit (every commit logs a store.checkpoint event "
    "besides its own events, so it grows by more than 1; see `events THREAD`)"
)


def cmd_thread_children(args: argparse.Namespace) -> int:
    with store_of(args, read_only=True) as store:
        _thread_or_fail(store, args.thread_id)
        children = all_children(store, args.thread_id)
    out = output_of(args)
    if out.as_json:
        out.json(children)
    else:
        for child in children:
            out.line(child)
    return 0


def cmd_thread_delete(args: argparse.Namespace) -> int:
    with store_of(args) as store:
        marked = len(all_open_entries(store, ANY, args.thread_id))
        existed = store.delete_thread(args.thread_id)
    if not existed and not marked:
        raise CliError(f"thread {args.thread_id!r} not found")
    out = output_of(args)
    if out.as_json:
        out.json({"thread_id": args.thread_id, "deleted": existed, "entries_marked": marked})
        return 0
    if existed:
        out.line(f"deleted thread {args.thread_id} and its descendants")
    else:
        out.line(f"thread {args.thread_id} has no commit yet: nothing to delete")
    if marked:
        them = "it closes" if marked == 1 else "they close"
        out.line(
            f"marked its {plural(marked, 'open queue entry', 'open queue entries')} deleted: "
            f'{them} Cancelled("thread_deleted") when next leased'
        )
    return 0


def cmd_thread_prune(args: argparse.Namespace) -> int:
    """LangGraph's ``prune`` over the store (SPEC §24.3): ``keep_latest`` keeps each namespace's
    latest checkpoint and what resuming from it needs, as ``threads.prune`` of `serve` does."""
    try:
        from durable_graph.langgraph import DurableSaver
    except ImportError as exc:
        raise CliError(f"thread prune needs durable-graph[langgraph]: {exc}") from None
    with store_of(args) as store:
        found = [t for t in dict.fromkeys(args.thread_ids) if store.thread(t) is not None]
        try:
            DurableSaver(store).prune(found, strategy=args.strategy)
        except (NotImplementedError, ThreadBusy) as exc:  # nothing pruned
            raise CliError(str(exc)) from None
    out = output_of(args)
    if out.as_json:
        out.json({"pruned_count": len(found), "strategy": args.strategy, "thread_ids": found})
        return 0
    done = "deleted" if args.strategy == "delete" else "pruned to their latest checkpoint"
    out.line(f"{plural(len(found), 'thread', 'threads')} {done}")
    for missing in [t for t in args.thread_ids if t not in found]:
        out.line(f"thread {missing!r} not found: skipped")
    return 0


def plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def _event_row(event: Event) -> tuple[object, ...]:
    return (
        event.seq,
        event.kind,
        event.run_id or "-",
        when(event.created_at),
        compact(event.payload, _PAYLOAD_WIDTH),
    )


_PAYLOAD_WIDTH = 60
_EVENT_HEADERS = ["SEQ", "KIND", "RUN", "CREATED", "PAYLOAD"]
_CUT_NOTE = f"payloads longer than {_PAYLOAD_WIDTH} characters are cut (…): --json shows them whole"


def cmd_events(args: argparse.Namespace) -> int:
    out = output_of(args)
    with store_of(args, read_only=True) as store:
        if not args.follow:
            _thread_or_fail(store, args.thread_id)  # an unknown thread is an error, not 0 rows
            events = store.events_after(args.thread_id, args.after, limit=args.limit)
            if out.as_json:
                out.json(events)
            else:
                out.table(_EVENT_HEADERS, [_event_row(e) for e in events])
                if any(str(_event_row(e)[-1]).endswith("…") for e in events):
                    print(_CUT_NOTE, file=sys.stderr)
            return 0
        # --follow: one line per event as it lands (JSON Lines with --json) until interrupted,
        # under a header saying what is followed and that payloads are cut (issue 26 item 11).
        watch = WatchPolicy(poll_interval=args.poll_interval)
        try:
            if not out.as_json:
                print(
                    f"following thread {args.thread_id} after event {args.after} (Ctrl-C "
                    "stops); " + _CUT_NOTE,
                    file=sys.stderr,
                )
                out.out.write("  ".join(_EVENT_HEADERS) + "\n")
                out.out.flush()
            for event in store.subscribe(args.thread_id, after_seq=args.after, watch=watch):
                if out.as_json:
                    out.out.write(json.dumps(to_jsonable(event), ensure_ascii=False) + "\n")
                else:
                    out.out.write(shown("  ".join(str(c) for c in _event_row(event))) + "\n")
                out.out.flush()
        except KeyboardInterrupt:
            return 130  # the only way --follow ends: Ctrl-C, reported as interrupted
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    if args.keep_last is None and args.max_age is None:
        raise UsageError("prune needs --keep-last N and/or --max-age DURATION")
    policy = RetentionPolicy(keep_last=args.keep_last, max_age=args.max_age)
    progress = progress_of(args)
    removed_checkpoints = removed_events = threads_done = 0
    with store_of(args) as store:
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
                        f"pruned {plural(threads_done, 'thread', 'threads')}: "
                        f"{removed_checkpoints} checkpoints, {removed_events} events removed"
                    )
                if len(page) < PAGE:
                    break
                after = page[-1].thread_id
    progress.done()
    out = output_of(args)
    total = PruneResult(removed_checkpoints, removed_events)
    if out.as_json:
        out.json({**to_jsonable(total), "threads": threads_done})
    else:
        out.line(
            f"removed {plural(total.checkpoints_removed, 'checkpoint', 'checkpoints')} and "
            f"{plural(total.events_removed, 'event', 'events')} "
            f"from {plural(threads_done, 'thread', 'threads')}"
        )
    return 0
