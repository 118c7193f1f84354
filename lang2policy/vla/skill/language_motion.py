"""Language motions (RT-H, issue 18): a correction said during a skill becomes a bounded
change of what the VLA node sends, from the next control cycle to the end of the skill.

RT-H puts short phrases ("move arm left", "close gripper") between the task and the motor
policy, and lets a person override them. The shipped VLA was not trained on such phrases, so
here a language motion acts as a *residual on the policy's actions* (the other way the issue
allows). ``parse_motion`` reads the correction with the project's correction rules
(``corrections.classify``: the same words and sizes as every other correction), plus the
gripper phrases those rules leave to the planner:

=======  ======================================  ============================================
kind     examples                                effect
=======  ======================================  ============================================
offset   "a bit to the left", "lower", "3 cm     the tool centre point moves by (dx, dy, dz):
         higher", "a lot further forward"        left +y, forward +x, up +z; "slightly" 1 cm,
                                                 "a little" 1.5 cm, "a bit" or plain 2 cm,
                                                 "a lot" / "much" 5 cm
speed    "slower", "much slower", "faster"       the joint speed cap times the correction's
                                                 factor (0.5, 0.3, 1.5, ...)
gripper  "open the gripper", "close the hand"    the gripper target held open (1) or closed (0)
=======  ======================================  ============================================

``MotionState`` keeps what the motions so far add up to, for the rest of the run: offsets add
("a bit to the left" twice is 4 cm left), each axis bounded by ``MAX_OFFSET`` (5 cm: a nudge,
not a new goal); the speed scale is bounded to ``SPEED_SCALE`` (0.3 .. 1.0 of the plan's cap:
a correction never lets the arm go faster than the plan allows); the last gripper phrase wins.
A motion that would change nothing because its bound is reached is refused, and one that
reaches the bound part-way is applied up to it (the outcome says so).

``offset_residual`` turns the accumulated Cartesian offset into joint offsets at a posture:
a few damped-least-squares (Gauss-Newton) steps on the tool point's Jacobian, so that the
tool point of ``posture + residual`` is ``offset`` away from that of ``posture``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from lang2policy.corrections.classify import classify
from lang2policy.corrections.vocabulary import FILLERS, vocab, words_of
from lang2policy.errors import Lang2PolicyError, UnknownObjectError
from lang2policy.vla.skill.limits import ToolKinematics

MAX_OFFSET = 0.05  # m per axis of the accumulated tool offset
SPEED_SCALE = (0.3, 1.0)  # bounds of the speed cap's scale
MAX_RESIDUAL = 0.6  # rad per joint: a residual beyond this is a new posture, not a nudge
DAMPING = 1e-4  # m^2, damped least squares
ITERATIONS = 3
OPEN, CLOSED = 1.0, 0.0
_GRIPPER = re.compile(
    r"\b(?P<verb>open|close|release|let go|shut|grip|grasp)\b.*\b(gripper|hand|jaws|claw|fingers)\b"
)
_GRIPPER_WORDS = FILLERS | vocab(
    "open close release let go of shut grip grasp the gripper hand jaws claw fingers up"
)


class NotAMotionError(Lang2PolicyError):
    """The text is no language motion; the message says what is."""


@dataclass(frozen=True)
class LanguageMotion:
    """One parsed motion: ``offset`` (m), a speed ``factor`` or a ``gripper`` target."""

    text: str
    kind: str  # "offset" | "speed" | "gripper"
    offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    factor: float = 1.0
    gripper: float | None = None


def motion_help() -> str:
    return (
        "language motions are offsets of the tool ('a bit to the left', 'lower', '3 cm "
        "forward'), speed changes ('slower', 'faster') and the gripper ('open the gripper', "
        "'close the gripper')"
    )


def parse_motion(text: str) -> LanguageMotion:
    """The language motion ``text`` says; ``NotAMotionError`` saying why it is none."""
    gripper = _gripper(text)
    if gripper is not None:
        return LanguageMotion(text, "gripper", gripper=gripper)
    try:
        correction = classify(text, [])
    except UnknownObjectError:
        raise NotAMotionError(
            f"{text!r} names an object: a change of target is the planner's, not a motion; "
            f"{motion_help()}"
        ) from None
    except Lang2PolicyError as exc:  # CorrectionError: bad text, an offset beyond 15 cm
        raise NotAMotionError(f"{exc}; {motion_help()}") from None
    if correction.kind == "offset" and correction.offset is not None:
        return LanguageMotion(text, "offset", offset=correction.offset)
    if correction.kind == "speed" and correction.factor is not None:
        return LanguageMotion(text, "speed", factor=correction.factor)
    if correction.kind == "speed":
        raise NotAMotionError(
            f"{text!r} asks for a speed in m/s; the VLA's cap is a joint speed: say 'slower' or "
            "'faster'"
        )
    if correction.kind == "stop":
        raise NotAMotionError(f"{text!r} is a stop: the safety node's stop halts the arm")
    raise NotAMotionError(
        f"{text!r} is a {correction.kind} correction, not a motion; {motion_help()}"
    )


def _gripper(text: str) -> float | None:
    lowered = " ".join(text.lower().split())
    match = _GRIPPER.search(lowered)
    if match is None or any(w not in _GRIPPER_WORDS for w in words_of(lowered)):
        return None
    return OPEN if match.group("verb") in ("open", "release", "let go") else CLOSED


@dataclass(frozen=True)
class MotionOutcome:
    """What a motion did: ``applied`` or not (``reason``), and the state after it."""

    text: str
    applied: bool
    reason: str
    offset: tuple[float, float, float]
    speed_scale: float
    gripper: float | None

    def detail(self) -> dict:
        """The status line's detail (state ``motion``)."""
        data = {
            "text": self.text,
            "action": "applied" if self.applied else "refused",
            "offset": list(self.offset),
            "speed_scale": self.speed_scale,
            "gripper": self.gripper,
        }
        if self.reason:
            data["reason"] = self.reason
        return data


class MotionState:
    """The motions of one skill run added up, within their bounds (see the module docstring)."""

    def __init__(self) -> None:
        self.offset = np.zeros(3)
        self.speed_scale = SPEED_SCALE[1]
        self.gripper: float | None = None

    def apply(self, motion: LanguageMotion) -> MotionOutcome:
        """Add ``motion``; refused (nothing changes) when its bound is already reached."""
        reason = ""
        if motion.kind == "offset":
            wanted = self.offset + np.asarray(motion.offset)
            bounded = np.clip(wanted, -MAX_OFFSET, MAX_OFFSET)
            changed = not np.allclose(bounded, self.offset)
            if not np.allclose(bounded, wanted):
                reason = f"each axis of the offset is bounded to {MAX_OFFSET * 100:g} cm"
            self.offset = bounded
        elif motion.kind == "speed":
            scale = float(np.clip(self.speed_scale * motion.factor, *SPEED_SCALE))
            changed = not np.isclose(scale, self.speed_scale)
            if not np.isclose(scale, self.speed_scale * motion.factor):
                low, high = SPEED_SCALE
                reason = f"the speed scale is bounded to {low:g} .. {high:g} of the plan's cap"
            self.speed_scale = scale
        else:
            changed, self.gripper = True, motion.gripper
        if not changed:
            reason = f"at its bound: {reason}"
        return self.outcome(motion.text, changed, reason)

    def outcome(self, text: str, applied: bool, reason: str) -> MotionOutcome:
        offset = tuple(round(float(v), 4) for v in self.offset)
        return MotionOutcome(
            text, applied, reason, offset, round(self.speed_scale, 4), self.gripper  # type: ignore[arg-type]
        )


def offset_residual(
    tool: ToolKinematics, posture: np.ndarray, offset: np.ndarray, start: np.ndarray | None = None
) -> np.ndarray:
    """Joint offsets ``r`` (rad) with tool point of ``posture + r`` about ``offset`` (m) from
    that of ``posture``: damped least squares from ``start`` (the last residual, for
    continuity), each joint within ``MAX_RESIDUAL`` and ``posture + r`` within the joint range."""
    posture = np.asarray(posture, float)
    residual = np.zeros(tool.dof) if start is None else np.asarray(start, float).copy()
    if not np.any(offset):
        return np.zeros(tool.dof)
    goal = tool.point(posture) + np.asarray(offset, float)
    for _ in range(ITERATIONS):
        point, jac = tool.jacobian(posture + residual)
        error = goal - point
        if np.linalg.norm(error) < 1e-4:
            break
        step = jac.T @ np.linalg.solve(jac @ jac.T + DAMPING * np.eye(3), error)
        residual = np.clip(residual + step, -MAX_RESIDUAL, MAX_RESIDUAL)
        residual = np.clip(posture + residual, tool.lower, tool.upper) - posture
    return residual
