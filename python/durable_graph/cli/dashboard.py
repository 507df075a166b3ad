"""``durable-graph dashboard``: serve the web dashboard over the store the options name.

Without a token the dashboard is read-only and opens its store read-only (nothing created,
converted or migrated). With ``--token`` (or ``DURABLE_GRAPH_TOKEN``) an entry's page offers
retry and cancel (`durable_graph.dashboard.actions`), so the store is opened writable, as
``durable-graph queue retry`` opens it: the writable store exists only behind the token.

Binds 127.0.0.1 by default, where only requests naming localhost, 127.0.0.1 or [::1] (with
the port) in ``Host`` are answered (DNS rebinding). Any address that is not loopback is refused
unless ``--allow-remote`` is given with a token (``--token`` or ``DURABLE_GRAPH_TOKEN``), which
every request must then carry — the pages show inputs, outputs and failure texts — and with TLS
(``--ssl-certfile`` and ``--ssl-keyfile``, handed to uvicorn), so that neither the token nor the
data crosses the network in cleartext; ``--insecure`` serves plain HTTP there all the same.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import logging
import signal
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from durable_graph.cli.common import CliError, UsageError, store_of

TOKEN_ENV = "DURABLE_GRAPH_TOKEN"
log = logging.getLogger("durable_graph.dashboard")


def add_parser(
    command: Callable[[str, Callable[[argparse.Namespace], int], str], Any],
    option: Callable[..., None],
) -> None:
    """The ``dashboard`` sub-command, added with the parser's ``command`` and ``option`` helpers
    (``option``: help text and environment variable, as for every option)."""
    sub = command(
        "dashboard",
        cmd_dashboard,
        "serve the web dashboard (read-only; retry and cancel with a token)",
    )
    add_serving_options(
        sub,
        option,
        port=8090,
        remote="allow a non-loopback --host (needs a token, and TLS unless --insecure)",
        token="the token every request must carry, 16+ characters. On the command line it is "
        f"visible to every user of the machine in `ps`; {TOKEN_ENV} is not",
        cleartext="the token and every page cross the network",
    )


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(
    host: str,
    allow_remote: bool,
    token: str | None,
    tls: tuple[str | None, str | None] = (None, None),
    insecure: bool = False,
) -> None:
    """Refuse a bind that would show the store to other machines without protection: a
    non-loopback one needs --allow-remote, a token, and TLS (``tls``: certificate and key
    files) unless ``insecure``."""
    certfile, keyfile = tls
    if (certfile is None) != (keyfile is None):
        raise UsageError("--ssl-certfile and --ssl-keyfile go together")
    if is_loopback(host):
        return
    if not allow_remote:
        raise UsageError(f"--host {host} is not a loopback address: add --allow-remote and a token")
    if token is None or len(token) < 16:
        raise UsageError(f"--allow-remote needs a token of 16+ characters (--token or {TOKEN_ENV})")
    if certfile is None and not insecure:
        raise UsageError(
            "--allow-remote needs TLS (--ssl-certfile and --ssl-keyfile): without it the token "
            "and every page cross the network in cleartext; --insecure serves plain HTTP anyway"
        )


def add_serving_options(
    sub: Any, option: Callable[..., None], *, port: int, remote: str, token: str, cleartext: str
) -> None:
    """The options `check_serving` and `http_server` read, for a server command: --host,
    --port (default ``port``), --allow-remote and --token (their help ``remote`` and ``token``),
    --ssl-certfile, --ssl-keyfile and --insecure (``cleartext``: what crosses the network in
    cleartext without TLS)."""
    option(sub, "--host", default="127.0.0.1", help="address to bind")
    option(sub, "--port", type=int, default=port, help="port to bind")
    option(sub, "--allow-remote", action="store_true", help=remote)
    option(sub, "--token", help=token)
    option(sub, "--ssl-certfile", help="TLS certificate (PEM) to serve HTTPS with")
    option(sub, "--ssl-keyfile", help="TLS private key (PEM) of --ssl-certfile")
    option(
        sub,
        "--insecure",
        action="store_true",
        help=f"with --allow-remote, serve plain HTTP without TLS: {cleartext} in cleartext",
    )


def check_serving(args: argparse.Namespace) -> None:
    """The bind (`check_bind`) and the port of a server command's arguments."""
    tls = (args.ssl_certfile, args.ssl_keyfile)
    check_bind(args.host, args.allow_remote, args.token, tls, args.insecure)
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be between 0 and 65535, got {args.port}")


def http_server(app: Any, args: argparse.Namespace) -> Any:
    """The uvicorn server of a server command (`_server_class`), TLS from its arguments."""
    import uvicorn

    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level="warning",
        timeout_graceful_shutdown=2,
        ssl_certfile=args.ssl_certfile,
        ssl_keyfile=args.ssl_keyfile,
    )
    return _server_class()(config)


def _server_class() -> Any:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, stopping on SIGTERM/SIGINT with exit 0 like the worker (uvicorn's
        own handling re-raises the signal after shutdown, so the process dies of it)."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            def stop(signum: int, frame: FrameType | None) -> None:
                self.should_exit = True

            signals = (signal.SIGTERM, signal.SIGINT)
            previous = {s: signal.signal(s, stop) for s in signals}
            try:
                yield
            finally:
                for s, handler in previous.items():
                    signal.signal(s, handler)

    return Server


def cmd_dashboard(args: argparse.Namespace) -> int:
    check_serving(args)
    try:
        import uvicorn  # noqa: F401  (checked here: the dashboard extra)

        from durable_graph.dashboard import create_app
    except ImportError as exc:
        raise CliError(str(exc)) from None
    logging.basicConfig(level=logging.INFO)
    acting = args.token is not None  # retry and cancel write: only behind the token
    with store_of(args, must_exist=True, read_only=not acting) as store:
        app = create_app(store, args.token)
        try:
            server = http_server(app, args)
            if args.ssl_certfile is not None:
                server.config.load()  # reads the certificate and key now: a bad one is a usage error
        except (OSError, ValueError) as exc:
            raise UsageError(f"--ssl-certfile/--ssl-keyfile: {exc}") from None
        scheme = "https" if args.ssl_certfile is not None else "http"
        mode = "retry and cancel enabled" if acting else "read-only"
        log.info("dashboard at %s://%s:%d/ (%s)", scheme, args.host, args.port, mode)
        server.run()
        if not server.started:
            raise CliError(f"could not serve on {args.host}:{args.port}")
    return 0
