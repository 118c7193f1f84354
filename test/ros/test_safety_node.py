"""The safety node between a commander and the real sim node (rclpy, Fast DDS on loopback).

The sim node (cameras off) and the safety node run in processes of their own, as deployed (in
one process the physics, the filter and the probe share a GIL and an executor, and the stop
service waits behind them for tenths of a second); the probe spins in a private rclpy Context,
all on a domain of their own. A streamer thread plays the commander: every
20 ms of wall time it publishes a 0.1 s chunk (5 points) of a motion profile on
/lang2policy/joint_command, like the MPC controller does. Everything about the arm is judged
from /joint_states (velocities and sim-time stamps) and, for the workspace, from the tool point
computed independently by forward kinematics of the scene model.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

rclpy = pytest.importorskip("rclpy")

from builtin_interfaces.msg import Duration  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402
from support.ros import ros_env as shared_ros_env  # noqa: E402
from support.ros import spinning  # noqa: E402
from support.waiting import wait_for  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

from lang2policy.graph import topics  # noqa: E402
from lang2policy.ros import convert  # noqa: E402
from lang2policy.safety import load_safety_config  # noqa: E402
from lang2policy.scene.world import World  # noqa: E402

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[2]
DOMAIN_ID = 1 + (os.getpid() + 111) % 200
CHUNK_POINTS, CHUNK_DT = 5, 0.02
STOP_WINDOW = 0.1  # s of sim time in which a stop must halt the arm
SETTLED_AFTER = 0.4  # s of sim time after which a stopped arm must be completely still
OVERSHOOT = 0.005  # rad a stopped arm may run past where it comes to rest (and come back)
RAMP_SPEED = 0.5  # rad/s of shoulder_pan while streaming
STATE_TIMEOUT = 2.0  # s, the safety node's parameter here


def ros_env(domain_id: int = DOMAIN_ID) -> dict[str, str]:
    return shared_ros_env(domain_id)


class Probe:
    """Records joint states, statuses and what reaches the robot; calls the services."""

    def __init__(self, context) -> None:
        self.node = rclpy.create_node("safety_probe", context=context)
        self.lock = threading.Lock()
        self.states: list[tuple[float, dict[str, float], dict[str, float]]] = []
        self.statuses: list[dict] = []
        self.to_robot: list[tuple[float, JointTrajectory]] = []  # (sim time of arrival, msg)
        self.node.create_subscription(JointState, topics.JOINT_STATES.name, self._on_state, 50)
        self.node.create_subscription(String, topics.SAFETY.name, self._on_status, 50)
        self.node.create_subscription(JointTrajectory, topics.TRAJECTORY.name, self._on_robot, 50)
        self.command_pub = self.node.create_publisher(
            JointTrajectory, topics.JOINT_COMMAND.name, 10
        )
        self.clients = {
            name: self.node.create_client(Trigger, name)
            for name in (topics.STOP.name, topics.RESUME.name, topics.RESET.name)
        }

    def _on_state(self, msg: JointState) -> None:
        entry = (
            convert.to_seconds(msg.header.stamp),
            dict(zip(msg.name, msg.position, strict=True)),
            dict(zip(msg.name, msg.velocity, strict=True)),
        )
        with self.lock:
            self.states.append(entry)

    def _on_status(self, msg: String) -> None:
        with self.lock:
            self.statuses.append(json.loads(msg.data))

    def _on_robot(self, msg: JointTrajectory) -> None:
        with self.lock:
            self.to_robot.append((self.now(), msg))  # sim time of the latest joint state

    def now(self) -> float:
        """Sim time of the latest joint state (0 before any)."""
        return self.states[-1][0] if self.states else 0.0

    def latest(self):
        with self.lock:
            return self.states[-1]

    def states_between(self, start: float, end: float = math.inf):
        with self.lock:
            return [s for s in self.states if start <= s[0] <= end]

    def wait_sim(self, seconds: float, timeout: float = 30.0) -> float:
        """Wait until sim time advanced ``seconds``; returns the new sim time."""
        target = self.now() + seconds
        wait_for(lambda: self.now() >= target, timeout, f"sim time {target:.2f}")
        return self.now()

    def status(self, predicate, timeout: float, what: str, since: int = 0) -> dict:
        def find():
            with self.lock:
                return next((s for s in self.statuses[since:] if predicate(s)), None)

        return wait_for(find, timeout, what)

    def status_count(self) -> int:
        with self.lock:
            return len(self.statuses)

    def robot_count(self) -> int:
        with self.lock:
            return len(self.to_robot)

    def call(self, service: str) -> Trigger.Response:
        client = self.clients[service]
        assert client.wait_for_service(timeout_sec=10.0), f"no {service} service"
        future = client.call_async(Trigger.Request())
        wait_for(future.done, 10.0, f"the {service} response")
        return future.result()


class Streamer:
    """The commander: publishes a chunk of ``profile`` (sim time -> positions) every 20 ms."""

    def __init__(self, probe: Probe, names: tuple[str, ...]) -> None:
        self.probe, self.names = probe, names
        self.profile = None  # callable(sim time) -> positions in ``names`` order, or None
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(CHUNK_DT):
            profile = self.profile
            if profile is None or not self.probe.states:
                continue
            now = self.probe.now()
            msg = JointTrajectory(joint_names=list(self.names))
            for k in range(1, CHUNK_POINTS + 1):
                values = [float(v) for v in profile(now + k * CHUNK_DT)]
                ns = round(k * CHUNK_DT * 1e9)
                msg.points.append(
                    JointTrajectoryPoint(positions=values, time_from_start=Duration(nanosec=ns))
                )
            self.probe.command_pub.publish(msg)
            self.sent += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


@pytest.fixture(scope="module")
def safety_graph(world):
    with pytest.MonkeyPatch.context() as mp:
        for key, value in ros_env().items():
            mp.setenv(key, value)
        sim = NodeProcess("sim_node", ["-p", "camera_rate:=0"])
        # A long state timeout: busy CI machines stall a process for a second at times, and
        # these tests are about stop, command silence and the filter, not about those stalls.
        safety = NodeProcess("safety_node", ["-p", f"state_timeout:={STATE_TIMEOUT}"])
        context = rclpy.Context()
        rclpy.init(context=context)
        probe = Probe(context)
        streamer = Streamer(probe, world.arm.action_names)
        try:
            with spinning(context, (probe.node,)):
                try:
                    wait_for(lambda: probe.states, 30.0, "joint states")
                    probe.status(lambda s: s["state"] == "ok", 30.0, "the safety node ok")
                    yield sim, safety, probe, streamer
                finally:
                    streamer.close()
        finally:
            safety.stop()
            sim.stop()


class NodeProcess:
    """A node in its own process, as deployed (in one process the sim's physics, the safety
    node and the probe share a GIL and an executor, and the stop service waits behind them);
    ``pause`` freezes it (a robot that went silent)."""

    def __init__(self, module: str, arguments: list[str]) -> None:
        command = [sys.executable, "-m", f"lang2policy.ros.{module}", "--ros-args", *arguments]
        self.process = subprocess.Popen(
            command, env=dict(os.environ), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def pause(self) -> None:
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)

    def stop(self) -> None:
        self.resume()
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


@pytest.fixture
def fresh(safety_graph, world):
    """The arm at home, nothing streaming, the safety node not stopped."""
    _, _, probe, streamer = safety_graph
    streamer.profile = None
    probe.call(topics.RESUME.name)
    assert probe.call(topics.RESET.name).success
    probe.wait_sim(0.3)
    wait_for(lambda: at_rest(probe), 15.0, "the arm at rest after the reset")
    return safety_graph


def at_rest(probe, seconds: float = 0.2) -> bool:
    """Every arm joint slower than 0.02 rad/s over the last ``seconds`` of sim time."""
    recent = probe.states_between(probe.now() - seconds)
    return bool(recent) and max(max_arm_speed(s) for s in recent) < 0.02


def home(world: World) -> dict[str, float]:
    return {**dict(zip(world.arm.joint_names, world.arm.home, strict=True)), "gripper": 1.0}


def pan_ramp(world: World, start: float, speed: float, limit: float):
    """Every joint at home but shoulder_pan, which ramps from 0 at ``start`` up to ``limit``."""
    base = home(world)
    names = world.arm.action_names

    def profile(t: float) -> list[float]:
        pan = min(speed * max(t - start, 0.0), limit)
        return [pan if n == "shoulder_pan" else base[n] for n in names]

    return profile


@dataclass(frozen=True)
class StopReport:
    """How shoulder_pan (moving forward) stopped, from its joint states after the request."""

    travel: float  # rad from where it was measured at the request to where it came to rest
    overshoot: float  # rad it ran past its rest position (and came back)
    halted: float  # s from the request until it stays within OVERSHOOT of its rest position

    def __str__(self) -> str:
        return (
            f"travel {self.travel:.4f} rad, overshoot {self.overshoot:.4f} rad, halted "
            f"{self.halted * 1000:.0f} ms after the request"
        )


def stop_report(states, stop_time: float) -> StopReport:
    """``states`` from the stop request on, the last 0.2 s of them at rest."""
    stamps = np.array([s[0] for s in states])
    pans = np.array([s[1]["shoulder_pan"] for s in states])
    rest = float(pans[stamps >= stamps[-1] - 0.2].mean())
    away = np.flatnonzero(np.abs(pans - rest) > OVERSHOOT)
    halted = stamps[min(away[-1] + 1, len(stamps) - 1)] if away.size else stamps[0]
    return StopReport(rest - float(pans[0]), float(pans.max()) - rest, float(halted - stop_time))


def max_arm_speed(state) -> float:
    return max(abs(v) for n, v in state[2].items() if n != "gripper")


def tool_point(world: World, joints: dict[str, float]) -> np.ndarray:
    """Tool centre from the scene model: site + rotation @ grasp offset (independent FK)."""
    world.data.qpos[world.arm.qpos_adr] = [joints[n] for n in world.arm.joint_names]
    mujoco.mj_kinematics(world.model, world.data)
    site = world.arm.ee_site_id
    offset = np.array(world.description.grasp.center_offset)
    return world.data.site_xpos[site] + world.data.site_xmat[site].reshape(3, 3) @ offset


# ---------------------------------------------------------------------- the contract
def test_topics_services_and_periodic_status(safety_graph):
    _, _, probe, _ = safety_graph
    services = dict(probe.node.get_service_names_and_types())
    for name in (topics.STOP.name, topics.RESUME.name):
        assert services.get(name) == ["std_srvs/srv/Trigger"], name
    publishers = {
        t: [i.node_name for i in probe.node.get_publishers_info_by_topic(t)]
        for t in (topics.TRAJECTORY.name, topics.SAFETY.name)
    }
    assert publishers == {
        topics.TRAJECTORY.name: ["lang2policy_safety"],
        topics.SAFETY.name: ["lang2policy_safety"],
    }
    count = probe.status_count()
    time.sleep(1.2)  # 2 Hz status even when nothing changes
    assert probe.status_count() - count >= 2
    status = probe.statuses[-1]
    assert status["node"] == "safety" and status["state"] in ("ok", "holding", "stopped")
    assert {"passed", "clipped", "rejected", "blocked", "last_violation"} <= set(status["detail"])
    assert status["detail"]["robot"] == "so101"


# ---------------------------------------------------------------------- stop and resume
def test_stop_halts_the_arm_within_100_ms_and_it_stays_halted_until_resume(fresh, world):
    _, _, probe, streamer = fresh
    streamer.profile = pan_ramp(world, probe.now(), RAMP_SPEED, limit=1.2)
    probe.wait_sim(0.3)
    wait_for(lambda: max_arm_speed(probe.latest()) > 0.8 * RAMP_SPEED, 15.0, "the arm moving")

    before_stop = probe.robot_count()
    since = probe.status_count()
    stop_time = probe.now()  # the simulation's time when the stop is requested
    response = probe.call(topics.STOP.name)
    assert response.success and "stopped" in response.message
    status = probe.status(lambda s: s["state"] == "stopped", 5.0, "stopped", since=since)
    assert "stop requested" in status["reason"]

    end = probe.wait_sim(1.0)
    sent_while_stopped = streamer.sent
    probe.wait_sim(0.5)
    assert streamer.sent > sent_while_stopped  # the commander kept streaming all along
    with probe.lock:
        hold_at = next(t for t, msg in probe.to_robot[before_stop:] if not msg.points)
    assert hold_at - stop_time < STOP_WINDOW, (
        f"the hold reached the sim {hold_at - stop_time} s late"
    )
    after = probe.states_between(stop_time + STOP_WINDOW, end + 0.5)
    assert len(after) > 40
    speeds = [round(max_arm_speed(s), 3) for s in after]
    pans = [s[1]["shoulder_pan"] for s in after]
    stop = stop_report(probe.states_between(stop_time, end + 0.5), stop_time)
    print(
        f"\nstop from {RAMP_SPEED} rad/s: the hold reached the sim {hold_at - stop_time:.3f} s "
        f"after the request; {stop}"
    )
    why = f"hold at the sim after {hold_at - stop_time:.3f} s; {stop}; speeds {speeds[:15]}"
    # Halted within 100 ms: from then on the arm stays within OVERSHOOT of where it comes to
    # rest (the ramp would have carried it 0.7 rad further), braked from its measured state
    # within the acceleration limit, not held at the lagging measured position (that ran past
    # it and came back by 0.01-0.025 rad at this speed); what motion is left is the servo
    # settling, and from 400 ms on it is still.
    assert stop.overshoot <= OVERSHOOT, why
    assert stop.halted <= STOP_WINDOW + 1e-6, why  # states come every 20 ms
    assert max(pans) - min(pans) < 0.02, why
    assert max(speeds) < 0.4 * RAMP_SPEED, why
    settled = [max_arm_speed(s) for s in after if s[0] >= stop_time + SETTLED_AFTER]
    assert max(settled) < 0.01, why
    # The last message that reached the robot is the hold (names, no points): nothing after it.
    with probe.lock:
        since_stop = [msg for _, msg in probe.to_robot[before_stop:]]
    holds = [i for i, msg in enumerate(since_stop) if not msg.points]
    assert holds and holds[0] == len(since_stop) - 1, [len(m.points) for m in since_stop]
    assert tuple(since_stop[-1].joint_names) == world.arm.action_names

    resumed_at = probe.now()
    response = probe.call(topics.RESUME.name)
    assert response.success, response.message
    wait_for(
        lambda: probe.latest()[1]["shoulder_pan"] > max(pans) + 0.1, 15.0, "motion after resume"
    )
    assert max(max_arm_speed(s) for s in probe.states_between(resumed_at)) > 0.3


def test_resume_is_refused_while_joint_states_are_stale(safety_graph):
    sim, _, probe, _ = safety_graph
    assert probe.call(topics.STOP.name).success
    sim.pause()  # the robot goes silent: no more joint states
    try:
        time.sleep(STATE_TIMEOUT + 0.3)
        refused = probe.call(topics.RESUME.name)
        assert not refused.success
        assert "resume refused: joint states stale" in refused.message
        assert probe.statuses[-1]["state"] == "stopped"
    finally:
        sim.resume()
    wait_for(lambda: probe.call(topics.RESUME.name).success, 10.0, "resume once fresh")
    probe.status(
        lambda s: s["state"] == "ok", 5.0, "ok after resume", since=probe.status_count() - 1
    )


# ---------------------------------------------------------------------- watchdog
def test_a_commander_that_goes_silent_mid_motion_gets_the_arm_held(fresh, world):
    _, _, probe, _ = fresh
    base = home(world)
    names = world.arm.action_names
    target = [1.0 if n == "shoulder_pan" else base[n] for n in names]
    since = probe.status_count()
    sent_at, start = probe.now(), probe.latest()[1]["shoulder_pan"]
    probe.command_pub.publish(convert.trajectory(names, [(4.0, target)]))  # then silence
    status = probe.status(lambda s: s["state"] == "holding", 10.0, "holding", since=since)
    assert "commander silent" in status["reason"]

    def hold():  # the status and the hold travel on two topics: either may arrive first
        with probe.lock:
            return next((m for t, m in probe.to_robot if t >= sent_at and not m.points), None)

    held_at = convert.to_seconds(wait_for(hold, 5.0, "the hold sent to the robot").header.stamp)
    command_timeout = load_safety_config("so101").command_timeout
    assert held_at < sent_at + command_timeout + 0.15  # held by the watchdog, long before 4 s
    settled = probe.wait_sim(0.5)
    probe.wait_sim(0.3)
    after = probe.states_between(settled)
    assert max(max_arm_speed(s) for s in after) < 0.02
    # held after about 0.06 rad; it would have gone 0.25 rad by now, to 1.0 rad at the end
    assert after[-1][1]["shoulder_pan"] - start < 0.12


# ---------------------------------------------------------------------- motion filter
def test_a_nan_command_is_rejected_and_the_arm_holds(fresh, world):
    _, _, probe, streamer = fresh
    ramp = pan_ramp(world, probe.now(), RAMP_SPEED, limit=1.2)
    streamer.profile = ramp
    probe.wait_sim(0.3)
    wait_for(lambda: max_arm_speed(probe.latest()) > 0.8 * RAMP_SPEED, 15.0, "the arm moving")
    since = probe.status_count()
    rejected = probe.statuses[-1]["detail"]["rejected"]
    streamer.profile = lambda t: [math.nan if i == 0 else v for i, v in enumerate(ramp(t))]
    nan_at = probe.now()
    status = probe.status(lambda s: s["state"] == "holding", 5.0, "holding", since=since)
    assert "non-finite" in status["reason"]

    def sent_holds():  # arrival times are the probe's latest state stamp: one tick of slack
        with probe.lock:
            return [t for t, msg in probe.to_robot if t >= nan_at - 0.05 and not msg.points]

    holds = wait_for(sent_holds, 5.0, "a hold sent to the robot")  # another topic than the status
    probe.wait_sim(0.6)
    status = probe.statuses[-1]
    assert status["detail"]["rejected"] > rejected
    assert "non-finite" in status["detail"]["last_violation"]
    # Still 0.3 s of sim time after the hold went out: on a loaded machine the sim node's clock
    # runs on while the safety node waits for the CPU, so the hold may leave later than 0.3 s
    # after the NaN (the stop test bounds the safety node's reaction time).
    after = probe.states_between(holds[0] + 0.3)
    pans = [s[1]["shoulder_pan"] for s in after]
    assert after and max(max_arm_speed(s) for s in after) < 0.05
    assert max(pans) - min(pans) < 0.01
    streamer.profile = None


def test_a_command_leaving_the_workspace_is_cut_at_the_box(fresh, world):
    _, _, probe, streamer = fresh
    box = load_safety_config("so101").workspace
    since_msg = probe.robot_count()
    clipped = probe.statuses[-1]["detail"]["clipped"]
    # Swing the pan joint towards 1.9 rad (inside its range): the tool would pass behind the
    # base (x < 0), out of the workspace box.
    streamer.profile = pan_ramp(world, probe.now(), 0.8, limit=1.9)
    probe.wait_sim(3.5, timeout=60.0)
    streamer.profile = None
    probe.wait_sim(0.5)
    final = probe.latest()[1]
    assert 1.0 < final["shoulder_pan"] < 1.85
    tool = tool_point(world, final)
    assert np.all(tool >= np.array(box.min) - 0.005) and np.all(tool <= np.array(box.max))
    with probe.lock:
        sent = [msg for _, msg in probe.to_robot[since_msg:] if msg.points]
    ends = [dict(zip(m.joint_names, m.points[-1].positions, strict=True)) for m in sent]
    assert max(e["shoulder_pan"] for e in ends) < 1.85  # every command the robot got was cut
    for end in ends:
        assert np.all(tool_point(world, end) >= np.array(box.min) - 1e-6)
    status = probe.statuses[-1]
    assert status["detail"]["clipped"] > clipped
    assert "would leave the workspace box" in status["detail"]["last_violation"]


# ---------------------------------------------------------------------- console entry
def test_main_rejects_an_unknown_robot_with_a_reason():
    env = dict(os.environ, **ros_env(1 + (DOMAIN_ID + 7) % 200))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-m", "lang2policy.ros.safety_node", "--ros-args", "-p", "robot:=ur5"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    assert "no safety limits for robot 'ur5'" in output and "Traceback" not in output, output
