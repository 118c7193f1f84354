"""Look once, then act (``VLAConfig.scene_latch``, ``vla/train/scene_latch.py``): what training
reads per frame (the episode's first scene, the frames whose block has not moved, the goal
heatmap's anchor), and a latched policy holding the scene it saw on its first frame."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support.ddp import free_port, rank_environment, spawn_ranks

from lang2policy.commands import train as train_command
from lang2policy.errors import ConfigError
from lang2policy.vla.model.network import VLAConfig
from lang2policy.vla.policy.runtime import VLAPolicy
from lang2policy.vla.spec.schema import ENV_KEY
from lang2policy.vla.train.augment import AugmentConfig
from lang2policy.vla.train.loop import OptimConfig
from lang2policy.vla.train.prepare import prepare
from lang2policy.vla.train.run import TrainSettings, train_vla
from lang2policy.vla.train.scene_latch import (
    anchor_environment,
    episode_starts,
    start_environment,
    unmoved_frames,
)
from lang2policy.vla.train.synthetic import hash_encoder, synthetic_frames, tiny_config


def _scene(rows: list[list[float]]) -> np.ndarray:
    return np.asarray(rows, np.float32)


def test_each_frame_reads_the_scene_its_episode_began_with():
    starts = episode_starts([(0, 3), (3, 5)], 6)
    assert starts.tolist() == [0, 0, 0, 3, 3, 5]  # frame 5 belongs to no episode
    scene = np.arange(36, dtype=np.float32).reshape(6, 6)
    held = start_environment(scene, starts)
    assert np.array_equal(held[1], scene[0]) and np.array_equal(held[4], scene[3])
    with pytest.raises(ConfigError, match="6\\+ values per frame"):
        start_environment(np.zeros((6, 4)), starts)


def test_only_frames_whose_block_has_not_moved_teach_the_scene_head():
    block_at = [[0.2, 0.0, 0.02], [0.2, 0.003, 0.02], [0.2, 0.0, 0.06], [0.3, 0.1, 0.02]]
    scene = _scene([[*b, 0.1, 0.1, 0.0] for b in block_at])
    starts = episode_starts([(0, 3), (3, 4)], 4)
    kept = unmoved_frames(scene, starts, np.arange(4))
    assert kept.tolist() == [0, 1, 3]  # frame 2: the block is 4 cm up, lifted


def test_the_goal_heatmap_is_anchored_on_the_object_that_defines_the_goal():
    scene = _scene([[0.2, 0.0, 0.02, 0.3, 0.1, 0.0], [0.2, 0.0, 0.02, 0.2, 0.0, 0.10]])
    anchored = anchor_environment(scene, ["pick_place", "lift"])
    assert np.allclose(anchored[0], scene[0])  # the bowl is the goal
    assert np.allclose(anchored[1, 3:6], scene[1, :3])  # the lift's goal is in the air
    with pytest.raises(ConfigError, match="1 family names for 2 frames"):
        anchor_environment(scene, ["lift"])


def _moving_block_frames():
    """Synthetic episodes whose named block stands still for 5 frames, then moves."""
    data = synthetic_frames(episodes=12, length=20, environment=True)
    scene = np.zeros((len(data.state), 6), np.float32)
    for number, episode in enumerate(data.episodes):
        rows = np.arange(episode["from"], episode["to"])
        start = np.array([0.2 + 0.01 * number, 0.05 * (number % 3 - 1), 0.02])
        moved = np.clip(rows - rows[0] - 4, 0, None)[:, None] * np.array([0.0, 0.0, 0.01])
        scene[rows, :3] = start + moved
        scene[rows, 3:6] = start + np.array([0.0, 0.0, 0.08])
        episode["family"] = "lift"
    data.environment = scene
    data.stats[ENV_KEY] = {"mean": scene.mean(0), "std": scene.std(0) + 1e-3}
    return data


def test_training_a_latched_network_learns_the_scene_only_where_the_block_has_not_moved():
    data = _moving_block_frames()
    config = tiny_config(head_reads="scene", scene_latch=True, aux_dim=6)
    prepared = prepare(data, config, val_episodes=2, seed=0, encoder=hash_encoder(8))
    block = np.asarray(data.environment)[prepared.image_frames, :3]
    starts = np.asarray(data.environment)[prepared.image_frames // 20 * 20, :3]
    assert np.allclose(block, starts, atol=0.005)
    assert len(prepared.image_frames) == 10 * 5  # five still frames of each training episode
    assert len(prepared.train_frames) == 10 * 20  # the action head learns from every frame
    late = prepared.train_frames[prepared.train_frames % 20 == 19]
    assert np.allclose(prepared.environment[late], np.asarray(data.environment)[late - 19])


def test_a_latched_policy_holds_its_first_estimate_until_reset_or_a_new_instruction(tmp_path):
    data = _moving_block_frames()
    run = TrainSettings(
        steps=30, batch_size=8, device="cpu", progress=False, log_every=10, val_every=15,
        checkpoint_every=15, augment=AugmentConfig(shift=0),
        model=tiny_config(head_reads="scene", scene_latch=True, grounding=True),
        optim=OptimConfig(lr=3e-3, warmup_steps=5, scene_forcing=1.0, motor_batch=32),
    )  # fmt: skip
    train_vla(data, tmp_path, run, encoder=hash_encoder(8))
    assert json.loads((tmp_path / "config.json").read_text())["scene_latch"] is True
    policy = VLAPolicy.load(tmp_path, encoder=hash_encoder(8))
    frame = {c: data.images[c][0] for c in ("front", "wrist")}
    other = {c: data.images[c][7] for c in ("front", "wrist")}
    state, words = data.state[0], data.tasks[0]
    first = policy.act_chunk(frame, state, words)
    seen = policy.last_scene.copy()
    assert np.allclose(policy.act_chunk(other, state, words), first)  # the images are not read
    assert np.allclose(policy.last_scene, seen)
    policy.reset()
    assert not np.allclose(policy.act_chunk(other, state, words), first)  # looks again
    told = np.array([0.25, 0.0, 0.02, 0.25, 0.0, 0.1], np.float32)  # diagnosis: the truth
    policy.reset()
    assert np.isfinite(policy.act(frame, state, words, scene=told)).all()
    from_truth = policy._predict(*policy._check(frame, state, words), scene=told)
    assert np.allclose(policy.act_chunk(other, state, words), from_truth)  # the truth is held
    assert not np.allclose(from_truth, first)
    policy.act_chunk(frame, state, data.tasks[1])  # a new instruction: estimated again
    assert not np.allclose(policy.act_chunk(frame, state, words), from_truth)


def test_latching_needs_the_bottleneck_and_the_command_line_trains_it_by_default():
    with pytest.raises(ConfigError, match="head_reads='scene'"):
        VLAConfig(scene_latch=True)
    parser = train_command.argparse.ArgumentParser()
    train_command.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["train", "vla", "--dataset", "d", "--out", "o"])
    config = train_command.settings_from_args(args).model
    assert config.scene_latch and config.cameras == ("front",) and config.keyframes
    with pytest.raises(SystemExit):
        parser.parse_args(["train", "vla", "--dataset", "d", "--out", "o", "--cameras", "top"])


def _slots_encoder():
    """A cheap sentence vector of MiniLM's size with the real slots appended."""
    from lang2policy.vla.model.language import MINILM_DIM
    from lang2policy.vla.model.slots import slot_vectors

    sentence = hash_encoder(MINILM_DIM)

    def encode(texts):
        return np.concatenate([sentence(texts), slot_vectors(texts)], axis=1).astype(np.float32)

    return encode


def test_the_perception_part_can_read_only_the_slots_of_the_instruction():
    import torch

    from lang2policy.vla.model.language import MINILM_DIM, MINILM_SLOTS, language_dim
    from lang2policy.vla.model.network import VLANet

    with pytest.raises(ConfigError, match="reads the slots the"):
        tiny_config(perception_words="slots", grounding=True, aux_dim=6, head_reads="scene")
    config = tiny_config(
        language_model=MINILM_SLOTS, language_dim=language_dim(MINILM_SLOTS), aux_dim=6,
        grounding=True, head_reads="scene", perception_words="slots",
    )  # fmt: skip
    net = VLANet(config).eval()
    for film in net.encoder.films:  # FiLM starts as the identity: give the words some say
        torch.nn.init.normal_(film.weight, std=0.5)
    encode = _slots_encoder()
    lift, nudge = encode(["lift the red block", "push the red block to the left"])
    size = config.image_size
    images, state = torch.rand(1, 2, 3, size, size), torch.zeros(1, config.state_dim)
    with torch.no_grad():
        seen = [net.grounded_points(images, state, torch.from_numpy(v)[None]) for v in (lift,)]
        other_sentence = lift.copy()
        other_sentence[:MINILM_DIM] = nudge[:MINILM_DIM]  # same slots, another sentence
        same = net.grounded_points(images, state, torch.from_numpy(other_sentence)[None])
        other_colour = encode(["lift the blue block"])[0]
        moved = net.grounded_points(images, state, torch.from_numpy(other_colour)[None])
        with_sentence = net(images, state, torch.from_numpy(lift)[None])
        other = net(images, state, torch.from_numpy(other_sentence)[None])
    assert torch.allclose(seen[0], same)  # where it looks ignores the sentence
    assert not torch.allclose(seen[0], moved)  # ... but not the named colour
    assert not torch.allclose(with_sentence, other)  # the action head reads the sentence


def test_a_latched_head_learns_from_every_frame_even_without_a_motor_batch(tmp_path):
    from lang2policy.vla.train import distributed
    from lang2policy.vla.train.run import _build_run

    data = _moving_block_frames()
    run = TrainSettings(
        steps=2, batch_size=8, device="cpu", progress=False, augment=AugmentConfig(shift=0),
        model=tiny_config(head_reads="scene", scene_latch=True, aux_dim=6),
        optim=OptimConfig(motor_batch=0),
    )  # fmt: skip
    context = distributed.start("cpu")
    built = _build_run(data, tmp_path, run, context, hash_encoder(8), None)
    motor = built._motor_batch()
    assert motor is not None and len(motor) == 8  # a batch's worth of all training frames
    assert set(built.data.image_frames) < set(built.data.train_frames)
    # validation: the action loss on every held-out frame, the scene error where it is taught
    assert len(built.data.val_frames) == 2 * 20 and len(built.data.val_scene_frames) == 2 * 5


def test_latched_grounding_needs_each_episodes_family_and_slots_need_grounding():
    from lang2policy.vla.model.language import MINILM_SLOTS, language_dim
    from lang2policy.vla.train.prepare import grounding_targets_for

    data = _moving_block_frames()
    del data.episodes[3]["family"]
    config = tiny_config(head_reads="scene", scene_latch=True, grounding=True, aux_dim=6)
    with pytest.raises(ConfigError, match="'family' column"):
        grounding_targets_for(data, config)
    with pytest.raises(ConfigError, match="needs grounding"):
        tiny_config(
            language_model=MINILM_SLOTS, language_dim=language_dim(MINILM_SLOTS), aux_dim=6,
            head_reads="scene", perception_words="slots",
        )  # fmt: skip


def test_a_points_only_network_skips_the_unread_stages():
    import torch

    from lang2policy.vla.model.network import VLANet

    net = VLANet(tiny_config(head_reads="scene", grounding=True, aux_dim=6))
    assert net.points_only
    size = net.config.image_size
    images, state = torch.rand(2, 2, 3, size, size), torch.zeros(2, net.config.state_dim)
    actions, aux, logits = net(images, state, torch.zeros(2, 8), with_grounding=True)
    (actions.sum() + aux.sum() + logits.sum()).backward()
    last = net.encoder.convs[-1]
    assert last.weight.grad is None  # never run, never trained
    assert net.encoder.convs[1].weight.grad is not None



def _latched_ddp_worker(rank: int, out: str, port: int) -> None:
    rank_environment(rank, port)
    run = TrainSettings(
        steps=4, batch_size=8, device="cpu", progress=False, log_every=2, val_every=4,
        checkpoint_every=4, augment=AugmentConfig(shift=0),
        model=tiny_config(head_reads="scene", scene_latch=True, grounding=True),
        optim=OptimConfig(lr=3e-3, warmup_steps=1, motor_batch=16),
    )  # fmt: skip
    train_vla(_moving_block_frames(), out, run, encoder=hash_encoder(8))


def test_a_latched_grounding_network_trains_data_parallel_with_its_unread_stages():
    """Its last conv stage never runs: DistributedDataParallel must be told (two processes on
    the CPU, gloo), or its second step fails waiting for their gradients."""
    import tempfile


    with tempfile.TemporaryDirectory() as out:
        spawn_ranks(_latched_ddp_worker, out, free_port())
        summary = json.loads((__import__("pathlib").Path(out) / "train_summary.json").read_text())
    assert summary["world_size"] == 2 and summary["steps"] == 4
