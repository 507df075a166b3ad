"""The ``durable-graph`` command line: operate a store, run workers, and run the demo.

The store is PostgreSQL when ``--dsn`` (or ``DURABLE_GRAPH_DSN``) is given, else the SQLite file
``--sqlite PATH`` (default ``./durable_graph.db``). Output is an aligned table by default and JSON
with ``--json``. Every user mistake — a bad argument, an unknown entry or thread, a refused call,
a store that cannot be reached — prints one ``error: ...`` line on stderr and exits non-zero
(1 for failures, 2 for usage errors, 130 when interrupted); never a traceback (docs/decisions.md
D45). Every option's default may come from its environment variable (``--poll-interval`` →
``DURABLE_GRAPH_POLL_INTERVAL``), named in ``--help``.
``DURABLE_GRAPH_DEBUG=1`` re-raises unexpected errors with their traceback.

Ids, tenants, holders and error text are printed with control characters escaped, and no error
line carries the DSN or any piece of it (a password above all).

One module per command group: `common` (errors, argument types, output, opening the store),
`run` (migrate, sql, worker, submit, demo), `queue`, `threads` (thread, events, prune), `health`,
`privileges` (grant, revoke), `parser` (the argument parser and `main`).
"""

from __future__ import annotations

from durable_graph.cli.common import CliError, UsageError, open_store, parse_duration, to_jsonable
from durable_graph.cli.parser import build_parser, main
from durable_graph.cli.run import load_app

__all__ = [
    "CliError",
    "UsageError",
    "build_parser",
    "load_app",
    "main",
    "open_store",
    "parse_duration",
    "to_jsonable",
]
