"""The RL environment: one reward definition with the MPC, goals from the spec, terminations."""

from __future__ import annotations

import numpy as np
import pytest

from lang2policy.mpc.cost import total_cost
from lang2policy.rewards.spec import validate_spec
from lang2policy.rl.env import FAILURE_PENALTY, SUCCESS_BONUS, RewardEnv
from lang2policy.rl.families import FAMILIES, family, family_of
from lang2policy.rl.observation import observation_size
from lang2policy.scene.robot_description import load_robot_description


@pytest.fixture(scope="module")
def reach_env() -> RewardEnv:
    return RewardEnv(FAMILIES["reach"], seed=3)


def _reach_spec(point, height=None, below=0.015) -> dict:
    term = ({"id": "goal", "term": "tool_to_point", "params": {"point": point}} if height is None
            else {"id": "goal", "term": "tool_above",
                  "params": {"point": point, "height": height}})
    return {"task": "reach", "duration": 8, "terms": [term],
            "success": {"all": [{"term": "goal", "below": below}], "hold": 0.5}}


def test_reward_is_minus_the_mpc_cost_of_the_same_spec(reach_env):
    reach_env.reset(seed=5)
    _, reward, terminated, _, info = reach_env.step(np.full(reach_env.arm.dof, 0.3))
    cost, per_term = total_cost(reach_env.spec, reach_env.pm.features_now())
    assert not terminated
    assert reward == pytest.approx(-float(cost[0]))
    assert info["cost"] == pytest.approx(float(cost[0]))
    assert set(per_term) >= {"goal", "table_clearance"}  # default terms are part of it


def test_observation_holds_the_goal_and_its_offset(reach_env):
    obs, info = reach_env.reset(seed=1, options={"spec": _reach_spec([0.2, 0.05, 0.0], 0.1)})
    assert obs.shape == (observation_size(reach_env.arm.dof, 3),)
    assert info["goal"] == pytest.approx([0.2, 0.05, 0.1])
    tool = reach_env.pm.features_now().tool.reshape(3)
    np.testing.assert_allclose(obs[-6:-3], [0.2, 0.05, 0.1], atol=1e-6)
    np.testing.assert_allclose(obs[-3:], np.array([0.2, 0.05, 0.1]) - tool, atol=1e-5)


def test_an_edit_changes_the_goal_at_the_next_step(reach_env):
    reach_env.reset(seed=2, options={"spec": _reach_spec([0.2, 0.0, 0.0], 0.05)})
    higher = validate_spec(_reach_spec([0.2, 0.0, 0.0], 0.12), ()).spec
    reach_env.set_spec(higher)
    obs, *_ = reach_env.step(np.zeros(reach_env.arm.dof))
    assert obs[-4] == pytest.approx(0.12)


def test_success_ends_the_episode_with_the_bonus(reach_env):
    reach_env.reset(seed=4)
    tool = reach_env.pm.features_now().tool.reshape(3)
    # zero actions aim at the measured joints, so the arm sags a little: a loose tolerance
    reach_env.reset(seed=4, options={"spec": _reach_spec([float(v) for v in tool], below=0.08)})
    rewards, info, done = [], {}, False
    while not done:
        _, reward, terminated, truncated, info = reach_env.step(np.zeros(reach_env.arm.dof))
        rewards.append(reward)
        done = terminated or truncated
    assert info["status"] == "success" and info["is_success"]
    assert rewards[-1] > SUCCESS_BONUS - 1.0
    assert len(rewards) <= 20  # held 0.5 s at 0.05 s per step, plus settling


def full_speed(env: RewardEnv):
    """A step toward targets far from the joints through ``step_targets``: the policy's
    action would be shrunk under move_slowly's speed limit, another controller's targets
    are not."""
    return env.step_targets(env.pm.data.qpos[env.arm.qpos_adr] + 0.3)


def test_failure_costs_the_rest_of_the_episode():
    env = RewardEnv(FAMILIES["move_slowly"], seed=0)
    env.reset(seed=0)
    total, info = 0.0, {}
    for _ in range(env.max_steps):
        _, reward, terminated, truncated, info = full_speed(env)
        total += reward
        if terminated or truncated:
            break
    assert info["status"] == "failed"  # full-speed joints break the speed limit
    assert total < -10.0


def test_training_runs_on_after_a_failure_without_success():
    env = RewardEnv(FAMILIES["move_slowly"], seed=0, end_on_failure=False)
    env.reset(seed=0)
    statuses, done, steps = [], False, 0
    while not done:
        _, _, terminated, truncated, info = full_speed(env)
        statuses.append(info["status"])
        done, steps = terminated or truncated, steps + 1
    assert statuses[0] == "failed" and statuses[-1] == "failed"
    assert steps == env.max_steps and truncated and not terminated
    env.reset(seed=0)
    first = full_speed(env)[1]
    second = full_speed(env)[1]
    assert first < second - FAILURE_PENALTY / 2  # the break is paid for once


def test_families_recognise_their_specs_and_refuse_others():
    reach = validate_spec(_reach_spec([0.2, 0.1, 0.05]), ()).spec
    drawn = FAMILIES["move_slowly"].draw(load_robot_description("so101"),
                                         np.random.default_rng(0))
    slow = validate_spec(drawn, ()).spec
    lift = validate_spec({"task": "lift", "terms": [
        {"term": "object_height", "params": {"object": "red block", "height": 0.1}}]},
        ["red block"]).spec
    place = validate_spec({"task": "place", "terms": [
        {"term": "object_on", "params": {"object": "red block", "target": "blue bowl"}}]},
        ["red block", "blue bowl"]).spec
    stack = validate_spec({"task": "stack", "terms": [
        {"term": "object_on", "params": {"object": "red block", "target": "blue block"}}]},
        ["red block", "blue block"]).spec
    assert family_of(reach)[0].name == "reach"
    assert family_of(reach)[1] == pytest.approx([0.2, 0.1, 0.05])
    assert family_of(slow)[0].name == "move_slowly" and len(family_of(slow)[1]) == 4
    assert family_of(lift)[0].name == "lift" and family_of(lift)[1] == pytest.approx([0.1])
    assert family_of(place)[0].name == "place"
    assert family_of(stack) is None  # on a block: no family, the MPC plans it
    with pytest.raises(Exception, match="valid families"):
        family("juggle")


def test_lift_episodes_put_the_block_on_the_table_and_work_the_gripper():
    env = RewardEnv(FAMILIES["lift"], seed=0)
    obs, _ = env.reset(seed=7)
    assert env.action_space.shape == (5,)  # a tool move (3), a turn of the jaws, the gripper
    assert obs.shape == env.observation_space.shape
    block = env.pm.features_now().objects["red block"]
    assert abs(float(block["pos"][..., 2].ravel()[0]) - block["rest_z"]) < 0.005
    closed = np.zeros(5)
    closed[-1] = -1.0
    for _ in range(10):
        env.step(closed)
    assert float(env.pm.features_now().gripper.ravel()[0]) < 0.2


def test_training_goals_differ_from_evaluation_goals():
    env = RewardEnv(FAMILIES["reach"])
    train = {tuple(np.round(env.reset(seed=s)[1]["goal"], 4)) for s in range(20)}
    held_out = {tuple(np.round(env.reset(seed=10**6 + s)[1]["goal"], 4)) for s in range(20)}
    assert len(train) == 20 and not train & held_out
