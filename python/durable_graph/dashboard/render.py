"""The dashboard's HTML, as plain functions of store values (no template engine, no JavaScript
framework). Every value from the store goes through `text` or `attr`: ids, inputs and failure
texts can hold anything, markup and control characters included.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

from durable_graph.core.listing import ENTRY_STATES, age_text, state_of
from durable_graph.core.model import (
    JSON,
    Cancelled,
    Checkpoint,
    Completed,
    EffectRecord,
    Event,
    Failed,
    Interrupted,
    QueueEntry,
    QueueStats,
    ThreadInfo,
)
from durable_graph.core.workers import WorkerSeen
from durable_graph.observe import readable

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
SHOWN_CHARS = 2000
"""A value on a list page (a thread's history, writes, effects, events) shows at most this many
characters of its JSON, then its size and a link to the whole value: one page's HTML stays
bounded however large the values are (issue #24)."""


def _visible(value: str) -> str:
    """Control characters as ``\\xNN`` so that an id shows what it holds."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", value)


def text(value: object) -> str:
    """``value`` as HTML text: escaped, control characters made visible."""
    return html.escape(_visible(str(value)), quote=True)


def attr(value: object) -> str:
    """``value`` inside a double-quoted attribute."""
    return html.escape(str(value), quote=True)


def href(path: str, **query: object) -> str:
    """A same-site link; query values are URL-encoded, the whole escaped for an attribute."""
    given = {k: str(v) for k, v in query.items() if v is not None}
    return attr(path + ("?" + urlencode(given) if given else ""))


def when(value: datetime | None, now: datetime | None = None) -> str:
    """A store time in UTC, said so, with its distance from now (issue 26 item 13)."""
    if value is None:
        return "—"
    value = value.astimezone(UTC)
    shown = value.strftime("%Y-%m-%d %H:%M:%S UTC")
    delta = (now or datetime.now(UTC)) - value
    ago = (
        f"{age_text(delta, sep=' ', width=1)} ago"
        if delta >= timedelta(0)
        else f"in {age_text(-delta, sep=' ', width=1)}"
    )
    return (
        f'<time datetime="{attr(value.isoformat())}">{text(shown)}</time>'
        f" <span class=ago>({text(ago)})</span>"
    )


def running_for(entry: QueueEntry, now: datetime) -> str:
    """How long a running entry's current attempt has run (issue 26 item 13)."""
    if not entry.attempts:
        return ""
    elapsed = max(now - entry.attempts[-1].started_at, timedelta(0))
    return f"running for {age_text(elapsed, sep=' ', width=1)}"


def age(value: timedelta | None) -> str:
    return "none waiting" if value is None else age_text(value, sep=" ", width=1)


def pretty(value: JSON) -> str:
    return text(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True))


def outcome_text(entry: QueueEntry) -> str:
    outcome = entry.outcome
    if outcome is None:
        return ""
    if isinstance(outcome, Failed):  # a traceback: its last line names the exception
        lines = [line for line in outcome.error.splitlines() if line.strip()]
        return lines[-1] if lines else outcome.error
    if isinstance(outcome, Cancelled):
        return f"cancelled: {outcome.reason}"
    if isinstance(outcome, Interrupted):
        return f"{readable.SUPERSEDED} by entry {outcome.by}"
    assert isinstance(outcome, Completed)
    asked = readable.waiting_for(entry)
    if asked is not None:  # a LangGraph run stopped at interrupt()
        return "waiting for input: " + json.dumps(asked, ensure_ascii=False)[:200]
    return "completed"


def page(
    title: str, body: str, *, nav: str = "", refresh: int | None = None, actions: bool = False
) -> str:
    """A whole document: the stylesheet and script are served by the dashboard itself;
    ``refresh``: reload every so many seconds (issue 26 item 13)."""
    links = [
        ("queue", "/", "Queue"),
        ("threads", "/threads", "Threads"),
        ("scheduling", "/scheduling", "Scheduling"),
    ]
    items = "".join(
        f'<a href="{href(path)}"{" aria-current=page" if key == nav else ""}>{label}</a>'
        for key, path, label in links
    )
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        f"<title>{text(title)} · durable_graph</title>"
        + (f'<meta http-equiv=refresh content="{int(refresh)}">' if refresh else "")
        + '<link rel=stylesheet href="/static/dashboard.css">'
        '<script src="/static/dashboard.js" defer></script>'
        f"</head><body><header><strong>durable_graph</strong><nav>{items}</nav>"
        + (
            "<span class=readonly>retry and cancel enabled</span>"
            if actions
            else "<span class=readonly>read-only</span>"
        )
        + "</header>"
        f"<main>{body}</main></body></html>"
    )


def badge(state: str, label: str | None = None) -> str:
    return f'<span class="badge state-{attr(state)}">{text(label or state)}</span>'


def entry_badge(entry: QueueEntry, now: datetime) -> str:
    """The entry's state, named for a LangGraph user: a run stopped at ``interrupt()`` is
    waiting for input; an entry pre-empted by an INTERRUPT submission is superseded."""
    state = state_of(entry, now)
    if readable.waiting_for(entry) is not None:
        return badge(state, "waiting for input")
    if state == "interrupted":
        return badge(state, readable.SUPERSEDED)
    return badge(state)


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], cls: str, empty: str) -> str:
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    if not body:
        return f'<p class="empty {attr(cls)}">{text(empty)}</p>'
    head = "".join(f"<th>{text(h)}</th>" for h in headers)
    return f'<table class="{attr(cls)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


# --- queue --------------------------------------------------------------------------------


def queue_page(
    stats: QueueStats,
    entries: list[QueueEntry],
    leases: list[tuple[str, list[QueueEntry]]],
    now: datetime,
    state: str | None,
    next_after: int | None,
    actions: bool = False,
    workers: Sequence[WorkerSeen] = (),
    next_workers_after: str | None = None,
) -> str:
    cards = "".join(
        f'<a class="stat state-{attr(s)}" data-state="{attr(s)}" href="{href("/", state=s)}">'
        f"<span class=count>{count}</span><span class=label>{text(s)}</span></a>"
        for s, count in stats.counts().items()
    )
    waiting = f"<p class=oldest>Oldest waiting: <strong>{text(age(stats.oldest_waiting_age))}</strong></p>"
    worker_rows = workers_rows(workers, leases, now)
    filters = " ".join(
        f'<a href="{href("/", state=s)}"{" aria-current=true" if s == state else ""}>{text(s)}</a>'
        for s in ENTRY_STATES
    )
    more = (
        f'<p><a class=next href="{href("/", state=state, after=next_after)}">Older entries →</a></p>'
        if next_after is not None
        else ""
    )
    more_workers = (
        f'<p><a class=next href="{href("/", workers_after=next_workers_after)}">'
        "More workers →</a></p>"
        if next_workers_after is not None
        else ""
    )
    title = "Entries" if state is None else f"Entries: {state}"
    return page(
        "Queue",
        f"<h1>Queue</h1><section class=stats>{cards}</section>{waiting}"
        "<h2>Workers</h2>"
        + _table(
            [
                "worker",
                "state",
                "host",
                "kinds",
                "leases held",
                "first expiry",
                "started",
                "last beat",
            ],
            worker_rows,
            "workers",
            "No worker beat in the last 30 s, and none holds a lease.",
        )
        + more_workers
        + f'<h2>{text(title)}</h2><p class=filters><a href="/">all</a> {filters}</p>'
        + entries_table(entries, now)
        + more,
        nav="queue",
        refresh=QUEUE_REFRESH_SECONDS,
        actions=actions,
    )


def workers_rows(
    workers: Sequence[WorkerSeen], leases: list[tuple[str, list[QueueEntry]]], now: datetime
) -> list[tuple[str, ...]]:
    """A row per worker that beat recently (idle ones too, issue 26 item 13), with the leases it
    holds; then a row per lease holder that does not beat (``run_once``, an older worker)."""
    held = dict(leases)

    def lease_cells(holder: str) -> tuple[str, str]:
        mine = held.get(holder, [])
        links = ", ".join(
            f'<a href="{href(f"/entry/{e.entry_id}")}">#{e.entry_id}</a>' for e in mine
        )
        expiry = min((e.lease_expires_at for e in mine if e.lease_expires_at), default=None)
        return links or "—", when(expiry, now) if mine else "—"

    rows: list[tuple[str, ...]] = []
    for w in workers:
        links, expiry = lease_cells(w.holder)
        rows.append(
            (
                text(w.holder),
                f'<span class="worker-state {attr(w.state)}">{text(w.state)}</span>',
                text(f"{w.host} (pid {w.pid})"),
                "all" if w.kinds is None else text(", ".join(w.kinds)),
                links,
                expiry,
                when(w.started_at, now),
                when(w.last_seen, now),
            )
        )
    beating = {w.holder for w in workers}
    for holder, _ in leases:
        if holder not in beating:
            links, expiry = lease_cells(holder)
            no_beat = '<span class="worker-state busy">busy</span> (no heartbeat)'
            rows.append((text(holder), no_beat, "—", "—", links, expiry, "—", "—"))
    return rows


QUEUE_REFRESH_SECONDS = 10
"""The queue page, and an open entry's page, reload this often (issue 26 item 13)."""


def entries_table(entries: list[QueueEntry], now: datetime) -> str:
    rows = [
        (
            f'<a href="{href(f"/entry/{e.entry_id}")}">#{e.entry_id}</a>',
            entry_badge(e, now)
            + (
                f" <span class=elapsed>{text(running_for(e, now))}</span>"
                if state_of(e, now) == "running"
                else ""
            ),
            f'<a href="{href("/thread", id=e.thread_id)}">{text(e.thread_id)}</a>',
            text(e.tenant or "—"),
            f"{len(e.attempts)}/{e.max_attempts}",
            when(e.submitted_at, now),
            f"<span class=outcome>{text(outcome_text(e))}</span>",
        )
        for e in entries
    ]
    headers = ["entry", "state", "thread", "tenant", "attempts", "submitted", "outcome"]
    return _table(headers, rows, "entries", "No entries.")


def _entry_link(entry_id: int | None) -> str:
    return "—" if entry_id is None else f'<a href="{href(f"/entry/{entry_id}")}">#{entry_id}</a>'


def entry_page(
    entry: QueueEntry,
    now: datetime,
    output: EffectRecord | None,
    *,
    retries: Sequence[int] = (),
    actions_html: str = "",
    actions: bool = False,
) -> str:
    """``retries``: the entries that retry this one; ``actions_html``: its action forms."""
    state = state_of(entry, now)
    facts = [
        ("thread", f'<a href="{href("/thread", id=entry.thread_id)}">{text(entry.thread_id)}</a>'),
        ("tenant", text(entry.tenant or "—")),
        ("key", text(entry.key or "—")),
        ("mode", text(entry.mode.value)),
        ("attempts", f"{len(entry.attempts)} of {entry.max_attempts}"),
        ("submitted", when(entry.submitted_at, now)),
        ("lease holder", text(entry.lease_holder or "—")),
        ("lease expires", when(entry.lease_expires_at, now)),
        ("closed", when(entry.closed_at, now)),
        ("outcome", text(outcome_text(entry) or "—")),
        ("not before", when(entry.not_before, now)),
        ("retry of", _entry_link(entry.retry_of)),
        ("retried as", ", ".join(_entry_link(r) for r in retries) or "—"),
    ]
    if state == "running":
        facts.insert(5, ("running", text(running_for(entry, now))))
    dl = "".join(f"<dt>{text(k)}</dt><dd>{v}</dd>" for k, v in facts)
    failure = ""
    if isinstance(entry.outcome, Failed):
        failure = f"<h2>Failure</h2><pre class=failure>{text(entry.outcome.error)}</pre>"
    attempts = _table(
        ["attempt", "run id", "started", "failure"],
        [
            (
                str(a.number),
                text(a.run_id),
                when(a.started_at, now),
                "—" if a.error is None else f"<pre class=attempt-error>{text(a.error)}</pre>",
            )
            for a in entry.attempts
        ],
        "attempts",
        "No attempt yet.",
    )
    result = ""
    if isinstance(entry.outcome, Completed):
        result = f"<h2>Output</h2><pre class=output>{pretty(entry.outcome.output)}</pre>"
    elif output is not None:
        result = f"<h2>Recorded output</h2><pre class=output>{pretty(output.value)}</pre>"
    return page(
        f"Entry {entry.entry_id}",
        f"<h1>Entry #{entry.entry_id} {entry_badge(entry, now)}</h1>{actions_html}"
        f"<dl class=facts>{dl}</dl>{failure}"
        f"<h2>Attempts</h2>{attempts}<h2>Input</h2><pre class=input>{pretty(entry.input)}</pre>"
        + result,
        nav="queue",
        refresh=None if entry.closed else QUEUE_REFRESH_SECONDS,
        actions=actions,
    )


def queued_thread_page(thread_id: str, entries: list[QueueEntry], now: datetime) -> str:
    """A thread with queue entries but no commit yet (every run failed before committing, or
    none ran): its entries, rather than "Not found" (issue 26 item 13)."""
    return page(
        f"Thread {thread_id}",
        f"<h1>Thread {text(thread_id)}</h1>"
        "<p class=no-commit>No checkpoint yet: no run of this thread has committed. "
        "Its queue entries:</p>" + entries_table(entries, now),
        nav="threads",
    )


# --- threads ------------------------------------------------------------------------------


def threads_page(threads: list[ThreadInfo], next_after: str | None) -> str:
    rows = [
        (
            f'<a href="{href("/thread", id=t.thread_id)}">{text(t.thread_id)}</a>',
            text(t.parent_thread_id or "—"),
            str(t.last_seq),
            when(t.updated_at),
            text(t.claim_holder or "—"),
        )
        for t in threads
    ]
    more = (
        f'<p><a class=next href="{href("/threads", after=next_after)}">More threads →</a></p>'
        if next_after is not None
        else ""
    )
    return page(
        "Threads",
        "<h1>Threads</h1>"
        + _table(
            ["thread", "parent", "events", "updated", "claimed by"], rows, "threads", "No threads."
        )
        + more,
        nav="threads",
    )


def diff(parent: JSON, state: JSON) -> list[tuple[str, str, JSON, JSON]]:
    """``(key, change, before, after)`` from ``parent`` to ``state``: top-level keys of two
    objects, else the whole value."""
    if isinstance(parent, dict) and isinstance(state, dict):
        changes: list[tuple[str, str, JSON, JSON]] = []
        for key in sorted(parent.keys() | state.keys()):
            if key not in parent:
                changes.append((key, "added", None, state[key]))
            elif key not in state:
                changes.append((key, "removed", parent[key], None))
            elif parent[key] != state[key]:
                changes.append((key, "changed", parent[key], state[key]))
        return changes
    return [] if parent == state else [("(value)", "changed", parent, state)]


def _compact(value: JSON, whole: str | None = None) -> str:
    """``value`` as compact JSON text, cut after `SHOWN_CHARS` characters with its size in bytes
    and, given ``whole`` (an escaped link), a link to the whole value."""
    dumped = json.dumps(value, ensure_ascii=False, sort_keys=True)
    if len(dumped) <= SHOWN_CHARS:
        return text(dumped)
    size = len(dumped.encode("utf-8", "surrogatepass"))
    link = f' <a class=whole href="{whole}">whole value</a>' if whole else ""
    return f"{text(dumped[:SHOWN_CHARS])}<span class=cut>… ({size:,} bytes){link}</span>"


def value_link(thread_id: str, **which: object) -> str:
    """The link to one whole value of a thread (`durable_graph.dashboard.app`'s /thread/value)."""
    return href("/thread/value", id=thread_id, **which)


def _checkpoint(cp: Checkpoint, parent: Checkpoint | None) -> str:
    # A LangGraph checkpoint shows as its channel values (messages readable), never as blobs.
    state = readable.readable_state(cp.state)
    mine = value_link(cp.thread_id, checkpoint=cp.checkpoint_id)
    if parent is None:
        change_rows = [("(state)", "initial", "", _compact(state, mine))]
    else:
        theirs = value_link(parent.thread_id, checkpoint=parent.checkpoint_id)
        change_rows = [
            (
                text(k),
                text(c),
                _compact(b, theirs) if c != "added" else "",
                _compact(a, mine) if c != "removed" else "",
            )
            for k, c, b, a in diff(readable.readable_state(parent.state), state)
        ]
    changes = _table(
        ["key", "change", "before", "after"], change_rows, "diff", "No change from its parent."
    )
    writes = _table(
        ["task", "channel", "value"],
        [
            (text(w.task_id), text(w.channel), _compact(readable.readable_write(w.value), mine))
            for w in cp.writes
        ],
        "writes",
        "No pending writes.",
    )
    nxt = text(readable.readable_next(cp)) if cp.next else "— (finished)"
    return (
        f'<article class=checkpoint id="cp-{attr(cp.checkpoint_id)}"><h3>{text(cp.checkpoint_id)}</h3>'
        f"<p class=meta>run {text(cp.run_id)} · {when(cp.created_at)} · next: {nxt}</p>"
        f"{changes}<h4>Pending writes</h4>{writes}</article>"
    )


def thread_page(
    info: ThreadInfo,
    history: list[Checkpoint],
    parents: dict[str, Checkpoint],
    children: list[str],
    entries: list[QueueEntry],
    effects: list[EffectRecord],
    output_of: dict[str, int],
    more_effects: bool,
    events: list[Event],
    now: datetime,
    older: str | None = None,
) -> str:
    """``older``: the last checkpoint shown when the history goes on (a link pages on)."""
    facts = [
        (
            "parent thread",
            f'<a href="{href("/thread", id=info.parent_thread_id)}">{text(info.parent_thread_id)}</a>'
            if info.parent_thread_id
            else "—",
        ),
        ("head checkpoint", text(info.head_id or "—")),
        ("events", str(info.last_seq)),
        ("created", when(info.created_at)),
        ("updated", when(info.updated_at)),
        ("claimed by", text(info.claim_holder or "—")),
        ("claim expires", when(info.claim_expires_at)),
    ]
    dl = "".join(f"<dt>{text(k)}</dt><dd>{v}</dd>" for k, v in facts)
    kids = (
        "<ul class=children>"
        + "".join(f'<li><a href="{href("/thread", id=c)}">{text(c)}</a></li>' for c in children)
        + "</ul>"
        if children
        else '<p class="empty children">No child threads.</p>'
    )
    checkpoints = (
        "".join(
            _checkpoint(cp, parents.get(cp.parent_id) if cp.parent_id else None) for cp in history
        )
        or '<p class="empty history">No checkpoint.</p>'
    )
    effect_rows = [
        (
            text(r.key),
            _compact(r.value, value_link(info.thread_id, effect=r.key)),
            text(r.run_id or "—"),
            f'<a href="{href(f"/entry/{output_of[r.key]}")}">#{output_of[r.key]}</a>'
            if r.key in output_of
            else "—",
            when(r.recorded_at),
        )
        for r in effects
    ]
    more = (
        f'<p class=more-effects><a href="{href("/thread", id=info.thread_id, effects_after=effects[-1].key)}">'
        "More effects…</a></p>"
        if more_effects and effects
        else ""
    )
    if older is not None:
        checkpoints += (
            f'<p class=older><a href="{href("/thread", id=info.thread_id, before=older)}">'
            "Older checkpoints…</a></p>"
        )
    event_rows = "".join(event_row(ev) for ev in events)
    last = events[-1].seq if events else 0
    return page(
        f"Thread {info.thread_id}",
        f"<h1>Thread <code>{text(info.thread_id)}</code></h1><dl class=facts>{dl}</dl>"
        f"<h2>Children</h2>{kids}<h2>Queue entries</h2>{entries_table(entries, now)}"
        f"<h2>Effects</h2>"
        + _table(
            ["key", "value", "run", "output of", "recorded"],
            effect_rows,
            "effects",
            "No recorded effect.",
        )
        + more
        + f"<h2>History</h2>{checkpoints}"
        "<h2>Events <span class=live>live</span></h2>"
        f'<table class=events data-thread="{attr(info.thread_id)}" data-after="{last}">'
        "<thead><tr><th>seq</th><th>kind</th><th>payload</th><th>run</th><th>created</th></tr></thead>"
        f"<tbody id=event-tail>{event_rows}</tbody></table>",
        nav="threads",
    )


def event_row(ev: Event) -> str:
    return (
        f'<tr data-seq="{ev.seq}"><td>{ev.seq}</td><td>{text(ev.kind)}</td>'
        f"<td>{_compact(ev.payload, value_link(ev.thread_id, seq=ev.seq))}</td>"
        f"<td>{text(ev.run_id or '—')}</td>"
        f"<td>{when(ev.created_at)}</td></tr>"
    )


def event_json(ev: Event) -> str:
    """One event for the live tail (the page's script inserts it as text, never as markup); its
    payload cut as on the page."""
    payload = json.dumps(ev.payload, ensure_ascii=False, sort_keys=True)
    if len(payload) > SHOWN_CHARS:
        size = len(payload.encode("utf-8", "surrogatepass"))
        payload = f"{payload[:SHOWN_CHARS]}… ({size:,} bytes)"
    return json.dumps(
        {
            "seq": ev.seq,
            "kind": _visible(ev.kind),
            "payload": _visible(payload),
            "run_id": _visible(ev.run_id or "—"),
            "created_at": ev.created_at.strftime("%Y-%m-%d %H:%M:%S"),
        },
        ensure_ascii=False,
    )


def not_found(what: str) -> str:
    return page("Not found", f"<h1>Not found</h1><p>{text(what)}</p>")


__all__ = [
    "SHOWN_CHARS",
    "entry_page",
    "event_json",
    "not_found",
    "queue_page",
    "thread_page",
    "threads_page",
    "value_link",
]
