"""The safety node's workspace box as a planning cost, so the MPC never plans a way out of it.

The safety node cuts every command whose path takes the tool centre past the workspace box
(config/safety.yaml, shrunk by its ``workspace_margin``). A planner that does not know the box
proposes such paths again and again: an arm resting at the box's face, after a target it could
not reach, stood there for the whole plan, every command cut at its first sample (the straight
joint path between two commands bulges a few millimetres outward). Charging the rollouts for
every millimetre outside a slightly smaller box keeps the plans, and so the arm, inside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lang2policy.config import read_yaml
from lang2policy.safety.config import default_config_path, load_safety_config

# Metres the planning box is smaller than the safety node's on its sides and top: the tool
# rests this far inside, so a bulge of the joint path between two commands stays inside the
# safety box. The floor is not charged: the table is there, and charging the safety node's
# 3 mm floor changed which pushes succeed (`bench l2r` push seed 6: done at 13.9 s of 15 s
# without it, timed out with it).
PLAN_MARGIN = 0.01
# Cost per metre outside, averaged over the rollout: 1 mm out costs what 1 m of error of a
# weight-1 term does, so no reward term can pull the plan out.
COST_PER_METRE = 1000.0


@dataclass(frozen=True)
class StayInside:
    """An axis-aligned box (world frame, metres) the tool centre is charged for leaving."""

    low: np.ndarray
    high: np.ndarray

    def cost(self, tool: np.ndarray) -> np.ndarray:
        """``[K]``: ``COST_PER_METRE`` x the time-mean distance of ``tool [K, T, 3]`` outside."""
        outside = np.maximum(self.low - tool, 0.0) + np.maximum(tool - self.high, 0.0)
        return COST_PER_METRE * np.linalg.norm(outside, axis=-1).mean(axis=-1)


def stay_inside_for(robot: str, config: str | Path | None = None) -> StayInside | None:
    """The planning box of ``robot`` from its safety limits (default: the packaged
    config/safety.yaml), or None for a robot that file does not list."""
    path = Path(config) if config else default_config_path()
    if robot not in read_yaml(path):
        return None
    limits = load_safety_config(robot, path)
    inset = limits.workspace_margin + PLAN_MARGIN
    low = np.array(limits.workspace.min, float) + np.array([inset, inset, -np.inf])
    high = np.array(limits.workspace.max, float) - inset
    return StayInside(low, high)
