"""Grounding the instruction in the front camera (issue 17): the projection of recorded positions
into the rendered image, the heatmap loss and soft-argmax, the network's grounding head (it must
read the front camera, not the wrist), and training it through ``train vla --grounding``."""

from __future__ import annotations

import json

import mujoco
import numpy as np
import pytest
import torch

from lang2policy.commands import train as train_command
from lang2policy.errors import ConfigError
from lang2policy.scene.world import World
from lang2policy.vla.model.grounding import (
    CameraProjection,
    draw_grounding,
    grid_size,
    grounding_targets,
    heatmap_loss,
    image_fractions,
    soft_argmax,
)
from lang2policy.vla.model.network import VLAConfig, VLANet
from lang2policy.vla.policy.runtime import VLAPolicy
from lang2policy.vla.sim.render_twin import RenderTwin
from lang2policy.vla.spec.schema import ENV_KEY
from lang2policy.vla.train.loop import OptimConfig
from lang2policy.vla.train.plot import LOG_FILE
from lang2policy.vla.train.run import TrainSettings, train_vla
from lang2policy.vla.train.synthetic import hash_encoder, synthetic_frames, tiny_config


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-9))


def test_recorded_positions_project_onto_their_objects_in_the_rendered_front_image():
    world = World("so101")
    camera = CameraProjection.of_robot("so101")
    renderer = RenderTwin(world, 96, 96)
    checked = 0
    for seed in range(3):
        world.reset(seed)
        mujoco.mj_forward(world.model, world.data)
        image = renderer.render(world.data, "front").astype(float) / 255
        for name in world.present:
            position = world.object_pose(name).position
            u, v = camera.pixels(position[None], 96)[0]
            body = world.objects[name].body_id
            colour = world.model.geom_rgba[np.flatnonzero(world.model.geom_bodyid == body)[0], :3]
            pixel = image[int(v), int(u)]
            assert _cosine(pixel, colour) > 0.97, (seed, name, pixel, colour)
            checked += 1
    assert checked >= 9


def test_targets_are_cell_coordinates_clipped_to_the_image():
    camera = CameraProjection.of_robot("so101")
    centre = camera.position + camera.rotation @ np.array([0.0, 0.0, -0.5])  # on the axis
    behind_left = camera.position + camera.rotation @ np.array([-5.0, 5.0, -0.5])
    scene = np.zeros((2, 8))
    scene[0, :3], scene[0, 3:6] = centre, behind_left
    scene[1, :3], scene[1, 3:6] = centre, centre
    targets = grounding_targets(scene, 96, camera)
    assert targets.shape == (2, 4) and targets.dtype == np.float32
    np.testing.assert_allclose(targets[0, :2], [0.0, 0.0], atol=1e-6)
    np.testing.assert_allclose(targets[0, 2:], [-1.0, -1.0])  # far up-left: clipped
    with pytest.raises(ConfigError, match="block and goal positions"):
        grounding_targets(np.zeros((3, 4)), 96, camera)
    assert grid_size(96) == 24 and grid_size(32) == 8


def test_soft_argmax_reads_a_peak_and_the_loss_prefers_the_right_place():
    logits = torch.full((1, 2, 8, 8), -20.0)
    logits[0, 0, 2, 5] = 20.0  # block: row 2, column 5
    logits[0, 1, 7, 0] = 20.0  # goal: bottom-left corner
    cells = torch.linspace(-1, 1, 8)
    expected = torch.tensor([[cells[5], cells[2], cells[0], cells[7]]])
    torch.testing.assert_close(soft_argmax(logits), expected, atol=1e-4, rtol=0)
    wrong = torch.tensor([[cells[1], cells[6], cells[7], cells[0]]])
    assert heatmap_loss(logits, expected) < 0.8 * heatmap_loss(logits, wrong)


def _square_images(batch: int, size: int, rng: np.random.Generator):
    """Front images with one bright square (the "block"), wrist images with a decoy square
    elsewhere; the targets are the front square's cell coordinates."""
    images = torch.zeros(batch, 2, 3, size, size)
    cells = grid_size(size)
    where = rng.integers(0, cells, size=(batch, 2, 2))  # camera, (column, row)
    for i in range(batch):
        for camera in range(2):
            col, row = where[i, camera] * (size // cells)
            images[i, camera, :, row : row + 3, col : col + 3] = 1.0
    target = -1 + 2 * where[:, 0].astype(np.float32) / (cells - 1)
    return images, torch.from_numpy(np.concatenate([target, target], axis=1))


def test_the_grounding_head_learns_where_the_front_camera_shows_the_square():
    torch.manual_seed(0)
    config = tiny_config(grounding=True, aux_dim=6, channels=(16, 16, 16, 16))
    net = VLANet(config)
    optimizer = torch.optim.Adam(net.parameters(), lr=3e-3)
    rng = np.random.default_rng(0)
    state, words = torch.zeros(32, config.state_dim), torch.zeros(32, config.language_dim)
    for _ in range(300):
        images, target = _square_images(32, 32, rng)
        _, _, logits = net(images, state, words, with_grounding=True)
        loss = heatmap_loss(logits, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    images, target = _square_images(64, 32, rng)
    with torch.no_grad():
        points = net.grounded_points(images, state[:1].expand(64, -1), words[:1].expand(64, -1))
    cell = 2 / (grid_size(32) - 1)
    error = (points - target)[:, :2].abs().mean().item()
    assert error < 0.5 * cell, error  # within half a cell; the decoy in the wrist is ignored


def test_grounding_is_refused_without_a_front_camera_or_with_a_shift():
    with pytest.raises(ConfigError, match="grounding needs the 'front' camera"):
        VLAConfig(cameras=("wrist",), grounding=True)
    with pytest.raises(ConfigError, match="scene state"):
        VLANet(tiny_config(grounding=True))  # aux_dim 0
    from lang2policy.vla.train.augment import AugmentConfig

    with pytest.raises(ConfigError, match="with no random shift"):
        TrainSettings(model=tiny_config(grounding=True), augment=AugmentConfig(shift=4))
    assert VLANet(tiny_config()).grounded_points(*_inputs(tiny_config())) is None


def _inputs(config: VLAConfig):
    size = config.image_size
    return (
        torch.rand(1, 2, 3, size, size),
        torch.zeros(1, config.state_dim),
        torch.zeros(1, config.language_dim),
    )


def test_training_with_grounding_logs_its_error_saves_and_the_policy_acts(tmp_path):
    from lang2policy.vla.train.augment import AugmentConfig

    data = synthetic_frames(environment=True)
    scene = np.concatenate([data.environment, data.environment[:, :2]], axis=1)  # 6-d
    scene[:, :3] = [0.25, 0.0, 0.02]  # on the table in front of the robot
    data.environment = scene
    data.stats[ENV_KEY] = {"mean": scene.mean(0), "std": scene.std(0) + 1e-3}
    run = TrainSettings(
        steps=40, batch_size=16, model=tiny_config(grounding=True, head_reads="scene"),
        optim=OptimConfig(lr=3e-3, warmup_steps=5, scene_forcing=1.0), log_every=10,
        val_every=20, checkpoint_every=20, device="cpu", progress=False,
        augment=AugmentConfig(shift=0),
    )  # fmt: skip
    train_vla(data, tmp_path, run, encoder=hash_encoder(8))
    records = [json.loads(line) for line in (tmp_path / LOG_FILE).read_text().splitlines()]
    train = [r for r in records if r["kind"] == "train"]
    assert all("grounding_loss" in r for r in train)
    assert train[-1]["grounding_loss"] < train[0]["grounding_loss"]
    val = [r for r in records if r["kind"] == "val"]
    assert len(val[-1]["val_grounding_px"]) == 4
    assert json.loads((tmp_path / "config.json").read_text())["grounding"] is True
    policy = VLAPolicy.load(tmp_path, encoder=hash_encoder(8))
    images = {c: data.images[c][0] for c in ("front", "wrist")}
    assert np.isfinite(policy.act(images, data.state[0], data.tasks[0])).all()
    seen = policy.last_grounded
    assert seen.shape == (2, 2) and np.all((seen > 0) & (seen < 1))
    assert policy.last_scene.shape == (6,)
    estimate = policy.act_chunk(images, data.state[0], data.tasks[0])
    told = policy._predict(*policy._check(images, data.state[0], data.tasks[0]), scene=scene[0])
    assert told.shape == estimate.shape and not np.allclose(told, estimate)  # the head read it
    with pytest.raises(ConfigError, match="must be 6 values"):
        policy.act(images, data.state[0], data.tasks[0], scene=np.zeros(3))
    shifted = TrainSettings(steps=5, batch_size=16, finetune=str(tmp_path), device="cpu",
                            progress=False)  # fmt: skip
    with pytest.raises(ConfigError, match="with no random shift"):  # fine-tuning keeps images still
        train_vla(data, tmp_path / "tuned", shifted, encoder=hash_encoder(8))
    policy.reset()
    assert policy.last_grounded is None


def test_the_video_marks_where_the_policy_sees_the_block_and_the_goal():
    frame = np.zeros((192, 192, 3), np.uint8)
    points = np.array([-1.0, -1.0, 1.0, 1.0])  # block: the top-left cell, goal: bottom-right
    fractions = image_fractions(points, 96)  # of a network taking 96 px images: 24 cells
    np.testing.assert_allclose(fractions * 96, [[2.0, 2.0], [94.0, 94.0]])
    marked = draw_grounding(frame, fractions)
    assert frame.max() == 0  # the frame given is left alone
    assert marked[:16, :16].max() > 100 and marked[176:, 176:].max() > 100
    assert marked[64:128, 64:128].max() == 0


def test_the_command_line_grounds_by_default_with_the_images_still():
    parser = train_command_parser()
    run = train_command.settings_from_args(
        parser.parse_args(["train", "vla", "--dataset", "d", "--out", "o"])
    )
    assert run.model.grounding and run.optim.grounding_weight == 1.0
    assert run.model.grounding_state == () and run.augment.shift == 0
    plain = parser.parse_args(["train", "vla", "--dataset", "d", "--out", "o", "--design", "plain"])
    assert not train_command.settings_from_args(plain).model.grounding


def train_command_parser():
    import argparse

    parser = argparse.ArgumentParser()
    train_command.add_parser(parser.add_subparsers(dest="command"))
    return parser


def test_the_scene_head_reads_only_the_state_dimensions_asked_for():
    torch.manual_seed(0)
    net = VLANet(tiny_config(grounding=True, aux_dim=6, grounding_state=(5,))).eval()
    images, state, words = _inputs(net.config)
    moved_joints, moved_gripper = state.clone(), state.clone()
    moved_joints[0, :5] += 1.0
    moved_gripper[0, 5] += 1.0
    with torch.no_grad():
        _, scene = net(images, state, words, with_aux=True)
        _, joints = net(images, moved_joints, words, with_aux=True)
        _, gripper = net(images, moved_gripper, words, with_aux=True)
    torch.testing.assert_close(scene, joints)  # the arm's joints: not read
    assert not torch.allclose(scene, gripper)  # the gripper opening: read
    with pytest.raises(ConfigError, match="grounding_state must be distinct state dimensions"):
        tiny_config(grounding=True, grounding_state=(6,))
