"""The zone guard on shaped samples (pure core): a planar arm whose tool point is (a, b, 0.1)
in a workspace box b <= 1.0, so every depth can be worked out by hand; then the real SO-101
model behind the supervisor at its workspace box's edge."""

from __future__ import annotations

import numpy as np
import pytest

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


@pytest.fixture(scope="module")
def so101_model():
    """The real SO-101 safety model and config, as the safety node loads them."""
    from lang2policy.safety import load_safety_config
    from lang2policy.safety.robot_model import safety_model_for

    config = load_safety_config("so101")
    return config, safety_model_for("so101", config)


def so101_supervisor(config, model, resting: np.ndarray):
    """A fresh SO-101 supervisor that has measured the arm at ``resting`` (jaws at 0.5)."""
    from lang2policy.safety import SafetySupervisor, Watchdog

    supervisor = SafetySupervisor(
        model.filter, Watchdog(config.state_timeout, config.command_timeout),
        shaper=model.shaper, guard=model.guard,
    )  # fmt: skip
    names = model.filter.names
    supervisor.on_joint_state(0.0, 0.0, dict(zip(names, [*resting, 0.5], strict=True)))
    return supervisor


# a pose of the SO-101 with its tool 1.8 mm past the box's +x face (x <= 0.42), and a direction
# of the shoulder, elbow and wrist along which the tool's x grows monotonically up to 0.451
SAGGED = np.array([0.01268153, 0.45721526, -0.80240674, 0.14765375, 0.0])
REACH = np.array([0.0, 0.5, 1.0, -0.5, 0.0])


def pose_at(tool, x: float) -> np.ndarray:
    """The pose along ``SAGGED + d * REACH`` whose tool point is at ``x`` (bisection)."""
    low, high = -0.3, 0.3
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if tool(SAGGED + middle * REACH)[0] < x else (low, middle)
    return SAGGED + low * REACH


def way(tool, times_and_x) -> list:
    return [(t, [*pose_at(tool, x), 0.5]) for t, x in times_and_x]


def test_the_so101_resting_just_outside_its_box_is_brought_back_along_a_wavering_path(so101_model):
    """The real SO-101 model and supervisor, as the safety node runs them: the tool 1.8 mm past
    the box's +x face (a servo that sagged there), a way back that wavers by 0.4 mm before it
    goes in, as an MPC's first steps do. It is forwarded whole (it was cut at its second point
    and the arm held there, outside, for good)."""
    from lang2policy.safety import Trajectory

    config, model = so101_model
    names, tool = model.filter.names, model.filter.tool_point
    assert 0.4215 < tool(SAGGED)[0] < 0.4220 and config.workspace.max[0] == 0.42
    supervisor = so101_supervisor(config, model, SAGGED)
    way_back = [(0.1, 0.4212), (0.2, 0.4216), (0.6, 0.40)]  # (s, tool x): in, out a bit, in
    decision = supervisor.on_command(0.01, Trajectory.of(names, way(tool, way_back)))
    assert decision.message == "" and decision.send is not None
    end = tool(np.array(decision.send.points[-1][1][:5]))
    assert abs(end[0] - 0.40) < 1e-3  # the arm goes all the way back in


@pytest.mark.parametrize("past", [0.01, 0.02, 0.03])
def test_the_so101_centimetres_past_its_box_comes_back_but_never_further_out(so101_model, past):
    """Where a target it could not reach left it: the tool 1-3 cm past the box's +x face,
    deeper than RECOVERY_DEPTH. A way back that wavers outward by 3 mm (as the MPC's first
    steps do) but never past where the arm is, and ends inside, is forwarded whole; a path
    that goes a millimetre further out is cut at once, and one that ends where it started is
    cut too (otherwise the arm could be walked along the outside of its box)."""
    from lang2policy.safety import Trajectory

    config, model = so101_model
    names, tool = model.filter.names, model.filter.tool_point
    x = 0.42 + past
    resting = pose_at(tool, x)
    assert abs(tool(resting)[0] - x) < 1e-5

    def decide(times_and_x):
        supervisor = so101_supervisor(config, model, resting)
        return supervisor.on_command(0.01, Trajectory.of(names, way(tool, times_and_x)))

    back = decide([(0.3, x - 0.004), (0.6, x - 0.001), (2.0, 0.40)])
    assert back.message == "" and back.send is not None
    assert abs(tool(np.array(back.send.points[-1][1][:5]))[0] - 0.40) < 1e-3  # all the way in
    further = decide([(0.3, x - 0.004), (0.6, x + 0.001), (2.0, 0.40)])
    assert "workspace" in further.message and further.send is not None
    sent = [tool(np.array(q[:5]))[0] for _, q in further.send.points]
    assert max(sent) < x + 1e-4  # the cut keeps the arm within its depth
    along = decide([(0.3, x - 0.004), (0.6, x - 0.001), (1.0, x)])
    assert "workspace" in along.message
