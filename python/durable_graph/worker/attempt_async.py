"""One attempt, written once: from `begin_attempt`'s answer to the close (SPEC §5, §11, §18).

The one source of both workers' attempt (D240): plain code calling the store's typed methods, so
mypy checks each call; the sync `Attempt` of ``attempt_generated.py`` is generated from it. Each
worker says how an attempt is finished exactly once (`finish`) and how its handler is called
(`call_handler`).

One attempt, in order (SPEC §5's steps, in §11's few calls):

1. `begin_attempt` leased the entry, recorded the attempt and, the claim being free, claimed the
   thread, read the entry and planned, a retry with its retry chain's runs (SPEC §19.3, D229).
   ``ThreadDeleted`` → the store closed the entry. No attempt (the run id was taken) → released.
2. The claim was busy (``claim`` None): the lease is kept (renewed) and `claim_attempt` tried
   again for up to one claim ttl (D41), then the lease goes back ("busy"). ``Exhausted`` takes
   the claim the same way, as the worker's holder (D42). The store plans here too (D231).
3. ``Exhausted`` closes ``Completed`` if the run finished anyway, else ``Failed("exhausted")``;
   ``Finished`` closes ``Completed`` with the recorded output, the handler not called (D40);
   ``Fresh`` / ``Resume`` → the handler runs, unless the attempt was lost meanwhile.
4. The handler returns → its output is recorded when a later attempt could need it, and
   `finish_attempt` closes ``Completed(output)`` with the held last checkpoint (§18.1). It raises
   → the lease deferred by the backoff while attempts are left, else ``Failed(traceback)`` (D43).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

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
    output_effect_key,
    recorded_output,
    retry_later,
)
from durable_graph.worker.settings import WorkerSettings

P = ParamSpec("P")
T = TypeVar("T")


def log_fields(
    entry_id: int, thread_id: str, attempt: int | None, run_id: str | None
) -> dict[str, Any]:
    """An attempt's fields on its log records (for ``--log-format json``, D46)."""
    return {"entry_id": entry_id, "thread_id": thread_id, "attempt": attempt, "run_id": run_id}


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
    """One attempt, from `begin_attempt` to the close. The worker renews it and may give it up from
    another unit: a lock, never held across a store call, guards the claim and the flags."""

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
        self.stopping = stopping  # the worker's: an attempt not started yet gives itself back
        self.lost_event = threading.Event()  # set once lost: `RunContext.wait_cancelled` waits
        self.lost: StoreError | None = None
        """What ended the attempt (its renewal refused, its entry closed, shutdown), if any."""
        self._finishing = False
        self._raised: BaseException | None = None
        self._lock = threading.Lock()

    async def finish(self, outcome: Settlement, commit: Commit | None = None) -> QueueEntry | None:
        """Stop renewing, then `settle` — once; the closed entry, or None."""
        raise NotImplementedError

    async def call_handler(self, call: HandlerCall) -> HandlerResult:
        """The user's handler, called with the context ``call`` makes."""
        raise NotImplementedError

    def lose(self, error: StoreError) -> None:
        """The attempt is lost (the first error stays): the handler's context refuses writes."""
        with self._lock:
            if self.lost is None:
                self.lost = error
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

    async def run(self, begun: AttemptBegun, run_id: str) -> AttemptReport:
        """The attempt from `begin_attempt`'s answer to its close, logged (D46). A store error
        gives the lease back at once: "lost" when the attempt was lost meanwhile, else raised."""
        started = time.monotonic()
        try:
            report = await self._decide(begun, run_id)
        except BaseException as exc:
            with contextlib.suppress(StoreError):
                await self.finish(None)
            if not isinstance(exc, StoreError) or self.lost is None:
                raise
            report = self._report("lost")
            self.log.info("%s (%s)", describe(report), exc)
            return report
        self._log_end(report, time.monotonic() - started)
        return report

    def _log_end(self, report: AttemptReport, seconds: float) -> None:
        """The attempt's last line; a handler's exception rides along with its traceback."""
        error = self._raised
        level = {"failed": logging.ERROR, "retry": logging.WARNING}.get(report.note, logging.INFO)
        raised = error is not None and report.note in ("failed", "retry")
        reason = f": {type(error).__name__}: {error}" if raised else ""
        if isinstance(report.outcome, Cancelled) and report.note == "cancelled":
            reason = f" ({report.outcome.reason})"
        self.log.log(
            level,
            "%s in %.3fs%s",
            describe(report),
            seconds,
            reason,
            exc_info=(type(error), error, error.__traceback__) if raised and error else None,
            extra={
                **log_fields(report.entry_id, report.thread_id, report.attempt, report.run_id),
                "outcome": report.note,
                "duration_s": round(seconds, 6),
            },
        )

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
        """`claim_attempt` as ``holder`` (D231), tried again while the claim is busy, the lease
        held, for up to one claim ttl (D41). Else why not: "busy" (still taken) or "lost"."""
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
        """A started attempt, claimed and planned: the handler (unless finished), then the close."""
        entry = begun.entry  # read under the claim: its attempts include this one

        def report(note: Note, outcome: EntryOutcome | None = None) -> AttemptReport:
            return self._report(note, outcome, run_id, number, plan)

        if isinstance(plan, Finished):  # D40: the recorded output, without the handler
            done = Completed(await self._recorded_output())
            return report(closing_note(done, await self.finish(done)), done)
        if self.lost is not None:  # lost while beginning: the handler must not start
            await self.finish(None)
            return report("lost")
        self.log.info(
            "entry %d thread %s attempt %d: started (plan %s)",
            entry.entry_id,
            entry.thread_id,
            number,
            type(plan).__name__.lower(),
            extra=log_fields(entry.entry_id, entry.thread_id, number, run_id),
        )
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
        """The output an earlier attempt recorded for this entry (D40), or None."""
        entry = self.lease.entry
        key = output_effect_key(entry.entry_id)
        return recorded_output(await self._call(self.store.get_effect, entry.thread_id, key))

    async def _why_lost(self) -> Cancelled | None:
        """The entry's `Cancelled` outcome when the attempt was lost to it, else None."""
        if not isinstance(self.lost, EntryClosed):
            return None
        entry = self.lease.entry
        try:
            now = await self._call(self.store.run_queue.entry, entry.entry_id, entry.tenant)
        except StoreError:
            return None
        return now.outcome if now is not None and isinstance(now.outcome, Cancelled) else None

    async def renew(self) -> bool:
        """Renew the lease, and the claim once held (SPEC §11); False once the attempt is lost. A
        transient failure is only logged: both stay ours until another worker takes them."""
        claim = self.claim
        try:
            if claim is None:
                self.lease = await self._call(self.store.run_queue.renew, self.lease)
                return True
            self.lease, renewed = await self._call(self.store.renew_attempt, self.lease, claim)
        except (ClaimLost, LeaseLost, EntryClosed) as exc:
            self.lose(exc)
            # Prompt cancel (SPEC §13): the entry is closed or re-leased, so the claim goes
            # back now, and the handler's next store call under it raises `ClaimLost` even when
            # it bypasses its context.
            lost_claim = None if isinstance(exc, ClaimLost) else self._take_claim()
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
        """Give the claim and the lease back: closed by one `finish_attempt` (committing
        ``commit`` first, §18.1), deferred (a retry, SPEC §13) or released (None). The claim goes
        first: while the lease is live nobody meets a claim about to be released. A refused
        ``commit`` writes nothing: both are given back, as after a crash."""
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
        """Give ``claim`` back; an error means it is gone already (or it expires)."""
        with contextlib.suppress(StoreError):
            await self._call(self.store.release_claim, claim)

    async def _call(
        self, method: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """``method(*args, **kwargs)``, made again while the store is only busy (D69)."""
        started = time.monotonic()
        while True:
            try:
                return await method(*args, **kwargs)
            except StoreBusy as exc:
                name = getattr(method, "__name__", "a store call")
                await asyncio.sleep(busy_pause(exc, started, self.lease, name))


__all__ = ["AsyncAttempt", "begin"]
