"""One attempt, written once: from `begin_attempt`'s answer to the close (SPEC §5, §11, §18).

This module is the one source of both workers' attempt: async, plain code calling the store's
typed methods (``await self._call(self.store.finish_attempt, lease, outcome, claim)``: mypy
checks each call's arguments against the store's signature). The sync `Attempt` of
``attempt_generated.py`` is generated from it by ``tools/generate_stores.py`` — ``async`` and
``await`` dropped, ``AsyncCheckpointer`` → ``Checkpointer``, ``asyncio.sleep`` → ``time.sleep`` —
as psycopg 3 generates its sync code. Generated rather than a thin wrapper that runs this on an
event loop: the sync worker's handlers run in plain threads against a sync store, and a reader
following `Worker` should land on code that blocks where it reads as blocking.

What genuinely differs stays with each worker, and only that: ``sync.py`` runs an attempt in a
thread and renews it from another thread; ``aio.py`` runs the handler in a task of its own
(cancelled once the attempt is lost) and renews from another task. Each says how an attempt is
finished exactly once (`finish`) and how its handler is called (`call_handler`).

One attempt, in order (SPEC §5's steps, in §11's few calls):

1. `begin_attempt` leased the entry and recorded the attempt and, the thread's claim being free,
   claimed it, read the entry under the claim and planned — a retry with the runs of its whole
   retry chain (SPEC §19.3, §23.5: the store plans, D229). ``ThreadDeleted`` → the store closed
   the entry. No attempt (the run id was taken — a fresh uuid4 never is) → the lease goes back.
2. The claim was busy (``claim`` None): the lease is kept (renewed) and `claim_attempt` tried
   again for up to one claim ttl (D41), then the lease goes back ("busy"). ``Exhausted`` takes
   the claim the same way, as the worker's holder (D42). `claim_attempt` is the rest of
   `begin_attempt` in one call — the claim, the entry read under it, ``latest_of_runs`` over
   its retry chain's runs, the plan and the head — so the store plans here too (D231; giving
   the lease back would burn the recorded attempt).
3. ``Exhausted`` closes ``Completed`` if the run finished anyway, else ``Failed("exhausted")``;
   ``Finished`` closes ``Completed`` with the recorded output, the handler not called (D40);
   ``Fresh`` / ``Resume`` → the handler runs, unless the attempt was lost meanwhile.
4. The handler returns → its output is recorded (effect `output_effect_key`) when a later attempt
   could need it, and `finish_attempt` closes ``Completed(output)``, committing the handler's
   held last checkpoint in the same transaction (§18.1). It raises → attempts left: the claim is
   released and the lease deferred by the backoff (the next attempt resumes from the last
   checkpoint); the last attempt closes ``Failed(traceback)`` (D43).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from durable_graph.core.async_protocols import AsyncCheckpointer
from durable_graph.core.errors import (
    ClaimLost,
    EntryClosed,
    LeaseLost,
    NotFound,
    ProcessingError,
    StoreBusy,
    StoreError,
    ThreadBusy,
    ValidationError,
)
from durable_graph.core.model import (
    JSON,
    AttemptBegun,
    AttemptPlan,
    Cancelled,
    Claim,
    Commit,
    Completed,
    EntryOutcome,
    Exhausted,
    Finished,
    Lease,
    QueueEntry,
    Started,
    ThreadDeleted,
)
from durable_graph.worker.context import busy_pause
from durable_graph.worker.flow import (
    AttemptReport,
    Deferred,
    HandlerCall,
    HandlerResult,
    Note,
    Settlement,
    closing_note,
    describe,
    exhausted_outcome,
    failure_outcome,
    invalid_output,
    log_attempt_end,
    log_attempt_start,
    output_effect_key,
    recorded_output,
    retry_later,
)
from durable_graph.worker.settings import WorkerSettings

P = ParamSpec("P")
T = TypeVar("T")


async def begin(
    store: AsyncCheckpointer, settings: WorkerSettings, run_id: str
) -> AttemptBegun | None:
    """SPEC §11: lease, attempt, claim, read and plan in one call; None when nothing is ready."""
    return await store.begin_attempt(
        settings.holder,
        settings.lease_ttl,
        run_id=run_id,
        claim_policy=settings.claim_policy,
        tenant=settings.tenant,
        kinds=settings.kinds,
    )


class AsyncAttempt:
    """One attempt: its lease and claim, and every decision from `begin_attempt` to the close.

    The worker renews it (`renew`) and may give it up at shutdown (`lose`, then `finish`) from
    another thread or task: a lock guards the claim and the lost and finishing flags, never held
    across a store call.
    """

    def __init__(
        self,
        store: AsyncCheckpointer,
        lease: Lease,
        settings: WorkerSettings,
        log: logging.Logger,
        stopping: Callable[[], bool],
    ) -> None:
        self.store = store
        self.lease = lease
        self.claim: Claim | None = None
        self.settings = settings
        self.log = log
        self.stopping = stopping
        """Whether the worker is stopping: an attempt whose handler has not started yet gives
        itself back."""
        self.lost_event = threading.Event()
        """Set once the attempt is lost (cancelled, re-leased, shut down): `RunContext` waits
        on it."""
        self._lost: StoreError | None = None
        self._finishing = False
        self._raised: BaseException | None = None
        self._lock = threading.Lock()

    # --- what each worker writes: finishing once, calling the handler ---------------------

    async def finish(self, outcome: Settlement, commit: Commit | None = None) -> QueueEntry | None:
        """Stop renewing, then `settle` — once; the closed entry, or None."""
        raise NotImplementedError

    async def call_handler(self, call: HandlerCall) -> HandlerResult:
        """The user's handler, called with the context ``call`` makes: its output or its
        exception."""
        raise NotImplementedError

    # --- the attempt's state ---------------------------------------------------------------

    @property
    def lost(self) -> StoreError | None:
        """What ended the attempt (its renewal refused, its entry closed, shutdown), if any."""
        return self._lost

    def lose(self, error: StoreError) -> None:
        """The attempt is lost (the first error stays): the handler's context refuses writes."""
        with self._lock:
            if self._lost is None:
                self._lost = error
        self.lost_event.set()

    def adopt_claim(self, claim: Claim) -> bool:
        """Keep ``claim``, renewed with the lease; False once the attempt is finishing."""
        with self._lock:
            if self._finishing:
                return False
            self.claim = claim
            return True

    def start_finishing(self) -> bool:
        """Mark the attempt finishing: True for the first caller only (it finishes)."""
        with self._lock:
            first, self._finishing = not self._finishing, True
        return first

    def _take_claim(self) -> Claim | None:
        with self._lock:
            claim, self.claim = self.claim, None
        return claim

    # --- the attempt -----------------------------------------------------------------------

    async def run(self, begun: AttemptBegun, run_id: str) -> AttemptReport:
        """The attempt from `begin_attempt`'s answer (leased with ``run_id``) to its close.

        Logged here once for both workers (D46): the handler's start, and the attempt's end
        with its duration (from the lease) and, when the handler raised, its traceback —
        WARNING for a retry, ERROR for the final failure. A store error gives the lease back
        at once rather than let it wait out its ttl (a later attempt resumes the run; if that
        fails too, the lease expires): it reports "lost" when the attempt was lost meanwhile
        (which explains it), else it propagates.
        """
        started = time.monotonic()
        try:
            report = await self._decide(begun, run_id)
        except StoreError as exc:
            with contextlib.suppress(StoreError):
                await self.finish(None)
            if self.lost is None:
                raise
            report = self._report("lost")
            self.log.info("%s (%s)", describe(report), exc)
            return report
        except BaseException:
            with contextlib.suppress(StoreError):
                await self.finish(None)
            raise
        log_attempt_end(self.log, report, time.monotonic() - started, self._raised)
        return report

    def _report(
        self,
        note: Note,
        outcome: EntryOutcome | None = None,
        run_id: str | None = None,
        number: int | None = None,
        plan: AttemptPlan | None = None,
    ) -> AttemptReport:
        entry = self.lease.entry
        return AttemptReport(entry.entry_id, entry.thread_id, run_id, number, plan, outcome, note)

    async def _decide(self, begun: AttemptBegun, run_id: str) -> AttemptReport:
        start = begun.attempt
        if isinstance(start, ThreadDeleted):
            self.start_finishing()  # the store closed the entry: nothing to give back
            return self._report("thread_deleted", Cancelled("thread_deleted"), run_id)
        if start is None:  # the run id was taken: no attempt recorded, give the lease back
            await self.finish(None)
            return self._report("busy")
        run = run_id if isinstance(start, Started) else None
        number = start.number if isinstance(start, Started) else None
        if begun.claim is None:  # the claim was busy (D41), or the entry is exhausted (D42)
            claimed = await self._claim_late(run or self.settings.holder)
            if isinstance(claimed, str):
                await self.finish(None)
                return self._report(claimed, None, run, number)
            begun = claimed
        elif self.stopping() or not self.adopt_claim(begun.claim):
            # Begun as the worker stopped: give it back before the handler starts.
            await self._release_claim(begun.claim)
            await self.finish(None)
            return self._report("lost", None, run, number)
        assert begun.claim is not None and begun.plan is not None  # claimed and planned
        if isinstance(start, Exhausted):  # D42: Completed if the run finished anyway
            outcome = exhausted_outcome(begun.plan, await self._recorded_output())
            closed = await self.finish(outcome)
            return self._report(closing_note(outcome, closed), outcome, plan=begun.plan)
        assert isinstance(start, Started)
        return await self._run(begun, run_id, start.number, begun.claim, begun.plan)

    async def _claim_late(self, holder: str) -> AttemptBegun | Note:
        """The rest of `begin_attempt` once the thread's claim is free: `claim_attempt` (the
        claim as ``holder``, the entry read under it, ``latest_of_runs`` over the runs of its
        attempts and of its retry chain, the plan and the head, in one call: the store plans,
        D229, D231), tried again while the claim is busy with the lease held, for up to one claim
        ttl (D41). Else why not: "busy" (still taken), "lost" (the attempt was lost meanwhile:
        its lease lost or its entry closed, which `claim_attempt` checks first)."""
        deadline = time.monotonic() + self.settings.claim_wait
        while True:
            try:
                claimed = await self._call(
                    self.store.claim_attempt, self.lease, holder, self.settings.claim_policy
                )
                break
            except ThreadBusy:
                if time.monotonic() >= deadline or self.lost is not None or self.stopping():
                    return "lost" if self.lost is not None else "busy"
                await asyncio.sleep(self.settings.claim_retry_delay)
            except (LeaseLost, EntryClosed) as exc:  # as a renewal meeting them: lost
                self.lose(exc)
                return "lost"
        assert claimed.claim is not None  # claim_attempt claims, or raises
        if not self.adopt_claim(claimed.claim):  # given up meanwhile (shutdown): give it back
            await self._release_claim(claimed.claim)
            return "lost" if self.lost is not None else "busy"
        return claimed

    async def _run(
        self, begun: AttemptBegun, run_id: str, number: int, claim: Claim, plan: AttemptPlan
    ) -> AttemptReport:
        """A started attempt, claimed and planned: the handler (unless the run finished), then
        the close."""
        entry = begun.entry  # read under the claim: its attempts include this one

        def report(note: Note, outcome: EntryOutcome | None = None) -> AttemptReport:
            return self._report(note, outcome, run_id, number, plan)

        if isinstance(plan, Finished):  # D40: the recorded output, without the handler
            done = Completed(await self._recorded_output())
            return report(closing_note(done, await self.finish(done)), done)
        if self.lost is not None:  # lost while beginning: the handler must not start
            await self.finish(None)
            return report("lost")
        log_attempt_start(self.log, entry, number, run_id, plan)
        call = HandlerCall(entry, plan, run_id, number, begun.head, claim)
        result = await self.call_handler(call)
        self._raised = result.error
        if isinstance(result.error, EntryClosed):
            # A store call of the handler met the entry's close (a cancel, SPEC §19.2): the
            # attempt is over, not failed, and nothing of it was written after the close.
            self.lose(result.error)
            self._raised = None
        if self.lost is not None:
            await self.finish(None)
            why = await self._why_lost()
            if why is not None:  # issue 26 item 7: say it was cancelled, and why
                return report("cancelled", why)
            return report("lost")
        last = result.last  # SPEC §18.1: the held last checkpoint rides with the close
        head = result.head
        output_needs_record = result.error is None and (result.output is not None or number > 1)
        if last is not None and (result.error is not None or output_needs_record):
            # The close does not follow at once (a retry, a failure, the output's record
            # first): commit the held checkpoint on its own, where commit_last stood.
            try:
                head = await self._call(self.store.commit, claim, last)
            except StoreError as exc:
                self.lose(exc)
                await self.finish(None)
                return report("lost")
            last = None
        outcome: EntryOutcome | None
        if result.error is not None:  # D43: a raise retries, or closes Failed on the last one
            outcome = failure_outcome(entry, result.error, self.settings.max_attempts)
            if outcome is None:  # logged by `run`, with the traceback
                # The backoff lives in the entry, so whichever worker leases it next waits too.
                await self.finish(retry_later(self.settings, number, result.error))
                return report("retry")
        else:
            outcome = invalid_output(result.output)
            if outcome is None:
                output: JSON = result.output  # type: ignore[assignment]  # checked just above
                # Nothing committed: no thread to record it on. A first attempt's None needs no
                # record either: no other attempt wrote the key, and no record reads as None
                # (D40) — so a job is submit, begin, its commits, finish (SPEC §11).
                if head is not None and output_needs_record:
                    key = output_effect_key(entry.entry_id)
                    try:
                        record = await self._call(
                            self.store.record_effect, claim, key, output, run_id=run_id
                        )
                        output = record.value
                    except NotFound:
                        pass
                outcome = Completed(output)
        closed = await self.finish(outcome, last)
        return report(closing_note(outcome, closed), outcome)

    async def _recorded_output(self) -> JSON:
        """The output an earlier attempt recorded for this entry (D40); None when none was."""
        entry = self.lease.entry
        key = output_effect_key(entry.entry_id)
        return recorded_output(await self._call(self.store.get_effect, entry.thread_id, key))

    async def _why_lost(self) -> Cancelled | None:
        """The entry's `Cancelled` outcome when the attempt was lost because the entry was closed
        cancelled (a `queue cancel`, a deleted thread), else None (re-leased, shut down, gone)."""
        if not isinstance(self.lost, EntryClosed):
            return None
        entry = self.lease.entry
        try:
            now = await self._call(self.store.run_queue.entry, entry.entry_id, entry.tenant)
        except StoreError:
            return None
        outcome = None if now is None else now.outcome
        return outcome if isinstance(outcome, Cancelled) else None

    # --- renewing and settling the lease and the claim -------------------------------------

    async def renew(self) -> bool:
        """Renew the lease, and the claim once one is held (one call, SPEC §11); False once the
        attempt is lost. A transient failure is only logged: both stay current until another
        worker takes them."""
        claim = self.claim
        try:
            if claim is None:
                self.lease = await self._call(self.store.run_queue.renew, self.lease)
                return True
            self.lease, renewed = await self._call(self.store.renew_attempt, self.lease, claim)
        except ClaimLost as exc:
            self.lose(exc)
            return False
        except (LeaseLost, EntryClosed) as exc:
            self.lose(exc)
            # Prompt cancel (SPEC §13): the entry is closed or re-leased, so the claim goes
            # back now, and the handler's next store call under it raises `ClaimLost` even when
            # it bypasses its context.
            lost_claim = self._take_claim()
            if lost_claim is not None:
                await self._release_claim(lost_claim)
            return False
        except StoreError as exc:
            self.log.warning("entry %d: renewal failed: %s", self.lease.entry.entry_id, exc)
            return True
        with self._lock:
            if self.claim is claim:  # not released meanwhile
                self.claim = renewed
        return True

    async def settle(self, outcome: Settlement, commit: Commit | None = None) -> QueueEntry | None:
        """Give the claim and the lease back: with an `EntryOutcome`, one `finish_attempt`
        (close, and release the claim, SPEC §11) committing ``commit`` first when given
        (§18.1); with a `Deferred` outcome (a retry after its backoff, SPEC §13), release the
        claim, then defer; with None, release the claim, then the lease. → the closed entry, or
        None.

        The claim goes first: while the lease is live no other worker can lease the thread, so
        nobody meets a claim that is about to be released. A refused ``commit`` (the claim lost,
        a stale parent, ...) writes nothing: claim and lease are given back, as after a crash,
        so a later attempt resumes the run.
        """
        claim = self._take_claim()
        if claim is not None and outcome is not None and not isinstance(outcome, Deferred):
            try:
                return await self._call(
                    self.store.finish_attempt, self.lease, outcome, claim, commit=commit
                )
            except (LeaseLost, EntryClosed) as exc:
                self.lose(exc)
                await self._release_claim(claim)  # nothing was written: give the claim back
                return None
            except StoreError as exc:
                await self._release_claim(claim)
                if commit is None or isinstance(exc, ProcessingError):
                    raise
                self.lose(exc)  # the last commit was refused: nothing written
                with contextlib.suppress(StoreError):
                    await self._call(self.store.run_queue.release, self.lease)
                return None
        if claim is not None:
            await self._release_claim(claim)
        try:
            if outcome is None:
                await self._call(self.store.run_queue.release, self.lease)
                return None
            if isinstance(outcome, Deferred):
                try:
                    await self._call(
                        self.store.run_queue.defer, self.lease, outcome.delay, outcome.error
                    )
                except ValidationError:  # the store's value limit is below the error text
                    await self._call(self.store.run_queue.defer, self.lease, outcome.delay, None)
                return None
            return await self._call(self.store.run_queue.close, self.lease, outcome)
        except (LeaseLost, EntryClosed) as exc:
            self.lose(exc)
            return None

    async def _release_claim(self, claim: Claim) -> None:
        """Give ``claim`` back; an error means it is gone already (else it expires with its
        ttl)."""
        with contextlib.suppress(StoreError):
            await self._call(self.store.release_claim, claim)

    async def _call(
        self, method: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """``method(*args, **kwargs)`` — each store call of the attempt, its renewals and its
        close — made again while the store is only busy (D69: `StoreBusy`, nothing done), so a
        busy store costs no attempt its outcome."""
        started = time.monotonic()
        while True:
            try:
                return await method(*args, **kwargs)
            except StoreBusy as exc:
                name = getattr(method, "__name__", "a store call")
                await asyncio.sleep(busy_pause(exc, started, self.lease, name))


__all__ = ["AsyncAttempt", "begin"]
