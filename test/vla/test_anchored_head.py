"""The keyframe-anchored action head: a chosen keyframe is reached exactly, the gripper comes
from the residual, its units come from the model's normaliser, and it trains, saves and loads."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lang2policy.errors import ConfigError
from lang2policy.vla.model.anchored_head import KeyframeAnchoredHead
from lang2policy.vla.model.normalize import Normalizer

CHUNK, ACTION_DIM, KEYFRAMES, DOF = 3, 6, 8, 5
IN_DIM = ACTION_DIM + 4 + KEYFRAMES * DOF  # state, words and scene, keyframes last


def _statistics(
    state_std: float = 2.0, mean: float = 0.1, std: float = 0.5, mode: str = "delta"
) -> Normalizer:
    return Normalizer(
        state_mean=np.zeros(ACTION_DIM, np.float32),
        state_std=np.full(ACTION_DIM, state_std, np.float32),
        action_mean=np.full((CHUNK, ACTION_DIM), mean, np.float32),
        action_std=np.full((CHUNK, ACTION_DIM), std, np.float32),
        action_mode=mode,
    )


def _head_choosing(anchor: int, gripper: float = 0.0) -> KeyframeAnchoredHead:
    """A head whose output ignores its input: all weight on ``anchor`` (0: stay), residual 0
    on the joints and ``gripper`` on the gripper."""
    head = KeyframeAnchoredHead(IN_DIM, [16], CHUNK, ACTION_DIM, KEYFRAMES, DOF)
    head.use_statistics(_statistics())
    last = head.mlp[-1]
    torch.nn.init.zeros_(last.weight)
    torch.nn.init.zeros_(last.bias)
    with torch.no_grad():
        bias = last.bias.view(CHUNK, ACTION_DIM + KEYFRAMES + 1)
        bias[:, ACTION_DIM + anchor] = 60.0
        bias[:, DOF] = gripper
    return head


def test_all_weight_on_a_keyframe_moves_the_joints_exactly_to_it():
    features = torch.randn(4, IN_DIM)
    out = _head_choosing(anchor=1 + 6, gripper=0.3)(features).view(4, CHUNK, ACTION_DIM)
    state = features[:, :DOF]
    push_start = features[:, -KEYFRAMES * DOF :].view(4, KEYFRAMES, DOF)[:, 6]
    radians = (push_start - state) * 2.0  # normalised joints to radians (state std 2)
    expected = (radians - 0.1) / 0.5  # radians to normalised deltas
    for k in range(CHUNK):
        torch.testing.assert_close(out[:, k, :DOF], expected, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(out[..., DOF], torch.full((4, CHUNK), 0.3))


def test_all_weight_on_staying_predicts_no_motion():
    out = _head_choosing(anchor=0)(torch.randn(2, IN_DIM)).view(2, CHUNK, ACTION_DIM)
    torch.testing.assert_close(out[..., :DOF], torch.full((2, CHUNK, DOF), -0.1 / 0.5))


def test_the_anchors_need_keyframes_and_delta_actions():
    from lang2policy.vla.model.config import VLAConfig

    with pytest.raises(ConfigError, match="it needs keyframes"):
        VLAConfig(head_reads="scene", scene_latch=True, keyframe_anchors=True)
    head = KeyframeAnchoredHead(IN_DIM, [16], CHUNK, ACTION_DIM, KEYFRAMES, DOF)
    with pytest.raises(ConfigError, match="delta"):
        head.use_statistics(_statistics(mode="absolute"))
    with pytest.raises(ConfigError, match="dof"):
        KeyframeAnchoredHead(IN_DIM, [16], CHUNK, ACTION_DIM, KEYFRAMES, ACTION_DIM)


def test_an_anchored_network_trains_saves_and_loads_with_its_normalisers_units(tmp_path):
    from lang2policy.vla.model.checkpoint import load_model_dir
    from lang2policy.vla.policy.runtime import VLAPolicy
    from lang2policy.vla.spec.schema import ENV_KEY
    from lang2policy.vla.train.augment import AugmentConfig
    from lang2policy.vla.train.loop import OptimConfig
    from lang2policy.vla.train.run import TrainSettings, train_vla
    from lang2policy.vla.train.synthetic import hash_encoder, synthetic_frames, tiny_config

    data = synthetic_frames(episodes=6, length=10, environment=True)
    rng = np.random.default_rng(0)
    scene = np.zeros((len(data.state), 8), np.float32)
    for episode in data.episodes:
        block = [rng.uniform(0.15, 0.25), rng.uniform(-0.1, 0.1), 0.012]
        scene[episode["from"] : episode["to"]] = [*block, block[0], block[1] + 0.07, 0.012, 1, 0]
        episode["family"] = "push"
    data.environment = scene
    data.stats[ENV_KEY] = {"mean": scene.mean(0), "std": scene.std(0) + 1e-3}
    config = tiny_config(
        head_reads="scene", scene_latch=True, keyframes=True, keyframe_anchors=True
    )
    run = TrainSettings(
        steps=6, batch_size=8, device="cpu", progress=False, log_every=3, val_every=3,
        checkpoint_every=6, augment=AugmentConfig(shift=0), model=config,
        optim=OptimConfig(lr=3e-3, warmup_steps=2, scene_forcing=1.0, motor_batch=16,
                          motor_steps=40),
    )  # fmt: skip
    train_vla(data, tmp_path, run, encoder=hash_encoder(8))

    loaded = load_model_dir(tmp_path)
    head = loaded.model.head
    assert isinstance(head, KeyframeAnchoredHead)
    np.testing.assert_allclose(head.state_std.numpy(), loaded.normalizer.state_std[:DOF])
    np.testing.assert_allclose(
        head.action_std.numpy(), loaded.normalizer.action_std[:, :DOF], rtol=1e-6
    )
    policy = VLAPolicy.load(tmp_path, encoder=hash_encoder(8))
    images = {c: data.images[c][0] for c in ("front", "wrist")}
    chunk = policy.act_chunk(images, data.state[0], data.tasks[0])
    assert np.all(np.isfinite(chunk))
