"""The graph's episode recordings (MCAP, one per instruction) as dataset episodes.

``episode_from_mcap`` turns one file into an ``EpisodeRecord``: frames every ``1 / fps`` s of
robot time from the first command sent after the planner's ``received`` (the planning before
it, with the arm at rest, is no demonstration) to the last moment every stream has data (the
recorder's linger keeps the arm settling after the end), resampled as ``resample`` describes.
The task is the instruction; ``success`` comes from the final status. ``convert_recordings``
writes a whole set of files as one dataset, whose episodes also name their ``source`` file.

Success: the planner's last final line of the episode (``done`` is success: the plan's goal
was checked and reached; ``failed``, ``stopped``, ``rejected`` are not); for a reward plan,
which the MPC controller carries out after the planner's ``done``, the controller's last final
state (``success`` or not). None when the recording holds no final line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lang2policy.errors import Lang2PolicyError
from lang2policy.graph.topics import CONTROLLER_NODE, PLANNER_NODE, status_node
from lang2policy.vla.dataset import resample
from lang2policy.vla.dataset.mcap_episode import Recording, read_recording
from lang2policy.vla.dataset.record import EpisodeRecord
from lang2policy.vla.dataset.writer import DatasetWriter
from lang2policy.vla.spec.schema import CAMERAS, FPS, IMAGE_SIZE, ROBOT_TYPE, STATE_NAMES

EXTRA_COLUMNS = ("success", "source")  # the episode columns of a converted dataset
PLANNER_FINAL = ("done", "failed", "stopped", "rejected")
CONTROLLER_FINAL = ("success", "failed", "timeout", "cancelled", "rejected")


def episode_from_mcap(
    path: Path,
    cameras: Sequence[str] = CAMERAS,
    image_size: int = IMAGE_SIZE,
    fps: int = FPS,
    names: Sequence[str] = STATE_NAMES,
) -> EpisodeRecord:
    """One recording as an episode (see the module docstring)."""
    recording = read_recording(Path(path), tuple(cameras))
    where = recording.path.name
    clock, js_times, positions = _joint_series(recording, names)
    images = {camera: _image_series(recording, camera, clock) for camera in cameras}
    received, success = episode_outcome(recording.statuses)
    commands = sorted(((float(clock(t)), m) for t, m in recording.commands), key=lambda c: c[0])
    streams = [js_times, *(series[0] for series in images.values())]
    after = None if received is None else float(clock(received))
    start, end = _window(streams, after, [t for t, _ in commands], where)
    times = resample.frame_times(start, end, fps)
    state = positions[resample.last_at(js_times, times, f"{where}: joint state")]
    frames = {
        camera: _frames_at(series, times, image_size, f"{where}: camera {camera}")
        for camera, series in images.items()
    }
    action = resample.commanded_actions(commands, (js_times, positions), times, fps, names)
    return EpisodeRecord(
        task=instruction(recording),
        images=frames,
        state=state.astype(np.float32),
        action=action.astype(np.float32),
        extra={"success": success, "source": where},
    )


def _window(
    streams: list[np.ndarray], received: float | None, commands: list[float], where: str
) -> tuple[float, float]:
    """The robot times of the first and last frame: while every stream has data, from the
    first command at or after the instruction was received (the planning before it, the arm at
    rest, demonstrates nothing)."""
    start = max(float(times[0]) for times in streams)
    end = min(float(times[-1]) for times in streams)
    if received is not None:
        start = max(start, received)
    first = next((t for t in commands if t >= start), None)
    if first is not None and first <= end:
        start = first
    if end < start:
        raise Lang2PolicyError(
            f"{where}: the joint states and the camera images never all have data at once "
            f"after the instruction (from {start:.3f} s to {end:.3f} s of robot time)"
        )
    return start, end


def _joint_series(
    recording: Recording, names: Sequence[str]
) -> tuple[resample.RobotClock, np.ndarray, np.ndarray]:
    """The robot clock, and the joint states' robot times (sorted) and positions."""
    if not recording.joint_states:
        raise Lang2PolicyError(f"{recording.path.name}: /joint_states has no messages")
    log_times = np.array([t for t, _ in recording.joint_states])
    stamps = np.array([m.stamp for _, m in recording.joint_states])
    clock = resample.RobotClock(log_times, stamps)
    times = np.array([clock.stamp_or_mapped(m.stamp, t) for t, m in recording.joint_states])
    order = np.argsort(times, kind="stable")
    messages = [recording.joint_states[i][1] for i in order]
    return clock, times[order], resample.joint_matrix(messages, names, recording.path.name)


def _image_series(
    recording: Recording, camera: str, clock: resample.RobotClock
) -> tuple[np.ndarray, list]:
    """A camera's image robot times (sorted) and messages."""
    series = recording.images.get(camera, [])
    if not series:
        raise Lang2PolicyError(f"{recording.path.name}: /camera/{camera}/image_raw has no messages")
    times = np.array([clock.stamp_or_mapped(m.stamp, t) for t, m in series])
    order = np.argsort(times, kind="stable")
    return times[order], [series[i][1] for i in order]


def _frames_at(series: tuple[np.ndarray, list], times: np.ndarray, size: int, where: str):
    """The last image at or before each frame time, converted once per message."""
    indices = resample.last_at(series[0], times, f"{where} image")
    converted: dict[int, np.ndarray] = {}
    for index in dict.fromkeys(indices.tolist()):
        converted[index] = resample.rgb_image(series[1][index], size, where)
    return np.stack([converted[i] for i in indices.tolist()])


def episode_outcome(statuses: list[tuple[float, dict[str, Any]]]) -> tuple[float | None, Any]:
    """(log time of the planner's ``received`` or None, success True/False/None) from the
    status lines (see the module docstring)."""
    start = next(
        (i for i, (_, s) in enumerate(statuses) if _is(s, PLANNER_NODE, ("received",))), None
    )
    lines = [s for _, s in statuses[start or 0 :]]
    received = statuses[start][0] if start is not None else None
    planner = [s for s in lines if _is(s, PLANNER_NODE, PLANNER_FINAL)]
    if not planner:
        return received, None
    final = planner[-1]
    if final["state"] != "done":
        return received, False
    detail = final.get("detail")
    if isinstance(detail, dict) and detail.get("outcome") == "reward_spec":
        controller = [s for s in lines if _is(s, CONTROLLER_NODE, CONTROLLER_FINAL)]
        return received, (controller[-1]["state"] == "success") if controller else None
    return received, True


def _is(status: dict[str, Any], node: str, states: tuple[str, ...]) -> bool:
    return status_node(status) == node and status.get("state") in states


def instruction(recording: Recording) -> str:
    """The episode's instruction: the planner's ``received`` line, else the last message on
    /lang2policy/instruction, else the recording's label."""
    for _, status in recording.statuses:
        if _is(status, PLANNER_NODE, ("received",)) and status.get("instruction"):
            return str(status["instruction"])
    if recording.instructions:
        return recording.instructions[-1][1]
    label = recording.metadata.get("lang2policy", {}).get("label", "")
    if label.strip():
        return label
    raise Lang2PolicyError(
        f"{recording.path.name}: no instruction recorded (no 'received' status line, nothing "
        "on /lang2policy/instruction, no label in the file's metadata)"
    )


def recording_files(inputs: Iterable[Path]) -> list[Path]:
    """The MCAP files named, a directory standing for every ``*.mcap`` under it (sorted)."""
    files: list[Path] = []
    for entry in map(Path, inputs):
        if entry.is_dir():
            files += sorted(entry.rglob("*.mcap"))
        elif entry.is_file():
            files.append(entry)
        else:
            raise Lang2PolicyError(f"no recording at {entry}: neither a file nor a directory")
    if not files:
        raise Lang2PolicyError("no .mcap recordings found in the given paths")
    return files


def convert_recordings(
    inputs: Iterable[Path],
    out: Path,
    cameras: Sequence[str] = CAMERAS,
    image_size: int = IMAGE_SIZE,
    fps: int = FPS,
    say: Callable[[str], None] = print,
) -> Path:
    """Every recording in ``inputs`` as one episode of a new dataset at ``out``."""
    files = recording_files(inputs)
    with DatasetWriter(
        out, fps, cameras, image_size, ROBOT_TYPE, extra_episode_columns=EXTRA_COLUMNS
    ) as writer:
        for path in files:
            record = episode_from_mcap(path, cameras, image_size, fps)
            index = writer.add_episode(record)
            say(
                f"episode {index}: {path.name}: {record.length} frames, success "
                f"{record.extra['success']}, task {record.task!r}"
            )
    return out
