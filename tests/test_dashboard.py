"""The dashboard in a real headless browser (Debian's chromium driven by Playwright), on a
SQLite store and on PostgreSQL, each filled by the test: what a person sees — the counts, the
failure text, the leases, a thread's history and the live tail receiving a new event.

Screenshots are written to the test's temporary folder; with ``DURABLE_GRAPH_SCREENSHOTS=1``
(SQLite run) they replace the ones under ``docs/`` that the README shows.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.sync_api import Browser, Dialog, Page, Request, expect

from browser_support import headless_chromium
from dashboard_support import CHILD, EFFECT_KEY, FAILURE, THREAD, add_event, fill, serving
from durable_graph import Checkpointer
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.sqlite import SqliteCheckpointer
from durable_graph.worker import Worker

DOCS = Path(__file__).resolve().parent.parent / "docs"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with headless_chromium() as browser:
        yield browser


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Checkpointer]:
    if request.param == "sqlite":
        with SqliteCheckpointer.open(str(tmp_path / "store.db")) as sqlite:
            yield sqlite
    else:
        dsn = request.getfixturevalue("pg_dsn")
        schema = request.getfixturevalue("pg_schema")
        with PostgresCheckpointer.open(dsn, PostgresConfig(schema=schema)) as pg:
            yield pg


IDLE_WORKER = "worker-idle"


@contextmanager
def idle_worker(store: Checkpointer) -> Iterator[Worker]:
    """A running worker serving only a kind nothing is submitted as: it holds no lease, and
    is listed once its first heartbeat is in."""
    worker = Worker(
        store,
        lambda ctx: None,
        holder=IDLE_WORKER,
        kinds=["nightly-report"],
        heartbeat_every=timedelta(milliseconds=200),
        poll_interval=timedelta(milliseconds=100),
    )
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while IDLE_WORKER not in [w.holder for w in store.run_queue.workers()]:
            assert time.monotonic() < deadline, "the idle worker never beat"
            time.sleep(0.05)
        yield worker
    finally:
        worker.stop()
        thread.join(10)
    assert not thread.is_alive()
    assert IDLE_WORKER not in [w.holder for w in store.run_queue.workers()]  # said "stopped"


def _shoot(page: Page, tmp_path: Path, name: str, publish: bool) -> None:
    shot = tmp_path / name
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 0
    if publish:
        shutil.copyfile(shot, DOCS / name)


def test_dashboard_shows_queue_entries_threads_and_a_live_tail(
    browser: Browser, store: Checkpointer, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    publish = os.environ.get("DURABLE_GRAPH_SCREENSHOTS") == "1" and "sqlite" in request.node.name
    filled = fill(store)
    dialogs: list[str] = []
    with serving(store) as url, idle_worker(store):
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        outside: list[str] = []

        def on_dialog(dialog: Dialog) -> None:
            dialogs.append(dialog.message)
            dialog.dismiss()

        def on_request(sent: Request) -> None:
            if not sent.url.startswith(url):
                outside.append(sent.url)

        page.on("dialog", on_dialog)
        page.on("request", on_request)

        # The queue: counts by state, the oldest waiting age, leases per worker.
        page.goto(url + "/")
        counts = {
            state: page.locator(f'.stat[data-state="{state}"] .count').inner_text()
            for state in ("open", "running", "completed", "failed", "cancelled")
        }
        assert counts == {
            "open": "2",
            "running": "1",
            "completed": "1",
            "failed": "1",
            "cancelled": "0",
        }
        expect(page.locator(".oldest")).to_contain_text("Oldest waiting:")
        # Workers (issue 26 item 13): a real worker that holds no lease is listed idle; the
        # lease holder that does not beat is listed busy with its lease.
        workers = page.locator("table.workers")
        idle_row = workers.locator("tbody tr", has_text=IDLE_WORKER)
        expect(idle_row).to_have_count(1)
        expect(idle_row.locator(".worker-state")).to_have_text("idle")
        expect(idle_row).to_contain_text("nightly-report")
        busy_row = workers.locator("tbody tr", has_text="worker-b")
        expect(busy_row).to_contain_text("(no heartbeat)")
        expect(busy_row).to_contain_text(f"#{filled.running}")
        _shoot(page, tmp_path, "dashboard.png", publish)

        # The failed entries, then the failed entry's page: its failure text, as text.
        page.locator('.stat[data-state="failed"]').click()
        expect(page.locator("table.entries tbody tr")).to_have_count(1)
        expect(page.locator("table.entries .outcome")).to_have_text(FAILURE)
        page.locator(f'a[href="/entry/{filled.failed}"]').first.click()
        expect(page.locator("h1")).to_contain_text(f"Entry #{filled.failed}")
        expect(page.locator("pre.failure")).to_have_text(FAILURE)
        expect(page.locator("table.attempts tbody tr")).to_have_count(1)
        expect(page.locator("table.attempts pre.attempt-error")).to_have_text(FAILURE)
        _shoot(page, tmp_path, "dashboard-entry.png", publish)

        # The thread: history diffed against the parent, writes, children, effects, events.
        page.goto(url + "/thread?id=" + quote(THREAD, safe=""))
        expect(page.locator("h1 code")).to_have_text(THREAD)
        expect(page.locator("article.checkpoint")).to_have_count(2)
        newest = page.locator("article.checkpoint").first
        expect(newest.locator("table.diff")).to_contain_text("answer")
        expect(newest.locator("table.diff")).to_contain_text("added")
        expect(newest.locator("table.writes")).to_contain_text("task-9")
        expect(page.locator("ul.children")).to_have_text(CHILD)
        expect(page.locator("table.effects")).to_contain_text('{"answer": 42}')
        # A non-output effect is listed too, in key byte order after the output's key.
        effect_rows = page.locator("table.effects tbody tr")
        expect(effect_rows).to_have_count(2)
        expect(effect_rows.nth(1)).to_contain_text(EFFECT_KEY)
        expect(effect_rows.nth(1)).to_contain_text('{"sent": "receipt"}')
        tail = page.locator("#event-tail tr")
        expect(tail.filter(has_text="model.token")).to_have_count(1)
        expect(page.locator(".live:not(.off)")).to_have_count(1)
        shown = tail.count()

        # The live tail: an event appended now shows up without a reload.
        add_event(store, "a new token <i>live</i>")
        expect(tail).to_have_count(shown + 1)
        expect(tail.last).to_contain_text("a new token <i>live</i>")
        _shoot(page, tmp_path, "dashboard-thread.png", publish)
        page.close()
    assert dialogs == [], "markup from the store ran as script"
    assert outside == [], "the page fetched something from elsewhere"


TOKEN = "a-dashboard-token-for-the-tests"


def test_on_call_engineer_cancels_and_retries_from_the_dashboard(
    browser: Browser, store: Checkpointer
) -> None:
    # Issue 26 item 13: times with their zone and age, elapsed time of a running entry, a
    # thread whose runs all failed, retries linked both ways, and retry and cancel behind the
    # token, a same-origin check and a CSRF token, as POSTs.
    filled = fill(store)
    with serving(store, TOKEN) as url:
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.goto(url + "/?token=" + TOKEN)  # sets the cookie
        expect(page.locator('meta[http-equiv="refresh"]')).to_have_count(1)
        row = page.locator("table.entries tbody tr", has_text=f"#{filled.running}")
        expect(row).to_contain_text("running for")
        expect(row).to_contain_text("UTC")
        expect(row.locator(".ago")).to_contain_text("ago")

        # The failed entry's thread never committed: its page lists its entries.
        page.goto(url + "/thread?id=billing-7")
        expect(page.locator("h1")).to_contain_text("billing-7")
        expect(page.locator("table.entries")).to_contain_text(f"#{filled.failed}")

        # Cancel the running entry, then retry it: each a POST from its page.
        page.goto(url + f"/entry/{filled.running}")
        page.locator("form.action-cancel button").click()
        page.wait_for_url(url + f"/entry/{filled.running}")
        expect(page.locator("h1 .badge")).to_have_text("cancelled")
        expect(page.locator("form.action-cancel")).to_have_count(0)
        page.locator("form.action-retry button").click()
        page.wait_for_url(lambda u: u != url + f"/entry/{filled.running}")
        retry_id = int(page.url.rsplit("/", 1)[1])
        assert retry_id > filled.running
        expect(page.locator("dl.facts")).to_contain_text(f"#{filled.running}")
        page.goto(url + f"/entry/{filled.running}")
        expect(page.locator("dl.facts")).to_contain_text(f"#{retry_id}")
        # A second press shows the first retry (D66): no third entry.
        page.locator("form.action-retry button").click()
        page.wait_for_url(url + f"/entry/{retry_id}")

        # The checks: no CSRF token, or another origin → 403, nothing written.
        csrf = page.locator("form.action-retry input[name=csrf]")
        page.goto(url + f"/entry/{retry_id}")
        token = page.locator("form.action-cancel input[name=csrf]").get_attribute("value")
        assert token and csrf.count() == 0
        same = {"origin": url, "content-type": "application/x-www-form-urlencoded"}
        no_csrf = page.request.post(url + f"/entry/{retry_id}/cancel", headers=same, data="")
        assert no_csrf.status == 403
        elsewhere = {**same, "origin": "http://evil.example"}
        forged = page.request.post(
            url + f"/entry/{retry_id}/cancel", headers=elsewhere, data=f"csrf={token}"
        )
        assert forged.status == 403
        entry = store.run_queue.entry(retry_id)
        assert entry is not None and entry.outcome is None
        page.close()


def test_without_a_token_the_dashboard_offers_no_action(
    browser: Browser, store: Checkpointer
) -> None:
    filled = fill(store)
    with serving(store) as url:
        page = browser.new_page()
        page.goto(url + f"/entry/{filled.running}")
        expect(page.locator("form.action-cancel")).to_have_count(0)
        expect(page.locator("header .readonly")).to_have_text("read-only")
        posted = page.request.post(url + f"/entry/{filled.running}/cancel", data="")
        assert posted.status in (404, 405)
        page.close()


def test_the_queue_page_shows_the_workers_a_page_at_a_time(
    browser: Browser, store: Checkpointer
) -> None:
    # Issue 37 item 9: 60 workers beat; the page lists 50 and links to the next ones.
    from durable_graph.core.workers import WorkerBeat

    holders = [f"w-{i:02d}" for i in range(60)]
    for holder in holders:
        store.run_queue.worker_heartbeat(WorkerBeat(holder, "host", 1, None, "idle"))
    with serving(store) as url:
        page = browser.new_page()
        page.goto(url + "/")
        rows = page.locator("table.workers tbody tr")
        expect(rows).to_have_count(50)
        expect(rows.first).to_contain_text("w-00")
        page.locator("a.next", has_text="More workers").click()
        expect(rows).to_have_count(10)
        expect(rows.first).to_contain_text("w-50")
        expect(page.locator("a.next", has_text="More workers")).to_have_count(0)
        page.close()
