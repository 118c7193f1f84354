"""Motion limits and pushing in simulation: a tool-speed cap, a deadline that stops the arm,
and a push that slides a block to where it was asked to go."""

import numpy as np
import pytest

from lang2policy.errors import InvalidIntentError, MotionTimeExceeded, UnreachableError
from lang2policy.session.sim import SimSession

SETTLE = 0.25  # seconds primitives hold still after each motion


def record_tool(session: SimSession) -> list[tuple[float, np.ndarray]]:
    """(sim time, tool centre point) after every control period, until the list is dropped."""
    samples: list[tuple[float, np.ndarray]] = []
    motion = session.primitives
    session.robot.observers.append(
        lambda: samples.append((session.world.time, motion.tool_point()))
    )
    return samples


def peak_speed(samples) -> float:
    times = np.array([t for t, _ in samples])
    points = np.array([p for _, p in samples])
    return float(np.max(np.linalg.norm(np.diff(points, axis=0), axis=1) / np.diff(times)))


def timed_move(session: SimSession, goal, tcp_speed: float) -> tuple[float, float]:
    """Sim seconds the move to ``goal`` took (settling excluded) and the tool's peak speed."""
    session.reset(3, ["red block"])
    session.primitives.tcp_speed = tcp_speed
    samples = record_tool(session)
    start = session.world.time
    try:
        session.primitives.move_to_position(goal)
    finally:
        session.robot.observers.clear()
    assert np.linalg.norm(session.primitives.tool_point() - goal) < 0.01
    return session.world.time - start - SETTLE, peak_speed(samples)


def test_tcp_speed_cap_stretches_the_motion_and_is_never_exceeded(session):
    goal = np.array([0.2, 0.1, 0.08])
    fast_time, fast_peak = timed_move(session, goal, 0.08)
    slow_time, slow_peak = timed_move(session, goal, 0.04)
    assert slow_time / fast_time == pytest.approx(2.0, rel=0.1)
    assert fast_peak <= 0.08 * 1.1 and slow_peak <= 0.04 * 1.1
    assert fast_peak > 0.08 * 0.8  # the cap binds, it is not just slow anyway


def test_deadline_stops_the_arm_where_it_is_and_it_stays_still(session):
    session.reset(3, ["red block"])
    motion = session.primitives
    start_joints = session.world.arm_qpos()
    motion.deadline = motion.now() + 0.4
    with pytest.raises(
        MotionTimeExceeded, match=r"stopped after 0\.4\d s; the budget allows 0\.40"
    ):
        motion.move_to_position([0.2, 0.1, 0.06])
    stopped = session.world.arm_qpos()
    assert np.abs(stopped - start_joints).max() > 0.05  # it had started to move
    session.world.step_seconds(1.0)
    assert np.abs(session.world.arm_qpos() - stopped).max() < 0.01
    motion.deadline = None
    motion.move_to_position([0.2, 0.1, 0.06])  # without a deadline the same move completes
    assert np.linalg.norm(motion.tool_point() - [0.2, 0.1, 0.06]) < 0.01


def test_a_passed_deadline_raises_before_the_arm_moves(session):
    session.reset(3, ["red block"])
    before = session.world.arm_qpos()
    session.primitives.deadline = session.primitives.now() - 1.0
    with pytest.raises(MotionTimeExceeded):
        session.primitives.go_home()
    session.world.step_seconds(0.5)
    assert np.abs(session.world.arm_qpos() - before).max() < 0.01


def push_target(session: SimSession, name: str, distance: float) -> np.ndarray:
    """A point ``distance`` from the object towards the middle of the workspace."""
    center = session.world.object_pose(name).position[:2]
    middle = np.array([np.mean(session.world.description.workspace.x), 0.0])
    direction = (middle - center) / np.linalg.norm(middle - center)
    return center + distance * direction


@pytest.mark.parametrize("robot", ["so101", "panda"])
def test_push_slides_a_block_to_the_target(robot, session):
    pushed = session if robot == "so101" else SimSession("panda")
    pushed.reset(0, ["red block", "blue bowl"])
    target = push_target(pushed, "red block", 0.06)
    pushed.primitives.push("red block", target)
    pushed.world.step_seconds(0.3)
    pose = pushed.world.object_pose("red block")
    assert np.linalg.norm(pose.position[:2] - target) < 0.02
    half = pushed.world.description.objects.block_half
    assert pose.position[2] == pytest.approx(half, abs=0.003)  # still resting, not tipped
    assert pushed.primitives.tool_point()[2] > 2 * half + 0.02  # lifted clear afterwards


def test_push_plan_is_made_before_moving_and_matches_the_push(session):
    session.reset(1, ["red block", "blue bowl"])
    before, time = session.world.arm_qpos(), session.world.time
    target = push_target(session, "red block", 0.05)
    plan = session.primitives.plan_push("red block", target)
    assert session.world.time == time
    np.testing.assert_array_equal(session.world.arm_qpos(), before)
    start, end = plan.points()[1], plan.points()[2]
    direction = (target - session.world.object_pose("red block").position[:2]) / 0.05
    assert np.dot(end[:2] - start[:2], direction) == pytest.approx(0.05 + 0.025, abs=0.01)


def test_push_out_of_reach_raises_and_the_arm_stays_still(session):
    session.reset(1, ["red block", "blue bowl"])
    before = session.world.arm_qpos()
    with pytest.raises(UnreachableError, match="out of reach"):
        session.primitives.push("red block", [0.9, 0.0])
    session.world.step_seconds(0.3)
    np.testing.assert_allclose(session.world.arm_qpos(), before, atol=5e-3)


def test_push_while_holding_is_refused(session):
    session.reset(4, ["red block", "blue bowl"])
    session.primitives.pick("red block")
    with pytest.raises(InvalidIntentError, match="holds 'red block'"):
        session.primitives.push("blue bowl", [0.2, 0.0])


def test_place_at_xy_sets_the_block_down_at_that_spot(session):
    session.reset(4, ["red block", "blue bowl"])
    session.primitives.pick("red block")
    session.primitives.place_at_xy([0.2, 0.05])  # a free spot (the bowl is at y -0.04)
    session.world.step_seconds(0.3)
    position = session.world.object_pose("red block").position
    assert np.linalg.norm(position[:2] - [0.2, 0.05]) < 0.01
    assert position[2] == pytest.approx(session.world.description.objects.block_half, abs=0.003)


def test_a_far_push_leaves_the_block_where_it_pushed_it(session):
    """Demonstration 277 of ``record demos --seed 0``: a 7 cm push toward the far side, where
    the block jams under the jaw's overhang. Backing off before lifting dragged it back from
    5.5 to 2.5 cm (a failed demonstration); lifting straight up leaves it pushed."""
    from lang2policy.vla.sim.demos import training_specs
    from lang2policy.vla.sim.episodes import set_up_scene
    from lang2policy.vla.sim.judge import judge, start_positions
    from lang2policy.vla.sim.oracle import run_oracle

    spec = training_specs(["pick_place", "push", "lift"], 250, 0)[277]
    assert (spec.task.family, spec.task.side) == ("push", "top")
    appearance = set_up_scene(session, spec)
    try:
        start = start_positions(session.world, spec.task)
        run_oracle(session, spec.task)
        success, detail = judge(session.world, spec.task, start)
    finally:
        appearance.restore(session.world)
    assert success, detail


def test_the_pushing_face_is_centred_behind_the_block_at_the_push_start(session):
    """``face_centre`` at the plan's start: on the block's centre line, the clearance behind
    its near face, although the tool centre point is about 2 cm to one side of it."""
    from lang2policy.control.pusher import PUSH_CLEARANCE, face_centre, gripper_geoms

    session.reset(1, ["red block", "blue bowl"])
    block = session.world.object_pose("red block").position
    target = push_target(session, "red block", 0.05)
    plan = session.primitives.plan_push("red block", target)
    heading = (target - block[:2]) / 0.05
    half = session.world.description.objects.block_half
    kin = session.primitives.kin
    face = face_centre(kin, gripper_geoms(kin), plan.down[-1], heading, 2 * half)
    across = np.array([-heading[1], heading[0]])
    assert abs((face[:2] - block[:2]) @ across) < 0.005
    assert (block[:2] - face[:2]) @ heading == pytest.approx(half + PUSH_CLEARANCE, abs=0.005)
    assert abs((plan.start[:2] - block[:2]) @ across) > 0.01  # the tool is off to one side
    assert face[2] == pytest.approx(plan.start[2], abs=1e-4)  # the IK solution's height
