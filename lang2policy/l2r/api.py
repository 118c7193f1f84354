"""The reward API the reward coder writes calls to, and what each call does to a reward spec.

Each function is a typed ``Skill`` (category "query"): the sandbox child gets a stub for it, the
host binds and checks its arguments, and ``RewardBuilder.call`` applies it. So reward code runs
like policy code, in the confined child, and only JSON arguments cross to the host; the
mapping from calls to reward terms is trusted host code that the LLM cannot change.

Every call sets terms under fixed ids (``set_lift`` sets ``reach``, ``grasp`` and ``lift``), so
applying the calls of a correction to the running spec *edits* it: the same ids are
overwritten, everything else stays. ``RewardBuilder.to_dict()`` gives the spec JSON that
``validate_spec`` checks (numbers outside a term's range are clamped there, with a note).
Relative calls (``set_push_by``, ``set_turn``) are resolved here from the object positions and
headings the planner was given. Term choices, weights and tolerances follow the benchmark's
reference specs (``lang2policy.bench.l2r_tasks``): e.g. an object moved to a point is pushed
there, a lift grasps with the aligned, pointing-down gripper.
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
DIRECTIONS = ("away from the robot", "toward the robot", "to the left", "to the right")

# Success tolerances (in each term's unit), as in the benchmark's reference specs.
POSITION_TOLERANCE = 0.02  # m
ANGLE_TOLERANCE = 0.17  # rad (about 10 degrees)
UPRIGHT_TOLERANCE = 0.1  # rad
REGION_TOLERANCE = 0.005  # m: how deep the tool may dip into a keep-out region before failing
# Terms that only help reach a goal; their success conditions give way to a goal's.
SUBGOALS = ("reach", "grasp")
# Duration of a task by its goal term, unless set_duration / execute_plan(duration) sets one.
GOAL_DURATIONS = {"lift": 20.0, "hover": 8.0, "tool_to": 15.0, "to_point": 15.0,
                  "place_on": 15.0, "push_to": 15.0, "yaw": 15.0, "upright": 15.0}
DEFAULT_DURATION = 10.0


def _api(name: str, params: tuple[Param, ...], doc: str) -> Skill:
    return Skill(name, "query", params, "none", doc)


REWARD_API: dict[str, Skill] = {s.name: s for s in (
    _api("reset_reward", (), "Start from an empty reward (call first for a new task)."),
    _api("set_reach", (_OBJ,), "Move the gripper to the object (from above)."),
    _api("set_grasp", (_OBJ,), "Reach the object and close the gripper on it."),
    _api("set_lift", (_OBJ, Param("height", "number", "lift above the table in metres")),
         "Grasp the object and hold it `height` metres above where it rests."),
    _api("set_object_target", (_OBJ, _X, _Y),
         "Move the object to the point (x, y) on the table (it may be pushed)."),
    _api("set_place_on", (_OBJ, Param("target", "object", "the object to put it on or in")),
         "Grasp the object and put it on (or in) the target object."),
    _api("set_push", (_OBJ, _X, _Y),
         "Push the object, without grasping it, to the point (x, y) on the table."),
    _api("set_push_by", (_OBJ, Param("distance", "number", "metres"),
                         Param("direction", "string", "which way", choices=DIRECTIONS)),
         "Push the object, without grasping it, `distance` metres in a direction."),
    _api("set_yaw", (_OBJ, Param("degrees", "number", "target heading in degrees")),
         "Turn the object to a heading (degrees, counter-clockwise from +x)."),
    _api("set_turn", (_OBJ, Param("degrees", "number", "degrees, counter-clockwise")),
         "Turn the object by an angle from its current heading."),
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
        doc = skill.doc
        choices = [p for p in skill.params if p.choices]
        if choices:
            doc += " " + "; ".join(f"{p.name}: one of {list(p.choices)}" for p in choices) + "."
        blocks.append(f"def {skill.name}({args}):\n    \"\"\"{doc}\"\"\"")
    return "\n".join(blocks)


def _wrap_degrees(value: float) -> float:
    return (value + 180.0) % 360.0 - 180.0


class RewardBuilder:
    """The reward being built: terms by id, success conditions by term id, duration.

    ``base`` (the running spec) is the starting point when the task is not new. Objects are
    checked against ``objects``; ``positions`` (x, y, z) and ``headings`` (degrees) of objects
    serve the relative calls (``set_push_by``, ``set_turn``). Numbers are passed on for
    ``validate_spec`` to range-check.
    """

    def __init__(self, objects: Sequence[str], base: RewardSpec | None = None, *,
                 positions: Mapping[str, Sequence[float]] | None = None,
                 headings: Mapping[str, float] | None = None) -> None:
        self.objects = list(objects)
        self.positions = dict(positions or {})
        self.headings = dict(headings or {})
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
                                "terms": list(self.terms.values()),
                                "duration": self.duration or self._default_duration()}
        if conditions:
            data["success"] = {"all": list(conditions.values())}
            if self.hold is not None:
                data["success"]["hold"] = self.hold
        return data

    def _default_duration(self) -> float:
        return max((GOAL_DURATIONS.get(i, 0.0) for i in self.terms), default=0.0) or \
            DEFAULT_DURATION

    def _set(self, term_id: str, term: str, params: dict[str, Any],
             weight: float | None = None) -> None:
        entry: dict[str, Any] = {"id": term_id, "term": term, "params": params}
        if weight is not None:
            entry["weight"] = weight
        self.terms[term_id] = entry

    def _drop(self, *term_ids: str) -> None:
        for term_id in term_ids:
            self.terms.pop(term_id, None)
            self.conditions.pop(term_id, None)

    def _goal(self, term_id: str, tolerance: float, always: bool = False) -> None:
        self.conditions[term_id] = {"term": term_id,
                                    ("always_below" if always else "below"): tolerance}

    def _object(self, name: str) -> str:
        if name not in self.objects:
            raise UnknownObjectError(f"unknown object {name!r}; objects: {sorted(self.objects)}")
        return name

    def _position(self, name: str) -> Sequence[float]:
        where = self.positions.get(self._object(name))
        if where is None:
            raise InvalidIntentError(f"the position of the {name} is not known here; give an "
                                     "absolute point instead (set_push)")
        return where

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
        self._set("reach", "reach", {"object": self._object(obj)}, 1.0)
        self._set("pointing_down", "tool_pointing_down", {}, 0.05)
        self._goal("reach", POSITION_TOLERANCE)

    def _api_set_grasp(self, obj: str) -> None:
        self._api_set_reach(obj)
        self._drop("gripper", "push", "flat_on_table")  # the grasp term drives the gripper
        self._set("grasp", "grasp", {"object": obj, "radius": 0.01}, 0.3)
        self._set("grasp_align", "grasp_align", {"object": obj}, 0.1)
        self._goal("grasp", 0.1)

    def _api_set_lift(self, obj: str, height: float) -> None:
        self._api_set_grasp(obj)
        self._set("lift", "object_height", {"object": obj, "height": height}, 3.0)
        self._goal("lift", POSITION_TOLERANCE)

    def _pushing(self, obj: str, point: list[float], term_id: str, tolerance: float) -> None:
        self._drop(*SUBGOALS, "grasp_align", "pointing_down")  # pushing, not grasping
        self._set("push", "push", {"object": self._object(obj), "point": point}, 1.0)
        self._set("gripper", "gripper", {"opening": 0.0}, 0.2)
        self._set(term_id, "object_to_point", {"object": obj, "point": point, "axes": "xy"},
                  3.0)
        self._goal(term_id, tolerance)

    def _api_set_object_target(self, obj: str, x: float, y: float) -> None:
        self._drop("push_to", "flat_on_table")
        self._pushing(obj, [x, y, 0.0125], "to_point", 0.03)
        self.hold = 0.3

    def _api_set_push(self, obj: str, x: float, y: float) -> None:
        self._drop("to_point")
        self._pushing(obj, [x, y, 0.0125], "push_to", POSITION_TOLERANCE)
        self._set("flat_on_table", "object_height",
                  {"object": obj, "height": 0.0, "mode": "at_most"}, 1.0)
        self._goal("flat_on_table", POSITION_TOLERANCE, always=True)
        self.hold = 0.3

    def _api_set_push_by(self, obj: str, distance: float, direction: str) -> None:
        x, y = (float(v) for v in self._position(obj)[:2])
        radial = (x, y) if (x, y) != (0.0, 0.0) else (1.0, 0.0)
        norm = (radial[0] ** 2 + radial[1] ** 2) ** 0.5
        unit = {"away from the robot": (radial[0] / norm, radial[1] / norm),
                "toward the robot": (-radial[0] / norm, -radial[1] / norm),
                "to the left": (0.0, 1.0), "to the right": (0.0, -1.0)}[direction]
        self._api_set_push(obj, round(x + distance * unit[0], 4),
                           round(y + distance * unit[1], 4))

    def _api_set_place_on(self, obj: str, target: str) -> None:
        if self._object(target) == self._object(obj):
            raise InvalidIntentError(f"set_place_on: {obj!r} cannot be placed on itself")
        self._api_set_grasp(obj)
        offset = 0.02 if target.endswith("bowl") else 0.025
        self._set("place_on", "object_on", {"object": obj, "target": target, "offset": offset},
                  3.0)
        self._goal("place_on", 0.025)

    def _api_set_yaw(self, obj: str, degrees: float) -> None:
        self._api_set_grasp(obj)
        self._set("yaw", "object_yaw", {"object": obj, "yaw_deg": degrees}, 1.0)
        self._set("upright", "object_upright", {"object": obj}, 0.5)
        self._goal("yaw", ANGLE_TOLERANCE)
        self._goal("upright", UPRIGHT_TOLERANCE)

    def _api_set_turn(self, obj: str, degrees: float) -> None:
        heading = self.headings.get(self._object(obj))
        if heading is None:
            raise InvalidIntentError(f"the heading of the {obj} is not known here; give an "
                                     "absolute heading instead (set_yaw)")
        self._api_set_yaw(obj, round(_wrap_degrees(float(heading) + degrees), 2))

    def _api_set_upright(self, obj: str) -> None:
        self._api_set_reach(obj)
        self._set("upright", "object_upright", {"object": obj}, 1.0)
        self._goal("upright", UPRIGHT_TOLERANCE)

    def _api_set_hover(self, x: float, y: float, height: float) -> None:
        self._set("hover", "tool_above", {"point": [x, y, 0.0], "height": height}, 1.0)
        self._goal("hover", 0.015)
        self.hold = 1.0

    def _api_set_tool_target(self, x: float, y: float, z: float) -> None:
        self._set("tool_to", "tool_to_point", {"point": [x, y, z]}, 2.0)
        self._goal("tool_to", 0.015)
        self.hold = 0.3

    def _api_set_speed_limit(self, m_per_s: float) -> None:
        self._set("speed", "tool_speed", {"speed": m_per_s, "mode": "at_most"}, 10.0)

    def _api_set_min_speed(self, m_per_s: float) -> None:
        self._set("speed", "tool_speed", {"speed": m_per_s, "mode": "at_least"}, 2.0)

    def _api_avoid_region(self, center: list[float], half_size: float) -> None:
        params = {"point": list(center), "half_size": [half_size] * 3, "margin": 0.01,
                  "subject": "tool"}
        same = [i for i, t in self.terms.items()
                if t["term"] == "keep_out" and t["params"].get("point") == params["point"]]
        term_id = same[0] if same else _free_id(self.terms, "keep_out")
        self._set(term_id, "keep_out", params, 50.0)
        self._goal(term_id, REGION_TOLERANCE, always=True)

    def _api_set_gripper(self, opening: float) -> None:
        self._set("gripper", "gripper", {"opening": opening}, 0.2)

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

    def execute(
        self, skill: str, bound: dict, time_limit: float | None = None, workspace: Any = None
    ) -> object:
        self.builder.call(skill, bound)
        return None

    def hold(self) -> None:
        return None

    def clock(self) -> float:
        return 0.0

    def said(self) -> list[str]:
        return []
