"""A reward spec is validated once where it enters a process, not again on its way to the MPC.

The L2R planner validates the spec its sandboxed reward code built (the spec enters the process
out of the sandbox); the MPC then takes that ``RewardSpec`` as it is and only checks that the
objects it names are in the scene. Every module's binding of ``validate_spec`` is wrapped with
a counter, so a second validation anywhere on the way is seen.
"""

from __future__ import annotations

import sys

import pytest
from support.l2r import LIFT, LIFT_CODE, chat_planner, described

from lang2policy.errors import RewardSpecError
from lang2policy.mpc.realtime import RealtimeMPC
from lang2policy.mpc.sampler import MPCConfig
from lang2policy.rewards import spec as spec_module
from lang2policy.rewards.spec import check_objects


@pytest.fixture
def validations(monkeypatch) -> list[object]:
    """Each call of ``validate_spec``, from whichever module calls it."""
    original, calls = spec_module.validate_spec, []

    def counted(data, *args, **kwargs):
        calls.append(data)
        return original(data, *args, **kwargs)

    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("lang2policy") and \
                getattr(module, "validate_spec", None) is original:
            monkeypatch.setattr(module, "validate_spec", counted)
    return calls


def test_a_planned_spec_is_validated_once_on_its_way_into_the_mpc(validations):
    planner, _ = chat_planner([described(LIFT), LIFT_CODE])
    plan = planner.plan("lift the red block 10 cm")
    assert len(validations) == 1  # out of the sandbox
    mpc = RealtimeMPC("so101", MPCConfig(samples=8), objects=sorted(planner.objects))
    try:
        mpc.set_spec(plan.spec)
        assert mpc.active and mpc.status == "running"
    finally:
        mpc.stop()
    assert len(validations) == 1


def test_the_object_check_names_what_is_missing():
    planner, _ = chat_planner([described(LIFT), LIFT_CODE])
    spec = planner.plan("lift the red block 10 cm").spec
    assert spec.objects() == ["red block"]
    check_objects(spec, ["red block", "blue bowl"])
    with pytest.raises(RewardSpecError, match=r"names \['red block'\], not in the scene"):
        check_objects(spec, ["blue bowl"])
