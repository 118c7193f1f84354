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
def session():
    camera = CameraSession("so101", realism=load_realism("mild"))
    camera.truth.world.rig = 1
    yield camera
    camera.close()


def test_the_mirror_holds_what_the_camera_saw_and_the_arm_moves_the_real_world(session):
    fit = session.calibrate(1)  # as a user would: every colour as a block and as a bowl
    assert fit.missed == [] and len(fit.measured) == 10
    seen = session.reset(1)
    truth = session.truth.world
    assert set(seen) <= set(truth.present)  # no name that is not on the table
    for name in seen:  # the mirror's poses are the camera's, close to the truth
        error = math.dist(session.world.object_pose(name).position[:2],
                          truth.object_pose(name).position[:2])  # fmt: skip
        assert error < 0.015, (name, error)
    assert session.world is not truth and session.world.present == seen
    block = next(n for n in seen if n.endswith("block"))
    bowl = next(n for n in seen if n.endswith("bowl"))
    session.primitives.put_first_on_second(block, bowl)
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
