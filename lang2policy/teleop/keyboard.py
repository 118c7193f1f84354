"""Keyboard teleoperation in simulation: keys -> follower joint targets and episode marks.

Pure: ``KeyDecoder`` turns the bytes a raw terminal sends into key names (arrow keys arrive as
``ESC [ A``..``D``); ``KeyboardTeleop.press(key)`` applies one key to the target (arm joints in
rad, gripper opening 0..1, the follower's action order) and says what happened. The target
starts at the measured joint state (``start``), so the arm never jumps when teleop begins.

Keys (``HELP``): in tool mode w/s, a/d, r/f (or the arrow keys for x and y) move the tool in
``step_m`` Cartesian steps through the IK (``IkToolStepper``); ``tab`` switches to joint mode,
where 1-5 pick a joint and w/s (up/down) turn it by ``step_rad``. o/c open and close the
gripper; [ and ] halve and double the step; space starts an episode with the task text and
stops it (kept); x stops it discarded; h shows the help; q, Esc or Ctrl-C quit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from lang2policy.teleop.tool_steps import ToolStep

TOOL, JOINT = "tool", "joint"
MIN_STEP_M, MAX_STEP_M = 0.0025, 0.05
MIN_STEP_RAD, MAX_STEP_RAD = 0.0125, 0.4
HELP = (
    "tool mode: w/s x+/-, a/d y+/-, r/f z up/down (arrows: x, y) | tab: joint mode, 1-5 pick "
    "a joint, w/s turn it | o/c open/close gripper | [ ] step size | space start/stop episode "
    "| x stop episode, discard | h help | q quit"
)
TOOL_KEYS = {
    "w": (0.0, 1.0), "up": (0.0, 1.0), "s": (0.0, -1.0), "down": (0.0, -1.0),
    "a": (1.0, 1.0), "left": (1.0, 1.0), "d": (1.0, -1.0), "right": (1.0, -1.0),
    "r": (2.0, 1.0), "f": (2.0, -1.0),
}  # fmt: skip  # key -> (axis, direction)
ARROWS = {b"A": "up", b"B": "down", b"C": "right", b"D": "left"}
NAMED = {b"\t": "tab", b" ": "space", b"\x03": "ctrl-c", b"\x04": "ctrl-d", b"\x1b": "esc"}


class Stepper(Protocol):
    """What keyboard teleop needs of the kinematics (``IkToolStepper``)."""

    joint_names: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray

    def step(self, q: np.ndarray, delta: np.ndarray) -> ToolStep: ...


class KeyDecoder:
    """Bytes from a raw terminal -> key names (``feed``); an escape sequence split over two
    reads is kept until its end arrives."""

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, data: bytes) -> list[str]:
        buf, keys = self._pending + data, []
        self._pending = b""
        i = 0
        while i < len(buf):
            byte = buf[i : i + 1]
            if byte == b"\x1b":
                if i + 1 == len(buf) or (buf[i + 1 : i + 2] == b"[" and i + 2 == len(buf)):
                    self._pending = buf[i:]  # maybe the start of an arrow key
                    break
                if buf[i + 1 : i + 2] == b"[":
                    keys.append(ARROWS.get(buf[i + 2 : i + 3], "unknown"))
                    i += 3
                    continue
            if byte in NAMED:
                keys.append(NAMED[byte])
            elif byte not in (b"\r", b"\n"):
                keys.append(byte.decode("latin-1").lower() if byte.isascii() else "unknown")
            i += 1
        return keys

    def flush(self) -> list[str]:
        """A lone Esc left pending (nothing followed it): the Esc key."""
        pending, self._pending = self._pending, b""
        return ["esc"] if pending.startswith(b"\x1b") else []


@dataclass(frozen=True)
class KeyResult:
    """What one key did: ``moved`` the target, an ``episode`` mark (start | keep | discard),
    ``quit``, and a ``message`` for the status line."""

    moved: bool = False
    episode: str = ""
    quit: bool = False
    message: str = ""


def episode_key(key: str) -> KeyResult | None:
    """The keys every source has (quit, episode marks, help); None for the others. With a
    leader arm these are the only keys."""
    if key in ("q", "esc", "ctrl-c", "ctrl-d"):
        return KeyResult(quit=True, message="quit")
    if key in ("space", "x"):
        return KeyResult(episode="discard" if key == "x" else "toggle")
    if key == "h":
        return KeyResult(message=HELP)
    return None


class KeyboardTeleop:
    """The keyboard's target and modes (see the module docstring)."""

    def __init__(self, stepper: Stepper, step_m: float = 0.01, step_rad: float = 0.05) -> None:
        if not MIN_STEP_M <= step_m <= MAX_STEP_M or not MIN_STEP_RAD <= step_rad <= MAX_STEP_RAD:
            raise ValueError(
                f"steps must be {MIN_STEP_M}..{MAX_STEP_M} m and {MIN_STEP_RAD}..{MAX_STEP_RAD} "
                f"rad, got {step_m}, {step_rad}"
            )
        self.stepper = stepper
        self.step_m, self.step_rad = step_m, step_rad
        self.mode, self.joint = TOOL, 0
        self.target: np.ndarray | None = None  # arm rad + gripper opening; None: not started

    @property
    def names(self) -> tuple[str, ...]:
        return (*self.stepper.joint_names, "gripper")

    def start(self, measured: np.ndarray) -> None:
        """Begin at the measured joint state (arm joints and gripper, action order)."""
        values = np.asarray(measured, float)
        if values.shape != (len(self.names),) or not np.all(np.isfinite(values)):
            raise ValueError(f"a start state needs {len(self.names)} finite values: {self.names}")
        arm = np.clip(values[:-1], self.stepper.lower, self.stepper.upper)
        self.target = np.append(arm, np.clip(values[-1], 0.0, 1.0))

    def press(self, key: str) -> KeyResult:
        """Apply one key (names from ``KeyDecoder``)."""
        common = episode_key(key)
        if common is not None:
            return common
        if key in ("[", "]"):
            return self._scale(0.5 if key == "[" else 2.0)
        if key == "tab":
            self.mode = JOINT if self.mode == TOOL else TOOL
            return KeyResult(message=f"{self.mode} mode")
        if self.target is None:
            return KeyResult(message="no joint state yet: the arm's target is not set")
        if key in ("o", "c"):
            return self._set_gripper(1.0 if key == "o" else 0.0)
        if self.mode == JOINT and len(key) == 1 and key in "12345":
            self.joint = int(key) - 1
            return KeyResult(message=f"joint {self.stepper.joint_names[self.joint]}")
        if key in TOOL_KEYS:
            return self._move(*TOOL_KEYS[key])
        return KeyResult(message=f"key {key!r} does nothing; h for help")

    def _move(self, axis: float, direction: float) -> KeyResult:
        assert self.target is not None
        arm = self.target[:-1]
        if self.mode == JOINT:
            if axis != 0.0:
                return KeyResult(message="joint mode: w/s (up/down) turn the joint; tab: tool")
            moved = arm.copy()
            moved[self.joint] += direction * self.step_rad
            moved = np.clip(moved, self.stepper.lower, self.stepper.upper)
            if np.allclose(moved, arm):
                return KeyResult(message=f"{self.stepper.joint_names[self.joint]} at its limit")
            self.target[:-1] = moved
            return KeyResult(moved=True)
        delta = np.zeros(3)
        delta[int(axis)] = direction * self.step_m
        step = self.stepper.step(arm, delta)
        if step.q is None:
            return KeyResult(message=step.reason)
        self.target[:-1] = np.clip(step.q, self.stepper.lower, self.stepper.upper)
        return KeyResult(moved=True)

    def _set_gripper(self, opening: float) -> KeyResult:
        assert self.target is not None
        self.target[-1] = opening
        return KeyResult(moved=True, message="gripper " + ("open" if opening else "closed"))

    def _scale(self, factor: float) -> KeyResult:
        self.step_m = float(np.clip(self.step_m * factor, MIN_STEP_M, MAX_STEP_M))
        self.step_rad = float(np.clip(self.step_rad * factor, MIN_STEP_RAD, MAX_STEP_RAD))
        return KeyResult(message=f"step {self.step_m * 1000:.1f} mm, {self.step_rad:.3f} rad")

    def status_line(self) -> str:
        """One line: mode, step, selected joint (joint mode), gripper."""
        joint = f" {self.stepper.joint_names[self.joint]}" if self.mode == JOINT else ""
        gripper = "-" if self.target is None else f"{self.target[-1]:.1f}"
        return (
            f"{self.mode} mode{joint} | step {self.step_m * 1000:.1f} mm / {self.step_rad:.3f} "
            f"rad | gripper {gripper}"
        )
