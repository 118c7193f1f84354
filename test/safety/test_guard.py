"""The zone guard on shaped samples (pure core): a planar arm whose tool point is (a, b, 0.1)
in a workspace box b <= 1.0, so every depth can be worked out by hand."""

from __future__ import annotations

import numpy as np

from lang2policy.safety import BoxConfig
from lang2policy.safety.guard import ZoneGuard
from lang2policy.safety.shaper import Shaped, ShaperLimits

LIMITS = ShaperLimits(
    max_speed=np.array([1.0, 1.0, np.inf]),
    max_acceleration=np.array([5.0, 5.0, np.inf]),
    lower=np.array([-2.0, -2.0, 0.0]),
    upper=np.array([2.0, 2.0, 1.0]),
    period=0.02,
)


def planar_guard() -> ZoneGuard:
    def tool(rows):
        return np.column_stack([rows[:, 0], rows[:, 1], np.full(len(rows), 0.1)])

    return ZoneGuard(
        BoxConfig((-1.0, -1.0, 0.0), (1.0, 1.0, 1.0)),
        {},
        tool_points=tool,
        geometry=lambda rows, openings: tool(rows)[:, None, :],
        arm_columns=np.array([0, 1]),
        gripper_column=2,
    )


def samples(*b_values: float) -> Shaped:
    rows = np.array([[0.0, b, 1.0] for b in b_values])
    times = 0.02 * np.arange(1, len(rows) + 1)
    return Shaped(times, rows, np.zeros_like(rows))


def test_a_sagging_arm_held_just_inside_the_box_may_leave_along_a_path_from_where_it_is():
    # The target rests 1 mm inside the box; the servo sags 3 mm past it, 2 mm outside. A
    # controller plans from where the arm is: its first samples start outside and go back in.
    target, measured = np.array([0.0, 0.999, 1.0]), np.array([0.0, 1.002, 1.0])
    path = samples(1.0015, 1.0018, 0.99, 0.97)
    kept, rule, note = planar_guard().guard(target, np.zeros(3), path, LIMITS, measured)
    assert rule is None and note == "" and kept is path
    held, rule, _ = planar_guard().guard(target, np.zeros(3), path, LIMITS)  # measured unknown
    assert rule == "workspace" and held.positions[:, 1].max() <= 1.0


def test_no_sample_may_go_deeper_than_the_arm_already_is():
    target, measured = np.array([0.0, 0.999, 1.0]), np.array([0.0, 1.002, 1.0])
    path = samples(1.0015, 1.004, 0.99)
    kept, rule, note = planar_guard().guard(target, np.zeros(3), path, LIMITS, measured)
    assert rule == "workspace" and "workspace box" in note
    assert kept.positions[:, 1].max() < 1.002
