"""``lang2policy train rl --family F --out DIR`` (and ``train distill``) train the recipe of
F's shipped policy: the config they build equals the one in the shipped ``policy.json``, field
by field, so a default that drifts from a shipped recipe fails here."""

from __future__ import annotations

import re
from dataclasses import asdict
from pathlib import Path

import pytest

from lang2policy.cli import main
from lang2policy.paths import share_dir
from lang2policy.rl.policy_file import load_policy
from lang2policy.rl.recipes import DISTILL, PPO, distill_config, ppo_config

MODELS = share_dir() / "models"
# settings removed since a shipped run, with the value it ran with (which left them out)
RETIRED = {"log_std": None}
# settings a shipped run's record predates, with the value it ran with
UNRECORDED = {"expert": "scripted", "init": ""}
MOST_OPTIONS = 15


def shipped_config(directory: Path) -> dict:
    if not (directory / "policy.json").is_file():
        pytest.skip(f"no shipped policy at {directory}")
    return load_policy(directory).summary["config"]


def same(built: dict, shipped: dict, directory: Path) -> None:
    for name, value in shipped.items():
        if name in RETIRED:
            assert value == RETIRED[name], (directory, name)
        elif name == "init":
            assert Path(built[name]).resolve() == (share_dir() / value).resolve(), directory
        else:
            assert built[name] == value, f"{directory.name}: the default {name} is not shipped"
    for name in set(built) - set(shipped):
        assert built[name] == UNRECORDED[name], (directory, name)


@pytest.mark.parametrize("family", sorted(PPO))
def test_train_rl_with_no_flags_builds_the_shipped_ppo_config(family):
    directory = MODELS / f"rl-{family}-so101"
    same(asdict(ppo_config(family)), shipped_config(directory), directory)


@pytest.mark.parametrize("family", sorted(DISTILL))
def test_train_distill_with_no_flags_builds_the_shipped_config(family):
    directory = MODELS / f"rl-{family}-distilled-so101"
    same(asdict(distill_config(family)), shipped_config(directory), directory)


def test_every_shipped_policy_has_its_recipe():
    for path in MODELS.glob("rl-*-so101"):
        family = path.name.removeprefix("rl-").removesuffix("-so101")
        if family.endswith("-distilled"):
            assert family.removesuffix("-distilled") in DISTILL, path
        else:
            assert family in PPO, path


def test_options_go_on_top_and_a_family_without_a_recipe_keeps_the_defaults():
    assert ppo_config("reach", steps=5, hidden=None).steps == 5
    place = ppo_config("place")
    assert (place.steps, place.hidden, place.init, place.learning_rate) == (1_000_000, 64, "", 3e-4)
    assert distill_config("lift", hidden=32).hidden == 32


@pytest.mark.parametrize("kind", ["rl", "distill"])
def test_help_lists_at_most_15_options(kind, capsys):
    with pytest.raises(SystemExit):
        main(["train", kind, "--help"])
    options = set(re.findall(r"^  (--[a-z][a-z0-9-]*)", capsys.readouterr().out, re.M))
    assert "--family" in options and len(options) <= MOST_OPTIONS, sorted(options)
