"""Write out, as plain source (``make generate``), the methods declared once in the Protocols.

The declaration is read from three places, and only there:

- the Protocols: `Checkpointer` (``core/checkpointer.py``), `RunQueue` and `TraceContexts`
  (``core/run_queue.py``): each method's name, parameters, defaults and annotations, as written;
- the PostgreSQL call builders (``postgres/calls.py``, ``fast_path.py``, ``items.py``, ``operating.py``, ``scheduling.py``,
  ``workers.py``): one function per method, ``(config, *the method's parameters)`` → the
  `SqlCall` that performs it;
- `HAND_WRITTEN`, `POLLING` and `SQL` below: the methods each target writes by hand (waits, ``prune_all``,
  ``submit_many``, ``close``, ...), which the generator skips.

It writes five modules, each a mixin class per Protocol group (for ``core/`` a Protocol mixin)
that a hand-written class inherits, each file headed "DO NOT CHANGE":

- ``core/async_generated.py``: the async Protocols' methods, all but ``subscribe`` and ``close``,
  ``async def commit(self, claim, commit) -> Checkpoint: ...``: the async spelling is declared
  once, by the sync Protocol;
- ``postgres/generated.py``: ``def commit(self, claim, commit): return
  self._x.run(calls.commit(self._config, claim, commit))`` — one hop from the method to its SQL;
- ``postgres/async_generated.py``: the same awaited, for the async store;
- ``embedded/threaded_generated.py``: the async wrappers of the embedded stores, each method the
  sync store's in a worker thread (`durable_graph.embedded.offload.in_thread`);
- ``testkit/adapter_generated.py``: the testkit's sync adapter over an async store;

and, from an async module made sync (``tools/unasync.py``): ``langgraph/generated.py``,
`DurableSaver` written from `AsyncDurableSaver` (``langgraph/async_saver.py``).

And the sync twins of the modules written async first (`TWINS`, ``tools/async_to_sync.py``):

- ``worker/attempt_generated.py``: the sync worker's attempt, from ``worker/attempt_async.py``;
- ``worker/sync.py``: the sync `Worker` (threads), from ``worker/aio.py`` (`AsyncWorker`, tasks),
  ``_compat_async`` read as ``_compat_sync``.

Adding a store method: write it in the Protocol (and the embedded stores), add its builder to
``postgres/calls.py`` (or the builder module of its concern), run ``make generate``. ``--check`` (``tests/test_generated.py``)
fails when a generated file is not what this script writes.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import inspect
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from async_to_sync import sync_twin

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "python" / "durable_graph"
sys.path.insert(0, str(ROOT / "python"))

from unasync import Conversion, convert, in_a_thread  # noqa: E402  (tools/, beside this script)

BUILTINS = {"str", "int", "bool", "None", "object", "dict", "list", "tuple", "type", "float"}

Written = dict[str, set[str]]
"""Protocol name → the methods of it that a target writes by hand."""

HAND_WRITTEN: Written = {
    # subscribe iterates; close is each store's own (`ClosedOnExit` gives the context manager).
    "Checkpointer": {"subscribe", "close"},
    "RunQueue": set(),
    "TraceContexts": set(),
}
POLLING: Written = {
    # The waits poll on the caller's side (PostgreSQL: woken by LISTEN/NOTIFY; the threaded
    # wrappers: on the event loop, never holding a thread).
    "Checkpointer": {*HAND_WRITTEN["Checkpointer"], "await_events_after"},
    "RunQueue": {"await_closed"},
    "TraceContexts": set(),
}
SQL: Written = {
    # prune_all runs one transaction per batch; an empty submit_many issues no call.
    "Checkpointer": {*POLLING["Checkpointer"], "prune_all"},
    "RunQueue": {*POLLING["RunQueue"], "submit_many"},
    "TraceContexts": set(),
}


@dataclass(frozen=True)
class Method:
    """One Protocol method as written: its signature's source and its parameters."""

    name: str
    signature: str
    """``(self, thread_id: str, ...) -> Checkpoint`` as in the Protocol."""
    positional: list[str]
    keyword: list[str]
    names: set[str]
    """The names its annotations and defaults use."""

    def arguments(self, *, keywords: bool) -> str:
        """The call's arguments: positionally, keyword-only ones by name if ``keywords``."""
        named = [f"{k}={k}" for k in self.keyword] if keywords else self.keyword
        return ", ".join([*self.positional, *named])


@dataclass(frozen=True)
class Protocol:
    name: str
    module: str
    methods: list[Method]
    imports: dict[str, str]
    """Name → ``module:spelling``: where the Protocol's module takes it from (or defines it in),
    and how it is imported (``Checkpoint as LGCheckpoint``)."""


def _names(node: ast.AST | None) -> set[str]:
    if node is None:
        return set()
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def read_protocol(module: str, name: str) -> Protocol:
    """The public methods of the Protocol ``name`` in ``module`` (source order)."""
    path = PACKAGE.joinpath(*module.split(".")[1:]).with_suffix(".py")
    tree = ast.parse(path.read_text())
    imports: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                spelled = alias.name if alias.asname is None else f"{alias.name} as {alias.asname}"
                imports[alias.asname or alias.name] = f"{node.module}:{spelled}"
        elif isinstance(node, ast.Assign):
            imports |= {t.id: f"{module}:{t.id}" for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            imports[node.target.id] = f"{module}:{node.target.id}"
        elif isinstance(node, ast.ClassDef):
            imports[node.name] = f"{module}:{node.name}"
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
    methods = []
    for fn in cls.body:
        if not isinstance(fn, ast.FunctionDef) or fn.name.startswith("_"):
            continue
        if any(ast.unparse(d) == "property" for d in fn.decorator_list):
            continue
        args = fn.args
        used = _names(fn.returns)
        for a in [*args.args, *args.kwonlyargs]:
            used |= _names(a.annotation)
        for d in [*args.defaults, *args.kw_defaults]:
            used |= _names(d)
        methods.append(
            Method(
                name=fn.name,
                signature=f"({ast.unparse(args)}) -> {ast.unparse(fn.returns)}",  # type: ignore[arg-type]
                positional=[a.arg for a in args.args[1:]],
                keyword=[a.arg for a in args.kwonlyargs],
                names=used - BUILTINS,
            )
        )
    return Protocol(name, module, methods, imports)


CHECKPOINTER = read_protocol("durable_graph.core.checkpointer", "Checkpointer")
RUN_QUEUE = read_protocol("durable_graph.core.run_queue", "RunQueue")
TRACE_CONTEXTS = read_protocol("durable_graph.core.run_queue", "TraceContexts")


def generated(protocols: list[Protocol], hand_written: Written) -> list[tuple[Protocol, Method]]:
    """The methods to write out: every public one but those written by hand."""
    return [
        (p, m) for p in protocols for m in p.methods if m.name not in hand_written.get(p.name, ())
    ]


# --- the PostgreSQL builders --------------------------------------------------------------


def builder_module(method: Method) -> str:
    """The module (``calls``, ``fast_path``, ``items``, ``operating``, ``scheduling``, ``workers``) whose
    builder performs ``method``, checked to take ``config`` and then the method's parameters in
    order, none defaulted."""
    from durable_graph.postgres import calls, fast_path, items, operating, scheduling, workers

    for module in (calls, fast_path, items, operating, scheduling, workers):
        build = getattr(module, method.name, None)
        if callable(build):
            params = list(inspect.signature(build).parameters.values())
            expected = ["config", *method.positional, *method.keyword]
            if [p.name for p in params] != expected or any(
                p.kind is not p.POSITIONAL_OR_KEYWORD or p.default is not p.empty for p in params
            ):
                raise SystemExit(
                    f"{module.__name__}.{method.name} must take ({', '.join(expected)}), "
                    "positionally, without defaults"
                )
            return module.__name__.rsplit(".", 1)[1]
    raise SystemExit(
        f"no PostgreSQL builder for {method.name}: add it to postgres/calls.py, or name the method "
        "in HAND_WRITTEN of tools/generate_stores.py and write it by hand"
    )


# --- the targets --------------------------------------------------------------------------


@dataclass(frozen=True)
class MixinClass:
    name: str
    doc: str
    protocols: list[Protocol]
    attributes: list[str]
    """Declared, set by the hand-written store's ``__init__``: ``_x: Executor``."""
    body: Callable[[Protocol, Method], str]
    bases: str = ""


@dataclass(frozen=True)
class Target:
    path: str
    doc: str
    asynchronous: bool
    imports: list[str]
    classes: list[MixinClass]
    hand_written: Written


def _sql(protocol: Protocol, method: Method, awaited: bool) -> str:
    args = ", ".join(["self._config", *method.positional, *method.keyword])
    run = f"self._x.run({builder_module(method)}.{method.name}({args}))"
    return f"return await {run}" if awaited else f"return {run}"


def _threaded(attr: dict[str, str]) -> Callable[[Protocol, Method], str]:
    def body(protocol: Protocol, method: Method) -> str:
        args = method.arguments(keywords=True)
        target = f"self.{attr[protocol.name]}.{method.name}"
        return f"return await in_thread({target}{', ' if args else ''}{args})"

    return body


def _adapted(attr: dict[str, str]) -> Callable[[Protocol, Method], str]:
    def body(protocol: Protocol, method: Method) -> str:
        args = method.arguments(keywords=True)
        return f"return self._runner.run(self.{attr[protocol.name]}.{method.name}({args}))"

    return body


SQL_DOC = (
    "\n\nEach builds its `SqlCall` (`durable_graph.postgres.calls`: the checks, the SQL function\n"
    "call, the decoder) and runs it with the store's executor; "
)
TARGETS = [
    Target(
        path="core/async_generated.py",
        hand_written=HAND_WRITTEN,
        doc="The async Protocols' methods: each `Checkpointer`, `RunQueue` and `TraceContexts` method as\na coroutine with the sync Protocol's signature (SPEC §9).\n\nThe contract of each is the sync method's (its docstring in the sync Protocol); only the calling\nconvention differs. `AsyncCheckpointer`, `AsyncRunQueue` and `AsyncTraceContexts`\n(`durable_graph.core.async_protocols`) inherit them and add what is not one call: ``run_queue``,\n``subscribe``, ``close`` and the async context manager.\n",
        asynchronous=True,
        imports=["from typing import Protocol"],
        classes=[
            MixinClass(
                "AsyncCheckpointerMethods",
                "`Checkpointer`'s methods as coroutines, all but ``subscribe`` and ``close``.",
                [CHECKPOINTER],
                [],
                lambda p, m: "...",
                bases="(Protocol)",
            ),
            MixinClass(
                "AsyncRunQueueMethods",
                "`RunQueue`'s methods as coroutines.",
                [RUN_QUEUE],
                [],
                lambda p, m: "...",
                bases="(Protocol)",
            ),
            MixinClass(
                "AsyncTraceContextsMethods",
                "`TraceContexts`' methods as coroutines.",
                [TRACE_CONTEXTS],
                [],
                lambda p, m: "...",
                bases="(Protocol)",
            ),
        ],
    ),
    Target(
        path="postgres/generated.py",
        hand_written=SQL,
        doc="The sync PostgreSQL stores' one-call methods."
        + SQL_DOC
        + "`PostgresCheckpointer`\nand `PostgresRunQueue` inherit them.\n",
        asynchronous=False,
        imports=[
            "from durable_graph.postgres import calls, fast_path, items, operating, scheduling, workers",
            "from durable_graph.postgres.config import PostgresConfig",
            "from durable_graph.postgres.connection import Executor",
        ],
        classes=[
            MixinClass(
                "CheckpointerSql",
                "`Checkpointer`'s one-call methods on PostgreSQL.",
                [CHECKPOINTER],
                ["_x: Executor", "_config: PostgresConfig"],
                lambda p, m: _sql(p, m, awaited=False),
            ),
            MixinClass(
                "RunQueueSql",
                "`RunQueue`'s and `TraceContexts`' one-call methods on PostgreSQL.",
                [RUN_QUEUE, TRACE_CONTEXTS],
                ["_x: Executor", "_config: PostgresConfig"],
                lambda p, m: _sql(p, m, awaited=False),
            ),
        ],
    ),
    Target(
        path="postgres/async_generated.py",
        hand_written=SQL,
        doc="The async PostgreSQL stores' one-call methods."
        + SQL_DOC
        + "\n`AsyncPostgresCheckpointer` and `AsyncPostgresRunQueue` inherit them.\n",
        asynchronous=True,
        imports=[
            "from durable_graph.postgres import calls, fast_path, items, operating, scheduling, workers",
            "from durable_graph.postgres.async_connection import AsyncExecutor",
            "from durable_graph.postgres.config import PostgresConfig",
        ],
        classes=[
            MixinClass(
                "AsyncCheckpointerSql",
                "`Checkpointer`'s one-call methods on PostgreSQL, as coroutines.",
                [CHECKPOINTER],
                ["_x: AsyncExecutor", "_config: PostgresConfig"],
                lambda p, m: _sql(p, m, awaited=True),
            ),
            MixinClass(
                "AsyncRunQueueSql",
                "`RunQueue`'s and `TraceContexts`' one-call methods on PostgreSQL, as coroutines.",
                [RUN_QUEUE, TRACE_CONTEXTS],
                ["_x: AsyncExecutor", "_config: PostgresConfig"],
                lambda p, m: _sql(p, m, awaited=True),
            ),
        ],
    ),
    Target(
        path="embedded/threaded_generated.py",
        hand_written=POLLING,
        doc="The embedded stores' async wrappers' methods.\n\nEach runs the sync store's method of the same name in a worker thread (`in_thread`), with the\ncaller's arguments; `ThreadedCheckpointer` and `ThreadedRunQueue` inherit them.\n",
        asynchronous=True,
        imports=[
            "from durable_graph.core.checkpointer import Checkpointer",
            "from durable_graph.core.run_queue import RunQueue, TraceContexts",
            "from durable_graph.embedded.offload import in_thread",
        ],
        classes=[
            MixinClass(
                "ThreadedCheckpointerCalls",
                "`Checkpointer`'s methods, each the sync store's in a worker thread.",
                [CHECKPOINTER],
                ["_sync: Checkpointer"],
                _threaded({"Checkpointer": "_sync"}),
            ),
            MixinClass(
                "ThreadedRunQueueCalls",
                "`RunQueue`'s and `TraceContexts`' methods, each the sync queue's in a worker thread.",
                [RUN_QUEUE, TRACE_CONTEXTS],
                ["_sync: RunQueue", "_traces: TraceContexts"],
                _threaded({"RunQueue": "_sync", "TraceContexts": "_traces"}),
            ),
        ],
    ),
    Target(
        path="testkit/adapter_generated.py",
        hand_written=HAND_WRITTEN,
        doc="The testkit's sync adapter's methods.\n\nEach runs the async store's method of the same name on the adapter's loop and waits for its\nresult; `SyncAdapter` and `SyncRunQueueAdapter` inherit them.\n",
        asynchronous=False,
        imports=[
            "from durable_graph.core.async_protocols import AsyncCheckpointer, AsyncRunQueue, AsyncTraceContexts",
            "from durable_graph.testkit.loop import LoopThread",
        ],
        classes=[
            MixinClass(
                "SyncCheckpointerCalls",
                "`Checkpointer`'s methods, each the async store's run on the loop.",
                [CHECKPOINTER],
                ["target: AsyncCheckpointer", "_runner: LoopThread"],
                _adapted({"Checkpointer": "target"}),
            ),
            MixinClass(
                "SyncRunQueueCalls",
                "`RunQueue`'s and `TraceContexts`' methods, each the async queue's run on the loop.",
                [RUN_QUEUE, TRACE_CONTEXTS],
                ["target: AsyncRunQueue", "_traces: AsyncTraceContexts", "_runner: LoopThread"],
                _adapted({"RunQueue": "target", "TraceContexts": "_traces"}),
            ),
        ],
    ),
]
# --- sync modules written from async ones (tools/unasync.py) ------------------------------

LANGGRAPH_API = {
    "aput": "put",
    "aput_writes": "put_writes",
    "aget_tuple": "get_tuple",
    "alist": "list",
    "adelete_thread": "delete_thread",
    "adelete_for_runs": "delete_for_runs",
    "acopy_thread": "copy_thread",
    "aprune": "prune",
}
"""LangGraph's async checkpointer methods and their sync names."""

CONVERSIONS = [
    Conversion(
        source="langgraph/async_saver.py",
        target="langgraph/generated.py",
        doc="""`DurableSaver`: LangGraph's checkpointer over any sync store (SPEC §12).

`AsyncDurableSaver`'s code (``async_saver.py``) made sync: read that. LangGraph's async API runs
the sync one in a worker thread, so the event loop never waits on the store.
""",
        renames={
            "AsyncDurableSaver": "DurableSaver",
            "AsyncCheckpointer": "Checkpointer",
            "durable_graph.core.async_protocols": "durable_graph.core.checkpointer",
            "AsyncIterator": "Iterator",
            "asynccontextmanager": "contextmanager",
            "asyncio.Lock": "threading.Lock",
            **LANGGRAPH_API,
        },
        async_only="    # --- LangGraph's sync API:",
        imports=("import threading", "from collections.abc import AsyncIterator"),
        section=in_a_thread(LANGGRAPH_API),
    )
]


def render(target: Target) -> str:
    sources = sorted(
        {"/".join(p.module.split(".")[1:]) + ".py" for c in target.classes for p in c.protocols}
    )
    header = (
        f"# DO NOT CHANGE: generated by tools/generate_stores.py from {', '.join(sources)}"
        + (
            " and postgres/calls.py, postgres/operating.py"
            if target.path.startswith("postgres/")
            else ""
        )
        + ".\n# Edit those (or the generator) and run `make generate`.\n"
    )
    names: dict[str, set[str]] = {}
    lines: list[str] = []
    for cls in target.classes:
        lines += ["", "", f"class {cls.name}{cls.bases}:", f'    """{cls.doc}"""', ""]
        lines += [f"    {a}" for a in cls.attributes]
        for protocol, method in generated(cls.protocols, target.hand_written):
            for n in method.names:
                module, spelled = protocol.imports[n].split(":")
                names.setdefault(module, set()).add(spelled)
            prefix = "async def" if target.asynchronous else "def"
            lines += ["", f"    {prefix} {method.name}{method.signature}:"]
            lines.append(f"        {cls.body(protocol, method)}")
    imports = ["from __future__ import annotations", "", *target.imports]
    imports += [f"from {m} import {', '.join(sorted(ns))}" for m, ns in names.items()]
    imports.append("")
    exports = ", ".join(f'"{c.name}"' for c in target.classes)
    text = "\n".join(
        [header + f'"""{target.doc}"""', "", *imports, *lines, "", "", f"__all__ = [{exports}]", ""]
    )
    return _formatted(PACKAGE / target.path, text)


def _formatted(path: Path, text: str) -> str:
    """``text`` with its imports sorted and formatted as ``ruff`` would leave ``path``."""
    ruff = str(Path(sys.executable).with_name("ruff"))
    for args in (["check", "--fix", "--select", "I,F401,RUF022", "--quiet"], ["format"]):
        done = subprocess.run(
            [ruff, *args, "--stdin-filename", str(path), "-"],
            input=text,
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=False,
        )
        if done.returncode not in (0, 1) or not done.stdout:
            raise SystemExit(f"ruff {args[0]} failed on {path}: {done.stderr}")
        text = done.stdout
    return text


@dataclass(frozen=True)
class Twin:
    """A module written async first, and where its sync twin goes."""

    source: str
    path: str
    names: dict[str, str]
    """The async names and their sync spelling."""
    doc: str


TWINS = [
    Twin(
        source="worker/attempt_async.py",
        path="worker/attempt_generated.py",
        names={
            "AsyncAttempt": "Attempt",
            "AsyncCheckpointer": "Checkpointer",
            "async_protocols": "checkpointer",
        },
        doc="One attempt of the sync `Worker`: ``attempt_async.py`` without async (read that one).",
    ),
    Twin(
        source="worker/aio.py",
        path="worker/sync.py",
        names={
            "AsyncWorker": "Worker",
            "AsyncRunContext": "RunContext",
            "AsyncHandler": "Handler",
            "AsyncAttempt": "Attempt",
            "attempt_async": "attempt_generated",
            "_compat_async": "_compat_sync",
            "AsyncCheckpointer": "Checkpointer",
            "async_protocols": "checkpointer",
            "AsyncChanges": "Changes",
            "AsyncExitStack": "ExitStack",
            "enter_async_context": "enter_context",
            "aclose": "close",
            "durable_graph.worker.aio": "durable_graph.worker",
        },
        doc=(
            "The sync worker: `Worker` runs a handler's attempts in threads (SPEC §5, §11).\n\n"
            "Generated from ``aio.py`` (`AsyncWorker`), the one source of both workers: read that"
            " one. A handler\nis a plain function, called in its attempt's thread; one that"
            " waits waits on ``ctx.wait_cancelled``.\n"
        ),
    ),
]


def render_twin(twin: Twin) -> str:
    header = (
        f"# DO NOT CHANGE: generated by tools/generate_stores.py from {twin.source}.\n"
        "# Edit that (or the generator) and run `make generate`.\n"
    )
    text = sync_twin((PACKAGE / twin.source).read_text(), twin.names, twin.doc)
    return _formatted(PACKAGE / twin.path, header + text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="fail if a file is not current")
    args = parser.parse_args(argv)
    stale = []
    written = [(t.path, render(t)) for t in TARGETS] + [(t.path, render_twin(t)) for t in TWINS]
    written += [
        (c.target, _formatted(PACKAGE / c.target, convert(c, PACKAGE))) for c in CONVERSIONS
    ]
    for relative, text in written:
        path = PACKAGE / relative
        current = path.read_text() if path.exists() else ""
        if text == current:
            continue
        if args.check:
            stale.append(relative)
            diff = difflib.unified_diff(
                current.splitlines(True), text.splitlines(True), relative, "generated"
            )
            sys.stdout.writelines(list(diff)[:40])
        else:
            path.write_text(text)
            print(f"wrote python/durable_graph/{relative}")
    if stale:
        print(f"not current: {', '.join(stale)}; run `make generate`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
