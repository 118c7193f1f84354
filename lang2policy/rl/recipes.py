"""The recipes the shipped RL policies were trained with, per task family: ``train rl`` and
``train distill`` take their defaults from here, so that ``lang2policy train rl --family F
--out DIR`` trains the shipped PPO policy of F again (its ``README.md`` under ``models/`` has
the command and the commit), and ``train distill --family F --out DIR`` the distilled one.
A family with no shipped policy of a kind trains with ``TrainConfig``'s or ``DistillConfig``'s
own defaults; options given on the command line go on top.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lang2policy.rl.dagger import DistillConfig
from lang2policy.rl.train import TrainConfig

PPO: dict[str, dict[str, Any]] = {
    "reach": {"steps": 500_000},  # models/rl-reach-so101
    "move_slowly": {"steps": 700_000},  # models/rl-move_slowly-so101
    # models/rl-lift-so101: PPO from scratch never lifts; fine-tuning the distilled policy
    # does (its hidden width, 128, comes with it)
    "lift": {"steps": 200_000, "init": "models/rl-lift-distilled-so101", "learning_rate": 1e-4},
}
DISTILL: dict[str, dict[str, Any]] = {
    "lift": {"hidden": 128},  # models/rl-lift-distilled-so101
    "place": {"iterations": 20, "hidden": 128},  # models/rl-place-distilled-so101
}


def ppo_config(family: str, **given: Any) -> TrainConfig:
    """What ``train rl --family FAMILY`` trains: the family's recipe over ``TrainConfig``'s
    defaults, the values ``given`` (those not None) on top. A policy to start from (``init``)
    gives the hidden width when none is given."""
    values = {**PPO.get(family, {}), **_chosen(given)}
    if values.get("init"):
        values["init"] = located(values["init"])
        values.setdefault("hidden", hidden_of(values["init"]))
    return TrainConfig(family=family, **values)


def distill_config(family: str, **given: Any) -> DistillConfig:
    """What ``train distill --family FAMILY`` runs: the family's recipe over
    ``DistillConfig``'s defaults, the values ``given`` (those not None) on top."""
    return DistillConfig(family=family, **{**DISTILL.get(family, {}), **_chosen(given)})


def located(directory: str | Path) -> str:
    """A policy directory as given when it exists from here, else under the data directory
    (``models/...`` of a ROS 2 install)."""
    from lang2policy.paths import share_dir

    path = Path(directory)
    if path.exists() or path.is_absolute():
        return str(path)
    shared = share_dir() / path
    return str(shared if shared.exists() else path)


def hidden_of(directory: str | Path) -> int:
    """The width of the first hidden layer of the policy in ``directory``."""
    from lang2policy.rl.policy_file import load_policy

    return int(load_policy(directory).weights[0].shape[0])


def _chosen(given: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in given.items() if value is not None}
