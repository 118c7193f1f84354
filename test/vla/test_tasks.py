"""The VLA's task families, phrasings and held-out splits (issue 17)."""

from __future__ import annotations

import numpy as np
import pytest

from lang2policy.errors import ConfigError
from lang2policy.scene.objects import COLORS
from lang2policy.vla.spec.tasks import (
    FAMILIES,
    PHRASINGS,
    SIDES,
    Task,
    held_out,
    sample_task,
    seen_phrasings,
    unseen_phrasings,
)


def test_every_phrasing_names_the_tasks_objects():
    tasks = [Task("pick_place", "red block", "blue bowl"), Task("push", "red block", side="top"),
             Task("lift", "red block")]  # fmt: skip
    for task in tasks:
        for number in range(len(PHRASINGS[task.family])):
            text = task.instruction(number)
            assert "red block" in text and "{" not in text, text
            assert task.family != "pick_place" or "blue bowl" in text


def test_held_out_combinations_are_a_fixed_fifth_and_every_colour_is_still_seen():
    colours = sorted(COLORS)
    pairs = [Task("pick_place", f"{a} block", f"{b} bowl") for a in colours for b in colours]
    unseen = [t for t in pairs if not t.seen_combination]
    assert 10 <= len(unseen) <= 30
    assert held_out(unseen[0].combination)  # a pure function of the names
    seen_blocks = {t.block for t in pairs if t.seen_combination}
    assert seen_blocks == {f"{c} block" for c in colours}


@pytest.mark.parametrize("family", FAMILIES)
def test_sampled_tasks_respect_the_split(family):
    rng = np.random.default_rng(3)
    for seen in (True, False):
        for _ in range(20):
            task = sample_task(rng, family, seen)
            assert task.seen_combination == seen and task.family == family


def test_unseen_phrasings_are_never_among_the_seen_ones():
    for family in FAMILIES:
        assert set(seen_phrasings(family)).isdisjoint(unseen_phrasings(family))
        assert len(unseen_phrasings(family)) >= 2


def test_bad_tasks_are_refused_with_what_is_allowed():
    with pytest.raises(ConfigError, match="families"):
        Task("stack", "red block")
    with pytest.raises(ConfigError, match="bowl"):
        Task("lift", "red block", "blue bowl")
    with pytest.raises(ConfigError, match=str(SIDES[0])):
        Task("push", "red block", side="up")
    with pytest.raises(ConfigError, match="phrasings"):
        Task("lift", "red block").instruction(99)
