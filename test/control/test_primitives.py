"""Motion primitives in simulation: pick-and-place works, bad targets leave the arm still."""

import numpy as np
import pytest

from lang2policy.bench.pickplace import pick_and_place
from lang2policy.errors import UnknownObjectError, UnreachableError
from lang2policy.scene.pose import Pose
from lang2policy.session.sim import SimSession


@pytest.fixture(scope="module", params=["so101", "panda"])
def robot_session(request) -> SimSession:
    return SimSession(request.param)


@pytest.mark.parametrize("seed", [0, 1])
def test_pick_and_place_puts_the_block_in_the_bowl(robot_session, seed):
    result = pick_and_place(robot_session, seed)
    assert result.success, result
    assert robot_session.world.is_in(result.block, result.bowl)
    assert result.error == ""


def test_pick_lifts_the_block_off_the_table(robot_session):
    robot_session.reset(4, ["red block", "blue bowl"])
    robot_session.primitives.pick("red block")
    assert robot_session.world.object_pose("red block").position[2] > 0.04
    assert ("red block", "table") not in robot_session.world.contacts()


def test_pick_opens_the_jaw_while_the_arm_travels(robot_session):
    # The jaw used to open with the arm standing still (a second before any motion); it now
    # opens on the way, and is at the pre-grasp opening before the arm descends.
    robot_session.reset(4, ["red block", "blue bowl"])
    motion = robot_session.primitives
    motion.close_gripper()
    start, sent = motion.joints().copy(), []
    step = motion._step

    def record(q, gripper):
        sent.append((np.array(q, float), float(gripper)))
        step(q, gripper)

    motion._step = record
    try:
        motion.pick("red block")
    finally:
        del motion._step
    first_arm = next(i for i, (q, _) in enumerate(sent) if np.max(np.abs(q - start)) > 1e-3)
    assert first_arm * motion.dt < 0.25  # the arm moves at once (the jaw takes 0.5 s)
    assert sent[first_arm][1] < robot_session.world.description.grasp.pre_grasp_opening
    lowest = int(np.argmin([motion.kin.forward(q).position[2] for q, _ in sent]))
    pre_grasp = robot_session.world.description.grasp.pre_grasp_opening
    assert sent[lowest - 10][1] == pytest.approx(pre_grasp)  # open before it reaches the block
    assert robot_session.world.object_pose("red block").position[2] > 0.04


def test_a_transit_across_the_table_turns_the_wrist_evenly_not_round():
    # Seed 1: the red block into the blue bowl (left), then the blue block (right): the base pans
    # 1.7 rad. The gripper's yaw held fixed in the world drove the wrist into its limit, and IK
    # spun it round (-1.8 -> 2.4 -> -2.7 rad): the transit took 27.6 s instead of 4.
    session = SimSession("so101")
    session.reset(1, ["red block", "blue block", "blue bowl", "green bowl"])
    motion = session.primitives
    motion.place("red block", "blue bowl")
    started = session.world.data.time
    motion.tcp_speed = 0.15
    roll = [motion.joints()[-1]]
    step = motion._step
    motion._step = lambda q, gripper: (roll.append(q[-1]), step(q, gripper))
    try:
        motion.pick("blue block")
    finally:
        del motion._step
    assert np.max(np.abs(np.diff(roll))) < 0.2  # no jump between two control periods
    assert np.ptp(roll) < np.pi  # no turn round
    assert session.world.data.time - started < 12.0
    assert session.world.object_pose("blue block").position[2] > 0.04


def test_a_held_block_does_not_creep_out_of_the_fingers(robot_session):
    # In the graph real time passes while the planner thinks, with the block in the fingers:
    # a grip that creeps (soft contacts without the noslip solver: ~0.7 mm/s) drops it.
    robot_session.reset(1, ["red block", "blue bowl"])
    robot_session.primitives.pick("red block")
    lifted = robot_session.world.object_pose("red block").position[2]
    robot_session.primitives._hold(robot_session.primitives.joints(), 10.0)
    assert robot_session.world.object_pose("red block").position[2] > lifted - 0.001


def test_unreachable_target_raises_and_the_arm_stays_still(robot_session):
    robot_session.reset(2)
    before = robot_session.world.arm_qpos()
    with pytest.raises(UnreachableError, match="out of reach"):
        robot_session.primitives.move_to_position([2.0, 0.0, 0.1])
    robot_session.world.step_seconds(0.3)
    np.testing.assert_allclose(robot_session.world.arm_qpos(), before, atol=5e-3)


def test_unknown_object_is_rejected_before_moving(robot_session):
    robot_session.reset(2)
    before = robot_session.world.arm_qpos()
    with pytest.raises(UnknownObjectError, match="objects present"):
        robot_session.primitives.pick("purple elephant")
    np.testing.assert_allclose(robot_session.world.arm_qpos(), before, atol=1e-6)


def test_move_to_pose_and_go_home(robot_session):
    robot_session.reset(3)
    kin = robot_session.kinematics
    # A pose known to be reachable (a 5-DoF arm cannot hold every orientation everywhere).
    arm = robot_session.world.arm
    goal = kin.forward(np.clip(arm.home + 0.15, arm.lower + 0.05, arm.upper - 0.05))
    target = Pose(goal.position, goal.quat)
    robot_session.primitives.move_to(target)
    assert np.linalg.norm(robot_session.world.ee_pose().position - target.position) < 0.01
    robot_session.primitives.go_home()
    world = robot_session.world
    np.testing.assert_allclose(world.arm_qpos(), world.arm.home, atol=0.03)


def test_gripper_open_and_close(robot_session):
    robot_session.reset(3)
    robot_session.primitives.close_gripper()
    assert robot_session.world.gripper_opening() < 0.1
    robot_session.primitives.open_gripper()
    assert robot_session.world.gripper_opening() > 0.9
