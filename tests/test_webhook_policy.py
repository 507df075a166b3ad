"""The webhooks' URL policy (``langgraph.json``'s ``webhooks.url``, D248) without a server: which
addresses are internal, what each key refuses, what a bad policy is told. The served behaviour
(422 at create, refusal at delivery) is tests/test_service_webhooks.py's."""

from __future__ import annotations

import asyncio
import ipaddress
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from durable_graph.core.errors import ValidationError
from durable_graph.service.webhooks import (
    KIND,
    RUN_KINDS,
    Refused,
    Target,
    WebhookPolicy,
    _post,
    address_class,
    origin,
    run_kinds,
)


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("127.9.9.9", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("64:ff9b::7f00:1", "loopback"),  # NAT64 of 127.0.0.1
        ("2002:7f00:1::", "loopback"),  # 6to4 of 127.0.0.1
        ("10.1.2.3", "private"),
        ("172.31.255.255", "private"),
        ("192.168.0.1", "private"),
        ("100.64.0.1", "private"),
        ("fd12::1", "private"),
        ("::ffff:10.0.0.1", "private"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("192.0.2.1", "reserved"),  # documentation
        ("0.0.0.1", "reserved"),
        ("93.184.216.34", None),
        ("2606:2800:220:1::", None),
    ],
)
def test_address_classes(address: str, kind: str | None) -> None:
    assert address_class(ipaddress.ip_address(address)) == kind


def _refused(policy: WebhookPolicy, url: str, says: str) -> None:
    with pytest.raises(ValidationError, match=says) as caught:
        policy.check(url)
    assert str(caught.value).startswith("webhook:")
    assert "hunter2" not in str(caught.value)


def test_the_default_policy_refuses_internal_hosts_without_a_lookup() -> None:
    policy = WebhookPolicy()
    for url, kind in [
        ("http://127.1/", "loopback"),
        ("http://0x7f.0.0.1/", "loopback"),
        ("http://2130706433/", "loopback"),
        ("http://LOCALHOST./", "loopback"),
        ("http://a.b.localhost:8080/", "loopback"),
        ("http://[::ffff:7f00:1]/", "loopback"),
        ("http://10.0.0.1/", "private"),
        ("http://[fe80::1%25eth0]/", "link-local"),
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ]:
        _refused(policy, url, kind)
    assert policy.check("https://hooks.example.com/x?k=1") == "https://hooks.example.com/x?k=1"
    assert policy.check(None) is None


def test_malformed_urls_and_user_info_are_refused() -> None:
    policy = WebhookPolicy()
    _refused(policy, "http://ada:hunter2@hooks.example.com/", "user info")
    _refused(policy, "http://ada@hooks.example.com/", "user info")
    _refused(policy, "ftp://hooks.example.com/", "http or https")
    _refused(policy, "/relative/path", "http or https")
    _refused(policy, "http:///nohost", "http or https|valid URL")
    _refused(policy, "http://hooks.example.com:99999/", "valid URL")
    _refused(policy, "http://hooks.example.com/a b", "spaces")
    _refused(policy, "http://hooks.example.com/\x00", "control")
    _refused(policy, "https://hooks.example.com/" + "a" * 2048, "at most 2048")
    with pytest.raises(ValidationError, match="webhook"):
        policy.check(42)


def test_each_policy_key() -> None:
    https = WebhookPolicy.of({"url": {"require_https": True}})
    _refused(https, "http://hooks.example.com/", "https")
    assert https.check("https://hooks.example.com/")

    ports = WebhookPolicy.of({"url": {"allowed_ports": [443, 8443]}})
    _refused(ports, "http://hooks.example.com/", "port 80")
    assert ports.check("https://hooks.example.com/") and ports.check("http://h.example.com:8443/")

    domains = WebhookPolicy.of({"url": {"allowed_domains": ["hooks.example.com", "*.corp.test"]}})
    assert domains.check("https://hooks.example.com/") and domains.check("https://a.b.corp.test/")
    _refused(domains, "https://corp.test/", "not an allowed domain")  # the apex is not *.
    _refused(domains, "https://evilcorp.test/", "not an allowed domain")
    _refused(domains, "https://example.com/", "not an allowed domain")

    short = WebhookPolicy.of({"url": {"max_url_length": 30}})
    _refused(short, "https://hooks.example.com/abcdef", "at most 30")

    loopback = WebhookPolicy.of({"url": {"disable_loopback": False}})
    assert loopback.check("http://127.0.0.1:9/") and loopback.check("http://localhost/")
    _refused(loopback, "http://10.0.0.1/", "private")
    private = WebhookPolicy.of({"url": {"disable_private_ips": False}})
    assert private.check("http://10.0.0.1/") and private.check("http://[fd00::1]/")
    _refused(private, "http://127.0.0.1/", "loopback")
    everything = WebhookPolicy.of(
        {
            "env_prefix": "LG_WEBHOOK_",
            "url": {"disable_loopback": False, "disable_private_ips": False},
        }
    )
    for always in ("http://169.254.169.254/", "http://0.0.0.0/", "http://224.0.0.1/"):
        _refused(everything, always, "refused")


@pytest.mark.parametrize(
    ("webhooks", "says"),
    [
        ([], "webhooks must be an object"),
        ({"url": []}, "webhooks.url must be an object"),
        ({"headers": ["x"]}, "webhooks.headers must be an object"),
        ({"headers": {"x y": "1"}}, "webhooks.headers.x y: not a header name"),
        ({"headers": {"Content-Type": "text/plain"}}, "sets this header itself"),
        ({"headers": {"x": 1}}, "webhooks.headers.x must be a string"),
        ({"headers": {"x": "${{ env.HOME }}"}}, "env.HOME does not start with LG_WEBHOOK_"),
        (
            {"headers": {"x": "${{ env.LG_WEBHOOK_UNSET_HERE }}"}},
            "LG_WEBHOOK_UNSET_HERE is not set",
        ),
        ({"env_prefix": ""}, "webhooks.env_prefix must be a non-empty string"),
        ({"allowed_fields": "run_id"}, "allowed_fields must be a list of field names"),
        ({"allowed_fields": ["run_id", "secrets"]}, "'secrets' is not a field"),
        ({"urls": {}}, "webhooks.urls is not a webhooks setting"),
        ({"url": {"disable_loopbak": False}}, "disable_loopbak is not a URL policy key"),
        ({"url": {"disable_loopback": "false"}}, "disable_loopback must be true or false"),
        ({"url": {"allowed_domains": "example.com"}}, "allowed_domains must be a list"),
        ({"url": {"allowed_domains": ["*."]}}, "allowed_domains must be a list"),
        ({"url": {"allowed_ports": [0]}}, "allowed_ports must be a list of ports"),
        ({"url": {"allowed_ports": [True]}}, "allowed_ports must be a list of ports"),
        ({"url": {"max_url_length": 0}}, "max_url_length must be"),
    ],
)
def test_a_bad_policy_is_named(webhooks: object, says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        WebhookPolicy.of(webhooks)


def test_static_headers_resolve_their_templates_from_allowed_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``webhooks.headers`` as LangGraph Server reads them (D311): ``${{ env.VAR }}`` replaced at
    start, ``VAR`` only under ``env_prefix``; mixed literals and several templates allowed."""
    monkeypatch.setenv("LG_WEBHOOK_TOKEN", "s3cret")
    monkeypatch.setenv("TEAM_HOOK_ID", "7")
    policy = WebhookPolicy.of(
        {"headers": {"Authorization": "Bearer ${{ env.LG_WEBHOOK_TOKEN }}", "X-Plain": "a"}}
    )
    assert policy.headers == (("Authorization", "Bearer s3cret"), ("X-Plain", "a"))
    prefixed = WebhookPolicy.of(
        {
            "env_prefix": "TEAM_",
            "headers": {"X-Id": "${{env.TEAM_HOOK_ID}}-${{ env.TEAM_HOOK_ID }}"},
        }
    )
    assert prefixed.headers == (("X-Id", "7-7"),)
    with pytest.raises(ValidationError, match="does not start with TEAM_"):
        WebhookPolicy.of({"env_prefix": "TEAM_", "headers": {"x": "${{ env.LG_WEBHOOK_TOKEN }}"}})


def test_allowed_fields_keep_only_those_of_the_payload() -> None:
    policy = WebhookPolicy.of({"allowed_fields": ["run_id", "status"]})
    sent = policy.sent({"run_id": "r", "status": "success", "values": {"secret": 1}})
    assert sent == {"run_id": "r", "status": "success"}
    assert WebhookPolicy().sent({"values": 1}) == {"values": 1}


def test_every_resolved_address_is_checked() -> None:
    """``localhost`` resolves to loopback here: refused at delivery by its address too (the
    policy's name rule aside), and allowed by a policy that allows loopback."""
    strict, loose = WebhookPolicy(), WebhookPolicy(disable_loopback=False)
    target = loose.target("http://localhost:9/hook")
    with pytest.raises(Refused, match="loopback"):
        asyncio.run(strict.addresses(target))
    found = asyncio.run(loose.addresses(target))
    assert found and all(address_class(ipaddress.ip_address(a)) == "loopback" for a in found)


def test_origin_shows_scheme_and_host_only() -> None:
    assert (
        origin("http://ada:hunter2@hooks.example.com:8080/p?k=s") == "http://hooks.example.com:8080"
    )
    assert origin("https://[::1]/x") == "https://[::1]"
    assert WebhookPolicy().target("https://Hooks.Example.com:443/p?q").origin == (
        "https://hooks.example.com"
    )


def test_graph_workers_lease_runs_and_deliveries_run_beside_them() -> None:
    assert run_kinds(None) == (list(RUN_KINDS), True)
    assert run_kinds(["default"]) == (["default"], False)
    assert run_kinds([KIND]) == (None, True)
    assert run_kinds(["default", KIND, "other"]) == (["default", "other"], True)


class _Pinned(WebhookPolicy):
    """A policy whose resolver answers 127.0.0.1 for any host (as a rebinding DNS might, once)."""

    async def addresses(self, target: Target) -> list[str]:
        return ["127.0.0.1"]


def test_the_post_goes_to_the_checked_address_with_the_hosts_name() -> None:
    """``.invalid`` never resolves: the POST reaches the receiver only through the address the
    policy checked, with the URL's host in ``Host``."""
    got: list[tuple[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            got.append((self.headers["Host"], self.path))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        policy = _Pinned(allowed_domains=("hooks.invalid",))
        target = policy.target(f"http://hooks.invalid:{port}/hook?k=v")
        assert asyncio.run(_post(policy, target, b"{}", {})) == 204
        assert got == [(f"hooks.invalid:{port}", "/hook?k=v")]
    finally:
        server.shutdown()
        server.server_close()


def test_one_internal_address_among_public_ones_refuses_the_receiver() -> None:
    strict, loose = WebhookPolicy(), WebhookPolicy(disable_private_ips=False)
    target = strict.target("https://hooks.example.com/")
    public = ["93.184.216.34", "2606:2800:220:1::"]
    assert strict.checked(target, [*public, public[0]]) == public
    for internal in ("10.0.0.1", "169.254.169.254", "::1", "::ffff:192.168.0.1"):
        with pytest.raises(Refused, match="resolves to a"):
            strict.checked(target, [*public, internal])
    assert loose.checked(target, [*public, "10.0.0.1"]) == [*public, "10.0.0.1"]
    with pytest.raises(Refused, match="link-local"):
        loose.checked(target, ["10.0.0.1", "169.254.169.254"])
