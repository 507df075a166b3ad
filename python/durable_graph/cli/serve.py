"""``durable-graph serve --config langgraph.json``: LangGraph Server's API over the store.

Binds 127.0.0.1 by default (and answers only loopback ``Host`` names there); another address
needs ``--allow-remote``, a token (``--token`` or ``DURABLE_GRAPH_TOKEN``, 16+ characters), which
clients send as their API key, and TLS (``--ssl-certfile``/``--ssl-keyfile``) unless
``--insecure``, as the dashboard. ``--workers N``
runs N workers of runs in this process, a worker of webhook deliveries with slots of its own
(D247) and a scheduler firing crons (0: runs and deliveries wait for ``durable-graph worker
--langgraph-config`` processes anywhere on the same store, crons for a ``durable-graph
scheduler`` or ``worker --scheduler``). ``langgraph.json``'s ``webhooks.url`` says which
receivers a webhook may name (D248). Browser pages of other origins are refused unless
``--allow-origin`` or ``langgraph.json``'s ``http.cors`` names them; bodies are at most
``--max-body-bytes`` (SPEC §20.5, D145). The rest of ``http`` (the user's ``http.app``,
``mount_prefix``, ``disable_*``, ``configurable_headers``...) is served as
`durable_graph.service.http_app` says; every key is checked before the store is opened.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Callable
from typing import Any

from durable_graph.cli.common import CliError, UsageError, open_async_store, store_of
from durable_graph.cli.dashboard import add_serving_options, check_serving, http_server, is_loopback

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]", "::1")

log = logging.getLogger("durable_graph.service")


def add_parser(
    command: Callable[[str, Callable[[argparse.Namespace], int], str], Any],
    option: Callable[..., None],
) -> None:
    sub = command("serve", cmd_serve, "serve LangGraph Server's API for a langgraph.json")
    option(sub, "--config", default="langgraph.json", metavar="FILE", help="the langgraph.json")
    add_serving_options(
        sub,
        option,
        port=2024,
        remote="allow a non-loopback --host (needs a token)",
        token="the API key every request must carry, 16+ characters",
        cleartext="the token crosses the network",
    )
    option(sub, "--workers", type=int, default=1, metavar="N", help="workers in this process")
    option(
        sub,
        "--allow-origin",
        metavar="ORIGINS",
        help="browser origins allowed to use the API besides its own, comma-separated "
        "(https://app.example.com,http://localhost:3000; * for any), added to langgraph.json's "
        "http.cors.allow_origins",
    )
    option(
        sub,
        "--max-body-bytes",
        type=int,
        metavar="N",
        help="the largest request body accepted, in bytes (413 above it, refused before it is "
        "read; default: 8 MiB)",
    )
    option(
        sub,
        "--cron-seconds",
        action="store_true",
        help="accept six-field cron schedules (seconds first: a run as often as every second); "
        "LangGraph Server takes five fields, and so does this server without this option",
    )
    option(
        sub,
        "--max-crons-per-user",
        type=int,
        default=None,
        metavar="N",
        help="the most crons one user (tenant) may have; a create past it is 409 (default: 100)",
    )


def cmd_serve(args: argparse.Namespace) -> int:
    check_serving(args)
    if args.workers < 0:
        raise UsageError("--workers must be >= 0")
    if args.max_body_bytes is not None and args.max_body_bytes < 1:
        raise UsageError("--max-body-bytes must be >= 1")
    if args.max_crons_per_user is not None and args.max_crons_per_user < 0:
        raise UsageError("--max-crons-per-user must be >= 0")
    try:
        import uvicorn  # noqa: F401  (checked here: the service extra)

        from durable_graph.core.errors import ValidationError
        from durable_graph.langgraph import AsyncDurableSaver
        from durable_graph.langgraph.config_file import LangGraphConfig
        from durable_graph.langgraph.handler import async_graphs_handler
        from durable_graph.langgraph.store import AsyncDurableStore
        from durable_graph.service import create_app
        from durable_graph.service.auth import AuthCache, UserAuth
        from durable_graph.service.crons import MAX_CRONS_PER_USER, CronSettings
        from durable_graph.service.guard import DEFAULT_MAX_BODY_BYTES, Origins, cors_settings
        from durable_graph.service.http_app import load_user_app
        from durable_graph.service.http_config import HttpConfig
        from durable_graph.service.retention import (
            item_ttl,
            set_up,
            store_ttl_config,
            thread_ttl_config,
            with_retention,
        )
        from durable_graph.service.webhooks import (
            RUN_KINDS,
            WebhookPolicy,
            delivery_deadline,
            delivery_worker,
            use_policy,
            with_webhooks,
        )
        from durable_graph.worker.aio import AsyncWorker
        from durable_graph.worker.scheduler import Scheduler
    except ImportError as exc:
        raise CliError(f"serve needs durable-graph[service] ({exc})") from None
    try:
        given = Origins.of((args.allow_origin or "").split(","))
    except ValidationError as exc:
        raise UsageError(f"--allow-origin: {exc}") from None
    logging.basicConfig(level=logging.INFO)
    try:
        config = LangGraphConfig.read(args.config)
        http = HttpConfig.of(config.http)
        cache = AuthCache.of(config.auth_cache)
        graphs = config.load_graphs()
        base = config.path.parent
        user_auth = None if config.auth is None else UserAuth.load(base, config.auth, cache)
        user_app = None if http.app is None else load_user_app(base, http.app)
        configured, cors = cors_settings(args.config)
        webhook_policy = WebhookPolicy.of(config.webhooks)
        # SPEC §24: checked before anything starts (a TTL read by nothing is no TTL).
        thread_ttl = thread_ttl_config(config.checkpointer_ttl)
        store_ttl = store_ttl_config(config.store_ttl)
        serde = config.saver_serializer()  # encryption's handlers, loaded and checked (D286)
        # SPEC §25.1: store.index, its embed loaded and the whole checked before anything starts.
        store_index = config.store_index()
    except ValidationError as exc:
        raise CliError(f"--config: {exc}") from None
    try:
        deadline = delivery_deadline()
    except ValidationError as exc:
        raise CliError(str(exc)) from None
    use_policy(webhook_policy)  # what runs and crons may name as their webhook (422 else)
    if user_app is not None and (user_auth or args.token) and not http.custom_route_auth:
        log.warning(
            "http.app: its routes are served without the token or auth, as LangGraph Server "
            "serves them; http.enable_custom_route_auth: true requires it there too"
        )
    origins = configured.union(given)
    # The HTTP layer and the in-process workers share one async store on uvicorn's loop (SPEC
    # §20.1): no request, stream or join holds a thread, and graphs run with ``astream``, as
    # LangGraph Server runs them, so ``async def`` nodes and tools work (sync nodes run in
    # LangGraph's executor threads, off the loop).
    hosts = LOOPBACK_HOSTS if is_loopback(args.host) else None  # DNS rebinding, as the dashboard
    server = http_server(None, args)

    async def serve() -> None:
        async with await open_async_store(args) as store:
            saver = AsyncDurableSaver(store, serde=serde)
            # The graphs' LangGraph ``store`` (long-term memory) and /store/* are the store's
            # items (SPEC §20.3), as LangGraph Server gives its graphs its own store.
            graph_store = AsyncDurableStore(
                store.run_queue, ttl=item_ttl(store_ttl), index=store_index
            )
            # The retention sweeps are jobs of the queue (SPEC §24, D262): set up here, run by
            # any worker of the langgraph.json (these, or worker --langgraph-config). Graph
            # workers lease runs and sweeps only; deliveries have slots of their own (D247), so
            # a slow receiver never holds a run back.
            await set_up(store, thread_ttl, store_ttl)
            handler = async_graphs_handler(graphs, saver, store=graph_store)
            workers = [
                AsyncWorker(
                    store,
                    with_retention(with_webhooks(handler)),
                    kinds=RUN_KINDS,
                )
                for _ in range(args.workers)
            ]
            if workers:
                sends = not http.disable_webhooks
                workers.append(delivery_worker(store, webhook_policy, deadline, send=sends))
            running = [asyncio.create_task(w.run(), name=w.holder) for w in workers]
            server.config.app = create_app(  # uvicorn loads its app when it starts serving
                store,
                graphs,
                saver=saver,
                user_auth=user_auth,
                graph_store=graph_store,
                token=args.token,
                allowed_hosts=hosts,
                origins=origins,
                cors=cors,
                max_body_bytes=args.max_body_bytes or DEFAULT_MAX_BODY_BYTES,
                cron_settings=CronSettings(
                    seconds=args.cron_seconds,
                    max_per_user=(
                        MAX_CRONS_PER_USER
                        if args.max_crons_per_user is None
                        else args.max_crons_per_user
                    ),
                ),
                thread_ttl=thread_ttl,
                http=http,
                user_app=user_app,
            )
            log.info(
                "LangGraph API at http://%s:%d%s/ (%d graphs, %d workers in process)",
                args.host,
                args.port,
                http.mount_prefix,
                len(graphs),
                args.workers,
            )
            try:
                await server.serve()
            finally:  # running attempts finish within the workers' shutdown deadline
                for w in workers:
                    w.stop()
                await asyncio.gather(*running, return_exceptions=True)

    # Opened first (it creates or migrates the store); with in-process workers, the scheduler
    # fires crons' slots on it (SPEC §15: at most once a slot, whoever else fires them).
    with store_of(args, must_exist=False) as sync_store:
        scheduler = Scheduler(sync_store.run_queue) if args.workers > 0 else None
        if scheduler is not None:
            scheduler.start_thread()
        try:
            with asyncio.Runner(loop_factory=server.config.get_loop_factory()) as runner:
                runner.run(serve())
        finally:
            if scheduler is not None:
                scheduler.stop()
    if not server.started:
        raise CliError(f"could not serve on {args.host}:{args.port}")
    return 0
