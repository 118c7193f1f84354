"""Guided candidates for the sampler: reach toward the tool targets a spec implies.

Pure random search struggles with the last centimetres of a grasp on a 5-DoF arm (the jaws must
come down on the object, square to its faces). Terms with a spatial goal for the tool hint where
the tool should go next; for each hint an inverse-kinematics solution (tool pointing down, jaws
square to the object) gives one extra candidate that ramps the joints toward it over the horizon.
The candidates are scored like every other sample, so the reward still decides: a hint that does
not lower the cost is simply not chosen.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from lang2policy.control.ik import IKOptions
from lang2policy.control.kinematics import Kinematics
from lang2policy.mpc.model import PlanningModel
from lang2policy.rewards.features import Features, quat_to_yaw
from lang2policy.rewards.spec import RewardSpec

# A hint: (tool target point, object to square the jaws to or None), or None for no hint.
Hint = tuple[np.ndarray, str | None] | None
_MAX_STEP = 0.6  # rad: the most a joint moves over one horizon in a proposal
_HOLD_RADIUS = 0.02  # m: an object this close to the closed jaws counts as held


def _raised(f: Features, obj: np.ndarray, slope: float) -> np.ndarray:
    horizontal = float(np.linalg.norm(f.tool[0, 0, :2] - obj[:2]))
    return obj + np.array([0.0, 0.0, min(slope * horizontal, 0.06)])


def _held(f: Features, name: str) -> bool:
    gap = float(np.linalg.norm(f.tool[0, 0] - f.objects[name]["pos"][0, 0]))
    return gap < _HOLD_RADIUS and float(f.gripper[0, 0]) < 0.45


def _carry(f: Features, name: str, goal: np.ndarray) -> Hint:
    """Move the held object to ``goal``: the tool goes where the object should, offset."""
    if not _held(f, name):
        return None
    return f.tool[0, 0] + (goal - f.objects[name]["pos"][0, 0]), None


def _reach(f: Features, p: Mapping[str, Any]) -> Hint:
    """The object's centre once the tool is inside the approach cone above it (a straight
    path down the cone is then cheapest), else the cone's point at the tool's distance."""
    obj = f.objects[p["object"]]["pos"][0, 0]
    if p.get("approach", "above") != "above":
        return obj, p["object"]
    raised = _raised(f, obj, p.get("slope", 2.0))
    inside = f.tool[0, 0, 2] >= raised[2] - 0.01
    return (obj if inside else raised), p["object"]


def _push(f: Features, p: Mapping[str, Any]) -> Hint:
    obj = f.objects[p["object"]]["pos"][0, 0]
    direction = np.asarray(p["point"], float)[:2] - obj[:2]
    direction /= max(float(np.linalg.norm(direction)), 1e-6)
    spot = obj.copy()
    spot[:2] -= p["standoff"] * direction
    behind = float(np.linalg.norm(f.tool[0, 0, :2] - spot[:2])) < 0.01
    return (spot if behind else _raised(f, spot, 2.0)), None


def _object_to_point(f: Features, p: Mapping[str, Any]) -> Hint:
    goal = f.objects[p["object"]]["pos"][0, 0].copy()
    axes = {"xyz": [0, 1, 2], "xy": [0, 1], "z": [2]}[p["axes"]]
    goal[axes] = np.asarray(p["point"], float)[axes]
    return _carry(f, p["object"], goal)


def _object_on(f: Features, p: Mapping[str, Any]) -> Hint:
    goal = f.objects[p["target"]]["pos"][0, 0] + np.array([0.0, 0.0, p["offset"]])
    current = f.objects[p["object"]]["pos"][0, 0]
    if np.linalg.norm(current[:2] - goal[:2]) > 0.01:
        goal = goal + np.array([0.0, 0.0, 0.04])  # carry over the target, then lower
    return _carry(f, p["object"], goal)


def _object_height(f: Features, p: Mapping[str, Any]) -> Hint:
    name = p["object"]
    goal = f.objects[name]["pos"][0, 0] + np.array([0.0, 0.0, 0.0])
    goal[2] = f.objects[name]["rest_z"] + p["height"]
    return _carry(f, name, goal)


HINTS: dict[str, Callable[[Features, Mapping[str, Any]], Hint]] = {
    "reach": _reach,
    "push": _push,
    "tool_to_point": lambda f, p: (np.asarray(p["point"], float), None),
    "tool_above": lambda f, p: (np.asarray(p["point"], float) + np.array([0, 0, p["height"]]),
                                None),
    "object_to_point": _object_to_point,
    "object_on": _object_on,
    "object_height": _object_height,
}


class Proposals:
    """IK-guided candidate knots for the spec's tool hints, from the current state."""

    def __init__(self, pm: PlanningModel) -> None:
        self.pm = pm
        self.kin = Kinematics(pm.model, pm.description, pm.arm)
        self.kin.options = replace(IKOptions(), restarts=0, max_iterations=60)

    def hints(self, spec: RewardSpec, f: Features) -> list[tuple[np.ndarray, str | None]]:
        found = []
        for term in sorted(spec.terms, key=lambda t: -t.weight):
            hint = HINTS[term.term](f, term.params) if term.term in HINTS else None
            if hint is not None:
                found.append(hint)
        return found[:2]

    def knots(self, spec: RewardSpec, mean: np.ndarray, horizon: float) -> list[np.ndarray]:
        """Candidate knots ``[P, nu]`` (arm joints ramped toward each hint's IK solution,
        gripper as in ``mean``)."""
        f = self.pm.features_now(forward=False)  # improve() ran mj_forward
        q_now = self.pm.data.qpos[self.pm.arm.qpos_adr].copy()
        out = []
        for target, square_to in self.hints(spec, f):
            q_goal = self._solve(np.asarray(target, float), square_to, f, q_now)
            if q_goal is None:
                continue
            step = np.clip(q_goal - q_now, -_MAX_STEP, _MAX_STEP)
            ramp = np.clip(np.linspace(0.0, 1.6, len(mean)), 0.0, 1.0)[:, None]
            candidate = mean.copy()
            candidate[:, self.pm.arm.actuator_ids] = q_now + ramp * step
            out.append(np.clip(candidate, self.pm.ctrl_low, self.pm.ctrl_high))
        return out

    def _solve(self, target: np.ndarray, square_to: str | None, f: Features,
               q_now: np.ndarray) -> np.ndarray | None:
        if square_to is not None:
            obj_yaw = float(quat_to_yaw(f.objects[square_to]["quat"][0, 0]))
            yaw = self.kin.grasp_yaw(target, obj_yaw, np.pi / 2)
        else:
            yaw = self.kin.natural_yaw(target)
        best = None
        for tilt in (0.3, 0.0, 0.6):
            rotation = self.kin.tool_rotation(target, yaw, tilt)
            site = self.kin.site_target(target, rotation)
            result = self.kin.solve(site, rotation, q_now)
            if result.ok(0.005, 0.1):
                return result.q
            if best is None or result.position_error < best.position_error:
                best = result
        return best.q if best is not None and best.position_error < 0.02 else None
