"""The VLA network, its config, normalisation, augmentation and model directory (issue 17)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from lang2policy.errors import ConfigError
from lang2policy.vla.model.checkpoint import (
    CONFIG_FILE,
    WEIGHTS_FILE,
    load_model_dir,
    save_model_dir,
)
from lang2policy.vla.model.network import (
    SpatialSoftmax,
    VLAConfig,
    VLANet,
    example_inputs,
    parameter_count,
)
from lang2policy.vla.model.normalize import Normalizer, images_to_float
from lang2policy.vla.spec.schema import ACTION_KEY, STATE_KEY
from lang2policy.vla.train.augment import AugmentConfig, augment, color_jitter, random_shift
from lang2policy.vla.train.synthetic import tiny_config


@pytest.fixture
def normalizer() -> Normalizer:
    rng = np.random.default_rng(0)
    return Normalizer.from_arrays(rng.normal(size=(50, 6)), rng.normal(size=(50, 6)))


def test_default_network_shapes_and_size():
    model = VLANet(VLAConfig())
    outputs = model(*example_inputs(model.config, batch=2))
    assert outputs.shape == (2, 10, 6)
    assert 1_000_000 <= parameter_count(model) <= 2_000_000


def test_tiny_network_runs_on_one_camera():
    config = tiny_config(cameras=("front",), chunk=3)
    outputs = VLANet(config)(*example_inputs(config, batch=5))
    assert outputs.shape == (5, 3, 6)


def test_film_starts_as_the_identity_but_language_still_reaches_the_head():
    torch.manual_seed(0)
    config = tiny_config()
    model = VLANet(config)
    images, state, language = example_inputs(config, batch=1)
    other = model(images, state, torch.randn_like(language))
    assert not torch.allclose(model(images, state, language), other)


def test_config_round_trip_and_strictness():
    config = tiny_config(cameras=("wrist",))
    data = json.loads(json.dumps(config.to_dict()))
    assert VLAConfig.from_dict(data) == config
    with pytest.raises(ConfigError, match=r"unknown VLA config keys \['colour'\]"):
        VLAConfig.from_dict({**data, "colour": 1})
    with pytest.raises(ConfigError, match="divide by groups"):
        VLAConfig(channels=(30, 64), groups=8)
    with pytest.raises(ConfigError, match="distinct"):
        VLAConfig(cameras=("front", "front"))


def test_spatial_softmax_finds_a_peak():
    features = torch.zeros(1, 1, 5, 9)
    features[0, 0, 4, 0] = 50.0  # bottom-left corner
    x, y = SpatialSoftmax()(features)[0].tolist()
    assert x == pytest.approx(-1.0, abs=1e-3)
    assert y == pytest.approx(1.0, abs=1e-3)


def test_save_load_round_trip_gives_identical_outputs(tmp_path, normalizer):
    model = VLANet(tiny_config()).eval()
    save_model_dir(tmp_path, model, normalizer)
    loaded = load_model_dir(tmp_path)
    inputs = example_inputs(model.config, batch=3)
    with torch.inference_mode():
        assert torch.equal(model(*inputs), loaded.model(*inputs))
    assert loaded.config == model.config
    np.testing.assert_array_equal(loaded.normalizer.action_std, normalizer.action_std)


def test_default_model_file_is_small(tmp_path, normalizer):
    save_model_dir(tmp_path, VLANet(VLAConfig()), normalizer)
    assert (tmp_path / WEIGHTS_FILE).stat().st_size < 10e6


def test_load_reports_missing_files_and_mismatched_weights(tmp_path, normalizer):
    with pytest.raises(ConfigError, match=r"missing \['config\.json', 'model\.safetensors'"):
        load_model_dir(tmp_path)
    save_model_dir(tmp_path, VLANet(tiny_config()), normalizer)
    bigger = tiny_config(head_dim=128).to_dict()
    (tmp_path / CONFIG_FILE).write_text(json.dumps(bigger), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"do not fit its config\.json"):
        load_model_dir(tmp_path)


def test_normalisation_round_trip_numpy_torch_and_file(tmp_path, normalizer):
    action = np.random.default_rng(1).normal(size=(4, 10, 6)).astype(np.float32)
    normalised = normalizer.normalize_action(action)
    np.testing.assert_allclose(normalizer.denormalize_action(normalised), action, atol=1e-5)
    as_tensor = normalizer.normalize_action(torch.from_numpy(action))
    np.testing.assert_allclose(as_tensor.numpy(), normalised, atol=1e-6)
    normalizer.save(tmp_path / "n.json")
    again = Normalizer.load(tmp_path / "n.json")
    state = action[0, 0]
    np.testing.assert_allclose(again.normalize_state(state), normalizer.normalize_state(state))


def test_normaliser_files_keep_the_action_mode_and_scene_statistics(tmp_path, normalizer):
    legacy = {key: value for key, value in normalizer.to_dict().items() if key != "action_mode"}
    (tmp_path / "old.json").write_text(json.dumps(legacy))
    assert Normalizer.load(tmp_path / "old.json").action_mode == "absolute"
    state = np.zeros((20, 6), np.float32)
    action = np.cumsum(np.ones((20, 6), np.float32), axis=0)
    delta = normalizer.with_delta_actions(state, action, np.arange(16), np.full(20, 20), chunk=3)
    delta = dataclasses.replace(delta, env_mean=np.ones(2, np.float32), env_std=np.ones(2))
    delta.save(tmp_path / "new.json")
    again = Normalizer.load(tmp_path / "new.json")
    assert again.action_mode == "delta" and again.action_mean.shape == (3, 6)
    np.testing.assert_allclose(again.normalize_environment(np.array([3.0, 1.0])), [2.0, 0.0])
    again.check_dims(6, 6, chunk=3)
    with pytest.raises(ConfigError, match=r"do not match .* chunk=10 \(delta actions\)"):
        again.check_dims(6, 6, chunk=10)


def test_the_auxiliary_head_feeds_the_action_head():
    net = VLANet(tiny_config(aux_dim=5))
    images, state, language = example_inputs(net.config, batch=3)
    actions, aux = net(images, state, language, with_aux=True)
    assert actions.shape == (3, 4, 6) and aux.shape == (3, 5)
    assert torch.equal(net(images, state, language), actions)
    assert VLANet(tiny_config())(images, state, language, with_aux=True)[1] is None
    # scene forcing: the rows marked read the given scene state, the others the prediction
    given = torch.full((3, 5), 3.0)
    rows = torch.tensor([[True], [False], [True]])
    forced = net(images, state, language, aux_input=given, aux_mask=rows)
    assert torch.allclose(forced[1], actions[1])
    assert not torch.allclose(forced[0], actions[0]) and not torch.allclose(forced[2], actions[2])
    with pytest.raises(ConfigError, match="aux_dim"):
        tiny_config(aux_dim=-1)


def test_normaliser_clamps_the_std_of_a_still_joint():
    stats = {
        STATE_KEY: {"mean": np.zeros(6), "std": np.array([1, 1, 1, 1, 0.0, 1])},
        ACTION_KEY: {"mean": np.zeros(6), "std": np.ones(6)},
    }
    normalizer = Normalizer.from_stats(stats)
    assert normalizer.state_std[4] == pytest.approx(0.01)
    with pytest.raises(ConfigError, match=r"lack \['action'\]"):
        Normalizer.from_stats({STATE_KEY: stats[STATE_KEY]})


def test_images_to_float_moves_channels_first():
    images = torch.full((2, 4, 4, 3), 255, dtype=torch.uint8)
    images[..., 1] = 0
    floats = images_to_float(images)
    assert floats.shape == (2, 3, 4, 4)
    assert floats[:, 0].eq(1).all() and floats[:, 1].eq(0).all()


def test_random_shift_is_a_crop_of_the_replicate_padded_image():
    generator = torch.Generator().manual_seed(0)
    images = torch.rand(6, 3, 12, 12)
    shifted = random_shift(images, 2, generator)
    assert shifted.shape == images.shape
    padded = torch.nn.functional.pad(images, (2, 2, 2, 2), mode="replicate")
    for sample in range(6):
        crops = [padded[sample, :, r : r + 12, c : c + 12] for r in range(5) for c in range(5)]
        assert any(torch.equal(shifted[sample], crop) for crop in crops)
    assert random_shift(images, 0, generator) is images


def test_augmentation_keeps_shapes_and_range_and_can_be_off():
    generator = torch.Generator().manual_seed(0)
    images = torch.rand(2, 2, 3, 16, 16)
    jittered = color_jitter(images[0], 0.3, 0.3, generator)
    assert jittered.min() >= 0 and jittered.max() <= 1
    full = augment(images, AugmentConfig(shift=4, brightness=0.2, contrast=0.2), generator)
    assert full.shape == images.shape
    assert augment(images, AugmentConfig(shift=0), generator) is images


def test_a_bottleneck_head_reads_only_the_state_the_words_and_the_scene():
    net = VLANet(tiny_config(aux_dim=5, head_reads="scene"))
    images, state, language = example_inputs(net.config, batch=2)
    actions, aux = net(images, state, language, with_aux=True)
    # the images reach the actions only through the scene prediction: fed that prediction as
    # the scene state, the head answers the same for other images
    other = torch.rand_like(images)
    assert torch.allclose(net(other, state, language, aux_input=aux), actions, atol=1e-6)
    assert not torch.allclose(net(other, state, language), actions)
    # motor rows: the head on frames known by their scene state alone, appended to the batch
    rows = (state, language, aux)
    both = net(images, state, language, aux_input=aux, motor_rows=rows)
    assert both.shape == (4, 4, 6) and torch.allclose(both[2:], actions, atol=1e-6)
    with pytest.raises(ConfigError, match="needs the scene state"):
        VLANet(tiny_config(head_reads="scene"))
    with pytest.raises(ConfigError, match="head_reads must be one of"):
        tiny_config(aux_dim=5, head_reads="pixels")
    with pytest.raises(ConfigError, match="motor rows need"):
        VLANet(tiny_config(aux_dim=5)).motor_features(state, language, aux)


def test_fine_keypoints_add_an_earlier_stage_and_keep_old_weights_loadable():
    plain, fine = VLANet(tiny_config()), VLANet(tiny_config(fine_keypoints=(1,)))
    assert fine.encoder.out_dim == plain.encoder.out_dim + 2 * 8  # stage 1 has 8 channels
    images, state, language = example_inputs(fine.config, batch=2)
    assert fine(images, state, language).shape == (2, 4, 6)
    # the last stage's keypoints keep their name: checkpoints made before load unchanged
    assert "encoder.keypoints.log_temperature" in fine.state_dict()
    assert set(plain.state_dict()) < set(fine.state_dict())
    for bad in ((3,), (1, 1), (-1,)):
        with pytest.raises(ConfigError, match="fine_keypoints must be distinct conv stages"):
            tiny_config(fine_keypoints=bad)
    config = tiny_config(fine_keypoints=(0, 1))
    assert VLAConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
