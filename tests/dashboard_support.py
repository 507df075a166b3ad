"""What the dashboard tests share: a store filled the way an operator would meet it, and the
dashboard served from a thread on a free port."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

import uvicorn

from durable_graph import (
    Checkpointer,
    Commit,
    Completed,
    EventIn,
    Failed,
    PendingWrite,
    Submission,
)
from durable_graph.dashboard import create_app
from durable_graph.worker.flow import output_effect_key

FAILURE = "ValueError: the model refused <script>alert('x')</script> & gave up"
THREAD = "chat/1 <b>&amp;"
EFFECT_KEY = "email/receipt <i>"
"""A thread id with markup in it: the pages must show it as text."""
CHILD = "chat/1/tool"


@dataclass(frozen=True)
class Filled:
    failed: int
    running: int
    completed: int


def fill(store: Checkpointer) -> Filled:
    """A failed entry, a running one, a completed one on a thread with history, writes, a
    child, an effect and events, and two entries waiting."""
    queue = store.run_queue
    ttl = timedelta(minutes=10)
    # The completed run on THREAD: two checkpoints, a pending write, events, its output.
    completed = queue.submit(Submission(THREAD, {"question": "six times seven?"})).entry_id
    lease = queue.lease("worker-a", ttl, run_id="run-1")
    assert lease is not None and lease.entry.entry_id == completed
    claim = store.claim(THREAD, "run-1")
    first = store.commit(
        claim,
        Commit(
            "cp-1",
            None,
            "run-1",
            {"messages": ["six times seven?"]},
            next=("model",),
            events=(EventIn("run.started", {"by": "worker-a"}),),
        ),
    )
    second = store.commit(
        claim,
        Commit(
            "cp-2",
            first.checkpoint_id,
            "run-1",
            {"messages": ["six times seven?", "42"], "answer": 42},
            events=(EventIn("model.token", {"text": "42"}),),
        ),
    )
    store.put_writes(claim, second.checkpoint_id, [PendingWrite("task-9", "notes", "check")])
    store.record_effect(claim, output_effect_key(completed), {"answer": 42}, "run-1")
    store.record_effect(claim, EFFECT_KEY, {"sent": "receipt"}, "run-1")  # not an output
    store.release_claim(claim)
    child = store.claim(CHILD, "run-1")
    store.commit(child, Commit("cp-c1", None, "run-1", {"tool": "calc"}, parent_thread_id=THREAD))
    store.release_claim(child)
    queue.close(lease, Completed({"answer": 42}))
    # A failed entry.
    failed = queue.submit(Submission("billing-7", "charge", max_attempts=1)).entry_id
    lease = queue.lease("worker-a", ttl, run_id="run-2")
    assert lease is not None and lease.entry.entry_id == failed
    queue.close(lease, Failed(FAILURE))
    # A running one, held by worker-b, and two waiting.
    running = queue.submit(Submission("report-3", "build")).entry_id
    lease = queue.lease("worker-b", ttl, run_id="run-3")
    assert lease is not None and lease.entry.entry_id == running
    queue.submit(Submission("mail-1", "send"))
    queue.submit(Submission("mail-2", "send"))
    return Filled(failed, running, completed)


def add_event(store: Checkpointer, text: str) -> None:
    """An event on THREAD, appended the way a running handler would."""
    claim = store.claim(THREAD, "run-late")
    try:
        store.append_events(claim, [EventIn("model.token", {"text": text})], run_id="run-late")
    finally:
        store.release_claim(claim)


@contextmanager
def serving(store: Checkpointer, token: str | None = None) -> Iterator[str]:
    """The dashboard over ``store`` on 127.0.0.1 and a free port; yields its base URL."""
    app = create_app(store, token, tail_wait=timedelta(milliseconds=200))
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="warning", timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="dashboard", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the dashboard did not start"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
