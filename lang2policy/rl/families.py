"""Task families for learned controllers: which reward specs a policy serves, and its goal inputs.

A goal-conditioned policy serves every instruction of its family because the family's task
parameters (a target point, a height, a speed limit) are inputs, not baked in. A family says

* ``draw(description, rng)``: a fresh reference spec (JSON, validated later) with a random goal, for
  training and evaluation; goals come from the workspace, so seeds never seen in training give
  goals never seen in training;
* ``goal(spec)``: the goal vector of a validated spec, or ``None`` when the spec is not of the
  family (other terms, other modes): the controller then falls back to the MPC.

A spec belongs to a family by its *task* terms; the terms every spec gets by default
(``DEFAULT_TERMS``: table clearance, control effort, posture) and the cosmetic
``tool_pointing_down`` are allowed beside them and keep their part of the reward.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lang2policy.errors import Lang2PolicyError
from lang2policy.rewards.spec import RewardSpec, TermSpec
from lang2policy.rewards.terms import DEFAULT_TERMS
from lang2policy.scene.robot_description import RobotDescription

_PASSIVE_TERMS = frozenset(DEFAULT_TERMS) | {"tool_pointing_down"}
REACH_HEIGHT = (0.03, 0.18)  # tool heights (m) a reach goal is drawn from
SLOW_SPEED = (0.03, 0.10)  # speed limits (m/s) a move-slowly goal is drawn from


@dataclass(frozen=True)
class Family:
    """One family of reward specs a goal-conditioned policy can serve."""

    name: str
    doc: str
    goal_names: tuple[str, ...]
    draw: Callable[[RobotDescription, np.random.Generator], dict]
    goal: Callable[[RewardSpec], np.ndarray | None]
    episode_seconds: float
    objects: tuple[str, ...] = ()  # the objects training episodes put on the table
    gripper: bool = False  # whether the policy also sets the gripper opening
    # share of training episodes that start with the tool a few cm above the first object
    # (a reverse curriculum: from there the grasp is found by chance, then learnt from afar)
    near_start: float = 0.0
    action_scale: float = 0.15  # rad: how far from the measured joints a full action aims
    # log of the initial exploration noise (PPO's default 0: std 1); a family whose constraint
    # random actions break at once (move_slowly's speed limit) starts exploring gently
    log_std_init: float = 0.0
    # index of the goal entry that is a tool speed limit (m/s): the action mapping keeps the
    # tool under it (``actions.arm_targets``)
    speed_goal: int | None = None
    # "joints" (offsets from the measured joints) or "tool" (a tool move and a turn of the
    # jaws, mapped to joints through the Jacobian): see ``actions.py``
    action: str = "joints"

    @property
    def goal_size(self) -> int:
        return len(self.goal_names)

    def action_size(self, dof: int) -> int:
        """Numbers in an action: the arm's part (``dof`` joints, or 3 tool axes and a turn),
        plus the gripper opening for families that grasp."""
        arm = 4 if self.action == "tool" else dof
        return arm + (1 if self.gripper else 0)

    def speed_limit(self, goal: np.ndarray) -> float | None:
        """The tool speed limit (m/s) in ``goal``, or ``None`` for a family without one."""
        return None if self.speed_goal is None else float(goal[self.speed_goal])


def task_terms(spec: RewardSpec) -> list[TermSpec]:
    """The spec's terms that define its task (default and cosmetic terms left out)."""
    return [t for t in spec.terms if t.term not in _PASSIVE_TERMS]


def tool_target(term: TermSpec) -> np.ndarray | None:
    """Where a ``tool_to_point`` (all axes) or ``tool_above`` term wants the tool centre."""
    point = np.asarray(term.params.get("point", ()), float)
    if term.term == "tool_to_point" and term.params.get("axes", "xyz") == "xyz":
        return point
    if term.term == "tool_above":
        return point + np.array([0.0, 0.0, float(term.params["height"])])
    return None


def table_point(description: RobotDescription, rng: np.random.Generator) -> tuple[float, float]:
    """A random (x, y) inside the robot's workspace (its box and its reach annulus)."""
    ws = description.workspace
    for _ in range(1000):
        x, y = rng.uniform(*ws.x), rng.uniform(*ws.y)
        if ws.min_radius <= np.hypot(x, y) <= ws.max_radius:
            return float(x), float(y)
    raise Lang2PolicyError("the workspace has no point inside its reach annulus")


# ----------------------------------------------------------------------- reach / hover
def _reach_goal(spec: RewardSpec) -> np.ndarray | None:
    terms = task_terms(spec)
    if len(terms) != 1:
        return None
    return tool_target(terms[0])


def _draw_reach(description: RobotDescription, rng: np.random.Generator) -> dict:
    x, y = table_point(description, rng)
    z = float(rng.uniform(*REACH_HEIGHT))
    if rng.random() < 0.5:
        term = {"id": "goal", "term": "tool_to_point", "params": {"point": [x, y, z]}}
    else:
        term = {"id": "goal", "term": "tool_above",
                "params": {"point": [x, y, 0.0], "height": z}}
    return {"task": "reach", "duration": 8, "terms": [term],
            "success": {"all": [{"term": "goal", "below": 0.015}], "hold": 0.5}}


# ----------------------------------------------------------------------- move slowly
def _slow_goal(spec: RewardSpec) -> np.ndarray | None:
    terms = {t.term: t for t in task_terms(spec)}
    if len(terms) != 2 or set(terms) != {"tool_to_point", "tool_speed"}:
        return None
    target = tool_target(terms["tool_to_point"])
    speed = terms["tool_speed"]
    if target is None or speed.params.get("mode") != "at_most":
        return None
    return np.append(target, float(speed.params["speed"]))


def _draw_slow(description: RobotDescription, rng: np.random.Generator) -> dict:
    x, y = table_point(description, rng)
    z = float(rng.uniform(*REACH_HEIGHT))
    speed = round(float(rng.uniform(*SLOW_SPEED)), 3)
    return {"task": "slowly", "duration": 20, "terms": [
        {"id": "goal", "term": "tool_to_point", "weight": 2.0, "params": {"point": [x, y, z]}},
        {"id": "speed", "term": "tool_speed", "weight": 10.0,
         "params": {"speed": speed, "mode": "at_most"}}],
        "success": {"all": [{"term": "goal", "below": 0.015},
                            {"term": "speed", "always_below": 0.04}], "hold": 0.3}}


# ----------------------------------------------------------------------- lift
_LIFT_SHAPING = frozenset({"reach", "grasp", "grasp_align", "gripper"})
LIFT_HEIGHT = (0.04, 0.18)
LIFT_BLOCK = "red block"  # blocks differ only in colour: one trains, any is served


def _lift_goal(spec: RewardSpec) -> np.ndarray | None:
    terms = task_terms(spec)
    lifts = [t for t in terms if t.term == "object_height"]
    if len(lifts) != 1 or lifts[0].params.get("mode", "exactly") == "at_most":
        return None
    block = lifts[0].params["object"]
    others = [t for t in terms if t is not lifts[0]]
    if not str(block).endswith("block") or any(
            t.term not in _LIFT_SHAPING or t.params.get("object", block) != block
            for t in others):
        return None
    return np.array([float(lifts[0].params["height"])])


def grasp_shaping(block: str) -> list[dict]:
    """The terms a lift or place spec reaches for and grasps ``block`` with (as the planner's
    reward API and ``bench l2r`` write them)."""
    return [
        {"term": "reach", "weight": 1.0, "params": {"object": block}},
        {"term": "grasp", "weight": 0.3, "params": {"object": block, "radius": 0.01}},
        {"term": "grasp_align", "weight": 0.1, "params": {"object": block}},
        {"term": "tool_pointing_down", "weight": 0.05},
    ]


def _draw_lift(description: RobotDescription, rng: np.random.Generator) -> dict:
    height = round(float(rng.uniform(*LIFT_HEIGHT)), 3)
    block = LIFT_BLOCK
    return {"task": "lift", "duration": 12, "terms": [
        *grasp_shaping(block),
        {"id": "lift", "term": "object_height", "weight": 3.0,
         "params": {"object": block, "height": height}}],
        "success": {"all": [{"term": "lift", "below": 0.02}], "hold": 0.5}}


# ----------------------------------------------------------------------- place in a bowl
PLACE_BOWL = "blue bowl"  # bowls too differ only in colour


def _place_goal(spec: RewardSpec) -> np.ndarray | None:
    terms = task_terms(spec)
    places = [t for t in terms if t.term == "object_on"]
    if len(places) != 1:
        return None
    block, bowl = places[0].params["object"], places[0].params["target"]
    if not (str(block).endswith("block") and str(bowl).endswith("bowl")) or any(
            t.term not in _LIFT_SHAPING or t.params.get("object", block) != block
            for t in terms if t is not places[0]):
        return None
    return np.array([float(places[0].params["offset"])])


def _draw_place(description: RobotDescription, rng: np.random.Generator) -> dict:
    block = LIFT_BLOCK
    return {"task": "place", "duration": 15, "terms": [
        *grasp_shaping(block),
        {"id": "on", "term": "object_on", "weight": 3.0,
         "params": {"object": block, "target": PLACE_BOWL,
                    "offset": round(float(rng.uniform(*PLACE_OFFSET)), 3)}}],
        "success": {"all": [{"term": "on", "below": 0.025}], "hold": 0.5}}


PLACE_OFFSET = (0.015, 0.025)  # m: block centre above the bowl's origin, drawn per episode

FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("reach", "move the tool centre to a point, or hover it some height above one",
           ("x", "y", "z"), _draw_reach, _reach_goal, 8.0),
    Family("move_slowly", "move the tool centre to a point under a speed limit",
           ("x", "y", "z", "speed"), _draw_slow, _slow_goal, 20.0, action_scale=0.08,
           log_std_init=-0.5, speed_goal=3),
    Family("lift", "grasp a block and lift it to a height above the table", ("height",),
           _draw_lift, _lift_goal, 12.0, objects=(LIFT_BLOCK,), gripper=True, near_start=0.5,
           action="tool"),
    Family("place", "grasp a block and put it in a bowl", ("offset",), _draw_place,
           _place_goal, 15.0, objects=(LIFT_BLOCK, PLACE_BOWL), gripper=True, action="tool"),
)}


def family(name: str) -> Family:
    """The family called ``name``; a clear error names the valid ones."""
    if name not in FAMILIES:
        raise Lang2PolicyError(f"unknown task family {name!r}; valid families: {list(FAMILIES)}")
    return FAMILIES[name]


def family_of(spec: RewardSpec) -> tuple[Family, np.ndarray] | None:
    """The first family that serves ``spec`` and the spec's goal vector, or ``None``."""
    for fam in FAMILIES.values():
        goal = fam.goal(spec)
        if goal is not None:
            return fam, goal
    return None
