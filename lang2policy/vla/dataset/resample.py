"""A recording's irregular messages resampled to frames every ``1 / fps`` s of robot time.

Robot time is the simulation's (or robot driver's) clock, the joint states' and images' header
stamps. Commands' log times are put on the robot clock through the joint states, which have
both (``RobotClock``); a trajectory the safety node stamped starts at its stamp, as the robot
started it, an unstamped one when it arrives.

At frame time ``t``:

- state: the last joint state at or before ``t`` (the arm joints and the gripper);
- image: each camera's last image at or before ``t``, resized to the dataset's size with
  ``cv2.INTER_AREA`` (the box filter that does not alias when shrinking);
- action: where the arm was sent to be at the next frame, ``t + 1 / fps``. The command topic is
  replayed through ``TrajectoryFollower``, the follower the simulated arm itself runs
  (interpolation from the current target, joints not named keep theirs; a stamped trajectory
  from its stamp, a stream of unstamped short commands queued as ``STREAM_QUEUE``, as robots
  did before the safety node stamped them); an empty trajectory (a stop) holds the measured
  position (the robot brakes to it). That is the ``action`` of ``schema``: the target in force
  over the next period, absolute joint positions like a leader arm's.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from lang2policy.control.trajectory_follower import STREAM_QUEUE, TrajectoryFollower
from lang2policy.errors import InvalidCommandError, Lang2PolicyError
from lang2policy.vla.dataset.cdr import ImageMsg, JointStateMsg, TrajectoryMsg

_CHANNELS = {"rgb8": 3, "bgr8": 3, "rgba8": 4, "bgra8": 4, "mono8": 1}
_TO_RGB = {
    "bgr8": cv2.COLOR_BGR2RGB,
    "rgba8": cv2.COLOR_RGBA2RGB,
    "bgra8": cv2.COLOR_BGRA2RGB,
    "mono8": cv2.COLOR_GRAY2RGB,
}


class RobotClock:
    """Log time (s) -> robot time (s), from the joint states' (log time, stamp) pairs; the
    identity when the joint states are not stamped."""

    def __init__(self, log_times: np.ndarray, stamps: np.ndarray) -> None:
        stamped = np.asarray(stamps) > 0  # an unstamped message has a zero stamp
        self.stamped = bool(stamped.any())
        self._log, self._robot = np.asarray(log_times)[stamped], np.asarray(stamps)[stamped]

    def __call__(self, log_time: float | np.ndarray) -> float | np.ndarray:
        if not self.stamped:
            return log_time
        return np.interp(log_time, self._log, self._robot)

    def stamp_or_mapped(self, stamp: float, log_time: float) -> float:
        """A message's robot time: its stamp when it has one, else its mapped log time."""
        return stamp if self.stamped and stamp > 0 else float(self(log_time))


def frame_times(start: float, end: float, fps: int) -> np.ndarray:
    """Frame times from ``start`` every ``1 / fps`` s up to ``end`` (at least one frame)."""
    count = max(1, int(np.floor((end - start) * fps + 1e-6)) + 1)
    return start + np.arange(count) / fps


def last_at(times: np.ndarray, queries: np.ndarray, what: str) -> np.ndarray:
    """Index of the last of sorted ``times`` at or before each query."""
    index = np.searchsorted(times, queries + 1e-9, side="right") - 1
    if (index < 0).any():
        raise Lang2PolicyError(f"no {what} at or before {float(queries[index < 0][0]):.3f} s")
    return index


def joint_matrix(messages: Sequence[JointStateMsg], names: Sequence[str], where: str) -> np.ndarray:
    """The positions of ``names`` in each joint state, ``(len(messages), len(names))``."""
    rows = []
    for message in messages:
        lookup = dict(zip(message.names, message.positions, strict=False))
        missing = [name for name in names if name not in lookup]
        if missing:
            raise Lang2PolicyError(
                f"{where}: /joint_states lacks the joints {missing}; it names "
                f"{message.names}, the dataset needs {list(names)}"
            )
        rows.append([lookup[name] for name in names])
    return np.asarray(rows, dtype=np.float64)


def rgb_image(message: ImageMsg, size: int, where: str) -> np.ndarray:
    """An image message as uint8 RGB, resized to ``size`` x ``size`` (INTER_AREA)."""
    channels = _CHANNELS.get(message.encoding)
    if channels is None:
        raise Lang2PolicyError(
            f"{where}: image encoding {message.encoding!r} is not supported; use one of "
            f"{sorted(_CHANNELS)}"
        )
    row = message.width * channels
    if message.step < row or len(message.data) < message.step * message.height:
        raise Lang2PolicyError(
            f"{where}: a {message.width}x{message.height} {message.encoding} image needs "
            f"{message.step * message.height} bytes (step {message.step}), got {len(message.data)}"
        )
    pixels = np.frombuffer(message.data, np.uint8, message.step * message.height)
    image = pixels.reshape(message.height, message.step)[:, :row]
    image = image.reshape(message.height, message.width, channels)
    if message.encoding in _TO_RGB:
        image = cv2.cvtColor(image, _TO_RGB[message.encoding])
    if image.shape[:2] != (size, size):
        image = cv2.resize(image, (size, size), interpolation=cv2.INTER_AREA)
    return np.ascontiguousarray(image, dtype=np.uint8)


def commanded_actions(
    commands: Sequence[tuple[float, TrajectoryMsg]],
    states: tuple[np.ndarray, np.ndarray],
    times: np.ndarray,
    fps: int,
    names: Sequence[str],
) -> np.ndarray:
    """The follower's target at ``t + 1 / fps`` for each frame time ``t`` (see the module
    docstring). ``commands``: (robot time of arrival, trajectory), sorted; ``states``: the
    joint states' robot times and positions (``names`` order), for the start and for stops."""
    state_times, positions = states
    follower = TrajectoryFollower(names, positions[0], queue=STREAM_QUEUE)
    actions = np.empty((len(times), len(names)))
    pending = 0
    for k, t in enumerate(times + 1.0 / fps):
        while pending < len(commands) and commands[pending][0] <= t:
            arrival, message = commands[pending]
            _apply(follower, arrival, message, state_times, positions)
            pending += 1
        actions[k] = follower.target(t)
    return actions


def _apply(
    follower: TrajectoryFollower,
    arrival: float,
    message: TrajectoryMsg,
    state_times: np.ndarray,
    positions: np.ndarray,
) -> None:
    measured = positions[max(0, int(np.searchsorted(state_times, arrival, side="right")) - 1)]
    if not message.points:
        follower.hold(measured)
        return
    try:
        points = [(t, dict(zip(message.names, row, strict=True))) for t, row in message.points]
        # A stamped trajectory (the safety node stamps what it forwards) starts at its stamp,
        # as the robot nodes start it; an unstamped one on arrival, queued as robots did.
        start = min(message.stamp, arrival) if message.stamp > 0 else None
        follower.start(arrival, points, measured, start)
    except (InvalidCommandError, ValueError) as exc:
        raise Lang2PolicyError(
            f"a command at {arrival:.3f} s cannot be replayed: {exc}; the dataset's joints are "
            f"{list(follower.names)}"
        ) from exc
