"""A graph's episode recording made by the project's own ``Recorder`` (episode mode), as the
recorder node writes it: a short story of joint states, camera images, an instruction, the
planner's status and one trajectory, with log times 5000 s ahead of the robot clock. Shared by
the from-mcap, loader-bounds and LeRobot live tests."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from mcap_ros2._dynamic import serialize_dynamic

from lang2policy.graph import topics
from lang2policy.recording import Recorder, message_definition
from lang2policy.vla.spec.schema import STATE_NAMES

START, WALL = 100.0, 5000.0  # robot clock at the first message; wall clock minus robot clock
RECEIVED, ARRIVAL, DONE, END = 100.5, 100.8, 102.0, 103.0  # robot times of the story
INSTRUCTION = "put the red block in the blue bowl"
TARGET = np.array([0.5, -0.4, 0.9, 0.2, -0.1, 0.0])  # the trajectory's one point, 1 s out
IMAGE_W, IMAGE_H, CAMERA_RATE, JOINT_RATE = 32, 24, 30, 50
_ENCODERS: dict[str, object] = {}


def encode(type_name: str, message: dict) -> bytes:
    if type_name not in _ENCODERS:
        definition = message_definition(type_name)
        _ENCODERS[type_name] = serialize_dynamic(type_name, definition)[type_name]
    return _ENCODERS[type_name](message)


def header(t: float) -> dict:
    ns = round(t * 1e9)
    return {"stamp": {"sec": ns // 10**9, "nanosec": ns % 10**9}, "frame_id": ""}


def joints(t: float) -> np.ndarray:
    """The measured arm: every joint drifts at its own rate; the gripper opens slowly."""
    return 0.1 + 0.2 * (t - START) * np.arange(1, 7) / 6


def colour(camera: str, j: int) -> tuple[int, int, int]:
    """The RGB of the ``j``-th image of a camera (uniform images, one colour per image)."""
    return (10 + 2 * j, 80, 200 - j) if camera == "front" else (60, 2 * j + 10, 150)


def joint_state(t: float) -> bytes:
    message = {"header": header(t), "name": list(STATE_NAMES), "position": joints(t).tolist()}
    return encode("sensor_msgs/msg/JointState", {**message, "velocity": [], "effort": []})


def image(camera: str, j: int, t: float) -> bytes:
    rgb = colour(camera, j)
    encoding, pixel = ("rgb8", rgb) if camera == "front" else ("bgr8", rgb[::-1])
    data = bytes(pixel) * (IMAGE_W * IMAGE_H)
    message = {"header": header(t), "height": IMAGE_H, "width": IMAGE_W, "encoding": encoding}
    return encode(
        "sensor_msgs/msg/Image", {**message, "is_bigendian": 0, "step": IMAGE_W * 3, "data": data}
    )


def trajectory() -> bytes:
    point = {
        "positions": TARGET.tolist(),
        "velocities": [],
        "accelerations": [],
        "effort": [],
        "time_from_start": {"sec": 1, "nanosec": 0},
    }
    message = {"header": header(0.0), "joint_names": list(STATE_NAMES), "points": [point]}
    return encode("trajectory_msgs/msg/JointTrajectory", message)


def text(value: str) -> bytes:
    return encode("std_msgs/msg/String", {"data": value})


def story(cameras: tuple[str, ...]) -> list[tuple[float, str, str, bytes, dict | None]]:
    """(robot time, topic, type, CDR bytes, status payload or None), in time order."""
    events = [
        (START + i / JOINT_RATE, *topics.JOINT_STATES, joint_state(START + i / JOINT_RATE), None)
        for i in range(int((END - START) * JOINT_RATE) + 1)
    ]
    for camera in cameras:
        for j in range(int((END - START) * CAMERA_RATE) + 1):
            t = START + j / CAMERA_RATE
            events.append(
                (
                    t,
                    f"/camera/{camera}/image_raw",
                    "sensor_msgs/msg/Image",
                    image(camera, j, t),
                    None,
                )
            )
    events.append((RECEIVED - 0.1, *topics.INSTRUCTION, text(INSTRUCTION), None))
    for t, payload in (
        (RECEIVED, {"node": "planner", "state": "received", "instruction": INSTRUCTION}),
        (DONE, {"node": "planner", "state": "done", "instruction": INSTRUCTION}),
    ):
        events.append((t, *topics.STATUS, text(json.dumps(payload)), payload))
    events.append((ARRIVAL, *topics.TRAJECTORY, trajectory(), None))
    return sorted(events, key=lambda event: event[0])


def record_episode(directory: Path, cameras: tuple[str, ...] = ("front", "wrist")) -> Path:
    """One episode file, written by the project's Recorder exactly as the recorder node does."""
    recorder = Recorder(directory, mode="episode", linger=0.8, preroll=1.0)
    for t, topic, type_name, data, payload in story(cameras):
        if payload is not None:
            recorder.status(payload, t)
        recorder.message(topic, type_name, data, round((t + WALL) * 1e9))
        recorder.poll(t)
    recorder.close()
    assert len(recorder.files) == 1
    return recorder.files[0]
