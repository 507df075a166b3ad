"""The dashboard in a real headless browser (Debian's chromium driven by Playwright), on a
SQLite store and on PostgreSQL, each filled by the test: what a person sees — the counts, the
failure text, the leases, a thread's history and the live tail receiving a new event.

Screenshots are written to the test's temporary folder; with ``DURABLE_GRAPH_SCREENSHOTS=1``
(SQLite run) they replace the ones under ``docs/`` that the README shows.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.sync_api import Browser, Dialog, Page, Request, expect, sync_playwright

from dashboard_support import CHILD, FAILURE, THREAD, add_event, fill, serving
from durable_graph import Checkpointer
from durable_graph.postgres import PostgresCheckpointer, PostgresConfig
from durable_graph.sqlite import SqliteCheckpointer

CHROMIUM = "/usr/bin/chromium"
DOCS = Path(__file__).resolve().parent.parent / "docs"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (.ci/run installs it)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield browser
        finally:
            browser.close()


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
    with serving(store) as url:
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
        leases = page.locator("table.leases")
        expect(leases).to_contain_text("worker-b")
        expect(leases).to_contain_text(f"#{filled.running}")
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
