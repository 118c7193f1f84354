"""The messages of ``/lang2policy/skill`` (issue 18): plain text, "" or a JSON object, checked.

The topic carries one of

* plain text: a skill to start with the node's default limits; "" (or only white space):
  cancel the running skill;
* a JSON object (text whose first non-blank character is ``{``), either
  - a start: ``{"skill": TEXT, "plan_id": ID, "limits": {"time_budget_s": S,
    "max_joint_speed": RAD_PER_S, "workspace": {"min": [x, y, z], "max": [x, y, z]}},
    "motions": [CORRECTION, ...]}``; only ``skill`` is required, and every key of
    ``limits`` is optional (a missing one is the node's default);
  - a language motion: ``{"motion": CORRECTION, "plan_id": ID}`` (``plan_id`` optional).

``parse_skill_message`` turns the text into ``Cancel``, ``StartSkill`` or ``MotionMessage``
and refuses anything else with ``SkillMessageError``: unknown keys, wrong types, non-finite or
non-positive limits, a workspace whose ``min`` is not below its ``max``. The error says what
was wrong and what is allowed, and carries the message's ``plan_id`` when one could be read,
so that the refusal can be matched to the plan that sent it. Whether the skill text is a skill
the VLA knows (``parse``) and whether a correction is a language motion
(``language_motion``) are decided later, by their own modules.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from lang2policy.errors import Lang2PolicyError
from lang2policy.instruction_text import text_problem
from lang2policy.sandbox.policy_zones import overlap
from lang2policy.wire_json import MessageError, decode_json_object

MAX_MESSAGE_BYTES = 16_384  # a start with a long motions list is well under 2 KB
MAX_PLAN_ID = 128  # characters
MAX_MOTIONS = 16  # remembered corrections in one start
MAX_TEXT = 300  # characters of a skill or correction text
START_KEYS = ("skill", "plan_id", "limits", "motions")
MOTION_KEYS = ("motion", "plan_id")
LIMIT_KEYS = ("time_budget_s", "max_joint_speed", "workspace")
AXES = ("x", "y", "z")


class SkillMessageError(Lang2PolicyError):
    """A skill-topic message that cannot be used; ``plan_id`` is the message's, or ""."""

    def __init__(self, message: str, plan_id: str = "") -> None:
        super().__init__(message)
        self.plan_id = plan_id


@dataclass(frozen=True)
class Box:
    """An axis-aligned box of the world frame (metres), ``min`` below ``max`` on every axis."""

    min: tuple[float, float, float]
    max: tuple[float, float, float]

    def outside(self, point) -> float:
        """How far (m) ``point`` lies outside the box: 0 inside or on its faces."""
        corners = zip(self.min, point, self.max, strict=True)
        gaps = [max(lo - v, 0.0, v - hi) for lo, v, hi in corners]
        return math.sqrt(sum(g * g for g in gaps))

    def intersection(self, other: Box) -> Box | None:
        """The box inside both, or None when they do not overlap."""
        corners = overlap((self, other))
        return None if corners is None else Box(*corners)

    def to_dict(self) -> dict[str, list[float]]:
        return {"min": [round(v, 4) for v in self.min], "max": [round(v, 4) for v in self.max]}


@dataclass(frozen=True)
class LimitsRequest:
    """The limits a start asks for; None: the node's default."""

    time_budget_s: float | None = None
    max_joint_speed: float | None = None  # rad/s, every arm joint
    workspace: Box | None = None  # where the tool centre point may go


@dataclass(frozen=True)
class StartSkill:
    """Start ``skill`` under ``limits``, with ``motions`` applied from the first cycle."""

    skill: str
    plan_id: str = ""
    limits: LimitsRequest = LimitsRequest()
    motions: tuple[str, ...] = ()


@dataclass(frozen=True)
class MotionMessage:
    """A language motion (a correction text) for the running skill."""

    text: str
    plan_id: str = ""


@dataclass(frozen=True)
class Cancel:
    """Cancel the running skill (an empty message)."""


SkillMessage = StartSkill | MotionMessage | Cancel


def parse_skill_message(text: str) -> SkillMessage:
    """What ``text`` asks for (see the module docstring); ``SkillMessageError`` otherwise."""
    if not text.strip():
        return Cancel()
    if not text.lstrip().startswith("{"):
        return StartSkill(text)
    try:
        data = decode_json_object(text, what="the skill message", max_bytes=MAX_MESSAGE_BYTES)
    except MessageError as exc:
        raise SkillMessageError(str(exc)) from exc
    plan_id = data.get("plan_id")
    plan_id = plan_id if isinstance(plan_id, str) else ""
    try:
        return _message(data)
    except SkillMessageError as exc:
        raise SkillMessageError(str(exc), plan_id[:MAX_PLAN_ID]) from None


def _message(data: dict) -> SkillMessage:
    if "skill" in data and "motion" in data:
        raise SkillMessageError("a skill message has 'skill' (a start) or 'motion', not both")
    if "motion" in data:
        _only(data, MOTION_KEYS, "a motion message")
        return MotionMessage(_text(data["motion"], "motion"), _plan_id(data))
    if "skill" not in data:
        raise SkillMessageError(
            f"a JSON skill message needs 'skill' (start a skill: keys {list(START_KEYS)}) or "
            f"'motion' (a language motion: keys {list(MOTION_KEYS)}); got keys {sorted(data)}"
        )
    _only(data, START_KEYS, "a skill start")
    motions = data.get("motions", [])
    if not isinstance(motions, list) or len(motions) > MAX_MOTIONS:
        raise SkillMessageError(
            f"'motions' must be a list of at most {MAX_MOTIONS} correction texts, "
            f"got {_kind(motions)}"
        )
    return StartSkill(
        _text(data["skill"], "skill"),
        _plan_id(data),
        _limits(data.get("limits", {})),
        tuple(_text(m, f"motions[{i}]") for i, m in enumerate(motions)),
    )


def _limits(data: object) -> LimitsRequest:
    if not isinstance(data, dict):
        raise SkillMessageError(f"'limits' must be an object with keys {list(LIMIT_KEYS)}")
    _only(data, LIMIT_KEYS, "'limits'")
    budget, speed = (data.get(key) for key in LIMIT_KEYS[:2])
    return LimitsRequest(
        None if budget is None else _positive(budget, "limits.time_budget_s", "s"),
        None if speed is None else _positive(speed, "limits.max_joint_speed", "rad/s"),
        None if data.get("workspace") is None else _box(data["workspace"]),
    )


def _box(data: object) -> Box:
    what = "limits.workspace"
    if not isinstance(data, dict) or sorted(data) != ["max", "min"]:
        raise SkillMessageError(
            f'{what} must be {{"min": [x, y, z], "max": [x, y, z]}} (metres, world frame), '
            f"got {_kind(data)}"
        )
    corners = []
    for key in ("min", "max"):
        value = data[key]
        if not isinstance(value, list) or len(value) != 3:
            raise SkillMessageError(f"{what}.{key} must be [x, y, z] in metres, got {value!r:.80}")
        corners.append(tuple(_number(v, f"{what}.{key}[{i}]") for i, v in enumerate(value)))
    low, high = corners
    flat = [AXES[i] for i in range(3) if not low[i] < high[i]]
    if flat:
        raise SkillMessageError(f"{what}: min must be below max on every axis; not on {flat}")
    return Box(low, high)  # type: ignore[arg-type]


def _only(data: dict, allowed: tuple[str, ...], what: str) -> None:
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise SkillMessageError(f"{what}: unknown keys {unknown}; allowed: {list(allowed)}")


def _text(value: object, what: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_TEXT:
        raise SkillMessageError(
            f"'{what}' must be non-empty text of at most {MAX_TEXT} characters, "
            f"got {_kind(value)}"
        )
    problem = text_problem(value, what)
    if problem is not None:
        raise SkillMessageError(problem)
    return value


def _plan_id(data: dict) -> str:
    value = data.get("plan_id", "")
    if not isinstance(value, str) or len(value) > MAX_PLAN_ID or text_problem(value) is not None:
        raise SkillMessageError(
            f"'plan_id' must be one line of text of at most {MAX_PLAN_ID} characters, "
            f"got {_kind(value)}"
        )
    return value


def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SkillMessageError(f"{what} must be a finite number, got {_kind(value)}")
    return float(value)


def _positive(value: object, what: str, unit: str) -> float:
    number = _number(value, what)
    if number <= 0:
        raise SkillMessageError(f"{what} must be a number > 0 ({unit}), got {number:g}")
    return number


def _kind(value: object) -> str:
    return f"{type(value).__name__} {value!r:.60}"
