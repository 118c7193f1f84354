"""The safety node's workspace box as a planning cost: the MPC keeps the tool inside it."""

from __future__ import annotations

import numpy as np
import pytest

from lang2policy.mpc.episode import LockstepMPC
from lang2policy.mpc.workspace import COST_PER_METRE, PLAN_MARGIN, StayInside, stay_inside_for
from lang2policy.rewards.spec import validate_spec
from lang2policy.safety.config import load_safety_config

OUT_OF_REACH = [0.3, 0.5, 0.1]  # past the box's +y face (0.32 m) and the SO-101's reach


def test_the_cost_is_zero_inside_and_grows_with_the_distance_outside():
    box = StayInside(np.zeros(3), np.ones(3))
    tool = np.array([[[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]],  # inside all along
                     [[1.002, 0.5, 0.5], [1.002, 0.5, 0.5]],  # 2 mm past the +x face
                     [[0.5, -0.003, 0.5], [0.5, -0.004, 1.0]]])  # 3 and 4 mm out (mean)
    assert box.cost(tool) == pytest.approx([0.0, 2.0, 3.5], abs=1e-9)
    assert COST_PER_METRE * 0.001 >= 1.0  # 1 mm out outweighs 1 m of a weight-1 term


def test_the_planning_box_is_the_safety_box_shrunk_with_no_floor():
    limits = load_safety_config("so101")
    box = stay_inside_for("so101")
    inset = limits.workspace_margin + PLAN_MARGIN
    assert box.high == pytest.approx(np.array(limits.workspace.max) - inset)
    assert box.low[:2] == pytest.approx(np.array(limits.workspace.min[:2]) + inset)
    assert box.low[2] == -np.inf  # the table is the floor
    assert stay_inside_for("a robot safety.yaml does not list") is None


def _reach_out(world, *, with_box: bool) -> float:
    """Drive the MPC toward a point out of reach for 3 s; the largest tool y it reached."""
    names = world.reset(0)
    spec = validate_spec({"task": "reach out", "duration": 3.0, "terms": [
        {"term": "tool_to_point", "params": {"point": OUT_OF_REACH}}]}, names).spec
    mpc = LockstepMPC(world, spec)
    if not with_box:
        mpc.sampler.stay_inside = None
    xs: list[float] = []
    try:
        mpc.run(on_step=lambda m: xs.append(float(m.measure_now().tool[0, 0, 1])))
    finally:
        mpc.close()
    return max(xs)


def test_a_target_out_of_reach_leaves_the_tool_inside_the_safety_nodes_box(world):
    limits = load_safety_config("so101")
    face = limits.workspace.max[1] - limits.workspace_margin  # where the safety node cuts
    reached = _reach_out(world, with_box=True)
    assert face - 0.02 < reached <= face, reached  # as far out as the box lets it, no further
    assert _reach_out(world, with_box=False) > face  # without the cost, the plan leaves it
