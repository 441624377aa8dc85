"""Two network namespaces joined by a veth pair: two "nodes" on one machine for multi-node tests.

    with two_nodes() as nodes:      # nodes[0].addr == "10.77.0.1", nodes[1].addr == "10.77.0.2"
        nodes[0].popen(["bash", "-c", cmd0]) ...

Only `lo` and the veth end live in each namespace, so traffic goes only between the two addresses and
loopback. Needs root and `ip`; `netns_unavailable()` says why not, for a pytest skip.
The namespaces and the veth pair are removed on exit, also after a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

SUBNET = "10.77.0"
IFNAME = "ddveth"


@dataclass
class Node:
    ns: str
    ifname: str
    addr: str

    def cmd(self, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.ns, *argv]


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def netns_unavailable() -> str | None:
    """None when two namespaces can be made here, else the reason."""
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    if os.geteuid() != 0:
        return "creating network namespaces needs root"
    probe = f"ddprobe{os.getpid()}"
    res = _ip("netns", "add", probe, check=False)
    if res.returncode != 0:
        return f"`ip netns add` fails here: {res.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def cleanup(tag: str) -> None:
    for i in (0, 1):
        _ip("netns", "del", f"dd{tag}n{i}", check=False)
    _ip("link", "del", f"{IFNAME}{tag}a", check=False)


@contextmanager
def two_nodes(tag: str | None = None) -> Iterator[list[Node]]:
    """Create namespaces dd<tag>n0 / dd<tag>n1 with 10.77.0.1/24 and 10.77.0.2/24 on a veth pair."""
    tag = tag or str(os.getpid() % 100000)
    cleanup(tag)
    nodes = [Node(f"dd{tag}n{i}", IFNAME, f"{SUBNET}.{i + 1}") for i in (0, 1)]
    try:
        for n in nodes:
            _ip("netns", "add", n.ns)
            _ip("-n", n.ns, "link", "set", "lo", "up")
        a, b = f"{IFNAME}{tag}a", f"{IFNAME}{tag}b"
        _ip("link", "add", a, "type", "veth", "peer", "name", b)
        for end, n in zip((a, b), nodes):
            _ip("link", "set", end, "netns", n.ns)
            _ip("-n", n.ns, "link", "set", end, "name", n.ifname)
            _ip("-n", n.ns, "addr", "add", f"{n.addr}/24", "dev", n.ifname)
            _ip("-n", n.ns, "link", "set", n.ifname, "up")
        yield nodes
    finally:
        cleanup(tag)
