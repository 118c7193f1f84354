"""A fleet of two SO-101 arms in one ROS graph, each under its own namespace (``/arm1``,
``/arm2``), as ``lang2policy sim --arms arm1,arm2`` starts it (issue 37).

Each arm's sim node and safety node run in processes of their own, started with the command
lines of the graph description (``graph.nodes.build`` with ``arms``, ``node_command``: the
``__ns`` remap and the clock remap ``lang2policy sim`` uses); arm2's safety node gets a limits
file with a keep-out zone arm1's does not have. The terminal node runs with ``arms:=arm1,arm2``
and is fed lines on stdin, as a person would type them. A probe in the root namespace plays
both arms' commanders (0.1 s chunks of a motion on ``/<arm>/lang2policy/joint_command`` every
20 ms, as the MPC controller sends them) and judges each arm from its ``/<arm>/joint_states``.
All on loopback, on a domain of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

os.environ.setdefault("MUJOCO_GL", "egl")

rclpy = pytest.importorskip("rclpy")

from builtin_interfaces.msg import Duration  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from support.processes import interrupt_all  # noqa: E402
from support.ros import ros_env, spinning  # noqa: E402
from support.waiting import wait_for  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

from lang2policy.graph import topics  # noqa: E402
from lang2policy.graph.node_command import node_command, select  # noqa: E402
from lang2policy.graph.nodes import build  # noqa: E402
from lang2policy.graph.options import GraphOptions  # noqa: E402
from lang2policy.ros import convert  # noqa: E402
from lang2policy.safety.config import default_config_path  # noqa: E402
from lang2policy.scene.world import World  # noqa: E402

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[2]
DOMAIN_ID = 1 + (os.getpid() + 151) % 200
ARMS = ("arm1", "arm2")
CHUNK_POINTS, CHUNK_DT = 5, 0.02
SPEED = 0.6  # rad/s of shoulder_pan while streaming
# arm2's own keep-out zone: where the tool passes with shoulder_pan near 1.1 rad (the other
# joints at home); arm1's safety node has no such zone.
ZONE = {"min": [0.08, -0.16, 0.0], "max": [0.12, -0.115, 0.2]}
STILL = 0.01  # rad a held or untouched arm's shoulder_pan may drift
GLOBAL_NAMES = {"/rosout", "/parameter_events"}  # every node's, in any namespace


class Arm:
    """One arm as the probe sees it: its joint states, safety lines, command publisher."""

    def __init__(self, node, name: str, home: dict[str, float], names: tuple[str, ...]) -> None:
        self.name, self.home, self.names = name, home, names
        self.lock = threading.Lock()
        self.states: list[tuple[float, dict[str, float]]] = []
        self.safety: list[dict] = []
        self.instructions: list[str] = []
        self.profile = None  # callable(sim time) -> shoulder_pan, or None: not streaming
        node.create_subscription(JointState, self.topic(topics.JOINT_STATES), self._on_state, 50)
        node.create_subscription(String, self.topic(topics.SAFETY), self._on_safety, 50)
        node.create_subscription(String, self.topic(topics.INSTRUCTION), self._on_text, 10)
        self.command = node.create_publisher(JointTrajectory, self.topic(topics.JOINT_COMMAND), 10)

    def topic(self, endpoint: topics.Endpoint) -> str:
        return endpoint.in_namespace(self.name)

    def _on_state(self, msg: JointState) -> None:
        entry = (
            convert.to_seconds(msg.header.stamp),
            dict(zip(msg.name, msg.position, strict=True)),
        )
        with self.lock:
            self.states.append(entry)

    def _on_safety(self, msg: String) -> None:
        with self.lock:
            self.safety.append(json.loads(msg.data))

    def _on_text(self, msg: String) -> None:
        with self.lock:
            self.instructions.append(msg.data)

    def now(self) -> float:
        with self.lock:
            return self.states[-1][0] if self.states else 0.0

    def pan(self) -> float:
        with self.lock:
            return self.states[-1][1]["shoulder_pan"]

    def wait_sim(self, seconds: float, timeout: float = 30.0) -> None:
        target = self.now() + seconds
        wait_for(lambda: self.now() >= target, timeout, f"{self.name}'s sim time {target:.1f}")

    def wait_until(self, predicate, sim_seconds: float, what: str) -> None:
        """Until ``predicate()`` holds, for at most ``sim_seconds`` of this arm's sim time (a
        loaded machine slows the sim, not the test's verdict); then it must hold."""
        limit = self.now() + sim_seconds
        wait_for(lambda: predicate() or self.now() >= limit, 60.0, f"{self.name}: {what}")
        assert predicate(), f"{self.name}: {what} not within {sim_seconds} s; pan {self.pan():.3f}"

    def wait_at_rest(self, sim_seconds: float = 3.0) -> None:
        """Until shoulder_pan moves less than 2 mrad in 0.2 s of sim time (a held arm brakes,
        and its servo settles), for at most ``sim_seconds``."""
        limit = self.now() + sim_seconds
        while self.now() < limit:
            before = self.pan()
            self.wait_sim(0.2)
            if abs(self.pan() - before) < 0.002:
                return
        raise AssertionError(f"{self.name} still moving after {sim_seconds} s; pan {self.pan()}")

    def ramp_to(self, limit: float, speed: float = SPEED) -> None:
        """Stream shoulder_pan from where it is towards ``limit`` at ``speed`` rad/s."""
        start, begin = self.pan(), self.now()
        step = speed if limit >= start else -speed

        def profile(t: float) -> float:
            pan = start + step * max(t - begin, 0.0)
            return min(pan, limit) if step > 0 else max(pan, limit)

        self.profile = profile

    def chunk(self) -> JointTrajectory | None:
        profile = self.profile
        if profile is None or not self.states:
            return None
        now = self.now()
        msg = JointTrajectory(joint_names=list(self.names))
        for k in range(1, CHUNK_POINTS + 1):
            pan = profile(now + k * CHUNK_DT)
            values = [pan if n == "shoulder_pan" else self.home[n] for n in self.names]
            msg.points.append(
                JointTrajectoryPoint(
                    positions=[float(v) for v in values],
                    time_from_start=Duration(nanosec=round(k * CHUNK_DT * 1e9)),
                )
            )
        return msg

    def last_safety(self) -> dict:
        with self.lock:
            return self.safety[-1] if self.safety else {}


class Probe:
    """Both arms' commanders and observers, in one node in the root namespace."""

    def __init__(self, context, world: World) -> None:
        self.node = rclpy.create_node("fleet_probe", context=context)
        home = {**dict(zip(world.arm.joint_names, world.arm.home, strict=True)), "gripper": 1.0}
        self.arms = {a: Arm(self.node, a, home, tuple(world.arm.action_names)) for a in ARMS}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._stream, daemon=True)
        self._thread.start()

    def _stream(self) -> None:
        while not self._stop.wait(CHUNK_DT):
            for arm in self.arms.values():
                msg = arm.chunk()
                if msg is not None:
                    arm.command.publish(msg)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


class Terminal:
    """The terminal node with ``arms:=arm1,arm2``, fed lines as typed, its output collected."""

    def __init__(self, env: dict[str, str]) -> None:
        command = [
            sys.executable,
            "-m",
            "lang2policy.ros.terminal_node",
            "--non-interactive",
            "--no-wait",
            "--ros-args",
            "-p",
            "arms:=arm1,arm2",
            "-p",
            "discovery_timeout:=1.0",
            "-p",
            "service_timeout:=5.0",
        ]
        self.process = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def type(self, line: str, answer: str, timeout: float = 20.0) -> str:
        """Send ``line``; the first output line after it that contains ``answer``."""
        since = len(self.lines)
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        return wait_for(
            lambda: next((x for x in self.lines[since:] if answer in x), None),
            timeout,
            f"{answer!r} after {line!r} (got {self.lines[since:]})",
        )

    def close(self) -> None:
        self.process.stdin.close()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def fleet_specs(zone_config: Path):
    """The fleet's sim and safety nodes as ``lang2policy sim --arms arm1,arm2 --params FILE``
    starts them: the file gives arm2's safety node its own limits file, and every safety node
    a longer state timeout (stalls of a busy 2-core machine are not the point)."""
    params = zone_config.with_name("fleet_params.yaml")
    params.write_text(yaml.safe_dump({
        "/arm2/lang2policy_safety": {"ros__parameters": {"config": str(zone_config)}},
        "/**/lang2policy_safety": {"ros__parameters": {"state_timeout": 2.0}},
    }))  # fmt: skip
    options = GraphOptions(arms=ARMS, terminal=False, cameras=False, params=str(params))
    return select(build(options), "sim,safety")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, world):
    config = yaml.safe_load(default_config_path().read_text())
    config["so101"]["keep_out"]["arm2_fixture"] = ZONE
    zone_config = tmp_path_factory.mktemp("fleet") / "safety_arm2.yaml"
    zone_config.write_text(yaml.safe_dump(config))
    env = dict(os.environ, **ros_env(DOMAIN_ID))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    specs = fleet_specs(zone_config)
    processes = [
        subprocess.Popen(
            node_command(s), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        for s in specs
    ]
    terminal = None
    try:
        with pytest.MonkeyPatch.context() as mp:
            for key, value in ros_env(DOMAIN_ID).items():
                mp.setenv(key, value)
            context = rclpy.Context()
            rclpy.init(context=context)
            probe = Probe(context, world)
            with spinning(context, [probe.node]):
                for arm in probe.arms.values():
                    wait_for(lambda a=arm: a.states, 60.0, f"{arm.name}'s joint states")
                    wait_for(
                        lambda a=arm: a.last_safety().get("state") == "ok",
                        60.0,
                        f"{arm.name}'s safety node ok",
                    )
                terminal = Terminal(env)
                wait_for(
                    lambda: any("a fleet of 2 arms" in x for x in terminal.lines),
                    30.0,
                    "the terminal",
                )
                try:
                    yield probe, terminal, specs
                finally:
                    probe.close()
    finally:
        if terminal is not None:
            terminal.close()
        interrupt_all(processes)


def test_two_arms_each_under_its_namespace_move_stop_and_keep_out_on_their_own(fleet):
    probe, terminal, specs = fleet
    arm1, arm2 = probe.arms["arm1"], probe.arms["arm2"]

    # Every topic and service of each arm's nodes is under that arm's namespace; no /clock.
    graph = probe.node
    for spec in specs:
        where = f"/{spec.namespace}/"
        names = [
            name
            for get in (
                graph.get_publisher_names_and_types_by_node,
                graph.get_subscriber_names_and_types_by_node,
                graph.get_service_names_and_types_by_node,
            )
            for name, _ in get(spec.name, f"/{spec.namespace}")
        ]
        assert names, spec.label
        escaped = [n for n in names if not n.startswith(where) and n not in GLOBAL_NAMES]
        assert not escaped, f"{spec.label}: {escaped}"
    assert graph.count_publishers(topics.CLOCK.name) == 0
    assert graph.count_publishers(topics.CLOCK.in_namespace("arm2")) == 1

    # A motion commanded on arm1 moves arm1 only.
    pan2 = arm2.pan()
    arm1.ramp_to(0.6)
    arm1.wait_until(lambda: arm1.pan() > 0.5, 6.0, "shoulder_pan past 0.5 rad")
    assert abs(arm2.pan() - pan2) < STILL

    # Both move (arm2 slowly, away from its zone); "arm1: stop" at the terminal holds arm1
    # while arm2 keeps moving to its target.
    arm1.ramp_to(1.3)
    arm2.ramp_to(-1.0, speed=0.3)
    arm2.wait_sim(0.3)
    assert "stop: ok" in terminal.type("arm1: stop", "stop:")
    arm1.wait_at_rest()  # it brakes
    held, moving = arm1.pan(), arm2.pan()
    wait_for(lambda: arm2.pan() < -0.95, 30.0, "arm2 at its target")
    assert moving > -0.75  # arm2 went on for at least 0.2 rad after arm1 was held
    assert abs(arm1.pan() - held) < STILL
    assert arm1.last_safety()["state"] == "stopped"
    assert arm1.last_safety()["reason"] == "stop requested on /arm1/lang2policy/stop"
    assert arm2.last_safety()["state"] == "ok"

    # arm2's own keep-out zone stops it short of 1.3 rad; arm1 has no such zone.
    arm2.ramp_to(1.3)
    arm2.wait_sim(4.5)
    assert 0.5 < arm2.pan() < 1.05
    assert "arm2_fixture" in arm2.last_safety()["detail"]["last_violation"]
    assert "resume: ok" in terminal.type("arm1: :resume", "resume:")
    arm1.ramp_to(1.3)
    arm1.wait_until(lambda: arm1.pan() > 1.25, 8.0, "shoulder_pan past 1.25 rad, through the spot")
    with arm1.lock:
        assert not any("arm2_fixture" in json.dumps(s) for s in arm1.safety)
    arm1.profile = arm2.profile = None

    # An instruction addressed to arm2 reaches arm2's planner topic only; a stop without a
    # name stops every arm.
    terminal.type("arm2: lift the red block", "-> instruction: lift the red block")
    wait_for(lambda: arm2.instructions, 10.0, "the instruction on arm2's topic")
    assert arm2.instructions == ["lift the red block"] and arm1.instructions == []
    terminal.type("stop", "[arm2] stop:")
    wait_for(
        lambda: all(a.last_safety().get("state") == "stopped" for a in (arm1, arm2)),
        10.0,
        "both arms stopped",
    )
