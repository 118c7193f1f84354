"""The graph across two hosts, as the scaling-out docs set it up: discovery only by unicast to
``ROS_STATIC_PEERS`` (``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` on each host).

Two Linux network namespaces joined by a virtual Ethernet pair stand in for two machines on a
LAN: each has its own loopback and one address, so nothing reaches the other except through
the link, and their DDS participants meet only if each names the other as a static peer. Host
A runs the arm's sim node and safety node (as ``lang2policy sim`` starts them); host B a
commander that streams a motion on ``joint_command`` as the MPC controller does. With the
peers set the arm moves under host B's commands through host A's safety node; without them
host B sees nothing of the arm. (One side naming the other is enough: a participant answers
the announcements it receives, so the test's negative case names no peer on either side.)
Needs root (``ip netns``); skipped elsewhere.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("rclpy")

from support.processes import interrupt_all
from support.ros import ros_env

from lang2policy.graph.node_command import node_command, select
from lang2policy.graph.nodes import build
from lang2policy.graph.options import GraphOptions

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[2]
DOMAIN_ID = 1 + (os.getpid() + 199) % 200
TAG = os.getpid() % 100000
HOSTS = {"a": (f"l2pA{TAG}", f"l2pa{TAG}", "10.231.0.1"),
         "b": (f"l2pB{TAG}", f"l2pb{TAG}", "10.231.0.2")}  # fmt: skip


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


def can_make_hosts() -> str | None:
    """Why two network namespaces cannot be made here, or None."""
    if shutil.which("ip") is None:
        return "no 'ip' command (iproute2)"
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = f"l2pprobe{TAG}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "delete", probe], capture_output=True)
    return None


@pytest.fixture(scope="module")
def hosts():
    """Two namespaces, each with loopback up and one end of a veth pair, on 10.231.0.0/24."""
    reason = can_make_hosts()
    if reason:
        pytest.skip(reason)
    (ns_a, link_a, addr_a), (ns_b, link_b, addr_b) = HOSTS["a"], HOSTS["b"]
    ip("netns", "add", ns_a)
    ip("netns", "add", ns_b)
    try:
        ip("link", "add", link_a, "type", "veth", "peer", "name", link_b)
        for ns, link, addr in ((ns_a, link_a, addr_a), (ns_b, link_b, addr_b)):
            ip("link", "set", link, "netns", ns)
            ip("-n", ns, "addr", "add", f"{addr}/24", "dev", link)
            ip("-n", ns, "link", "set", link, "up")
            ip("-n", ns, "link", "set", "lo", "up")
        yield
    finally:
        ip("netns", "delete", ns_a)  # deletes the veth pair with it
        ip("netns", "delete", ns_b)


def host_env(peer: str | None) -> dict[str, str]:
    env = dict(os.environ, **ros_env(DOMAIN_ID))
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "test")])
    env.pop("ROS_STATIC_PEERS", None)
    if peer:
        env["ROS_STATIC_PEERS"] = peer
    return env


@contextlib.contextmanager
def arm_on_host_a(peer: str | None) -> Iterator[None]:
    """The arm's sim and safety nodes on host A (``peer``: its static peer, None: none)."""
    specs = select(build(GraphOptions(terminal=False, cameras=False)), "sim,safety")
    processes = [
        subprocess.Popen(["ip", "netns", "exec", HOSTS["a"][0], *node_command(spec)],
                         env=host_env(peer), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
        for spec in specs
    ]  # fmt: skip
    try:
        yield
    finally:
        interrupt_all(processes)


def command_from(host: str, peer: str | None, wait: float, by: float = 0.6) -> dict:
    """The commander on ``host`` (``peer``: its static peer, None: none); its report."""
    done = subprocess.run(
        ["ip", "netns", "exec", HOSTS[host][0], sys.executable, "-m",
         "support.remote_commander", "--wait", str(wait), "--by", str(by)],
        env=host_env(peer), capture_output=True, text=True, timeout=wait + 60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_without_static_peers_the_other_host_sees_nothing(hosts):
    with arm_on_host_a(peer=None):
        on_its_host = command_from("a", None, wait=60.0, by=0.0)  # the arm is up
        assert on_its_host["safety"] == "ok", on_its_host
        assert command_from("b", None, wait=8.0) == {"safety": None, "seen_states": 0}


def test_with_static_peers_a_commander_on_another_host_moves_the_arm(hosts):
    with arm_on_host_a(peer=HOSTS["b"][2]):
        report = command_from("b", HOSTS["a"][2], wait=60.0)
    assert report["safety"] == "ok", report
    assert report["seen_states"] > 50  # 5 s of the sim's joint states
    moved = abs(report["pan_after"] - report["pan_before"])
    assert moved > 0.4, report  # 4 s at 0.5 rad/s, 0.6 rad asked
