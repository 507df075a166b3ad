"""LangGraph's SDK integration suite against ``durable-graph serve``, beside ``langgraph dev``
(SPEC §20.2).

    python -m tests.langgraph_suite.service [--targets reference sqlite postgres] [--out FILE]
                                      [--sdk VERSION...] [--keep DIR] [--timeout S]
                                      [-- PYTEST_ARGS...]

For each ``langgraph-sdk`` release of ``--sdk`` (the installed, pinned one and the earlier ones
users still run, `EARLIER_SDKS`), downloads its sdist from PyPI (as `tests.langgraph_suite.run`
downloads langgraph's: nothing of it is kept in this repository), and for each target serves the
sdist's own graphs (``integration/langgraph.json``: scripted fake chat models, no API key) and
runs its ``tests/integration`` against that server, with that release's client: an earlier one
runs from a virtualenv of its own made at test time (``langgraph-sdk==X``, pytest and langgraph,
under ``build/service-suite``), so the client under test is the release's own code. The one URL
the suite hard-codes (``test_remote_graph_v3``'s ``localhost:2024``) is pointed at the server
under test in the unpacked copy (port 2024 is ``langgraph dev``'s, shared on a machine).

- ``reference``: LangGraph's own ``langgraph dev`` (in-memory), from the virtualenv
  ``--reference-venv`` (``langgraph-cli[inmem]`` and the graphs' dependencies; ``make
  service-suite`` builds it), so its pins never move ours;
- ``sqlite``: ``durable-graph serve`` on a SQLite file;
- ``postgres``: ``durable-graph serve`` on a throwaway PostgreSQL server.

The report lists every test with its outcome per target, then each test the reference passes and
a target of ours does not, with the first line of why. Exits 1 when there is such a test (the
bar of §20.2), else 0. A hung test is cut by pytest-timeout (``--timeout``, per test).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

from durable_graph.testkit.postgres import server as pg_server

from .run import sdist

ROOT = Path(__file__).resolve().parent.parent.parent
WORK = Path(os.environ.get("DG_SERVICE_SUITE_DIR", ROOT / "build" / "service-suite"))
TARGETS = ("reference", "sqlite", "postgres")
EARLIER_SDKS = ("0.4.3",)
"""Earlier ``langgraph-sdk`` releases whose suite runs beside the pinned one's (SPEC §25)."""
SUITE_TOOLS = ("pytest", "pytest-asyncio", "pytest-timeout", "pytest-mock", "langgraph")
"""What an earlier release's virtualenv holds beside the client: its tests' own imports."""
NOT_UP = "(the server)"
"""The row of a target whose server did not come up, with its last log line."""
BIN = Path(sys.executable).with_name("durable-graph")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def serving(argv: list[str], cwd: Path, log: Path, env: dict[str, str]) -> Iterator[str | None]:
    """``argv`` (a server taking ``--port``) started in ``cwd``; its URL once ``/ok`` answers,
    None when it exited or did not come up within 120 s (its log says why)."""
    port = free_port()
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [*argv, "--port", str(port)], cwd=cwd, env=env, stdout=out, stderr=out
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        up = False
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(url + "/ok", timeout=5):
                    up = True
                    break
            except OSError:
                time.sleep(0.3)
        yield url if up else None
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def outcomes(junit: Path) -> dict[str, tuple[str, str]]:
    """Test id → (passed | failed | skipped, the first line of why)."""
    out: dict[str, tuple[str, str]] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        test_id = f"{case.get('classname')}::{case.get('name')}"
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        skipped = case.find("skipped")
        if bad is not None:
            why = (bad.get("message") or bad.text or "").strip().splitlines()
            out[test_id] = ("failed", why[0][:200] if why else "")
        elif skipped is not None:
            out.setdefault(test_id, ("skipped", (skipped.get("message") or "")[:200]))
        else:
            out.setdefault(test_id, ("passed", ""))
    return out


def sdk_python(version: str) -> str:
    """The interpreter whose ``langgraph_sdk`` is ``version``: ours for the installed release,
    else a virtualenv made (once) under `WORK` with the client at that release."""
    if version == importlib.metadata.version("langgraph-sdk"):
        return sys.executable
    venv = WORK / f"sdk-{version}"
    python = venv / "bin" / "python"
    if not (venv / ".installed").exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", f"langgraph-sdk=={version}", *SUITE_TOOLS],
            check=True,
        )
        (venv / ".installed").touch()
    return str(python)


def prepare(tree: Path) -> None:
    """The unpacked suite made to run against any URL with the client of the interpreter that
    runs it: ``test_remote_graph_v3`` reads ``LANGGRAPH_INTEGRATION_URL`` as the rest does, and
    the sdist's own ``langgraph_sdk`` is moved aside (the installed release is the one tested)."""
    remote = tree / "tests" / "integration" / "test_remote_graph_v3.py"
    if remote.exists():
        text = remote.read_text(encoding="utf-8")
        fixed = text.replace(
            'URL = "http://localhost:2024"',
            'URL = __import__("os").environ.get("LANGGRAPH_INTEGRATION_URL", "http://localhost:2024")',
        )
        if fixed != text:
            remote.write_text(fixed, encoding="utf-8")
    source = tree / "langgraph_sdk"
    if source.is_dir():
        source.rename(tree / "langgraph_sdk.sdist")


def config_of(integration: Path, graphs: list[str] | None) -> str:
    """The suite's ``langgraph.json``, or a copy beside it naming only ``graphs``."""
    config = integration / "langgraph.json"
    if not graphs:
        return str(config)
    data = json.loads(config.read_text(encoding="utf-8"))
    data["graphs"] = {name: data["graphs"][name] for name in graphs}
    only = integration / "langgraph.only.json"
    only.write_text(json.dumps(data), encoding="utf-8")
    return str(only)


def run_target(
    target: str,
    tree: Path,
    keep: Path,
    reference_venv: Path,
    timeout: int,
    extra: list[str],
    graphs: list[str] | None = None,
    python: str = sys.executable,
) -> dict[str, tuple[str, str]]:
    """Serve the sdist's graphs (ours: only ``graphs`` when given) as ``target`` and run its
    integration tests against them; every test failed with the server's last words when it
    did not come up."""
    integration = tree / "integration"
    config = config_of(integration, None if target == "reference" else graphs)
    log = keep / f"server-{target}.log"
    prepare(tree)
    log.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DURABLE_GRAPH_")}
    env["PYTHONUNBUFFERED"] = "1"
    with contextlib.ExitStack() as stack:
        if target == "reference":
            langgraph = reference_venv / "bin" / "langgraph"
            if not langgraph.exists():
                raise SystemExit(f"{langgraph} is missing: `make service-suite` builds it")
            argv = [str(langgraph), "dev", "--config", config, "--no-browser", "--no-reload",
                    "--allow-blocking"]  # fmt: skip
        else:
            if target == "sqlite":
                db = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "suite.db"
                store = ["--sqlite", str(db)]
            else:
                server = pg_server.start()
                stack.callback(server.stop)
                store = ["--dsn", f"postgresql://{server.user}@{server.host}:{server.port}/"]
            argv = [str(BIN), *store, "serve", "--config", config, "--workers", "2"]
        url = stack.enter_context(serving(argv, integration, log, env))
        junit = keep / f"junit-{target}.xml"
        junit.unlink(missing_ok=True)
        if url is None:
            last = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
            print(f"{target}: the server did not come up; see {log}", file=sys.stderr)
            return {NOT_UP: ("failed", last[-1][:200] if last else "no output")}
        cmd = [python, "-m", "pytest", "tests/integration", "-q", "-m", "integration",
               "-p", "no:cacheprovider", "-o", "addopts=", "-p", "asyncio",
               "-o", "asyncio_mode=auto", f"--timeout={timeout}", f"--junitxml={junit}",
               *extra]  # fmt: skip
        test_env = {**env, "LANGGRAPH_INTEGRATION_URL": url}
        subprocess.run(cmd, cwd=tree, env=test_env, check=False)
    return outcomes(junit) if junit.exists() else {}


def report(results: dict[str, dict[str, tuple[str, str]]]) -> tuple[str, int]:
    """A markdown table (a row a test, a column a target) and the bar's misses; their count."""
    targets = [t for t in TARGETS if t in results]
    tests = sorted({test for per in results.values() for test in per})
    lines = ["| test | " + " | ".join(targets) + " |", "|---|" + "---|" * len(targets)]
    for test in tests:
        cells = [results[t].get(test, ("not run", ""))[0] for t in targets]
        lines.append(f"| `{test.removeprefix('tests.integration.')}` | " + " | ".join(cells) + " |")
    counts = []
    for t in targets:
        seen = [o for o, _ in results[t].values()]
        counts.append(
            f"{t}: {seen.count('passed')} passed, {seen.count('failed')} failed, "
            f"{seen.count('skipped')} skipped"
        )
    lines += ["", "; ".join(counts)]
    missed: list[str] = []
    reference = results.get("reference")
    if reference is not None:
        for t in targets:
            if t == "reference":
                continue
            for test in tests:
                if reference.get(test, ("", ""))[0] != "passed":
                    continue
                not_up = results[t].get(NOT_UP, ("", "the server did not come up"))[1]
                outcome, why = results[t].get(test, ("not run", not_up))
                if outcome != "passed":
                    missed.append(f"- {t}: `{test.removeprefix('tests.integration.')}`: {why}")
    if missed:
        lines += ["", f"Passed on the reference, not on ours ({len(missed)}):", *missed]
    return "\n".join(lines), len(missed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", nargs="+", choices=TARGETS, default=list(TARGETS))
    pinned = importlib.metadata.version("langgraph-sdk")
    parser.add_argument(
        "--sdk", nargs="+", default=[pinned, *EARLIER_SDKS], metavar="VERSION",
        help=f"the langgraph-sdk releases whose suite and client run (default: {pinned} and "
        + ", ".join(EARLIER_SDKS) + ")",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, help="write the markdown report here too")
    parser.add_argument("--keep", type=Path, help="keep junit files and server logs here")
    parser.add_argument("--timeout", type=int, default=60, help="seconds a test may take")
    parser.add_argument(
        "--reference-venv", type=Path, default=ROOT / ".venv-reference",
        help="the virtualenv with langgraph-cli[inmem] and the graphs' dependencies",
    )  # fmt: skip
    parser.add_argument(
        "--graphs", nargs="+", help="serve only these graphs of the suite's on our targets "
        "(to see what the rest would do while one cannot load; the bar stays the whole suite)",
    )  # fmt: skip
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args(argv)
    sections: list[str] = []
    missed = 0
    with contextlib.ExitStack() as stack:
        keep_root = (
            args.keep or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        ).resolve()
        for version in args.sdk:
            tree = sdist("langgraph-sdk", version, WORK)
            python = sdk_python(version)
            keep = keep_root / f"sdk-{version}"
            keep.mkdir(parents=True, exist_ok=True)
            results = {}
            for target in args.targets:
                started = time.monotonic()
                results[target] = run_target(
                    target,
                    tree,
                    keep,
                    args.reference_venv.resolve(),
                    args.timeout,
                    args.pytest_args,
                    args.graphs,
                    python,
                )
                took = time.monotonic() - started
                print(f"langgraph-sdk {version}, {target}: {took:.0f} s", file=sys.stderr)
            text, count = report(results)
            missed += count
            sections.append(f"## langgraph-sdk {version}\n\n{text}")
    text = "\n\n".join(sections)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
