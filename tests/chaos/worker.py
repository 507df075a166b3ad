"""A chaos worker PROCESS: runs the SPEC §5 at-most-once protocol in a loop and logs every call the
store acknowledged, one JSON line each, so the supervisor can check the run afterwards.

    python tests/chaos/worker.py CONFIG_JSON

CONFIG_JSON: {"backend": "sqlite"|"postgres", "path"|"dsn"+"schema", "worker": id, "log": file,
"stop": file, "seed": int, "stall": probability, "time_calls": bool}. Every log line carries its
wall time ``t``; with ``time_calls`` each store call that fails with `ProcessingError` is logged
(``call_failed``) with how long it took, so a run can check the SPEC §6 time bound.

One attempt: ``lease(run_id=new)`` -> ``claim(thread, holder=run_id)`` (retried while busy) ->
``entry`` read after the claim -> ``latest_of_runs`` -> `plan_attempt` -> ``Fresh``: commit the
input applied (metadata ``{"entry_id", "applied": true, "token"}``, ``next=("finish",)``) then a
final commit (``applied: false``, ``next=()``); ``Resume``: the final commit; ``Finished``: nothing
-> release the claim -> ``close(Completed)``. Sometimes it stalls (sleeps past the lease and claim
ttl without renewing) in the window between planning and committing, where fencing must refuse it.
The worker deliberately uses its own minimal loop (not `durable_graph.worker.sync`) so that every
acknowledged call is logged with its timing and token.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
import uuid
from datetime import timedelta
from typing import Any

from durable_graph import (
    ClaimPolicy,
    Commit,
    Completed,
    Exhausted,
    Failed,
    Finished,
    Fresh,
    ProcessingError,
    Resume,
    Started,
    StoreError,
    ThreadBusy,
    ThreadDeleted,
    plan_attempt,
)

LEASE_TTL = timedelta(seconds=1.5)
CLAIM_POLICY = ClaimPolicy(ttl=timedelta(seconds=1.5), renew_every=timedelta(seconds=0.5))
STALL_SECONDS = (1.8, 3.0)
"""Longer than both ttls: another worker may take the entry and the thread meanwhile."""


class Log:
    def __init__(self, path: str, worker: str) -> None:
        self._file = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115
        self._worker = worker

    def __call__(self, kind: str, **fields: Any) -> None:
        fields["kind"] = kind
        fields["worker"] = self._worker
        fields.setdefault("t", time.time())
        self._file.write(json.dumps(fields) + "\n")


class Timed:
    """A store (or its run queue) whose calls that fail with `ProcessingError` are logged with
    their duration."""

    def __init__(self, target: Any, log: Log) -> None:
        self._target = target
        self._log = log

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if name == "run_queue":
            return Timed(attr, self._log)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            started = time.monotonic()
            try:
                return attr(*args, **kwargs)
            except ProcessingError as exc:
                seconds = time.monotonic() - started
                self._log("call_failed", call=name, seconds=seconds, error=str(exc)[:160])
                raise

        return call


def open_store(cfg: dict[str, Any]) -> Any:
    if cfg["backend"] == "sqlite":
        from durable_graph.sqlite import SqliteCheckpointer, SqliteConfig

        return SqliteCheckpointer.open(cfg["path"], SqliteConfig(busy_timeout=timedelta(seconds=5)))
    from durable_graph.postgres import PostgresCheckpointer, PostgresConfig

    return PostgresCheckpointer.open(
        cfg["dsn"],
        PostgresConfig(
            schema=cfg["schema"],
            auto_migrate=False,
            call_timeout=timedelta(seconds=2),
            connection_timeout=timedelta(seconds=1),
            max_pool_size=2,
        ),
    )


class Worker:
    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        self.wid = str(cfg["worker"])
        self.log = Log(cfg["log"], self.wid)
        self.rng = random.Random(cfg["seed"])
        self.stall = float(cfg.get("stall", 0.05))
        self.store: Any = None

    def stopping(self) -> bool:
        return os.path.exists(self.cfg["stop"])

    def run(self) -> None:
        self.log("start", pid=os.getpid())
        while not self.stopping():
            try:
                if self.store is None:
                    store = open_store(self.cfg)
                    self.store = Timed(store, self.log) if self.cfg.get("time_calls") else store
                self.attempt()
            except ProcessingError as exc:
                self.log("processing_error", error=str(exc)[:200])
                time.sleep(0.2)
            except StoreError as exc:
                self.log("store_error", error=type(exc).__name__)
        self.log("stop")

    def maybe_stall(self, where: str) -> None:
        if self.rng.random() < self.stall:
            seconds = self.rng.uniform(*STALL_SECONDS)
            self.log("stall", where=where, seconds=seconds)
            time.sleep(seconds)

    def attempt(self) -> None:
        store = self.store
        queue = store.run_queue
        run_id = f"{self.wid}.{uuid.uuid4().hex[:12]}"
        t0 = time.time()
        lease = queue.lease(self.wid, LEASE_TTL, run_id=run_id)
        t1 = time.time()
        if lease is None:
            time.sleep(0.05)
            return
        entry_id = lease.entry.entry_id
        thread_id = lease.entry.thread_id
        self.log(
            "lease",
            token=lease.token,
            entry_id=entry_id,
            thread_id=thread_id,
            run_id=run_id,
            attempt=type(lease.attempt).__name__,
            t0=t0,
            t1=t1,
        )
        if isinstance(lease.attempt, ThreadDeleted):
            return
        if isinstance(lease.attempt, Exhausted):
            self.close(lease, Failed("exhausted"))
            return
        if not isinstance(lease.attempt, Started):
            queue.release(lease)
            return
        # claim the thread, holder = the run id; wait (keeping the lease) while it is busy.
        claim = None
        deadline = time.monotonic() + 2 * CLAIM_POLICY.ttl.total_seconds()
        while claim is None:
            try:
                t0 = time.time()
                claim = store.claim(thread_id, run_id, CLAIM_POLICY)
                t1 = time.time()
            except ThreadBusy:
                if time.monotonic() > deadline:
                    queue.release(lease)
                    self.log("gave_up_busy", entry_id=entry_id)
                    return
                time.sleep(0.1)
                lease = queue.renew(lease)
        self.log("claim", token=claim.token, thread_id=thread_id, run_id=run_id, t0=t0, t1=t1)
        entry = queue.entry(entry_id, tenant=lease.entry.tenant)  # read AFTER the claim is held
        if entry is None or entry.closed:
            store.release_claim(claim)
            return
        latest = store.latest_of_runs(thread_id, [a.run_id for a in entry.attempts])
        plan = plan_attempt(entry, latest)
        self.log("plan", entry_id=entry_id, plan=type(plan).__name__, run_id=run_id)
        self.maybe_stall("before_commit")
        if isinstance(plan, Fresh):
            if not self.commit(claim, entry_id, run_id, applied=True):
                return
            self.maybe_stall("between_commits")
        if isinstance(plan, (Fresh, Resume)) and not self.commit(
            claim, entry_id, run_id, applied=False
        ):
            return
        assert isinstance(plan, (Fresh, Resume, Finished))
        store.release_claim(claim)
        self.close(lease, Completed({"entry_id": entry_id}))

    def commit(self, claim: Any, entry_id: int, run_id: str, *, applied: bool) -> bool:
        store = self.store
        head = store.get(claim.thread_id)
        commit = Commit(
            checkpoint_id=uuid.uuid4().hex,
            parent_id=None if head is None else head.checkpoint_id,
            run_id=run_id,
            state={"entry_id": entry_id, "applied": applied},
            metadata={"entry_id": entry_id, "applied": applied, "token": claim.token},
            next=("finish",) if applied else (),
        )
        try:
            cp = store.commit(claim, commit)
        except StoreError as exc:
            if isinstance(exc, ProcessingError):
                raise
            self.log(
                "commit_refused",
                error=type(exc).__name__,
                entry_id=entry_id,
                run_id=run_id,
                token=claim.token,
            )
            return False
        self.log(
            "commit",
            thread_id=claim.thread_id,
            checkpoint_id=cp.checkpoint_id,
            entry_id=entry_id,
            run_id=run_id,
            token=claim.token,
            applied=applied,
            seq=cp.seq,
            committed_at=cp.committed_at.timestamp(),
        )
        return True

    def close(self, lease: Any, outcome: Any) -> None:
        try:
            self.store.run_queue.close(lease, outcome)
        except StoreError as exc:
            if isinstance(exc, ProcessingError):
                raise
            self.log("close_refused", entry_id=lease.entry.entry_id, error=type(exc).__name__)
            return
        self.log("close", entry_id=lease.entry.entry_id, outcome=type(outcome).__name__)


def main() -> None:
    cfg = json.loads(sys.argv[1])
    Worker(cfg).run()


if __name__ == "__main__":
    main()
