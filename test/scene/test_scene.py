"""The tabletop world: every robot's scene loads, resets deterministically, steps cleanly."""

import math

import numpy as np
import pytest

from lang2policy.errors import ConfigError, UnknownObjectError
from lang2policy.scene.layout import footprint_radius
from lang2policy.scene.objects import COLORS
from lang2policy.scene.robot_description import available_robots
from lang2policy.scene.world import World

ROBOTS = available_robots()


@pytest.fixture(scope="module", params=ROBOTS)
def robot_world(request) -> World:
    return World(request.param)


def test_both_arms_are_described():
    assert {"so101", "panda"} <= set(ROBOTS)


def test_pool_has_eight_or_more_colours_of_blocks_and_bowls(robot_world):
    names = set(robot_world.objects)
    assert len(COLORS) >= 8
    for color in ("red", "green", "blue", "yellow", "orange", "purple", "pink", "cyan"):
        assert {f"{color} block", f"{color} bowl"} <= names


def test_scene_has_front_top_and_wrist_cameras(robot_world):
    cameras = {robot_world.model.camera(i).name for i in range(robot_world.model.ncam)}
    assert {"front", "top", "wrist"} <= cameras


def test_joint_names_and_limits_come_from_the_model(robot_world):
    arm = robot_world.arm
    for name, lo, hi in zip(arm.joint_names, arm.lower, arm.upper, strict=True):
        assert tuple(robot_world.model.joint(name).range) == (lo, hi)
    assert robot_world.arm.dof == (5 if robot_world.description.name == "so101" else 7)


def test_reset_is_deterministic_under_a_seed(robot_world):
    first = robot_world.reset(7)
    poses_a = {n: robot_world.object_pose(n).position.copy() for n in first}
    robot_world.reset(123)
    second = robot_world.reset(7)
    assert first == second
    for name in first:
        np.testing.assert_allclose(robot_world.object_pose(name).position, poses_a[name], atol=1e-9)


def test_different_seeds_give_different_layouts(robot_world):
    layouts = {tuple(robot_world.reset(seed)) for seed in range(6)}
    assert len(layouts) > 1


def test_layouts_are_on_the_table_reachable_and_apart(robot_world):
    ws, sizes = robot_world.description.workspace, robot_world.description.objects
    for seed in range(10):
        names = robot_world.reset(seed)
        assert 2 <= len(names) <= ws.max_objects
        spots = {n: robot_world.object_pose(n).position for n in names}
        for name, pos in spots.items():
            assert ws.x[0] <= pos[0] <= ws.x[1] and ws.y[0] <= pos[1] <= ws.y[1]
            assert ws.min_radius <= math.hypot(pos[0], pos[1]) <= ws.max_radius
            assert -0.005 < pos[2] < 0.05, f"{name} is not resting on the table"
        for a in names:
            for b in names:
                if a < b:
                    gap = np.linalg.norm(spots[a][:2] - spots[b][:2])
                    assert gap >= footprint_radius(a, sizes) + footprint_radius(b, sizes)


def test_stepping_keeps_the_state_finite(robot_world):
    robot_world.reset(3)
    robot_world.set_arm_targets(robot_world.arm.home + 0.1, 0.5)
    robot_world.step(500)
    assert np.all(np.isfinite(robot_world.data.qpos)) and np.all(np.isfinite(robot_world.data.qvel))


def test_readouts(robot_world):
    names = robot_world.reset(5)
    ee = robot_world.ee_pose()
    assert ee.position.shape == (3,) and abs(np.linalg.norm(ee.quat) - 1) < 1e-6
    assert 0.9 < robot_world.gripper_opening() <= 1.0
    assert robot_world.object_names() == names
    assert robot_world.relations() == []
    assert all("table" in pair for pair in robot_world.contacts() if "robot" not in pair)


def test_in_and_on_relations_follow_the_simulator_state(robot_world):
    robot_world.reset(0, ["red block", "blue block", "green bowl"])
    bowl = robot_world.object_pose("green bowl").position
    robot_world._set_object("red block", bowl[0], bowl[1], 0.03, 0.0)
    robot_world.step_seconds(0.5)
    assert robot_world.is_in("red block", "green bowl")
    assert not robot_world.is_in("blue block", "green bowl")
    red = robot_world.object_pose("red block").position
    robot_world._set_object("blue block", red[0], red[1], red[2] + 0.06, 0.0)
    robot_world.step_seconds(0.8)
    assert robot_world.is_on("blue block", "red block")
    assert ("blue block", "on", "red block") in robot_world.relations()


def test_unknown_names_are_rejected_with_the_valid_choices(robot_world):
    robot_world.reset(1, ["red block", "red bowl"])
    with pytest.raises(UnknownObjectError, match="objects present"):
        robot_world.object_pose("purple elephant")
    with pytest.raises(UnknownObjectError, match="not in the pool"):
        robot_world.reset(1, ["purple elephant"])


def test_unknown_robot_lists_the_available_ones():
    with pytest.raises(ConfigError, match="available robots"):
        World("r2d2")
