"""The motion filter: what a commanded trajectory may ask of the arm, checked before it moves.

Rules, in the order they apply (each one that changes or drops the command says so in a
``Violation``):

1. **Validity** — joint names known and unique, one finite position per name in every point,
   finite times that start at >= 0 and never go back. Anything else drops the *whole* command
   (the caller holds the arm): a half-understood command is never executed.
2. **Joint limits** — positions are clamped into the model's joint ranges shrunk by
   ``joint_limit_margin`` (the gripper into 0..1).
3. **Workspace and keep-out zones** — the tool centre point (forward kinematics) is checked
   along the path the arm will take (linear in joint space, sampled every ``CHECK_STEP`` rad,
   starting at the measured position). The trajectory is cut before the first sample that
   leaves the workspace box or enters a keep-out box: it ends at the last safe sample, so the
   arm stops there. A sample may be outside only while it gets no deeper than the one before
   it (or, for the workspace box, than the measured position already is), so an arm that is
   already outside can be brought back, never pushed further out (``zones.first_deeper``).
4. **Joint speed** — segments (the robot's position target -> point 0, then point to point)
   that would need more than ``max_joint_speed`` are *retimed* (stretched), never clipped: the
   path stays the one checked above, only slower. The robot starts a trajectory from its
   current *target* (joint_trajectory_controller semantics), so the caller says where that is
   (``reference``: every position it may be at; the safety supervisor replays what it
   forwarded, ``lang2policy.safety.reference``) and point 0 must be reachable within the limit
   from each. Without a reference the first segment starts at the measured position and may
   lead it by ``lead_allowance`` rad beyond the limit: an estimate (servos lag their target)
   that bounds nothing when commands stream, so the safety node never uses it.

Joints a command does not name keep their current target at the robot; the filter uses their
measured position for the tool point and leaves them out of the output.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from lang2policy.control.trajectory_follower import Braking
from lang2policy.errors import ConfigError
from lang2policy.robots.safety import JointLimits
from lang2policy.safety.config import RobotSafetyConfig
from lang2policy.safety.trajectory import Trajectory
from lang2policy.safety.zones import Zones, first_deeper, fmt_point
from lang2policy.scene.arm import GRIPPER

# Largest joint change (rad) between two path samples whose tool point is checked: about 8 mm
# of tool motion on the SO-101 (reach 0.4 m), 15 mm on the Panda.
CHECK_STEP = 0.02
_TIME_TOLERANCE = 1e-9

ToolPoint = Callable[[np.ndarray], np.ndarray]  # arm joint positions -> tool point (world, m)

RULES = ("invalid", "non_finite", "joint_limit", "workspace", "keep_out", "velocity")


@dataclass(frozen=True)
class Violation:
    rule: str  # one of RULES
    message: str


@dataclass(frozen=True)
class FilterResult:
    """The trajectory to send (None: the command was dropped) and what was changed and why."""

    trajectory: Trajectory | None
    violations: tuple[Violation, ...] = ()

    @property
    def rejected(self) -> bool:
        return self.trajectory is None

    @property
    def summary(self) -> str:
        return "; ".join(v.message for v in self.violations)

    def rules(self) -> set[str]:
        return {v.rule for v in self.violations}


class MotionFilter:
    """Filters trajectories over ``limits.names`` (arm joints + gripper) for one robot."""

    def __init__(
        self,
        limits: JointLimits,
        config: RobotSafetyConfig,
        tool_point: ToolPoint,
        braking: Braking | None = None,
    ) -> None:
        self.names = tuple(limits.names)
        # How the robot comes to rest on a hold (its follower's Braking over ``names``), for the
        # supervisor's model of its target; None: a hold stops the target at the measured
        # position, at once.
        self.braking = braking
        self._index = {n: i for i, n in enumerate(self.names)}
        self._is_arm = np.array([n != GRIPPER for n in self.names])
        margin = np.where(self._is_arm, config.joint_limit_margin, 0.0)
        self.lower = np.asarray(limits.lower, float) + margin
        self.upper = np.asarray(limits.upper, float) - margin
        narrow = [
            n for n, lo, hi in zip(self.names, self.lower, self.upper, strict=True) if lo >= hi
        ]
        if narrow:
            raise ConfigError(
                f"joint_limit_margin {config.joint_limit_margin} rad leaves no range for "
                f"{narrow}; use a margin below half of their range"
            )
        self.max_joint_speed = config.max_joint_speed
        self.max_speed = np.where(self._is_arm, config.max_joint_speed, np.inf)
        self.lead_allowance = config.lead_allowance
        self.tool_point = tool_point
        self.zones = Zones(config.workspace, config.keep_out)

    # ------------------------------------------------------------------ public
    def filter(
        self,
        command: Trajectory,
        measured: Mapping[str, float],
        reference: np.ndarray | None = None,
    ) -> FilterResult:
        """Filter ``command`` given the ``measured`` positions of every joint (by name).

        ``reference``: rows of positions (``names`` order) where the robot's position target
        may be when the command starts; the first segment is timed from the farthest of them.
        None: from the measured position, less ``lead_allowance`` (see rule 4).
        """
        problem = self.command_problem(command)
        if problem is not None:
            return FilterResult(None, (problem,))
        if command.is_hold:
            return FilterResult(command)
        start = self.measured_vector(measured)
        cols = [self._index[n] for n in command.names]
        times = np.array([float(t) for t, _ in command.points])
        positions = np.array([[float(v) for v in values] for _, values in command.points])
        violations = self._clamp(command.names, cols, positions)
        times, positions, cut = self._cut(times, positions, start, cols)
        violations += cut
        if len(times):
            origin = start[None, :] if reference is None else np.atleast_2d(reference)
            times, retimed = self._retime(
                command.names, cols, times, positions, origin[:, cols], reference is None
            )
            violations += retimed
        points = tuple(
            (float(t), tuple(float(v) for v in row))
            for t, row in zip(times, positions, strict=True)
        )
        return FilterResult(Trajectory(command.names, points), tuple(violations))

    def state_problem(self, measured: Mapping[str, float]) -> str | None:
        """Why ``measured`` cannot be used (missing joints, non-finite values), else None."""
        missing = [n for n in self.names if n not in measured]
        if missing:
            return f"joint state lacks {missing}; it must name {list(self.names)}"
        bad = [n for n in self.names if not _finite(measured[n])]
        if bad:
            return f"joint state has non-finite positions for {bad}"
        return None

    def measured_vector(self, measured: Mapping[str, float]) -> np.ndarray:
        problem = self.state_problem(measured)
        if problem is not None:
            raise ValueError(problem)
        return np.array([float(measured[n]) for n in self.names])

    def command_problem(self, command: Trajectory) -> Violation | None:
        """Why ``command`` must be dropped as a whole, else None."""
        names = list(command.names)
        if command.points and not names:
            return _invalid(
                f"{len(command.points)} points but no joint names; name a subset of "
                f"{list(self.names)}"
            )
        unknown = [n for n in names if n not in self._index]
        if unknown:
            return _invalid(f"unknown joints {unknown}; allowed joint names: {list(self.names)}")
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            return _invalid(f"joints named more than once: {duplicates}")
        previous = 0.0
        for index, (t, values) in enumerate(command.points):
            problem = _point_problem(index, t, values, names, previous)
            if problem is not None:
                return problem
            previous = float(t)
        return None

    # ------------------------------------------------------------------ rules
    def _clamp(self, names, cols, positions: np.ndarray) -> list[Violation]:
        """Clamp ``positions`` (in place) into the joint ranges; one note per clamped joint."""
        lower, upper = self.lower[cols], self.upper[cols]
        clamped = np.clip(positions, lower, upper)
        notes = []
        for j, name in enumerate(names):
            changed = clamped[:, j] != positions[:, j]
            if changed.any():
                notes.append(
                    Violation(
                        "joint_limit",
                        f"joint limits: {name} clamped at {int(changed.sum())} of "
                        f"{len(positions)} points (commanded {positions[:, j].min():.3f}.."
                        f"{positions[:, j].max():.3f}, allowed {lower[j]:.3f}..{upper[j]:.3f})",
                    )
                )
        positions[:] = clamped
        return notes

    def _samples(self, start: np.ndarray, full: np.ndarray):
        """Path samples every <= CHECK_STEP rad: arm joints, their point index and fraction.

        Sample 0 is the measured position (index -1); then, per point k, fractions s/steps of
        the segment from the previous point (or the measured position) to point k.
        """
        rows, owner, fraction = [start[self._is_arm]], [-1], [1.0]
        previous = start
        for k, target in enumerate(full):
            delta = (target - previous)[self._is_arm]
            steps = max(1, math.ceil(float(np.abs(delta).max(initial=0.0)) / CHECK_STEP))
            f = np.arange(1, steps + 1) / steps
            rows.extend(previous[self._is_arm] + f[:, None] * delta)
            owner.extend([k] * steps)
            fraction.extend(f)
            previous = target
        return np.array(rows), owner, fraction

    def _cut(self, times, positions, start, cols):
        """Cut the path before the first sample that violates a zone more than the one before
        and more than the measured position does."""
        full = np.repeat(start[None, :], len(times), axis=0)
        full[:, cols] = positions
        samples, owner, fraction = self._samples(start, full)
        points = np.array([self.tool_point(q) for q in samples])
        depths = self.zones.depths(points)
        found = first_deeper(depths, self.zones.keep_out)
        if found is None:
            return times, positions, []
        bad, zone = found
        k = owner[bad]
        kept_t, kept_p = list(times[:k]), list(positions[:k])
        if owner[bad - 1] == k:  # the last safe sample lies inside segment k: end there
            prev_t = times[k - 1] if k > 0 else 0.0
            prev_p = positions[k - 1] if k > 0 else start[cols]
            f = fraction[bad - 1]
            kept_t.append(prev_t + (times[k] - prev_t) * f)
            kept_p.append(prev_p + (positions[k] - prev_p) * f)
        note = self._cut_note(zone, points[bad], k, times[k], kept_t)
        return np.array(kept_t), np.array(kept_p).reshape(-1, len(cols)), [note]

    def _cut_note(self, zone: int, point, index: int, t: float, kept_t: list) -> Violation:
        keep_out = bool(self.zones.keep_out[zone])
        count = len(kept_t)
        end = (
            f"cut to end at the last safe point (t={kept_t[-1]:.3f} s, "
            f"{count} point{'s' if count != 1 else ''} kept)"
            if kept_t
            else "nothing before it is safe: the arm holds where it is"
        )
        return Violation(
            "keep_out" if keep_out else "workspace",
            f"{'keep-out' if keep_out else 'workspace'}: the tool point would "
            f"{'enter' if keep_out else 'leave'} {self.zones.describe(zone)} at "
            f"{fmt_point(point)} on the way to point {index} (t={t:.3f} s); {end}",
        )

    def _retime(self, names, cols, times, positions, origins, measured: bool):
        """Stretch segments that need more than the speed limit; later points shift with them.

        ``origins``: rows where the first segment may start (the command's joints only);
        ``measured``: they are the measured position, which point 0 may lead by the allowance.
        """
        speed = self.max_speed[cols]
        lead = np.where(self._is_arm[cols], self.lead_allowance if measured else 0.0, 0.0)
        new_times = np.empty_like(times)
        prev, prev_t, prev_new = origins, 0.0, 0.0
        stretched, fastest = 0, (0.0, "", "")
        origin = "the measured state" if measured else "the robot's target"
        for k in range(len(times)):
            delta = np.abs(positions[k] - prev)
            if k == 0:
                delta = delta.max(axis=0)  # the farthest place the target may be
            need_each = np.maximum(delta - lead, 0.0) / speed if k == 0 else delta / speed
            need, segment = float(need_each.max()), float(times[k] - prev_t)
            if need > segment + _TIME_TOLERANCE:
                stretched += 1
                j = int(np.argmax(need_each))
                rate = delta[j] / segment if segment > _TIME_TOLERANCE else math.inf
                where = f"from {origin} to point 0" if k == 0 else f"into point {k}"
                if rate > fastest[0]:
                    fastest = (rate, names[j], where)
            new_times[k] = prev_new + max(segment, need)
            prev, prev_t, prev_new = positions[k], times[k], new_times[k]
        if not stretched:
            return times, []
        rate, name, where = fastest
        rate_text = "a jump (no time)" if math.isinf(rate) else f"{rate:.2f} rad/s"
        return new_times, [
            Violation(
                "velocity",
                f"velocity: retimed {stretched} of {len(times)} segments to at most "
                f"{self.max_joint_speed:g} rad/s (fastest: {name} "
                f"{rate_text} {where}); it now takes {new_times[-1]:.3f} s instead of "
                f"{times[-1]:.3f} s",
            )
        ]


# ---------------------------------------------------------------------- helpers
def _finite(value) -> bool:
    try:
        return math.isfinite(float(value)) and not isinstance(value, bool)
    except (TypeError, ValueError):
        return False


def _invalid(reason: str) -> Violation:
    return Violation("invalid", f"command rejected: {reason}")


def _point_problem(
    index: int, t, values: Sequence, names: list[str], previous: float
) -> Violation | None:
    if len(values) != len(names):
        return _invalid(
            f"point {index} has {len(values)} positions; it must have one per joint name "
            f"({len(names)}: {names})"
        )
    bad = [n for n, v in zip(names, values, strict=True) if not _finite(v)]
    if bad:
        return Violation(
            "non_finite",
            f"command rejected: point {index} has non-finite positions for {bad}; positions "
            "must be finite numbers (rad, gripper 0..1)",
        )
    if not _finite(t):
        return Violation(
            "non_finite", f"command rejected: point {index} has a non-finite time_from_start"
        )
    if float(t) < 0.0:
        return _invalid(f"point {index} has negative time_from_start {float(t):.3f} s")
    if float(t) < previous:
        return _invalid(
            f"point {index} has time_from_start {float(t):.3f} s before the previous point's "
            f"{previous:.3f} s; times must be non-decreasing"
        )
    return None
