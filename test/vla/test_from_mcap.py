"""``lang2policy dataset from-mcap``: the graph's episode recordings as dataset episodes.

A real episode recording is made with the project's own ``Recorder`` (episode mode, cut at the
planner's status lines) from messages CDR-encoded by mcap-ros2-support, as the graph would
publish them: joint states on the robot clock, two cameras (one rgb8, one bgr8, smaller than
the dataset's images), the instruction, status lines and one trajectory from the safety node.
Log times are the wall clock, 5000 s ahead of the robot clock. It is converted, read back with
``load_dataset`` and every frame is checked against values computed here from the same
formulas: state, action (the trajectory replayed), the image chosen, task and success.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest
from support.mcap_story import (
    ARRIVAL,
    CAMERA_RATE,
    INSTRUCTION,
    START,
    TARGET,
    colour,
    joints,
    record_episode,
)

from lang2policy.commands import dataset as dataset_command
from lang2policy.errors import Lang2PolicyError
from lang2policy.vla.dataset import episode_from_mcap, load_dataset, resample
from lang2policy.vla.dataset.cdr import TrajectoryMsg
from lang2policy.vla.dataset.from_mcap import episode_outcome


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> Path:
    return record_episode(tmp_path_factory.mktemp("recordings"))


@pytest.fixture(scope="module")
def converted(recording, tmp_path_factory):
    out = tmp_path_factory.mktemp("converted") / "ds"
    parser = argparse.ArgumentParser()
    dataset_command.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["dataset", "from-mcap", str(recording.parent), "--out", str(out)])
    assert dataset_command.run(args) == 0
    return load_dataset(out)


def expected_action(t: float) -> np.ndarray:
    """Where the arm was sent to be at ``t``: the file's first joint state (the pre-roll keeps
    everything since START) until the trajectory arrives, then a straight line to TARGET
    over 1 s."""
    first = joints(START)
    progress = np.clip((t - ARRIVAL) / 1.0, 0.0, 1.0)
    return first + (TARGET - first) * progress


def test_frames_are_resampled_from_the_first_command_on(converted):
    assert len(converted.episodes) == 1 and converted.tasks == [INSTRUCTION]
    episode = converted.episodes[0]
    assert episode["task"] == INSTRUCTION and episode["success"] is True
    assert episode["source"].endswith("_put-the-red-block-in-the-blue-bowl.mcap")
    # From the first command after the planner's "received" (100.8) to the last moment both
    # streams have data: the file closes at the joint state of 102.8 (0.8 s of linger after
    # "done"), so the last image is that of 102.767 and the last frame is at 102.7.
    assert len(converted) == 20
    times = ARRIVAL + np.arange(len(converted)) / 10
    np.testing.assert_allclose(converted.state, [joints(t) for t in times], atol=1e-6)
    np.testing.assert_allclose(converted.timestamp, np.arange(len(converted)) / 10, atol=1e-6)


def test_action_is_the_target_at_the_next_frame(converted):
    times = ARRIVAL + np.arange(len(converted)) / 10
    expected = np.array([expected_action(t + 0.1) for t in times])
    np.testing.assert_allclose(converted.action, expected, atol=1e-5)
    assert not np.allclose(converted.action[0], converted.action[-1])  # it really moved


def test_images_are_the_last_before_each_frame_resized(converted):
    times = ARRIVAL + np.arange(len(converted)) / 10
    for camera in ("front", "wrist"):
        frames = converted.images[camera]
        assert frames.shape == (len(converted), 96, 96, 3)
        for k, t in enumerate(times):
            j = round((t - START) * CAMERA_RATE)
            mean = frames[k].reshape(-1, 3).mean(axis=0)
            np.testing.assert_allclose(mean, colour(camera, j), atol=2.5, err_msg=f"{camera} {k}")


def test_missing_camera_names_what_the_file_has(tmp_path):
    path = record_episode(tmp_path, cameras=("front",))
    with pytest.raises(
        Lang2PolicyError,
        match=r"lacks \['/camera/wrist/image_raw'\].*"
        r"it has \[.*'/camera/front/image_raw'.*'/joint_states'",
    ):
        episode_from_mcap(path)
    assert episode_from_mcap(path, cameras=("front",)).length == 20


def test_not_an_mcap_file(tmp_path):
    (tmp_path / "x.mcap").write_bytes(b"not an mcap file")
    with pytest.raises(Lang2PolicyError, match=r"x.mcap is not a readable MCAP recording"):
        episode_from_mcap(tmp_path / "x.mcap")


def test_replay_keeps_unnamed_joints_and_holds_on_a_stop():
    names = ("a", "b")
    states = (np.array([0.0, 1.0, 2.0]), np.array([[0.0, 0.2], [0.5, 0.2], [0.7, 0.2]]))
    commands = [
        (0.0, TrajectoryMsg(0.0, ["a"], [(1.0, [1.0])])),  # a: 0 -> 1 in 1 s; b keeps 0.2
        (1.5, TrajectoryMsg(0.0, ["a", "b"], [])),  # a stop: hold where the arm was measured
    ]
    times = np.array([0.0, 0.4, 1.4, 1.9])
    actions = resample.commanded_actions(commands, states, times, 10, names)
    np.testing.assert_allclose(actions, [[0.1, 0.2], [0.5, 0.2], [0.5, 0.2], [0.5, 0.2]])
    unknown = [(0.0, TrajectoryMsg(0.0, ["elbow"], [(1.0, [1.0])]))]
    with pytest.raises(Lang2PolicyError, match=r"cannot be replayed: .*elbow.*joints are \['a'"):
        resample.commanded_actions(unknown, states, times, 10, names)


def planner(state: str, **detail) -> tuple[float, dict]:
    return 0.0, {"node": "planner", "state": state, "instruction": "x", "detail": detail}


def controller(state: str) -> tuple[float, dict]:
    return 0.0, {"node": "controller", "state": state}


@pytest.mark.parametrize(
    "lines, success",
    [
        ([planner("received"), planner("done", route="code")], True),
        ([planner("received"), planner("failed")], False),
        ([planner("received"), planner("stopped")], False),
        ([planner("received"), planner("running")], None),
        ([planner("done"), planner("received")], None),  # the previous episode's end
        (
            [
                planner("received"),
                planner("done", outcome="reward_spec"),
                controller("accepted"),
                controller("success"),
            ],
            True,
        ),
        (
            [
                planner("received"),
                controller("running"),
                controller("timeout"),
                planner("done", outcome="reward_spec"),
            ],
            False,
        ),
        ([planner("received"), planner("done", outcome="reward_spec")], None),
    ],
)
def test_success_from_the_final_status(lines, success):
    assert episode_outcome(lines)[1] is success


def test_info_command_prints_the_dataset(converted, capsys):
    parser = argparse.ArgumentParser()
    dataset_command.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["dataset", "info", str(converted.root), "--json"])
    assert dataset_command.run(args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["episodes"] == 1 and summary["episode_columns"] == ["success", "source"]
    assert summary["success"]["all"] == {"episodes": 1, "succeeded": 1, "rate": 1.0}
    with pytest.raises(SystemExit):
        parser.parse_args(["dataset", "from-mcap", "x.mcap", "--out", "d", "--fps", "0"])
