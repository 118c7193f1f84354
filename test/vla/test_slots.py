"""The instruction's slots (issue 17): the block and bowl colour and the side, as one-hots
beside the MiniLM embedding, so the policy is told outright which object the words name."""

from __future__ import annotations

import numpy as np
import pytest

from lang2policy.errors import ConfigError
from lang2policy.vla.model.language import (
    MINILM,
    MINILM_DIM,
    MINILM_SLOTS,
    encoder_for,
    language_dim,
)
from lang2policy.vla.model.network import VLAConfig
from lang2policy.vla.model.slots import COLOUR_NAMES, SLOT_DIM, slot_vector, slot_vectors
from lang2policy.vla.spec.tasks import FAMILIES, PHRASINGS, SIDES, Task


def named(vector: np.ndarray) -> tuple[str | None, str | None, str | None]:
    colours = len(COLOUR_NAMES)

    def pick(part: np.ndarray, names) -> str | None:
        assert part.sum() in (0.0, 1.0)
        return names[int(part.argmax())] if part.any() else None

    return (
        pick(vector[:colours], COLOUR_NAMES),
        pick(vector[colours : 2 * colours], COLOUR_NAMES),
        pick(vector[2 * colours :], SIDES),
    )


def test_every_phrasing_of_every_family_gives_its_slots():
    tasks = {
        "pick_place": Task("pick_place", "cyan block", "gray bowl"),
        "push": Task("push", "orange block", side="bottom"),
        "lift": Task("lift", "pink block"),
    }
    expected = {
        "pick_place": ("cyan", "gray", None),
        "push": ("orange", None, "bottom"),
        "lift": ("pink", None, None),
    }
    for family in FAMILIES:
        for phrasing in range(len(PHRASINGS[family])):
            text = tasks[family].instruction(phrasing)
            assert named(slot_vector(text)) == expected[family], text


def test_case_and_unknown_words():
    assert named(slot_vector("Put the RED block in the Blue Bowl")) == ("red", "blue", None)
    assert named(slot_vector("dance a little")) == (None, None, None)
    assert named(slot_vector("lift the red bowl")) == (None, "red", None)  # no block named
    assert slot_vectors([]).shape == (0, SLOT_DIM)


def test_the_slots_encoder_appends_the_slots_to_minilm():
    texts = ["lift the red block", "lift the orange block"]
    vectors = encoder_for(MINILM_SLOTS)(texts)
    assert vectors.shape == (2, MINILM_DIM + SLOT_DIM) == (2, language_dim(MINILM_SLOTS))
    np.testing.assert_allclose(vectors[:, :MINILM_DIM], encoder_for(MINILM)(texts), atol=1e-5)
    np.testing.assert_array_equal(vectors[:, MINILM_DIM:], slot_vectors(texts))
    with pytest.raises(ConfigError, match=f"embeddings are {MINILM_DIM + SLOT_DIM}-d, not 384"):
        VLAConfig(language_model=MINILM_SLOTS, language_dim=MINILM_DIM)
    with pytest.raises(ConfigError, match="unknown language encoder"):
        encoder_for("clip")
