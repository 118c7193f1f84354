"""The block in the jaws, from the arm's own state (perception.holding): real MuJoCo physics,
the motion primitives moving the simulated SO-101, the top camera rendered while it moves.

A top camera alone places a lifted block on the table and loses a block the arm has just let
go into a bowl: the tests check that camera perception, given the joint states, reports the
lifted block at its true height and the placed block inside the bowl while the arm is still
over it, and that nothing is taken for held when the jaws close on nothing.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

from lang2policy.perception import CameraPerception, sim_camera_pose
from lang2policy.perception.holding import HeldBlock, Surfaces, Tool
from lang2policy.perception.records import PerceivedObject
from lang2policy.perception.scene import sim_intrinsics
from lang2policy.scene.render import CameraRenderer
from lang2policy.session.sim import SimSession

ROBOT, CAMERA, SIZE = "so101", "top", 224
EVERY = 5  # control steps between frames (10 Hz at the 50 Hz control rate)


class Watcher:
    """Renders the top camera every ``EVERY`` control steps into a ``CameraPerception``."""

    def __init__(self, session: SimSession) -> None:
        self.session, self.steps = session, 0
        self.renderer = CameraRenderer(session.world.model, SIZE, SIZE)
        self.perception = CameraPerception(
            ROBOT, sim_camera_pose(ROBOT, CAMERA), max_missed=3, confirm=3
        )
        self.perception.set_intrinsics(sim_intrinsics(ROBOT, CAMERA, SIZE, SIZE))
        session.robot.observers.append(self.tick)

    def tick(self) -> None:
        self.steps += 1
        if self.steps % EVERY == 0:
            self.look()

    def look(self) -> None:
        world = self.session.world
        joints = [*world.arm_qpos(), world.gripper_opening()]
        now = world.data.time
        self.perception.set_joints(dict(zip(world.arm.action_names, joints, strict=True)), now)
        self.perception.process(self.renderer.render(world.data, CAMERA), now)

    def seen(self, name: str) -> np.ndarray | None:
        found = {o.name: o for o in self.perception.objects}
        return np.array(found[name].position) if name in found else None


@pytest.fixture()
def watched():
    session = SimSession(ROBOT)
    names = session.reset(1)
    watcher = Watcher(session)
    for _ in range(3):
        watcher.look()
    yield session, watcher, names
    watcher.renderer.close()


def test_a_lifted_block_is_where_the_jaws_are_and_a_placed_one_in_its_bowl(watched):
    session, watcher, names = watched
    block = next(n for n in names if n.endswith("block"))
    bowl = next(n for n in names if n.endswith("bowl"))
    rest = session.world.object_pose(block).position.copy()
    session.primitives.pick(block)  # grasped, then lifted
    watcher.look()
    truth = session.world.object_pose(block).position
    seen = watcher.seen(block)
    print(f"\nlifted {block}: true z {truth[2]:.3f}, seen z {seen[2]:.3f} (rest {rest[2]:.3f})")
    assert truth[2] - rest[2] > 0.03, "the primitive lifted the block"
    assert watcher.perception.holding.name == block
    assert np.linalg.norm(seen - truth) < 0.01  # not on the table where the camera puts it

    drop = session.primitives.drop_point(block, bowl)
    session.primitives.place_at(drop)  # let go into the bowl, then back up above it
    watcher.look()
    bowl_at = session.world.object_pose(bowl).position
    seen = watcher.seen(block)
    assert session.world.is_in(block, bowl)
    assert watcher.perception.holding.name is None
    inside = math.dist(seen[:2], bowl_at[:2])
    print(f"placed: {inside * 100:.1f} cm from the bowl's centre, seen z {seen[2]:.3f}")
    assert inside < 0.02 and seen[2] < 0.03


def test_jaws_closed_on_nothing_hold_nothing(watched):
    session, watcher, names = watched
    session.primitives.close_gripper()
    session.primitives.open_gripper()
    watcher.look()
    assert watcher.perception.holding.name is None
    assert {o.name for o in watcher.perception.objects} == set(names)


def surfaces() -> Surfaces:
    return Surfaces(table_z=0.0, block_half=0.0125, bowl_base=0.0065)


def tool(x: float, y: float, z: float, opening: float) -> Tool:
    return Tool(np.array([x, y, z]), np.eye(3), opening)


def test_held_block_rules_without_a_camera():
    red = PerceivedObject("red block", (0.20, 0.0, 0.0125))
    bowl = PerceivedObject("blue bowl", (0.10, 0.10, 0.0), kind="bowl", size=0.046)
    held = HeldBlock(surfaces())
    objects = [red, bowl]
    assert held.follow(tool(0.2, 0.0, 0.02, 1.0), objects) is None  # open jaws
    assert held.follow(tool(0.2, 0.0, 0.02, 0.6), objects) is None  # closing: not steady
    assert held.follow(tool(0.2, 0.0, 0.02, 0.21), objects) is None  # still moving
    carried = held.follow(tool(0.2, 0.0, 0.02, 0.21), objects)  # stopped on the block
    assert held.name == "red block" and carried.position == pytest.approx((0.2, 0.0, 0.0125))
    carried = held.follow(tool(0.1, 0.1, 0.10, 0.21), objects)
    assert carried.position == pytest.approx((0.1, 0.1, 0.0925))  # moved with the tool
    assert held.follow(tool(0.1, 0.1, 0.10, 0.6), objects).position[2] == pytest.approx(0.0925)
    let_go = held.follow(tool(0.1, 0.1, 0.10, 0.6), objects)  # opened and steady: let go
    assert held.name is None
    assert let_go.position == pytest.approx((0.1, 0.1, 0.0125 + 0.0065))  # on the bowl floor
    for _ in range(3):  # closed on nothing beside a block out of reach: nothing held
        assert held.follow(tool(0.3, 0.1, 0.02, 0.0), objects) is None
    assert held.name is None
