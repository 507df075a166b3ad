"""The streaming bench (SPEC §14.5, issue 29) on one durable PostgreSQL (fsync on).

    .venv/bin/python -m tests.bench.streaming --out bench-streaming.md   (part of `make bench`)

- **Run cost with and without streaming**: a 4-step graph run through the queue by a worker
  (submit -> begin -> the checkpoints -> finish), stream modes none, ``updates``, and ``values`` +
  ``updates`` + ``debug``, in alternating rounds: runs per second, and the transactions per run
  (``pg_stat_database.xact_commit``: reads and the worker's lease renewals included, so it drifts
  with a run's length; the step events ride in the checkpoints'
  transactions, so streaming adds none of its own except one append for what a graph emits after
  its last checkpoint, as ``debug`` does).
- **Tokens**: one node streaming N tokens from a chat model as fast as it can: events and
  transactions the ``messages`` mode writes (coalesced: one transaction per 100 ms at most).
- **Events per second** into the log and out to a follower on another connection: one node
  writing N ``custom`` chunks, followed by `follow` from a second store handle; end to end from
  the first chunk written to the last one read.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Any, TypedDict

import psycopg
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, MessagesState, StateGraph

from durable_graph.langgraph import DurableSaver, graph_handler, graph_submission
from durable_graph.langgraph.follow import follow
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.testkit.postgres import server as pg_server
from durable_graph.worker.sync import Worker


def log(message: str) -> None:
    print(f"[streaming {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Steps(TypedDict):
    log: Annotated[list[str], lambda a, b: a + b]


def _steps_graph(saver: DurableSaver) -> Any:
    builder = StateGraph(Steps)
    names = ["a", "b", "c", "d"]
    for name in names:
        builder.add_node(name, lambda s, n=name: {"log": [n]})
    builder.add_edge(START, "a")
    for x, y in itertools.pairwise(names):
        builder.add_edge(x, y)
    builder.add_edge("d", END)
    return builder.compile(checkpointer=saver)


def _xacts(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_force_next_flush()")
        row = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    assert row is not None
    return int(row[0])


@dataclass
class RunCost:
    modes: str
    runs: int
    seconds: float
    xacts_per_run: float
    events_per_run: float


def run_cost(dsn: str, schema: str, modes: list[str], runs: int, tag: str = "") -> RunCost:
    with PostgresCheckpointer.open(dsn, PostgresConfig(schema=schema)) as store:
        saver = DurableSaver(store)
        worker = Worker(
            store,
            graph_handler(_steps_graph(saver), saver),
            poll_interval=timedelta(milliseconds=10),
        )
        for i in range(3):  # warm up plans and caches
            store.run_queue.submit(
                graph_submission(f"{tag}warm-{i}", {"log": []}, stream_mode=modes)
            )
            worker.run_once()
        before = _xacts(dsn)
        started = time.perf_counter()
        for i in range(runs):
            store.run_queue.submit(
                graph_submission(f"{tag}run-{i}", {"log": []}, stream_mode=modes)
            )
            report = worker.run_once()
            assert report is not None
        seconds = time.perf_counter() - started
        xacts = _xacts(dsn) - before
        events = sum(
            len([e for e in store.events_after(f"{tag}run-{i}", 0) if e.kind.startswith("lg.")])
            for i in range(runs)
        )
    # pg_stat counts the bench's own two reads of it too: ~0 per run.
    return RunCost(",".join(modes) or "(none)", runs, seconds, xacts / runs, events / runs)


@dataclass
class Tokens:
    tokens: int
    seconds: float
    events: int
    transactions: int


def tokens_bench(dsn: str, schema: str, n: int) -> Tokens:
    text = " ".join(f"t{i}" for i in range(n))
    model = GenericFakeChatModel(messages=itertools.cycle([AIMessage(text)]))

    def chat(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("chat", chat)
    builder.add_edge(START, "chat")
    builder.add_edge("chat", END)
    with PostgresCheckpointer.open(dsn, PostgresConfig(schema=schema)) as store:
        saver = DurableSaver(store)
        worker = Worker(store, graph_handler(builder.compile(checkpointer=saver), saver))
        store.run_queue.submit(graph_submission("tok", {"messages": []}, stream_mode="messages"))
        started = time.perf_counter()
        worker.run_once()
        seconds = time.perf_counter() - started
        events = [e for e in store.events_after("tok", 0) if e.kind == "lg.messages"]
        # Events appended by one append_events call share one committed_at.
        transactions = len({e.committed_at for e in events})
    return Tokens(2 * n - 1, seconds, len(events), transactions)


@dataclass
class Throughput:
    events: int
    write_seconds: float
    follow_seconds: float


def throughput(dsn: str, schema: str, n: int) -> Throughput:
    def emit(state: Steps) -> dict[str, list[str]]:
        writer = get_stream_writer()
        for i in range(n):
            writer({"i": i})
        return {"log": ["done"]}

    builder = StateGraph(Steps)
    builder.add_node("emit", emit)
    builder.add_edge(START, "emit")
    builder.add_edge("emit", END)
    config = PostgresConfig(schema=schema)
    with (
        PostgresCheckpointer.open(dsn, config) as store,
        PostgresCheckpointer.open(dsn, config) as reader,
    ):
        saver = DurableSaver(store)
        worker = Worker(store, graph_handler(builder.compile(checkpointer=saver), saver))
        ticket = store.run_queue.submit(graph_submission("thr", {"log": []}, stream_mode="custom"))
        seen: list[float] = []

        def read() -> None:
            for _ in follow(reader, ticket.entry_id):
                seen.append(time.perf_counter())

        follower = threading.Thread(target=read)
        follower.start()
        started = time.perf_counter()
        worker.run_once()
        written = time.perf_counter() - started
        follower.join()
        assert len(seen) == n, (len(seen), n)
    return Throughput(n, written, seen[-1] - started)


def _rows(items: Iterator[str]) -> str:
    return "\n".join(items)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="bench-streaming.md")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--events", type=int, default=20000)
    args = parser.parse_args(argv)
    server = pg_server.start({}, durable=True)
    try:
        dsn = server.dsn()
        # Alternating rounds, so the machine's drift (a shared host) falls on every variant.
        variants: list[list[str]] = [[], ["updates"], ["values", "updates", "debug"]]
        rounds = 4
        parts: list[list[RunCost]] = [[] for _ in variants]
        for r in range(rounds):
            for i, modes in enumerate(variants):
                log(f"run cost round {r + 1}/{rounds}, modes {modes or 'none'}")
                parts[i].append(run_cost(dsn, f"cost{i}", modes, args.runs // rounds, f"r{r}-"))
        costs = [
            RunCost(
                p[0].modes,
                sum(c.runs for c in p),
                sum(c.seconds for c in p),
                sum(c.xacts_per_run * c.runs for c in p) / sum(c.runs for c in p),
                sum(c.events_per_run * c.runs for c in p) / sum(c.runs for c in p),
            )
            for p in parts
        ]
        log("tokens")
        tok = tokens_bench(dsn, "tokens", args.tokens)
        log("events per second")
        thr = throughput(dsn, "throughput", args.events)
    finally:
        server.stop()
    lines = [
        "# Streaming into the event log (SPEC §14.5)",
        "",
        "One durable PostgreSQL (fsync on), one worker, this machine (2 cores shared).",
        "",
        "## Run cost with and without streaming (4-step graph, one run at a time)",
        "",
        "| stream modes | runs/s | ms/run | transactions/run | stream events/run |",
        "|---|---|---|---|---|",
        _rows(
            f"| {c.modes} | {c.runs / c.seconds:.1f} | {1000 * c.seconds / c.runs:.2f} "
            f"| {c.xacts_per_run:.1f} | {c.events_per_run:.0f} |"
            for c in costs
        ),
        "",
        "## Tokens (one node streaming a message)",
        "",
        f"{tok.tokens} token chunks in {tok.seconds:.2f} s -> {tok.events} `lg.messages` events in "
        f"{tok.transactions} transactions (at most one per 100 ms: "
        f"{int(tok.seconds / 0.1) + 1} allowed).",
        "",
        "## Events per second (custom chunks, written and followed from another connection)",
        "",
        f"{thr.events} events: written in {thr.write_seconds:.2f} s "
        f"({thr.events / thr.write_seconds:.0f} events/s, whole run), last one read by the "
        f"follower {thr.follow_seconds:.2f} s after the run started "
        f"({thr.events / thr.follow_seconds:.0f} events/s end to end).",
        "",
    ]
    text = "\n".join(lines)
    with open(args.out, "w", encoding="utf-8") as out:
        out.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
