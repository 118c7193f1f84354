"""A block put in a bowl goes clear of the blocks already in it."""

from __future__ import annotations

import numpy as np
import pytest

from lang2policy.control.bowl_spot import spot_in_bowl
from lang2policy.scene.objects import BOWL_WALL_THICKNESS
from lang2policy.session.sim import SimSession

RADIUS, HALF = 0.042, 0.0125  # the SO-101's bowl and block
INSIDE = RADIUS - BOWL_WALL_THICKNESS  # the wall's inner face


def test_an_empty_bowl_takes_the_block_at_its_centre():
    assert np.allclose(spot_in_bowl((0.2, 0.1, 0.0), RADIUS, HALF, []), (0.2, 0.1))


def test_beside_a_block_the_spot_is_a_blocks_width_away_inside_the_rim():
    centre = np.array([0.2, 0.1])
    spot = spot_in_bowl(centre, RADIUS, HALF, [centre])
    assert np.linalg.norm(spot - centre) >= 2 * HALF  # clear of the block at the centre
    assert np.linalg.norm(spot - centre) + HALF <= INSIDE + 1e-9  # and of the wall
    aside = centre + np.array([0.01, 0.0])
    spot = spot_in_bowl(centre, RADIUS, HALF, [aside])
    assert spot[0] < centre[0]  # the far side from a block off the centre


@pytest.mark.parametrize("robot", ["so101", "panda"])
def test_two_blocks_put_in_one_bowl_in_turn_both_rest_in_it(robot):
    """Each instruction names the bowl alone; the second block used to land on the first."""
    session = SimSession(robot)
    session.reset(0, ["blue block", "cyan block", "green bowl"])
    for block in ("blue block", "cyan block"):
        session.primitives.put_first_on_second(block, "green bowl")
        session.primitives.go_home()
    session.world.step_seconds(0.5)
    world = session.world
    assert world.is_in("blue block", "green bowl") and world.is_in("cyan block", "green bowl")
    blue, cyan = (world.object_pose(b).position for b in ("blue block", "cyan block"))
    half = world.description.objects.block_half
    assert np.linalg.norm(blue[:2] - cyan[:2]) > 1.5 * half  # beside it, not on it
    assert abs(blue[2] - cyan[2]) < 1.5 * half  # at most leaning on it (on it: 2 x half up)
