"""The controller's RL backend (no ROS): ``PolicyPlanner`` runs a family's policy at its control
period and the MPC for every other spec; ``backend_settings`` and ``load_policies`` refuse bad
settings with reasons; in ``RealtimeMPC`` the shipped reach policy drives a simulated arm to a
goal.

Plumbing tests use an ``MLPPolicy`` with random weights; the closed-loop test needs a trained
policy: ``models/rl-reach-so101`` (or the directory in ``LANG2POLICY_TEST_RL_REACH``), and is
skipped without one.
"""

from __future__ import annotations

import threading

import mujoco
import numpy as np
import pytest
from support.rl import trained_reach_policy

from lang2policy.errors import ConfigError
from lang2policy.mpc.model import PlanningModel
from lang2policy.mpc.realtime import RealtimeMPC
from lang2policy.mpc.sampler import MPCConfig
from lang2policy.rewards.spec import validate_spec
from lang2policy.rl.actions import SERVO_LAG
from lang2policy.rl.observation import observation_size
from lang2policy.rl.planner import LEAD, PolicyPlanner, backend_settings, load_policies
from lang2policy.rl.policy_file import CONFIG_FILE, MLPPolicy, PolicyFileError, load_policy
from lang2policy.scene.world import World

CONFIG = MPCConfig(samples=8, threads=1, proposals=False)
PERIOD = 0.05  # s: the control period the random policies say they were trained at
FACTORY = "lang2policy.rl.planner:policy_sampler"


def random_policy(dof: int, family: str = "reach", robot: str = "so101",
                  goal_size: int = 3, seed: int = 0) -> MLPPolicy:
    rng = np.random.default_rng(seed)
    size = observation_size(dof, goal_size)
    return MLPPolicy(family=family, robot=robot,
                     weights=[rng.normal(0, 0.3, (16, size)), rng.normal(0, 0.3, (dof, 16))],
                     biases=[np.zeros(16), np.zeros(dof)],
                     obs_mean=np.zeros(size), obs_var=np.ones(size),
                     action_scale=0.15, control_period=PERIOD)


def reach_spec(point, height: float | None = None, duration: float = 8.0, below=0.015):
    term = ({"id": "goal", "term": "tool_to_point", "params": {"point": list(point)}}
            if height is None else
            {"id": "goal", "term": "tool_above",
             "params": {"point": list(point), "height": height}})
    return validate_spec({"task": "reach", "duration": duration, "terms": [term],
                          "success": {"all": [{"term": "goal", "below": below}],
                                      "hold": 0.5}}, ()).spec


def unserved_spec():
    """A spec no family serves: a point with a keep-out box (two task terms)."""
    return validate_spec({"task": "avoid", "duration": 8, "terms": [
        {"id": "goal", "term": "tool_to_point", "params": {"point": [0.2, 0.12, 0.06]}},
        {"id": "box", "term": "keep_out", "weight": 50.0,
         "params": {"point": [0.2, 0.05, 0.03], "half_size": [0.04, 0.02, 0.03]}}]}, ()).spec


class Recorder:
    """Wraps a policy's ``act``: counts queries and keeps the observations."""

    def __init__(self, policy: MLPPolicy) -> None:
        self.act, self.observations = policy.act, []
        policy.act = self

    def __call__(self, observation: np.ndarray) -> np.ndarray:
        self.observations.append(np.array(observation))
        return self.act(observation)


@pytest.fixture
def policy_planner():
    pm = PlanningModel("so101", (), CONFIG.timestep)
    policy = random_policy(pm.arm.dof)
    recorder = Recorder(policy)
    planner = PolicyPlanner(pm, CONFIG, {"reach": policy})
    planner.reset(start=0.0)
    yield planner, recorder
    planner.close()


def load_state(pm: PlanningModel, time: float, q: np.ndarray) -> None:
    """A measured state in the planning model: arm at ``q``, at rest, controls at ``q``."""
    pm.data.time = time
    pm.data.qpos[pm.arm.qpos_adr] = q
    pm.data.qvel[:] = 0.0
    pm.data.ctrl[pm.arm.actuator_ids] = q
    mujoco.mj_forward(pm.model, pm.data)


# --------------------------------------------------------------------------- the planner
def test_a_reach_spec_runs_the_policy_and_other_specs_the_mpc(policy_planner):
    policy_planner, recorder = policy_planner
    pm = policy_planner.pm
    load_state(pm, 0.0, pm.arm.home)
    plan = policy_planner.improve(reach_spec([0.2, 0.05, 0.0], height=0.1))
    assert policy_planner.backend == "rl:reach" and len(recorder.observations) == 1
    assert np.isnan(plan.cost)  # no rollouts: the policy's targets, held over the horizon
    assert np.ptp(plan.knots, axis=0) == pytest.approx(np.zeros(pm.model.nu))
    targets = plan.knots[0, pm.arm.actuator_ids]
    assert np.all(np.abs(targets - pm.arm.home) <= 0.15 + 1e-9)  # action_scale around q

    plan = policy_planner.improve(unserved_spec())
    assert policy_planner.backend == "mpc" and len(recorder.observations) == 1
    assert np.isfinite(plan.cost)  # a sampler iteration judged its rollouts


def test_the_policy_is_asked_once_per_control_period_and_held_between(policy_planner):
    policy_planner, recorder = policy_planner
    pm = policy_planner.pm
    spec = reach_spec([0.22, -0.05, 0.08])
    rng = np.random.default_rng(1)
    held = []
    for k in range(21):  # 0.2 s of measured time at 100 Hz, the arm moving under it
        load_state(pm, 0.01 * k, pm.arm.home + rng.uniform(-0.05, 0.05, pm.arm.dof))
        plan = policy_planner.improve(spec)
        held.append(plan.knots[0, pm.arm.actuator_ids])
    assert len(recorder.observations) == 5  # at 0.00, 0.05, 0.10, 0.15 and 0.20 s
    for step in range(4):  # between two queries the targets do not move
        block = np.array(held[5 * step: 5 * step + 5])
        np.testing.assert_array_equal(block, np.broadcast_to(block[0], block.shape))
    assert not np.array_equal(held[0], held[5])


def test_an_edit_changes_the_goal_at_the_next_policy_step(policy_planner):
    policy_planner, recorder = policy_planner
    pm = policy_planner.pm
    low, high = reach_spec([0.2, 0.0, 0.0], height=0.05), reach_spec([0.2, 0.0, 0.0], height=0.07)
    load_state(pm, 0.0, pm.arm.home)
    policy_planner.improve(low)
    load_state(pm, 0.02, pm.arm.home)
    policy_planner.improve(high)  # the edit arrives between two policy steps: targets held
    assert len(recorder.observations) == 1
    load_state(pm, PERIOD, pm.arm.home)
    policy_planner.improve(high)
    before, after = recorder.observations
    np.testing.assert_allclose(before[-6:-3], [0.2, 0.0, 0.05], atol=1e-6)  # goal
    np.testing.assert_allclose(after[-6:-3], [0.2, 0.0, 0.07], atol=1e-6)
    np.testing.assert_allclose(after[-3:] - before[-3:], [0.0, 0.0, 0.02], atol=1e-6)  # offset


def test_states_every_20_ms_still_give_a_policy_step_every_50_ms_on_average(policy_planner):
    policy_planner, recorder = policy_planner
    pm = policy_planner.pm
    spec = reach_spec([0.22, -0.05, 0.08])
    for k in range(21):  # 0.4 s of measured time at the sim node's 50 Hz
        load_state(pm, 0.02 * k, pm.arm.home)
        policy_planner.improve(spec)
    assert len(recorder.observations) == 9  # 0, .06, .10, .16, .20, .26, .30, .36, .40 s


def test_a_lead_shows_the_policy_the_state_its_targets_will_meet(policy_planner):
    policy_planner, recorder = policy_planner
    pm = policy_planner.pm
    spec = reach_spec([0.22, -0.05, 0.08])
    commanded = pm.arm.home + 0.3  # the targets being commanded pull every joint on
    for lead in (0.0, LEAD):
        policy_planner.lead = lead
        policy_planner.reset(start=0.0)
        load_state(pm, 1.0, pm.arm.home)
        pm.data.ctrl[pm.arm.actuator_ids] = commanded
        plan = policy_planner.improve(spec)
        assert plan.start == 1.0  # the plan stays in measured time
    dof = pm.arm.dof
    still, ahead = (o[:dof] for o in recorder.observations)
    np.testing.assert_allclose(still, pm.arm.home, atol=1e-6)
    assert np.all((ahead - pm.arm.home) * (commanded - pm.arm.home) > 0)  # moved toward them
    assert np.all(np.abs(ahead - pm.arm.home) < 0.3)


def test_a_speed_limited_policy_asks_for_no_more_than_the_specs_speed():
    """move_slowly: the planner shrinks the policy's offset as training did, so the tool speed
    the targets ask for is the spec's limit (a random policy asks for far more)."""
    pm = PlanningModel("so101", (), CONFIG.timestep)
    policy = random_policy(pm.arm.dof, family="move_slowly", goal_size=4)
    planner = PolicyPlanner(pm, CONFIG, {"move_slowly": policy})
    spec = validate_spec({"task": "slowly", "duration": 20, "terms": [
        {"id": "goal", "term": "tool_to_point", "params": {"point": [0.25, 0.1, 0.05]}},
        {"id": "speed", "term": "tool_speed", "params": {"speed": 0.03, "mode": "at_most"}}]},
        ()).spec
    try:
        planner.reset(start=0.0)
        load_state(pm, 0.0, pm.arm.home)
        plan = planner.improve(spec)
        assert planner.backend == "rl:move_slowly"
        offset = plan.knots[0, pm.arm.actuator_ids] - pm.arm.home
        jacp = np.zeros((3, pm.model.nv))
        mujoco.mj_jacSite(pm.model, pm.data, jacp, None, pm.arm.ee_site_id)
        asked = np.linalg.norm(jacp[:, pm.arm.dof_adr] @ offset)
        assert 0.0 < asked <= 0.03 * SERVO_LAG + 1e-9
    finally:
        planner.close()


# --------------------------------------------------------------------------- settings
def test_backend_settings_refuse_unknown_backends_and_bad_policy_directories(tmp_path):
    with pytest.raises(ConfigError, match=r"'bogus' is not one of \['mpc', 'rl'\]"):
        backend_settings("bogus", "so101")
    assert backend_settings("mpc", "so101") == {}
    with pytest.raises(PolicyFileError, match=r"cannot read the RL policy in .*nowhere"):
        backend_settings("rl", "so101", str(tmp_path / "nowhere"))
    saved = random_policy(6).save(tmp_path / "bad")
    (saved / CONFIG_FILE).write_text("{not json")
    with pytest.raises(PolicyFileError, match=r"cannot read the RL policy in .*bad"):
        backend_settings("rl", "so101", str(saved))
    (saved / CONFIG_FILE).write_text('{"format": "something else"}')
    with pytest.raises(PolicyFileError, match="is not a lang2policy-rl-mlp/1 policy"):
        backend_settings("rl", "so101", str(saved))
    truncated = random_policy(6).save(tmp_path / "truncated")
    config = (truncated / CONFIG_FILE).read_text().replace('"layers": 2', '"layers": 3')
    (truncated / CONFIG_FILE).write_text(config)
    with pytest.raises(PolicyFileError, match="missing or has a bad entry"):
        load_policy(truncated)


def test_backend_settings_name_the_planner_and_the_policies(tmp_path):
    pm = PlanningModel("so101", (), CONFIG.timestep)
    directory = random_policy(pm.arm.dof).save(tmp_path / "reach")
    settings = backend_settings("rl", "so101", f" {directory} ,")
    assert settings == {"sampler_factory": FACTORY,
                        "sampler_options": {"robot": "so101", "policies": [str(directory)],
                                            "lead": LEAD},
                        "families": ["reach"]}


def test_a_policy_for_another_robot_or_family_is_refused(tmp_path):
    other = random_policy(6, robot="koch").save(tmp_path / "koch")
    with pytest.raises(ConfigError, match="is for the koch, not the so101"):
        load_policies([other], "so101")
    unknown = random_policy(6, family="juggle").save(tmp_path / "juggle")
    with pytest.raises(ConfigError, match=r"unknown family 'juggle'; valid families: \['reach'"):
        load_policies([unknown], "so101")
    # a lift policy from before the tool action: six outputs (5 joints and the gripper)
    old_lift = random_policy(6, family="lift", goal_size=1).save(tmp_path / "old-lift")
    with pytest.raises(ConfigError, match="writes 6; the lift family on the so101 has 35 and 5"):
        load_policies([old_lift], "so101")


# --------------------------------------------------------------------------- closed loop
STEP = 0.01  # s of simulated time between two measured states


class LockstepPlant:
    """An arm in a World fed to ``RealtimeMPC`` one state at a time: each state is planned on
    before the arm moves on, so the loop does not depend on machine load."""

    def __init__(self, mpc: RealtimeMPC) -> None:
        self.world, self.mpc = World("so101"), mpc
        self.world.reset(0, objects=[])  # an empty table, as the reach policy was trained on
        self.offset = np.array(self.world.description.grasp.center_offset)
        self.planned = threading.Event()

    def state(self) -> tuple[float, dict[str, float], dict]:
        w = self.world
        joints = dict(zip(w.arm.joint_names, (float(q) for q in w.arm_qpos()), strict=True))
        velocities = dict(zip(w.arm.joint_names, (float(v) for v in w.arm_qvel()),
                              strict=True))
        joints["gripper"], velocities["gripper"] = w.gripper_opening(), 0.0
        return w.time, joints, {}, velocities

    def tool(self) -> np.ndarray:
        w = self.world
        mujoco.mj_kinematics(w.model, w.data)
        site = w.arm.ee_site_id
        return w.data.site_xpos[site] + w.data.site_xmat[site].reshape(3, 3) @ self.offset

    def step(self) -> None:
        self.planned.clear()
        self.mpc.update_state(*self.state())
        assert self.planned.wait(10), "the planning thread did not take the state"
        action = self.mpc.action(self.world.time)
        joints = np.array([action[n] for n in self.world.arm.joint_names])
        self.world.set_arm_targets(joints, action["gripper"])
        self.world.step_seconds(STEP)


def test_realtime_mpc_with_the_rl_backend_drives_the_arm_to_a_reach_goal():
    policy = trained_reach_policy()
    plant = None
    mpc = RealtimeMPC("so101", CONFIG, log=lambda _: None, info=lambda _: None,
                      sampler_factory=FACTORY,
                      sampler_options={"robot": "so101", "policies": [str(policy)]},
                      on_iteration=lambda: plant.planned.set())
    plant = LockstepPlant(mpc)
    goal = np.array([0.22, -0.10, 0.08])
    with mpc:
        plant.step()  # a first state: the controller holds it
        start = plant.tool()
        mpc.set_spec(reach_spec([*goal[:2].tolist(), 0.0], height=float(goal[2]), duration=8))
        while mpc.active and plant.world.time < 10.0:
            plant.step()
        stats = mpc.stats()
        error = np.linalg.norm(plant.tool() - goal)
        ended = plant.world.time
        while plant.world.time < ended + 1.0:  # the task is over: the arm holds
            plant.step()
    print(f"rl backend in RealtimeMPC: {stats.status} after {ended:.2f} s, "
          f"tool error {1000 * error:.1f} mm (from {1000 * np.linalg.norm(start - goal):.0f} mm)")
    assert stats.backend == "rl:reach", stats
    assert stats.status == "success", stats
    assert np.linalg.norm(start - goal) > 0.08
    assert error < 0.015
    held = np.linalg.norm(plant.tool() - goal)
    print(f"held 1 s after success: tool error {1000 * held:.1f} mm")
    assert held < 0.015


def test_after_a_policy_the_arm_holds_where_it_was_measured(policy_planner):
    policy_planner, _ = policy_planner
    pm = policy_planner.pm
    q = pm.arm.home + 0.1
    load_state(pm, 0.0, q)
    commanded = pm.data.ctrl.copy()
    commanded[pm.arm.actuator_ids] += 0.07  # a policy's last targets, a step past the goal
    assert np.array_equal(policy_planner.end_hold(commanded), commanded)  # nothing ran yet: as is
    policy_planner.improve(reach_spec([0.2, 0.05, 0.0], height=0.1))
    held = policy_planner.end_hold(commanded)
    np.testing.assert_allclose(held[pm.arm.actuator_ids], q)
    np.testing.assert_allclose(held[pm.arm.gripper_actuator_ids],
                               commanded[pm.arm.gripper_actuator_ids])
    policy_planner.improve(unserved_spec())
    assert np.array_equal(policy_planner.end_hold(commanded), commanded)  # the MPC's hold
