"""``lang2policy train vla --dataset D --out M`` trains the shipped model's recipe: the settings
it builds equal ``models/vla-so101-tiny``'s ``config.json`` (the network) and its
``base_train_summary.json`` (the training of the base the shipped weights were fine-tuned
from), field by field, so a default that drifts from the shipped recipe fails here; the
reproduce script's fine-tuning builds the settings of ``train_summary.json`` (the fine-tuning
under realism that made the shipped weights); ``train vla --help`` lists at most 15 options."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import asdict
from typing import Any

import pytest

from lang2policy.cli import build_parser, main
from lang2policy.commands import train as train_command
from lang2policy.paths import share_dir
from lang2policy.vla.train import settings as train_settings

SHIPPED = share_dir() / "models" / "vla-so101-tiny"
# what the dataset decides (``train.prepare.model_config`` fills them in), not the recipe
DATASET_DERIVED = {"image_size", "state_dim", "action_dim", "aux_dim", "fps", "image_fit", "units"}
# what the machine decides: the shipped run had 2 threads of a 2-core CPU, and a terminal
MACHINE = {"threads", "device", "progress"}
# settings removed since the shipped run, with the value it ran with (which turned them off)
RETIRED = {"view_repeat": 1, "optim.scene_forcing_from": 0}
# settings added since the shipped run, with the value that leaves them off (as it ran)
ADDED = {"stop_at": None}
MOST_OPTIONS = 15


def built(*words: str) -> Any:
    """The ``TrainSettings`` of ``train vla --dataset D --out M WORDS``, without training."""
    args = build_parser().parse_args(["train", "vla", "--dataset", "D", "--out", "M", *words])
    return train_command.settings_from_args(args)


def flat(settings: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"optim": {"lr": ..}}`` as ``{"optim.lr": ..}``, tuples as the lists JSON has."""
    out: dict[str, Any] = {}
    for name, value in settings.items():
        if isinstance(value, dict):
            out.update(flat(value, f"{prefix}{name}."))
        else:
            out[f"{prefix}{name}"] = list(value) if isinstance(value, tuple) else value
    return out


def test_no_flags_build_the_shipped_network():
    shipped = json.loads((SHIPPED / "config.json").read_text())
    network = built().model.to_dict()
    checked = 0
    for name, value in shipped.items():
        if name not in DATASET_DERIVED:
            assert network[name] == value, f"train vla's default {name} is not the shipped one"
            checked += 1
    assert set(network) - set(shipped) <= DATASET_DERIVED  # nothing the card does not say
    assert checked >= 15


def same_as_run(settings: dict[str, Any], ran: dict[str, Any]) -> int:
    """Assert every setting of a recorded run (``ran``) but the machine's and the dataset's is
    ``settings``'s; how many were compared."""
    checked = 0
    for name, value in ran.items():
        top, _, field = name.partition(".")
        if top in MACHINE or (top == "model" and field in DATASET_DERIVED):
            continue
        if name in RETIRED:
            assert value == RETIRED[name], name
            continue
        assert settings[name] == value, f"{name}: {settings[name]!r}, the run had {value!r}"
        checked += 1
    return checked


def reproduce_phase(name: str) -> list[str]:
    """The command words of ``scripts/reproduce_vla.sh``'s phase ``name``."""
    script = (share_dir() / "scripts" / "reproduce_vla.sh").read_text()
    phase = re.search(rf'^phase "{name}" (.*?)(?<!\\)$', script, re.M | re.S)
    assert phase, f"reproduce_vla.sh has no phase {name!r}"
    return shlex.split(phase.group(1).replace("\\\n", " "))


def test_no_flags_train_as_the_shipped_checkpoints_base_was_trained():
    ran = flat(json.loads((SHIPPED / "base_train_summary.json").read_text())["settings"])
    settings = flat(asdict(built()))
    checked = same_as_run(settings, ran)
    derived = {f"model.{name}" for name in DATASET_DERIVED}
    assert all(settings[name] == value for name, value in ADDED.items())
    assert set(settings) - set(ran) <= derived | set(ADDED)  # every setting is the shipped run's
    assert checked >= 40


def test_the_reproduce_script_trains_with_the_defaults_and_its_threads():
    words = reproduce_phase("training")
    assert words[1:3] == ["train", "vla"], words
    assert {word for word in words if word.startswith("--")} == {"--dataset", "--out", "--threads"}


def test_the_reproduce_scripts_fine_tuning_is_the_shipped_weights_run():
    """The fine-tuning phase's flags, on top of the recipe, build the settings the shipped
    weights' run recorded (its ``train_summary.json``), the model it starts from aside."""
    summary = json.loads((SHIPPED / "train_summary.json").read_text())
    words = reproduce_phase("fine-tuning")
    assert words[1:3] == ["train", "vla"], words
    flags = [word if not word.startswith("$") else "X" for word in words[3:]]
    args = build_parser().parse_args(["train", "vla", *flags])
    settings = flat(asdict(train_command.settings_from_args(args)))
    ran = flat(summary["settings"])
    ran.pop("finetune")  # a path of the run's machine
    assert same_as_run(settings, ran) >= 40
    assert summary["finetuned_from"] and settings["steps"] == summary["steps"] == 2000
    recorded = reproduce_phase("realism data")
    assert recorded[recorded.index("--realism") + 1] == "mild"


def test_help_lists_at_most_15_options(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["train", "vla", "--help"])
    assert exit_.value.code == 0
    options = set(re.findall(r"^  (--[a-z][a-z0-9-]*)", capsys.readouterr().out, re.M))
    assert {"--dataset", "--out", "--design", "--resume"} <= options
    assert len(options) <= MOST_OPTIONS, sorted(options)
    assert set(train_command.DESIGNS) == set(train_settings.DESIGNS)  # --design's choices


def test_the_options_left_go_on_top_of_the_recipe():
    given = built("--steps", "7", "--lr", "2e-3", "--batch-size", "8", "--seed", "3",
                  "--threads", "2", "--device", "cpu", "--cameras", "front,wrist")  # fmt: skip
    assert (given.steps, given.optim.lr, given.batch_size, given.seed) == (7, 2e-3, 8, 3)
    assert (given.threads, given.device, given.model.cameras) == (2, "cpu", ("front", "wrist"))
    assert given.optim.motor_steps == 10_000 and given.model.keyframe_anchors  # the rest kept
    plain = built("--design", "plain")
    assert plain.model.head_reads == "features" and not plain.model.grounding
    assert (plain.steps, plain.optim.lr, plain.augment.shift) == (10_000, 3e-4, 4)


def test_finetuning_is_a_short_run_that_keeps_a_grounding_models_images_still():
    tuned = built("--finetune", str(SHIPPED))
    assert (tuned.steps, tuned.optim.lr, tuned.optim.warmup_steps) == (300, 1e-4, 30)
    assert tuned.optim.ema_decay == 0.0 and tuned.finetune == str(SHIPPED)
    assert tuned.augment.shift == 0  # the shipped model grounds image positions
    assert built("--design", "plain", "--finetune", str(SHIPPED)).augment.shift == 0
    assert built("--design", "plain", "--finetune", "no/such/model").augment.shift == 4
    assert built("--finetune", str(SHIPPED), "--steps", "50").steps == 50
