"""A cancel racing a run's writes (SPEC §19.1, §19.2), with real processes: a writer process
commits checkpoint after checkpoint under its attempt's claim and run id while this process
cancels the entry at a random moment. A write lands before the close or never: every
checkpoint of the cancelled run is numbered at or below the entry's ``closed_at_seq`` (the
thread's last event number when it closed), the writer's count of accepted commits is what the
store holds, and its first refusal is the close's (`EntryClosed`, or `ClaimLost`: the cancel
ended its claim) with nothing accepted after it. On a SQLite file and on PostgreSQL."""

from __future__ import annotations

import multiprocessing
import random
import time
import uuid
from datetime import timedelta
from multiprocessing.connection import Connection
from pathlib import Path

from durable_graph import Commit, Submission
from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.errors import StoreError

ROUNDS = 12
REFUSALS = 20
"""Commits the writer still tries after its first refusal (each must be refused too)."""
WRITING = 30.0
"""Seconds a writer commits before giving up on the cancel: past SQLite's busy timeout (5 s),
so a cancel that has not landed by then has failed loudly rather than let the writer run out of
commits first (a fixed count of 5,000 did, once, on a loaded machine: `(8, '')`)."""
STEP = 0.0005
"""The most a writer pauses between commits, as a run's step works between checkpoints. Without
it one process commits back to back and SQLite's polling busy handler can miss every gap for
seconds: the cancel would wait on the file rather than race the commits."""


def _open(where: tuple[str, ...]) -> Checkpointer:
    if len(where) == 1:
        from durable_graph.sqlite import SqliteCheckpointer

        return SqliteCheckpointer.open(where[0])
    from durable_graph.postgres import PostgresCheckpointer, PostgresConfig

    return PostgresCheckpointer.open(where[0], PostgresConfig(schema=where[1]))


def _writer(where: tuple[str, ...], jobs: Connection) -> None:
    """For each (claim, run id) received: commit a chain under them until refused, then
    `REFUSALS` more tries; answer (accepted, first refusal's name, accepted after it)."""
    store = _open(where)
    try:
        jobs.send("ready")
        while (job := jobs.recv()) is not None:
            claim, run_id = job
            accepted, refusal, after, parent = 0, "", False, None
            jobs.send("started")
            tries, until, pause = 0, time.monotonic() + WRITING, random.Random(run_id)
            while tries < REFUSALS and time.monotonic() < until:
                checkpoint_id = f"{run_id}-{accepted}-{tries}"
                try:
                    store.commit(claim, Commit(checkpoint_id, parent, run_id, {"n": accepted}))
                except StoreError as exc:
                    refusal = refusal or type(exc).__name__
                    tries += 1
                else:
                    after = after or bool(refusal)
                    accepted, parent = accepted + 1, checkpoint_id
                    time.sleep(pause.uniform(0, STEP))
            jobs.send((accepted, refusal, after))
    finally:
        store.close()


def _race(where: tuple[str, ...]) -> None:
    ctx = multiprocessing.get_context("spawn")
    ours, theirs = ctx.Pipe()
    writer = ctx.Process(target=_writer, args=(where, theirs), daemon=True)
    writer.start()
    store = _open(where)
    try:
        assert ours.poll(60) and ours.recv() == "ready"
        rng = random.Random(19)
        for round_ in range(ROUNDS):
            thread_id, run_id = f"race-{uuid.uuid4().hex[:8]}", f"run-{round_}"
            ticket = store.run_queue.submit(Submission(thread_id, {"round": round_}))
            begun = store.begin_attempt("racer", timedelta(seconds=60), run_id=run_id)
            assert begun is not None and begun.claim is not None
            assert begun.lease.entry.entry_id == ticket.entry_id
            ours.send((begun.claim, run_id))
            assert ours.recv() == "started"
            time.sleep(rng.uniform(0, 0.05))
            store.run_queue.cancel(ticket.entry_id)
            accepted, refusal, after = ours.recv()
            entry = store.run_queue.entry(ticket.entry_id)
            assert entry is not None and entry.closed_at_seq is not None
            held = [c for c in store.history(thread_id, limit=100_000) if c.run_id == run_id]
            assert len(held) == accepted, (round_, accepted, len(held))
            assert all(c.seq <= entry.closed_at_seq for c in held), round_
            assert refusal in ("EntryClosed", "ClaimLost") and not after, (round_, refusal)
            # The thread is free at once: its next run claims it.
            store.release_claim(store.claim(thread_id, "next-run"))
        ours.send(None)
        writer.join(30)
    finally:
        store.close()
        if writer.is_alive():
            writer.kill()


def test_a_cancel_racing_commits_on_a_sqlite_file(tmp_path: Path) -> None:
    path = str(tmp_path / "race.db")
    _open((path,)).close()  # created before the writer opens it
    _race((path,))


def test_a_cancel_racing_commits_on_postgres(pg_dsn: str, pg_schema: str) -> None:
    _open((pg_dsn, pg_schema)).close()
    _race((pg_dsn, pg_schema))
