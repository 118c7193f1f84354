"""The IK descent's stall test (``IKOptions.stall_iterations``): it ends a descent that stopped
improving, and finds the same postures as the full descent; ``bench ik`` measures both."""

from __future__ import annotations

import numpy as np
import pytest

from lang2policy.bench import ik_speed
from lang2policy.control.ik import IKOptions, solve_ik
from lang2policy.errors import Lang2PolicyError


def _solve(session, target, rotation, options):
    kin = session.kinematics
    return solve_ik(kin.model, kin.scratch, kin.arm, target, rotation, kin.arm.home, options)


def test_a_reachable_target_is_solved_as_without_the_stall_test(session):
    kin = session.kinematics
    target = np.array([0.20, 0.05, 0.08])
    rotation = kin.tool_rotation(target, 0.0, 0.0)
    with_stall = _solve(session, target, rotation, IKOptions())
    without = _solve(session, target, rotation, IKOptions(stall_iterations=0))
    assert with_stall.ok(2e-3, 0.035) and without.ok(2e-3, 0.035)
    assert np.allclose(with_stall.q, without.q, atol=1e-3)


def test_an_unreachable_target_ends_early_no_worse_than_the_full_descent(session, monkeypatch):
    from lang2policy.control import ik

    far = np.array([0.60, 0.0, 0.05])  # beyond the SO-101's reach
    counted = []
    errors = ik._errors

    def counting(*args):
        counted[-1] += 1
        return errors(*args)

    monkeypatch.setattr(ik, "_errors", counting)
    results = []
    for options in (IKOptions(restarts=0), IKOptions(restarts=0, stall_iterations=0)):
        counted.append(0)
        results.append(_solve(session, far, None, options))
    stalled, full = results
    assert full.position_error > 0.1  # really out of reach
    assert stalled.position_error == pytest.approx(full.position_error, abs=1e-3)
    assert counted[0] < counted[1] / 3, counted  # the descent stopped once it stalled


def test_bench_ik_runs_both_modes_on_the_same_scene():
    report = ik_speed.run("so101", episodes=1, seed=0)
    assert set(report["modes"]) == set(ik_speed.MODES)
    for summary in report["modes"].values():
        assert summary["successes"] == 1 and summary["ik_solves_mean"] > 0
    assert "IK s per pick-and-place" in ik_speed.format_text(report)
    with pytest.raises(Lang2PolicyError, match="--episodes"):
        ik_speed.run("so101", episodes=0)
