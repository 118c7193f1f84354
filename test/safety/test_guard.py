"""The zone guard on shaped samples (pure core): a planar arm whose tool point is (a, b, 0.1)
in a workspace box b <= 1.0, so every depth can be worked out by hand; then the real SO-101
model behind the supervisor at its workspace box's edge."""

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


def test_the_so101_resting_just_outside_its_box_is_brought_back_along_a_wavering_path():
    """The real SO-101 model and supervisor, as the safety node runs them: the tool 1.8 mm past
    the box's +x face (a servo that sagged there), a way back that wavers by 0.4 mm before it
    goes in, as an MPC's first steps do. It is forwarded whole (it was cut at its second point
    and the arm held there, outside, for good)."""
    from lang2policy.safety import SafetySupervisor, Trajectory, Watchdog, load_safety_config
    from lang2policy.safety.robot_model import safety_model_for

    config = load_safety_config("so101")
    model = safety_model_for("so101", config)
    names, tool = model.filter.names, model.filter.tool_point
    sagged = np.array([0.01268153, 0.45721526, -0.80240674, 0.14765375, 0.0])
    assert 0.4215 < tool(sagged)[0] < 0.4220 and config.workspace.max[0] == 0.42

    def elbow_for(x: float) -> np.ndarray:
        """``sagged`` with the elbow bent until the tool point is at ``x`` (bisection)."""
        low, high = -0.2, 0.0  # tool x grows with the elbow's angle here
        for _ in range(60):
            middle = (low + high) / 2
            q = sagged + np.array([0, 0, middle, 0, 0])
            low, high = (middle, high) if tool(q)[0] < x else (low, middle)
        return sagged + np.array([0, 0, low, 0, 0])

    supervisor = SafetySupervisor(
        model.filter, Watchdog(config.state_timeout, config.command_timeout),
        shaper=model.shaper, guard=model.guard,
    )  # fmt: skip
    supervisor.on_joint_state(0.0, 0.0, dict(zip(names, [*sagged, 0.5], strict=True)))
    way_back = [(0.1, 0.4212), (0.2, 0.4216), (0.6, 0.40)]  # (s, tool x): in, out a bit, in
    points = [(t, [*elbow_for(x), 0.5]) for t, x in way_back]
    decision = supervisor.on_command(0.01, Trajectory.of(names, points))
    assert decision.message == "" and decision.send is not None
    end = tool(np.array(decision.send.points[-1][1][:5]))
    assert abs(end[0] - 0.40) < 1e-3  # the arm goes all the way back in
