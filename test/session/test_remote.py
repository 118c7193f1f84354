"""The planner's session on a robot it does not simulate (no ROS): the streamed robot, the
mirror world, and skills whose motions a correction re-targets mid-way.

A thread plays the robot node (``lang2policy.bench.live_arm.LiveArm``): it steps a real
simulated ``World``, applies the commands the session sends, and feeds back the measured state
and the object poses, as ``/joint_states`` and ``/lang2policy/objects`` would.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from lang2policy.corrections import classify
from lang2policy.planning.correcting import ArgEdits
from lang2policy.robots.robot import Observation
from lang2policy.robots.sim_robot import limits_for
from lang2policy.robots.streamed_robot import (
    MotionAborted,
    RobotStateError,
    StreamedRobot,
)
from lang2policy.sandbox.policy import default_policy
from lang2policy.sandbox.runner import SandboxRunner
from lang2policy.scene.mirror import MirrorWorld
from lang2policy.scene.world import World
from lang2policy.skills.catalog import SKILLS
from lang2policy.skills.remote import RemoteSkillBackend

OBJECTS = ["red block", "blue block", "blue bowl", "green bowl"]


def test_a_pick_and_place_runs_through_the_stream_and_the_mirror_follows(arm):
    backend = RemoteSkillBackend(arm.session)
    assert backend.object_names() == arm.world.object_names()  # as measured, same order
    backend.execute("put_first_on_second", {"obj": "red block", "target": "blue bowl"})
    assert arm.world.is_in("red block", "blue bowl")  # the real (simulated) scene
    arm.session.sync()
    assert arm.session.world.is_in("red block", "blue bowl")  # and the mirror agrees


def test_a_correction_restarts_the_running_motion_with_edited_arguments(arm):
    backend = RemoteSkillBackend(arm.session)
    runner = SandboxRunner(backend, default_policy(arm.world.description, known_skills=SKILLS))
    edits = ArgEdits(lambda: (arm.world.object_names(), {}))
    runner.edits = edits  # the privilege gate decides the edited call before it restarts

    def correct_soon():
        while backend.current_call is None:
            time.sleep(0.01)
        time.sleep(0.3)
        edits.add(classify("no, the green bowl", OBJECTS, ["red block", "blue bowl"]))
        backend.interrupt_for_edit()

    threading.Thread(target=correct_soon, daemon=True).start()
    outcome = runner.run("put_first_on_second('red block', 'blue bowl')")
    assert outcome.ok, outcome.summary()
    assert runner.restarts == 1
    assert arm.world.is_in("red block", "green bowl")
    assert not arm.world.is_in("red block", "blue bowl")


def test_an_abort_stops_the_motion_with_its_reason(arm):
    backend = RemoteSkillBackend(arm.session)
    start = arm.world.object_pose("red block").position.copy()
    threading.Timer(0.3, lambda: backend.abort("stopped by the person")).start()
    with pytest.raises(MotionAborted, match="stopped by the person"):
        backend.execute("put_first_on_second", {"obj": "red block", "target": "blue bowl"})
    assert np.linalg.norm(arm.world.object_pose("red block").position - start) < 0.01


def test_silence_from_the_robot_is_an_error_not_a_hang():
    world = World("so101")
    limits = limits_for(world.arm, world.description.max_joint_speed, 0.02)
    robot = StreamedRobot(limits, send=lambda _a: None, stale_after=0.3)
    with pytest.raises(RobotStateError, match="no joint states"):
        robot.connect()
    robot.update(Observation(limits.names, np.zeros(6), np.zeros(6), 1.0))
    robot.connect()
    started = time.monotonic()
    with pytest.raises(RobotStateError, match="joint states stopped"):
        robot.sleep(0.02)  # no new state ever comes
    assert time.monotonic() - started < 2.0


def test_the_mirror_is_set_from_measurements_and_never_simulates():
    mirror = MirrorWorld("so101")
    assert mirror.object_names() == []
    bowl = ((0.2, 0.05, 0.0001), (1.0, 0.0, 0.0, 0.0))
    block = ((0.2, 0.05, 0.02), (1.0, 0.0, 0.0, 0.0))
    mirror.sync(objects={"green bowl": bowl, "red block": block, "unicorn": bowl})
    assert mirror.object_names() == ["green bowl", "red block"]
    assert mirror.unknown == ["unicorn"]
    assert mirror.is_in("red block", "green bowl")
    mirror.step_seconds(1.0)  # no physics: the block does not fall
    assert mirror.object_pose("red block").position[2] == pytest.approx(0.02)


def test_after_a_vla_skill_the_next_motion_starts_from_where_the_arm_is(arm):
    """The VLA moves the arm on its own (the graph's VLA node; here: commands sent to the arm
    behind the session's back). The next motion of the code plan must start there: before, the
    streamed robot's rate limit still started from the command before the skill, and a gripper
    motion held the arm at the target before it, so ``open_gripper`` pulled the arm back."""
    backend = RemoteSkillBackend(arm.session)
    backend.execute("go_home", {})
    before = arm.robot.get_observation().position.copy()
    moved = before.copy()
    moved[0] += 0.5  # shoulder_pan
    moved[-1] = 0.3  # the gripper closes part way

    def vla(args: dict) -> bool:
        arm._receive(moved)  # the VLA node's targets reach the arm, not through the session
        deadline = time.monotonic() + 20.0

        def settled() -> bool:  # there and still, as a skill ends (a loaded machine lags)
            state = arm.robot.get_observation()
            near = np.abs(state.position - moved).max() < 0.01
            return near and np.abs(state.velocity[:-1]).max() < 0.02

        while not settled():
            assert time.monotonic() < deadline, "the stand-in VLA did not move the arm"
            time.sleep(0.02)
        arm.session.sync()
        return True

    backend.vla = vla
    args = {"instruction": "lift the red block", "time_budget_s": 5.0, "max_joint_speed": 1.0}
    assert backend.execute("vla_skill", args) is True
    backend.execute("close_gripper", {})
    after = arm.robot.get_observation().position
    print(f"\npan after the VLA {moved[0]:.3f}, after close_gripper {after[0]:.3f} rad")
    assert abs(after[0] - moved[0]) < 0.02, "the arm stayed where the VLA left it"
