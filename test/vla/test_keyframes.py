"""Keyframes (``vla/model/keyframes.py``): a scene state lifted into the SO-101's joint space by
its own IK, the configurations the demonstrations' oracle moves through."""

from __future__ import annotations

import numpy as np
import pytest

from lang2policy.control.tool_paths import above
from lang2policy.errors import ConfigError
from lang2policy.vla.model.keyframes import LIFT, NAMES, planner_for_robot


@pytest.fixture(scope="module")
def planner():
    return planner_for_robot("so101")


def _tool_points(planner, frames: np.ndarray) -> dict[str, np.ndarray]:
    rows = frames.reshape(len(NAMES), planner.dof)
    return {name: planner.paths.tool_point(q) for name, q in zip(NAMES, rows, strict=True)}


def test_the_pick_keyframes_put_the_tool_above_and_at_the_blocks_grasp_point(planner):
    block = np.array([0.2, -0.08, 0.012])
    scene = np.array([*block, 0.25, 0.06, 0.0, 1.0, 0.0])
    frames = planner.keyframes(scene)
    assert frames.shape == (planner.dim,) and frames.dtype == np.float32
    tool = _tool_points(planner, frames)
    grasp_point = above(block, planner.grasp.grasp_offset)
    assert np.linalg.norm(tool["grasp"] - grasp_point) < 0.003
    assert np.linalg.norm(tool["above_block"] - above(grasp_point, planner.grasp.approach_height))\
        < 0.003
    lift_end = [*grasp_point[:2], block[2] + LIFT]  # where the oracle's lift takes the tool
    assert np.linalg.norm(tool["lifted"] - lift_end) < 0.005
    drop = tool["drop"]
    assert np.linalg.norm(drop[:2] - [0.25, 0.06]) < 0.003 and drop[2] > 0.02  # over the bowl


def test_the_push_keyframes_start_behind_the_block_and_end_toward_the_goal(planner):
    block = np.array([0.22, 0.0, 0.012])
    goal = block + np.array([0.0, 0.07, 0.0])  # push left (+y)
    tool = _tool_points(planner, planner.keyframes(np.array([*block, *goal, 1.0, 0.0])))
    assert tool["push_start"][1] < block[1] - 0.01  # behind the block, seen from the goal
    assert tool["push_end"][1] > tool["push_start"][1] + 0.06
    assert tool["above_push"][2] > tool["push_start"][2] + 0.03
    assert tool["push_start"][2] < 0.03  # low, at the block's side


def test_keyframes_follow_the_scene_and_refuse_a_malformed_one(planner):
    here = planner.keyframes(np.array([0.2, -0.08, 0.012, 0.25, 0.06, 0.0, 1.0, 0.0]))
    there = planner.keyframes(np.array([0.2, 0.08, 0.012, 0.25, 0.06, 0.0, 1.0, 0.0]))
    moved = _tool_points(planner, there)["grasp"] - _tool_points(planner, here)["grasp"]
    assert np.allclose(moved, [0.0, 0.16, 0.0], atol=0.004)
    with pytest.raises(ConfigError, match="8-value scene state"):
        planner.keyframes(np.zeros(6))
    with pytest.raises(ConfigError, match="finite"):
        planner.keyframes(np.array([np.nan, 0, 0, 0, 0, 0, 1, 0]))


def test_an_unreachable_scene_still_gives_keyframes(planner):
    frames = planner.keyframes(np.array([0.9, 0.0, 0.012, 0.9, 0.3, 0.0, 1.0, 0.0]))
    assert np.all(np.isfinite(frames))  # the IK's best attempt: the judge fails the task


def test_a_latched_network_trains_on_keyframes_and_acts_on_those_of_its_look(tmp_path):
    from lang2policy.vla.model.network import VLAConfig
    from lang2policy.vla.policy.runtime import VLAPolicy
    from lang2policy.vla.spec.schema import ENV_KEY
    from lang2policy.vla.train.augment import AugmentConfig
    from lang2policy.vla.train.loop import OptimConfig
    from lang2policy.vla.train.run import TrainSettings, train_vla
    from lang2policy.vla.train.synthetic import hash_encoder, synthetic_frames, tiny_config

    with pytest.raises(ConfigError, match="need scene_latch"):
        VLAConfig(keyframes=True, head_reads="scene")
    data = synthetic_frames(episodes=6, length=10, environment=True)
    rng = np.random.default_rng(0)
    scene = np.zeros((len(data.state), 8), np.float32)
    for episode in data.episodes:
        rows = slice(episode["from"], episode["to"])
        block = [rng.uniform(0.15, 0.25), rng.uniform(-0.1, 0.1), 0.012]
        scene[rows] = [*block, block[0], block[1] + 0.07, 0.012, 1.0, 0.0]
        episode["family"] = "push"
    data.environment = scene
    data.stats[ENV_KEY] = {"mean": scene.mean(0), "std": scene.std(0) + 1e-3}
    config = tiny_config(head_reads="scene", scene_latch=True, keyframes=True)
    run = TrainSettings(
        steps=6, batch_size=8, device="cpu", progress=False, log_every=3, val_every=3,
        checkpoint_every=6, augment=AugmentConfig(shift=0), model=config,
        optim=OptimConfig(lr=3e-3, warmup_steps=2, scene_forcing=1.0, motor_batch=16),
    )  # fmt: skip
    train_vla(data, tmp_path, run, encoder=hash_encoder(8))
    policy = VLAPolicy.load(tmp_path, encoder=hash_encoder(8))
    images = {c: data.images[c][0] for c in ("front", "wrist")}
    first = policy.act_chunk(images, data.state[0], data.tasks[0])
    assert policy._latched_keyframes.shape == (1, policy.config.keyframe_dim) == (1, 40)
    policy._latched_keyframes = policy._latched_keyframes + 1.0  # other keyframes ...
    assert not np.allclose(policy.act_chunk(images, data.state[0], data.tasks[0]), first)


@pytest.mark.parametrize("family", ["lift", "pick_place", "push"])
def test_the_oracles_demonstrations_pass_through_their_keyframes(planner, family):
    """The keyframes are the demonstrations' own waypoints (so an action head can copy them):
    a recorded oracle episode comes within 0.02 rad of each keyframe its task uses."""
    from lang2policy.vla.eval.rollout import RolloutRunner
    from lang2policy.vla.sim.demos import record_episode, training_specs

    runner = RolloutRunner()
    (spec,) = training_specs([family], 1, seed=5)
    episode = record_episode(runner.session, runner.renderer, spec)
    assert episode.success, episode.detail
    frames = planner.keyframes(episode.environment[0]).reshape(len(NAMES), planner.dof)
    used = {
        "lift": ("above_block", "grasp", "lifted"),
        "pick_place": ("above_block", "grasp", "drop"),
        "push": ("above_push", "push_start"),
    }[family]
    path = episode.state[:, : planner.dof]
    for name in used:
        gap = _gap_to_path(path, frames[NAMES.index(name)])
        assert gap < 0.02, f"{family}: {gap:.3f} rad from {name}"


def _gap_to_path(path: np.ndarray, point: np.ndarray) -> float:
    """Distance from ``point`` to the recorded joint path as a line through its samples (the
    recording's 10 Hz samples fall anywhere along a motion: the path, not a sample, passes
    through a keyframe)."""
    start, step = path[:-1], np.diff(path, axis=0)
    length2 = np.maximum((step**2).sum(axis=1), 1e-12)
    t = np.clip(((point - start) * step).sum(axis=1) / length2, 0.0, 1.0)
    return float(np.linalg.norm(start + t[:, None] * step - point, axis=1).min())
