"""A network namespace joined to the host by a veth pair, for partitioning one chaos worker.

Addresses are private (10.213.N.4i/30 for the i-th namespace of a process) and exist only on the
veth pair created here: the host end gets ``.4i+1`` (PostgreSQL listens there too), the namespace
end ``.4i+2``. `cut` sets the host end
down (the worker's packets go nowhere), `heal` sets it up again. Nothing outside the pair is
touched; `teardown` removes the pair and the namespace.
"""

from __future__ import annotations

import os
import shutil
import subprocess


def unavailable_reason() -> str | None:
    """Why a namespace cannot be made here (None when it can)."""
    if os.geteuid() != 0:
        return "not root: network namespaces need CAP_NET_ADMIN"
    if shutil.which("ip") is None:
        return "`ip` (iproute2) is not installed"
    probe = subprocess.run(["ip", "netns", "list"], capture_output=True, check=False)
    if probe.returncode != 0:
        return f"`ip netns` is unavailable: {probe.stderr.decode(errors='replace').strip()}"
    return None


class Netns:
    def __init__(self, index: int = 0) -> None:
        """The ``index``-th namespace of this process (0..62): a "machine" of its own."""
        n = os.getpid() % 200 + 20
        pid = os.getpid() % 100000
        suffix = "" if index == 0 else f"x{index}"  # interface names: at most 15 characters
        self.name = f"dgchaos{os.getpid()}{suffix}"
        self.host_if = f"dgh{pid}{suffix}"
        self.ns_if = f"dgn{pid}{suffix}"
        self.host_ip = f"10.213.{n}.{4 * index + 1}"
        self.ns_ip = f"10.213.{n}.{4 * index + 2}"
        self.subnet = f"10.213.{n}.{4 * index}/30"
        self.fleet_subnet = f"10.213.{n}.0/24"
        """Every namespace this process can make (one pg_hba line admits them all)."""
        self._up = False

    def _ip(self, *args: str, ns: bool = False) -> None:
        cmd = ["ip", "netns", "exec", self.name, "ip", *args] if ns else ["ip", *args]
        subprocess.run(cmd, check=True, capture_output=True)

    def setup(self) -> None:
        self._ip("netns", "add", self.name)
        self._up = True
        self._ip("link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
        self._ip("link", "set", self.ns_if, "netns", self.name)
        self._ip("addr", "add", f"{self.host_ip}/30", "dev", self.host_if)
        self._ip("link", "set", self.host_if, "up")
        self._ip("addr", "add", f"{self.ns_ip}/30", "dev", self.ns_if, ns=True)
        self._ip("link", "set", self.ns_if, "up", ns=True)
        self._ip("link", "set", "lo", "up", ns=True)

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` run inside the namespace."""
        return ["ip", "netns", "exec", self.name, *argv]

    def cut(self) -> None:
        self._ip("link", "set", self.host_if, "down")

    def heal(self) -> None:
        self._ip("link", "set", self.host_if, "up")

    def teardown(self) -> None:
        if not self._up:
            return
        self._up = False
        subprocess.run(["ip", "link", "del", self.host_if], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True, check=False)
