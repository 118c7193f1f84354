"""The zone guard: every shaped sample checked on the gripper's geometry, cut with a safe stop.

The motion filter cuts a command's straight joint path where the tool centre point would leave
the workspace or enter a keep-out zone. What the robot is then sent is the shaper's output
(``lang2policy.safety.shaper``): dense samples that may run past a turning point, and a
gripper whose open jaw reaches 8 cm past the tool centre point. The guard checks those
samples, as the robot will follow them:

* the workspace box on the tool centre point (the jaws touch the table top when they grasp);
* every keep-out zone, the configured ones and the plan's (``set_plan_zones``), grown by
  ``zone_margin`` (the servo's lag and overshoot), on the tool centre point *and* the corners
  of the gripper's boxes (``GripperHull``) at the jaw openings the motion has (a configured
  zone with ``geometry: tool``, the robot's own base, on the tool centre point alone).

As in the filter, a sample may be outside the workspace or inside a zone only while it gets no
deeper than the one before it or than the arm already is, at its target or its measured
position (an arm that starts there can come out; ``zones.first_deeper``). At the first sample
that gets deeper, the guard keeps the samples up to the latest one from which braking at full
deceleration is safe (checked the same way) and ends with that braking: the target comes to
rest at the zone's edge rather than stopping dead on it, so the servo does not run into it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from lang2policy.safety.config import BoxConfig, shifted
from lang2policy.safety.shaper import Shaped, ShaperLimits, braking
from lang2policy.safety.zones import Zones, first_deeper, fmt_point

# Points (world, rows) of the guarded geometry at each arm configuration: (S, P, 3) from
# (S, dof) joint rows and the jaw openings (lo, hi) the motion has.
GeometryPoints = Callable[[np.ndarray, tuple[float, float]], np.ndarray]
ToolPoints = Callable[[np.ndarray], np.ndarray]  # (S, dof) -> (S, 3)


class ZoneGuard:
    """Checks shaped samples (rows over the robot's action names) against the zones."""

    def __init__(
        self,
        workspace: BoxConfig,
        keep_out: Mapping[str, BoxConfig],
        tool_points: ToolPoints,
        geometry: GeometryPoints,
        arm_columns: np.ndarray,
        gripper_column: int | None,
        zone_margin: float = 0.0,
    ) -> None:
        self.workspace = workspace
        self.configured = dict(keep_out)
        self.plan_zones: dict[str, BoxConfig] = {}
        self.tool_points = tool_points
        self.geometry = geometry
        self.arm = np.asarray(arm_columns, int)
        self.gripper = gripper_column
        self.margin = float(zone_margin)
        self._rebuild()

    def set_plan_zones(self, zones: Mapping[str, BoxConfig]) -> None:
        """The keep-out zones of the running plan's policy (added to the configured ones)."""
        self.plan_zones = {f"plan:{name}": box for name, box in zones.items()}
        self._rebuild()

    def _rebuild(self) -> None:
        zones = {**self.configured, **self.plan_zones}
        grown = {
            name: BoxConfig(shifted(box.min, -self.margin), shifted(box.max, self.margin))
            for name, box in zones.items()
        }
        self.zones = Zones(self.workspace, grown)
        # Zones the gripper's geometry must stay out of (the others: its tool point).
        self._gripper_zones = np.array(
            [False] + [box.geometry == "gripper" for box in zones.values()]
        )

    # ------------------------------------------------------------------ depths
    def depths(self, rows: np.ndarray, openings: tuple[float, float]) -> np.ndarray:
        """(samples, zones): the workspace depth of the tool point, each keep-out zone's depth
        of the deepest point of the gripper's geometry (and the tool point)."""
        arm = rows[:, self.arm]
        tool = self.tool_points(arm)
        depths = self.zones.depths(tool)
        gripper = self._gripper_zones
        if gripper.any():
            points = self.geometry(arm, openings)  # (S, P, 3)
            flat = self.zones.depths(points.reshape(-1, 3)).reshape(len(rows), -1, depths.shape[1])
            depths[:, gripper] = np.maximum(depths[:, gripper], flat.max(axis=1)[:, gripper])
        return depths

    def _openings(self, start: np.ndarray, shaped: Shaped) -> tuple[float, float]:
        if self.gripper is None:
            return (0.0, 1.0)
        values = np.append(shaped.positions[:, self.gripper], start[self.gripper])
        return float(np.clip(values.min(), 0, 1)), float(np.clip(values.max(), 0, 1))

    # ------------------------------------------------------------------ the guard
    def guard(
        self,
        start: np.ndarray,
        velocity: np.ndarray,
        shaped: Shaped,
        limits: ShaperLimits,
        measured: np.ndarray | None = None,
    ) -> tuple[Shaped, str | None, str]:
        """``shaped`` if every sample is safe, else cut to a safe stop: (samples, the rule that
        cut -- "keep_out" or "workspace" -- or None, a message saying where and why).
        ``start`` is the robot's target; ``measured``, where the arm is (a servo that sags
        past a target at a box's edge leaves the arm that much deeper than its target)."""
        openings = self._openings(start, shaped)
        rows = np.vstack([start[None, :], shaped.positions])
        depths = self.depths(rows, openings)
        floor = None if measured is None else self.depths(measured[None, :], openings)[0]
        found = first_deeper(depths, self.zones.keep_out, floor)
        if found is None:
            return shaped, None, ""
        bad, zone = found
        kept = self._last_safe_stop(start, velocity, shaped, limits, bad, (openings, floor))
        rule = "keep_out" if self.zones.keep_out[zone] else "workspace"
        message = self._message(rule, zone, rows[bad], shaped.times[bad - 1], kept)
        return kept, rule, message

    def _last_safe_stop(self, start, velocity, shaped, limits, bad, check) -> Shaped:
        """The samples before ``bad`` up to the latest one from which braking stays safe,
        followed by that braking (from the start if none is safe: the best there is).
        ``check``: the jaw openings and the depth floor the samples were checked with."""
        openings, floor = check
        dt = limits.period
        for keep in range(bad - 1, -1, -1):
            q = shaped.positions[keep - 1] if keep else start
            v = shaped.velocities[keep - 1] if keep else velocity
            rows, speeds = braking(q, v, limits)
            depths = self.depths(np.vstack([q[None, :], rows]), openings)
            if first_deeper(depths, self.zones.keep_out, floor) is None or keep == 0:
                head = shaped.head(keep)
                t0 = float(head.times[-1]) if keep else 0.0
                times = t0 + dt * np.arange(1, len(rows) + 1)
                return Shaped(
                    np.concatenate([head.times, times]),
                    np.vstack([head.positions.reshape(-1, rows.shape[1]), rows]),
                    np.vstack([head.velocities.reshape(-1, rows.shape[1]), speeds]),
                )
        raise AssertionError("unreachable: keep == 0 always returns")

    def _message(self, rule: str, zone: int, row: np.ndarray, t: float, kept: Shaped) -> str:
        tool = self.tool_points(row[None, self.arm])[0]
        if rule == "keep_out":
            what = (
                f"the gripper would enter {self.zones.describe(zone)} (grown by {self.margin:g} m)"
            )
        else:
            what = f"the tool point would leave {self.zones.describe(zone)}"
        return (
            f"{'keep-out' if rule == 'keep_out' else 'workspace'}: {what} at t={t:.3f} s, tool "
            f"point {fmt_point(tool)}; the arm brakes to rest before it (stops at "
            f"t={float(kept.times[-1]):.3f} s)"
        )
