"""Benchmarks of durable_graph against LangGraph, procrastinate and pgqueuer (`make bench`).

Run ``.venv/bin/python -m tests.bench.run --out bench-results.md``; method and results are in
``docs/bench.md``. Modules: `common` (the harness), `stores`, one module per family
(`checkpoint`, `queue`, `worker_cycle`, `pgbench`, `growth`), `diagnose` (what limits us) and
`report` (the markdown).
"""
