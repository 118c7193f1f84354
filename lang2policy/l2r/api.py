"""The reward API the reward coder writes calls to, and what each call does to a reward spec.

Each function is a typed ``Skill`` (category "query"): the sandbox child gets a stub for it, the
host binds and checks its arguments, and ``RewardBuilder.call`` applies it. So reward code runs
like policy code, in the confined child, and only JSON arguments cross to the host; the
mapping from calls to reward terms is trusted host code that the LLM cannot change.

Every call sets terms under fixed ids (``set_lift`` sets ``reach``, ``grasp`` and ``lift``), so
applying the calls of a correction to the running spec *edits* it: the same ids are
overwritten, everything else stays. ``RewardBuilder.to_dict()`` gives the spec JSON that
``validate_spec`` checks (numbers outside a term's range are clamped there, with a note).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from lang2policy.errors import InvalidIntentError, UnknownObjectError
from lang2policy.rewards.spec import RewardSpec
from lang2policy.skills.spec import Param, Skill

_OBJ = Param("obj", "object", "the object, by its scene name, e.g. 'red block'")
_X = Param("x", "number", "x of the point in metres (+x away from the robot)")
_Y = Param("y", "number", "y of the point in metres (+y to the robot's left)")

# Success tolerances (in each term's unit) and the hold time of a goal.
POSITION_TOLERANCE = 0.02  # m
ANGLE_TOLERANCE = 0.1  # rad (about 6 degrees)
REGION_TOLERANCE = 0.01  # m: how deep the tool may dip into a keep-out region before failing
# Terms that only help reach a goal; their success conditions give way to a goal's.
SUBGOALS = ("reach", "grasp")


def _api(name: str, params: tuple[Param, ...], doc: str) -> Skill:
    return Skill(name, "query", params, "none", doc)


REWARD_API: dict[str, Skill] = {s.name: s for s in (
    _api("reset_reward", (), "Start from an empty reward (call first for a new task)."),
    _api("set_reach", (_OBJ,), "Move the gripper to the object (from above)."),
    _api("set_grasp", (_OBJ,), "Reach the object and close the gripper on it."),
    _api("set_lift", (_OBJ, Param("height", "number", "lift above the table in metres")),
         "Grasp the object and hold it `height` metres above where it rests."),
    _api("set_object_target", (_OBJ, _X, _Y),
         "Grasp the object and move it to the point (x, y) on the table."),
    _api("set_place_on", (_OBJ, Param("target", "object", "the object to put it on or in")),
         "Grasp the object and put it on (or in) the target object."),
    _api("set_push", (_OBJ, _X, _Y),
         "Push the object, without grasping it, to the point (x, y) on the table."),
    _api("set_yaw", (_OBJ, Param("degrees", "number", "target heading in degrees")),
         "Turn the object to a heading (degrees, counter-clockwise from +x)."),
    _api("set_upright", (_OBJ,), "Stand the object upright (a face flat on the table)."),
    _api("set_hover", (_X, _Y, Param("height", "number", "height above the table in metres")),
         "Keep the gripper `height` metres above the point (x, y)."),
    _api("set_tool_target", (_X, _Y, Param("z", "number", "z in metres (table top is 0)")),
         "Move the gripper to the point (x, y, z)."),
    _api("set_speed_limit", (Param("m_per_s", "number", "speed in m/s"),),
         "Move the gripper no faster than `m_per_s`."),
    _api("set_min_speed", (Param("m_per_s", "number", "speed in m/s"),),
         "Move the gripper at least this fast (for 'quickly')."),
    _api("avoid_region", (Param("center", "point", "centre [x, y, z] of the region"),
                          Param("half_size", "number", "half the edge of the cube, metres")),
         "Keep the gripper out of a cube-shaped region."),
    _api("set_gripper", (Param("opening", "number", "0 closed, 1 open"),),
         "Hold the gripper at an opening."),
    _api("set_duration", (Param("seconds", "number", "seconds"),),
         "How long the task may take."),
    _api("execute_plan", (Param("duration", "number", "seconds; 0 keeps the current",
                                default=0.0),),
         "Send the reward to the controller (call last)."),
)}


def prompt_api() -> str:
    """The reward API as Python stubs with docstrings, for the coder prompt."""
    blocks = []
    for skill in REWARD_API.values():
        args = ", ".join(p.name if p.required else f"{p.name}={p.default!r}"
                         for p in skill.params)
        blocks.append(f"def {skill.name}({args}):\n    \"\"\"{skill.doc}\"\"\"")
    return "\n".join(blocks)


class RewardBuilder:
    """The reward being built: terms by id, success conditions by term id, duration.

    ``base`` (the running spec) is the starting point when the task is not new. Objects are
    checked against ``objects``; numbers are passed on for ``validate_spec`` to range-check.
    """

    def __init__(self, objects: Sequence[str], base: RewardSpec | None = None) -> None:
        self.objects = list(objects)
        self.terms: dict[str, dict[str, Any]] = {}
        self.conditions: dict[str, dict[str, Any]] = {}
        self.duration: float | None = None
        self.hold: float | None = None
        self.calls: list[str] = []
        self.executed = False
        if base is not None:
            self._load(base)

    # ------------------------------------------------------------------ state
    def _load(self, spec: RewardSpec) -> None:
        data = spec.to_dict()
        self.terms = {t["id"]: t for t in data["terms"]}
        success = data.get("success", {})
        self.conditions = {c["term"]: c for c in success.get("all", [])}
        self.duration = data["duration"]
        self.hold = success.get("hold")

    def reset(self) -> None:
        self.terms.clear()
        self.conditions.clear()
        self.duration = self.hold = None

    def to_dict(self, task: str) -> dict[str, Any]:
        """The spec JSON (unvalidated). Subgoal conditions are dropped when a goal has one."""
        conditions = dict(self.conditions)
        if any(term_id not in SUBGOALS for term_id in conditions):
            for term_id in SUBGOALS:
                conditions.pop(term_id, None)
        data: dict[str, Any] = {"version": 1, "task": task[:500],
                                "terms": list(self.terms.values())}
        if self.duration is not None:
            data["duration"] = self.duration
        if conditions:
            data["success"] = {"all": list(conditions.values())}
            if self.hold is not None:
                data["success"]["hold"] = self.hold
        return data

    def _set(self, term_id: str, term: str, params: dict[str, Any],
             weight: float | None = None) -> None:
        entry: dict[str, Any] = {"id": term_id, "term": term, "params": params}
        if weight is not None:
            entry["weight"] = weight
        self.terms[term_id] = entry

    def _goal(self, term_id: str, tolerance: float, always: bool = False) -> None:
        self.conditions[term_id] = {"term": term_id,
                                    ("always_below" if always else "below"): tolerance}

    def _object(self, name: str) -> str:
        if name not in self.objects:
            raise UnknownObjectError(f"unknown object {name!r}; objects: {sorted(self.objects)}")
        return name

    # ------------------------------------------------------------------ the API
    def call(self, name: str, args: Mapping[str, Any]) -> None:
        """Apply one bound API call (arguments already checked by its ``Skill``)."""
        handler: Callable[..., None] | None = getattr(self, f"_api_{name}", None)
        if name not in REWARD_API or handler is None:
            raise InvalidIntentError(f"no reward function {name!r}; functions: "
                                     f"{', '.join(REWARD_API)}")
        handler(**args)
        self.calls.append(name)

    def _api_reset_reward(self) -> None:
        self.reset()

    def _api_set_reach(self, obj: str) -> None:
        self._set("reach", "reach", {"object": self._object(obj), "approach": "above"})
        self._goal("reach", POSITION_TOLERANCE)

    def _api_set_grasp(self, obj: str) -> None:
        self._api_set_reach(obj)
        self._set("grasp", "grasp", {"object": obj})
        self._goal("grasp", 0.1)

    def _api_set_lift(self, obj: str, height: float) -> None:
        self._api_set_grasp(obj)
        self._set("lift", "object_height", {"object": obj, "height": height,
                                            "mode": "exactly"})
        self._goal("lift", POSITION_TOLERANCE)

    def _api_set_object_target(self, obj: str, x: float, y: float) -> None:
        self._api_set_grasp(obj)
        self._set("to_point", "object_to_point", {"object": obj, "point": [x, y, 0.0125],
                                                  "axes": "xy"})
        self._goal("to_point", POSITION_TOLERANCE)

    def _api_set_place_on(self, obj: str, target: str) -> None:
        if self._object(target) == self._object(obj):
            raise InvalidIntentError(f"set_place_on: {obj!r} cannot be placed on itself")
        self._api_set_grasp(obj)
        offset = 0.02 if target.endswith("bowl") else 0.025
        self._set("place_on", "object_on", {"object": obj, "target": target, "offset": offset})
        self._goal("place_on", POSITION_TOLERANCE)

    def _api_set_push(self, obj: str, x: float, y: float) -> None:
        self._set("push", "push", {"object": self._object(obj), "point": [x, y, 0.0125]})
        self._set("push_to", "object_to_point", {"object": obj, "point": [x, y, 0.0125],
                                                 "axes": "xy"})
        self._set("gripper", "gripper", {"opening": 0.0})
        for term_id in SUBGOALS:  # pushing, not grasping
            self.terms.pop(term_id, None)
            self.conditions.pop(term_id, None)
        self._goal("push_to", POSITION_TOLERANCE)

    def _api_set_yaw(self, obj: str, degrees: float) -> None:
        self._api_set_grasp(obj)
        self._set("yaw", "object_yaw", {"object": obj, "yaw_deg": degrees})
        self._goal("yaw", ANGLE_TOLERANCE)

    def _api_set_upright(self, obj: str) -> None:
        self._api_set_reach(obj)
        self._set("upright", "object_upright", {"object": obj, "any_face": "yes"})
        self._goal("upright", ANGLE_TOLERANCE)

    def _api_set_hover(self, x: float, y: float, height: float) -> None:
        self._set("hover", "tool_above", {"point": [x, y, 0.0], "height": height})
        self._goal("hover", POSITION_TOLERANCE)

    def _api_set_tool_target(self, x: float, y: float, z: float) -> None:
        self._set("tool_to", "tool_to_point", {"point": [x, y, z], "axes": "xyz"})
        self._goal("tool_to", POSITION_TOLERANCE)

    def _api_set_speed_limit(self, m_per_s: float) -> None:
        self._set("speed", "tool_speed", {"speed": m_per_s, "mode": "at_most"}, weight=5.0)

    def _api_set_min_speed(self, m_per_s: float) -> None:
        self._set("speed", "tool_speed", {"speed": m_per_s, "mode": "at_least"}, weight=5.0)

    def _api_avoid_region(self, center: list[float], half_size: float) -> None:
        params = {"point": list(center), "half_size": [half_size] * 3, "subject": "tool"}
        same = [i for i, t in self.terms.items()
                if t["term"] == "keep_out" and t["params"].get("point") == params["point"]]
        term_id = same[0] if same else _free_id(self.terms, "keep_out")
        self._set(term_id, "keep_out", params)
        self._goal(term_id, REGION_TOLERANCE, always=True)

    def _api_set_gripper(self, opening: float) -> None:
        self._set("gripper", "gripper", {"opening": opening})

    def _api_set_duration(self, seconds: float) -> None:
        self.duration = seconds

    def _api_execute_plan(self, duration: float = 0.0) -> None:
        if duration:
            self.duration = duration
        self.executed = True


def _free_id(terms: Mapping[str, Any], stem: str) -> str:
    if stem not in terms:
        return stem
    return next(f"{stem}_{i}" for i in range(2, 1000) if f"{stem}_{i}" not in terms)


class RewardBackend:
    """The sandbox runner's backend for reward code: every call goes into a ``RewardBuilder``.

    Nothing moves: no targets, no motion time; ``hold`` is a no-op.
    """

    def __init__(self, builder: RewardBuilder) -> None:
        self.builder = builder

    def object_names(self) -> list[str]:
        return list(self.builder.objects)

    def path(self, skill: str, bound: dict) -> tuple[list, list]:
        return [], []

    def execute(self, skill: str, bound: dict, time_limit: float | None = None) -> object:
        self.builder.call(skill, bound)
        return None

    def hold(self) -> None:
        return None

    def clock(self) -> float:
        return 0.0

    def said(self) -> list[str]:
        return []
