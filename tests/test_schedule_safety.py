"""Issue 37 items 6-7: the cron grammar every backend shares, a schedule nobody can compute
isolated by real scheduler processes, and slots as UTC instants across daylight-saving changes.

The SQL side of the grammar (``_dg_cron``) is in tests/test_pg_checks.py, with the same cases;
the DST cases on every backend are in the contract suite (``test_slots_across_dst``)."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import cronsim
import psycopg
import pytest
from psycopg import sql

from durable_graph.core.checkpointer import Checkpointer
from durable_graph.core.cron import cron_error, latest_slot, slots_after
from durable_graph.core.scheduling import Schedule
from durable_graph.postgres.config import PostgresConfig
from durable_graph.postgres.store import PostgresCheckpointer
from durable_graph.sqlite.store import SqliteCheckpointer
from durable_graph.testkit.cron_cases import BAD_CRONS, GOOD_CRONS

BIN = Path(sys.executable).with_name("durable-graph")


@pytest.mark.parametrize("expr", BAD_CRONS)
def test_the_grammar_refuses(expr: str) -> None:
    assert cron_error(expr) is not None


@pytest.mark.parametrize("expr", GOOD_CRONS)
def test_the_grammar_accepts_and_cronsim_evaluates(expr: str) -> None:
    assert cron_error(expr) is None
    cronsim.CronSim(expr, datetime(2026, 1, 1))


def test_whatever_the_grammar_accepts_cronsim_accepts() -> None:
    # So a stored schedule's slots can always be computed.
    rng = random.Random(37)
    terms = ["*", "0", "5", "59", "7", "12", "31", "L", "LW", "3L", "MON", "jan", "1#2", "*/5",
             "1-5", "60", "2", "5/15", "1-31/2", "sun-sat", "7L", "0#5", "30", "29"]  # fmt: skip
    accepted = 0
    for _ in range(20_000):
        fields = [",".join(rng.sample(terms, rng.randint(1, 2))) for _ in range(5)]
        expr = " ".join(fields)
        if cron_error(expr) is None:
            accepted += 1
            next(iter(cronsim.CronSim(expr, datetime(2026, 1, 1))))
    assert accepted > 50


# --- slots across daylight-saving changes ---------------------------------------------------


def _brute_force(cron: str, zone: str, start: datetime, end: datetime) -> list[datetime]:
    """Every UTC minute in [start, end] whose wall time in ``zone`` matches ``cron``."""
    six = "0 " + cron
    found = []
    at = start
    while at <= end:
        wall = at.astimezone(ZoneInfo(zone)).replace(tzinfo=None)
        if next(cronsim.CronSim(six, wall - timedelta(seconds=1))) == wall:
            found.append(at)
        at += timedelta(minutes=1)
    return found


@pytest.mark.parametrize(
    ("zone", "day"),
    [
        ("Europe/Paris", datetime(2026, 10, 25, tzinfo=UTC)),
        ("Europe/Paris", datetime(2026, 3, 29, tzinfo=UTC)),
        ("America/New_York", datetime(2026, 11, 1, 4, tzinfo=UTC)),
        ("Australia/Lord_Howe", datetime(2026, 4, 4, 12, tzinfo=UTC)),
        ("Pacific/Apia", datetime(2011, 12, 29, 12, tzinfo=UTC)),
    ],
)
@pytest.mark.parametrize("cron", ["15 1-3 * * *", "30 2 * * *", "*/20 * * * *", "45 1 * * *"])
def test_slots_are_the_instants_whose_wall_time_matches(
    zone: str, day: datetime, cron: str
) -> None:
    start, end = day - timedelta(hours=12), day + timedelta(hours=12)
    truth = _brute_force(cron, zone, start - timedelta(hours=12), end + timedelta(hours=12))
    at = start
    while at < end:
        after = [t for t in truth if t > at][:2]  # within the brute-forced window
        assert list(_take(slots_after(cron, zone, at), len(after))) == after
        expected = [t for t in truth if at - timedelta(hours=6) < t <= at]
        assert latest_slot(cron, zone, at, at - timedelta(hours=6)) == (
            expected[-1] if expected else None
        )
        at += timedelta(minutes=10)


def _take(it: Iterator[datetime], n: int) -> Iterator[datetime]:
    for _ in range(n):
        yield next(it)


# --- a schedule planted in the table: every scheduler goes on ---------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def planted(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[list[str], Callable[[], Checkpointer]]]:
    """A store with two schedules: ``good`` (every second) and ``bad``, whose cron was then
    written into the table directly, bypassing every check (as an older version or a hand edit
    could have stored it)."""
    schedules = [
        Schedule("bad", "* * * * *", "b"),
        Schedule("good", "* * * * * *", "g", tenant="other"),
    ]
    if request.param == "sqlite":
        path = str(tmp_path / "planted.db")
        with SqliteCheckpointer.open(path) as store:
            for s in schedules:
                store.run_queue.put_schedule(s)
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE schedules SET cron = '61 * * * *' WHERE name = 'bad'")
        yield ["--sqlite", path], lambda: SqliteCheckpointer.open(path)
    else:
        dsn = request.getfixturevalue("pg_dsn")
        schema = request.getfixturevalue("pg_schema")
        with PostgresCheckpointer.open(dsn, PostgresConfig(schema=schema)) as store:
            for s in schedules:
                store.run_queue.put_schedule(s)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("UPDATE {}.schedules SET cron = '61 * * * *' WHERE name = 'bad'").format(
                    sql.Identifier(schema)
                )
            )
        yield (
            ["--dsn", dsn, "--schema", schema],
            lambda: PostgresCheckpointer.open(dsn, PostgresConfig(schema=schema)),
        )


def test_a_scheduler_process_skips_a_schedule_it_cannot_compute_and_fires_the_others(
    planted: tuple[list[str], Callable[[], Checkpointer]],
) -> None:
    options, open_store = planted
    env = {k: v for k, v in os.environ.items() if not k.startswith("DURABLE_GRAPH_")}
    proc = subprocess.Popen(
        [str(BIN), *options, "scheduler", "--interval", "0.1s", "--log-level", "warning"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        fired = 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and fired < 3:
            with open_store() as store:
                fired = len(store.run_queue.open_entries(tenant="other", thread_id="g"))
            time.sleep(0.2)
        assert fired >= 3  # the good schedule fired pass after pass
        assert proc.poll() is None  # and the scheduler still runs
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
        stderr = proc.stderr.read() if proc.stderr else ""
    assert code == 0, stderr
    assert stderr.count("schedule bad skipped") == 1, stderr  # logged once, not every pass
    listing = subprocess.run(
        [str(BIN), *options, "schedule", "ls"], env=env, capture_output=True, text=True
    )
    assert listing.returncode == 0, listing.stderr
    bad_line = next(line for line in listing.stdout.splitlines() if line.startswith("bad"))
    assert "invalid" in bad_line and "61 * * * *" in bad_line
