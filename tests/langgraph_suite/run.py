"""LangGraph's own test suite against our savers, beside LangGraph's own (SPEC §14.1).

    python -m tests.langgraph_suite.run [--subset short|all] [--files F ...] [--out FILE]
                                         [-- PYTEST_ARGS...]

Downloads the sdists of the installed ``langgraph`` (and, with ``--checkpoint-postgres``, of
``langgraph-checkpoint-postgres``) from PyPI (``pip download --no-deps --no-binary :all:``),
unpacks them under ``build/langgraph-suite/``, adds our savers as checkpointer fixtures beside
LangGraph's (``fixtures.py``, copied into the sdist's tests and imported at the end of its
``conftest.py``: no LangGraph code is kept in this repository), starts a throwaway PostgreSQL,
runs the chosen test files, and prints passed/failed counts per saver: LangGraph's
``InMemorySaver``, ``SqliteSaver``, ``PostgresSaver`` (sync; ``memory``, ``sqlite_aio``,
``postgres_aio`` async) and ours (``dg_memory``, ``dg_sqlite``, ``dg_postgres`` and their
``_aio`` forms). Exits 1 when a test of ours fails that passes for LangGraph's saver of the
same kind of backend (the bar), else 0.

The test dependencies (syrupy, pytest-mock, LangGraph's SQLite and PostgreSQL savers, ...) are
the ``langgraph-suite`` extra: ``pip install -e '.[test,langgraph,langgraph-suite]'``
(``make langgraph-suite`` does it).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from pathlib import Path

from durable_graph.testkit.postgres import server as pg_server

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
WORK = Path(os.environ.get("DG_SUITE_DIR", ROOT / "build" / "langgraph-suite"))

# The files of the langgraph sdist that take sync_checkpointer / async_checkpointer, and the
# prune tests (which parametrize over savers themselves).
ALL_FILES = [
    "test_checkpoint_migration.py",
    "test_delta_channel_exit_mode.py",
    "test_delta_channel_fork.py",
    "test_delta_channel_parallel_order.py",
    "test_delta_channel_subgraph.py",
    "test_delta_channel_to_plain.py",
    "test_delta_channel_update_state.py",
    "test_interrupt_state.py",
    "test_interruption.py",
    "test_large_cases.py",
    "test_large_cases_async.py",
    "test_pregel.py",
    "test_pregel_async.py",
    "test_prune_postgres.py",
    "test_pydantic.py",
    "test_strict_resume.py",
    "test_subgraph_persistence.py",
    "test_subgraph_persistence_async.py",
    "test_time_travel.py",
    "test_time_travel_async.py",
]
SHORT_FILES = [
    "test_checkpoint_migration.py",
    "test_delta_channel_exit_mode.py",
    "test_delta_channel_parallel_order.py",
    "test_delta_channel_to_plain.py",
    "test_delta_channel_update_state.py",
    "test_prune_postgres.py",
    "test_pydantic.py",
]
"""`make test`'s subset: the delta-channel (but the long fork and subgraph files, which the whole
suite runs), checkpoint-migration, pydantic and prune files."""

OURS = [
    "dg_memory",
    "dg_sqlite",
    "dg_postgres",
    "dg_memory_aio",
    "dg_sqlite_aio",
    "dg_postgres_aio",
]
THEIRS = ["memory", "sqlite", "postgres", "memory_aio", "sqlite_aio", "postgres_aio"]
"""LangGraph's savers as the report names them (``memory_aio``: `InMemorySaver` in async tests)."""
ASYNC_MARKERS = ["sqlite_aio", "postgres_aio", *(n for n in OURS if n.endswith("_aio"))]
"""Savers of async tests only, whose names are no other fixture's parameter."""
SYNC_MARKERS = ["postgres", *(n for n in OURS if not n.endswith("_aio"))]
"""Savers of sync tests only, whose names are no other fixture's parameter."""
PEER = {
    "dg_memory": "memory",
    "dg_sqlite": "sqlite",
    "dg_postgres": "postgres",
    "dg_memory_aio": "memory",
    "dg_sqlite_aio": "sqlite_aio",
    "dg_postgres_aio": "postgres_aio",
}
"""LangGraph's saver whose result is the bar for each of ours."""
# LangGraph's PostgresSaver in test ids of its own: test_prune_postgres's (its fixtures'
# names) and langgraph-checkpoint-postgres's "base" (their pool, pipe and shallow forms are not
# the bar).
PRUNE_IDS = {
    "_checkpointer_postgres": "postgres",
    "_checkpointer_postgres_aio": "postgres_aio",
    "base": "postgres",
}
POSTGRES_FILES = ["test_sync.py", "test_async.py"]
"""langgraph-checkpoint-postgres's tests of its savers (``--checkpoint-postgres``)."""

CONFTEST_LINE = (
    "from tests._durable_graph_fixtures import *  # noqa: F403 durable_graph's savers beside\n"
)


def sdist(package: str, version: str, work: Path = WORK) -> Path:
    """The unpacked sdist of ``package==version`` (downloaded once into ``work``)."""
    name = package.replace("-", "_")
    target = work / f"{name}-{version}"
    if (target / "tests").is_dir():
        return target
    work.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
         f"{package}=={version}", "-d", str(work), "-q"],
        check=True,
    )  # fmt: skip
    archive = next(work.glob(f"{name}-{version}.tar.gz"), None) or next(
        work.glob(f"{package}-{version}.tar.gz")
    )
    with tarfile.open(archive) as tar:
        tar.extractall(work, filter="data")
    return target


def add_fixtures(tree: Path, fixtures: str = "fixtures.py") -> None:
    """Our fixtures beside LangGraph's: copied modules, imported at the conftest's end."""
    tests = tree / "tests"
    shutil.copyfile(HERE / "savers.py", tests / "_durable_graph_savers.py")
    shutil.copyfile(HERE / fixtures, tests / "_durable_graph_fixtures.py")
    conftest = tests / "conftest.py"
    text = conftest.read_text(encoding="utf-8")
    if CONFTEST_LINE not in text:
        conftest.write_text(text.rstrip("\n") + "\n\n" + CONFTEST_LINE, encoding="utf-8")


def saver_of(name: str, outcomes: dict[str, str] | None = None) -> str | None:
    """The saver a test ran on, from its id (``test_x[sync-dg_memory]``).

    With ``outcomes`` (every test id of the run), LangGraph's ``memory`` and ``sqlite`` are
    told apart from the cache fixture's parameters of the same names, and ``memory`` in an async
    test from the sync one (the fixtures give ``InMemorySaver`` to both): a saver's test id ran
    on other savers too, an async test's on async ones (`ASYNC_MARKERS`), a sync test's on sync
    ones (`SYNC_MARKERS`). PostgresSaver (``base``) is ``postgres_aio`` in
    langgraph-checkpoint-postgres's test_async.
    """
    params = re.search(r"\[(.*)\]$", name)
    if params is None:
        return None
    parts = params.group(1).split("-")
    for part in parts:
        if part in OURS:
            return part
    for part in parts:
        theirs = PRUNE_IDS.get(part) or (part if part in THEIRS else None)
        if theirs is None:
            continue
        if part == "base" and ".test_async::" in name:
            return "postgres_aio"
        if part in ("memory", "sqlite") and outcomes is not None:
            if any(peer_id(name, part, m) in outcomes for m in ASYNC_MARKERS):
                return f"{theirs}_aio"
            if not any(peer_id(name, part, m) in outcomes for m in SYNC_MARKERS):
                continue  # the cache fixture's parameter, not a saver
        return theirs
    return None


def results(junit: Path) -> dict[str, str]:
    """Outcome per test id: passed, failed, skipped."""
    out: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        test_id = f"{case.get('classname')}::{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            out[test_id] = "failed"
        elif case.find("skipped") is not None:
            out.setdefault(test_id, "skipped")
        else:
            out.setdefault(test_id, "passed")
    return out


def peer_id(test_id: str, saver: str, other: str | None = None) -> str:
    """``test_id`` with the saver ``saver`` replaced by ``other`` (default: its bar, `PEER`)."""
    other = PEER[saver] if other is None else other
    # The first: a saver's name may also be a later parameter's (the cache fixture's "memory").
    return re.sub(rf"(?<=[\[-]){re.escape(saver)}(?=[\]-])", other, test_id, count=1)


OTHER = "(no saver, or another form of LangGraph's)"
"""Tests not parametrized over a saver, and LangGraph's savers that are not the bar (its
SQLite AES and PostgreSQL pool/pipe/shallow forms, test_prune_postgres's Redis savers)."""


def report(outcomes: dict[str, str]) -> tuple[str, int]:
    """A markdown table of counts per saver, the bar's misses listed; and how many missed.

    Test ids are ``<sdist>/<test id>``: each sdist's counts get their own columns too.
    """
    trees = sorted({test_id.split("/", 1)[0] for test_id in outcomes})
    counts: dict[str, Counter[tuple[str, str]]] = defaultdict(Counter)
    for test_id, outcome in outcomes.items():
        ran_on = saver_of(test_id, outcomes) or OTHER
        counts[ran_on][("", outcome)] += 1
        counts[ran_on][(test_id.split("/", 1)[0], outcome)] += 1
    header = "| saver | passed | failed | skipped |"
    rule = "|---|---:|---:|---:|"
    for tree in trees:
        header += f" {tree}: passed / failed / skipped |"
        rule += "---:|"
    lines = [header, rule]
    for name in [*THEIRS, *OURS, OTHER]:
        c = counts.get(name)
        if c:
            line = "| {} | {} | {} | {} |".format(
                name, *(c[("", o)] for o in ("passed", "failed", "skipped"))
            )
            for tree in trees:
                line += " {} / {} / {} |".format(
                    *(c[(tree, o)] for o in ("passed", "failed", "skipped"))
                )
            lines.append(line)
    missed = []
    for test_id, outcome in outcomes.items():
        saver = saver_of(test_id)
        if saver is not None and saver in OURS and outcome == "failed":
            peer = outcomes.get(peer_id(test_id, saver))
            if peer is None:  # langgraph-checkpoint-postgres: PostgresSaver is "base"
                peer = outcomes.get(peer_id(test_id, saver, "base"))
            if peer is None and "test_prune_postgres" in test_id:
                # test_prune_postgres runs only PostgresSaver: the bar for all ours.
                lg_saver = "_checkpointer_postgres" + ("_aio" if saver.endswith("_aio") else "")
                peer = outcomes.get(peer_id(test_id, saver, lg_saver))
            if peer in (None, "passed"):
                missed.append(test_id)
    if missed:
        lines += ["", f"Failed for ours, passed (or not run) for LangGraph's ({len(missed)}):"]
        lines += [f"- `{t}`" for t in sorted(missed)]
    return "\n".join(lines), len(missed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subset", choices=["short", "all"], default="all")
    parser.add_argument("--files", nargs="*", help="test files of the sdist (default: subset)")
    parser.add_argument("--out", type=Path, help="write the markdown report here too")
    parser.add_argument(
        "--checkpoint-postgres",
        action="store_true",
        help="also langgraph-checkpoint-postgres's test_sync / test_async (ours beside "
        "PostgresSaver)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        help="keep each run's junit file in this directory (default: a temporary one)",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="count the junit files a run kept in --keep; run nothing",
    )
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args(argv)
    outcomes: dict[str, str] = {}
    took: dict[str, float] = {}
    if args.report_only:
        if args.keep is None:
            parser.error("--report-only needs --keep")
        for junit in sorted(args.keep.glob("junit-*.xml")):
            tree_name = junit.stem.removeprefix("junit-")
            outcomes.update({f"{tree_name}/{k}": v for k, v in results(junit).items()})
        return finish(outcomes, {}, args.out)

    runs: list[tuple[Path, list[str], list[str]]] = []
    tree = sdist("langgraph", importlib.metadata.version("langgraph"))
    add_fixtures(tree)
    files = args.files or (SHORT_FILES if args.subset == "short" else ALL_FILES)
    # LangGraph's tests run their async tests with anyio's plugin alone.
    runs.append((tree, files, ["-p", "no:asyncio", "--snapshot-warn-unused"]))
    if args.checkpoint_postgres:
        pg_tree = sdist(
            "langgraph-checkpoint-postgres",
            importlib.metadata.version("langgraph-checkpoint-postgres"),
        )
        add_fixtures(pg_tree, "fixtures_postgres.py")
        runs.append((pg_tree, POSTGRES_FILES, ["-p", "asyncio", "-o", "asyncio_mode=auto"]))
    with contextlib.ExitStack() as stack:
        server = pg_server.start()
        stack.callback(server.stop)
        env = dict(os.environ)
        env.update(
            NO_DOCKER="true",  # no Redis here; test_prune_postgres runs on our server anyway
            DG_SUITE_PG_URI=f"postgresql://{server.user}@{server.host}:{server.port}/",
        )
        env.pop("LANGGRAPH_STRICT_MSGPACK", None)  # the default, as LangGraph's CI runs it
        # Absolute: pytest runs in the sdist's directory.
        keep = (args.keep or Path(stack.enter_context(tempfile.TemporaryDirectory()))).resolve()
        keep.mkdir(parents=True, exist_ok=True)
        for where, chosen, plugins in runs:
            junit = keep / f"junit-{where.name}.xml"
            junit.unlink(missing_ok=True)
            cmd = [sys.executable, "-m", "pytest", *(f"tests/{f}" for f in chosen),
                   "-q", "-p", "no:cacheprovider", "-o", "addopts=", *plugins,
                   f"--junitxml={junit}", *args.pytest_args]  # fmt: skip
            started = time.monotonic()
            subprocess.run(cmd, cwd=where, env={**env, "PYTHONPATH": str(where)}, check=False)
            took[where.name] = time.monotonic() - started
            if junit.exists():
                outcomes.update({f"{where.name}/{k}": v for k, v in results(junit).items()})
    return finish(outcomes, took, args.out)


def finish(outcomes: dict[str, str], took: dict[str, float], out: Path | None) -> int:
    """Print (and write to ``out``) the report; 1 when ours missed the bar."""
    text, missed = report(outcomes)
    if took:
        text += "\n\n" + "; ".join(
            f"{name}: {int(t // 60)} min {int(t % 60)} s" for name, t in took.items()
        )
    print(text)
    if out is not None:
        out.write_text(text + "\n", encoding="utf-8")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
