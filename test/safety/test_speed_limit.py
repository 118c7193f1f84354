"""The safety node never sends the robot anything that moves a joint's target too fast.

Pure (no ROS): the supervisor is fed commands, joint states and watchdog ticks at explicit
times, and everything it sends is played into ``Robot``, an independent model of how the robot
follows ``/arm_controller/joint_trajectory`` (joint_trajectory_controller's reading of a header
stamp, as the sim node and the SO-101 driver do): a trajectory starts at its *stamp* (the robot
time the supervisor stamped it with) from where the robot's target was then, and runs linearly
between its points; a newer one replaces it (no queue); a hold stops the target at the measured
position at once. ``Robot.excess`` is how far any of that moves a joint beyond the speed limit,
exactly (the target is piecewise linear), ``Robot.peak`` the fastest speed it asks for and
``Robot.peak_acceleration`` the largest change of speed between segments over their time.
Commands may come at any time and in any order with the states; the states may say anything.

History (issue 13, no. 6; issue 32): a first filter timed commands from the measured position
and let streams run at 4.5 rad/s; a second, exact about speed, fed a robot that queued streamed
commands, so a stream at the cap fell seconds behind, and a stream reversing within the cap
drove the servos to 2.7x the cap (velocity steps). The supervisor now *shapes* what it sends
from the replayed target's position and velocity (``lang2policy.safety.shaper``).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.safety import MEASURED, NAMES, planar_filter

from lang2policy.control.trajectory_follower import TrajectoryFollower
from lang2policy.safety import SafetySupervisor, Trajectory, Watchdog
from lang2policy.safety.shaper import ShaperLimits

LIMIT = 1.0  # rad/s: planar_filter's max_joint_speed
ACCEL = 10.0  # rad/s^2: the shaper's acceleration limit here
PERIOD = 0.02  # s between streamed commands (the planner's control rate)
ALLOWANCE = 0.06  # rad: the SO-101's lead_allowance in config/safety.yaml
ARM = 2  # the planar arm's joints a, b (the gripper has no speed limit)
SHAPER = ShaperLimits(
    max_speed=np.array([LIMIT, LIMIT, np.inf]),
    max_acceleration=np.array([ACCEL, ACCEL, np.inf]),
    lower=np.array([-2.0, -2.0, 0.0]),
    upper=np.array([2.0, 2.0, 1.0]),
    period=PERIOD,
)


class Robot:
    """The position target of a robot following what the supervisor sends (see module doc)."""

    def __init__(self, start: np.ndarray) -> None:
        self.hold_at(0.0, np.asarray(start, float)[:ARM])
        self.peak = 0.0  # rad/s, over segments longer than 1 ms
        self.peak_acceleration = 0.0  # rad/s^2 between consecutive segments
        self.excess = 0.0  # rad: the most any segment moves beyond LIMIT x its duration
        self.received: list[tuple[float, Trajectory]] = []

    def hold_at(self, now: float, position: np.ndarray) -> None:
        self.start, self.times, self.rows = now, [0.0], [np.asarray(position, float)]
        self.entry_velocity = np.zeros(ARM)

    def target(self, t: float) -> np.ndarray:
        rows = np.array(self.rows)
        return np.array([np.interp(t - self.start, self.times, rows[:, j]) for j in range(ARM)])

    def receive(self, now: float, trajectory: Trajectory, measured, stamp=None) -> None:
        self.received.append((now, trajectory))
        if trajectory.is_hold:  # stop and hold at the measured position, at once
            self.hold_at(now, np.array([measured[n] for n in NAMES[:ARM]]))
            return
        points = [
            (
                float(t),
                {n: v for n, v in zip(trajectory.names, values, strict=True) if n != "gripper"},
            )
            for t, values in trajectory.points
        ]
        at = now if stamp is None else max(min(stamp, now), self.start)
        self.begin(at, points)

    def velocity(self, t: float) -> np.ndarray:
        """The target's velocity at ``t``: at the instant a trajectory began (a burst replaced
        it before it ran), the velocity it departed with; at rest past its end."""
        if t <= self.start:
            return self.entry_velocity
        k = int(np.searchsorted(self.times, t - self.start, side="right")) - 1
        if k >= len(self.times) - 1:
            return np.zeros(ARM)
        span = self.times[k + 1] - self.times[k]
        return (self.rows[k + 1] - self.rows[k]) / span

    def begin(self, at: float, points) -> None:
        entry = self.velocity(at)
        times, rows = [0.0], [self.target(at)]
        for t, named in points:
            row = rows[-1].copy()
            for name, value in named.items():
                row[NAMES.index(name)] = value
            if t <= times[-1]:  # the same time as the point before: this one wins
                rows[-1] = row
            else:
                times.append(t)
                rows.append(row)
        velocity = entry  # the robot's target moved so until ``at``
        for t0, p0, t1, p1 in zip(times, rows, times[1:], rows[1:], strict=False):
            step = float(np.abs(p1 - p0).max())
            self.excess = max(self.excess, step - LIMIT * (t1 - t0))
            if t1 - t0 > 1e-3:
                self.peak = max(self.peak, step / (t1 - t0))
                v = (p1 - p0) / (t1 - t0)
                change = float(np.abs(v - velocity).max()) / (t1 - t0)
                self.peak_acceleration = max(self.peak_acceleration, change)
                velocity = v
        self.start, self.times, self.rows, self.entry_velocity = at, times, rows, entry

    def within_limit(self) -> bool:
        """Nothing sent asks for more than LIMIT (1e-9 rad of rounding allowed)."""
        return self.excess <= 1e-8


class Bench:
    """A supervisor (shaping, as the safety node does) and the robot it drives."""

    def __init__(self, lead_allowance: float = 0.0) -> None:
        self.supervisor = SafetySupervisor(
            planar_filter(lead_allowance=lead_allowance, keep_out={}),
            Watchdog(state_timeout=0.2, command_timeout=0.25),
            shaper=SHAPER,
        )
        self.measured = dict(MEASURED)
        self.robot_time = 0.0
        self.robot = Robot(np.array([MEASURED[n] for n in NAMES]))
        self.state(0.0, MEASURED)

    def apply(self, now: float, decision) -> None:
        """What ``decision`` sends reaches the robot at its time: the latest state's stamp."""
        if decision.send is not None:
            self.robot.receive(self.robot_time, decision.send, self.measured, decision.stamp)

    def state(self, now: float, positions: dict[str, float]) -> None:
        self.measured = dict(positions)
        self.robot_time = now  # stamped with the time it is fed
        if not self.robot.received:  # nothing sent yet: the robot holds where it is
            self.robot.hold_at(now, np.array([positions[n] for n in NAMES[:ARM]]))
        self.apply(now, self.supervisor.on_joint_state(now, now, positions))

    def command(self, now: float, points) -> Trajectory | None:
        decision = self.supervisor.on_command(now, Trajectory.of(NAMES, points))
        self.apply(now, decision)
        return decision.send

    def tick(self, now: float) -> None:
        self.apply(now, self.supervisor.tick(now))


def point(a: float, b: float = 0.0, t: float = PERIOD):
    return (t, (a, b, 1.0))


# ---------------------------------------------------------------------- the finding's causes
@pytest.mark.parametrize(
    "measured_is",
    ["still", "the robot's target", "the last command"],
    ids=["arm-still", "perfect-servo", "state-at-command"],
)
def test_a_stream_within_the_allowance_is_not_forwarded_faster_than_the_limit(measured_is):
    """3 rad/s commanded, 0.06 rad per 20 ms: each point is within allowance + limit x 0.02 of
    the measured position, which said nothing about the speed the robot was asked for."""
    bench = Bench()
    for k in range(1, 26):
        now = k * PERIOD
        if measured_is == "the robot's target":
            bench.state(now, {"a": float(bench.robot.target(now)[0]), "b": 0.0, "gripper": 1.0})
        elif measured_is == "the last command":
            bench.state(now, {"a": 0.06 * (k - 1), "b": 0.0, "gripper": 1.0})
        else:
            bench.state(now, MEASURED)
        bench.command(now, [point(0.06 * k)])
    assert bench.robot.within_limit(), bench.robot.peak


def test_commands_arriving_in_a_burst_are_not_forwarded_faster_than_the_limit():
    """A late commander: three commands 1 ms apart, then a gap; each steps 0.02 rad in 0.02 s
    (exactly the limit), the measured arm keeps up. Together they would ask for 3 rad/s."""
    bench = Bench()
    a = 0.0
    for burst in range(8):
        start = burst * 3 * PERIOD
        bench.state(start, {"a": float(bench.robot.target(start)[0]), "b": 0.0, "gripper": 1.0})
        for k in range(3):
            a += LIMIT * PERIOD
            bench.command(start + 0.001 * k, [point(a)])
    assert bench.robot.within_limit(), bench.robot.peak


def test_an_arm_lagging_a_commander_within_the_limit_gets_its_pace_not_a_full_speed_catch_up():
    """The graph's excursion: the arm lags its commands by 0.1 s (late deliveries, a slow
    servo); the commander streams 0.8 rad/s, within the limit, then holds its last point. Every
    command passes unchanged and the robot is never asked for more than the commander's pace
    (on main, commands were retimed from the lagging measured position, the target crawled and
    the last one ran at the full limit)."""
    bench = Bench()
    pace, lag = 0.8, 0.1
    history = [(0.0, 0.0)]  # (time, the robot's target for a)
    for k in range(1, 101):
        now = k * PERIOD
        behind = np.interp(
            now - lag, *zip(*history, strict=True)
        )  # the arm is where its target was
        bench.state(now, {"a": float(behind), "b": 0.0, "gripper": 1.0})
        bench.command(now, [point(pace * min(now, 1.0))])
        history.append((now, float(bench.robot.target(now)[0])))
    assert bench.robot.peak <= pace + 0.15, bench.robot.peak  # its pace, plus a catch-up
    assert bench.robot.target(2.5)[0] == pytest.approx(pace, abs=1e-6)  # it got there


def test_a_stream_reversing_within_the_limit_is_sent_within_speed_and_acceleration():
    """The issue-32 finding: every command within the cap, the direction reversing at random;
    what the robot is sent changes speed by at most ACCEL x its time (no velocity steps)."""
    bench = Bench()
    rng = np.random.default_rng(5)
    a = 0.0
    for k in range(1, 301):
        now = k * PERIOD
        bench.state(now, {"a": float(bench.robot.target(now)[0]), "b": 0.0, "gripper": 1.0})
        if k % 5 == 0:  # 10 Hz, like a VLA fed erratic targets
            a = float(np.clip(a + rng.choice([-1.0, 1.0]) * LIMIT * 0.1, -1.5, 1.5))
            bench.command(now, [point(a, t=0.1)])
    assert bench.robot.within_limit(), bench.robot.excess
    assert bench.robot.peak_acceleration <= ACCEL + 1e-6, bench.robot.peak_acceleration


def test_a_burst_shaped_at_one_robot_time_accelerates_the_target_once():
    """Eight 20 ms steps of a stream arrive before the next joint state moves the robot's clock
    on: all eight are shaped and stamped at one robot time, and the robot runs only the last.
    Each must depart from the target's state before the first of them. On main each departed
    from the first segment of the one before (its slope holds one step of acceleration), so
    eight stacked eight: the graph's target went from rest to 1.15 rad/s in 20 ms, and the
    simulated servo ran 1.6-1.75 rad/s against a 1.5 cap (test_ros_graph_speed in CI)."""
    bench = Bench()
    a, step = 0.0, 0.8 * LIMIT * PERIOD
    for burst in range(6):
        now = burst * 8 * PERIOD
        bench.state(now, {"a": float(bench.robot.target(now)[0]), "b": 0.0, "gripper": 1.0})
        for _ in range(8):
            a += step
            bench.command(now, [point(a)])
    assert bench.robot.within_limit(), bench.robot.excess
    assert bench.robot.peak_acceleration <= ACCEL + 1e-6, bench.robot.peak_acceleration


# ---------------------------------------------------------------------- what stays as it was
def test_a_fast_command_is_slowed_from_where_the_robot_is_headed():
    bench = Bench()
    bench.command(0.0, [point(0.5, t=1.0)])
    bench.state(0.5, {"a": 0.2, "b": 0.0, "gripper": 1.0})  # the arm lags its target
    # 0.5 s later the target is at about a = 0.25; b jumps 0.5 rad: 0.5 s at 1 rad/s at least.
    sent = bench.command(0.5, [point(0.25, 0.5, t=0.1)])
    assert sent.points[-1][0] >= 0.5
    assert bench.robot.within_limit(), bench.robot.excess


def test_after_a_hold_commands_are_timed_from_the_hold_and_the_measured_position():
    """A hold stops the robot where it is measured; the next command may not jump from there,
    nor from where the arm has moved since (it may still be braking)."""
    bench = Bench()
    bench.command(0.0, [point(0.5, t=0.5)])
    bench.state(0.1, {"a": 0.08, "b": 0.0, "gripper": 1.0})
    bench.state(0.25, {"a": 0.2, "b": 0.0, "gripper": 1.0})
    stop = bench.supervisor.stop(0.25)
    bench.apply(0.25, stop)
    bench.supervisor.resume(0.3)
    bench.state(0.3, {"a": 0.26, "b": 0.0, "gripper": 1.0})  # still braking past the hold
    sent = bench.command(0.3, [point(0.2, t=0.01)])  # 0.06 back from 0.26
    assert sent.points[0][0] >= 0.06 - 1e-9  # reachable within the cap from 0.26 too
    assert bench.robot.within_limit(), bench.robot.excess


def test_a_stream_within_the_limit_is_followed_to_its_end():
    bench = Bench()
    for k in range(1, 11):
        now = k * PERIOD
        bench.state(now, {"a": float(bench.robot.target(now)[0]), "b": 0.0, "gripper": 1.0})
        bench.command(now, [point(0.015 * k)])
    assert bench.robot.target(1.0)[0] == pytest.approx(0.15)
    assert bench.robot.peak <= 0.75 + 0.1  # the stream's own pace, plus a catch-up


# ---------------------------------------------------------------------- any timing, any state
EVENT = st.one_of(
    st.tuples(
        st.just("command"),
        st.floats(0.0, 0.05),  # time since the previous event (0: a burst)
        st.lists(
            st.tuples(st.floats(0.0, 0.2), st.floats(-1.5, 1.5), st.floats(-1.5, 1.5)),
            min_size=1,
            max_size=3,
        ),
    ),
    st.tuples(st.just("state"), st.floats(0.0, 0.05), st.floats(-1.5, 1.5), st.floats(-1.5, 1.5)),
    st.tuples(st.just("tick"), st.floats(0.0, 0.3)),
    st.tuples(st.just("stop"), st.floats(0.0, 0.05)),
    st.tuples(st.just("resume"), st.floats(0.0, 0.05)),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(EVENT, min_size=1, max_size=40), st.sampled_from([0.0, ALLOWANCE, 0.5]))
def test_no_timing_and_no_measured_state_gets_a_command_forwarded_above_the_limit(
    events, allowance
):
    bench = Bench(lead_allowance=allowance)
    now = 0.0
    for event in events:
        kind, gap = event[0], event[1]
        now += gap
        if kind == "command":
            times = np.cumsum([t for t, _, _ in event[2]])
            bench.command(
                now, [point(a, b, t=float(t)) for t, (_, a, b) in zip(times, event[2], strict=True)]
            )
        elif kind == "state":
            bench.state(now, {"a": event[2], "b": event[3], "gripper": 1.0})
        elif kind == "tick":
            bench.tick(now)
        elif kind == "stop":
            bench.apply(now, bench.supervisor.stop(now))
        else:
            bench.supervisor.resume(now)
    assert bench.robot.within_limit(), (bench.robot.excess, bench.robot.received)


# ---------------------------------------------------------------------- the robot's side
def named(trajectory: Trajectory) -> list[tuple[float, dict[str, float]]]:
    return [(t, dict(zip(trajectory.names, v, strict=True))) for t, v in trajectory.points]


def fastest(targets: list[float], step: float) -> float:
    return float(np.abs(np.diff(targets)).max() / step) if len(targets) > 1 else 0.0


def sample(follower: TrajectoryFollower, start: float, until: float, step=0.001) -> list[float]:
    """Joint a's target from ``start`` to ``until`` every ``step`` (in time order)."""
    return [float(follower.target(t)[0]) for t in np.arange(start, until - 1e-12, step)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.integers(0, 3),  # commands the commander sends in this tick (0: it is late)
            st.floats(-0.1, 0.1),  # how far each steps
            st.integers(0, 4),  # ticks its delivery to the robot is late
        ),
        min_size=1,
        max_size=60,
    )
)
def test_a_late_and_bunched_stream_through_the_supervisor_never_drives_the_robot_too_fast(ticks):
    """The graph under load, end to end: a commander streaming one-point 20 ms commands, late
    and in bursts; the supervisor; deliveries to the robot late by up to 4 ticks (in order);
    the robot following each from its stamp, on its ticks (as the sim node does). The robot's
    target never goes faster than the limit (the measured arm is where its target was a tick
    before)."""
    bench = Bench()
    robot = TrajectoryFollower(NAMES, np.array([MEASURED[n] for n in NAMES]))
    in_flight: list = []  # (tick of arrival at the robot, message, its stamp)
    a, targets, applied = 0.0, [0.0], []
    for tick in range(len(ticks) + 12):
        now = tick * PERIOD
        measured = np.array([targets[-20] if len(targets) > 20 else 0.0, 0.0, 1.0])
        bench.state(now, dict(zip(NAMES, measured, strict=True)))
        count, step, delay = ticks[tick] if tick < len(ticks) else (0, 0.0, 0)
        for k in range(count):
            a = float(np.clip(a + step, -1.5, 1.5))
            decision = bench.supervisor.on_command(
                now + 0.001 * k, Trajectory.of(NAMES, [point(a)])
            )
            bench.apply(now, decision)
            arrive = max(tick + delay, in_flight[-1][0] if in_flight else 0)
            in_flight.append((arrive, decision.send, decision.stamp))
        for _, trajectory, stamp in [m for m in in_flight if m[0] == tick]:
            if trajectory is None:
                continue
            if trajectory.is_hold:
                robot.start(now, [], measured)
            else:
                robot.start(now, named(trajectory), measured, start_time=stamp)
        targets += [*sample(robot, now, now + PERIOD)[1:], float(robot.target(now + PERIOD)[0])]
        applied.append(float(robot.target(now)[0]))  # what the robot applies at its tick
    assert bench.robot.within_limit(), bench.robot.excess
    # A trajectory delivered ``delay`` late starts at its stamp, partway in: the robot's target
    # steps onto it by at most ACCEL x delay^2 (both depart from one state at the stamp);
    # between steps, and with no delay at all, never faster than the limit.
    late = max((d for _, _, d in ticks), default=0) * PERIOD + PERIOD  # + the stamp's tick
    assert fastest(applied, PERIOD) <= LIMIT + ACCEL * late**2 / PERIOD + 1e-6
