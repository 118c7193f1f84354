"""Keyboard teleoperation through the real graph, each node its own process on loopback: the
sim node (front and wrist cameras), the safety node, the recorder and the teleop node, whose
stdin receives a scripted key sequence as a person would type it. The keys move the simulated
arm through the safety node, the episode marks cut the recording, a closed keyboard holds the
arm, and the kept episode converts into a dataset episode the VLA reader loads."""

import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import rclpy
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from support.ros import ros_env, spinning
from support.waiting import wait_for
from trajectory_msgs.msg import JointTrajectory

from lang2policy.commands import teleop as teleop_command
from lang2policy.graph import topics
from lang2policy.robots.feetech.emulator import ServoBusEmulator
from lang2policy.robots.feetech.servo_plant import KinematicPlant
from lang2policy.teleop import IkToolStepper
from lang2policy.vla.dataset import load_dataset
from lang2policy.vla.spec.schema import IMAGE_SIZE, STATE_NAMES
from lang2policy.vla.train.batches import split_episodes

pytestmark = [pytest.mark.ros, pytest.mark.timeout(240)]

DOMAIN = 171
TASK = "lift the gripper above the red block"
RECORDED = [t.name for t in teleop_command.RECORDED]


class Probe:
    """Records the teleop node's status lines, the commands and the joint states."""

    def __init__(self, context) -> None:
        self.node = rclpy.create_node("teleop_probe", context=context)
        self.lock = threading.Lock()
        self.statuses: list[dict] = []
        self.commands: list[JointTrajectory] = []
        self.position: dict[str, float] = {}
        self.sim_time = 0.0  # the latest joint state's stamp, in seconds of the sim's clock
        self.node.create_subscription(String, topics.STATUS.name, self._on_status, 50)
        self.node.create_subscription(
            JointTrajectory, topics.JOINT_COMMAND.name, self._on_command, 50
        )
        self.node.create_subscription(JointState, topics.JOINT_STATES.name, self._on_state, 50)

    def _on_status(self, msg: String) -> None:
        line = json.loads(msg.data)
        if line.get("node") == topics.TELEOP_NODE:
            with self.lock:
                self.statuses.append(line)

    def _on_command(self, msg: JointTrajectory) -> None:
        with self.lock:
            self.commands.append(msg)

    def _on_state(self, msg: JointState) -> None:
        with self.lock:
            self.position = dict(zip(msg.name, msg.position, strict=True))
            self.sim_time = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9

    def state(self, name: str, timeout: float = 20.0) -> dict:
        def find():
            with self.lock:
                return next((s for s in self.statuses if s["state"] == name), None)

        return wait_for(find, timeout, f"a teleop status '{name}'")

    def joints(self) -> np.ndarray:
        with self.lock:
            return np.array([self.position[n] for n in STATE_NAMES])


def settled(probe: Probe, stepper: IkToolStepper, start: np.ndarray) -> list[np.ndarray]:
    """The joints once the tool is about 6 cm up and 4 cm forward of where it was at ``start``
    with the gripper closed, and the arm at rest (under 5 mrad in 0.3 s), as a one-item list
    (``wait_for`` takes it); [] before."""
    before = probe.joints()
    time.sleep(0.3)
    now = probe.joints()
    delta = stepper.tool_position(now[:5]) - stepper.tool_position(start[:5])
    arrived = abs(delta[2] - 0.06) < 0.02 and abs(delta[0] - 0.04) < 0.02
    arrived = arrived and now[5] < start[5] - 0.2
    return [now] if arrived and np.abs(now - before).max() < 0.005 else []


def node(module: str, arguments: list[str], **popen) -> subprocess.Popen:
    command = [sys.executable, "-m", f"lang2policy.ros.{module}", "--ros-args", *arguments]
    popen.setdefault("stdout", subprocess.DEVNULL)
    popen.setdefault("stderr", subprocess.DEVNULL)
    return subprocess.Popen(command, env=dict(os.environ), **popen)


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(2)  # SIGINT: the recorder finishes its file
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()


def type_keys(teleop: subprocess.Popen, keys: bytes, pause: float = 0.15) -> None:
    for key in keys:
        teleop.stdin.write(bytes((key,)))
        teleop.stdin.flush()
        time.sleep(pause)


@pytest.fixture
def teleop_graph(monkeypatch, tmp_path):
    for key, value in ros_env(DOMAIN).items():
        monkeypatch.setenv(key, value)
    size = str(IMAGE_SIZE)
    scene = ["-p", "cameras:=[front, wrist]", "-p", f"camera_width:={size}"]
    scene += ["-p", f"camera_height:={size}", "-p", "objects:=red block,blue bowl"]
    record = ["-p", f"output_dir:={tmp_path / 'recordings'}", "-p", "cameras:=front,wrist"]
    record += ["-p", f"topics:=[{', '.join(RECORDED)}]", "-p", "preroll:=0.0"]
    record += ["-p", f"linger:={teleop_command.LINGER}"]
    processes = [
        node("sim_node", scene),
        node("safety_node", ["-p", "state_timeout:=2.0"]),
        node("recorder_node", record),
    ]
    teleop = node(
        "teleop_node",
        ["-p", "source:=keyboard", "-p", f"task:={TASK}", "-p", "step_m:=0.02"],
        stdin=subprocess.PIPE,
    )
    context = rclpy.Context()
    rclpy.init(context=context)
    probe = Probe(context)
    try:
        with spinning(context, (probe.node,)):
            yield teleop, probe, tmp_path
    finally:
        for process in (teleop, *processes):
            stop(process)


def test_keys_drive_the_arm_through_safety_and_record_a_dataset_episode(teleop_graph):
    teleop, probe, out = teleop_graph
    wait_for(lambda: probe.position, 60.0, "joint states from the sim node")
    wait_for(lambda: any(c.points for c in probe.commands), 60.0, "teleop's first target")
    stepper = IkToolStepper("so101")
    start = probe.joints()
    tool_start = stepper.tool_position(start[:5])

    type_keys(teleop, b" ")  # start an episode
    assert probe.state("received")["instruction"] == TASK
    episode_start = probe.sim_time
    type_keys(teleop, b"rrrww")  # up 6 cm, forward 4 cm (20 mm steps)
    type_keys(teleop, b"c")  # close the gripper
    # The arm follows at the safety node's speed in sim time, slower than wall time on a
    # loaded machine: wait for it to arrive and settle rather than a fixed time.
    [moved] = wait_for(lambda: settled(probe, stepper, start), 30.0, "the arm to arrive")
    delta = stepper.tool_position(moved[:5]) - tool_start
    assert delta[2] == pytest.approx(0.06, abs=0.02), delta
    assert delta[0] == pytest.approx(0.04, abs=0.02), delta
    assert moved[5] < start[5] - 0.2  # the gripper closed
    # Frames are cut on the robot's clock: keep the episode open for 3 s of it, however fast
    # the arm arrived and however far the sim lags wall time.
    wait_for(lambda: probe.sim_time >= episode_start + 3.0, 30.0, "3 s of sim time")
    type_keys(teleop, b" ")  # stop: kept
    assert probe.state("done")["instruction"] == TASK

    time.sleep(1.0)
    type_keys(teleop, b" fx")  # a second episode, discarded
    probe.state("discarded")

    teleop.stdin.close()  # the keyboard is gone: the arm holds
    holding = probe.state("holding", timeout=10.0)
    assert "keyboard's input closed" in holding["detail"]
    wait_for(lambda: not probe.commands[-1].points, 5.0, "a hold on the safety node's input")
    # The recorder closes the discarded episode after its linger: wait for both files' footers.
    wait_for(lambda: len(closed_recordings(out)) == 2, 30.0, "two closed recordings")
    stop(teleop)

    dataset_dir = teleop_command.convert(out, say=lambda _line: None)
    assert len(sorted((out / "recordings").glob("*.mcap"))) == 2
    dataset = load_dataset(dataset_dir)
    assert dataset.tasks == [TASK] and len(dataset.episodes) == 1
    frames = len(dataset)
    assert frames >= 20  # about 3 s at 10 frames per second
    assert dataset.state.shape == (frames, 6) and dataset.action.shape == (frames, 6)
    for camera in ("front", "wrist"):
        assert dataset.images[camera].shape == (frames, IMAGE_SIZE, IMAGE_SIZE, 3)
    assert dataset.episodes[0]["success"] is None  # teleoperated: trained on
    assert split_episodes(dataset.episodes, val_episodes=2, seed=0).train == [0]
    # The episode is the motion typed: state starts near the start, ends where the keys led.
    assert np.abs(dataset.state[0] - start).max() < 0.1
    assert np.abs(dataset.state[-1] - moved).max() < 0.1
    assert dataset.action[-1][5] == pytest.approx(0.0, abs=0.05)  # commanded closed


MCAP_MAGIC = b"\x89MCAP0\r\n"  # an MCAP file begins and, once closed, ends with it


def closed_recordings(out) -> list:
    """The recordings under ``out`` whose writer has finished them (footer magic at the end)."""
    closed = []
    for path in sorted((out / "recordings").glob("*.mcap")):
        data = path.read_bytes()
        if len(data) > 2 * len(MCAP_MAGIC) and data.endswith(MCAP_MAGIC):
            closed.append(path)
    return closed


class HandPlant(KinematicPlant):
    """The leader's joints, moved by hand (torque off: nothing else moves them)."""

    def move_by_hand(self, joint: int, ticks: float) -> None:
        self._pos[joint] = float(ticks)


def test_an_emulated_leader_arm_streams_targets_and_a_silent_one_holds(monkeypatch):
    for key, value in ros_env(DOMAIN + 1).items():
        monkeypatch.setenv(key, value)
    plant = HandPlant()
    positions = {1: 2048, 2: 2048, 3: 2048, 4: 2048, 5: 2048, 6: 2830}
    with ServoBusEmulator((1, 2, 3, 4, 5, 6), plant=plant, positions=positions) as emulator:
        source = f"source:=leader:{emulator.port}"
        teleop = node("teleop_node", ["-p", source, "-p", "bus_timeout:=0.05"])
        context = rclpy.Context()
        rclpy.init(context=context)
        probe = Probe(context)
        try:
            with spinning(context, (probe.node,)):

                def last_target():
                    with probe.lock:
                        last = probe.commands[-1] if probe.commands else None
                    return list(last.points[0].positions) if last and last.points else None

                first = wait_for(last_target, 60.0, "a target from the leader")
                assert first == pytest.approx([0, 0, 0, 0, 0, 1.0])
                plant.move_by_hand(1, 2048 + 512)  # shoulder_lift, a hand's push
                wait_for(
                    lambda: (t := last_target()) and abs(t[1] - np.pi / 4) < 1e-3,
                    10.0,
                    "the follower target to follow the leader",
                )
                emulator.silence(3)  # the leader's elbow servo stops answering
                holding = probe.state("holding", timeout=10.0)
                assert "leader:" in holding["detail"] and "servo(s) 3" in holding["detail"]
                wait_for(lambda: not probe.commands[-1].points, 5.0, "a hold")
                emulator.silence(3, False)
                wait_for(last_target, 10.0, "streaming again once the leader answers")
                seen = {s["state"] for s in probe.statuses}
                assert {"streaming", "holding"} <= seen
                assert not any(emulator.servo(i).torque_on for i in positions)
        finally:
            stop(teleop)
