"""Where a skill's episode starts (``vla.eval.start_pose``): at rest, or ``away`` above the table
(a seeded point, its own random stream, reached before the episode's clock starts)."""

from __future__ import annotations

import numpy as np
import pytest

from lang2policy.errors import ConfigError
from lang2policy.vla.eval.start_pose import AWAY_BOX, away_point, check_start, move_to_start


def test_a_start_is_rest_or_away_and_anything_else_is_refused_by_name():
    assert check_start("rest") == "rest" and check_start("away") == "away"
    with pytest.raises(ConfigError, match=r"start must be one of \('rest', 'away'\), got 'home'"):
        check_start("home")


def test_away_points_are_seeded_inside_the_box_and_differ_between_episodes():
    points = np.array([away_point(seed) for seed in range(40)])
    low, high = np.array(AWAY_BOX).T
    assert np.all(points >= low) and np.all(points <= high)
    np.testing.assert_array_equal(away_point(7), away_point(7))
    assert len({tuple(np.round(p, 6)) for p in points}) == 40
    assert not np.allclose(away_point(7, 0), away_point(7, 1))  # a redraw is a new point


def test_the_arm_goes_to_the_away_point_and_a_rest_start_leaves_it_alone():
    pytest.importorskip("mujoco")
    from lang2policy.session.sim import SimSession

    session = SimSession("so101")
    session.reset(3, ["red block"])
    before = session.world.arm_qpos().copy()
    assert move_to_start(session, 11, "rest") is None
    np.testing.assert_array_equal(session.world.arm_qpos(), before)
    block = session.world.object_pose("red block").position.copy()
    point = move_to_start(session, 11, "away")
    assert np.linalg.norm(session.primitives.tool_point() - point) < 0.01
    assert np.linalg.norm(session.world.arm_qpos() - before) > 0.2  # it left the rest posture
    np.testing.assert_allclose(session.world.object_pose("red block").position, block, atol=1e-3)


def test_a_runner_refuses_an_unknown_start():
    pytest.importorskip("mujoco")
    from lang2policy.vla.eval.rollout import RolloutRunner

    with pytest.raises(ConfigError, match="start must be one of"):
        RolloutRunner(start="sideways")
