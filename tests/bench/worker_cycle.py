"""(c) The full worker cycle of SPEC §5 "At most once", one attempt that commits once.

``lease(run_id=...)`` → ``claim(thread, holder=run_id)`` → ``entry`` (read under the claim) →
``latest_of_runs`` → `plan_attempt` → ``commit`` (~1 KB state, ``next=()``) → ``release_claim``
is *not* in the brief's list and is skipped here (the claim is left to expire, as the thread is
never touched again) → ``close``. The ``submit`` that feeds each cycle is excluded work: timed,
reported, but subtracted from the cycle's latency and rate.

`RuntimeCycle` measures the same through the real runtime: ``Worker.run_once()`` with a handler
that commits once (it adds the output effect, ``release_claim`` and the keeper thread).
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from durable_graph.core.model import Commit, Completed, Fresh, Started, Submission
from durable_graph.core.run_queue import plan_attempt

from .checkpoint import LONG_CLAIM
from .common import JOB_INPUT, STATE, ns
from .stores import open_store

LEASE_TTL = timedelta(minutes=5)


class WorkerCycle:
    def __init__(self, params: dict[str, Any], index: int) -> None:
        self.params = params
        self.prefix = f"wc-{params['tag']}-{index}-{uuid.uuid4().hex[:8]}"
        self.holder = f"w{index}"
        self.n = 0
        self.retries = 0

    def setup(self) -> None:
        self.store = open_store(self.params)
        self.queue = self.store.run_queue

    def op(self) -> dict[str, int]:
        self.n += 1
        run_id = f"{self.prefix}-r{self.n}"
        t0 = ns()
        self.queue.submit(Submission(thread_id=f"{self.prefix}-{self.n}", input=JOB_INPUT))
        t1 = ns()
        parts = {"_submit": t1 - t0}
        while True:
            lease = self.queue.lease(self.holder, LEASE_TTL, run_id=run_id)
            if lease is not None:
                break
            self.retries += 1
        t2 = ns()
        parts["lease(run_id)"] = t2 - t1
        assert isinstance(lease.attempt, Started)
        thread_id = lease.entry.thread_id
        claim = self.store.claim(thread_id, run_id, LONG_CLAIM)
        t3 = ns()
        parts["claim"] = t3 - t2
        entry = self.queue.entry(lease.entry.entry_id, lease.entry.tenant)
        t4 = ns()
        parts["entry"] = t4 - t3
        assert entry is not None
        latest = self.store.latest_of_runs(thread_id, [a.run_id for a in entry.attempts])
        t5 = ns()
        parts["latest_of_runs"] = t5 - t4
        plan = plan_attempt(entry, latest)
        assert isinstance(plan, Fresh)
        self.store.commit(
            claim,
            Commit(
                checkpoint_id=uuid.uuid4().hex,
                parent_id=None,
                run_id=run_id,
                state=STATE,
                next=(),
            ),
        )
        t6 = ns()
        parts["commit"] = t6 - t5
        self.queue.close(lease, Completed({"ok": True}))
        parts["close"] = ns() - t6
        return parts

    def close(self) -> None:
        self.store.close()


def _handler(ctx: Any) -> Any:
    ctx.commit(STATE)
    return {"ok": True}


class RuntimeCycle:
    def __init__(self, params: dict[str, Any], index: int) -> None:
        self.params = params
        self.prefix = f"rt-{params['tag']}-{index}-{uuid.uuid4().hex[:8]}"
        self.index = index
        self.n = 0
        self.retries = 0

    def setup(self) -> None:
        from durable_graph.worker.sync import Worker

        self.store = open_store(self.params)
        self.queue = self.store.run_queue
        self.worker = Worker(self.store, _handler, holder=f"rt{self.index}", lease_ttl=LEASE_TTL)

    def op(self) -> dict[str, int]:
        self.n += 1
        t0 = ns()
        self.queue.submit(Submission(thread_id=f"{self.prefix}-{self.n}", input=JOB_INPUT))
        t1 = ns()
        while self.worker.run_once() is None:
            self.retries += 1
        return {"_submit": t1 - t0, "run_once": ns() - t1}

    def close(self) -> None:
        self.store.close()
