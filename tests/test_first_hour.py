"""A new user's first hour on SQLite, through the `durable-graph` command line only (issue 16):
submit a failing job and see it fail with its traceback, fix the handler and `queue retry` it,
watch the retry complete, then cancel a long job and see it stop within one renewal.

Every step is a real subprocess on one SQLite file, as a user would type it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

BIN = Path(sys.executable).with_name("durable-graph")
RENEW = 0.3
"""The workers' renewal interval: --lease-ttl 900ms / 3."""

BROKEN_APP = textwrap.dedent(
    """
    import time
    from pathlib import Path

    def call_the_model(text):
        raise ValueError(f"the model rejected {text!r}")

    def handler(ctx):
        if ctx.input.get("long"):
            for step in range(200):  # one step per 0.2 s, each committed
                ctx.commit({"step": step}, next=["more"])
                with open("steps.log", "a") as log:
                    log.write(f"{time.time()}\\n")
                time.sleep(0.2)
            return "ran to the end"
        return call_the_model(ctx.input["text"])
    """
)
FIXED_APP = BROKEN_APP.replace(
    'raise ValueError(f"the model rejected {text!r}")', "return {'summary': text.upper()}"
)


class FirstHour:
    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.store = ["--sqlite", str(cwd / "first.db")]
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("DURABLE_GRAPH_")}
        self.workers: list[subprocess.Popen[str]] = []

    def run(self, *args: str) -> str:
        result = subprocess.run(
            [str(BIN), *args, *self.store],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    def entry(self, entry_id: int) -> Any:
        return json.loads(self.run("queue", "show", str(entry_id), "--json"))

    def start_worker(self) -> subprocess.Popen[str]:
        worker = subprocess.Popen(
            [
                str(BIN),
                "worker",
                "--app",
                "first_hour_app:handler",
                "--poll-interval",
                "100ms",
                "--lease-ttl",
                "900ms",
                "--backoff",
                "200ms",
                *self.store,
            ],
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.workers.append(worker)
        return worker

    def stop_worker(self, worker: subprocess.Popen[str]) -> str:
        """SIGTERM it and return its log (stderr)."""
        worker.send_signal(signal.SIGTERM)
        _out, err = worker.communicate(timeout=30)
        assert worker.returncode == 0, err
        return err


@pytest.fixture
def hour(tmp_path: Path) -> Iterator[FirstHour]:
    made = FirstHour(tmp_path)
    yield made
    for worker in made.workers:
        if worker.poll() is None:
            worker.kill()
            worker.communicate()


def _until(check: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def _entry_id(submit_output: str) -> int:
    return int(submit_output.split()[1])  # "entry N"


def test_first_hour_fail_see_why_fix_retry_complete_then_cancel_a_long_run(
    hour: FirstHour,
) -> None:
    app = hour.cwd / "first_hour_app.py"
    app.write_text(BROKEN_APP)

    # 1. A failing job: two attempts, the second after a backoff, then failed.
    failing = _entry_id(
        hour.run("submit", "t-fail", "--input", '{"text": "hello"}', "--max-attempts", "2")
    )
    worker = hour.start_worker()
    failed = _until(lambda: (e := hour.entry(failing))["outcome"] is not None and e)
    assert failed["outcome"]["kind"] == "failed"
    assert "the model rejected 'hello'" in failed["outcome"]["error"]
    first, second = failed["attempts"]
    assert "Traceback" in first["error"] and "ValueError" in first["error"]
    assert "call_the_model" in first["error"]  # the frame that raised, named
    assert second["error"] is not None
    log = hour.stop_worker(worker)
    assert f"entry {failing}" in log and "ValueError" in log
    # The worker's log carries the traceback too, down to the line that raised.
    assert "Traceback (most recent call last)" in log
    assert ", in call_the_model" in log
    assert 'raise ValueError(f"the model rejected {text!r}")' in log
    shown = hour.run("queue", "show", str(failing))
    assert "Traceback (most recent call last)" in shown and "ValueError" in shown

    # 2. Fix the handler, retry the entry, watch it complete.
    app.write_text(FIXED_APP)
    for cached in (hour.cwd / "__pycache__").glob("first_hour_app*"):
        cached.unlink()
    retried = hour.run("queue", "retry", str(failing))
    again = int(retried.split()[-1])  # "entry N retried as entry M"
    assert again > failing
    worker = hour.start_worker()
    done = _until(lambda: (e := hour.entry(again))["outcome"] is not None and e)
    assert done["outcome"] == {"kind": "completed", "output": {"summary": "HELLO"}}
    assert done["retry_of"] == failing

    # 3. A long job, cancelled while it runs: it stops within one renewal interval.
    long_id = _entry_id(hour.run("submit", "t-long", "--input", '{"long": true}'))
    steps = hour.cwd / "steps.log"
    _until(lambda: steps.exists() and len(steps.read_text().split()) >= 3)
    hour.run("queue", "cancel", str(long_id))
    cancelled_at = time.time()
    time.sleep(RENEW + 0.2 + 0.8)  # one renewal, the step it sleeps in, then watch a while
    after = [float(t) for t in steps.read_text().split() if float(t) > cancelled_at]
    assert len(after) <= 3, f"{len(after)} steps after the cancel"
    assert all(t <= cancelled_at + RENEW + 0.2 + 0.4 for t in after)
    assert hour.entry(long_id)["outcome"] == {"kind": "cancelled", "reason": "requested"}
    hour.stop_worker(worker)
