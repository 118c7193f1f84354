"""The action mapping (``rl.actions``): a speed-limited family's joint offsets are shrunk so the
tool speed they ask for stays under the goal's limit, in one direction, and the simulated arm
then really moves under it; families without a limit get their offsets unchanged."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from lang2policy.rl.actions import (
    SERVO_LAG,
    TOOL_STEP,
    arm_targets,
    speed_factor,
    tool_targets,
)
from lang2policy.rl.env import RewardEnv
from lang2policy.rl.families import family


@pytest.fixture(scope="module")
def slow_env():
    return RewardEnv(family("move_slowly"), seed=0)


def tool_jacobian(env: RewardEnv) -> np.ndarray:
    jacp = np.zeros((3, env.pm.model.nv))
    mujoco.mj_jacSite(env.pm.model, env.pm.data, jacp, None, env.arm.ee_site_id)
    return jacp[:, env.arm.dof_adr]


def test_a_speed_limit_shrinks_the_offset_without_turning_it(slow_env):
    slow_env.reset(seed=3)
    q = slow_env.pm.data.qpos[slow_env.arm.qpos_adr].copy()
    action = np.array([1.0, -1.0, 0.5, 0.0, 0.0])  # joint 4 of this start is at its limit
    free = arm_targets(slow_env.pm, action, 0.08) - q
    capped = arm_targets(slow_env.pm, action, 0.08, speed_limit=0.03) - q
    assert np.allclose(free, 0.08 * action)
    assert np.linalg.norm(capped) < np.linalg.norm(free)
    cosine = capped @ free / (np.linalg.norm(capped) * np.linalg.norm(free))
    assert cosine == pytest.approx(1.0, abs=1e-9)
    asked = np.linalg.norm(tool_jacobian(slow_env) @ capped)
    assert asked == pytest.approx(0.03 * SERVO_LAG, rel=1e-6)


def test_a_small_offset_under_the_limit_is_left_alone(slow_env):
    slow_env.reset(seed=3)
    assert speed_factor(slow_env.pm, np.full(5, 1e-5), 0.05) == 1.0
    assert speed_factor(slow_env.pm, np.full(5, 0.05), 0.0) == 0.0


def test_full_actions_move_the_tool_under_the_limit_in_the_episode(slow_env):
    """The arm driven at full action for 2 s, then reversed: the spec's speed condition
    never breaks and the tool stays within 20 % of the limit."""
    _, info = slow_env.reset(seed=1_000_004)
    limit = info["goal"][3]
    fastest = 0.0
    for step in range(80):
        sign = 1.0 if step < 40 else -1.0
        _, _, ended, _, step_info = slow_env.step(sign * np.array([0.6, -1.0, 1.0, 0.5, 0.0]))
        fastest = max(fastest, float(np.linalg.norm(slow_env.pm.features_now().tool_vel)))
        assert step_info["status"] != "failed"
        if ended:
            break
    assert 0.3 * limit < fastest < 1.2 * limit


def at_home(env: RewardEnv) -> None:
    """A fresh episode with the arm at rest at home (random starts can sit on a joint limit,
    where no mapping moves the tool every way)."""
    env.reset(seed=11)
    arm, data = env.arm, env.pm.data
    data.qpos[arm.qpos_adr] = data.ctrl[arm.actuator_ids] = arm.home
    data.qvel[:] = 0.0
    mujoco.mj_step(env.pm.model, data, 60)
    env.pm.features_now()


def tool_at(env: RewardEnv, q: np.ndarray) -> np.ndarray:
    """Where the tool centre is with the arm at ``q`` (forward kinematics on a scratch copy)."""
    scratch = mujoco.MjData(env.pm.model)
    scratch.qpos[:] = env.pm.data.qpos
    scratch.qpos[env.arm.qpos_adr] = q
    mujoco.mj_kinematics(env.pm.model, scratch)
    site = env.arm.ee_site_id
    return scratch.site_xpos[site] + scratch.site_xmat[site].reshape(3, 3) @ env.pm.center_offset


def test_a_tool_action_aims_the_tool_where_it_asks(lift_env):
    """At home (the wrist 0.06 rad from its limit) the targets of a full action along each
    axis put the tool up to TOOL_STEP that way and little else: the wrist stops at its limit,
    the others make up for it."""
    at_home(lift_env)
    q = lift_env.pm.data.qpos[lift_env.arm.qpos_adr].copy()
    start = tool_at(lift_env, q)
    for axis in range(3):
        for sign in (1.0, -1.0):
            action = np.zeros(5)
            action[axis] = sign
            targets = tool_targets(lift_env.pm, action, 0.15)
            assert np.all(targets <= lift_env.arm.upper) and np.all(targets >= lift_env.arm.lower)
            moved = tool_at(lift_env, targets) - start
            # that way (shorter where a joint would move more than the action scale)
            assert 0.4 * TOOL_STEP < sign * moved[axis] < 1.3 * TOOL_STEP
            assert np.linalg.norm(np.delete(moved, axis)) < 0.3 * abs(moved[axis])


def test_the_arm_follows_tool_actions(lift_env):
    """Closed loop on the servos: six full steps along an axis move the tool a few cm that way."""
    for axis in range(3):
        at_home(lift_env)
        start = lift_env.pm.features_now().tool.reshape(3).copy()
        action = np.zeros(5)
        action[axis] = 1.0
        for _ in range(6):
            lift_env.step(action)
        moved = lift_env.pm.features_now().tool.reshape(3) - start
        assert moved[axis] > 0.03 and moved[axis] > 0.8 * np.linalg.norm(moved)


def test_a_turn_action_turns_the_jaws_about_the_vertical(lift_env):
    lift_env.reset(seed=11)
    features = lift_env.pm.features_now()
    before = np.arctan2(*features.closing_axis.reshape(3)[1::-1])
    for _ in range(4):
        lift_env.step(np.array([0.0, 0.0, 0.0, 1.0, 0.0]))
    after = np.arctan2(*lift_env.pm.features_now().closing_axis.reshape(3)[1::-1])
    assert 0.1 < (after - before + np.pi) % (2 * np.pi) - np.pi < 1.0


def test_tool_offsets_never_exceed_the_action_scale(lift_env):
    lift_env.reset(seed=11)
    q = lift_env.pm.data.qpos[lift_env.arm.qpos_adr].copy()
    targets = tool_targets(lift_env.pm, np.ones(5), 0.15)
    assert np.abs(targets - q).max() <= 0.15 + 1e-9
