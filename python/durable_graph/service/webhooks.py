"""Webhooks on run completion (SPEC §20.3), delivered through the queue itself.

A run created with ``webhook: <url>`` keeps the URL in its request. When it ends, its delivery
is submitted as an entry of its own: kind ``webhook``, on the thread ``webhook:<run_id>`` (so it
never waits behind, or holds back, the run's thread), with the key ``webhook:<run_id>`` (so a
run has one delivery however often its end is reported). Who sees the end submits it: the
worker whose attempt ended the run (`with_webhooks`: it returned, or failed for the last time),
or the API process that cancelled it. The delivery is an ordinary entry: the worker's backoff
retries a receiver that is down or answers non-2xx, up to `MAX_ATTEMPTS` (about eight minutes),
at least once; its attempts are in ``queue show``.

The POST (`deliver`): LangGraph Server's payload — the run as ``runs.get`` answers it, with its
``status``, ``values`` (a finished run's), ``error`` (a failed run's ``{"error", "message"}``)
and ``webhook_sent_at`` — as JSON, signed when ``DURABLE_GRAPH_WEBHOOK_SECRET`` is set:
``X-Durable-Graph-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">``, which a
receiver checks (and rejects when ``t`` is old, against replays). 10 s a POST at most.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

import httpx

from durable_graph.core.async_protocols import AsyncCheckpointer
from durable_graph.core.errors import ValidationError
from durable_graph.core.model import JSON, Completed, Failed, QueueEntry, Submission
from durable_graph.langgraph.values import message_dict
from durable_graph.service.records import client_error, run_id_of, run_json, service_part
from durable_graph.worker.flow import FinalFailure

if TYPE_CHECKING:
    from durable_graph.aio import AsyncRunContext

KIND: Final = "webhook"
PREFIX: Final = "webhook:"
MAX_ATTEMPTS: Final = 10
"""With the default backoff (about 1 s, 2 s, 4 s ... doubling), the last attempt comes four to
eight minutes after the first: a receiver down for a minute gets its delivery."""
SECRET_ENV: Final = "DURABLE_GRAPH_WEBHOOK_SECRET"
SIGNATURE_HEADER: Final = "X-Durable-Graph-Signature"
TIMEOUT: Final = 10.0
CLOSE_WAIT: Final = timedelta(seconds=10)
"""How long a delivery waits for its run's close (a worker submits it just before it closes)."""
MAX_URL: Final = 2048


class NotDelivered(Exception):
    """The receiver did not take the delivery (the attempt is retried)."""


def check_webhook(value: object) -> str | None:
    """A run's ``webhook``: an http(s) URL with a host, or None."""
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_URL:
        raise ValidationError(f"webhook: an http or https URL of at most {MAX_URL} characters")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationError("webhook: an http or https URL with a host")
    return value


async def submit_delivery(store: AsyncCheckpointer, run: QueueEntry) -> None:
    """Queue the delivery of ``run``'s webhook, if it has one (once a run: by its key)."""
    url = service_part(run).get("webhook")
    if not isinstance(url, str):
        return
    run_id = run_id_of(run.entry_id)
    delivery = {"webhook": url, "entry_id": run.entry_id}
    await store.run_queue.submit(
        Submission(
            f"{PREFIX}{run_id}",
            delivery,
            tenant=run.tenant,
            key=f"{PREFIX}{run_id}",
            kind=KIND,
            max_attempts=MAX_ATTEMPTS,
        )
    )


AsyncHandler = Callable[["AsyncRunContext"], Awaitable[JSON]]


def with_webhooks(graphs: AsyncHandler) -> AsyncHandler:
    """The worker's handler: a delivery entry is delivered; a run is run by ``graphs``, and its
    delivery submitted when this attempt ends it (it returned, or raised for the last time)."""

    async def handler(ctx: AsyncRunContext) -> JSON:
        if ctx.entry.kind == KIND:
            return await deliver(ctx)
        try:
            output = await graphs(ctx)
        except Exception as exc:
            entry = ctx.entry
            if isinstance(exc, FinalFailure) or len(entry.attempts) >= entry.max_attempts:
                await submit_delivery(ctx.store, entry)
            raise
        await submit_delivery(ctx.store, ctx.entry)
        return output

    return handler


async def deliver(ctx: AsyncRunContext) -> JSON:
    """One delivery attempt: POST the ended run to its webhook (`NotDelivered` to retry)."""
    given = ctx.input if isinstance(ctx.input, dict) else {}
    url, entry_id = given.get("webhook"), given.get("entry_id")
    if not isinstance(url, str) or not isinstance(entry_id, int):
        raise ValidationError("input: a webhook delivery names its webhook and run")
    queue = ctx.store.run_queue
    run = await queue.entry(entry_id, tenant=ctx.entry.tenant)
    if run is not None and not run.closed:
        run = await queue.await_closed(entry_id, CLOSE_WAIT, tenant=ctx.entry.tenant)
    if run is None:
        return {"delivered": False, "reason": "the run is gone"}
    if not run.closed:
        raise NotDelivered(f"run {run_id_of(entry_id)} has not ended yet")
    body = json.dumps(payload(run), separators=(",", ":"), default=str).encode()
    headers = {"Content-Type": "application/json", **signature(body)}
    try:
        async with httpx.AsyncClient(timeout=TIMEOUT) as client:
            answer = await client.post(url, content=body, headers=headers)
    except httpx.HTTPError as exc:
        raise NotDelivered(f"{_origin(url)}: {type(exc).__name__}: {exc}") from None
    if not 200 <= answer.status_code < 300:
        raise NotDelivered(f"{_origin(url)} answered {answer.status_code}")
    return {"delivered": True, "status": answer.status_code}


def payload(run: QueueEntry) -> dict[str, Any]:
    """What LangGraph Server posts for an ended run."""
    now = datetime.now(UTC)
    body: dict[str, Any] = {**run_json(run, now), "webhook_sent_at": now.isoformat()}
    outcome = run.outcome
    output = outcome.output if isinstance(outcome, Completed) else None
    body["values"] = message_dict(output.get("values")) if isinstance(output, dict) else None
    if isinstance(outcome, Failed):
        body["error"] = client_error(outcome.error)
    return body


def signature(body: bytes, secret: str | None = None, at: int | None = None) -> dict[str, str]:
    """The signature header of ``body`` (none without a secret)."""
    key = secret if secret is not None else os.environ.get(SECRET_ENV)
    if not key:
        return {}
    stamp = str(int(time.time()) if at is None else at)
    mac = hmac.new(key.encode(), stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return {SIGNATURE_HEADER: f"t={stamp},v1={mac}"}


def _origin(url: str) -> str:
    """The URL's scheme and host (its path and query may hold a secret of the receiver's)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"
