"""The real-time MPC loop (pure core, no ROS): a simulated arm stepped in real time feeds
measured states to ``RealtimeMPC`` and applies its actions, like the controller node does."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from support.mpc import POINT_A, POINT_B, Plant, tool_spec
from support.waiting import wait_for

from lang2policy.errors import RewardSpecError
from lang2policy.mpc.model import ObjectState
from lang2policy.mpc.realtime import InvalidStateError, RealtimeMPC
from lang2policy.mpc.sampler import ControlPlan, MPCConfig
from lang2policy.rewards.spec import validate_spec

CONFIG = MPCConfig(samples=32)


@pytest.fixture
def mpc():
    controller = RealtimeMPC("so101", CONFIG, log=lambda line: None, info=lambda line: None).start()
    yield controller
    controller.stop()


def test_spec_reaches_a_point_and_a_swap_mid_run_retargets_without_a_stall(mpc):
    with Plant(mpc) as plant:
        start = plant.tool()
        mpc.set_spec(tool_spec(POINT_A, plant.objects))
        assert mpc.status == "running" and mpc.active
        wait_for(lambda: np.linalg.norm(plant.tool() - POINT_A) < 0.02, 15, "the tool at A")
        assert np.linalg.norm(start - POINT_A) > 0.08
        at_a = plant.tool()
        before = mpc.stats().iterations
        mpc.set_spec(tool_spec(POINT_B, plant.objects))  # no reset, no stall
        time.sleep(0.3)
        during = mpc.stats()
        assert during.status == "running" and during.iterations >= before + 3, during
        wait_for(lambda: np.linalg.norm(plant.tool() - POINT_B) < 0.02, 15, "the tool at B")
        assert np.linalg.norm(at_a - POINT_B) > 0.15
        stats = mpc.stats()
    assert stats.rate_hz > 5 and 0 < stats.plan_ms_mean <= stats.plan_ms_p95
    assert 0 < stats.latency_ms_mean <= stats.latency_ms_p95 < 1000
    assert set(stats.objects) == set(plant.objects) and stats.rebuilds == 1
    assert stats.measures["tool_to_point"] < 0.06  # of a state planned a moment ago
    assert stats.as_dict()["status"] == "running"


def test_success_ends_the_task_and_the_arm_holds(mpc):
    with Plant(mpc) as plant:
        success = {"all": [{"term": "tool_to_point", "below": 0.015}], "hold": 0.2}
        mpc.set_spec(tool_spec(POINT_A, plant.objects, success=success))
        wait_for(lambda: mpc.status != "running", 15, "the end of the task")
        assert mpc.status == "success" and not mpc.active, mpc.stats()
        iterations = mpc.stats().iterations
        held = mpc.action()
        time.sleep(0.3)
        assert mpc.action() == held and mpc.stats().iterations == iterations
        assert mpc.stats().rate_hz == 0.0  # the sampler stopped
        assert np.linalg.norm(plant.tool() - POINT_A) < 0.03


def test_no_spec_holds_the_first_measured_position_and_does_not_plan(mpc):
    plant = Plant(mpc)
    assert mpc.action() is None and mpc.clock() is None  # nothing measured yet
    _, joints, objects = plant.state()
    mpc.update_state(1.0, joints, objects)
    moved = dict(joints, shoulder_pan=joints["shoulder_pan"] + 0.3)
    mpc.update_state(1.02, moved, objects)
    time.sleep(0.3)
    action = mpc.action()
    assert action == pytest.approx(joints, abs=1e-9) and set(action) == set(mpc.names)
    assert mpc.status == "idle" and not mpc.active and mpc.stats().iterations == 0
    assert 1.02 <= mpc.clock() <= 1.02 + mpc.max_extrapolation


def test_bad_states_are_rejected_and_the_previous_state_kept(mpc):
    plant = Plant(mpc)
    _, joints, objects = plant.state()
    mpc.update_state(5.0, joints, objects)
    block = plant.objects[0]
    bad = [
        ({k: v for k, v in joints.items() if k != "elbow_flex"}, objects, "lacks ['elbow_flex']"),
        (dict(joints, wrist_flex=math.nan), objects, "non-finite values for ['wrist_flex']"),
        (joints, dict(objects, **{block: ObjectState((0.2, math.inf, 0.0))}), block),
        (joints, dict(objects, **{block: ObjectState((0.2, 0.0, 0.0), (0, 0, 0, 0))}), "zero"),
    ]
    for bad_joints, bad_objects, reason in bad:
        with pytest.raises(InvalidStateError, match=reason.replace("[", r"\[")):
            mpc.update_state(5.1, bad_joints, bad_objects)
    with pytest.raises(InvalidStateError, match="before the latest"):
        mpc.update_state(4.9, joints, objects)  # stale: older than the latest state
    with pytest.raises(InvalidStateError, match="finite"):
        mpc.update_state(math.nan, joints, objects)
    stats = mpc.stats()
    assert stats.rejected_states == 6 and stats.time == 5.0
    assert mpc.action() == pytest.approx(joints, abs=1e-9)
    mpc.update_state(5.1, dict(joints, unknown_joint=1.0),
                     dict(objects, **{"purple unicorn": ObjectState((0, 0, 0))}))  # ignored


def test_timeout_after_the_spec_duration_then_hold(mpc):
    with Plant(mpc) as plant:
        never = {"all": [{"term": "tool_to_point", "below": 0.0}], "hold": 1.0}
        mpc.set_spec(tool_spec(POINT_A, plant.objects, duration=1.0, success=never))
        began = plant.world.time
        wait_for(lambda: mpc.status != "running", 10, "the timeout")
        assert mpc.status == "timeout" and "1 s passed" in mpc.stats().reason
        assert plant.world.time - began == pytest.approx(1.0, abs=0.3)
        held = mpc.action()
        time.sleep(0.2)
        assert mpc.action() == held


def test_planning_errors_and_non_finite_plans_fail_the_task_and_hold(mpc, monkeypatch):
    plant = Plant(mpc)
    now, joints, objects = plant.state()
    mpc.update_state(now, joints, objects)
    wait_for(lambda: set(mpc.stats().objects) == set(objects), 10, "the rebuild")

    def broken(spec):
        raise RuntimeError("rollout exploded")

    monkeypatch.setattr(mpc.sampler, "improve", broken)
    mpc.set_spec(tool_spec(POINT_A, plant.objects))
    mpc.update_state(now + 0.02, joints, objects)
    wait_for(lambda: mpc.status == "failed", 10, "the failure")
    assert "planning error: RuntimeError: rollout exploded" in mpc.stats().reason
    assert mpc.action() == pytest.approx(joints, abs=1e-9) and mpc.alive

    nan_plan = ControlPlan(now, np.full((CONFIG.knots, 6), np.nan), 0.0)
    monkeypatch.setattr(mpc.sampler, "improve", lambda spec: nan_plan)
    mpc.set_spec(tool_spec(POINT_A, plant.objects))
    mpc.update_state(now + 0.04, joints, objects)
    wait_for(lambda: mpc.status == "failed", 10, "the second failure")
    assert "non-finite" in mpc.stats().reason
    assert all(math.isfinite(v) for v in mpc.action().values())


def test_object_changes_rebuild_and_end_a_task_whose_object_left(mpc):
    plant = Plant(mpc)
    now, joints, objects = plant.state()
    first, second = plant.objects[:2]
    mpc.update_state(now, joints, {first: objects[first]})
    wait_for(lambda: mpc.stats().objects == (first,), 10, "the first model")
    reach = validate_spec({"terms": [{"term": "reach", "params": {"object": first}}]},
                          [first]).spec
    mpc.set_spec(reach)
    with pytest.raises(RewardSpecError, match=second):  # not measured yet
        mpc.set_spec(validate_spec({"terms": [{"term": "reach", "params": {"object": second}}]},
                                   plant.objects).spec)
    mpc.update_state(now + 0.02, joints, {first: objects[first]})
    wait_for(lambda: mpc.stats().iterations >= 1, 10, "planning")
    mpc.update_state(now + 0.04, joints, {second: objects[second]})  # the first one left
    wait_for(lambda: mpc.status == "failed", 10, "the failure")
    stats = mpc.stats()
    assert "objects changed" in stats.reason and first in stats.reason
    assert stats.objects == (second,) and stats.rebuilds == 2


def test_clock_jump_back_ends_the_task_and_cancel_goes_idle(mpc):
    plant = Plant(mpc)
    _, joints, objects = plant.state()
    mpc.update_state(10.0, joints, objects)
    mpc.set_spec(tool_spec(POINT_A, plant.objects))
    mpc.update_state(2.0, joints, objects)  # a restarted clock
    assert mpc.status == "failed" and "jumped back" in mpc.stats().reason
    mpc.set_spec(tool_spec(POINT_A, plant.objects))
    assert mpc.status == "running"
    mpc.set_spec(None)
    assert mpc.status == "idle" and not mpc.active


def test_stop_joins_the_thread_and_is_idempotent():
    mpc = RealtimeMPC("so101", CONFIG).start()
    assert mpc.alive
    mpc.stop()
    assert not mpc.alive
    mpc.stop()
    with RealtimeMPC("so101", CONFIG) as scoped:
        assert scoped.alive
    assert not scoped.alive
