"""The MPC controller node in a real ROS 2 graph (rclpy, Fast DDS on loopback, private domain).

A real SimNode (its trajectory input remapped to /lang2policy/joint_command, where the safety
node will sit later) and a ControllerNode spin in one MultiThreadedExecutor with a probe node.
Reward specs published on /lang2policy/reward_spec move the simulated tool; the tool position
is computed independently from /joint_states by forward kinematics of the scene model.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

rclpy = pytest.importorskip("rclpy")

from rclpy.executors import MultiThreadedExecutor  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from support.processes import alive  # noqa: E402
from support.ros_graph import Probe, SimProcess, ToolFK  # noqa: E402
from support.waiting import wait_for  # noqa: E402

from lang2policy.bench.parity_processes import Child  # noqa: E402
from lang2policy.ros import convert  # noqa: E402

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[2]
DOMAIN_ID = 1 + (os.getpid() + 53) % 200
POINT_A = (0.22, 0.08, 0.14)
POINT_B = (0.20, -0.10, 0.08)


def tool_to_point(point, duration: float = 30.0, success: dict | None = None) -> dict:
    spec = {
        "version": 1,
        "task": f"tool to {list(point)}",
        "duration": duration,
        "terms": [{"term": "tool_to_point", "params": {"point": list(point)}}],
    }
    if success:
        spec["success"] = success
    return spec


@pytest.fixture(scope="module")
def controller_graph():
    from lang2policy.ros.controller_node import ControllerNode

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ROS_DOMAIN_ID", str(DOMAIN_ID))
        mp.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        sim = SimProcess(dict(os.environ))
        context = rclpy.Context()
        rclpy.init(context=context)
        controller = ControllerNode(
            context=context,
            parameter_overrides=[Parameter("samples", value=32), Parameter("threads", value=1)],
        )
        probe = Probe(context)
        executor = MultiThreadedExecutor(num_threads=4, context=context)
        for node in (controller, probe.node):
            executor.add_node(node)
        stop = threading.Event()
        spinner = threading.Thread(
            target=lambda: [executor.spin_once(timeout_sec=0.05) for _ in iter(stop.is_set, True)],
            daemon=True,
        )
        spinner.start()
        try:
            probe.status(lambda s: s.get("stats", {}).get("objects"), 30, "objects known")
            yield sim, controller, probe
        finally:
            stop.set()
            spinner.join(timeout=10)
            executor.shutdown()
            for node in (controller, probe.node):
                node.destroy_node()
            rclpy.shutdown(context=context)
            sim.stop()


def test_specs_move_the_tool_and_a_swap_retargets_it(controller_graph):
    sim, _controller, probe = controller_graph
    fk = ToolFK()
    start = fk(probe.joints)
    assert sorted(probe.objects) == sorted(sim.objects)  # the sim publishes its objects

    probe.send(tool_to_point(POINT_A))
    accepted = probe.status(lambda s: s["state"] in ("accepted", "rejected"), 10, "the answer")
    assert accepted["state"] == "accepted", accepted
    initial_a = np.linalg.norm(start - POINT_A)
    wait_for(lambda: np.linalg.norm(fk(probe.joints) - POINT_A) < 0.02, 60, "tool at A")
    running = probe.status(lambda s: s["state"] == "running", 5, "a running status")
    # It iterates (how fast is bench mpc's and bench controller-rate's business: one fresh-clone
    # CI run reported 4 iterations in the first 4 s).
    assert running["stats"]["iterations"] >= 1, json.dumps(running)
    assert running["stats"]["rate_hz"] > 0, json.dumps(running)  # the node says its rate

    # swap mid-run (no success condition: task A is still running) to B with a success check
    at_a = fk(probe.joints)
    initial_b = np.linalg.norm(at_a - POINT_B)
    success = {"all": [{"term": "tool_to_point", "below": 0.015}], "hold": 0.3}
    probe.send(tool_to_point(POINT_B, duration=60.0, success=success))  # room on a loaded machine
    done = probe.status(lambda s: s["state"] in ("success", "failed", "timeout"), 90, "B's end")
    assert done["state"] == "success", json.dumps(done)
    final = np.linalg.norm(fk(probe.joints) - POINT_B)
    assert initial_a > 0.08 and initial_b > 0.15  # the targets were far away
    assert final < 0.03 < 0.25 * initial_b, (final, initial_b)

    # the task has ended: the controller stops streaming and the arm holds
    commands = probe.commands
    time.sleep(0.5)
    assert probe.commands <= commands + 1
    assert np.linalg.norm(fk(probe.joints) - POINT_B) < 0.03


def test_bad_specs_are_rejected_with_reasons_and_nothing_crashes(controller_graph):
    sim, controller, probe = controller_graph
    cases = [
        ("{not json", "not valid JSON"),
        ({"terms": [{"term": "no_such_term"}]}, "tool_to_point"),  # lists the valid terms
        (
            {"terms": [{"term": "reach", "params": {"object": "purple unicorn"}}]},
            sim.objects[0],
        ),  # lists the objects in the scene
        (
            {"terms": [{"term": "tool_to_point", "params": {"point": [float("nan"), 0, 0]}}]},
            "point",
        ),
    ]
    for payload, expected in cases:
        probe.send(payload)
        answer = probe.status(lambda s: s["state"] in ("accepted", "rejected"), 10, "answer")
        assert answer["state"] == "rejected" and expected in answer["detail"], answer
    clamped = tool_to_point(POINT_A, duration=500.0)  # duration above its maximum: clamped
    probe.send(clamped)
    answer = probe.status(lambda s: s["state"] in ("accepted", "rejected"), 10, "answer")
    assert answer["state"] == "accepted" and answer["detail"]["notes"], answer
    probe.send("null")  # cancel: hold
    probe.status(lambda s: s["state"] == "cancelled", 10, "cancelled")
    idle = probe.status(lambda s: s["state"] == "idle" and "stats" in s, 5, "idle status")
    assert idle["stats"]["rejected_states"] == 0
    assert controller.mpc.alive


def children_of(pid: int) -> list[int]:
    """The child processes of ``pid`` (from /proc)."""
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except FileNotFoundError:
        return []
    return [int(child) for child in text.split()]


def node_env(offset: int) -> dict[str, str]:
    """The environment of a node process in a private graph (``DOMAIN_ID + offset``)."""
    env = dict(
        os.environ,
        ROS_DOMAIN_ID=str(1 + (DOMAIN_ID + offset) % 200),
        ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
    )
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def test_ctrl_c_ends_the_node_and_its_planning_process_without_errors():
    command = [sys.executable, "-m", "lang2policy.ros.controller_node", "--ros-args"]
    command += ["-p", "samples:=8", "-p", "threads:=1"]
    node = Child("controller_node", command, node_env(11))
    try:  # the node runs in its own process group, as a terminal's foreground job does
        worker = wait_for(lambda: children_of(node.process.pid), 60, "the planning process")[0]
        time.sleep(3.0)  # the node spins and the worker has built its planner
        assert node.alive() and alive(worker)
        os.killpg(node.process.pid, signal.SIGINT)  # Ctrl-C reaches the group, the worker too
        node.process.wait(timeout=20)
    finally:
        node.stop()
    time.sleep(0.2)  # the reader thread takes the last lines
    output = node.tail(200)
    assert node.process.returncode == 0, output
    assert "ERROR" not in output and "Traceback" not in output, output
    wait_for(lambda: not alive(worker), 10, "the planning process to exit")


def test_main_rejects_bad_parameters_with_a_reason():
    env = node_env(7)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "lang2policy.ros.controller_node",
            "--ros-args",
            "-p",
            "sampler:=annealing",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    assert "sampler must be one of" in output and "Traceback" not in output, output


# --------------------------------------------------------------------- pure conversions
def test_object_markers_round_trip_and_bad_markers_are_refused():
    poses = [
        convert.ObjectPose("red block", (0.2, 0.1, 0.0125), (0.0, 0.0, 0.0, 1.0), "block"),
        convert.ObjectPose("blue bowl", (0.25, -0.1, 0.0), kind="bowl", size=0.05),
    ]
    msg = convert.object_markers(poses, stamp=3.5)
    assert msg.markers[0].action == msg.markers[0].DELETEALL  # every message: the full set
    objects = convert.objects_from_markers(msg)
    assert list(objects) == ["red block", "blue bowl"]
    assert objects["red block"].position == pytest.approx((0.2, 0.1, 0.0125))
    assert objects["red block"].quat == pytest.approx((0.0, 0.0, 0.0, 1.0))
    assert msg.markers[2].scale.x == pytest.approx(0.1) and msg.markers[2].header.stamp.sec == 3
    msg.markers[2].text = "red block"
    with pytest.raises(ValueError, match="twice"):
        convert.objects_from_markers(msg)
    msg.markers[2].text = "blue bowl"
    msg.markers[2].pose.position.x = float("nan")
    with pytest.raises(ValueError, match="non-finite"):
        convert.objects_from_markers(msg)


def test_trajectory_builder_refuses_non_finite_positions():
    msg = convert.trajectory(["a", "b"], [(0.02, [0.1, 0.2]), (1.5, [0.3, 0.4])])
    assert convert.trajectory_points(msg, ["a", "b"]) == [
        (0.02, {"a": 0.1, "b": 0.2}),
        (1.5, {"a": 0.3, "b": 0.4}),
    ]
    with pytest.raises(ValueError, match="finite"):
        convert.trajectory(["a", "b"], [(0.02, [0.1, float("nan")])])
