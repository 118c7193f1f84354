"""The action mapping (``rl.actions``): a speed-limited family's joint offsets are shrunk so the
tool speed they ask for stays under the goal's limit, in one direction, and the simulated arm
then really moves under it; families without a limit get their offsets unchanged."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from lang2policy.rl.actions import SERVO_LAG, arm_targets, speed_factor
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
