"""Webhooks on run completion (SPEC §20.3), delivered through the queue itself.

A run created with ``webhook: <url>`` keeps the URL in its request. When it ends, its delivery
is submitted as an entry of its own: kind ``webhook``, on the thread ``webhook:<run_id>`` (so it
never waits behind, or holds back, the run's thread), with the key ``webhook:<run_id>`` (so a
run has one delivery however often its end is reported). Who sees the end submits it: the
worker whose attempt ended the run (`with_webhooks`: it returned, or failed for the last time),
or the API process that cancelled it. The delivery is an ordinary entry: the worker's backoff
retries a receiver that is down, slow or answers non-2xx, up to `MAX_ATTEMPTS` (about eight
minutes), at least once; its attempts are in ``queue show``.

Deliveries cannot hurt the service (issue 46, D247-D250):

- They run on slots of their own (`delivery_worker`: kind ``webhook``, `SLOTS` at once), never
  on the slots that run graphs, which lease only runs (`RUN_KINDS`): a stuck receiver holds back
  at most other deliveries.
- Each has a total deadline (``DURABLE_GRAPH_WEBHOOK_TIMEOUT`` seconds, `DEFAULT_DEADLINE`):
  resolving, connecting, sending and the answer's status line and headers, all within it; the
  answer's body is never read (its status says it all), so an endless answer costs nothing.
- The URL is checked by a `WebhookPolicy` (``langgraph.json``'s ``webhooks.url``, the
  reference's keys) when a run or cron stores it (`check_webhook`, 422) and again at delivery,
  where every address its host resolves to is checked and the POST goes to a checked address
  (the host's name kept for ``Host`` and TLS), so DNS cannot switch it afterwards. Loopback and
  private hosts are refused unless the policy allows them; link-local (cloud metadata),
  unspecified, multicast and reserved ones always.
- User info (``user:password@``) is refused, and what is recorded or logged of a receiver is its
  scheme and host (`origin`): its path and query may hold a secret of the receiver's.

The POST (`deliver`): LangGraph Server's payload — the run as ``runs.get`` answers it, with its
``status``, ``values`` (a finished run's), ``error`` (a failed run's ``{"error", "message"}``)
and ``webhook_sent_at`` — as JSON, signed when ``DURABLE_GRAPH_WEBHOOK_SECRET`` is set:
``X-Durable-Graph-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">``, which a
receiver checks (and rejects when ``t`` is old, against replays).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import json
import logging
import os
import re
import socket
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias
from urllib.parse import urlsplit

import httpcore
import httpx

from durable_graph.core.async_protocols import AsyncCheckpointer
from durable_graph.core.errors import ValidationError
from durable_graph.core.model import JSON, Completed, Failed, QueueEntry, Submission
from durable_graph.core.scheduling import DEFAULT_KIND
from durable_graph.langgraph.values import message_dict
from durable_graph.service.records import client_error, run_id_of, run_json, service_part
from durable_graph.service.retention import KIND as RETENTION_KIND
from durable_graph.worker.flow import FinalFailure

if TYPE_CHECKING:
    from durable_graph.aio import AsyncRunContext
    from durable_graph.worker.aio import AsyncWorker

log = logging.getLogger("durable_graph.service")

KIND: Final = "webhook"
PREFIX: Final = "webhook:"
RUN_KINDS: Final = (DEFAULT_KIND, RETENTION_KIND)
"""What the workers that run graphs lease: runs (the service submits them as ``default``) and
the retention sweeps (SPEC §24, D262: short SQL jobs, never a receiver's wait)."""
MAX_ATTEMPTS: Final = 10
"""With the default backoff (about 1 s, 2 s, 4 s ... doubling), the last attempt comes four to
eight minutes after the first: a receiver down for a minute gets its delivery."""
SECRET_ENV: Final = "DURABLE_GRAPH_WEBHOOK_SECRET"
SIGNATURE_HEADER: Final = "X-Durable-Graph-Signature"
DEADLINE_ENV: Final = "DURABLE_GRAPH_WEBHOOK_TIMEOUT"
DEFAULT_DEADLINE: Final = 10.0
MAX_DEADLINE: Final = 300.0
SLOTS: Final = 4
"""Deliveries at once in one process (a stuck one holds a slot for its deadline at most)."""
CLOSE_WAIT: Final = timedelta(seconds=10)
"""How long a delivery waits for its run's close (a worker submits it just before it closes)."""
MAX_URL: Final = 2048
DEFAULT_PORTS: Final = {"http": 80, "https": 443}

AddressClass: TypeAlias = Literal[
    "loopback", "private", "link-local", "unspecified", "multicast", "reserved"
]
_PRIVATE: Final = tuple(
    ipaddress.ip_network(n)
    for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7")
)
"""Private networks (RFC 1918, shared address space, unique local): an operator's receivers."""
_NAT64: Final = ipaddress.ip_network("64:ff9b::/96")
_RESOLVER = ThreadPoolExecutor(SLOTS, thread_name_prefix="webhook-resolve")
"""Name lookups of deliveries, in threads of their own: a slow DNS answer never takes a thread
the store or the graphs use."""


class NotDelivered(Exception):
    """The receiver did not take the delivery (the attempt is retried)."""


class Refused(FinalFailure):
    """The policy refuses the receiver: the delivery fails at once (another try would not pass)."""


def address_class(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> AddressClass | None:
    """What kind of internal address ``address`` is; None for a public one. An IPv6 address
    carrying an IPv4 one (mapped, 6to4, Teredo, NAT64) is what it carries, at least."""
    if isinstance(address, ipaddress.IPv6Address):
        carried = address.ipv4_mapped or address.sixtofour
        if carried is None and address.teredo is not None:
            carried = address.teredo[1]
        if carried is None and address in _NAT64:
            carried = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if carried is not None and (inner := address_class(carried)) is not None:
            return inner
    if address.is_loopback:
        return "loopback"
    if address.is_unspecified:
        return "unspecified"
    if address.is_link_local:
        return "link-local"
    if address.is_multicast:
        return "multicast"
    if any(address in network for network in _PRIVATE):
        return "private"
    if not address.is_global:
        return "reserved"
    return None


def _literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address ``host`` spells, as the resolver reads it (``127.1``, ``0x7f.0.0.1`` and
    ``2130706433`` are 127.0.0.1 too), or None for a name."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except (OSError, ValueError):
        return None


def _is_localhost(host: str) -> bool:
    return host == "localhost" or host.endswith(".localhost")  # RFC 6761: always loopback


@dataclass(frozen=True, slots=True)
class Target:
    """A checked webhook URL, as the POST needs it."""

    scheme: str
    host: str
    """The host as resolved and sent (IDNA-encoded; an IPv6 address without brackets)."""
    port: int
    target: bytes
    """The path and query, percent-encoded."""

    @property
    def origin(self) -> str:
        """Scheme and host (and a port not the default): all that is shown of a receiver."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        port = "" if DEFAULT_PORTS[self.scheme] == self.port else f":{self.port}"
        return f"{self.scheme}://{host}{port}"


PAYLOAD_FIELDS: Final = frozenset(
    {
        "run_id", "thread_id", "assistant_id", "created_at", "updated_at", "metadata", "kwargs",
        "multitask_strategy", "status", "run_started_at", "run_ended_at", "webhook_sent_at",
        "values", "error",
    }
)  # fmt: skip
"""The fields ``webhooks.allowed_fields`` may name: LangGraph Server's payload's."""
ENV_PREFIX: Final = "LG_WEBHOOK_"
"""``webhooks.env_prefix``'s default: the variables a header template may read."""
_TEMPLATE: Final = re.compile(r"\$\{\{\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_TOKEN: Final = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
"""An HTTP header name (RFC 9110's token)."""


def _static_headers(headers: object, prefix: object) -> tuple[tuple[str, str], ...]:
    """``webhooks.headers`` with each ``${{ env.VAR }}`` replaced by the variable, which must
    start with ``env_prefix`` (the allow-list of what a header may carry out) and be set."""
    prefix = ENV_PREFIX if prefix is None else prefix
    if not isinstance(prefix, str) or not prefix:
        raise ValidationError("config: webhooks.env_prefix must be a non-empty string")
    if headers is None:
        return ()
    if not isinstance(headers, dict):
        raise ValidationError("config: webhooks.headers must be an object of strings")
    out = []
    for name, value in headers.items():
        where = f"config: webhooks.headers.{name}"
        if not isinstance(name, str) or not _TOKEN.match(name):
            raise ValidationError(f"{where}: not a header name")
        if name.lower() in ("content-type", "content-length", "host", SIGNATURE_HEADER.lower()):
            raise ValidationError(f"{where}: the service sets this header itself")
        if not isinstance(value, str):
            raise ValidationError(f"{where} must be a string")

        def variable(match: re.Match[str], where: str = where) -> str:
            var = match.group(1)
            if not var.startswith(prefix):
                raise ValidationError(f"{where}: env.{var} does not start with {prefix}")
            if var not in os.environ:
                raise ValidationError(f"{where}: env.{var} is not set")
            return os.environ[var]

        resolved = _TEMPLATE.sub(variable, value)
        if any(c in resolved for c in "\r\n\0"):
            raise ValidationError(f"{where}: a header value holds no line break")
        out.append((name, resolved))
    return tuple(out)


def _allowed_fields(fields: object) -> frozenset[str] | None:
    if fields is None:
        return None
    if not isinstance(fields, list) or not all(isinstance(f, str) for f in fields):
        raise ValidationError("config: webhooks.allowed_fields must be a list of field names")
    unknown = sorted(set(fields) - PAYLOAD_FIELDS)
    if unknown:
        raise ValidationError(f"config: webhooks.allowed_fields: {unknown[0]!r} is not a field")
    return frozenset(fields)


@dataclass(frozen=True, slots=True)
class WebhookPolicy:
    """Which receivers a webhook may name: ``langgraph.json``'s ``webhooks.url`` (D248), with
    LangGraph Server's keys. The defaults refuse every internal receiver."""

    require_https: bool = False
    allowed_domains: tuple[str, ...] = ()
    """Exact hosts, or ``*.example.com`` for its subdomains (not ``example.com`` itself); empty:
    any host the address rules let through."""
    allowed_ports: tuple[int, ...] = ()
    """Empty: any port."""
    max_url_length: int = MAX_URL
    disable_loopback: bool = True
    """False: loopback receivers (``localhost``, 127.0.0.0/8, ::1) are allowed."""
    disable_private_ips: bool = True
    """False: private receivers (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7) are allowed."""
    headers: tuple[tuple[str, str], ...] = ()
    """``webhooks.headers``, their ``${{ env.VAR }}`` templates resolved at start (D311)."""
    allowed_fields: frozenset[str] | None = None
    """``webhooks.allowed_fields``: the payload's only keys (None: all of them)."""

    @classmethod
    def of(cls, webhooks: object) -> WebhookPolicy:
        """The policy of ``langgraph.json``'s ``webhooks`` object (None: the defaults);
        `ValidationError` naming the first wrong key."""
        if webhooks is None:
            return cls()
        if not isinstance(webhooks, dict):
            raise ValidationError("config: webhooks must be an object")
        unknown = sorted(set(webhooks) - {"url", "env_prefix", "headers", "allowed_fields"})
        if unknown:
            raise ValidationError(f"config: webhooks.{unknown[0]} is not a webhooks setting")
        headers = _static_headers(webhooks.get("headers"), webhooks.get("env_prefix"))
        fields = _allowed_fields(webhooks.get("allowed_fields"))
        url = webhooks.get("url")
        if url is None:
            return cls(headers=headers, allowed_fields=fields)
        if not isinstance(url, dict):
            raise ValidationError("config: webhooks.url must be an object")
        known = {f for f in cls.__dataclass_fields__} - {"headers", "allowed_fields"}
        unknown = sorted(set(url) - known)
        if unknown:
            raise ValidationError(f"config: webhooks.url.{unknown[0]} is not a URL policy key")
        flags: dict[str, bool] = {}
        for key in ("require_https", "disable_loopback", "disable_private_ips"):
            value = url.get(key, getattr(cls(), key))
            if not isinstance(value, bool):
                raise ValidationError(f"config: webhooks.url.{key} must be true or false")
            flags[key] = value
        domains = url.get("allowed_domains") or []
        if not isinstance(domains, list) or not all(
            isinstance(d, str) and d.strip(" .*") for d in domains
        ):
            raise ValidationError("config: webhooks.url.allowed_domains must be a list of hosts")
        ports = url.get("allowed_ports") or []
        if not isinstance(ports, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and 0 < p < 65536 for p in ports
        ):
            raise ValidationError("config: webhooks.url.allowed_ports must be a list of ports")
        length = url.get("max_url_length", MAX_URL)
        if not isinstance(length, int) or isinstance(length, bool) or not 10 <= length <= 65536:
            raise ValidationError("config: webhooks.url.max_url_length must be 10..65536")
        return cls(
            allowed_domains=tuple(d.strip().lower().rstrip(".").strip("[]") for d in domains),
            allowed_ports=tuple(ports),
            max_url_length=length,
            headers=headers,
            allowed_fields=fields,
            **flags,
        )

    def sent(self, body: dict[str, Any]) -> dict[str, Any]:
        """The payload ``body`` as posted: only ``allowed_fields`` when they are set."""
        if self.allowed_fields is None:
            return body
        return {k: v for k, v in body.items() if k in self.allowed_fields}

    def allows(self, kind: AddressClass) -> bool:
        if kind == "loopback":
            return not self.disable_loopback
        if kind == "private":
            return not self.disable_private_ips
        return False  # link-local (metadata services), unspecified, multicast, reserved

    def refusal(self, kind: AddressClass) -> str:
        key = {"loopback": "disable_loopback", "private": "disable_private_ips"}.get(kind)
        unless = f" unless langgraph.json's webhooks.url.{key} is false" if key else ""
        return f"{kind} receivers are refused{unless}"

    def target(self, value: str) -> Target:
        """``value`` checked without a lookup (`ValidationError` naming ``webhook``; it never
        repeats the URL, which may hold a secret): every rule but the resolved addresses'."""
        if len(value) > self.max_url_length:
            raise ValidationError(f"webhook: at most {self.max_url_length} characters")
        if any(ord(c) <= 0x20 or ord(c) == 0x7F for c in value):
            raise ValidationError("webhook: no spaces or control characters")
        try:
            url = httpx.URL(value)
            port = url.port
        except (httpx.InvalidURL, ValueError):
            raise ValidationError("webhook: not a valid URL") from None
        if url.scheme not in DEFAULT_PORTS or not url.host:
            raise ValidationError("webhook: an http or https URL with a host")
        authority = re.split(r"[/?#]", value.split("//", 1)[-1], maxsplit=1)[0]
        if url.userinfo or "@" in authority:
            raise ValidationError(
                "webhook: user info (user:password@) is refused; a receiver's secret goes in "
                "its path or query, or use the signature (DURABLE_GRAPH_WEBHOOK_SECRET)"
            )
        if self.require_https and url.scheme != "https":
            raise ValidationError("webhook: must use https (webhooks.url.require_https)")
        port = DEFAULT_PORTS[url.scheme] if port is None else port
        if not 0 < port < 65536:
            raise ValidationError("webhook: not a valid URL (its port)")
        if self.allowed_ports and port not in self.allowed_ports:
            raise ValidationError(f"webhook: port {port} is not allowed (webhooks.url)")
        host = url.raw_host.decode("ascii").lower()
        name = host.rstrip(".")
        if self.allowed_domains and not any(
            name.endswith(d[1:]) if d.startswith("*.") else name == d for d in self.allowed_domains
        ):
            raise ValidationError(f"webhook: host {name} is not an allowed domain (webhooks.url)")
        literal = _literal(host)
        kind = address_class(literal) if literal is not None else None
        if kind is None and _is_localhost(name):
            kind = "loopback"
        if kind is not None and not self.allows(kind):
            raise ValidationError(f"webhook: {name} is a {kind} address: {self.refusal(kind)}")
        return Target(url.scheme, host, port, url.raw_path)

    def check(self, value: object) -> str | None:
        """A run's ``webhook``: None, or an http(s) URL this policy accepts (`target`)."""
        if value is None:
            return None
        if not isinstance(value, str):
            raise ValidationError("webhook: an http or https URL")
        self.target(value)
        return value

    async def addresses(self, target: Target) -> list[str]:
        """Every address ``target``'s host resolves to, each checked (`Refused` if one is not
        allowed: a name with one internal address is an internal receiver)."""
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.run_in_executor(
                _RESOLVER, socket.getaddrinfo, target.host, target.port, 0, socket.SOCK_STREAM
            )
        except OSError as exc:
            raise NotDelivered(f"{target.origin}: the host does not resolve ({exc})") from None
        return self.checked(target, [str(info[4][0]) for info in infos])

    def checked(self, target: Target, resolved: Sequence[str]) -> list[str]:
        """``resolved`` (the addresses of ``target``'s host), each checked, without repeats."""
        found: list[str] = []
        for text in resolved:
            kind = address_class(ipaddress.ip_address(text.split("%", 1)[0]))
            if kind is not None and not self.allows(kind):
                raise Refused(f"{target.origin} resolves to a {kind} address: {self.refusal(kind)}")
            if text not in found:
                found.append(text)
        if not found:
            raise NotDelivered(f"{target.origin}: the host has no address")
        return found


_policy = WebhookPolicy()


def use_policy(policy: WebhookPolicy) -> None:
    """Make ``policy`` the one `check_webhook` applies in this process (``serve`` sets its
    ``langgraph.json``'s before it serves)."""
    global _policy
    _policy = policy


def check_webhook(value: object) -> str | None:
    """A run's ``webhook``: an http(s) URL the process's policy accepts, or None (422 else)."""
    return _policy.check(value)


def delivery_deadline() -> float:
    """Seconds a delivery may take in all: ``DURABLE_GRAPH_WEBHOOK_TIMEOUT`` or the default."""
    given = os.environ.get(DEADLINE_ENV)
    if not given:
        return DEFAULT_DEADLINE
    try:
        seconds = float(given)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds <= MAX_DEADLINE:
        raise ValidationError(f"{DEADLINE_ENV}: seconds, more than 0 and at most {MAX_DEADLINE:g}")
    return seconds


async def submit_delivery(store: AsyncCheckpointer, run: QueueEntry) -> None:
    """Queue the delivery of ``run``'s webhook, if it has one (once a run: by its key)."""
    url = service_part(run).get("webhook")
    if not isinstance(url, str):
        return
    run_id = run_id_of(run.entry_id)
    delivery = {"webhook": url, "entry_id": run.entry_id}
    await store.run_queue.submit(
        Submission(
            f"{PREFIX}{run_id}",
            delivery,
            tenant=run.tenant,
            key=f"{PREFIX}{run_id}",
            kind=KIND,
            max_attempts=MAX_ATTEMPTS,
        )
    )


AsyncHandler = Callable[["AsyncRunContext"], Awaitable[JSON]]


def with_webhooks(graphs: AsyncHandler) -> AsyncHandler:
    """The graph workers' handler: a run is run by ``graphs``, and its delivery submitted when
    this attempt ends it (it returned, or raised for the last time). Deliveries themselves are
    `delivery_worker`'s: a worker with this handler leases `RUN_KINDS` only."""

    async def handler(ctx: AsyncRunContext) -> JSON:
        try:
            output = await graphs(ctx)
        except Exception as exc:
            entry = ctx.entry
            if isinstance(exc, FinalFailure) or len(entry.attempts) >= entry.max_attempts:
                await submit_delivery(ctx.store, entry)
            raise
        await submit_delivery(ctx.store, ctx.entry)
        return output

    return handler


def delivering(policy: WebhookPolicy, deadline: float, *, send: bool = True) -> AsyncHandler:
    """The delivery worker's handler: `deliver` under ``policy``, each within ``deadline``;
    without ``send`` (``langgraph.json``'s ``http.disable_webhooks``), each delivery ends at
    once unsent, as the reference skips the call (D282)."""

    async def handler(ctx: AsyncRunContext) -> JSON:
        if not send:
            url = ctx.input.get("webhook") if isinstance(ctx.input, dict) else None
            shown = origin(url) if isinstance(url, str) else "?"
            log.info("webhooks are disabled (http.disable_webhooks): %s not sent", shown)
            return {"delivered": False, "reason": "http.disable_webhooks"}
        return await deliver(ctx, policy, deadline)

    return handler


def delivery_worker(
    store: AsyncCheckpointer,
    policy: WebhookPolicy,
    deadline: float,
    options: Mapping[str, Any] | None = None,
    *,
    send: bool = True,
) -> AsyncWorker:
    """The worker of this process's deliveries: kind ``webhook`` only, `SLOTS` at once, beside
    the graph workers (``options``: theirs, but its own kinds, slots and holder name); ``send``:
    `delivering`'s."""
    from durable_graph.worker.aio import AsyncWorker

    given = dict(options or {})
    holder = given.pop("holder", None)
    given.pop("kinds", None)
    given.pop("concurrency", None)
    if holder is not None:
        given["holder"] = f"{holder}:webhooks"
    return AsyncWorker(
        store, delivering(policy, deadline, send=send), kinds=[KIND], concurrency=SLOTS, **given
    )


def run_kinds(kinds: Sequence[str] | None) -> tuple[list[str] | None, bool]:
    """A graph worker's kinds when deliveries run beside it, and whether they do: ``kinds``
    (None: runs and deliveries) without ``webhook``, None when only deliveries are asked."""
    if kinds is None:
        return list(RUN_KINDS), True
    runs = [k for k in kinds if k != KIND]
    return runs or None, KIND in kinds


async def deliver(
    ctx: AsyncRunContext, policy: WebhookPolicy | None = None, deadline: float | None = None
) -> JSON:
    """One delivery attempt: POST the ended run to its webhook (`NotDelivered` to retry,
    `Refused` to fail at once)."""
    given = ctx.input if isinstance(ctx.input, dict) else {}
    url, entry_id = given.get("webhook"), given.get("entry_id")
    if not isinstance(url, str) or not isinstance(entry_id, int):
        raise ValidationError("input: a webhook delivery names its webhook and run")
    policy = _policy if policy is None else policy
    deadline = delivery_deadline() if deadline is None else deadline
    try:  # checked again: the policy may have changed since the run was made
        target = policy.target(url)
    except ValidationError as exc:
        raise Refused(f"{origin(url)}: {exc}") from None
    queue = ctx.store.run_queue
    run = await queue.entry(entry_id, tenant=ctx.entry.tenant)
    if run is not None and not run.closed:
        run = await queue.await_closed(entry_id, CLOSE_WAIT, tenant=ctx.entry.tenant)
    if run is None:
        return {"delivered": False, "reason": "the run is gone"}
    if not run.closed:
        raise NotDelivered(f"run {run_id_of(entry_id)} has not ended yet")
    body = json.dumps(policy.sent(payload(run)), separators=(",", ":"), default=str).encode()
    headers = {**dict(policy.headers), "Content-Type": "application/json", **signature(body)}
    try:
        async with asyncio.timeout(deadline):
            status = await _post(policy, target, body, headers)
    except TimeoutError:
        raise NotDelivered(f"{target.origin}: no answer within {deadline:g} s") from None
    if not 200 <= status < 300:
        raise NotDelivered(f"{target.origin} answered {status}")
    return {"delivered": True, "status": status}


_NETWORK_ERRORS: Final = (
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.TimeoutException,
    httpcore.UnsupportedProtocol,
    OSError,
)


async def _post(
    policy: WebhookPolicy, target: Target, body: bytes, headers: Mapping[str, str]
) -> int:
    """POST ``body`` to one of the checked addresses of ``target``'s host (the next on a refused
    connection); its status. The answer's body is never read: only its status line and headers
    (httpcore bounds them at 100 KiB), and the connection is closed."""
    addresses = await policy.addresses(target)
    sent = [
        (b"Host", target.origin.split("://", 1)[1].encode()),
        (b"User-Agent", b"durable-graph-webhook"),
        (b"Content-Length", str(len(body)).encode()),
        *((k.encode(), v.encode()) for k, v in headers.items()),
    ]
    # TLS checks the certificate against the host's name, not the address connected to.
    extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
    failure = "no address"
    async with httpcore.AsyncConnectionPool(max_connections=1, retries=0) as pool:
        for address in addresses:
            url = httpcore.URL(
                scheme=target.scheme.encode(),
                host=address.encode(),
                port=target.port,
                target=target.target,
            )
            try:
                async with pool.stream(
                    "POST", url, headers=sent, content=body, extensions=extensions
                ) as answer:
                    return answer.status
            except httpcore.ConnectError as exc:
                failure = f"ConnectError: {exc}"
            except _NETWORK_ERRORS as exc:
                raise NotDelivered(f"{target.origin}: {type(exc).__name__}: {exc}") from None
    raise NotDelivered(f"{target.origin}: cannot connect ({failure})")


def payload(run: QueueEntry) -> dict[str, Any]:
    """What LangGraph Server posts for an ended run."""
    now = datetime.now(UTC)
    body: dict[str, Any] = {**run_json(run, now), "webhook_sent_at": now.isoformat()}
    outcome = run.outcome
    output = outcome.output if isinstance(outcome, Completed) else None
    body["values"] = message_dict(output.get("values")) if isinstance(output, dict) else None
    if isinstance(outcome, Failed):
        body["error"] = client_error(outcome.error)
    return body


def signature(body: bytes, secret: str | None = None, at: int | None = None) -> dict[str, str]:
    """The signature header of ``body`` (none without a secret)."""
    key = secret if secret is not None else os.environ.get(SECRET_ENV)
    if not key:
        return {}
    stamp = str(int(time.time()) if at is None else at)
    mac = hmac.new(key.encode(), stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return {SIGNATURE_HEADER: f"t={stamp},v1={mac}"}


def origin(url: str) -> str:
    """A URL's scheme and host, all that is shown of a receiver: its path and query may hold a
    secret of the receiver's, and its user info is never shown (nor accepted)."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname or "?", parts.port
    except ValueError:
        return "an invalid URL"
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}" + ("" if port is None else f":{port}")
