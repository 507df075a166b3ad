"""The LangGraph demo: a graph run by the queue's workers, a stalled worker fenced, an interrupt
answered through the queue (``durable-graph demo --langgraph``, a fresh SQLite file by default;
also ``python -m durable_graph.langgraph.demo [--sqlite PATH]``).

1. A worker leases a run and starts the graph (``plan`` → ``act`` → ``answer``), then stalls after
   ``plan`` past its lease and claim (a GC pause, a lost network).
2. A second worker takes the entry over: it resumes the graph from the stalled worker's
   checkpoint — the input is not applied again — and finishes it.
3. The stalled worker wakes up and tries to write: `EntryClosed` (its run's entry has closed,
   SPEC §19.1), nothing changes.
4. A second thread asks a question with ``interrupt()``; the answer arrives as a new submission
   and the graph finishes.

`run` returns True when every check held (input applied once, the stale write refused, the
interrupt answered).
"""

from __future__ import annotations

import argparse
import operator
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, TextIO, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import EntryClosed
from durable_graph.core.model import ClaimPolicy, Completed, Submission
from durable_graph.langgraph.handler import graph_handler
from durable_graph.langgraph.saver import DurableSaver
from durable_graph.worker.sync import Worker

TTL = timedelta(seconds=1)
POLICY = ClaimPolicy(ttl=TTL, renew_every=timedelta(milliseconds=300))


class Trip(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    traveller: str


def _node(name: str) -> Any:
    def node(state: Trip) -> Trip:
        return {"log": [name]}

    return node


def _ask(state: Trip) -> Trip:
    return {"traveller": str(interrupt("Who is travelling?")), "log": ["asked"]}


def build(saver: DurableSaver) -> tuple[Any, Any]:
    """(the three-step graph, the graph that asks a question), both on ``saver``."""
    steps = StateGraph(Trip)
    for name in ("plan", "act", "answer"):
        steps.add_node(name, _node(name))
    steps.add_edge(START, "plan")
    steps.add_edge("plan", "act")
    steps.add_edge("act", "answer")
    steps.add_edge("answer", END)
    asking = StateGraph(Trip)
    asking.add_node("ask", _ask)
    asking.add_edge(START, "ask")
    asking.add_edge("ask", END)
    return steps.compile(checkpointer=saver), asking.compile(checkpointer=saver)


def run(store: Checkpointer, out: TextIO | None = None) -> bool:
    saver = DurableSaver(store)
    steps, asking = build(saver)
    queue = store.run_queue
    ok = True
    tag = uuid.uuid4().hex[:6]  # fresh threads each run, so the demo reruns on one store
    trip1, trip2 = f"trip-{tag}-1", f"trip-{tag}-2"

    def say(text: str) -> None:
        print(text, file=out or sys.stdout, flush=True)  # sys.stdout as it is now

    # 1. A worker starts the run, then stalls after "plan".
    queue.submit(Submission(trip1, {"log": ["input"]}))
    lease = queue.lease("worker-a", TTL, run_id=f"run-a-{tag}")
    assert lease is not None and lease.entry.thread_id == trip1, "run the demo on a fresh store"
    claim = store.claim(trip1, f"run-a-{tag}", POLICY)
    stalled = steps.copy(update={"checkpointer": saver.for_run(claim, f"run-a-{tag}")})
    stalled.invoke(
        {"log": ["input"]}, {"configurable": {"thread_id": trip1}}, interrupt_after=["plan"]
    )
    say(f"worker-a: ran 'plan' on {trip1}, then stalled (its lease and claim expire)")
    time.sleep(TTL.total_seconds() * 1.5)

    # 2. Another worker takes over and finishes from worker-a's checkpoint.
    worker = Worker(
        store, graph_handler(steps, saver), holder="worker-b", lease_ttl=TTL, claim_policy=POLICY
    )
    report = worker.run_once()
    values = steps.get_state({"configurable": {"thread_id": trip1}}).values
    say(f"worker-b: {report.note if report else 'nothing'}; {trip1} state: {values['log']}")
    if values["log"] != ["input", "plan", "act", "answer"]:
        say("  FAILED: the input must be applied once and each step run once")
        ok = False

    # 3. The stalled worker wakes up and writes: refused.
    try:
        stalled.update_state({"configurable": {"thread_id": trip1}}, {"log": ["late"]})
        say("worker-a: its late write landed — FAILED")
        ok = False
    except EntryClosed:
        say(
            "worker-a: woke up, tried to write: EntryClosed (its run's entry has closed; refused, nothing changed)"
        )

    # 4. An interrupt answered through the queue.
    worker = Worker(
        store, graph_handler(asking, saver), holder="worker-c", lease_ttl=TTL, claim_policy=POLICY
    )
    queue.submit(Submission(trip2, {"log": []}))
    first = worker.run_once()
    asked = first.outcome.output if first and isinstance(first.outcome, Completed) else None
    say(f"{trip2} asks: {asked['interrupts'][0]['value'] if isinstance(asked, dict) else asked}")
    queue.submit(Submission(trip2, {"resume": "Ada"}))
    second = worker.run_once()
    final = asking.get_state({"configurable": {"thread_id": trip2}}).values
    say(f"answered through the queue ({second.note if second else 'nothing'}): {final}")
    if final.get("traveller") != "Ada":
        ok = False
    say("all checks held" if ok else "SOME CHECKS FAILED")
    return ok


def main(argv: list[str] | None = None) -> int:
    from durable_graph.sqlite import SqliteCheckpointer

    parser = argparse.ArgumentParser(description="the LangGraph demo on a SQLite store")
    parser.add_argument("--sqlite", default=None, help="store file (a fresh one by default)")
    args = parser.parse_args(argv)
    path = args.sqlite or str(Path(tempfile.mkdtemp(prefix="durable-graph-lg-")) / "demo.db")
    with SqliteCheckpointer.open(path) as store:
        return 0 if run(store) else 1


if __name__ == "__main__":
    raise SystemExit(main())
