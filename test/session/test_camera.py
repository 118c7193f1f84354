"""The physical path in-process: pick-and-place decided from camera perception only, judged by
the simulator (``session.camera``, ``bench pickplace --perception camera``)."""

from __future__ import annotations

import argparse
import math

import pytest

from lang2policy.bench import pickplace
from lang2policy.errors import Lang2PolicyError
from lang2policy.realism import load_realism
from lang2policy.session.camera import CameraSession


@pytest.fixture(scope="module")
def camera_session():
    camera = CameraSession("so101", realism=load_realism("mild"))
    camera.truth.world.rig = 1
    yield camera
    camera.close()


def test_the_mirror_holds_what_the_camera_saw_and_the_arm_moves_the_real_world(camera_session):
    fit = camera_session.calibrate(1)  # as a user would: every colour as a block and as a bowl
    assert fit.missed == [] and len(fit.measured) == 10
    seen = camera_session.reset(1)
    truth = camera_session.truth.world
    assert set(seen) <= set(truth.present)  # no name that is not on the table
    for name in seen:  # the mirror's poses are the camera's, close to the truth
        error = math.dist(camera_session.world.object_pose(name).position[:2],
                          truth.object_pose(name).position[:2])  # fmt: skip
        assert error < 0.015, (name, error)
    assert camera_session.world is not truth and camera_session.world.present == seen
    block = next(n for n in seen if n.endswith("block"))
    bowl = next(n for n in seen if n.endswith("bowl"))
    camera_session.primitives.put_first_on_second(block, bowl)
    truth.step_seconds(0.5)
    assert truth.is_in(block, bowl)  # the simulated block went where the camera said


def test_bench_pickplace_reports_the_camera_run_beside_ground_truth():
    args = argparse.Namespace(robot="so101", episodes=1, seed=3, perception="camera",
                              realism="off", emulate=False, json=True)  # fmt: skip
    report = pickplace.run_args(args)
    assert report["perception"] == "camera" and report["episodes"] == 1
    assert report["camera"]["successes"] == report["ground_truth"]["successes"] == 1
    text = pickplace.format_text(report)
    assert "camera perception at realism off, the simulated arm: 1/1" in text
    assert "ground truth" in text
    with pytest.raises(Lang2PolicyError, match="--perception camera"):
        pickplace.run_args(argparse.Namespace(**{**vars(args), "perception": "ground_truth",
                                                 "realism": "mild"}))  # fmt: skip


def test_a_held_block_is_carried_with_the_jaws_by_perception_and_in_the_mirror(camera_session):
    seen = camera_session.reset(4)
    truth = camera_session.truth.world
    block = next(n for n in seen if n.endswith("block"))
    camera_session.primitives.pick(block)
    camera_session.primitives.move_to_position([0.22, -0.08, 0.12])  # the view shows where it lay
    camera_session.sync()
    held = truth.object_pose(block).position
    perceived = camera_session.perceived()  # the jaws hide it: perception.holding carries it
    assert block in perceived and math.dist(perceived[block][0], held) < 0.02
    assert block in camera_session.world.object_names()  # ... and so does the mirror
    assert math.dist(camera_session.world.object_pose(block).position, held) < 0.02
    camera_session.primitives.open_gripper()  # let go: no longer carried
    truth.step_seconds(1.0)
    camera_session.sync()
    assert (block in camera_session.world.object_names()) == (block in camera_session.perceived())


def _stand_on(truth, name: str, base: str) -> None:
    """Put ``name`` on ``base`` in the simulated world, as a stacking place leaves it."""
    position = truth.object_pose(base).position
    half = truth.description.objects.block_half
    on, under = truth.objects[name], truth.objects[base]
    truth.data.qpos[on.qpos_adr : on.qpos_adr + 3] = (*position[:2], position[2] + 2 * half)
    truth.data.qpos[on.qpos_adr + 3 : on.qpos_adr + 7] = truth.data.qpos[
        under.qpos_adr + 3 : under.qpos_adr + 7
    ]
    truth.step_seconds(0.3)


def test_a_tower_is_seen_block_on_block_and_its_hidden_blocks_are_kept(camera_session):
    # The camera sees only the top block of a tower; as if it stood on the table, it would be a
    # block height too low and off the tower by the parallax (2.5 cm and up to 0.9 cm here).
    seen = camera_session.reset(2, ["red block", "blue block", "yellow block", "green bowl"])
    assert {"red block", "blue block", "yellow block"} <= set(seen)
    truth = camera_session.truth.world
    _stand_on(truth, "blue block", "red block")
    camera_session.settle_frames()
    _stand_on(truth, "yellow block", "blue block")
    camera_session.settle_frames()
    camera_session.sync()
    for name in ("red block", "blue block", "yellow block"):  # kept, each at its level
        assert name in camera_session.perceived(), name
        error = math.dist(camera_session.world.object_pose(name).position,
                          truth.object_pose(name).position)  # fmt: skip
        assert error < 0.005, (name, error)
