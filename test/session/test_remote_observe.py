"""Judging a goal from a camera's view: the planner's session raises the arm out of the view,
waits for perception to see the goal's objects again, and says what it waits for.

A thread plays the robot node (``LiveArm``: a simulated arm behind the message boundary, its
object poses fed as perception would). A correction that arrives while the arm goes to ``look``
has no call left to edit and is dropped; a stop ends the move or the wait at once.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from lang2policy.bench.live_arm import LiveArm
from lang2policy.planning.goals import Goal
from lang2policy.planning.loop import _judged_on_objects
from lang2policy.robots.streamed_robot import CorrectionInterrupt, MotionAborted

OBJECTS = ["red block", "blue block", "blue bowl", "green bowl"]
AT_LOOK = 0.05  # rad: the measured joints at the end of the move (servo lag, settling)


@pytest.fixture()
def view_arm():
    node = LiveArm()
    node.session.view_timeout = 2.0
    yield node
    node.close()


def joints(view_arm: LiveArm) -> np.ndarray:
    return view_arm.session.robot.get_observation().position[:-1]


def test_the_arm_is_raised_out_of_the_view_and_the_objects_are_seen_again(view_arm):
    said: list[str] = []
    view_arm.session.observe(OBJECTS, said.append)
    look = view_arm.session.world.arm.look
    assert np.abs(joints(view_arm) - look).max() < AT_LOOK, joints(view_arm)
    assert not np.allclose(look, view_arm.session.world.arm.home)  # home hovers over the table
    assert said == ["raising the arm out of the camera's view to look at the scene"], said
    assert set(view_arm.session.world.object_names()) == set(OBJECTS)


def test_an_object_perception_does_not_see_is_named_after_the_timeout(view_arm):
    said: list[str] = []
    started = time.monotonic()
    view_arm.session.observe([*OBJECTS, "pink block"], said.append)
    assert time.monotonic() - started >= view_arm.session.view_timeout
    assert said[-1] == "perception does not see ['pink block'] after 2 s", said


def test_a_correction_during_the_move_is_dropped_and_the_arm_still_gets_there(view_arm):
    threading.Timer(0.3, view_arm.session.robot.interrupt, [CorrectionInterrupt("edit")]).start()
    view_arm.session.observe(OBJECTS, lambda line: None)
    look = view_arm.session.world.arm.look
    assert np.abs(joints(view_arm) - look).max() < AT_LOOK, joints(view_arm)


def test_a_stop_during_the_move_judges_the_scene_as_it_is(view_arm):
    said: list[str] = []
    stop = [MotionAborted("stop requested")]
    threading.Timer(0.3, view_arm.session.robot.interrupt, stop).start()
    view_arm.session.observe(OBJECTS, said.append)
    look = view_arm.session.world.arm.look
    assert np.abs(joints(view_arm) - look).max() > AT_LOOK  # not got there
    assert "the arm did not get out of the view (stop requested)" in said[-1], said


def test_ground_truth_is_judged_where_the_arm_is(view_arm):
    view_arm.session.view_timeout = 0.0
    before = joints(view_arm).copy()
    view_arm.session.observe(OBJECTS, lambda line: pytest.fail(line))
    assert np.abs(joints(view_arm) - before).max() < 1e-3


@pytest.mark.parametrize(
    ("goal", "judged_on_objects"),
    [
        (Goal("answer"), False),
        (Goal("moved"), False),  # the arm's own motion: it stays where it was sent
        (Goal("moved", moved=("red block",)), True),
        (Goal("into", moved=("blue bowl",)), True),
        (Goal("one_tower", objects=("red block", "blue block")), True),
    ],
)
def test_only_goals_read_from_objects_move_the_arm_to_look(goal, judged_on_objects):
    assert _judged_on_objects(goal) is judged_on_objects
