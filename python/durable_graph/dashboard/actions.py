"""The dashboard's two actions, retry and cancel (issue 26 item 13): what an on-call engineer
needs at 3 a.m. without a terminal.

They exist only when the dashboard has a token (every request already carries it, `_Guard`),
and each is a ``POST`` that must pass two more checks before it touches the store:

- **same origin**: the request's ``Origin`` (or, lacking one, its ``Referer``) is this
  dashboard's own scheme, host and port, so a page elsewhere cannot post to it;
- **a CSRF token**: the form's ``csrf`` field equals an HMAC of the dashboard token, which only
  the dashboard's own pages embed (the token itself never appears in a page).

A passing request runs `RunQueue.cancel` or `RunQueue.retry` (idempotent, D66) on the entry, as
the entry's own tenant, and is redirected (303) to the entry page: the cancelled entry, or the
retry. Anything else is refused with 403 (checks) or 409 (the entry cannot be cancelled or
retried), and nothing is written.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable
from urllib.parse import parse_qs, urlsplit

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from durable_graph.core.errors import EntryClosed, NotFound, ValidationError
from durable_graph.core.run_queue import RunQueue
from durable_graph.dashboard import render

_CSRF_CONTEXT = b"durable_graph.dashboard.csrf/v1"
MAX_FORM_BYTES = 4096


def csrf_token(token: str) -> str:
    """The form token the dashboard's pages embed: an HMAC of the dashboard token."""
    return hmac.new(token.encode(), _CSRF_CONTEXT, hashlib.sha256).hexdigest()


def same_origin(request: Request) -> bool:
    """Whether the request comes from a page of this dashboard (``Origin``, else ``Referer``)."""
    host = request.headers.get("host")
    if not host:
        return False
    own = f"{request.url.scheme}://{host}".lower()
    origin = request.headers.get("origin")
    if origin is not None:
        return origin.lower() == own
    referer = request.headers.get("referer")
    if referer is None:
        return False
    parts = urlsplit(referer)
    return f"{parts.scheme}://{parts.netloc}".lower() == own


def forms(entry_id: int, csrf: str, *, can_cancel: bool, can_retry: bool) -> str:
    """The entry page's action buttons (none when neither applies)."""
    buttons = []
    for action, label, shown in (
        ("cancel", "Cancel this entry", can_cancel),
        ("retry", "Retry this entry", can_retry),
    ):
        if shown:
            buttons.append(
                f'<form method=post action="{render.href(f"/entry/{entry_id}/{action}")}" '
                f'class="action action-{action}">'
                f'<input type=hidden name=csrf value="{render.attr(csrf)}">'
                f"<button type=submit>{render.text(label)}</button></form>"
            )
    return f"<section class=actions>{''.join(buttons)}</section>" if buttons else ""


def _refused(status: int, why: str) -> Response:
    return HTMLResponse(
        render.page("Refused", f"<h1>Refused</h1><p>{render.text(why)}</p>"), status_code=status
    )


class Actions:
    """The ``POST /entry/{id}/cancel`` and ``/retry`` endpoints over one queue."""

    def __init__(self, queue: RunQueue, token: str) -> None:
        self.queue = queue
        self.csrf = csrf_token(token)

    async def _checked(self, request: Request) -> Response | None:
        """None when the request passes both checks, else the refusal."""
        if not same_origin(request):
            return _refused(403, "this action must come from the dashboard's own page")
        body = await request.body()
        if len(body) > MAX_FORM_BYTES:
            return _refused(403, "the form is too large")
        given = parse_qs(body.decode("utf-8", "replace")).get("csrf", [""])[0]
        if not hmac.compare_digest(given.encode(), self.csrf.encode()):
            return _refused(403, "the form's CSRF token is missing or wrong: reload the page")
        return None

    def endpoint(self, action: str) -> Callable[[Request], Awaitable[Response]]:
        async def run(request: Request) -> Response:
            refused = await self._checked(request)
            if refused is not None:
                return refused
            entry_id: int = request.path_params["entry_id"]
            # The store calls block: run them in Starlette's thread pool, as the pages are.
            return await run_in_threadpool(self._act, action, entry_id)

        return run

    def _act(self, action: str, entry_id: int) -> Response:
        found = self.queue.entries(after=entry_id + 1, limit=1)
        if not found or found[0].entry_id != entry_id:
            return _refused(404, f"entry {entry_id} not found")
        tenant = found[0].tenant
        try:
            if action == "cancel":
                self.queue.cancel(entry_id, tenant=tenant)
                target = entry_id
            else:
                target = self.queue.retry(entry_id, tenant=tenant).entry_id
        except (EntryClosed, NotFound, ValidationError) as exc:
            return _refused(409, str(exc))
        return RedirectResponse(f"/entry/{target}", status_code=303)


__all__ = ["MAX_FORM_BYTES", "Actions", "csrf_token", "forms", "same_origin"]
